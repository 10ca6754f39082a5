"""The compiled training step (train.py --compile, opt-in): each phase's loss and its backward, one graph, run as CUDA
graphs where a step is one micro-batch on one process; batches padded to multiples of --bucket (docs/training.md)."""
from dataclasses import replace

import torch

BACKEND = "inductor"  # the tests trace with "eager" (the graph as it is): inductor takes minutes to build on a CPU
MODES = ("reduce-overhead", "default", "max-autotune-no-cudagraphs", "max-autotune")
GRAPHS = ("reduce-overhead", "max-autotune")  # the modes that capture CUDA graphs (inductor's list_mode_options)


def resolve(values, run):
    """--compile, --compile-mode and --bucket as the device and the run have them (flags.resolve)."""
    if values["bucket"] is None:
        values["bucket"] = 16 if values["compile"] else 0
    if values["compile"] and values["compile_mode"] is None:
        one_graph = (run.device.startswith("cuda") and run.world_size == 1 and values["grad_accum"] == 1
                     and not values["shard"])
        values["compile_mode"] = "reduce-overhead" if one_graph else "default"
    if values["bucket"]:
        run = replace(run, tokenizer=run.tokenizer.padded_to(values["bucket"], run.max_positions))
    return run


def problem(settings):
    """What --compile, --compile-mode and --bucket cannot do with the other settings, or None."""
    if settings.compile_mode and not settings.compile:
        return "--compile-mode chooses how --compile compiles: add --compile"
    if settings.compile_mode in GRAPHS and (settings.grad_accum > 1 or settings.shard):
        return (f"--compile-mode {settings.compile_mode} (CUDA graphs) with --grad-accum or --shard: the graphs' "
                "memory would hold the gradients that the next micro-batch overwrites; leave --compile-mode to its "
                "default")


def buckets(settings):
    """How many lengths the batches of a run can have: the multiples of --bucket up to --max-length."""
    return -(-settings.max_length // settings.bucket) if settings.bucket else None


def compiled_phases(settings, phases, encoder, world_size=1):
    """The phases, each with its loss compiled (compiled_loss)."""
    return [replace(phase, loss=compiled_loss(settings, phase.loss, encoder, world_size)) for phase in phases]


def compiled_loss(settings, loss, encoder, world_size=1):
    """loss(model, batch) compiled, fullgraph in one process, its batch's lengths (dimension 1, or a vector's 0)
    dynamic from the first call; sharded, the encoder's layers are compiled in place instead, each on its own."""
    if not settings.compile:
        return loss
    # a phase may have several kinds of batch (Unicoder: 5); past the limit, stop: never fall back to eager silently
    torch._dynamo.config.recompile_limit = max(8, 2 * (buckets(settings) or 1))
    torch._dynamo.config.fail_on_recompile_limit_hit = True
    options = {"mode": settings.compile_mode} if BACKEND == "inductor" else {}
    if settings.shard:  # FSDP2 gathers each layer around its compiled forward
        for layer in encoder.layers:
            if not getattr(layer, "_compiled_call_impl", None):
                layer.compile(backend=BACKEND, **options)
        return loss
    compiled = torch.compile(loss, fullgraph=world_size == 1, backend=BACKEND, **options)  # DDP's forward: eager
    graphs = settings.compile_mode in GRAPHS and settings.device.startswith("cuda")

    def step(model, batch):
        for value in batch.values():
            if torch.is_tensor(value) and value.dim() >= 1:
                torch._dynamo.maybe_mark_dynamic(value, min(1, value.dim() - 1))
        if graphs:  # a new step: the last one's outputs (its loss, read already) are dead, their memory reused
            torch.compiler.cudagraph_mark_step_begin()
        return compiled(model, batch)
    return step


def compiles():
    """How many graphs have been compiled in this process so far (torch._dynamo's count)."""
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]
