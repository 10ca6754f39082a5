"""Every method at every task level it trains on, for a few steps on a tiny random model, each run
into a folder of its own: one process and two (DDP), gradient accumulation, a stopped and resumed
run, self-teaching, the ablations, runs by --epochs and co-training. A change that should not alter
what is computed (a refactor) must leave every logged loss and score as it was:

    python -m dev.short_runs runs/before                           # on the code before the change
    python -m dev.short_runs runs/after --model runs/before/model  # after it, on the same model
    python -m dev.compare_logs runs/before runs/after
"""
import argparse
import io
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # the repository, whose train.py and cotrain.py the runs start
COMMON = {"--max-steps": "4", "--batch-size": "8", "--log-every": "1", "--eval-every": "2", "--seed": "0"}  # unless set
# name, processes, flags (cotrain.py's for cotrain-*, else train.py's); {run} is that run's OUT/best, {model} the
# model; the -preset runs are the papers' settings as experiment files give them (X-Mixup's batch of 64; XeroAlign's
# linear head), by --epochs
DEMO = """\
unicoder-demo 1 --task demo --method unicoder --max-steps 5
filter-student-demo 1 --task demo --method filter --teacher {filter-demo}
xmixup-in-attention-demo 1 --task demo --method xmixup --mixup-variant in-attention
xmixup-ablations-demo 1 --task demo --method xmixup --constant-ratio --no-consistency --no-mixup-inference
xmixup-preset-demo 1 --task demo --method xmixup --batch-size 64 --epochs 1 --eval-every 100
xeroalign-preset-demo 1 --task demo --method xeroalign --head linear --batch-size 32 --epochs 1 --eval-every 100
xeroalign-accum-demo 1 --task demo --method xeroalign --grad-accum 2
xeroalign-resumed-demo 1 --task demo --method xeroalign --stop-at 2
contrastive-fewshot-demo 1 --task demo --method contrastive --train-fraction 0.5 --translated 40
xeroalign-ddp-demo 2 --task demo --method xeroalign
contrastive-ddp-demo 2 --task demo --method contrastive
xmixup-ddp-demo 2 --task demo --method xmixup
unicoder-ddp-demo 2 --task demo --method unicoder --max-steps 5
translate-train-ddp-accum-slots 2 --task demo-slots --method translate-train --grad-accum 2
cotrain-demo 1 --task demo --target-langs de,zh --cotrain-iterations 1 --threshold 0.2 --max-steps 2 \
--embedding-model {model}"""
FOLDERS = {"sib200": "sib200", "udpos": "ud_pud", "xsid": "xsid", "xquad": "xquad"}  # --task: its folder in --data


def cases(data):
    """[(name, script, flags, processes)] in the order they run; {data-TASK} in the flags is TASK's folder."""
    each = lambda name, flags, methods: [f"{m}-{name} 1 {flags} --method {m}" for m in methods.split()]
    lines = each("demo", "--task demo", "zero-shot translate-train translate-test xeroalign filter xmixup contrastive")
    lines += DEMO.splitlines() + each("slots", "--task demo-slots", "zero-shot translate-train xeroalign filter")
    lines.append("xmixup-slots 1 --task demo-slots --method xmixup --teacher {zero-shot-slots} --mixup-layer 2")
    if data is not None:
        sib, pos, sid, qa = (f"--task {task} --data {{data-{task}}} --no-alignment" for task in FOLDERS)
        lines += each("sib200", sib, "translate-train contrastive") + each("udpos", pos, "zero-shot xeroalign filter")
        lines += each("xsid", sid, "zero-shot translate-train xeroalign filter")
        lines.append(f"xmixup-xsid 1 {sid} --method xmixup --teacher {{zero-shot-xsid}} --mixup-layer 2")
        qa_runs = each("xquad", qa, "zero-shot translate-train xeroalign filter xmixup")
        qa_runs.append(f"filter-ddp-xquad 2 {qa} --method filter")
        lines += [f"{line} --max-length 128 --doc-stride 32" for line in qa_runs]
    return [(name, "cotrain.py" if name.startswith("cotrain") else "train.py", argv, int(processes))
            for name, processes, *argv in map(str.split, lines)]


