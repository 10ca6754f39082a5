"""What a run holds in memory per process, planned before it starts (train.py --dry-run): the
model is built on the `meta` device from config.json alone, with no weights and no data read, and
its parameters counted. Under AMP the parameters stay in float32 (autocast computes in bf16 or
fp16); so do their gradients; AdamW keeps two float32 moments; DDP adds a float32 bucket per
gradient for its all-reduce. That is 16 bytes per trainable parameter, and 4 more under DDP,
before any activation. Sharded training (FSDP) would hold 1/N of each on each of N processes.
"""
import torch

from model import Config, Encoder

GB = 1e9


def count_parameters(config, freeze_embeddings=False):
    """(parameters, trainable parameters) of the encoder of `config`, built on the meta device."""
    with torch.device("meta"):
        encoder = Encoder(config)
    total = sum(p.numel() for p in encoder.parameters())
    frozen = encoder.embeddings.word.weight.numel() if freeze_embeddings else 0
    return total, total - frozen


def plan(config, processes, amp="none", freeze_embeddings=False, device_memory=80 * GB, teacher=False):
    """{name: bytes per process} under DDP, the same sharded over the processes, and whether each
    fits `device_memory`; `teacher`: a float32 teacher model of the same size on every process (--teacher)."""
    total, trainable = count_parameters(config, freeze_embeddings)
    ddp = {"parameters": 4 * total, "gradients": 4 * trainable, "AdamW moments": 8 * trainable}
    if teacher:
        ddp["the teacher"] = 4 * total
    if processes > 1:
        ddp["DDP's gradient buckets"] = 4 * trainable
    sharded = {name: size if name == "the teacher" else size / processes for name, size in ddp.items()
               if name != "DDP's gradient buckets"}
    return {"parameters_count": total, "trainable": trainable, "ddp": ddp, "sharded": sharded,
            "fits": sum(ddp.values()) <= device_memory, "fits_sharded": sum(sharded.values()) <= device_memory}


def report(name, config, processes, amp, freeze_embeddings, device_memory, teacher=False):
    """The plan as the lines train.py --dry-run prints."""
    p = plan(config, processes, amp, freeze_embeddings, device_memory, teacher)
    compute = {"none": "float32", "bf16": "bf16 (autocast)", "fp16": "fp16 (autocast)", "auto": "as --amp auto chooses"}[amp]
    parts = lambda sizes: ", ".join(f"{part} {size / GB:.1f} GB" for part, size in sizes.items())
    lines = [f"memory plan: {name}, {p['parameters_count'] / 1e9:.2f} B parameters ({p['trainable'] / 1e9:.2f} B trained), "
             f"{processes} process{'es' * (processes > 1)}, float32 weights computing in {compute}",
             f"  DDP, per process: {parts(p['ddp'])}: {sum(p['ddp'].values()) / GB:.1f} GB before activations",
             f"  sharded over {processes} (FSDP), per process: {parts(p['sharded'])}: {sum(p['sharded'].values()) / GB:.1f} GB"]
    if p["fits"]:
        lines.append(f"  fits the device's {device_memory / GB:.0f} GB with {(device_memory - sum(p['ddp'].values())) / GB:.1f} GB "
                     "left for activations (--gradient-checkpointing keeps one layer's; --batch-size and --grad-accum set them)")
    else:
        what = (f"sharded training would hold {sum(p['sharded'].values()) / GB:.1f} GB per process, which fits"
                if p["fits_sharded"] else f"even sharded over {processes} processes it would not: use more processes")
        lines.append(f"  does not fit the device's {device_memory / GB:.0f} GB under DDP: {what}; minxlt's processes each hold "
                     "the whole model (DDP), and --gradient-checkpointing saves activations only, not these"
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
                 device_memory(args.device_memory), teacher=bool(args.teacher)))
