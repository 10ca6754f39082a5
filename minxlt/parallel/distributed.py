"""The process group (torchrun's, else a single process), the attention kernels for a device, and
every collective the project uses, each a no-op in a single process."""
import gc
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def setup(device=None):
    """(rank, world size, device): torchrun's environment (NCCL on CUDA, gloo on CPU), else one process. On CUDA,
    SDPA's flash and memory-efficient kernels, not cuDNN's, which plans anew (about 25 ms) for every padded shape."""
    launched = "RANK" in os.environ
    if launched:
        cuda = torch.cuda.is_available() and device != "cpu"
        if not dist.is_initialized():  # already set up by an outer run (co-training trains inside one)
            dist.init_process_group("nccl" if cuda else "gloo")
        if cuda:
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        device = f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu"
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if str(device).startswith("cuda"):
        torch.backends.cuda.enable_cudnn_sdp(False)
        torch.backends.cuda.enable_flash_sdp(True)
        torch.backends.cuda.enable_mem_efficient_sdp(True)
        torch.backends.cuda.enable_math_sdp(True)  # for what the others cannot do (fp32 with dropout on old GPUs)
    return (dist.get_rank(), dist.get_world_size(), device) if launched else (0, 1, device)


def cleanup():
    """Destroy the process group once every process is done and the DDP models are collected: earlier,
    gloo's threads or a model's collection can hang or abort the process."""
    if dist.is_initialized():
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()


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
    """The words by which a collective's error says another process has stopped (gloo's closed
    connection, NCCL's DistError), or None for another error."""
    if not dist.is_initialized() or not isinstance(error, RuntimeError):
        return None
    nccl = type(error).__name__ if isinstance(error, dist.DistError) else None
    return next((words for words in GONE if words in str(error)), nccl)


def first_error(problem):
    """The first process's problem (a message, or None), the same on every process: all stop with it."""
    return next((p for p in gather(problem) if p), None)


def wrap(module, device, find_unused_parameters=False):
    """The module under DistributedDataParallel when there are several processes, else itself."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return module
    return DistributedDataParallel(module, device_ids=[device] if device.startswith("cuda") else None,
                                   find_unused_parameters=find_unused_parameters)


def all_gather(tensor):
    """Every process's tensor (of the same shape), concatenated along the first dimension in rank order."""
    if not dist.is_initialized():
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return torch.cat(parts)


class _GatherWithGrad(torch.autograd.Function):
    """all_gather whose backward sums every process's gradient and keeps this process's slice."""

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
    """all_gather for a loss over the global batch (Yu & Joty's label alignment), its gradient reaching
    every process's examples."""
    return _GatherWithGrad.apply(tensor) if dist.is_initialized() else tensor


def release_memory(device):
    """Collect what was freed and, on CUDA, return PyTorch's cache to the device."""
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def barrier():
    if dist.is_initialized():
        dist.barrier()
