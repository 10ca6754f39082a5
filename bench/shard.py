"""What each process holds, sharded (--shard) and under DDP, measured on real processes against the memory plan of
train.py --dry-run (memory.py); with --phases each phase of a sharded run (docs/training.md, "Benchmarks").

    python -m bench.shard                          # XLM-R base's shape; 1, 2 and 4 processes
    python -m bench.shard --layers 2 --processes 1 2
    python -m bench.shard --phases                 # each phase, sharded over 2 processes, against the plan
"""
import argparse
import gc
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest import mock

import torch
import torch.distributed as dist
from torch.distributed.fsdp._fully_shard import _fsdp_collectives, _fsdp_param_group
from torch.distributed.tensor import DTensor

import train
from methods import Phase
from minxlt.parallel import distributed, memory, shard
from model import Classifier, Config, Encoder

GB = 1e9
ROOT = Path(__file__).resolve().parents[1]  # the repository, where python -m bench.shard runs
PARTS = ("parameters", "gradients", "AdamW moments")
# {name: its owner} of the functions around which a phase's peak is measured: the collectives, and FSDP2's private
# ones where a peak falls between them (memory.step_moments: all-gather copy-out, release, reduce-scatter copy-in)
EVERY = {"all_gather_single": dist, "reduce_scatter_single": dist, "foreach_all_gather_copy_out": _fsdp_param_group,
         "reshard": _fsdp_param_group.FSDPParamGroup, "foreach_reduce_scatter_copy_in": _fsdp_collectives}
SETTINGS = argparse.Namespace(lr=1e-5, weight_decay=0.01, warmup=0.1)  # what train.make_optimizer reads


def measure(config, sharded):
    """{part: bytes} this process holds of the encoder after one step of a classifier on it, sharded or DDP."""
    torch.manual_seed(0)
    model = Classifier(Encoder(config), 3)
    wrapped = shard.wrap(model, model.encoder) if sharded else distributed.wrap(model, "cpu")
    optimizer, _ = train.make_optimizer(SETTINGS, model, [Phase("step", [], 1, None, None)])
    ids = torch.randint(5, config.vocab_size, (2, 16))
    logits, _ = wrapped(ids, torch.ones_like(ids))
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1])).backward()
    optimizer.step()
    encoder = list(model.encoder.parameters())
    moments = [optimizer.state[p][k] for p in encoder for k in ("exp_avg", "exp_avg_sq")]
    held = (encoder, [p.grad for p in encoder if p.grad is not None], moments)  # of a DTensor, its own shard only
    return {part: sum(shard.local(t).nbytes for t in tensors) for part, tensors in zip(PARTS, held)}


def live_bytes():
    """Bytes of every tensor alive that Python holds (the garbage collector's), each storage once."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in gc.get_objects()  # address: bytes
                if isinstance(t, torch.Tensor) and not isinstance(t, DTensor) and not t.is_meta}
    return sum(storages.values())


@contextmanager
def peaks(owners, figures, key, less):
    """The largest live_bytes() less `less` before and after each call of the functions `owners` names ({name: its
    module or class}) while the block runs, kept in figures[key] (0 at first)."""
    figures.setdefault(key, 0)

    def probed(real):
        def call(*args, **kwargs):
            figures[key] = max(figures[key], live_bytes() - less)
            done = real(*args, **kwargs)
            figures[key] = max(figures[key], live_bytes() - less)
            return done
        return call
    with ExitStack() as patched:
        for name, owner in owners.items():
            patched.enter_context(mock.patch.object(owner, name, probed(getattr(owner, name))))
        yield


def by_phase(directory, amp, embeddings_unit=False):
    """{phase: bytes} this process holds at each phase of a sharded run of a classifier on the encoder in
    `directory`, with its host copy, what it holds as backward starts, and seconds a step."""
    gc.collect()
    before, figures = live_bytes(), {}
    held = lambda: live_bytes() - before
    encoder = Encoder.from_pretrained(directory, device="meta", dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    model = Classifier(encoder, 3)
    shard.wrap(model, encoder, amp=amp, device="cpu", embeddings_unit=embeddings_unit)
    shard.load_pretrained(model, encoder, directory, "cpu")
    gc.collect()
    figures["loading"] = held()

    optimizer, scheduler = train.make_optimizer(SETTINGS, model, [Phase("step", [], 1, None, None)])
    ids = torch.randint(5, encoder.config.vocab_size, (1, 8))
    seconds = []
    for step in range(5):  # the second's peak (AdamW's moments and the gradients exist from the first); 3 timed
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp == "bf16"), \
                peaks(EVERY if step == 1 else {}, figures, "step", before):
            logits, _ = model(ids, torch.ones_like(ids))
            if step == 1:
                logits.register_hook(lambda grad: figures.update({"as backward starts": held()}))  # grad unchanged
            torch.nn.functional.cross_entropy(logits.float(), torch.tensor([1])).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seconds.append(time.perf_counter() - started)
    figures["seconds a step"] = sorted(seconds[2:])[1]

    # the evaluation on dev: between steps, as shard.evaluated runs it
    with torch.no_grad(), peaks(EVERY, figures, "dev evaluation", before), shard.evaluated(model) as evaluated:
        evaluated(ids, torch.ones_like(ids))

    # writing OUT/best: between steps, AdamW's moments alive, no gradient; process 0's host copy of each parameter
    whole = {p: p.numel() * p.element_size() if dist.get_rank() == 0 else 0 for p in model.parameters()}
    figures["host copy"] = max(whole.values())
    for p, whole_bytes in whole.items():
        with peaks({"send": dist, "recv": dist}, figures, "writing OUT/best", before + whole_bytes):
            shard.on_first_host(p)  # the copy dropped at once

    del optimizer, scheduler  # the test: AdamW freed, the tested model loaded sharded beside the trained one
    gc.collect()
    tested = Classifier(Encoder.from_pretrained(directory, device="meta"), 3)
    shard.wrap(tested, tested.encoder, device="cpu", trains=False)
    shard.load_pretrained(tested, tested.encoder, directory, "cpu")
    with torch.no_grad(), peaks(EVERY, figures, "test", before), shard.gathered(tested):  # as Method.test runs it
        tested(ids, torch.ones_like(ids))
    return figures


def worker(child):
    """Under torchrun: by_phase (--phases) or measure, and process 0 prints every process's figures (json)."""
    rank, processes, _ = distributed.setup("cpu")
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // processes))
    if child[1] in ("none", "bf16"):
        held = by_phase(child[0], child[1], child[2] == "embeddings")
    else:
        held = measure(Config(num_layers=int(child[0])), child[1] == "sharded")
    every = distributed.gather(held)
    if rank == 0:
        print("RESULT " + json.dumps(every))
    distributed.cleanup()


