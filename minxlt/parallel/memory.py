"""What a run holds per process, planned from config.json alone on the meta device (train.py --dry-run): float32
parameters and gradients, AdamW's two moments and DDP's buckets (16 + 4 bytes a trained parameter), about 1/N of each
sharded, plus what FSDP2 gathers. bench/shard.py measures it."""
import json
import math
import os

import torch

from minxlt.checkpoints import weights
from model import Config, Encoder

GB = 1e9


def count_parameters(config, freeze_embeddings=False):
    """(parameters, trainable parameters) of the encoder of `config`."""
    counts = plan(config, 1, freeze_embeddings=freeze_embeddings)
    return counts["parameters_count"], counts["trainable"]


def first_shard(shape, processes):
    """Elements of a parameter the first of N processes holds sharded (FSDP2: ceil(rows / N) rows)."""
    return weights.chunk(shape[0], processes) * math.prod(shape[1:]) if shape else math.prod(shape)


def plan(config, processes, amp="none", freeze_embeddings=False, device_memory=80 * GB, teacher=False, offload=False,
         grad_accum=1, eval_bf16=False, embeddings_unit=False):
    """{part: bytes per process} under DDP and sharded (each part padded to the first process's rows), each
    phase's bytes (phase_bytes) and whether they fit `device_memory`; the flags are train.py's."""
    with torch.device("meta"):
        encoder = Encoder(config)  # shapes, no memory
    frozen = encoder.embeddings.word.weight if freeze_embeddings else None
    shapes = [(tuple(p.shape), p is not frozen) for p in encoder.parameters()]
    total, trainable = sum(math.prod(s) for s, _ in shapes), sum(math.prod(s) for s, trained in shapes if trained)
    mine = sum(first_shard(s, processes) for s, _ in shapes)
    mine_trained = sum(first_shard(s, processes) for s, trained in shapes if trained)
    ddp = {"parameters": 4 * total, "gradients": 4 * trainable, "AdamW moments": 8 * trainable}
    sharded = {"parameters": 4 * mine, "gradients": 4 * mine_trained, "AdamW moments": 8 * mine_trained}
    if teacher:  # whole under DDP; sharded as it loads, in float32 (teacher.py)
        ddp["the teacher"], sharded["the teacher"] = 4 * total, 4 * mine
    if processes > 1:
        ddp["DDP's gradient buckets"] = 4 * trainable
    moments = step_moments(encoder, amp, processes, freeze_embeddings, teacher, embeddings_unit)
    # process 0's chunk received from another as it writes OUT/best; the float32 copy a bf16 run evaluates
    received = 4 * max(first_shard(s, processes) for s, _ in shapes) if processes > 1 else 0
    copy = sharded["parameters"] if amp == "bf16" and not eval_bf16 and not offload else 0  # --offload: on the host
    evaluation = copy + in_forward(encoder, 2 if eval_bf16 else 4, processes)
    # under DDP's autocast, the 16-bit copy of each matrix of the layers' products, saved for backward (embeddings
    # and LayerNorms compute in float32)
    cast = 2 * sum(m.weight.numel() for m in encoder.layers.modules() if isinstance(m, torch.nn.Linear))
    cast, eval_cast = cast if amp in ("bf16", "fp16") else 0, cast if eval_bf16 or amp == "fp16" else 0
    phases = {"ddp": phase_bytes(ddp, (cast, cast, 0, 0), eval_cast, evaluation_extra=eval_cast),
              "sharded": phase_bytes(sharded, moments, in_forward(encoder, 4, processes), offload, received,
                                     grad_accum > 1, evaluation)}
    return {"parameters_count": total, "trainable": trainable, "ddp": ddp, "sharded": sharded,
            "step_forward": moments[0], "step_backward": max(moments[1:3]), "autocast_copies": cast,
            "host": sum(sharded.values()) if offload else 0, "phases": phases,
            "fits": max(phases["ddp"].values()) <= device_memory,
            "fits_sharded": max(phases["sharded"].values()) <= device_memory,
            "sharded_on_device": phases["sharded"]["step"]}


