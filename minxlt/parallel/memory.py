"""What a run holds in memory per process, planned before it starts (train.py --dry-run): the
model is built on the `meta` device from config.json alone, with no weights and no data read, and
its parameters counted. Under AMP the parameters stay in float32 (autocast computes in bf16 or
fp16); so do their gradients; AdamW keeps two float32 moments; DDP adds a float32 bucket per
gradient for its all-reduce. That is 16 bytes per trainable parameter, and 4 more under DDP,
before any activation. Sharded training (--shard, shard.py) holds about 1/N of each on each of N
processes (each parameter's rows cut in N), and gathers the embeddings and a layer or two at a
time whole (the one that runs, the next one prefetched). `python -m bench.shard` measures these
on real processes, each phase of a run with --phases.
"""
import json
import math

import torch

from minxlt.checkpoints import weights
from model import Config, Encoder

GB = 1e9


def meta_encoder(config):
    """The encoder of `config` built on the meta device: its parameters' shapes, no memory."""
    with torch.device("meta"):
        return Encoder(config)


def parameter_shapes(encoder, freeze_embeddings=False):
    """[(shape, trained)] of every parameter of `encoder`."""
    frozen = encoder.embeddings.word.weight if freeze_embeddings else None
    return [(tuple(p.shape), p is not frozen) for p in encoder.parameters()]


def count_parameters(config, freeze_embeddings=False):
    """(parameters, trainable parameters) of the encoder of `config`."""
    shapes = parameter_shapes(meta_encoder(config), freeze_embeddings)
    return sum(math.prod(s) for s, _ in shapes), sum(math.prod(s) for s, trained in shapes if trained)


def first_shard(shape, processes):
    """Elements of a parameter that the first of N processes holds when sharded (FSDP2): its first
    dimension cut into chunks of ceil(rows / N), the first process's chunk the largest."""
    return weights.chunk(shape[0], processes) * math.prod(shape[1:]) if shape else math.prod(shape)


def plan(config, processes, amp="none", freeze_embeddings=False, device_memory=80 * GB, teacher=False, offload=False, grad_accum=1,
         eval_bf16=False, embeddings_unit=False):
    """{name: bytes per process} under DDP, the same sharded over the processes (FSDP2 pads every
    process's part of a parameter to the first's, ceil(rows / N) rows), and whether each fits
    `device_memory`; `teacher`: a float32 teacher model of the same size (--teacher), whole on every
    process under DDP, sharded like the student under --shard. A sharded run reduce-scatters every
    micro-step (--grad-accum): no whole gradient is kept, though the rows of each are held through
    the next micro-step's forward. It loads its own rows only, and tests OUT/best sharded (the
    parameters twice) once AdamW's moments are freed. `offload` (--offload): the sharded parts, the
    teacher's too, are in host memory ("host"), the device holding what is gathered. `eval_bf16`
    (the default; not with --eval-float32): the evaluation on dev computes in bf16, without a float32 copy. `embeddings_unit`
    (--shard-embeddings): the embeddings are not held while the layers run."""
    encoder = meta_encoder(config)
    shapes = parameter_shapes(encoder, freeze_embeddings)
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
    moments = step_moments(encoder, amp, processes, freeze_embeddings, teacher, embeddings_unit)
    received = 4 * max(first_shard(s, processes) for s, _ in shapes) if processes > 1 else 0  # process 0's chunk from another
    copy = sharded["parameters"] if amp == "bf16" and not eval_bf16 else 0  # the float32 copy a bf16 run evaluates (shard.evaluated)
    phases = {"ddp": phase_bytes(ddp, NOTHING_GATHERED, 0), "sharded": phase_bytes(sharded, moments, in_forward(encoder, 4, processes), offload,
                                                                    received, grad_accum > 1, copy,
                                                                    in_forward(encoder, 2, processes) if eval_bf16 else None)}
    return {"parameters_count": total, "trainable": trainable, "ddp": ddp, "sharded": sharded, "step_forward": moments[0], "step_backward": max(moments[1:3]),
            "host": sum(sharded.values()) if offload else 0, "phases": phases,
            "fits": max(phases["ddp"].values()) <= device_memory, "fits_sharded": max(phases["sharded"].values()) <= device_memory,
            "sharded_on_device": phases["sharded"]["step"]}


NOTHING_GATHERED = (0, 0, 0, 0)  # step_moments of a DDP step, which gathers and reduce-scatters nothing


