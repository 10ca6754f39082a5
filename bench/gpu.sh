#!/usr/bin/env bash
# The GPU figures of RESULTS.md ("On a GPU"), in one run of about 17 minutes on one H200 (most of it
# compiling: about a minute per method and shape, as measured there; METHODS= takes fewer), bf16
# autocast, XLM-R's shapes with random weights, SIB-200 texts, each configuration eager (--no-compile)
# and compiled (--compile, as train.py compiles on CUDA), transformers' classifier beside it:
#   1. the real loop: train.py at base shapes, 200 steps each way, its ms/step read from log.jsonl;
#   2. base, batch 32 (texts of at most 128 tokens): every method that trains on texts or pairs,
#      with the loop's ms/step beside, and translate-train with the model alone compiled, as
#      --compile compiled before;
#   3. large, batch 32 (the same texts): translate-train;
#   4. base and large at 256 x 128 (--fixed-length: 128 tokens a text, no padding): translate-train,
#      MFU without gradient checkpointing's recomputation.
# With AUTOTUNE=1, then 4. again compiled with --compile-mode max-autotune-no-cudagraphs (Inductor tries
# each matmul's kernels: minutes more), to see whether it beats CUDA graphs at large batches.
# With XL=1, then XL's shape (3.5 B parameters) under DDP and sharded, and the encoder alone at XL's
# shape (about 6 minutes more; 120 GB: an H200).
#
#   bash bench/gpu.sh MODEL_DIR SIB200_DIR [OUT]
#
# MODEL_DIR gives the tokenizer (the default model's, ~/.cache/minxlt/multilingual-e5-small, is
# XLM-R's); SIB200_DIR is SIB-200's data folder. Each benchmark's table goes to OUT (runs/gpu).
set -euo pipefail
model=${1:?give the folder of the model whose tokenizer to use}
data=${2:?give the SIB-200 data folder}
out=${3:-runs/gpu}
methods=${METHODS:-translate-train,xeroalign,filter,xmixup,contrastive}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$out/gpu.txt"
common=(--device cuda --amp bf16 --max-length 128 --steps "${STEPS:-10}" --warmup 3 --task sib200 --data "$data"
        --model "$model")
python3 -c "import sys; from bench.train_step import shaped_model; shaped_model(sys.argv[1], 'base', sys.argv[2])" \
    "$model" "$out/base"
loop=(train.py --model "$out/base" --task sib200 --data "$data" --method translate-train
      --target-langs deu_Latn,fra_Latn,zho_Hans --max-steps 200 --log-every 10 --eval-every 100 --no-test --no-alignment
      --device cuda --amp bf16 --overwrite)
for mode in no-compile compile; do  # 1. the real loop
    python3 "${loop[@]}" "--$mode" --out "$out/loop-$mode" 2>"$out/loop-$mode.log"
done
python3 -m bench.train_step "${common[@]}" --shapes base --methods translate-train --batch-sizes 32 --no-compile \
    --compile-model 2>&1 | tee "$out/base_32--compile-model.md"  # 2. how --compile compiled before (the model alone)
for mode in --no-compile --compile; do
    python3 -m bench.train_step "${common[@]}" --shapes base --methods "$methods" --batch-sizes 32 "$mode" \
        --logs "$out/loop-no-compile,$out/loop-compile" 2>&1 | tee "$out/base_32$mode.md"     # 2.
    python3 -m bench.train_step "${common[@]}" --shapes large --methods translate-train --batch-sizes 32 "$mode" 2>&1 \
        | tee "$out/large_32$mode.md"                                                       # 3.
    for shape in base large; do                                                               # 4.
        python3 -m bench.train_step "${common[@]}" --shapes "$shape" --methods translate-train --batch-sizes 256 \
            --fixed-length "$mode" 2>&1 | tee "$out/${shape}_256x128$mode.md"
    done
done
if [ "${AUTOTUNE:-0}" = 1 ]; then  # 4. with autotuned kernels and no CUDA graphs
    for shape in base large; do
        python3 -m bench.train_step "${common[@]}" --shapes "$shape" --methods translate-train --batch-sizes 256 \
            --fixed-length --compile --compile-mode max-autotune-no-cudagraphs 2>&1 \
            | tee "$out/${shape}_256x128--max-autotune.md"
    done
fi
if [ "${XL:-0}" = 1 ]; then  # each trainee holds its own XL and AdamW (56 GB); on 80 GB: XL_METHODS=translate-train
    xl=(--device cuda --shapes xl --methods "${XL_METHODS:-translate-train,xmixup}" --no-baseline --amp bf16
        --gradient-checkpointing --batch-sizes 32 --max-length 128 --steps "${STEPS:-5}" --warmup 2 --task sib200
        --data "$data" --model "$model" --no-compile)
    python3 -m bench.train_step "${xl[@]}" 2>&1 | tee "$out/train_step_ddp.md"
    python3 -m bench.train_step "${xl[@]}" --shard 2>&1 | tee "$out/train_step_shard.md"
    python3 -m bench.encoder --device cuda --amp bf16 --shapes xl --vocab 250002 --batch 32 --seq 128 2>&1 \
        | tee "$out/encoder.md"
fi