def phase_bytes(parts, step_extra, test_extra, offload=False, received=0, accumulates=False, evaluation_extra=0):
    """{phase: bytes on the device} of one process from its parts (plan's "ddp" or "sharded"); what each
    phase holds is listed in docs/training.md ("Memory plan"); with --offload the parts are on the host."""
    kept = lambda name: 0 if offload else parts.get(name, 0)
    params, teacher, buckets = kept("parameters"), kept("the teacher"), kept("DDP's gradient buckets")
    forward, in_a_layer, at_the_root, root_rows = step_extra
    every = sum(kept(name) for name in parts)
    return {"loading": params + teacher,
            "step": max(every - (0 if accumulates else kept("gradients")) + forward, every + in_a_layer,
                        every + at_the_root - (0 if offload or accumulates else root_rows)),
            "dev evaluation": params + kept("AdamW moments") + teacher + buckets + evaluation_extra,
            "test": 2 * params + teacher + buckets + test_extra,
            "writing OUT/best": params + kept("AdamW moments") + teacher + buckets + received}


def unit_sizes(encoder):
    """(values in the embeddings, values in one layer) of `encoder`."""
    return (sum(p.numel() for p in encoder.embeddings.parameters()),
            sum(p.numel() for p in encoder.layers[0].parameters()))


def in_forward(encoder, size, processes, embeddings_unit=False):
    """Bytes a sharded process gathers at most in a forward pass, `size` bytes a value: the embeddings and
    (several processes) their all-gather buffer, then a layer's likewise with the next one prefetched."""
    root, layer = unit_sizes(encoder)
    copies = 2 if processes > 1 else 1
    layers = min(copies + 1, len(encoder.layers)) * layer
    if embeddings_unit:
        return size * max(copies * root, (copies - 1) * root + layers)
    return size * (copies * root + layers)


def step_moments(encoder, amp, processes, freeze_embeddings=False, teacher=False, embeddings_unit=False):
    """(forward, in a layer, at the root, the root's gradient rows): bytes a sharded process holds beyond
    its parts at a step's peaks (docs/training.md, "Memory plan"); gradients in the layers' dtype."""
    size = 2 if amp in ("bf16", "fp16") else 4  # bytes of a value in the dtype a sharded run's layers compute in
    frozen = encoder.embeddings.word.weight if freeze_embeddings else None
    root, layer = unit_sizes(encoder)
    trained = [p for p in encoder.embeddings.parameters() if p is not frozen]
    root_trained = sum(p.numel() for p in trained)
    root_rows = 4 * sum(first_shard(tuple(p.shape), processes) for p in trained)
    in_a_layer = size * ((0 if embeddings_unit else root) + min(2, len(encoder.layers)) * layer) + (size + 4) * layer
    at_the_root = max(size * (root + root_trained), (size + 4) * root_trained)
    forward = in_forward(encoder, size, processes, embeddings_unit)
    forward += in_forward(encoder, 4, processes) if teacher else 0  # a teacher's forward, in float32
    return forward, in_a_layer, at_the_root, root_rows


