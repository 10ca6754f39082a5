#!/usr/bin/env bash
# The GPU figures of RESULTS.md ("On a GPU"), in one run of about 6 minutes on one H100 or H200:
# XLM-R XL's shape (3.5 B parameters, random weights) trained by translate-train and X-Mixup, under
# DDP and sharded (FSDP2, one process), bf16 autocast with gradient checkpointing, 32 SIB-200
# sentences (or pairs) of at most 128 tokens a step; then the encoder alone at XL's shape.
#
#   bash bench/gpu.sh MODEL_DIR SIB200_DIR [OUT]
#
# MODEL_DIR gives the tokenizer (the default model's, ~/.cache/minxlt/multilingual-e5-small, is
# XLM-R's); SIB200_DIR is SIB-200's data folder. Each benchmark's table goes to OUT (runs/gpu).
# Each trainee holds its own XL with AdamW (56 GB): the two methods side by side need about 120 GB
# (an H200); on an 80 GB GPU give METHODS=translate-train, then METHODS=xmixup.
set -euo pipefail
model=${1:?give the folder of the model whose tokenizer to use}
data=${2:?give the SIB-200 data folder}
out=${3:-runs/gpu}
methods=${METHODS:-translate-train,xmixup}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$out/gpu.txt"
common=(--device cuda --shapes xl --methods "$methods" --no-baseline --amp bf16 --gradient-checkpointing --batch-sizes 32
        --max-length 128 --steps "${STEPS:-5}" --warmup 2 --task sib200 --data "$data" --model "$model")
python3 -m bench.train_step "${common[@]}" 2>&1 | tee "$out/train_step_ddp.md"
python3 -m bench.train_step "${common[@]}" --shard 2>&1 | tee "$out/train_step_shard.md"
python3 -m bench.encoder --device cuda --amp bf16 --shapes xl --vocab 250002 --batch 32 --seq 128 2>&1 | tee "$out/encoder.md"
