"""Reading and writing weight files without ever executing code from them.

safetensors is parsed here from its documented layout (8-byte little-endian
header length, a JSON header, then one flat data region), and every entry is
validated before a byte of it is used; `.bin` files go through
`torch.load(weights_only=True)`, which refuses pickled objects other than
tensors and plain containers. The `safetensors` package is not needed.
"""
import json
import math
import mmap
import pickle
from pathlib import Path

import torch

# safetensors dtype name -> (torch dtype, bytes per element)
DTYPES = {
    "F64": (torch.float64, 8), "F32": (torch.float32, 4), "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2), "I64": (torch.int64, 8), "I32": (torch.int32, 4),
    "I16": (torch.int16, 2), "I8": (torch.int8, 1), "U8": (torch.uint8, 1), "BOOL": (torch.bool, 1),
}
DTYPE_NAMES = {dtype: name for name, (dtype, _) in DTYPES.items()}
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors library's own limit


class CheckpointError(ValueError):
    """A weight file or checkpoint directory that cannot be used as it is."""


def read_safetensors_header(path):
    """Parse and validate a safetensors header; returns ({name: (dtype, shape, start, end)}, data offset)."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size < 8:
            raise CheckpointError(f"{path}: {size} bytes is too short for a safetensors file (it needs an 8-byte header length)")
        n = int.from_bytes(f.read(8), "little")
        if n > MAX_HEADER_BYTES or 8 + n > size:
            raise CheckpointError(f"{path}: header claims {n} bytes but the file has {size - 8} after the length field (truncated or not safetensors)")
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: header must be a JSON object, got {type(header).__name__}")
    header.pop("__metadata__", None)
    data_start, data_len = 8 + n, size - 8 - n
    entries, spans = {}, []
    for name, info in header.items():
        where = f"{path}: tensor {name!r}"
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise CheckpointError(f"{where}: entry must have exactly dtype, shape and data_offsets")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in DTYPES:
            raise CheckpointError(f"{where}: unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise CheckpointError(f"{where}: shape {shape!r} is not a list of non-negative integers")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            raise CheckpointError(f"{where}: data_offsets {offsets!r} is not a pair of integers")
        start, end = offsets
        if not 0 <= start <= end <= data_len:
            raise CheckpointError(f"{where}: data_offsets [{start}, {end}] fall outside the {data_len}-byte data region")
        expected = math.prod(shape) * DTYPES[dtype][1]
        if end - start != expected:
            raise CheckpointError(f"{where}: {dtype} {shape} needs {expected} bytes but data_offsets span {end - start}")
        entries[name] = (dtype, shape, start, end)
        spans.append((start, end, name))
    # The format stores tensors back to back: no gaps, no overlaps, nothing after the last one.
    position = 0
    for start, end, name in sorted(spans):
        if start != position:
            raise CheckpointError(f"{path}: tensor {name!r} starts at byte {start}, expected {position} (overlapping or gapped data)")
        position = end
    if position != data_len:
        raise CheckpointError(f"{path}: tensors cover {position} bytes of a {data_len}-byte data region")
    return entries, data_start


def load_safetensors(path):
    """Read a safetensors file into a {name: tensor} dict (memory-mapped, copy-on-write)."""
    entries, data_start = read_safetensors_header(path)
    tensors = {}
    with open(path, "rb") as f:  # the mapping outlives the file object
        buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    for name, (dtype, shape, start, end) in entries.items():
        torch_dtype = DTYPES[dtype][0]
        if end == start:
            tensors[name] = torch.empty(shape, dtype=torch_dtype)
            continue
        raw = torch.frombuffer(buffer, dtype=torch.uint8, count=end - start, offset=data_start + start)
        tensors[name] = raw.view(torch_dtype).reshape(shape)
    return tensors


def save_safetensors(tensors, path, metadata=None):
    """Write {name: tensor} as safetensors (header padded to 8 bytes, as the format recommends)."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        if t.dtype not in DTYPE_NAMES:
            raise CheckpointError(f"{path}: cannot store {name!r} of dtype {t.dtype} in safetensors")
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header["__metadata__"] = metadata or {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for data in blobs:
            f.write(data)


def load_torch_file(path, what="PyTorch weight file"):
    """Load a PyTorch pickle with weights_only=True: tensors and plain containers only, so a file
    that would run code is refused; a truncated or foreign file is reported as such."""
    if not Path(path).is_file():
        raise CheckpointError(f"{path}: {'a folder, not a file' if Path(path).is_dir() else 'not found'}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first_line = str(e).strip().splitlines()[0]
        raise CheckpointError(
            f"{path}: refused to load: the pickle holds more than tensors ({first_line}). "
            "Only plain tensor files are loaded, so no code from the file can run; "
            "convert a trusted copy to model.safetensors instead.") from None
    except Exception as e:  # noqa: BLE001 - bytes that are no pickle fail in any of many ways (nothing of the file ran)
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{path}: not a readable {what} ({detail}); it may be truncated") from None


def load_torch_bin(path):
    """Load a PyTorch pickle of tensors with weights_only=True: a file that would run code is refused."""
    state = load_torch_file(path)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path}: expected a dict of tensors, got {type(state).__name__}")
    return state


def load_weight_file(path):
    """One weight file, chosen by extension."""
    path = Path(path)
    return load_safetensors(path) if path.suffix == ".safetensors" else load_torch_bin(path)


def load_checkpoint_weights(directory):
    """All weights of a Hugging Face checkpoint directory: single file or sharded with an index."""
    directory = Path(directory)
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index_path = directory / index_name
        if index_path.exists():
            try:
                weight_map = json.loads(index_path.read_text())["weight_map"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise CheckpointError(f"{index_path}: not a valid shard index ({e!r})") from None
            state = {}
            for shard in sorted(set(weight_map.values())):
                shard_path = directory / shard
                if Path(shard).name != shard or not shard_path.exists():
                    raise CheckpointError(f"{index_path}: shard {shard!r} is not a file in {directory}")
                state.update(load_weight_file(shard_path))
            missing = sorted(set(weight_map) - set(state))
            if missing:
                raise CheckpointError(f"{index_path}: keys listed in the index are in no shard: {', '.join(missing[:10])}")
            return state
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (directory / name).exists():
            return load_weight_file(directory / name)
    raise CheckpointError(
        f"{directory}: no weights found (looked for model.safetensors, model.safetensors.index.json, "
        "pytorch_model.bin, pytorch_model.bin.index.json)")
