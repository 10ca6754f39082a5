"""Hugging Face checkpoints read and written without executing code from a file: safetensors parsed here, every
entry checked before a byte is used; .bin through torch.load(weights_only=True); config.json; the key table."""
import json
import math
import mmap
import os
import pickle
import re
import warnings
from pathlib import Path

import torch
from torch.distributed.tensor import DTensor

from minxlt.errors import CheckpointError

# safetensors dtype name -> torch dtype
DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64,
          "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors library's own limit


def load_safetensors(path):
    """A safetensors file as {name: tensor}, memory-mapped (copy-on-write), every header entry checked first."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size < 8:
            raise CheckpointError(f"{path}: {size} bytes is too short for a safetensors file (it needs an 8-byte "
                                  "header length)")
        n = int.from_bytes(f.read(8), "little")
        if n > MAX_HEADER_BYTES or 8 + n > size:
            raise CheckpointError(f"{path}: header claims {n} bytes but the file has {size - 8} after the length "
                                  "field (truncated or not safetensors)")
        raw = f.read(n)
        buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # outlives the file; read once all is checked
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: header must be a JSON object, got {type(header).__name__}")
    header.pop("__metadata__", None)
    data_start, data_len, spans, tensors = 8 + n, size - 8 - n, [], {}
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
            raise CheckpointError(f"{where}: data_offsets [{start}, {end}] fall outside the {data_len}-byte data "
                                  "region")
        expected = math.prod(shape) * DTYPES[dtype].itemsize
        if end - start != expected:
            raise CheckpointError(f"{where}: {dtype} {shape} needs {expected} bytes but data_offsets span "
                                  f"{end - start}")
        spans.append((start, end, name))
        raw = (torch.frombuffer(buffer, dtype=torch.uint8, count=end - start, offset=data_start + start) if end > start
               else torch.empty(0, dtype=torch.uint8))  # frombuffer refuses a count of 0
        tensors[name] = raw.view(DTYPES[dtype]).reshape(shape)
    # The format stores tensors back to back: no gaps, no overlaps, nothing after the last one.
    position = 0
    for start, end, name in sorted(spans):
        if start != position:
            raise CheckpointError(f"{path}: tensor {name!r} starts at byte {start}, expected {position} "
                                  "(overlapping or gapped data)")
        position = end
    if position != data_len:
        raise CheckpointError(f"{path}: tensors cover {position} bytes of a {data_len}-byte data region")
    return tensors


def save_safetensors(tensors, path):
    """Write {name: tensor} as safetensors (header padded to 8 bytes, as the format recommends)."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        if t.dtype not in DTYPE_NAMES:
            raise CheckpointError(f"{path}: cannot store {name!r} of dtype {t.dtype} in safetensors")
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.writelines([len(raw).to_bytes(8, "little"), raw, *blobs])


