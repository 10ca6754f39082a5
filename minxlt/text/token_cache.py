"""The token cache: a language's sentence-level training texts tokenized once into arrays in $MINXLT_CACHE/tokens,
an entry named by a hash of what decides it, memory-mapped by later runs and all processes (docs/training.md: Speed)."""
import bisect
import hashlib
import itertools
import json
import os
import secrets
import shutil
import socket
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from data import Encoded, encode_examples
from minxlt import errors
from minxlt.checkpoints.prepare_default import cache_dir
from minxlt.errors import InputError
from minxlt.parallel import distributed

CHUNK = 1000  # texts tokenized at once while building an entry
SUMS = "sums.json"  # in an entry: {file: [bytes, CRC-32]} of the others
ROOT = Path(__file__).resolve().parents[2]  # the repository
# the code that turns files into an entry: the readers of every task, data.py's encoding, the tokenizer and this module
READERS = [*sorted((ROOT / "minxlt" / "tasks").glob("*.py")), ROOT / "data.py",
           ROOT / "minxlt" / "text" / "tokenizer.py", Path(__file__)]


class Items(Sequence):
    """Items made when they are read (`item(i)`), indexed as a list is."""

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.item(j) for j in range(len(self))[i]]
        return self.item(range(len(self))[i])  # a negative index counts from the end; one out of range: IndexError


class Texts(Items):
    """What EncodedTexts and Joined share: lengths and pairing, on their arrays."""

    def lengths(self):
        return self.token_lengths().tolist()

    def pair_with(self, translations):
        """data.translation_pairs on two Texts' arrays: each translation with its source, in the sources' order."""
        table = {example_id: k for k, example_id in enumerate(self.distinct_ids())}
        wanted, codes = self.id_codes(table), translations.id_codes(table)
        order = np.argsort(codes, kind="stable")  # translation rows grouped by their source's id, in order
        grouped = codes[order]
        starts, ends = np.searchsorted(grouped, wanted, "left"), np.searchsorted(grouped, wanted, "right")
        counts = ends - starts
        source_index = np.repeat(np.arange(len(wanted)), counts)
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)  # a pair's place in its group
        return Pairs(self, translations, source_index, order[np.repeat(starts, counts) + within])


class EncodedTexts(Texts):
    """Encoded sentence-level items backed by arrays: item i is made when it is read."""

    def __init__(self, ids, offsets, labels, langs, id_index, lang_names, example_ids):
        self.ids, self.offsets, self.labels, self.langs = ids, offsets, labels, langs
        self.id_index, self.lang_names, self.example_ids = id_index, lang_names, example_ids

    def __len__(self):
        return len(self.labels)

    def item(self, i):
        a, b = self.offsets[i], self.offsets[i + 1]
        return Encoded(self.ids[a:b].tolist(), int(self.labels[i]), self.lang_names[self.langs[i]],
                       self.example_ids[self.id_index[i]])

    def token_lengths(self):
        return np.diff(self.offsets)

    def id_codes(self, table):
        """Each text's example id as its number in `table` ({id: number}), -1 where it has none."""
        return np.asarray([table.get(example_id, -1) for example_id in self.example_ids], np.int64)[self.id_index]

    def distinct_ids(self):
        return self.example_ids


class Joined(Texts):
    """Several EncodedTexts read as one sequence, in order (the languages of a training set)."""

    def __init__(self, parts):
        self.parts = parts
        self.starts = np.cumsum([0] + [len(part) for part in parts]).tolist()

    def __len__(self):
        return self.starts[-1]

    def item(self, i):
        k = bisect.bisect_right(self.starts, i) - 1
        return self.parts[k].item(i - self.starts[k])

    def token_lengths(self):
        return np.concatenate([np.zeros(0, np.int64)] + [part.token_lengths() for part in self.parts])

    def id_codes(self, table):
        return np.concatenate([np.zeros(0, np.int64)] + [part.id_codes(table) for part in self.parts])

    def distinct_ids(self):
        return list(dict.fromkeys(i for part in self.parts for i in part.distinct_ids()))


def join(parts):
    return parts[0] if len(parts) == 1 else Joined(parts)


