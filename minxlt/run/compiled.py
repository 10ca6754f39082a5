"""The compiled training step (train.py --compile, opt-in until a GPU measures it), and what it needs that a
reader of train_step can skip. At the papers' batch sizes (4 to 64 texts) an eager step is almost
all kernel launches (about 1,100 a step at XLM-R base's shapes, batch 32); compiled, the method's
forward, loss and backward run as two CUDA graphs.

  - Static shapes. Each batch is padded to a multiple of --bucket tokens (16), at most --max-length
    rounded up (the tokenizer's padded_to, set where the run's flags are resolved), and to its full
    size, a short last batch filled with weight-0 examples (bookkeeping.step_batches, as data.shard
    fills a process's share): a whole run sees a handful of shapes.
  - The whole method compiled: each phase's loss, the method's forward and loss in one graph, whose
    backward AOTAutograd compiles with it; fullgraph=True in one process (no graph break, no host
    sync: tests/test_compiled.py checks every method at every level). CUDA graphs (mode
    reduce-overhead) where a step is one micro-batch on one process; with --grad-accum, CUDA graphs
    would hand a micro-batch's gradients to the parameters from their own memory, which the next
    micro-batch's replay overwrites (pytorch/pytorch#96693, #169545), so the default mode compiles
    without them. Under DDP (no fullgraph) DDP's own forward runs eagerly between graphs, for
    dynamo cannot trace its reducer: the model's forward is a graph, split at DDP's gradient
    buckets, and the loss after it another, which compiles once more at the second length (its
    inputs are DDP's outputs, which no one marks dynamic; dynamo then does). Sharded, each encoder layer is compiled on its own,
    FSDP2 gathering around it: one graph serves every layer, and evaluation, without gradients,
    one more.
  - Bounded recompiles. The batch's lengths are dynamic from the first call, so that one graph
    serves every bucket (CUDA graphs record one replay per bucket): a phase compiles once per kind
    of batch it has (Unicoder's five tasks: five). A function compiled more often than its limit
    stops the run, rather than go on uncompiled as torch does after 8 by default.

Why --compile gained nothing before (51 ms a step eager, 52.8 compiled, on an H200): not a fall
back to eager. The old flag compiled the model alone, torch.compile(model, dynamic=True), and on the
CPU it made one graph over 120 steps of SIB-200 with evaluations between, with no graph break and
no recompile (torch._dynamo's counters). But it compiled no CUDA graphs: the model's forward and
backward became fewer, fused kernels, each still launched from the host, with the guards and launch
arguments of dynamic shapes computed there, and the loss, clipping and AdamW stayed eager. A step
that the host bounds at batch 32 stays so; CUDA graphs (one launch for a graph's hundreds of
kernels) need static shapes, hence the buckets and full batches. bench/gpu.sh measures the old way
(bench.train_step --compile-model) beside this one.
"""
import argparse
from dataclasses import replace

import torch

from minxlt.run import cli

BACKEND = "inductor"  # the tests trace with "eager" (the graph run as it is): inductor's code takes minutes to build on a CPU
MODES = ("reduce-overhead", "default", "max-autotune-no-cudagraphs", "max-autotune")


def add_arguments(group, add):
    add(group, "--compile", False, help="compile each step (compiled.py)", action=argparse.BooleanOptionalAction)
    add(group, "--compile-mode", help="torch.compile's (default: CUDA graphs)", choices=MODES, metavar="MODE")
    add(group, "--bucket", help="lengths a multiple of N (compiled: 16)", type=cli.non_negative_int)


def resolve(values, run):
    """--compile, --compile-mode and --bucket as the device and the run have them (flags.resolve)."""
    if values["bucket"] is None:
        values["bucket"] = 16 if values["compile"] else 0
    if values["compile"] and values["compile_mode"] is None:
        one_graph = run.device.startswith("cuda") and run.world_size == 1 and values["grad_accum"] == 1 and not values["shard"]
        values["compile_mode"] = "reduce-overhead" if one_graph else "default"
    if values["bucket"]:
        run = replace(run, tokenizer=run.tokenizer.padded_to(values["bucket"], run.max_positions))
    return run


def problem(settings):
    """What --compile, --compile-mode and --bucket cannot do with the other settings, or None."""
    if settings.compile_mode and not settings.compile:
        return "--compile-mode chooses how --compile compiles: add --compile"
    if settings.compile_mode == "reduce-overhead" and (settings.grad_accum > 1 or settings.shard):
        return ("--compile-mode reduce-overhead (CUDA graphs) with --grad-accum or --shard: the graphs' memory would hold "
                "the gradients that the next micro-batch overwrites; leave --compile-mode to its default")
    return None


def buckets(settings):
    """How many lengths the batches of a run can have: the multiples of --bucket up to --max-length."""
    return -(-settings.max_length // settings.bucket) if settings.bucket else None


def compiled_phases(settings, phases, encoder, world_size=1):
    """The phases, each with its loss compiled as --compile asks; as they are without it. Sharded
    (--shard), the encoder's layers are compiled in place instead, each on its own."""
    return [replace(phase, loss=compiled_loss(settings, phase.loss, encoder, world_size)) for phase in phases]


def compiled_loss(settings, loss, encoder, world_size=1):
    """loss(model, batch) compiled, fullgraph in one process; with CUDA graphs, each call starts a
    new step, after which the last step's outputs (its loss, read already) are dead and their
    memory is reused. The batch's lengths are dynamic from the first call, so that one graph serves
    every bucket: dimension 1 of its (B, T, ...) tensors, and of a vector, its one (Unicoder's masked
    positions, as many as its bucket holds; a per-example vector, B long in every full batch, may
    then be B as a symbol in the graph, which costs nothing but a guard)."""
    if not settings.compile:
        return loss
    torch._dynamo.config.recompile_limit = max(8, 2 * (buckets(settings) or 1))  # a phase may have several kinds of batch (Unicoder: 5)
    torch._dynamo.config.fail_on_recompile_limit_hit = True  # past it, stop: never fall back to eager silently
    options = {"mode": settings.compile_mode} if BACKEND == "inductor" else {}
    if settings.shard:  # FSDP2 gathers each layer around its compiled forward
        for layer in encoder.layers:
            if not getattr(layer, "_compiled_call_impl", None):
                layer.compile(backend=BACKEND, **options)
        return loss
    compiled = torch.compile(loss, fullgraph=world_size == 1, backend=BACKEND, **options)  # DDP's forward: between graphs
    graphs = settings.compile_mode == "reduce-overhead" and settings.device.startswith("cuda")

    def step(model, batch):
        for value in batch.values():
            if torch.is_tensor(value) and value.dim() >= 1:
                torch._dynamo.maybe_mark_dynamic(value, min(1, value.dim() - 1))
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        return compiled(model, batch)
    return step


def compiles():
    """How many graphs have been compiled in this process so far (torch._dynamo's count)."""
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]