def load_torch_file(path, what="PyTorch weight file"):
    """A PyTorch pickle loaded with weights_only=True: a file that would run code is refused."""
    if not Path(path).is_file():
        raise CheckpointError(f"{path}: {'a folder, not a file' if Path(path).is_dir() else 'not found'}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:  # torch's reason, without its advice to load the file unsafely
        reason = re.search(r"Unsupported operand \d+|[Uu]nsupported (global: )?GLOBAL [\w.]+", str(e))
        reason = reason.group() if reason else str(e).strip().splitlines()[0]
        if reason.startswith("Unsupported operand"):  # no pickle at all
            raise CheckpointError(f"{path}: not a {what}, nor any pickle ({reason}): a git-lfs pointer, a web page "
                                  "saved in its place, or a damaged file? Download it again") from None
        raise CheckpointError(
            f"{path}: refused to load: the pickle holds more than tensors ({reason}). Only plain tensor files are "
            "loaded, so no code from the file can run; convert a trusted copy to model.safetensors instead.") from None
    except Exception as e:  # noqa: BLE001 - bytes that are no pickle fail in many ways (none of the file ran)
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{path}: not a readable {what} ({detail}); it may be truncated") from None


def load_torch_bin(path):
    """A PyTorch pickle of {name: tensor}, loaded with weights_only=True."""
    state = load_torch_file(path)
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: expected a dict of tensors, got {type(state).__name__}")
    for name, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise CheckpointError(f"{path}: expected a dict of tensors, but its entry {name!r} is a "
                                  f"{type(value).__name__} (a training checkpoint? save its model's state_dict)")
    return state


def check_finite(tensors, path):
    """Refuse a file with a NaN or an infinity in a floating-point tensor, naming the tensor."""
    for name, tensor in tensors.items():
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not all(
                torch.isfinite(part).all() for part in tensor.reshape(-1).split(1 << 22)):  # no tensor-sized copy
            nan, inf, total = int(torch.isnan(tensor).sum()), int(torch.isinf(tensor).sum()), tensor.numel()
            raise CheckpointError(f"{path}: tensor {name} is not finite ({nan} NaN, {inf} infinite of {total} values): "
                                  "the file is damaged or was saved from a diverged run; use another checkpoint")
    return tensors


def checkpoint_files(directory):
    """(the weight files of a checkpoint directory, {name: shape} over them), the first there in transformers' order:
    model.safetensors, the shards its index names, pytorch_model.bin, the shards its index names."""
    directory = Path(directory)
    names = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
    for name in names:
        path = directory / name
        if not path.exists():
            continue
        files, weight_map = [path], {}
        if name.endswith(".index.json"):
            try:
                weight_map = json.loads(path.read_text(encoding="utf-8"))["weight_map"]
                shards = sorted(set(weight_map.values()))
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
                raise CheckpointError(f"{path}: not a valid shard index ({e!r})") from None
            for shard in shards:
                if not isinstance(shard, str) or Path(shard).name != shard or not (directory / shard).is_file():
                    raise CheckpointError(f"{path}: shard {shard!r} is not a file in {directory}")
            files = [directory / shard for shard in shards]
        shapes = {}
        for file in files:  # a safetensors file is mapped, not read
            state = load_safetensors(file) if file.suffix == ".safetensors" else load_torch_bin(file)
            shapes.update((key, tuple(tensor.shape)) for key, tensor in state.items())
        missing = sorted(set(weight_map) - set(shapes))
        if missing:
            raise CheckpointError(f"{path}: keys listed in the index are in no shard: {', '.join(missing[:10])}")
        return files, shapes
    raise CheckpointError(f"{directory}: no weights found (looked for {', '.join(names)})")


# config.json's fields this encoder reads, in its order: (model.Config's name, type, smallest value, must be below)
CONFIG_FIELDS = {
    "vocab_size": ("vocab_size", int, 1, None), "hidden_size": ("hidden_size", int, 1, None),
    "num_hidden_layers": ("num_layers", int, 1, None), "num_attention_heads": ("num_heads", int, 1, None),
    "intermediate_size": ("ffn_size", int, 1, None), "max_position_embeddings": ("max_positions", int, 1, None),
    "type_vocab_size": ("type_vocab_size", int, 1, None), "layer_norm_eps": ("layer_norm_eps", float, 0, None),
    "pad_token_id": ("pad_id", int, 0, None), "hidden_dropout_prob": ("dropout", float, 0, 1),
    "attention_probs_dropout_prob": ("attention_dropout", float, 0, 1),
}


def config_arguments(hf, source="config.json"):
    """model.Config's keyword arguments from a config.json dict, refusing what the encoder does not implement and a
    field without the type and range it needs (JSON's "768" is not 768)."""
    if not isinstance(hf, dict):
        raise CheckpointError(f"{source}: not a JSON object of settings")
    for name, (_, kind, low, below) in CONFIG_FIELDS.items():
        if name not in hf:
            continue
        value = hf[name]
        right_type = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
        if not right_type or value < low or (below is not None and value >= below):
            wanted = "an integer" if kind is int else "a number"
            bounds = f" from {low}" + (f" below {below}" if below is not None else "")
            raise CheckpointError(f"{source}: {name} is {value!r}; it must be {wanted}{bounds}")
    heads, hidden = hf.get("num_attention_heads"), hf.get("hidden_size")
    if heads and hidden and hidden % heads:
        raise CheckpointError(f"{source}: hidden_size {hidden} is not divisible by num_attention_heads {heads}")
    if hf.get("pad_token_id", 0) >= hf.get("vocab_size", float("inf")):
        raise CheckpointError(f"{source}: pad_token_id {hf['pad_token_id']} is not below vocab_size {hf['vocab_size']}")
    model_type = hf.get("model_type")
    if model_type not in ("xlm-roberta", "xlm-roberta-xl", "roberta", "bert"):
        raise CheckpointError(f"{source}: model_type {model_type!r} is not supported (xlm-roberta, xlm-roberta-xl, "
                              "roberta or bert)")
    if any(str(name).startswith("XLMRobertaXL") for name in hf.get("architectures") or []):
        model_type = "xlm-roberta-xl"  # XXL's config.json says xlm-roberta; its architecture and weights are XL's
    if hf.get("hidden_act", "gelu") != "gelu":
        raise CheckpointError(f"{source}: hidden_act {hf['hidden_act']!r}: only exact GELU ('gelu') is implemented")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(f"{source}: position_embedding_type {hf['position_embedding_type']!r}: only 'absolute' "
                              "is implemented")
    bert = model_type == "bert"
    defaults = {"type_vocab_size": 2 if bert else 1, "layer_norm_eps": 1e-12 if bert else 1e-5, "pad_token_id": 1,
                "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
    missing = [name for name in CONFIG_FIELDS if name not in hf and name not in defaults]
    if missing:
        raise CheckpointError(f"{source}: missing field {missing[0]!r}")
    arguments = {ours: hf.get(name, defaults.get(name)) for name, (ours, *_) in CONFIG_FIELDS.items()}
    return dict(arguments, position_offset=0 if bert else arguments["pad_id"] + 1, model_type=model_type)


def read_config(directory):
    """model.Config's keyword arguments from a checkpoint directory's config.json."""
    path = Path(directory) / "config.json"
    if not path.exists():
        raise CheckpointError(f"{directory}: no config.json (is this a Hugging Face checkpoint directory?)")
    try:
        return config_arguments(json.loads(path.read_text(encoding="utf-8")), source=str(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None


def config_json(c):
    """The config.json fields of a model.Config `c`, as transformers reads them."""
    fields = {name: getattr(c, ours) for name, (ours, *_) in CONFIG_FIELDS.items()}
    return {"model_type": c.model_type, **fields, "hidden_act": "gelu", "position_embedding_type": "absolute",
            "bos_token_id": 0, "eos_token_id": 2}


def check_tokenizer(config, tokenizer, directory):
    """The tokenizer's ids must all have rows in the embeddings (a tokenizer of another model would not)."""
    if tokenizer.vocab_size > config.vocab_size:
        raise CheckpointError(f"{directory}: the tokenizer has {tokenizer.vocab_size} ids but config.json's vocab_size "
                              f"is {config.vocab_size}: the tokenizer and the weights are not of the same model")


# The one key table: our module names -> Hugging Face's (after "roberta."/"bert."), each a .weight and a .bias.
KEY_TABLE = {
    "embeddings.word": "embeddings.word_embeddings",              # weight only
    "embeddings.position": "embeddings.position_embeddings",      # weight only
    "embeddings.token_type": "embeddings.token_type_embeddings",  # weight only
    "embeddings.norm": "embeddings.LayerNorm",
    "layers.{i}.query": "encoder.layer.{i}.attention.self.query",
    "layers.{i}.key": "encoder.layer.{i}.attention.self.key",
    "layers.{i}.value": "encoder.layer.{i}.attention.self.value",
    "layers.{i}.attn_out": "encoder.layer.{i}.attention.output.dense",
    "layers.{i}.attn_norm": "encoder.layer.{i}.attention.output.LayerNorm",
    "layers.{i}.ffn_in": "encoder.layer.{i}.intermediate.dense",
    "layers.{i}.ffn_out": "encoder.layer.{i}.output.dense",
    "layers.{i}.ffn_norm": "encoder.layer.{i}.output.LayerNorm",
    "pooler.dense": "pooler.dense",
}
PRE_NORM_KEYS = {  # XLM-R XL and XXL: the LayerNorm before each sub-layer, and one after the last layer
    "layers.{i}.attn_norm": "encoder.layer.{i}.attention.self_attn_layer_norm",
    "layers.{i}.ffn_norm": "encoder.layer.{i}.LayerNorm",
    "norm": "encoder.LayerNorm",
}
LM_HEAD_KEYS = {  # "lm_head.bias" is a bare parameter
    "roberta": {"lm_head.dense": "lm_head.dense", "lm_head.norm": "lm_head.layer_norm", "lm_head.bias": "lm_head.bias"},
    "bert": {"lm_head.dense": "cls.predictions.transform.dense", "lm_head.norm": "cls.predictions.transform.LayerNorm",
             "lm_head.bias": "cls.predictions.bias"},
}
PREFIX = re.compile(r"^(roberta|bert)\.")  # before every key of a *ForMaskedLM checkpoint but its head's
# Not needed: buffers, the decoder tied to the word embeddings, BERT's next-sentence head, task heads.
IGNORED_KEYS = re.compile(r"embeddings\.position_ids|(lm_head|cls\.predictions)\.decoder\.(weight|bias)"
                          r"|cls\.seq_relationship\.\w+|(classifier|qa_outputs)\..+")


def hf_names(params, config, shapes=None, source=None):
    """{our key: Hugging Face key} for `params`; given a checkpoint's `shapes`, the key as spelled there, refusing a
    key missing or unexpected there, or a shape."""
    table = dict(KEY_TABLE, **LM_HEAD_KEYS["bert" if config.is_bert else "roberta"],
                 **(PRE_NORM_KEYS if config.pre_norm else {}))
    names = {}
    for key in params:
        template, _, leaf = re.sub(r"^layers\.\d+\.", "layers.{i}.", key).rpartition(".")
        layer = re.match(r"layers\.(\d+)\.", key)
        names[key] = (table[key] if key in table  # a bare parameter
                      else table[template].format(i=layer.group(1) if layer else "") + "." + leaf)
    if shapes is None:
        return names
    # the table's key -> the checkpoint's (with PREFIX; old BERT files say gamma/beta for weight/bias)
    spelled = {re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", PREFIX.sub("", key))): key for key in shapes}
    missing = [theirs for theirs in names.values() if theirs not in spelled]
    unexpected = [k for k in spelled if k not in names.values() and not IGNORED_KEYS.fullmatch(k)]
    if missing or unexpected:
        raise CheckpointError(
            f"{source}: the weights do not match config.json ({config.model_type}, {config.num_layers} layers)\n"
            f"  missing ({len(missing)}): {', '.join(missing[:20])}{' ...' if len(missing) > 20 else ''}\n"
            f"  unexpected ({len(unexpected)}): {', '.join(unexpected[:20])}{' ...' if len(unexpected) > 20 else ''}")
    wrong = [f"{theirs}: file {tuple(shapes[spelled[theirs]])}, config expects {tuple(params[ours].shape)}"
             for ours, theirs in names.items() if tuple(shapes[spelled[theirs]]) != tuple(params[ours].shape)]
    if wrong:
        raise CheckpointError(f"{source}: tensor shapes disagree with config.json:\n  " + "\n  ".join(wrong[:20]))
    return {ours: spelled[theirs] for ours, theirs in names.items()}


def checkpoint_modules(shapes, is_bert):
    """(pooler, masked-LM head): whether a checkpoint's tensors (`shapes`' keys) hold each."""
    keys, lm_head = {PREFIX.sub("", key) for key in shapes}, LM_HEAD_KEYS["bert" if is_bert else "roberta"]
    return "pooler.dense.weight" in keys, lm_head["lm_head.dense"] + ".weight" in keys


def load_state(module, config, state, source="state dict"):
    """Copy Hugging Face-named tensors into an encoder `module`: every key accounted for, every shape checked."""
    names = hf_names(module.state_dict(), config, {key: tuple(t.shape) for key, t in state.items()}, source)
    copy_in(module.state_dict(), names, state, source)


def stream_state(module, config, files, shapes, source):
    """Fill an encoder `module` from a checkpoint's files a file at a time, `shapes` checked first, every tensor finite;
    a pooler or LM head the checkpoint lacks (Unicoder's) keeps its own weights."""
    has_pooler, has_lm_head = checkpoint_modules(shapes, config.is_bert)
    params = {k: v for k, v in module.state_dict().items()
              if not (k.startswith("pooler.") and not has_pooler or k.startswith("lm_head.") and not has_lm_head)}
    names = hf_names(params, config, shapes, source)
    for path in map(Path, files):  # chosen by extension
        state = load_safetensors(path) if path.suffix == ".safetensors" else load_torch_bin(path)
        copy_in(params, names, check_finite(state, path), source)


def chunk(rows, processes):
    """Rows of a parameter that each process holds when FSDP2 shards it (the last ones fewer or none)."""
    return -(-rows // processes)


def copy_in(params, names, part, source):
    """Copy the tensors of a file's `part` into `params` by `names` (hf_names'); a sharded (DTensor) one takes its own
    rows only. A masked-LM decoder that is not the word embeddings is warned of: minxlt ties the two."""
    with torch.no_grad():
        for ours, theirs in names.items():
            if theirs not in part:
                continue
            param, tensor = params[ours], part[theirs]
            if isinstance(param, DTensor):
                start = param.device_mesh.get_local_rank() * chunk(param.shape[0], param.device_mesh.size())
                param = param.to_local()
                tensor = tensor[start:start + len(param)]
            param.copy_(tensor)
    embeddings, dtype = names.get("embeddings.word.weight"), params["embeddings.word.weight"].dtype
    for decoder in ("lm_head.decoder.weight", "cls.predictions.decoder.weight"):  # with the embeddings in the file
        if "lm_head.bias" not in params or decoder not in part or embeddings not in part:
            continue
        chunks = zip(part[decoder].split(4096), part[embeddings].split(4096))  # compared as the encoder holds them
        if part[decoder].shape != part[embeddings].shape or not all(
                torch.equal(a.to(dtype), b.to(dtype)) for a, b in chunks):
            warnings.warn(f"{source}: {decoder} differs from the word embeddings; minxlt ties the two and uses the "
                          "embeddings")


SHARD_BYTES = 5 * 10**9  # above this, weights are written in shards with an index, as transformers writes them


def save_encoder(directory, config, state, head=None, shard_bytes=SHARD_BYTES, whole=None, write=True):
    """An encoder's state as config.json and model.safetensors (sharded past `shard_bytes`), which transformers loads;
    `head` adds a task model's; `whole` gathers or casts a file's tensors (every process; only `write` writes)."""
    directory, failed = Path(directory), []

    def attempt(write_files):  # a writer that fails still gathers every file's tensors with the other processes
        if write and not failed:
            try:
                write_files()
            except Exception as e:  # noqa: BLE001 - raised below, once every file is gathered
                failed.append(e)
    attempt(lambda: directory.mkdir(parents=True, exist_ok=True))
    base = {"bert": "Bert", "roberta": "Roberta", "xlm-roberta": "XLMRoberta",
            "xlm-roberta-xl": "XLMRobertaXL"}[config.model_type]
    lm_head = "lm_head.bias" in state and head is None  # a task model drops the masked-LM head it does not use
    # the *ForMaskedLM and *For<Task> layouts keep the encoder under "roberta."/"bert."
    prefix = ("bert." if config.is_bert else "roberta.") if lm_head or head else ""
    tensors = {}
    for ours, theirs in hf_names(state, config).items():
        if not theirs.startswith(("lm_head.", "cls.")):
            tensors[prefix + theirs] = state[ours]
        elif lm_head:
            tensors[theirs] = state[ours]
    hf = dict(config_json(config), architectures=[base + ("ForMaskedLM" if lm_head else "Model")])
    if head:
        tensors.update(head["tensors"])
        hf.update(head["config"], architectures=[base + head["architecture"]])
    shards, size = [{}], 0  # the tensors in order, in files of at most `shard_bytes` each (a larger tensor alone)
    for key, tensor in tensors.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append({})
            size = 0
        shards[-1][key], size = tensor, size + nbytes
    names = (["model.safetensors"] if len(shards) == 1
             else [f"model-{i:05d}-of-{len(shards):05d}.safetensors" for i in range(1, len(shards) + 1)])
    attempt(lambda: (directory / "config.json").write_text(json.dumps(hf, indent=2) + "\n"))
    for old in [*directory.glob("model-*-of-*.safetensors"), directory / "model.safetensors.index.json",
                directory / "model.safetensors"]:
        attempt(lambda: old.unlink(missing_ok=True))  # a previous save's files, single or sharded
    total = 0  # bytes written: `whole` may change a tensor's dtype (--save-dtype bf16)
    for name, part in zip(names, shards):
        part = {key: whole(tensor) for key, tensor in part.items()} if whole else part
        total += sum(t.numel() * t.element_size() for t in part.values() if t is not None)
        temporary = directory / (name + ".tmp")
        attempt(lambda: (save_safetensors(part, temporary), os.replace(temporary, directory / name)))
    if len(shards) > 1:
        index = {"metadata": {"total_size": total},
                 "weight_map": {key: name for name, part in zip(names, shards) for key in part}}
        attempt(lambda: (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n"))
    if failed:
        raise failed[0]


def transformers_head(style, pooling, state, labels, is_bert):
    """A Classifier head as transformers' task models hold it, {architecture, config (labels), tensors}, or None."""
    if style == "roberta" and pooling == "cls":
        names = ({"dense": "bert.pooler.dense", "out_proj": "classifier"} if is_bert
                 else {"dense": "classifier.dense", "out_proj": "classifier.out_proj"})
        architecture = "ForSequenceClassification"
    elif style == "token":
        names, architecture = {"out_proj": "classifier"}, "ForTokenClassification"
    elif style == "span":
        names, architecture, labels = {"out_proj": "qa_outputs"}, "ForQuestionAnswering", None
    else:
        return None
    tensors = {}
    for key, value in state.items():
        module, _, leaf = key.rpartition(".")
        tensors[f"{names[module]}.{leaf}"] = value
    config = ({"id2label": {str(i): label for i, label in enumerate(labels)},
               "label2id": {label: i for i, label in enumerate(labels)}} if labels else {})
    return {"architecture": architecture, "config": config, "tensors": tensors}


def read_task_json(directory, head_styles):
    """The task.json that train.py writes beside a trained model, its labels, head style and pooling checked."""
    directory = Path(directory)
    if (directory / "unicoder.json").is_file():
        raise CheckpointError(f"{directory}: a Unicoder run's encoder, with no task head: measure it with --model "
                              f"{directory} --alignment-only, or fine-tune it with train.py --model {directory}")
    if not (directory / "task.json").is_file():
        raise CheckpointError(f"{directory}: no task.json, so not a model saved by train.py (give its OUT/best "
                              "directory)")
    try:
        task = json.loads((directory / "task.json").read_text(encoding="utf-8"))
        labels = task["labels"]
        head_style, pooling = task.get("head_style", "roberta"), task.get("pooling", "cls")
        if (not isinstance(labels, list) or not labels or head_style not in head_styles
                or pooling not in ("cls", "mean", "pooler")):
            raise ValueError("labels, head_style or pooling")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{directory / 'task.json'}: not the task.json that train.py writes ({e})") from None
    return task
