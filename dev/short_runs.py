"""Every method at every task level it trains on, for a few steps on a tiny random model, each run
into a folder of its own: one process and two (DDP), gradient accumulation, a stopped and resumed
run, self-teaching, the ablations, runs by --epochs and co-training. A change that should not alter
what is computed (a refactor) must leave every logged loss and score as it was:

    python -m dev.short_runs runs/before                           # on the code before the change
    python -m dev.short_runs runs/after --model runs/before/model  # after it, on the same model
    python -m dev.compare_logs runs/before runs/after

The tiny model (a sentencepiece model trained on the bundled corpus, a 2-layer encoder with
random weights) is written to OUT/model unless --model names one. Runs on SIB-200, UD PUD, xSID
and XQuAD need --data (a folder holding sib200/, ud_pud/, xsid/ and xquad/); without it only the
bundled corpus's runs are made. Each run is a fresh process, as a user would start it.
"""
import argparse
import io
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # the repository, whose train.py and cotrain.py the runs start
COMMON = {"--max-steps": "4", "--batch-size": "8", "--log-every": "1", "--eval-every": "2", "--seed": "0"}  # unless a run gives its own


def cases(data):
    """(name, script, flags, processes, after): `after` names a run whose OUT/best the flags need
    ({name} in the flags)."""
    demo, slots = ["--task", "demo"], ["--task", "demo-slots"]
    runs = [(f"{method}-demo", "train.py", [*demo, "--method", method], 1, None)
            for method in ("zero-shot", "translate-train", "translate-test", "xeroalign", "filter", "xmixup", "contrastive")]
    runs += [
        ("unicoder-demo", "train.py", [*demo, "--method", "unicoder", "--max-steps", "5"], 1, None),
        ("filter-student-demo", "train.py", [*demo, "--method", "filter", "--teacher", "{filter-demo}"], 1, "filter-demo"),
        ("xmixup-in-attention-demo", "train.py", [*demo, "--method", "xmixup", "--mixup-variant", "in-attention"], 1, None),
        ("xmixup-ablations-demo", "train.py", [*demo, "--method", "xmixup", "--constant-ratio", "--no-consistency",
                                                "--no-mixup-inference"], 1, None),
        # the papers' settings as experiment files give them (X-Mixup's batch of 64; XeroAlign's linear head), by --epochs
        ("xmixup-preset-demo", "train.py", [*demo, "--method", "xmixup", "--batch-size", "64", "--epochs", "1",
                                            "--eval-every", "100"], 1, None),
        ("xeroalign-preset-demo", "train.py", [*demo, "--method", "xeroalign", "--head", "linear", "--batch-size", "32",
                                               "--epochs", "1", "--eval-every", "100"], 1, None),
        ("xeroalign-accum-demo", "train.py", [*demo, "--method", "xeroalign", "--grad-accum", "2"], 1, None),
        ("xeroalign-resumed-demo", "train.py", [*demo, "--method", "xeroalign", "--stop-at", "2"], 1, None),
        ("contrastive-fewshot-demo", "train.py", [*demo, "--method", "contrastive", "--train-fraction", "0.5", "--translated", "40"], 1, None),
        ("xeroalign-ddp-demo", "train.py", [*demo, "--method", "xeroalign"], 2, None),
        ("contrastive-ddp-demo", "train.py", [*demo, "--method", "contrastive"], 2, None),
        ("xmixup-ddp-demo", "train.py", [*demo, "--method", "xmixup"], 2, None),
        ("unicoder-ddp-demo", "train.py", [*demo, "--method", "unicoder", "--max-steps", "5"], 2, None),
        ("translate-train-ddp-accum-slots", "train.py", [*slots, "--method", "translate-train", "--grad-accum", "2"], 2, None),
        ("cotrain-demo", "cotrain.py", [*demo, "--target-langs", "de,zh", "--cotrain-iterations", "1", "--threshold", "0.2",
                                        "--max-steps", "2", "--embedding-model", "{model}"], 1, None),
    ]
    runs += [(f"{method}-slots", "train.py", [*slots, "--method", method], 1, None)
             for method in ("zero-shot", "translate-train", "xeroalign", "filter")]
    runs.append(("xmixup-slots", "train.py", [*slots, "--method", "xmixup", "--teacher", "{zero-shot-slots}", "--mixup-layer", "2"], 1,
                 "zero-shot-slots"))
    if data is None:
        return runs
    sib, pos, sid, qa = (["--task", task, "--data", str(data / folder), "--no-alignment"] for task, folder in
                         (("sib200", "sib200"), ("udpos", "ud_pud"), ("xsid", "xsid"), ("xquad", "xquad")))
    runs += [(f"{method}-sib200", "train.py", [*sib, "--method", method], 1, None) for method in ("translate-train", "contrastive")]
    runs += [(f"{method}-udpos", "train.py", [*pos, "--method", method], 1, None) for method in ("zero-shot", "xeroalign", "filter")]
    runs += [(f"{method}-xsid", "train.py", [*sid, "--method", method], 1, None)
             for method in ("zero-shot", "translate-train", "xeroalign", "filter")]
    runs.append(("xmixup-xsid", "train.py", [*sid, "--method", "xmixup", "--teacher", "{zero-shot-xsid}", "--mixup-layer", "2"], 1,
                 "zero-shot-xsid"))
    runs += [(f"{method}-xquad", "train.py", [*qa, "--method", method, "--max-length", "128", "--doc-stride", "32"], 1, None)
             for method in ("zero-shot", "translate-train", "xeroalign", "filter", "xmixup")]
    runs.append(("filter-ddp-xquad", "train.py", [*qa, "--method", "filter", "--max-length", "128", "--doc-stride", "32"], 2, None))
    return runs


