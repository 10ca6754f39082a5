"""Peak resident memory of loading a sharded checkpoint, against the model plus one shard (docs/training.md).

    python -m bench.load                       # ~800 MB in float32, 200 MB shards
    python -m bench.load --hidden 2048 --layers 8 --shard-mb 500
"""
import argparse
import multiprocessing as mp
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from bench.encoder import status_bytes as status
from model import Config, Encoder

MB = 2 ** 20


def child(directory, dtype, warm):
    """In a fresh process: the peak resident bytes a load adds (VmHWM less VmRSS), after a tiny one if `warm`."""
    if warm:
        with tempfile.TemporaryDirectory() as tiny:
            config = Config(**{**Config.from_directory(directory).__dict__, "vocab_size": 100, "hidden_size": 64,
                               "num_heads": 4, "ffn_size": 128, "num_layers": 2})
            Encoder(config, lm_head=True).save_pretrained(tiny)
            Encoder.from_pretrained(tiny, dtype=getattr(torch, dtype))
    before = status("VmRSS")
    model = Encoder.from_pretrained(directory, dtype=getattr(torch, dtype))
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"added": status("VmHWM") - before, "model": size}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50000)
    p.add_argument("--shard-mb", type=int, default=200)
    args = p.parse_args()
    config = Config(vocab_size=args.vocab, hidden_size=args.hidden, num_layers=args.layers,
                    num_heads=args.hidden // 64, ffn_size=4 * args.hidden, model_type="xlm-roberta-xl")
    with tempfile.TemporaryDirectory() as folder:
        torch.manual_seed(0)
        Encoder(config, lm_head=True).save_pretrained(folder, shard_bytes=args.shard_mb * MB)
        sizes = [shard.stat().st_size for shard in Path(folder).glob("model-*.safetensors")]
        largest = max(sizes)
        print(f"checkpoint: {sum(sizes) / MB:.0f} MB in {len(sizes)} shards (largest {largest / MB:.0f} MB), float32, "
              f"hidden {args.hidden}, {args.layers} pre-LN layers, vocabulary {args.vocab}")
        print("| load into | model | largest shard | peak added, first load | peak added, after a tiny load "
              "| ratio to model + one shard |")
        print("|---|---|---|---|---|---|")
        with ProcessPoolExecutor(1, mp.get_context("spawn"), max_tasks_per_child=1) as fresh:  # a process per load
            for dtype in ("float32", "bfloat16"):
                cold, warm = (fresh.submit(child, folder, dtype, after_tiny).result() for after_tiny in (False, True))
                print(f"| {dtype} | {warm['model'] / MB:.0f} MB | {largest / MB:.0f} MB | {cold['added'] / MB:.0f} "
                      f"MB | {warm['added'] / MB:.0f} MB | {warm['added'] / (warm['model'] + largest):.2f} |")


if __name__ == "__main__":
    main()
