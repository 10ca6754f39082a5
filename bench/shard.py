"""What each process holds, sharded (--shard) and under DDP, measured on real processes against the
memory plan of train.py --dry-run (memory.py). A classifier on an encoder of XLM-R base's shape with
random weights takes one training step (AdamW, as train.py makes it) in 1, 2 and 4 processes
(torchrun, gloo on the CPU); each process then counts the bytes it holds of the encoder's parameters,
their gradients and AdamW's two moments (a sharded tensor: its own shard only).

    python -m bench.shard                          # XLM-R base's shape; 1, 2 and 4 processes
    python -m bench.shard --layers 2 --processes 1 2

The ratio is the sharded process's bytes to the DDP process's; 1/N is the ideal. DDP's gradient
buckets (another copy of the gradients, which the plan counts) are not counted here.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

GB = 1e9
ROOT = Path(__file__).resolve().parents[1]  # the repository, where python -m bench.shard runs
PARTS = ("parameters", "gradients", "AdamW moments")


def measure(config, sharded, amp="none"):
    """{part: bytes} this process holds of the encoder's parameters, gradients and AdamW moments
    after one training step of a classifier on `config`'s encoder (random weights), sharded or DDP."""
    import train
    from methods import Phase
    from minxlt.parallel import distributed, shard
    from model import Classifier, Encoder
    torch.manual_seed(0)
    model = Classifier(Encoder(config), 3)
    wrapped = shard.wrap(model, model.encoder, amp=amp) if sharded else distributed.wrap(model, "cpu")
    settings = argparse.Namespace(lr=1e-5, weight_decay=0.01, warmup=0.1)
    optimizer, _ = train.make_optimizer(settings, model, [Phase("step", [], 1, None, None)])
    ids = torch.randint(5, config.vocab_size, (2, 16))
    logits, _ = wrapped(ids, torch.ones_like(ids))
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1])).backward()
    optimizer.step()
    encoder = list(model.encoder.parameters())
    moments = [optimizer.state[p][k] for p in encoder for k in ("exp_avg", "exp_avg_sq")]
    return dict(zip(PARTS, (shard.local_bytes(encoder), shard.local_bytes(p.grad for p in encoder), shard.local_bytes(moments))))


def worker(layers, sharded):
    """Under torchrun: measure, and process 0 prints every process's figures (json)."""
    from minxlt.parallel import distributed
    from model import Config
    distributed.setup("cpu")
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // distributed.world_size()))
    held = measure(Config(num_layers=layers), sharded)
    every = distributed.gather(held)
    if int(os.environ.get("RANK", "0")) == 0:
        print("RESULT " + json.dumps(every))
    distributed.cleanup()


def launch(processes, layers, sharded):
    """[{part: bytes} per process] of one configuration, run under torchrun."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(processes), "--master-port", str(29400 + processes),
               "-m", "bench.shard", "--child", str(layers), "shard" if sharded else "ddp"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    line = next((line for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    if line is None:
        sys.exit(f"error: {' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=12, help="encoder layers (XLM-R base: 12)")
    p.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return worker(int(args.child[0]), args.child[1] == "shard")
    from minxlt.parallel import memory
    from model import Config
    config = Config(num_layers=args.layers)
    total = memory.count_parameters(config)[0]
    print(f"XLM-R base's shape with {args.layers} layers: {total / 1e6:.0f} M encoder parameters, float32; one step of AdamW\n")
    print("| processes | mode | parameters GB | gradients GB | AdamW moments GB | total GB | the plan's GB | sharded / DDP | 1/N |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.processes:
        figures = {mode: launch(n, args.layers, mode == "sharded") for mode in ("DDP", "sharded")}
        plan = memory.plan(config, n)
        ddp_total = max(sum(f.values()) for f in figures["DDP"])
        for mode, per_process in figures.items():
            largest = max(per_process, key=lambda f: sum(f.values()))  # the process that holds the most (the first)
            planned = sum(v for k, v in plan["ddp" if mode == "DDP" else "sharded"].items() if k in PARTS)
            ratio = sum(largest.values()) / ddp_total
            print(f"| {n} | {mode} | " + " | ".join(f"{largest[k] / GB:.3f}" for k in PARTS) +
                  f" | {sum(largest.values()) / GB:.3f} | {planned / GB:.3f} | {ratio:.3f} | {1 / n:.3f} |")


if __name__ == "__main__":
    main()
