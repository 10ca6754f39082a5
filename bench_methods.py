"""Benchmark: the cost of a training step of each method relative to translate-train, measured side
by side in one run on the same source examples, with the step functions of methods.py.

    python bench_methods.py                                              # bundled model and corpus
    python bench_methods.py --task sib200 --data ../shared/data/sib200 --methods translate-train,xeroalign,filter
    python bench_methods.py --task xquad --data ../shared/data/xquad --batch-size 16 --max-length 256

A step is forward + backward + AdamW update of one batch of --batch-size source examples (for
translate-train, the same examples in a language drawn per step; XeroAlign, FILTER and X-Mixup
pair each with its translation in that language; for QA, a window of the English question
with the matching window of its translation). Time: median over --steps after warm-up, the methods taking turns step by
step on the same batches, so that machine noise hits all alike.
"""
import argparse
import random
import statistics
import time

import torch

import data
import methods
from fusion import Filter
from mixup import XMixup
from model import Classifier, Config, Encoder, Tokenizer, default_model


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="demo")
    parser.add_argument("--data")
    parser.add_argument("--model", help="checkpoint directory (default: the bundled model)")
    parser.add_argument("--methods", default="translate-train,xeroalign,filter,xmixup")
    parser.add_argument("--filter-m", type=int, default=1)
    parser.add_argument("--filter-k", type=int, help="default: train.py's (1; QA 20 of 24 layers, scaled)")
    parser.add_argument("--mixup-layer", type=int, help="default: train.py's (1; tagging 4; QA 16 of 24, scaled)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, help="default: 128, QA 384")
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--freeze-embeddings", action="store_true", help="as train.py's: no update of the word embeddings")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    path = args.model or default_model()
    tokenizer = Tokenizer.from_pretrained(path)
    task = data.load_task(args.task, args.data)
    task.doc_stride = args.doc_stride
    defaults = methods.task_defaults(task.level, Config.from_directory(path).num_layers, args.filter_m)
    for name in ("max_length", "filter_k", "mixup_layer"):
        setattr(args, name, getattr(args, name) or defaults[name])
    encode = lambda examples: data.encode(examples, tokenizer, task, args.max_length)
    sources = encode(task.train[task.source])
    translations = {}
    for source, translation in data.translation_pairs(sources, encode([e for lang in task.targets for e in task.train[lang]])):
        translations.setdefault(source.id, {}).setdefault(translation.lang, translation)
    sources = [it for it in sources if it.id in translations]
    options = argparse.Namespace(align_weight=1.0, target_labels=False, kl_weight=None, no_consistency=False,
                                 mixup_alpha=defaults["mixup_alpha"])

    names = args.methods.split(",")
    models, optimizers = {}, {}
    for method in names:
        torch.manual_seed(0)
        raw = Classifier(Encoder.from_pretrained(path), len(task.labels), methods.head_style(task), num_intents=len(task.intents or ())).train()
        raw.encoder.embeddings.word.weight.requires_grad_(not args.freeze_embeddings)
        models[method] = {"filter": lambda: Filter(raw, args.filter_m, args.filter_k),
                          "xmixup": lambda: XMixup(raw, args.mixup_layer - 1)}.get(method, lambda: raw)()
        optimizers[method] = torch.optim.AdamW([p for p in models[method].parameters() if p.requires_grad], lr=1e-5, fused=True)

    def batch_for(method, step):
        rng = random.Random(step)
        chosen = rng.sample(sources, args.batch_size)
        lang = rng.choice(task.targets)  # one translation language per step, as train.py draws it
        if method == "translate-train":
            items = [translations[it.id].get(lang, it) for it in chosen]
        else:  # xeroalign, filter, xmixup: (source, translation) pairs
            items = [(it, translations[it.id].get(lang) or next(iter(translations[it.id].values()))) for it in chosen]
        return methods.make_batch(method, items, [1.0] * len(items), step, 0, tokenizer, task.level)

    times = {method: [] for method in names}
    for step in range(args.warmup + args.steps):
        for method in names:
            batch = batch_for(method, step)
            start = time.perf_counter()
            loss, _ = methods.compute_loss(method, models[method], batch, options, task.level)
            loss.backward()
            optimizers[method].step()
            optimizers[method].zero_grad(set_to_none=True)
            if step >= args.warmup:
                times[method].append(time.perf_counter() - start)
    base = statistics.median(times.get("translate-train", times[names[0]]))
    print(f"{args.task}, batch {args.batch_size}, {torch.get_num_threads()} threads, FILTER m={args.filter_m} k={args.filter_k}, "
          f"X-Mixup at layer {args.mixup_layer}")
    print("| method | s/step | relative to translate-train |")
    print("|---|---|---|")
    for method in names:
        t = statistics.median(times[method])
        print(f"| {method} | {t:.3f} | {t / base:.2f} |")


if __name__ == "__main__":
    main()
