"""What a training set costs before the first step (CPU time, peak memory a training pair, the token cache), on a
generated set in XNLI's or SIB-200's layout (docs/training.md, "Benchmarks").

    python -m bench.data                                         # 20,000 English pairs, 4 translations of each
    python -m bench.data --task sib200 --pairs 80000 --langs 5   # 480,000 SIB-200-shaped training pairs
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from minxlt.checkpoints.prepare_default import default_model
from minxlt.tasks import demo as demo_corpus
from minxlt.tasks.sib200 import SIB200_LABELS

SIB200_NAME = {"en": "eng_Latn", "de": "deu_Latn", "fr": "fra_Latn", "es": "spa_Latn", "ru": "rus_Cyrl",
               "zh": "zho_Hans", "hi": "hin_Deva"}
LABELS = ("entailment", "neutral", "contradiction")
ROOT = Path(__file__).resolve().parents[1]  # the repository: train.py, and this module as bench.data


def words_by_lang():
    corpus = demo_corpus.build("train")
    return {lang: [w for e in examples for w in e.text.split()] for lang, examples in corpus.items()}


def sentence(rng, words, n):
    return " ".join(rng.choice(words) for _ in range(rng.randint(n // 2, n + n // 2)))


def write_xnli(folder, pairs, langs):
    """A folder in XTREME's XNLI layout with `pairs` English training pairs and their translations."""
    rng, words = random.Random(0), words_by_lang()
    (folder / "translate-train").mkdir(parents=True)
    pair = lambda lang: f"{sentence(rng, words[lang], 20)}\t{sentence(rng, words[lang], 10)}"
    english = [(sentence(rng, words["en"], 20), sentence(rng, words["en"], 10), rng.choice(LABELS))
               for _ in range(pairs)]
    (folder / "train-en.tsv").write_text("".join(f'"{a}"\t"{b}"\t{label}\n' for a, b, label in english))
    for lang in ["en", *langs]:
        for split in ("dev", "test"):
            (folder / f"{split}-{lang}.tsv").write_text("".join(f"{pair(lang)}\t{label}\n" for label in LABELS * 4))
    for lang in langs:
        (folder / "translate-train" / f"en-{lang}-translated.tsv").write_text(
            "".join(f"{a}\t{b}\t{pair(lang)}\t{label}\n" for a, b, label in english))


def write_sib200(folder, pairs, langs):
    """A folder in SIB-200's layout (<lang>/{train,dev,test}.tsv) with `pairs` English sentences translated."""
    rng, words = random.Random(0), words_by_lang()
    english_labels = [rng.choice(SIB200_LABELS) for _ in range(pairs)]
    for lang in ["en", *langs]:
        (folder / SIB200_NAME.get(lang, lang)).mkdir(parents=True)
        for split, labels in (("train", english_labels), ("dev", SIB200_LABELS * 2), ("test", SIB200_LABELS * 2)):
            rows = "".join(f"{i}\t{label}\t{sentence(rng, words[lang], 20)}\n" for i, label in enumerate(labels))
            (folder / SIB200_NAME.get(lang, lang) / f"{split}.tsv").write_text("index_id\tcategory\ttext\n" + rows)


def measure(argv, cache):
    """(CPU seconds, peak resident MiB) of a fresh process running `argv` (Python's arguments)."""
    process = subprocess.Popen([sys.executable, *argv], env=dict(os.environ, MINXLT_CACHE=str(cache)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        sys.exit(f"{argv[0]} failed:\n{stderr.decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def data_stage(argv):
    """What train.main does before it loads the model (the task, the items, the first lines, the first batch)."""
    import train
    from minxlt.run import bookkeeping, flags
    args = flags.parse(argv)
    settings, run = flags.resolve(args, train.load_run(args, Path(args.model), "cpu", 0, 1))
    method = flags.METHODS[settings.method](settings, run)
    phases = method.phases(method.training_items())
    bookkeeping.Book(Path(args.out), settings, run, Path(args.model), phases)  # the first lines, the files' digests
    next(iter(bookkeeping.StepBatches(settings, method, phases)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=20000, help="English training pairs (default: 20000)")
    p.add_argument("--langs", type=int, default=4,
                   help="languages they are translated into, of the bundled corpus's 6 (default: 4)")
    p.add_argument("--task", choices=("xnli", "sib200"), default="xnli", help="the layout of the generated files: "
                   "XNLI's (pairs of sentences) or SIB-200's (one sentence a line, one folder per language)")
    p.add_argument("--model", help="the checkpoint folder train.py starts from (default: the bundled model)")
    args = p.parse_args(argv)
    langs = [lang for lang in demo_corpus.LANGS if lang != "en"][:args.langs]
    model = args.model or str(default_model())
    write = {"xnli": write_xnli, "sib200": write_sib200}[args.task]
    sizes = {"small": max(args.pairs // 10, 1), "full": args.pairs}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for size, n in sizes.items():
            write(tmp / size, n, langs)
        argv = lambda size, out: ["--method", "translate-train", "--task", args.task, "--data", str(tmp / size),
                                  "--model", model, "--out", str(tmp / f"out-{size}-{out}"), "--max-steps", "1",
                                  "--no-test", "--no-alignment", "--seed", "0"]
        stage = lambda size, cache: measure(["-m", "bench.data", "--data-stage", *argv(size, cache)], tmp / cache)[1]
        cold = {size: stage(size, f"cold-{size}") for size in sizes}  # each its own empty cache
        rows = [(f"{size} set, cache {how}", n, *measure([str(ROOT / "train.py"), *argv(size, how)], tmp / "cache"))
                for size, n in sizes.items() for how in ("built", "reused")]
        warm = {size: stage(size, "cache") for size in sizes}
        entry = sum(f.stat().st_size for f in (tmp / "cache" / "tokens").rglob("*") if f.is_file())
    texts = lambda n: n * (1 + len(langs))  # English pairs and their translations: the training pairs
    print(f"{args.task} layout, {args.pairs} English examples x {1 + len(langs)} languages = {texts(args.pairs)} "
          "training pairs; one step of translate-train\n")
    print("| run | training pairs | CPU s | peak MiB |\n|---|---|---|---|")
    for name, n, cpu, rss in rows:
        print(f"| {name} | {texts(n)} | {cpu:.1f} | {rss:.0f} |")
    per_pair = lambda peaks: (peaks["full"] - peaks["small"]) * 2 ** 20 / (texts(sizes["full"]) - texts(sizes["small"]))
    (_, _, full_built, _), (_, _, full_reused, _) = rows[2:]  # the full set's CPU seconds
    print(f"\nCPU time to the first step, cache reused / built: {full_reused / full_built:.2f}")
    for name, peaks in (("cache built (a cold first run)", cold), ("cache reused", warm)):
        print(f"before the model, {name}: peak {peaks['small']:.0f} MiB on the small set, {peaks['full']:.0f} MiB on "
              f"the full set: {per_pair(peaks):.0f} B per training pair")
    print(f"token cache on disk: {entry / sum(map(texts, sizes.values())):.0f} B per training pair")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--data-stage"]:
        data_stage(sys.argv[2:])
    else:
        main()