def phase_bytes(parts, step_extra, test_extra, offload=False, received=0, accumulates=False, evaluation_copy=0, evaluation_extra=None):
    """{phase: bytes on the device} of one process, from its parts (plan's "ddp" or "sharded"):
      - loading: the parameters (and a teacher's);
      - the step: all the parts and, at its peaks, what it gathers and reduce-scatters (`step_extra`,
        step_moments): in forward, where the gradients' rows are freed unless a micro-step's are
        kept for the next (`accumulates`), and in backward;
      - the evaluation on dev, between steps: all but the gradients, what a float32 forward gathers
        (`test_extra`; `evaluation_extra` in bf16, without --eval-float32) and, where the run computes in
        bf16, the float32 copy it evaluates (`evaluation_copy`, shard.evaluated);
      - the test, once AdamW's moments and the gradients are freed: the parameters twice (OUT/best
        loaded beside them, in float32), the teacher, and what a float32 forward gathers;
      - writing OUT/best, between steps: all but the gradients, process 0 gathering each tensor into
        host memory a process's rows at a time (`received`: the chunk it receives them in).
    --offload: every part is on the host, the teacher's and the tested model's too. bench/shard.py
    --phases measures these."""
    kept = lambda name: 0 if offload else parts.get(name, 0)
    params, teacher, buckets = kept("parameters"), kept("the teacher"), kept("DDP's gradient buckets")
    forward, in_a_layer, at_the_root, root_rows = step_extra
    every = sum(kept(name) for name in parts)
    return {"loading": params + teacher,
            "step": max(every - (0 if accumulates else kept("gradients")) + forward, every + in_a_layer,
                        every + at_the_root - (0 if offload or accumulates else root_rows)),
            "dev evaluation": params + kept("AdamW moments") + teacher + buckets + (0 if offload else evaluation_copy)
            + (test_extra if evaluation_extra is None else evaluation_extra),
            "test": 2 * params + teacher + buckets + test_extra,
            "writing OUT/best": params + kept("AdamW moments") + teacher + buckets + received}


def dtype_bytes(amp):
    """Bytes of a value in the dtype a sharded run's layers compute in."""
    return 2 if amp in ("bf16", "fp16") else 4


def unit_sizes(encoder):
    """(values in the embeddings, values in one layer) of `encoder`: the root's largest part and a layer unit."""
    return sum(p.numel() for p in encoder.embeddings.parameters()), sum(p.numel() for p in encoder.layers[0].parameters())


def in_forward(encoder, size, processes, embeddings_unit=False):
    """Bytes a sharded process gathers at most in a forward pass (shard.py, FSDP2) of `encoder`
    (meta_encoder), `size` bytes a value: the root's weights (the embeddings, gathered for the whole
    step) and, over several processes, the buffer they were gathered in, which FSDP2 keeps until the
    next unit's are copied out; then a layer's weights and buffer likewise, the next layer prefetched.
    `embeddings_unit` (--shard-embeddings): the embeddings released after their forward, their
    buffer kept until the first layer's weights are copied out."""
    root, layer = unit_sizes(encoder)
    copies = 2 if processes > 1 else 1
    layers = min(copies + 1, len(encoder.layers)) * layer
    if embeddings_unit:
        return size * max(copies * root, (copies - 1) * root + layers)
    return size * (copies * root + layers)


def step_moments(encoder, amp, processes, freeze_embeddings=False, teacher=False, embeddings_unit=False):
    """(forward, in a layer, at the root, the root's gradient rows): bytes a sharded process holds
    beyond its parts at a step's peaks (shard.py, FSDP2). In forward, what it gathers (in_forward),
    and a teacher's forward in float32. In backward, two moments: while a layer runs backward, the
    embeddings and two layers gathered and the layer's whole gradient, then FSDP2's float32 buffer
    that reduce-scatters it; at the end, the root's whole gradient (the embeddings'; none for the
    words with --freeze-embeddings) beside its whole weights, which are released before the float32
    buffer is filled from the gradient; the root's own gradient rows, a part of the gradients, do
    not exist yet then, unless an earlier micro-step made them (--grad-accum; phase_bytes) (with
    --shard-embeddings, the embeddings' unit, gathered again for its backward: the same).
    Gradients in the dtype the layers compute in."""
    size = dtype_bytes(amp)
    frozen = encoder.embeddings.word.weight if freeze_embeddings else None
    root, layer = unit_sizes(encoder)
    trained = [p for p in encoder.embeddings.parameters() if p is not frozen]
    root_trained = sum(p.numel() for p in trained)
    root_rows = 4 * sum(first_shard(tuple(p.shape), processes) for p in trained)
    in_a_layer = size * ((0 if embeddings_unit else root) + min(2, len(encoder.layers)) * layer) + (size + 4) * layer
    at_the_root = max(size * (root + root_trained), (size + 4) * root_trained)
    forward = in_forward(encoder, size, processes, embeddings_unit) + (in_forward(encoder, 4, processes) if teacher else 0)
    return forward, in_a_layer, at_the_root, root_rows


