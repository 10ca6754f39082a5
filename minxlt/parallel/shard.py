"""Sharded training (train.py --shard): PyTorch's fully sharded data parallel (FSDP2,
torch.distributed.fsdp.fully_shard) and its sharded checkpoints (torch.distributed.checkpoint, DCP).
A run without --shard never comes here.

Each of N processes holds 1/N of every parameter, gradient and AdamW moment (a DTensor sharded on
its first dimension). A sharded module gathers its whole parameters in its own forward (and again
in backward), and scatters the gradients' sum after backward, each process keeping its part:

  - every encoder layer is sharded on its own, so that one layer at a time is gathered, and the
    next one's all-gather is started while it computes (in forward the layer after it, in backward
    the one before: explicit prefetch); the last layer stays gathered from forward into backward;
  - the trained module as a whole is the root: the embeddings, heads and a method's own parameters
    (X-Mixup's ratio, Unicoder's W and paraphrase classifier), gathered for the whole step; with
    --shard-embeddings the embeddings are a unit of their own, gathered for their forward and their
    backward only; Unicoder's masked-LM head is a unit of its own, its tied word embeddings passed
    in by the root;
  - a layer whose sub-layers a method calls itself (X-Mixup's mixup layer, through Layer.run) is
    gathered for that call as for its forward: `run` is registered as a forward method of the unit.

Code that calls a part of the model rather than the whole (an evaluation of the encoder alone) runs
inside `gathered`, and in the task's evaluation every process runs as many batches
(methods.Run.lockstep), since each layer's forward gathers with all processes at once. Under --amp
bf16 the layers compute in bf16 (parameters gathered in bf16, where DDP's autocast keeps the
residual stream and LayerNorms in float32: the same losses to bf16's precision) and gradients are
summed in float32. Evaluation computes as the run does, in bf16; with --eval-float32 in float32,
as DDP's does then: on a float32 copy of each process's rows, made for the block (`evaluated`).

Sharded from the first byte loaded: the model is built on the meta device and sharded, then each
process makes room for its own shards and reads its own rows of each checkpoint tensor, one file
at a time (load_pretrained). A teacher (teacher.py) and the OUT/best that the test scores load
the same way (load_classifier), and run forward only, in float32.

The resume checkpoint of a sharded run is OUT/checkpoint/, a DCP checkpoint: every process writes
its own shards, and any number of processes, sharded or not, can read it (`save`, `load`); with
--async-checkpoint, in the background from a copy in host memory while training goes on.
OUT/best is written by process 0 a file at a time, each file's tensors gathered into its host
memory, one process's rows at a time (`on_first_host`): no device holds a whole tensor.
"""
import copy
import shutil
import warnings
import weakref
from concurrent.futures import Future
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException  # what a failed DCP write or read raises, on every process
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_model_state_dict, set_optimizer_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
    register_fsdp_forward_method,
)
from torch.distributed.tensor import DTensor

from minxlt.checkpoints import weights
from minxlt.parallel import distributed
from model import Classifier, Encoder


