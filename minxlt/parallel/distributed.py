"""The process group and its devices: torchrun's environment when there is one, else a single
process, and the attention kernels for a device. Every collective the project uses is here, and
each is a no-op in a single process."""
import gc
import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def setup(device=None):
    """(rank, world size, device): torchrun's environment if present (NCCL on CUDA, gloo on CPU), else one
    process; the device's attention kernels chosen (choose_attention)."""
    if "RANK" not in os.environ:
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        choose_attention(device)
        return 0, 1, device
    cuda = torch.cuda.is_available() and device != "cpu"
    if not dist.is_initialized():  # already set up by an outer run (co-training trains inside one)
        dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    device = f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu"
    choose_attention(device)
    return dist.get_rank(), dist.get_world_size(), device


def choose_attention(device):
    """Choose the attention kernels (F.scaled_dot_product_attention's backends) for a device, and
    return the names of those enabled. On CUDA: FlashAttention and memory-efficient attention (the
    kernel for padding masks), and not cuDNN's, which PyTorch picks first when there is a mask and
    which builds a new execution plan for every new padded shape (about 25 ms each; with dynamic
    padding nearly every batch has a new shape). Elsewhere PyTorch's own choice stands."""
    backends = torch.backends.cuda
    if str(device).startswith("cuda"):
        backends.enable_cudnn_sdp(False)
        backends.enable_flash_sdp(True)
        backends.enable_mem_efficient_sdp(True)
        backends.enable_math_sdp(True)  # the fallback for what the others cannot do (e.g. fp32 with dropout on old GPUs)
    return [name for name, enabled in (("flash", backends.flash_sdp_enabled()), ("efficient", backends.mem_efficient_sdp_enabled()),
                                       ("cudnn", backends.cudnn_sdp_enabled()), ("math", backends.math_sdp_enabled())) if enabled]


def cleanup():
    """Destroy the process group once every collective is done on every process, and once the DDP
    models that hold it are gone: a group destroyed while gloo's threads still release a finished
    collective's tensors, or later by a model's collection, can hang or abort the process."""
    if dist.is_initialized():
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()


def initialized():
    return dist.is_initialized()


def world_size():
    return dist.get_world_size() if dist.is_initialized() else 1


def all_reduce(tensor):
    """Sum a tensor over the processes, in place."""
    if dist.is_initialized():
        dist.all_reduce(tensor)
    return tensor


def gather(obj):
    """Every process's `obj` (any picklable object), as a list in rank order."""
    if not dist.is_initialized():
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


GONE = ("Connection closed by peer", "Connection reset by peer")  # gloo's words for a process that has gone


def lost_process(error):
    """How a collective's error says that another process of the run has stopped (killed, or ended
    by its own error), or None for another error: gloo's connection to it closed, NCCL's DistError."""
    if not dist.is_initialized() or not isinstance(error, RuntimeError):
        return None
    nccl = type(error).__name__ if isinstance(error, dist.DistError) else None
    return next((words for words in GONE if words in str(error)), nccl)


def first_error(problem):
    """The first process's problem (a message, or None) in rank order, the same on every process:
    where one process meets a failure (a full disk) inside collective work, all stop with it."""
    return next((p for p in gather(problem) if p), None)


def wrap(module, device, find_unused_parameters=False):
    """The module under DistributedDataParallel when there are several processes, else itself.
    find_unused_parameters: whether a step may leave trainable parameters without gradient."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return module
    return DistributedDataParallel(module, device_ids=[device] if device.startswith("cuda") else None,
                                   find_unused_parameters=find_unused_parameters)


def gradient_sync(model, last):
    """A micro-step's context. DDP averages the gradients over the processes after the last
    micro-step of a step only (no_sync() before it). A sharded model (shard.py) reduce-scatters
    every micro-step's gradients, each process adding its part to its shard: the sum of the parts is
    the part of the sum, and no process holds a whole gradient between micro-steps."""
    return model.no_sync() if hasattr(model, "no_sync") and not last else nullcontext()


def all_gather(tensor):
    """Every process's tensor (of the same shape), concatenated along the first dimension in rank order."""
    if not dist.is_initialized():
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return torch.cat(parts)


class _GatherWithGrad(torch.autograd.Function):
    """all_gather whose gradient reaches each process's own part: the gradients that every
    process computes for the gathered tensor are summed, and each keeps its own slice."""

    @staticmethod
    def forward(ctx, tensor):
        ctx.rank, ctx.size = dist.get_rank(), len(tensor)
        return all_gather(tensor)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad)
        return grad[ctx.rank * ctx.size:(ctx.rank + 1) * ctx.size]


def all_gather_with_grad(tensor):
    """all_gather for a loss over the global batch (Yu & Joty's label alignment): backward sums
    every process's gradient of the gathered tensor and gives each process its own part, so that
    each process's loss reaches the examples of all."""
    return _GatherWithGrad.apply(tensor) if dist.is_initialized() else tensor


def release_memory(device):
    """Give back what was freed: collected, and on CUDA returned from PyTorch's cache to the device."""
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def barrier():
    if dist.is_initialized():
        dist.barrier()