def report(name, config, processes, amp, freeze_embeddings, device_memory, teacher=False, shard=False, offload=False, grad_accum=1,
           eval_bf16=False, embeddings_unit=False):
    """The plan as the lines train.py --dry-run prints; its verdict for the run's mode (--shard or DDP)."""
    p = plan(config, processes, amp, freeze_embeddings, device_memory, teacher, offload, grad_accum, eval_bf16, embeddings_unit)
    compute = {"none": "float32", "bf16": "bf16 (autocast)", "fp16": "fp16 (autocast)", "auto": "as --amp auto chooses; float32 counted"}[amp]
    parts = lambda sizes: ", ".join(f"{part} {size / GB:.1f} GB" for part, size in sizes.items())
    ddp, sharded = sum(p["ddp"].values()), sum(p["sharded"].values())
    lines = [f"memory plan: {name}, {p['parameters_count'] / 1e9:.2f} B parameters ({p['trainable'] / 1e9:.2f} B trained), "
             f"{processes} process{'es' * (processes > 1)}, float32 weights computing in {compute}",
             f"  DDP, per process: {parts(p['ddp'])}: {ddp / GB:.1f} GB before activations",
             f"  sharded over {processes} (--shard), per process: {parts(p['sharded'])}: {sharded / GB:.1f} GB; beyond these at "
             f"most {p['step_forward'] / GB:.1f} GB in forward (the embeddings and the layers gathered whole, with the buffers "
             f"they were gathered in{', and the teacher' * teacher}) and {p['step_backward'] / GB:.1f} GB in backward (a unit's whole "
             "gradient beside its weights, or its float32 reduce-scatter buffer; the embeddings' the largest, before their rows are kept)"]
    if offload:
        lines.append(f"  with --offload, the parameters, gradients and moments{' and the teacher' * teacher} ({p['host'] / GB:.1f} GB) "
                     "are in host memory: "
                     f"the device holds {p['sharded_on_device'] / GB:.1f} GB")
    phases = p["phases"]["sharded" if shard else "ddp"]
    lines.append(f"  {'sharded' if shard else 'DDP'}, each phase on the device: " + parts(phases) + " (the largest decides)")
    if max(phases.values()) <= device_memory:  # every phase fits; the step's activations take what it leaves
        lines.append(f"  {'sharded, it' if shard else 'it'} fits the device's {device_memory / GB:.0f} GB with "
                     f"{(device_memory - phases['step']) / GB:.1f} GB "
                     "left for activations (--gradient-checkpointing keeps one layer's; --batch-size and --grad-accum set them)"
                     + (f"; the evaluation on dev leaves {(device_memory - phases['dev evaluation']) / GB:.1f} GB (without --eval-float32 it "
                        "evaluates in bf16, without a float32 copy)" if shard and amp == "bf16" and phases["dev evaluation"] > phases["step"] else ""))
    elif shard:
        lines.append(f"  does not fit the device's {device_memory / GB:.0f} GB even sharded over {processes} process{'es' * (processes > 1)}: run "
                     "more processes (more nodes)" + ("; --offload keeps the parts in host memory" if not offload else "")
                     + ("; without --eval-float32 the evaluation needs no float32 copy" if amp == "bf16" and not eval_bf16 else "")
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
                                   bool(getattr(args, "teacher", None)), args.offload, args.grad_accum, not args.eval_float32, args.shard_embeddings),
                              model=args.model, processes=processes,
                              shard=args.shard)))
        return
    print(report(args.model or "the default model", config, processes, args.amp, args.freeze_embeddings,
                 device_memory(args.device_memory), teacher=bool(getattr(args, "teacher", None)), shard=args.shard, offload=args.offload,
                 grad_accum=args.grad_accum, eval_bf16=not args.eval_float32, embeddings_unit=args.shard_embeddings))
