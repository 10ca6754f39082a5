"""What a run holds in memory per process, planned before it starts (train.py --dry-run): the
model is built on the `meta` device from config.json alone, with no weights and no data read, and
its parameters counted. Under AMP the parameters stay in float32 (autocast computes in bf16 or
fp16); so do their gradients; AdamW keeps two float32 moments; DDP adds a float32 bucket per
gradient for its all-reduce. That is 16 bytes per trainable parameter, and 4 more under DDP,
before any activation. Sharded training (--shard, shard.py) holds about 1/N of each on each of N
processes (each parameter's rows cut in N), and gathers the embeddings and two layers at a time
whole (the one that runs, the next one prefetched). bench_shard.py measures these on real processes.
"""
import json
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
    `device_memory`; `teacher`: a float32 teacher model of the same size (--teacher), whole on every
    process under DDP, sharded like the student under --shard. --grad-accum adds nothing: a sharded
    run reduce-scatters every micro-step. The step is the peak of a sharded run: it loads its own
    rows only, and tests OUT/best sharded (the parameters twice) once AdamW's moments are freed.
    `offload` (--offload): the sharded parts, the teacher's too, are in host memory ("host"), the
    device holding what is gathered."""
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
        sharded["the teacher"] = 4 * mine  # sharded as it loads, in float32 (teacher.py)
    whole, scattered = gathered(config, amp), reduce_scattered(config, amp, freeze_embeddings)
    on_device = whole + scattered + (0 if offload else sum(sharded.values()))
    phases = {"ddp": phase_bytes(ddp, 0, 0), "sharded": phase_bytes(sharded, whole + scattered, gathered(config, "none"), offload)}
    return {"parameters_count": total, "trainable": trainable, "ddp": ddp, "sharded": sharded, "gathered": whole,
            "reduce_scattered": scattered,
            "host": sum(sharded.values()) if offload else 0, "phases": phases,
            "fits": max(phases["ddp"].values()) <= device_memory, "fits_sharded": max(phases["sharded"].values()) <= device_memory,
            "sharded_on_device": on_device}


def phase_bytes(parts, gathered_in_step, gathered_in_test, offload=False):
    """{phase: bytes on the device} of one process, from its parts (plan's "ddp" or "sharded"):
    loading holds the parameters (and a teacher's); the step all the parts and what it gathers;
    the test, once AdamW's moments and the gradients are freed, the parameters twice (OUT/best
    loaded beside them, in float32) and the teacher, gathering in float32; writing OUT/best, between
    steps (the gradients freed), all but the gradients, process 0 gathering each tensor into host
    memory a process's rows at a time. --offload: every part is on the host, the teacher's and the
    tested model's too."""
    kept = lambda name: 0 if offload else parts.get(name, 0)
    params, teacher, buckets = kept("parameters"), kept("the teacher"), kept("DDP's gradient buckets")
    return {"loading": params + teacher,
            "step": sum(kept(name) for name in parts) + gathered_in_step,
            "test": 2 * params + teacher + buckets + gathered_in_test,
            "writing OUT/best": params + kept("AdamW moments") + teacher + buckets}


def gathered(config, amp):
    """Bytes a sharded process gathers whole during a step (shard.py): the embeddings for the whole
    step, the layer that runs and the next one, prefetched, in the dtype the layers compute in."""
    with torch.device("meta"):
        encoder = Encoder(config)
    size = 2 if amp in ("bf16", "fp16") else 4
    layers = min(2, config.num_layers)
    return size * (sum(p.numel() for p in encoder.embeddings.parameters()) + layers * sum(p.numel() for p in encoder.layers[0].parameters()))


def reduce_scattered(config, amp, freeze_embeddings=False):
    """Bytes a sharded process holds for a moment in backward beyond its parts (shard.py): a unit's
    whole gradient, in the dtype it computes in, and FSDP2's float32 buffer that reduce-scatters it,
    before each process keeps its rows. The largest unit counts: the root, for the embeddings
    (XLM-R's 250,002-word vocabulary; none for the words with --freeze-embeddings), or a layer.
    From FSDP2's algorithm, not measured."""
    with torch.device("meta"):
        encoder = Encoder(config)
    frozen = encoder.embeddings.word.weight if freeze_embeddings else None
    root = sum(p.numel() for p in encoder.embeddings.parameters() if p is not frozen)
    largest = max(root, sum(p.numel() for p in encoder.layers[0].parameters()))
    return (4 + (2 if amp in ("bf16", "fp16") else 4)) * largest


def report(name, config, processes, amp, freeze_embeddings, device_memory, teacher=False, shard=False, offload=False):
    """The plan as the lines train.py --dry-run prints; its verdict for the run's mode (--shard or DDP)."""
    p = plan(config, processes, amp, freeze_embeddings, device_memory, teacher, offload)
    compute = {"none": "float32", "bf16": "bf16 (autocast)", "fp16": "fp16 (autocast)", "auto": "as --amp auto chooses; float32 counted"}[amp]
    parts = lambda sizes: ", ".join(f"{part} {size / GB:.1f} GB" for part, size in sizes.items())
    ddp, sharded = sum(p["ddp"].values()), sum(p["sharded"].values())
    lines = [f"memory plan: {name}, {p['parameters_count'] / 1e9:.2f} B parameters ({p['trainable'] / 1e9:.2f} B trained), "
             f"{processes} process{'es' * (processes > 1)}, float32 weights computing in {compute}",
             f"  DDP, per process: {parts(p['ddp'])}: {ddp / GB:.1f} GB before activations",
             f"  sharded over {processes} (--shard), per process: {parts(p['sharded'])}: {sharded / GB:.1f} GB, and gathered whole "
             f"during a step: {p['gathered'] / GB:.1f} GB (the embeddings, the layer that runs and the next, prefetched), and "
             f"{p['reduce_scattered'] / GB:.1f} GB for a moment in backward (the embeddings' whole gradient and its reduce-scatter buffer)"]
    if offload:
        lines.append(f"  with --offload, the parameters, gradients and moments{' and the teacher' * teacher} ({p['host'] / GB:.1f} GB) "
                     "are in host memory: "
                     f"the device holds {p['sharded_on_device'] / GB:.1f} GB")
    phases = p["phases"]["sharded" if shard else "ddp"]
    lines.append(f"  {'sharded' if shard else 'DDP'}, each phase on the device: " + parts(phases) + " (the largest decides)")
    if max(phases.values()) <= device_memory:  # every phase fits; the step's activations take what it leaves
        lines.append(f"  {'sharded, it' if shard else 'it'} fits the device's {device_memory / GB:.0f} GB with "
                     f"{(device_memory - phases['step']) / GB:.1f} GB "
                     "left for activations (--gradient-checkpointing keeps one layer's; --batch-size and --grad-accum set them)")
    elif shard:
        lines.append(f"  does not fit the device's {device_memory / GB:.0f} GB even sharded over {processes} process{'es' * (processes > 1)}: run "
                     "more processes (more nodes)" + ("; --offload keeps the parts in host memory" if not offload else "")
                     + ("; --freeze-embeddings trains fewer parameters" if not freeze_embeddings else ""))
    else:
        what = (f"sharded training (--shard) would hold {max(p['phases']['sharded'].values()) / GB:.1f} GB per process, which fits"
                if p["fits_sharded"] else f"even sharded over {processes} processes it would not: use more processes")
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
    if args.json:  # the same, for scripts: bytes per process
        print(json.dumps(dict(plan(config, processes, args.amp, args.freeze_embeddings, device_memory(args.device_memory),
                                   bool(args.teacher), args.offload), model=args.model, processes=processes, shard=args.shard)))
        return
    print(report(args.model or "the default model", config, processes, args.amp, args.freeze_embeddings,
                 device_memory(args.device_memory), teacher=bool(args.teacher), shard=args.shard, offload=args.offload))