def wrap(core, encoder, amp="none", offload=False, device=None, trains=True, evaluate_in_bf16=False, embeddings_unit=False):
    """Shard `core` (the trained module, in place) over every process: each layer of `encoder`,
    then the root. `offload`: each process's part of the parameters, gradients and AdamW's moments
    in host memory (pinned, on CUDA). `device`: where the shards go (default: where `core` is; an
    encoder on the meta device is sharded there, then filled: load_pretrained). A model that only
    runs forward (`trains` False: a teacher, the tested OUT/best) releases every layer after it.
    One that trains in bf16 is evaluated in float32 (evaluated) unless `evaluate_in_bf16`
    (the default; not with --eval-float32). `embeddings_unit` (--shard-embeddings): the embeddings a unit of their own,
    gathered for their forward and again for their backward, not held while the layers run.
    Returns `core`."""
    device_given = device if device is not None else next(core.parameters()).device
    device = torch.device(device_given).type
    if not dist.is_initialized():  # one process, not started by torchrun: a group of one
        dist.init_process_group("nccl" if device == "cuda" else "gloo", store=dist.HashStore(), rank=0, world_size=1)
    mesh = init_device_mesh(device, (dist.get_world_size(),))
    # The root returns views (a Classifier's <s> vectors); no method changes them in place, which is what this warns of.
    warnings.filterwarnings("ignore", message=".*returned a view tensor", category=UserWarning)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if amp == "bf16" else MixedPrecisionPolicy()
    options = {"mesh": mesh, "mp_policy": policy, "offload_policy": CPUOffloadPolicy(pin_memory=device == "cuda") if offload else OffloadPolicy()}
    if trains and amp == "bf16" and not evaluate_in_bf16:  # evaluated in float32, on a copy made from this, before any sharding
        FLOAT32[core] = (meta_copy(core), next(name for name, m in core.named_modules() if m is encoder), device_given, offload)
    units = list(encoder.layers)
    for layer in units:  # the last stays gathered from its forward into its backward, which comes next
        fully_shard(layer, reshard_after_forward=not trains or layer is not units[-1], **options)
        register_fsdp_forward_method(layer, "run")  # gathered for X-Mixup's Eq. 2-5 as for its forward
    for before, after in zip(units, units[1:]):  # each layer's all-gather starts while its neighbour computes
        before.set_modules_to_forward_prefetch([after])
        after.set_modules_to_backward_prefetch([before])
    if getattr(encoder, "lm_head", None) is not None:  # Unicoder's: its dense layer, LayerNorm and bias gathered as it runs,
        fully_shard(encoder.lm_head, **options)  # the word embeddings it is tied to passed in by the root (Encoder.mlm_logits)
    if embeddings_unit:
        fully_shard(encoder.embeddings, **options)
    return fully_shard(core, **options)


def load_pretrained(core, encoder, directory, device, offload=False):
    """Fill a sharded `core` whose `encoder` was built on the meta device (train.build_model): each
    process makes room for its own shards only and reads its rows of each checkpoint tensor, one
    file at a time (mapped, not read whole), keeping what the rest of `core` (the heads, built on
    the host and sharded) already holds. `offload`: the shards are in host memory (--offload)."""
    kept = {name: p.to_local().clone() for name, p in core.named_parameters() if not p.is_meta}
    core.to_empty(device="cpu" if offload else device)  # FSDP2 points its shards at the new memory
    with torch.no_grad():
        for name, p in core.named_parameters():
            if name in kept:
                p.to_local().copy_(kept[name])
    encoder.load_weights(directory)


def load_classifier(directory, device, offload=False):
    """(classifier, tokenizer, task dict) of a model saved by train.py (OUT/best: the one the test
    scores, or a teacher), sharded as it loads: built on the meta device, its head read to the host,
    then each process fills its own rows (in host memory with `offload`, as --offload keeps the
    student's). It runs forward only, in float32 as a whole one would; the root (embeddings, head)
    is gathered while a block runs in `gathered`."""
    classifier, tokenizer, task = Classifier.load(directory, "meta")
    wrap(classifier, classifier.encoder, offload=offload, device=device, trains=False)
    load_pretrained(classifier, classifier.encoder, directory, device, offload)
    return classifier, tokenizer, task


def load_encoder(directory, device, offload=False):
    """An encoder saved by train.py (Unicoder's OUT/best), sharded as it loads (as load_classifier)."""
    encoder = Encoder.from_pretrained(directory, device="meta")
    wrap(encoder, encoder, offload=offload, device=device, trains=False)
    load_pretrained(encoder, encoder, directory, device, offload)
    return encoder


def sharded(module):
    """Whether a module holds sharded parameters."""
    return any(isinstance(p, DTensor) for p in module.parameters())