def tiny_model(directory):
    """A sentencepiece model trained on the bundled corpus and a 2-layer encoder with random weights."""
    import sentencepiece
    import torch

    from minxlt.tasks import demo as demo_corpus
    from minxlt.text.tokenizer import Tokenizer
    from model import Config, Encoder
    texts = [e.text for split in ("train", "dev", "test") for examples in demo_corpus.build(split).values()
             for e in examples]
    buffer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=buffer, model_type="unigram",
                                             vocab_size=1000, character_coverage=1.0, hard_vocab_limit=False,
                                             minloglevel=2, num_threads=1)
    directory.mkdir(parents=True)
    (directory / "sentencepiece.bpe.model").write_bytes(buffer.getvalue())
    torch.manual_seed(0)
    config = Config(vocab_size=Tokenizer.from_pretrained(directory).vocab_size, hidden_size=32, num_layers=2,
                    num_heads=2, ffn_size=37, max_positions=130)
    Encoder(config).save_pretrained(directory)


def launch(script, argv, processes):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)]
    return [*([sys.executable] if processes == 1 else torchrun), str(HERE / script), *argv]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path, help="the folder that receives a folder per run (and the tiny model, without "
                   "--model)")
    p.add_argument("--model", type=Path, help="the checkpoint every run starts from (default: a tiny one written to "
                   "OUT/model)")
    p.add_argument("--data", type=Path, help="a folder with sib200/, ud_pud/, xsid/ and xquad/ (e.g. ../shared/data); "
                   "without it, the bundled corpus's runs alone")
    p.add_argument("--only", help="run only the runs whose names contain this text")
    args = p.parse_args(argv)
    model = args.model or args.out / "model"
    if args.model is None and not model.exists():
        tiny_model(model)
    env = dict(os.environ, MINXLT_CACHE=str(args.out / "cache"))
    every = cases(args.data)
    names = {"model": str(model), **{name: str(args.out / name / "best") for name, *_ in every},  # what {name} means
             **{f"data-{task}": str((args.data or Path()) / folder) for task, folder in FOLDERS.items()}}
    todo = [c for c in every if not args.only or args.only in c[0]]
    failed = []
    for i, (name, script, argv, processes) in enumerate(todo, 1):
        if any(f"{{{other}}}" in argv for other in failed):  # a run whose model failed
            failed.append(name)
            continue
        argv = [f.format(**names) for f in argv] + ["--model", str(model), "--out", str(args.out / name), "--overwrite"]
        skip = set(argv) | ({"--max-steps"} if "--epochs" in argv else set())  # --epochs replaces --max-steps
        argv += [token for flag, value in COMMON.items() if flag not in skip for token in (flag, value)]
        started = time.time()
        done = subprocess.run(launch(script, argv, processes), capture_output=True, text=True, env=env, cwd=HERE)
        if done.returncode == 0 and "--stop-at" in argv:  # continue the stopped run to the end
            at = argv.index("--stop-at")
            argv = [f for f in argv[:at] + argv[at + 2:] if f != "--overwrite"] + ["--resume"]
            done = subprocess.run(launch(script, argv, processes), capture_output=True, text=True, env=env, cwd=HERE)
        print(f"[{i}/{len(todo)}] {name}: {'ok' if done.returncode == 0 else 'FAILED'} ({time.time() - started:.0f} s)",
              flush=True)
        if done.returncode != 0:
            failed.append(name)
            print("    " + "\n    ".join(done.stderr.strip().splitlines()[-8:]), flush=True)
    print(f"{len(todo) - len(failed)} of {len(todo)} runs done in {args.out}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