class Pairs(Items):
    """(source, translation) pairs of two Texts, by index: each made when it is read."""

    def __init__(self, sources, translations, source_index, translation_index):
        self.sources, self.translations = sources, translations
        self.source_index, self.translation_index = source_index, translation_index

    def __len__(self):
        return len(self.source_index)

    def item(self, i):
        return self.sources.item(int(self.source_index[i])), self.translations.item(int(self.translation_index[i]))

    def lengths(self):
        """Each pair's longer side, in tokens."""
        source, translation = self.sources.token_lengths(), self.translations.token_lengths()
        return np.maximum(source[self.source_index], translation[self.translation_index]).tolist()


class ById:
    """Texts of several languages ({lang: EncodedTexts}) by example id and language, `get(id, lang, default)`:
    X-Mixup's round-trip translations; `ids`: every example id that may be asked for."""

    def __init__(self, texts, ids):
        self.texts, self.table, self.rows = texts, {example_id: k for k, example_id in enumerate(ids)}, {}
        for lang, part in texts.items():
            codes = part.id_codes(self.table)
            rows = np.full(len(self.table), -1, np.int64)  # each id's row in this language's texts, or -1
            present = codes >= 0
            rows[codes[present]] = np.nonzero(present)[0]
            self.rows[lang] = rows

    def __bool__(self):
        return bool(self.texts)

    def get(self, example_id, lang, default=None):
        rows, k = self.rows.get(lang), self.table.get(example_id)
        if rows is None or k is None or rows[k] < 0:
            return default
        return self.texts[lang].item(int(rows[k]))


def key(examples, tokenizer, labels, max_length):
    """An entry's name: a hash of the tokenizer, --max-length, the labels, the code that tokenizes (READERS) and every
    example."""
    code = [file_digest(path) for path in READERS]
    digest = hashlib.sha256(json.dumps([tokenizer.fingerprint(), max_length, list(labels), code]).encode())
    for e in examples:  # fields apart by \x1f, examples by \x1e, None as \x00
        fields = (e.id, e.lang, e.text, e.pair, e.label)
        digest.update(("\x1f".join("\x00" if f is None else f for f in fields) + "\x1e").encode())
    return digest.hexdigest()[:32]


def files_key(files, reader, lang, tokenizer, labels, max_length):
    """An entry's name: a hash of its files' bytes, their reader, the language, the tokenizer, --max-length, the
    labels and the code that reads and tokenizes (READERS)."""
    code = [file_digest(path) for path in READERS]
    described = [reader, lang, [file_digest(f) for f in files], code, tokenizer.fingerprint(), max_length, list(labels)]
    return "f" + hashlib.sha256(json.dumps(described).encode()).hexdigest()[:31]


_digests = {}  # (path, size, modification time): sha256 of the bytes, computed once per process


def file_digest(path):
    stat = os.stat(path)
    known = (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)
    if known not in _digests:
        with open(path, "rb") as f:
            _digests[known] = hashlib.file_digest(f, "sha256").hexdigest()
    return _digests[known]


def build(folder, examples, tokenizer, labels, max_length, files=()):
    """Tokenize the examples into a cache entry with their warnings (naming `files` by their place in it) and sums,
    built aside and renamed into place; what processes of this host killed while building left is removed first."""
    host = socket.gethostname()
    for left in folder.parent.glob(f"*.tmp{host}-*"):
        try:
            os.kill(int(left.name.rpartition("-")[2]), 0)  # whether its process lives
        except ProcessLookupError:
            shutil.rmtree(left, ignore_errors=True)
        except (ValueError, PermissionError):  # not a process id; another user's process
            pass
    tmp = folder.with_name(f"{folder.name}.tmp{host}-{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"the token cache {folder.parent} cannot be written to ({e.strerror or e}): set MINXLT_CACHE "
                         "to a folder it can write") from None
    said = len(errors.SAID)
    try:
        write(tmp, examples, tokenizer, labels, max_length)
        said = errors.SAID[said:]
        for i, f in enumerate(files):  # a copy of the files elsewhere has the same bytes, so reads the same entry
            said = [message.replace(str(f), f"\x00{i}\x00") for message in said]
        (tmp / "warnings.json").write_text(json.dumps(said, ensure_ascii=False), encoding="utf-8")
        (tmp / SUMS).write_text(json.dumps(sums(tmp)))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        tmp.rename(folder)
    except OSError:  # another process finished the same entry first
        shutil.rmtree(tmp, ignore_errors=True)