def tiny_model(directory):
    """A sentencepiece model trained on the bundled corpus and a 2-layer encoder with random weights."""
    import sentencepiece
    import torch

    from minxlt.tasks import demo as demo_corpus
    from minxlt.text.tokenizer import Tokenizer
    from model import Config, Encoder
    texts = [e.text for split in ("train", "dev", "test") for examples in demo_corpus.build(split).values() for e in examples]
    buffer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=buffer, model_type="unigram", vocab_size=1000,
                                             character_coverage=1.0, hard_vocab_limit=False, minloglevel=2, num_threads=1)
    directory.mkdir(parents=True)
    (directory / "sentencepiece.bpe.model").write_bytes(buffer.getvalue())
    torch.manual_seed(0)
    config = Config(vocab_size=Tokenizer.from_pretrained(directory).vocab_size, hidden_size=32, num_layers=2, num_heads=2, ffn_size=37,
                    max_positions=130)
    Encoder(config).save_pretrained(directory)


def common(argv):
    """COMMON's flags that a run does not give: --epochs replaces --max-steps."""
    skip = set(argv) | ({"--max-steps"} if "--epochs" in argv else set())
    return [token for name, value in COMMON.items() if name not in skip for token in (name, value)]


def launch(script, argv, processes):
    if processes == 1:
        return [sys.executable, str(HERE / script), *argv]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes), str(HERE / script), *argv]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path, help="the folder that receives a folder per run (and the tiny model, without --model)")
    p.add_argument("--model", type=Path, help="the checkpoint every run starts from (default: a tiny one written to OUT/model)")
    p.add_argument("--data", type=Path, help="a folder with sib200/, ud_pud/, xsid/ and xquad/ (e.g. ../shared/data)")
    p.add_argument("--only", help="run only the runs whose names contain this text")
    args = p.parse_args(argv)
    model = args.model or args.out / "model"
    if args.model is None and not model.exists():
        tiny_model(model)
    env = dict(os.environ, MINXLT_CACHE=str(args.out / "cache"))
    every = cases(args.data)
    names = {"model": str(model), **{name: str(args.out / name / "best") for name, *_ in every}}  # what {name} in a run's flags means
    todo = [c for c in every if not args.only or args.only in c[0]]
    failed = []
    for i, (name, script, argv, processes, after) in enumerate(todo, 1):
        if after in failed:
            failed.append(name)
            continue
        argv = [f.format(**names) for f in argv] + ["--model", str(model), "--out", str(args.out / name), "--overwrite"]
        argv += common(argv)
        started = time.time()
        done = subprocess.run(launch(script, argv, processes), capture_output=True, text=True, env=env, cwd=HERE)
        if done.returncode == 0 and "--stop-at" in argv:  # continue the stopped run to the end
            at = argv.index("--stop-at")
            argv = [f for f in argv[:at] + argv[at + 2:] if f != "--overwrite"] + ["--resume"]
            done = subprocess.run(launch(script, argv, processes), capture_output=True, text=True, env=env, cwd=HERE)
        print(f"[{i}/{len(todo)}] {name}: {'ok' if done.returncode == 0 else 'FAILED'} ({time.time() - started:.0f} s)", flush=True)
        if done.returncode != 0:
            failed.append(name)
            print("    " + "\n    ".join(done.stderr.strip().splitlines()[-8:]), flush=True)
    print(f"{len(todo) - len(failed)} of {len(todo)} runs done in {args.out}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
