"""What a run holds in memory per process, planned before it starts (train.py --dry-run): the
model is built on the `meta` device from config.json alone, with no weights and no data read, and
its parameters counted. Under AMP the parameters stay in float32 (autocast computes in bf16 or
fp16); so do their gradients; AdamW keeps two float32 moments; DDP adds a float32 bucket per
gradient for its all-reduce. That is 16 bytes per trainable parameter, and 4 more under DDP,
before any activation. Sharded training (--shard, shard.py) holds about 1/N of each on each of N
processes (each parameter's rows cut in N), and gathers the embeddings and two layers at a time
whole (the one that runs, the next one prefetched). bench_shard.py measures these on real processes.
"""
import math

import torch

from model import Config, Encoder

GB = 1e9


def parameter_shapes(config, freeze_embeddings=False):
    """[(shape, trained)] of every parameter of the encoder of `config`, built on the meta device."""
    with torch.device("meta"):
        encoder = Encoder(config)
    frozen = encoder.embeddings.word.weight if freeze_embeddings else None
    return [(tuple(p.shape), p is not frozen) for p in encoder.parameters()]


def count_parameters(config, freeze_embeddings=False):
    """(parameters, trainable parameters) of the encoder of `config`."""
    shapes = parameter_shapes(config, freeze_embeddings)
    return sum(math.prod(s) for s, _ in shapes), sum(math.prod(s) for s, trained in shapes if trained)


def first_shard(shape, processes):
    """Elements of a parameter that the first of N processes holds when sharded (FSDP2): its first
    dimension cut into chunks of ceil(rows / N), the first process's chunk the largest."""
    return min(math.ceil(shape[0] / processes), shape[0]) * math.prod(shape[1:]) if shape else math.prod(shape)


def plan(config, processes, amp="none", freeze_embeddings=False, device_memory=80 * GB, teacher=False, offload=False):
    """{name: bytes per process} under DDP, the same sharded over the processes (FSDP2 pads every
    process's part of a parameter to the first's, ceil(rows / N) rows), and whether each fits
    `device_memory`; `teacher`: a float32 teacher model of the same size on every process
    (--teacher). --grad-accum adds nothing: a sharded run reduce-scatters every micro-step.
    `offload` (--offload): the sharded parts are in host memory ("host"), the device holding what is gathered."""
    shapes = parameter_shapes(config, freeze_embeddings)
    total, trainable = sum(math.prod(s) for s, _ in shapes), sum(math.prod(s) for s, trained in shapes if trained)
    ddp = {"parameters": 4 * total, "gradients": 4 * trainable, "AdamW moments": 8 * trainable}
    if teacher:
        ddp["the teacher"] = 4 * total
    if processes > 1:
        ddp["DDP's gradient buckets"] = 4 * trainable
    mine = sum(first_shard(s, processes) for s, _ in shapes)
    mine_trained = sum(first_shard(s, processes) for s, trained in shapes if trained)
    sharded = {"parameters": 4 * mine, "gradients": 4 * mine_trained, "AdamW moments": 8 * mine_trained}
    if teacher:
        sharded["the teacher"] = 4 * total  # not sharded: a frozen model each process runs whole (teacher.py)
    whole = gathered(config, amp)
    on_device = whole + sum(v for k, v in sharded.items() if k == "the teacher" or not offload)
    return {"parameters_count": total, "trainable": trainable, "ddp": ddp, "sharded": sharded, "gathered": whole,
            "host": sum(v for k, v in sharded.items() if k != "the teacher") if offload else 0,
            "fits": sum(ddp.values()) <= device_memory, "fits_sharded": on_device <= device_memory, "sharded_on_device": on_device}


def gathered(config, amp):
    """Bytes a sharded process gathers whole during a step (shard.py): the embeddings for the whole
    step, the layer that runs and the next one, prefetched, in the dtype the layers compute in."""
    with torch.device("meta"):
        encoder = Encoder(config)
    size = 2 if amp in ("bf16", "fp16") else 4
    layers = min(2, config.num_layers)
    return size * (sum(p.numel() for p in encoder.embeddings.parameters()) + layers * sum(p.numel() for p in encoder.layers[0].parameters()))


def report(name, config, processes, amp, freeze_embeddings, device_memory, teacher=False, shard=False, offload=False):
    """The plan as the lines train.py --dry-run prints; its verdict for the run's mode (--shard or DDP)."""
    p = plan(config, processes, amp, freeze_embeddings, device_memory, teacher, offload)
    compute = {"none": "float32", "bf16": "bf16 (autocast)", "fp16": "fp16 (autocast)", "auto": "as --amp auto chooses; float32 counted"}[amp]
    parts = lambda sizes: ", ".join(f"{part} {size / GB:.1f} GB" for part, size in sizes.items())
    ddp, sharded, whole = sum(p["ddp"].values()), sum(p["sharded"].values()), p["gathered"]
    lines = [f"memory plan: {name}, {p['parameters_count'] / 1e9:.2f} B parameters ({p['trainable'] / 1e9:.2f} B trained), "
             f"{processes} process{'es' * (processes > 1)}, float32 weights computing in {compute}",
             f"  DDP, per process: {parts(p['ddp'])}: {ddp / GB:.1f} GB before activations",
             f"  sharded over {processes} (--shard), per process: {parts(p['sharded'])}: {sharded / GB:.1f} GB, and gathered whole "
             f"during a step: {whole / GB:.1f} GB (the embeddings, the layer that runs and the next, prefetched)"]
    if offload:
        lines.append(f"  with --offload, the parameters, gradients and moments ({p['host'] / GB:.1f} GB) are in host memory: "
                     f"the device holds {p['sharded_on_device'] / GB:.1f} GB")
    held = p["sharded_on_device"] if shard else ddp
    if held <= device_memory:
        lines.append(f"  {'sharded, it' if shard else 'it'} fits the device's {device_memory / GB:.0f} GB with {(device_memory - held) / GB:.1f} GB "
                     "left for activations (--gradient-checkpointing keeps one layer's; --batch-size and --grad-accum set them)")
    elif shard:
        lines.append(f"  does not fit the device's {device_memory / GB:.0f} GB even sharded over {processes} process{'es' * (processes > 1)}: run "
                     "more processes (more nodes)" + ("; --offload keeps the parts in host memory" if not offload else "")
                     + ("; --freeze-embeddings trains fewer parameters" if not freeze_embeddings else ""))
    else:
        what = (f"sharded training (--shard) would hold {(sharded + whole) / GB:.1f} GB per process, which fits"
                if sharded + whole <= device_memory else f"even sharded over {processes} processes it would not: use more processes")
        lines.append(f"  does not fit the device's {device_memory / GB:.0f} GB under DDP: {what}; under DDP each process holds "
                     "the whole model, and --gradient-checkpointing saves activations only, not these"
                     + ("; --freeze-embeddings trains fewer parameters" if not freeze_embeddings else ""))
    return "\n".join(lines)


def device_memory(flag_gb):
    """The memory planned for: --device-memory, else the CUDA device's, else 80 GB (an H100's)."""
    if flag_gb:
        return flag_gb * GB
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory
    return 80 * GB


def dry_run(args, model_dir):
    """train.py --dry-run: the plan for --model and --processes, from config.json alone."""
    import os
    processes = args.processes or int(os.environ.get("WORLD_SIZE", "1"))
    config = Config.from_directory(model_dir)
    print(report(args.model or "the default model", config, processes, args.amp, args.freeze_embeddings,
                 device_memory(args.device_memory), teacher=bool(args.teacher), shard=args.shard, offload=args.offload))