def sums(folder):
    """{file: [bytes, CRC-32]} of an entry's files (about 1 GB a second on one core)."""
    out = {}
    for path in sorted(p for p in folder.iterdir() if p.name != SUMS):
        crc = 0
        with open(path, "rb") as f:
            while block := f.read(1 << 24):
                crc = zlib.crc32(block, crc)
        out[path.name] = [path.stat().st_size, crc]
    return out


def damage(folder):
    """What is wrong with an entry's files, or None where they are as written (sizes, then CRC-32s)."""
    try:
        written = json.loads((folder / SUMS).read_text(encoding="utf-8"))
        found = {p.name: p.stat().st_size for p in folder.iterdir() if p.name != SUMS}
    except (OSError, ValueError):
        return f"no readable {SUMS}"
    if not (isinstance(written, dict) and all(isinstance(v, list) and len(v) == 2 for v in written.values())):
        return f"{SUMS} is not {{file: [bytes, CRC-32]}}"
    if sorted(written) != sorted(found):
        return f"it holds {', '.join(sorted(found))}; {SUMS} lists {', '.join(sorted(written))}"
    wrong = [f"{name} holds {found[name]} bytes, not {size}" for name, (size, _) in written.items()
             if found[name] != size]
    wrong = wrong or [f"{name}'s CRC-32 differs" for name, (_, crc) in sums(folder).items() if written[name][1] != crc]
    return "; ".join(wrong) or None


def intact(folder):
    """Whether an entry is in place as written; a damaged one is said and removed, to be built again."""
    if not folder.is_dir():
        return False
    try:
        if problem := damage(folder):
            print(f"note: token cache entry {folder} is damaged ({problem}): building it again", file=sys.stderr)
            aside = folder.with_name(f"{folder.name}.damaged{os.getpid()}")
            folder.rename(aside)
            shutil.rmtree(aside, ignore_errors=True)
    except FileNotFoundError:  # another process found it damaged at the same time, and set it aside first
        return False
    return problem is None


def write(tmp, examples, tokenizer, labels, max_length):
    """An entry's arrays, tokenized CHUNK texts at a time as `examples` come: the process holds one chunk and a few
    numbers a text before it; each chunk's ids go to a file that becomes ids.npy."""
    lang_of, id_of, tokens, examples = {}, {}, 0, iter(examples)
    parts = {"offsets": [np.zeros(1, np.int64)], "labels": [np.zeros(0, np.int16)],  # the first piece gives the type
             "langs": [np.zeros(0, np.int16)], "id_index": [np.zeros(0, np.int64)]}
    with open(tmp / "ids.raw", "wb") as ids:
        while chunk := list(itertools.islice(examples, CHUNK)):
            items = encode_examples(chunk, tokenizer, labels, max_length)
            lengths = np.asarray([len(item.ids) for item in items], np.int64)
            np.asarray([t for item in items for t in item.ids], np.int32).tofile(ids)
            parts["offsets"].append(tokens + np.cumsum(lengths))
            tokens += int(lengths.sum())
            parts["labels"].append(np.asarray([item.label for item in items], np.int16))
            parts["langs"].append(np.asarray([lang_of.setdefault(e.lang, len(lang_of)) for e in chunk], np.int16))
            parts["id_index"].append(np.asarray([id_of.setdefault(e.id, len(id_of)) for e in chunk], np.int64))
    with open(tmp / "ids.npy", "wb") as f, open(tmp / "ids.raw", "rb") as raw:
        header = {"descr": np.dtype(np.int32).str, "fortran_order": False, "shape": (tokens,)}
        np.lib.format.write_array_header_1_0(f, header)
        shutil.copyfileobj(raw, f)
    (tmp / "ids.raw").unlink()
    arrays = {name: np.concatenate(pieces) for name, pieces in parts.items()}
    lang_names = sorted(lang_of)  # numbered by name, as they came numbered by first use
    arrays["langs"] = np.asarray([lang_names.index(lang) for lang in lang_of], np.int16)[arrays["langs"]]
    for name, array in arrays.items():
        np.save(tmp / f"{name}.npy", array)
    with open(tmp / "tables.json", "w", encoding="utf-8") as f:  # written as it is encoded, not made whole first
        json.dump({"langs": lang_names, "ids": list(id_of)}, f, ensure_ascii=False)


