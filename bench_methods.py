"""Benchmark: the cost of a training step of each method relative to translate-train, measured side
by side in one run on the same source examples, through the methods' own batches and losses.

    python bench_methods.py                                              # bundled model and corpus
    python bench_methods.py --task sib200 --data ../shared/data/sib200 --methods translate-train,xeroalign,filter
    python bench_methods.py --task xquad --data ../shared/data/xquad --batch-size 16 --max-length 256

A step is forward + backward + AdamW update of one batch of --batch-size source examples (for
translate-train, their translations into a language drawn per step; XeroAlign, FILTER and X-Mixup
pair each with its translation in that language; for QA, a window of the English question with
the matching window of its translation). Time: median over --steps after warm-up, the methods
taking turns step by step on the same batches, so that machine noise hits all alike. Every other
flag is train.py's (--filter-k, --mixup-layer, --freeze-embeddings, ...) and means what it means there.
"""
import argparse
import random
import statistics
import time

import torch

import hub
import train
from prepare_default import default_model
from registry import METHODS


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--methods", default="translate-train,xeroalign,filter,xmixup",
                        help="comma-separated methods that train on single texts or on pairs")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    own, rest = parser.parse_known_args(argv)
    names = own.methods.split(",")
    settings = {name: train.get_args(rest + ["--method", name, "--device", "cpu"]) for name in names}
    first = settings[names[0]]
    model_dir = hub.resolve(first.model) if first.model else default_model()
    run = train.load_run(first, model_dir, "cpu", 0, 1)
    encode, task = run.encode, run.task
    pairs = run.level.pair(encode(task.train[task.source]), encode([e for lang in task.targets for e in task.train[lang]]))
    translations = {}
    for source, translation in pairs:
        translations.setdefault(source.id, {}).setdefault(translation.lang, (source, translation))

    models, optimizers, methods = {}, {}, {}
    for name in names:
        methods[name] = method = METHODS[name](settings[name], run)
        if method.draws not in ("texts", "pairs"):
            parser.error(f"--methods: {name} trains on {method.draws} data; this benchmark compares methods on texts and pairs")
        models[name] = method.wrap(train.build_model(settings[name], method, model_dir, "cpu", 0).train(), [])
        optimizers[name] = torch.optim.AdamW([p for p in models[name].parameters() if p.requires_grad], lr=1e-5, fused=True)

    def batch_for(name, step):
        rng = random.Random(step)
        chosen = [translations[i] for i in rng.sample(sorted(translations), first.batch_size)]
        lang = rng.choice(task.targets)  # one translation language per step, as train.py draws it
        pairs = [by_lang.get(lang) or next(iter(by_lang.values())) for by_lang in chosen]
        items = pairs if methods[name].draws == "pairs" else [translation for _, translation in pairs]
        return methods[name].make_batch(items, [1.0] * len(items), step)

    times = {name: [] for name in names}
    for step in range(own.warmup + own.steps):
        for name in names:
            batch = batch_for(name, step)
            start = time.perf_counter()
            loss, _ = methods[name].loss(models[name], batch)
            loss.backward()
            optimizers[name].step()
            optimizers[name].zero_grad(set_to_none=True)
            if step >= own.warmup:
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times.get("translate-train", times[names[0]]))
    print(f"{first.task}, batch {first.batch_size}, {torch.get_num_threads()} threads")
    print("| method | s/step | relative to translate-train |")
    print("|---|---|---|")
    for name in names:
        t = statistics.median(times[name])
        print(f"| {name} | {t:.3f} | {t / base:.2f} |")


if __name__ == "__main__":
    main()