@contextmanager
def gathered(core):
    """The root's own parameters (embeddings, heads) whole while the block runs, for code that calls
    a part of a sharded model (the encoder alone, its LM head); the layers gather themselves. After
    it every unit is sharded again, the last layer too (which a forward pass leaves gathered for a
    backward pass): the module's parameters are the sharded ones, which the optimizer must hold."""
    if not isinstance(core, FSDPModule):
        yield
        return
    # FSDP2 takes the first unit to run forward for the root: here `core`, before a method calls its
    # layers itself (FILTER's teacher, the tested OUT/best of a pair method), which would make one of them root
    core._get_fsdp_state()._lazy_init()
    core.unshard()
    try:
        yield
    finally:
        for unit in core.modules():
            if isinstance(unit, FSDPModule):
                unit.reshard()


def meta_copy(module):
    """A copy of `module` on the meta device: its modules and attributes, none of its data."""
    memo = {id(t): torch.nn.Parameter(t.to("meta"), t.requires_grad) if isinstance(t, torch.nn.Parameter) else t.to("meta")
            for t in [*module.parameters(), *module.buffers()]}
    return copy.deepcopy(module, memo)


FLOAT32 = weakref.WeakKeyDictionary()  # a sharded module that computes in bf16 -> (its copy before sharding, ...): wrap, evaluated


@contextmanager
def evaluated(core):
    """`core` for a block that evaluates it, gathered as in `gathered`, computing in float32 as
    DDP's evaluation does: where it trains sharded in bf16 (--amp bf16: its layers gather in bf16),
    a float32 copy of it instead, sharded the same way, each process copying its own rows (no
    communication), released after the block. Its rows take the room of the gradients', which are
    freed after each step. Dev scores, CKA and retrieval before training, Unicoder's mining."""
    if core not in FLOAT32:
        with gathered(core):
            yield core
        return
    skeleton, encoder_name, device, offload = FLOAT32[core]
    twin = copy.deepcopy(skeleton)
    wrap(twin, twin.get_submodule(encoder_name), offload=offload, device=device, trains=False)
    try:
        twin.to_empty(device="cpu" if offload else device)
        with torch.no_grad():
            for mine, theirs in ((twin.named_parameters(), dict(core.named_parameters())), (twin.named_buffers(), dict(core.named_buffers()))):
                for name, tensor in mine:
                    local(tensor).copy_(local(theirs[name]))
        with gathered(twin):
            yield twin
    finally:
        if hasattr(twin, "reset_iter_state"):  # the buffer FSDP2 keeps from the last layer a part of the copy ran (torch >= 2.13)
            twin.reset_iter_state()
        for tensor in [*twin.parameters(), *twin.buffers()]:
            local(tensor).untyped_storage().resize_(0)  # released now, whoever still holds the copy


def part_of(twin, core, part):
    """The module of `twin` (evaluated's copy of `core`, or `core` itself) where `part` is in `core`."""
    if twin is core:
        return part
    return twin.get_submodule(next(name for name, m in core.named_modules() if m is part))


def on_first_host(tensor):
    """A parameter's whole value in process 0's host memory, None on the others (each must call this,
    in the same order): each process sends its rows to process 0, one process at a time, so that no
    device ever holds a whole tensor. What OUT/best is written from, a file's tensors at a time."""
    if not isinstance(tensor, DTensor):
        return tensor
    rank, processes, first = dist.get_rank(), dist.get_world_size(), tensor.shape[0]
    rows, mine = weights.chunk(first, processes), tensor.to_local()
    if rank != 0:
        if len(mine) < rows:  # the last processes' chunks are short or empty: sent at the full size
            mine = torch.cat([mine, mine.new_zeros((rows - len(mine), *tensor.shape[1:]))])
        dist.send(mine.contiguous(), dst=0)
        return None
    out = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
    out[:len(mine)] = mine.cpu()
    received = mine.new_empty((rows, *tensor.shape[1:])) if processes > 1 else None  # one chunk on the device at a time
    for source in range(1, processes):
        dist.recv(received, src=source)
        start = source * rows
        count = max(0, min(rows, first - start))
        out[start:start + count] = received[:count].cpu()
    return out


def local(tensor):
    """What this process holds of a tensor: a DTensor's own shard, else the tensor."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def local_bytes(tensors):
    """Bytes this process holds of some tensors: a DTensor's own shard only."""
    return sum(local(t).nbytes for t in tensors if t is not None)


