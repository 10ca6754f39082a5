"""Sharded training (train.py --shard): FSDP2, each layer a unit and the trained module the root, loaded a process's
rows at a time, and its DCP checkpoints; docs/training.md ("Sharded") says what is gathered when."""
import copy
import shutil
import warnings
import weakref
from concurrent.futures import Future
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException  # a failed DCP write or read, on every process
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_state_dict, set_model_state_dict,
                                                     set_optimizer_state_dict)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard,
                                    register_fsdp_forward_method)
from torch.distributed.tensor import DTensor

from minxlt.checkpoints import weights
from minxlt.parallel import distributed
from model import Classifier, Encoder


def wrap(core, encoder, amp="none", offload=False, device=None, trains=True, evaluate_in_bf16=False,
         embeddings_unit=False):
    """Shard `core` in place (each layer of `encoder`, then the root) and return it; a model that does not
    train releases every layer after its forward; one that trains in bf16 keeps a float32 skeleton (evaluated)."""
    device_given = device if device is not None else next(core.parameters()).device
    device = torch.device(device_given).type
    if not dist.is_initialized():  # one process, not started by torchrun: a group of one
        dist.init_process_group("nccl" if device == "cuda" else "gloo", store=dist.HashStore(), rank=0, world_size=1)
    mesh = init_device_mesh(device, (dist.get_world_size(),))
    # The root returns views (a Classifier's <s> vectors), which no method changes in place: what this warns of.
    warnings.filterwarnings("ignore", message=".*returned a view tensor", category=UserWarning)
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if amp == "bf16"
              else MixedPrecisionPolicy())
    offloaded = CPUOffloadPolicy(pin_memory=device == "cuda") if offload else OffloadPolicy()
    options = {"mesh": mesh, "mp_policy": policy, "offload_policy": offloaded}
    if trains and amp == "bf16" and not evaluate_in_bf16:  # the float32 copy's skeleton, before sharding
        encoder_name = next(name for name, m in core.named_modules() if m is encoder)
        memo = {id(t): torch.nn.Parameter(t.to("meta"), t.requires_grad) if isinstance(t, torch.nn.Parameter)
                else t.to("meta") for t in [*core.parameters(), *core.buffers()]}  # a copy of its modules, no data
        FLOAT32[core] = (copy.deepcopy(core, memo), encoder_name, device_given, offload)
    units = list(encoder.layers)
    for layer in units:  # the last stays gathered from its forward into its backward, which comes next
        fully_shard(layer, reshard_after_forward=not trains or layer is not units[-1], **options)
        register_fsdp_forward_method(layer, "run")  # gathered for X-Mixup's Eq. 2-5 as for its forward
    for before, after in zip(units, units[1:]):  # each layer's all-gather starts while its neighbour computes
        before.set_modules_to_forward_prefetch([after])
        after.set_modules_to_backward_prefetch([before])
    if getattr(encoder, "lm_head", None) is not None:  # Unicoder's: its tied word embeddings passed in by the root
        fully_shard(encoder.lm_head, **options)
    if embeddings_unit:
        fully_shard(encoder.embeddings, **options)
    return fully_shard(core, **options)


def load_pretrained(core, encoder, directory, device, offload=False):
    """Fill a sharded `core` whose `encoder` is on the meta device: each process reads its own rows of each
    checkpoint file in turn, keeping what the rest of `core` (its heads) already holds."""
    kept = {name: p.to_local().clone() for name, p in core.named_parameters() if not p.is_meta}
    core.to_empty(device="cpu" if offload else device)  # FSDP2 points its shards at the new memory
    with torch.no_grad():
        for name, value in kept.items():
            core.get_parameter(name).to_local().copy_(value)
    encoder.load_weights(directory)


def load_classifier(directory, device, offload=False):
    """(classifier, tokenizer, task dict) of a model saved by train.py (OUT/best, a teacher), sharded as it
    loads, for forward passes in float32 (its root gathered in `gathered`)."""
    classifier, tokenizer, task = Classifier.load(directory, "meta")
    wrap(classifier, classifier.encoder, offload=offload, device=device, trains=False)
    load_pretrained(classifier, classifier.encoder, directory, device, offload)
    return classifier, tokenizer, task


def load_encoder(directory, device, offload=False):
    """An encoder saved by train.py (Unicoder's OUT/best), sharded as it loads."""
    encoder = Encoder.from_pretrained(directory, device="meta")
    wrap(encoder, encoder, offload=offload, device=device, trains=False)
    load_pretrained(encoder, encoder, directory, device, offload)
    return encoder


@contextmanager
def gathered(core):
    """The root's own parameters whole while a block calls a part of the model (the encoder alone, its LM
    head); every unit is sharded again after it, so the parameters are those the optimizer holds."""
    if not isinstance(core, FSDPModule):
        yield
        return
    # FSDP2 takes the first unit to run forward for the root: `core`, not a layer a method calls itself
    core._get_fsdp_state()._lazy_init()
    core.unshard()
    try:
        yield
    finally:
        for unit in core.modules():
            if isinstance(unit, FSDPModule):
                unit.reshard()