def load(folder):
    """An entry's EncodedTexts, its example ids interned (a source's and its translations' share one copy)."""
    tables = json.loads((folder / "tables.json").read_text(encoding="utf-8"))
    arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r")
              for name in ("ids", "offsets", "labels", "langs", "id_index")}
    return EncodedTexts(**arrays, lang_names=tables["langs"], example_ids=[sys.intern(i) for i in tables["ids"]])


def encode(examples, tokenizer, labels, max_length, rank=0):
    """The examples as EncodedTexts from the entry their hash names, built by the first process that sees it."""
    folder = cache_dir() / "tokens" / key(examples, tokenizer, labels, max_length)
    if rank == sharing(folder.parent, rank)[0] and not intact(folder):
        build(folder, examples, tokenizer, labels, max_length)
    distributed.barrier()
    return load(folder)


def sharing(folder, rank=0):
    """The ranks of the processes that see `folder` as this one does (a node's, or all on a shared file system):
    each marks the folder with its rank and reads the marks it finds."""
    if not torch.distributed.is_initialized():
        return [rank]
    marks, problem = folder / f".processes-{distributed.gather(secrets.token_hex(8))[0]}", None  # process 0's name
    try:
        marks.mkdir(parents=True, exist_ok=True)
        (marks / str(rank)).touch()
    except OSError as e:
        problem = (f"the token cache {folder} cannot be written to by process {rank} ({e.strerror or e}): set "
                   "MINXLT_CACHE to a folder it can write")
    if problem := distributed.first_error(problem):  # also: every process has marked the folder
        raise InputError(problem)
    ranks = sorted(int(mark.name) for mark in marks.iterdir() if mark.name.isdigit())
    distributed.barrier()
    if rank == ranks[0]:
        shutil.rmtree(marks, ignore_errors=True)
    return ranks


def training_texts(train, langs, tokenizer, labels, max_length, rank=0):
    """{lang: EncodedTexts} of `langs` (`train`: a data.TrainSplit); the missing entries built once per cache folder,
    the k-th of the processes that see it (`sharing`) building every n-th while the others wait."""
    files = {lang: train.files(lang) for lang in langs}
    texts = {lang: encode(train[lang], tokenizer, labels, max_length, rank) for lang in langs if files[lang] is None}
    folders = {lang: cache_dir() / "tokens" / files_key(files[lang], train.reader(), lang, tokenizer, labels,
                                                        max_length) for lang in langs if lang not in texts}
    builders = sharing(cache_dir() / "tokens", rank)
    found = [lang for lang, folder in folders.items() if not intact(folder)] if rank == builders[0] else None
    missing = distributed.gather(found)[builders[0]]  # as the first builder found them
    mine, problem = missing[builders.index(rank)::len(builders)], None
    for lang in mine:
        try:
            build(folders[lang], train.stream(lang), tokenizer, labels, max_length, files[lang])
        except InputError as e:  # a bad file: every process stops with its message, none waits
            problem = problem or str(e)
    if missing:
        train.release()
    if problem := distributed.first_error(problem):
        raise InputError(problem)
    if absent := [str(folder) for folder in folders.values() if not folder.is_dir()]:
        raise InputError(f"token cache entries built by another process are not here: {', '.join(absent)}; the "
                         "processes that share a cache folder need to see the same files in it")
    texts.update({lang: load(folder) for lang, folder in folders.items()})
    for lang in [lang for lang in folders if lang not in mine] if rank == 0 else []:
        for message in json.loads((folders[lang] / "warnings.json").read_text(encoding="utf-8")):
            for i, f in enumerate(files[lang]):  # the files as this run names them
                message = message.replace(f"\x00{i}\x00", str(f))
            print(f"warning: {message}", file=sys.stderr)  # what its files said to an earlier run, or another process
    return {lang: texts[lang] for lang in langs}