def dry_run(args, model_dir):
    """train.py --dry-run: the plan for --model and --processes from config.json alone, as lines (--json: the plan's
    bytes per process); the verdict for the run's mode (--shard or DDP)."""
    processes = args.processes or int(os.environ.get("WORLD_SIZE", "1"))
    config, teacher = Config.from_directory(model_dir), bool(getattr(args, "teacher", None))
    amp, freeze_embeddings, shard, offload = args.amp, args.freeze_embeddings, args.shard, args.offload
    eval_bf16 = amp == "bf16" and not args.eval_float32  # a float32 run evaluates in float32 whatever the flag
    device_memory = 80 * GB  # planned for: --device-memory, else the CUDA device's, else an H100's
    if args.device_memory:
        device_memory = args.device_memory * GB
    elif torch.cuda.is_available():
        device_memory = torch.cuda.get_device_properties(0).total_memory
    p = plan(config, processes, amp, freeze_embeddings, device_memory, teacher, offload, args.grad_accum, eval_bf16,
             args.shard_embeddings)
    if args.json:  # for scripts
        print(json.dumps(dict(p, model=args.model, processes=processes, shard=shard)))
        return
    compute = {"none": "float32", "bf16": "bf16 (autocast)", "fp16": "fp16 (autocast)",
               "auto": "as --amp auto chooses; float32 counted"}[amp]
    gb = lambda n: f"{n / GB:.1f} GB"
    parts = lambda sizes: ", ".join(f"{part} {gb(size)}" for part, size in sizes.items())
    ddp, sharded, es = sum(p["ddp"].values()), sum(p["sharded"].values()), "es" * (processes > 1)
    copies = f", and in a step the layers' 16-bit copies, {gb(p['autocast_copies'])}" if p["autocast_copies"] else ""
    lines = [f"memory plan: {args.model or 'the default model'}, {p['parameters_count'] / 1e9:.2f} B parameters "
             f"({p['trainable'] / 1e9:.2f} B trained), {processes} process{es}, float32 weights computing in {compute}",
             f"  DDP, per process: {parts(p['ddp'])}: {gb(ddp)}{copies} before activations",
             f"  sharded over {processes} (--shard), per process: {parts(p['sharded'])}: {gb(sharded)}; beyond "
             f"these at most {gb(p['step_forward'])} in forward (the embeddings and the layers gathered whole, with "
             f"the buffers they were gathered in{', and the teacher' * teacher}) and {gb(p['step_backward'])} in "
             "backward (a unit's whole gradient beside its weights, or its float32 reduce-scatter buffer; the "
             "embeddings' the largest, before their rows are kept)"]
    if offload:
        lines.append(f"  with --offload, the parameters, gradients and moments{' and the teacher' * teacher} "
                     f"({gb(p['host'])}) are in host memory: the device holds {gb(p['sharded_on_device'])}")
    phases, memory = p["phases"]["sharded" if shard else "ddp"], f"the device's {device_memory / GB:.0f} GB"
    lines.append(f"  {'sharded' if shard else 'DDP'}, each phase on the device: {parts(phases)} (the largest decides)")
    freeze = "; --freeze-embeddings trains fewer parameters" if not freeze_embeddings else ""
    if max(phases.values()) <= device_memory:  # every phase fits; the step's activations take what it leaves
        dev = shard and amp == "bf16" and phases["dev evaluation"] > phases["step"]
        lines.append(f"  {'sharded, it' if shard else 'it'} fits {memory} with {gb(device_memory - phases['step'])} "
                     "left for activations (--gradient-checkpointing keeps one layer's; --batch-size and "
                     "--grad-accum set them)" + (
                         f"; the evaluation on dev leaves {gb(device_memory - phases['dev evaluation'])} (without "
                         "--eval-float32 it evaluates in bf16, without a float32 copy)" if dev else ""))
    elif shard:
        lines.append(f"  does not fit {memory} even sharded over {processes} process{es}: run more processes "
                     "(more nodes)" + ("; --offload keeps the parts in host memory" if not offload else "")
                     + ("; without --eval-float32 the evaluation needs no float32 copy"
                        if amp == "bf16" and not eval_bf16 else "") + freeze)
    else:
        what = (f"sharded training (--shard) would hold {gb(max(p['phases']['sharded'].values()))} per process, "
                "which fits" if p["fits_sharded"]
                else f"even sharded over {processes} processes it would not: use more processes")
        lines.append(f"  does not fit {memory} under DDP: {what}; under DDP each process holds the whole model, and "
                     "--gradient-checkpointing saves activations only, not these" + freeze)
    print("\n".join(lines))