FLOAT32 = weakref.WeakKeyDictionary()  # a sharded module computing in bf16 -> its skeleton before sharding, ...


@contextmanager
def evaluated(core, part=None):
    """`core` (or its module `part`) gathered for an evaluation; where it trains in bf16 (and evaluates in float32),
    a float32 copy of each process's rows instead, sharded the same way and released after the block."""
    part = core if part is None else part
    if core not in FLOAT32:
        with gathered(core):
            yield part
        return
    skeleton, encoder_name, device, offload = FLOAT32[core]
    twin = copy.deepcopy(skeleton)
    wrap(twin, twin.get_submodule(encoder_name), offload=offload, device=device, trains=False)
    try:
        twin.to_empty(device="cpu" if offload else device)
        with torch.no_grad():
            theirs = {**dict(core.named_parameters()), **dict(core.named_buffers())}
            for name, tensor in [*twin.named_parameters(), *twin.named_buffers()]:
                local(tensor).copy_(local(theirs[name]))
        with gathered(twin):
            yield twin.get_submodule(next(name for name, m in core.named_modules() if m is part))
    finally:
        if hasattr(twin, "reset_iter_state"):  # FSDP2's buffer of the copy's last layer run (torch >= 2.13)
            twin.reset_iter_state()
        for tensor in [*twin.parameters(), *twin.buffers()]:
            local(tensor).untyped_storage().resize_(0)  # released now, whoever still holds the copy


def on_first_host(tensor):
    """A parameter's whole value in process 0's host memory, None on the others (every process calls it),
    received a process's rows at a time: no device holds a whole tensor."""
    if not isinstance(tensor, DTensor):
        return tensor
    rank, processes = dist.get_rank(), dist.get_world_size()
    rows, mine = weights.chunk(tensor.shape[0], processes), tensor.to_local()
    if rank != 0:
        if len(mine) < rows:  # the last processes' chunks are short or empty: sent at the full size
            mine = torch.cat([mine, mine.new_zeros((rows - len(mine), *tensor.shape[1:]))])
        dist.send(mine.contiguous(), dst=0)
        return None
    out = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
    out[:len(mine)] = mine.cpu()
    received = mine.new_empty((rows, *tensor.shape[1:])) if processes > 1 else None  # one chunk at a time
    for source in range(1, processes):
        dist.recv(received, src=source)
        part = out[source * rows:(source + 1) * rows]  # the last processes' rows: fewer or none
        part.copy_(received[:len(part)])
    return out


def local(tensor):
    """What this process holds of a tensor: a DTensor's own shard, else the tensor."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


OPTIONS = StateDictOptions(strict=True)


def save(folder, core, optimizer, rank, group=None):
    """The model's and optimizer's state as a DCP checkpoint in a new `folder`, a Future of the write: done,
    or with `group` (--async-checkpoint's gloo group) written in the background from a host copy."""
    if rank == 0:
        shutil.rmtree(folder, ignore_errors=True)
    distributed.barrier()
    model, optim = get_state_dict(core, optimizer, options=OPTIONS)
    if group is not None:
        stager = agreed_staging()
        try:
            written = dcp.async_save({"model": model, "optimizer": optim}, checkpoint_id=str(folder),
                                     process_group=group, async_stager=stager)
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
    """DCP's staging (a host copy of this process's shards) agreed on by every process before any writes:
    where it fails on one, all raise StagingFailed rather than time out. torch >= 2.9."""
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
    return AgreedStaging(StagingOptions(use_pinned_memory=False, use_shared_memory=False, use_async_staging=False,
                                        use_non_blocking_copy=False))


def load(path, core, optimizer):
    """Fill the model and optimizer from a DCP checkpoint, resharded to this run's processes: every weight,
    and AdamW's state of the parameters that had a gradient (Unicoder's heads wait for their task)."""
    model, optim = get_state_dict(core, optimizer, options=OPTIONS)  # AdamW's state for every parameter
    dcp.load({"model": model}, checkpoint_id=str(path))
    saved = dcp.FileSystemReader(str(path)).read_metadata().state_dict_metadata
    absent = [name for name, state in optim["state"].items()
              if not all(f"optimizer.state.{name}.{key}" in saved for key in state)]
    for name in absent:
        del optim["state"][name]
    dcp.load({"optimizer": optim}, checkpoint_id=str(path))
    set_model_state_dict(core, model, options=OPTIONS)
    set_optimizer_state_dict(core, optimizer, optim, options=StateDictOptions(strict=False))
    parameters = dict(core.named_parameters())
    for name in absent:  # as before the save: no state until the first gradient
        optimizer.state.pop(parameters[name], None)


def reason(error):
    """The first line of what went wrong, from a DCP CheckpointException or another error."""
    if isinstance(error, CheckpointException):
        error = next(iter(error.failures.values()))[0]
        return f"{type(error).__name__}: {reason(error)}"
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
