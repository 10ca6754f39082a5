"""Our Encoder against transformers' XLMRobertaModel, a training step's time and peak memory (docs/training.md).

    python -m bench.encoder                                   # CPU, base and large shapes, vocab 8000
    python -m bench.encoder --device cuda --amp bf16 --vocab 250002 --batch 32 --seq 256
    python -m bench.encoder --device cuda --amp bf16 --vocab 250880 --batch 32 --seq 128 --shapes xl  # XL (pre-LN)
"""
import argparse
import multiprocessing as mp
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import torch

SHAPES = {  # XLM-R base and large, and XLM-R XL (pre-LN: against XLMRobertaXLModel), in config.json's names
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "xl": dict(hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, intermediate_size=10240,
               model_type="xlm-roberta-xl"),
}


def build(impl, shape, args):
    """The model and a padded batch, identical for both implementations (same seed, same weights)."""
    import transformers

    from model import Config, Encoder
    torch.manual_seed(0)
    sizes = dict(SHAPES[shape])
    xl = "XL" if sizes.pop("model_type", None) == "xlm-roberta-xl" else ""
    config = getattr(transformers, f"XLMRoberta{xl}Config")(vocab_size=args.vocab, max_position_embeddings=514, **sizes)
    model = reference = getattr(transformers, f"XLMRoberta{xl}Model")(config, add_pooling_layer=False)
    if impl == "ours":
        model = Encoder(Config.from_hf(config.to_dict()))
        model.load_hf_state_dict(reference.state_dict())
    model = model.to(args.device).train()
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(args.seq // 2, args.seq + 1, (args.batch,), generator=g)
    lengths[0] = args.seq
    ids = torch.randint(4, args.vocab, (args.batch, args.seq), generator=g)
    mask = (torch.arange(args.seq)[None] < lengths[:, None]).long()
    ids[mask == 0] = 1
    return model, ids.to(args.device), mask.to(args.device)


def step(impl, model, ids, mask, args):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    with torch.autocast(device_type=args.device.split(":")[0], dtype=dtype, enabled=dtype is not None):
        hidden = model(ids, mask) if impl == "ours" else model(input_ids=ids, attention_mask=mask).last_hidden_state
        loss = hidden.float().pow(2).mean()
    loss.backward()
    model.zero_grad(set_to_none=True)


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_steps(args, shape):
    """Median seconds per step for both implementations, alternating."""
    built = {impl: build(impl, shape, args) for impl in ("ours", "theirs")}
    times = {impl: [] for impl in built}
    for i in range(args.warmup + args.steps):
        for impl, (model, ids, mask) in built.items():
            sync(args.device)
            start = time.perf_counter()
            step(impl, model, ids, mask, args)
            sync(args.device)
            if i >= args.warmup:
                times[impl].append(time.perf_counter() - start)
    return {impl: statistics.median(t) for impl, t in times.items()}


def status_bytes(field):
    """A field of /proc/self/status (VmRSS, VmHWM) in bytes."""
    with open("/proc/self/status") as f:
        return 1024 * next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def measure_memory(impl, shape, args):
    """In a fresh process: peak bytes above the steady state in one step, and bytes saved for backward."""
    torch.set_num_threads(args.threads)
    model, ids, mask = build(impl, shape, args)
    step(impl, model, ids, mask, args)  # warm-up: one-time allocations happen here
    params = {p.data_ptr() for p in model.parameters()}
    saved = {}

    def pack(t):
        if t.data_ptr() not in params:
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step(impl, model, ids, mask, args)
    cuda = args.device.startswith("cuda")
    sync(args.device)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    else:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak-RSS counter (VmHWM) to the current RSS
    before = torch.cuda.memory_allocated() if cuda else status_bytes("VmRSS")
    step(impl, model, ids, mask, args)
    sync(args.device)
    peak = (torch.cuda.max_memory_allocated() if cuda else status_bytes("VmHWM")) - before
    return peak, sum(saved.values())


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--device", default="cpu", help="cpu or cuda")
    add("--amp", default="none", choices=["none", "bf16", "fp16"], help="autocast dtype (float32 weights)")
    add("--shapes", default="base,large", help="comma-separated: base, large, xl")
    add("--vocab", type=int, default=8000, help="vocabulary size (XLM-R: 250002; smaller keeps CPU runs short)")
    add("--batch", type=int, default=4)
    add("--seq", type=int, default=128, help="longest sequence; the others are 50-100%% of it")
    add("--steps", type=int, default=5, help="timed steps per model")
    add("--warmup", type=int, default=1)
    add("--threads", type=int, default=torch.get_num_threads(), help="CPU threads")
    return parser.parse_args(argv)


def main():
    args = parse()
    torch.set_num_threads(args.threads)
    print(f"device {args.device}, amp {args.amp}, batch {args.batch} x {args.seq}, vocab {args.vocab}, "
          f"torch {torch.__version__}, {args.threads} threads")
    print("| shape | ours s/step | transformers s/step | time ratio | ours peak MB | transformers peak MB "
          "| memory ratio | ours saved MB | transformers saved MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    # measure_memory's processes: allocations above 64 KiB mmapped, unmapped when freed (RSS follows live memory)
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"
    for shape in args.shapes.split(","):
        t = time_steps(args, shape)
        with ProcessPoolExecutor(1, mp.get_context("spawn"), max_tasks_per_child=1) as fresh:  # a process per task
            m = {impl: fresh.submit(measure_memory, impl, shape, args).result() for impl in ("ours", "theirs")}
        mb = lambda n: f"{n / 2**20:.0f}"
        print(f"| {shape} | {t['ours']:.3f} | {t['theirs']:.3f} | {t['ours'] / t['theirs']:.2f} "
              f"| {mb(m['ours'][0])} | {mb(m['theirs'][0])} | {m['ours'][0] / m['theirs'][0]:.2f} "
              f"| {mb(m['ours'][1])} | {mb(m['theirs'][1])} |", flush=True)


if __name__ == "__main__":
    main()