OPTIONS = StateDictOptions(strict=True)


def save(folder, core, optimizer, rank, group=None):
    """The model's and optimizer's state as a DCP checkpoint in a new `folder` (emptied first), each
    process writing its own shards; bookkeeping.Book.finish_checkpoint then puts it in place. Returns
    a Future of the write: done on return, or with `group` (a gloo process group of its own, apart from
    the training's collectives: --async-checkpoint) written by a thread in the background from a copy
    of this process's shards in host memory, made before this returns (dcp.async_save). A failure is
    the Future's exception, on every process."""
    if rank == 0:
        shutil.rmtree(folder, ignore_errors=True)
    distributed.barrier()
    model, optim = get_state_dict(core, optimizer, options=OPTIONS)
    if group is not None:
        stager = agreed_staging()
        try:
            written = dcp.async_save({"model": model, "optimizer": optim}, checkpoint_id=str(folder), process_group=group, async_stager=stager)
        except Exception:
            stager.close()
            raise
        written.add_done_callback(lambda _: stager.close())
        return written
    written = Future()
    try:
        dcp.save({"model": model, "optimizer": optim}, checkpoint_id=str(folder))
        written.set_result(None)
    except Exception as e:  # noqa: BLE001 (told to every process by Book.finish_checkpoint)
        written.set_exception(e)
    return written


class StagingFailed(RuntimeError):
    """A copy of the shards to host memory that failed on some process, raised on every process."""


def agreed_staging():
    """DCP's staging for an asynchronous save (a copy of this process's shards in host memory),
    agreed on by every process before any starts writing: where it fails on one (host memory
    full), every process raises StagingFailed with that failure, rather than wait for it in the
    write's collectives until they time out. (torch >= 2.9: flags.staging_available.)"""
    from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

    class AgreedStaging(DefaultStager):
        def stage(self, state_dict, **kwargs):
            staged, problem = None, None
            try:
                staged = super().stage(state_dict, **kwargs)
            except Exception as e:  # noqa: BLE001 (told to every process)
                problem = f"copying process {dist.get_rank()}'s shards to host memory: {reason(e)}"
            problem = distributed.first_error(problem)
            if problem:
                raise StagingFailed(problem)
            return staged
    return AgreedStaging(StagingOptions(use_pinned_memory=False, use_shared_memory=False, use_async_staging=False, use_non_blocking_copy=False))


def load(path, core, optimizer):
    """Fill the model and optimizer from a DCP checkpoint (save), resharded to this run's processes,
    or whole where the model is not sharded. Every weight must be there; AdamW's state only for the
    parameters that had a gradient before the save (Unicoder's heads wait for their task's turn)."""
    model, optim = get_state_dict(core, optimizer, options=OPTIONS)  # AdamW's state made for every parameter (a step at lr 0)
    dcp.load({"model": model}, checkpoint_id=str(path))
    saved = dcp.FileSystemReader(str(path)).read_metadata().state_dict_metadata
    absent = [name for name, state in optim["state"].items() if not all(f"optimizer.state.{name}.{key}" in saved for key in state)]
    for name in absent:
        del optim["state"][name]
    dcp.load({"optimizer": optim}, checkpoint_id=str(path))
    set_model_state_dict(core, model, options=OPTIONS)
    set_optimizer_state_dict(core, optimizer, optim, options=StateDictOptions(strict=False))
    parameters = dict(core.named_parameters())
    for name in absent:  # as before the save: no state until the first gradient
        optimizer.state.pop(parameters[name], None)


def reason(error):
    """The first line of what went wrong, from a DCP CheckpointException (every rank's) or another error."""
    if isinstance(error, CheckpointException):
        error = next(iter(error.failures.values()))[0]
        return f"{type(error).__name__}: {reason(error)}"
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def non_finite(module):
    """A line naming this process's first parameter shard with a NaN or infinity, or None."""
    for name, p in module.named_parameters():
        if not torch.isfinite(local(p)).all():
            return f"{name} holds NaN or infinite values"
    return None