def launch(processes, *child):
    """[{part: bytes} per process] of one configuration (`child`: --child's arguments), run under torchrun."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(processes),
               "--master-port", str(29400 + processes), "-m", "bench.shard", "--child", *child]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    line = next((line for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    if line is None:
        sys.exit(f"error: {' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=12, help="encoder layers (XLM-R base: 12)")
    p.add_argument("--processes", type=int, nargs="+", help="default: 1, 2 and 4; with --phases, 2")
    p.add_argument("--phases", action="store_true", help="each phase of a sharded run against the plan")
    p.add_argument("--amp", choices=["none", "bf16"], nargs="+", default=["none", "bf16"],
                   help="with --phases: the dtypes computed in")
    p.add_argument("--embeddings", action="store_true", help="with --phases: also with the embeddings a unit of "
                   "their own (train.py --shard-embeddings), side by side")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return worker(args.child)
    config = Config(num_layers=args.layers)
    if args.phases:
        return phases_table(config, args.processes or [2], args.amp, (False, True) if args.embeddings else (False,))
    print(f"XLM-R base's shape with {args.layers} layers: {memory.count_parameters(config)[0] / 1e6:.0f} M encoder "
          "parameters, float32; one step of AdamW\n")
    print("| processes | mode | parameters GB | gradients GB | AdamW moments GB | total GB | the plan's GB "
          "| sharded / DDP | 1/N |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.processes or [1, 2, 4]:
        figures = {mode: launch(n, str(args.layers), mode) for mode in ("DDP", "sharded")}
        plan = memory.plan(config, n)
        ddp_total = max(sum(f.values()) for f in figures["DDP"])
        for mode, per_process in figures.items():
            largest = max(per_process, key=lambda f: sum(f.values()))  # the process that holds the most
            planned = sum(v for k, v in plan[mode.lower()].items() if k in PARTS)
            ratio = sum(largest.values()) / ddp_total
            print(f"| {n} | {mode} | " + " | ".join(f"{largest[k] / GB:.3f}" for k in PARTS) +
                  f" | {sum(largest.values()) / GB:.3f} | {planned / GB:.3f} | {ratio:.3f} | {1 / n:.3f} |")


def phases_table(config, processes, amps, embeddings=(False,)):
    """--phases: each phase's bytes, the largest process's, measured and planned, as a table; returns
    {(processes, amp, embeddings unit, phase): (measured, planned)}."""
    print(f"An encoder of {memory.count_parameters(config)[0] / 1e6:.0f} M parameters ({config.num_layers} layers of "
          f"{config.hidden_size}, {config.vocab_size} words), random weights, one sentence of 8 tokens; the largest "
          "process's bytes\n")
    print("| processes | computes in | the embeddings | phase | measured GB | the plan's GB | measured / plan |")
    print("|---|---|---|---|---|---|---|")
    figures, aside = {}, []
    with tempfile.TemporaryDirectory() as directory:
        torch.manual_seed(0)
        Encoder(config).save_pretrained(directory)
        for n, amp, unit in itertools.product(processes, amps, embeddings):
            measured = launch(n, directory, amp, "embeddings" if unit else "root")
            planned = memory.plan(config, n, amp, embeddings_unit=unit)["phases"]["sharded"]
            row = f"| {n} | {'float32' if amp == 'none' else amp} | {'own unit' if unit else 'in the root'} |"
            most = lambda name: max(f[name] for f in measured)  # the largest process's
            for phase, plan_bytes in planned.items():
                largest = most(phase)
                figures[n, amp, unit, phase] = largest, plan_bytes
                print(f"{row} {phase} | {largest / GB:.3f} | {plan_bytes / GB:.3f} | {largest / plan_bytes:.3f} |")
            aside.append(f"{row} {most('as backward starts') / GB:.3f} | {most('seconds a step'):.3f} | "
                         f"{most('host copy') / GB:.3f} |")
    print("\nBeside the activations as backward starts (GB), the median of 3 steps (seconds, the slower process), and "
          "process 0's host copy of the largest tensor it writes to OUT/best (GB; host memory, not planned):\n")
    print("| processes | computes in | the embeddings | held as backward starts GB | seconds a step | host copy GB |")
    print("|---|---|---|---|---|---|")
    print("\n".join(aside))
    return figures


if __name__ == "__main__":
    main()
