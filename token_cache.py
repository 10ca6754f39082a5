"""The token cache: a training set's sentence-level texts tokenized once, into arrays on disk that
every later run, and every process of a run, reads memory-mapped.

A cache entry is a folder in $MINXLT_CACHE/tokens/ (the default model's cache directory) named by
a hash of the tokenizer's fingerprint, --max-length, the labels and every example's id, language,
texts and label, so that a change to any of them is a new entry. It holds the token ids of all
texts in one int32 array with each text's offset, the label indices, and each text's language and
id as indices into small tables. A process holds a few bytes per text and the operating system
shares the ids between processes; a text becomes an Encoded item only when a batch reads it.
"""
import hashlib
import json
import os
import shutil
from collections.abc import Sequence

import numpy as np

import distributed
from data import Encoded, encode_examples
from prepare_default import cache_dir

CHUNK = 10000  # texts tokenized at once while building an entry


class EncodedTexts(Sequence):
    """Encoded sentence-level items backed by arrays: item i is made when it is read."""

    def __init__(self, ids, offsets, labels, langs, id_index, lang_names, example_ids):
        self.ids, self.offsets, self.labels, self.langs = ids, offsets, labels, langs
        self.id_index, self.lang_names, self.example_ids = id_index, lang_names, example_ids

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = i + len(self) if i < 0 else i
        if not 0 <= i < len(self):
            raise IndexError(i)
        a, b = self.offsets[i], self.offsets[i + 1]
        return Encoded(self.ids[a:b].tolist(), int(self.labels[i]), self.lang_names[self.langs[i]], self.example_ids[self.id_index[i]])

    def lengths(self):
        return np.diff(self.offsets).tolist()

    def pair_with(self, translations):
        return pairs(self, translations)


class Pairs(Sequence):
    """(source, translation) pairs of two EncodedTexts, by index: each made when it is read."""

    def __init__(self, sources, translations, source_index, translation_index):
        self.sources, self.translations = sources, translations
        self.source_index, self.translation_index = source_index, translation_index

    def __len__(self):
        return len(self.source_index)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.sources[int(self.source_index[i])], self.translations[int(self.translation_index[i])]  # IndexError past the end

    def lengths(self):
        """Each pair's longer side, in tokens."""
        source, translation = np.diff(self.sources.offsets), np.diff(self.translations.offsets)
        return np.maximum(source[self.source_index], translation[self.translation_index]).tolist()


def pairs(sources, translations):
    """data.translation_pairs for two EncodedTexts: each translation with its source (same id), in
    the order of the sources, sources without a translation dropped; computed on the arrays."""
    table = {example_id: k for k, example_id in enumerate(translations.example_ids)}
    wanted = np.asarray([table.get(example_id, -1) for example_id in sources.example_ids], np.int64)[sources.id_index]
    order = np.argsort(translations.id_index, kind="stable")  # translation rows grouped by id, in file order
    grouped = np.asarray(translations.id_index)[order]
    starts, ends = np.searchsorted(grouped, wanted, "left"), np.searchsorted(grouped, wanted, "right")
    counts = np.where(wanted >= 0, ends - starts, 0)
    source_index = np.repeat(np.arange(len(wanted)), counts)
    within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)  # each pair's place in its source's group
    return Pairs(sources, translations, source_index, order[np.repeat(starts, counts) + within])


def key(examples, tokenizer, labels, max_length):
    """The entry's name: a hash of the tokenizer, --max-length, the labels and every example."""
    digest = hashlib.sha256(json.dumps([tokenizer.fingerprint(), max_length, list(labels)]).encode())
    for e in examples:  # fields apart by \x1f, examples by \x1e, None as \x00
        fields = (e.id, e.lang, e.text, e.pair, e.label)
        digest.update(("\x1f".join("\x00" if f is None else f for f in fields) + "\x1e").encode())
    return digest.hexdigest()[:32]


def build(folder, examples, tokenizer, labels, max_length):
    """Tokenize the examples into the arrays of a cache entry, written to a temporary folder that
    is renamed into place when complete: an interrupted build leaves no entry."""
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        write(tmp, examples, tokenizer, labels, max_length)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        tmp.rename(folder)
    except OSError:  # another process finished the same entry first
        shutil.rmtree(tmp, ignore_errors=True)


def write(tmp, examples, tokenizer, labels, max_length):
    """The arrays of an entry, tokenized CHUNK texts at a time."""
    lang_names = sorted({e.lang for e in examples})
    example_ids = list(dict.fromkeys(e.id for e in examples))
    lang_of, id_of = {lang: i for i, lang in enumerate(lang_names)}, {i: k for k, i in enumerate(example_ids)}
    offsets, labels_out, chunks = [0], [], []
    for start in range(0, len(examples), CHUNK):
        for item in encode_examples(examples[start:start + CHUNK], tokenizer, labels, max_length):
            chunks.append(np.asarray(item.ids, dtype=np.int32))
            offsets.append(offsets[-1] + len(item.ids))
            labels_out.append(item.label)
    arrays = {"ids": np.concatenate(chunks) if chunks else np.zeros(0, np.int32), "offsets": np.asarray(offsets, np.int64),
              "labels": np.asarray(labels_out, np.int16), "langs": np.asarray([lang_of[e.lang] for e in examples], np.int16),
              "id_index": np.asarray([id_of[e.id] for e in examples], np.int64)}
    for name, array in arrays.items():
        np.save(tmp / f"{name}.npy", array)
    (tmp / "tables.json").write_text(json.dumps({"langs": lang_names, "ids": example_ids}, ensure_ascii=False))


def load(folder):
    tables = json.loads((folder / "tables.json").read_text())
    arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in ("ids", "offsets", "labels", "langs", "id_index")}
    return EncodedTexts(**arrays, lang_names=tables["langs"], example_ids=tables["ids"])


def encode(examples, tokenizer, labels, max_length, rank=0):
    """The examples as EncodedTexts from the cache, built by process 0 where the entry is missing
    while the others wait for it."""
    folder = cache_dir() / "tokens" / key(examples, tokenizer, labels, max_length)
    if rank == 0 and not folder.is_dir():
        build(folder, examples, tokenizer, labels, max_length)
    distributed.barrier()
    return load(folder)
