"""X-Mixup's translations of XTREME's UD-POS and PAN-X (<lang>.txt in translate-train-logits/, -test-token/,
-dev-token/, -train-en-token/), read as its ner.py reads them, paired with XTREME's segments (docs/data.md)."""
import itertools
import math
from pathlib import Path

import torch

from data import Example
from minxlt.errors import DataError, InputError
from minxlt.tasks.filter_tags import xtreme_segments
from minxlt.tasks.readers import read_lines

TEST, DEV = "translate-test-token", "translate-dev-token"  # X-Mixup's README's folders
KEPT = 0.5  # a word is trained on where its soft labels sum to more than this (token_classification.py)


def tagging_sentences(path, fields=2):
    """[[(line, cells)] of each sentence] of an X-Mixup tagging file, `fields` fields a word (None: at least 2)."""
    sentences, rows = [], []
    for number, line in read_lines(path):
        if not line:
            if not rows:
                raise DataError(path, number, "a blank line after a blank line (or at the start): X-Mixup's "
                                              "read_tagging_file (ner.py:60-64) would read an empty sentence there, "
                                              "which no sentence of the split is")
            sentences.append(rows)
            rows = []
            continue
        cells = line.split("\t")
        if len(cells) < 2 or (fields == 2 and len(cells) != 2):
            raise DataError(path, number, f"{len(cells)} tab-separated field(s): a line is a word and its "
                                          f"{'soft labels' if fields == 2 else 'second column'}, a blank line after "
                                          "each sentence (X-Mixup ner.py:56-71)")
        rows.append((number, cells))
    return sentences


def segments(path, sentences, examples, what, tokenizer):
    """[[the file's sentences] of each of `examples`]: one each, or one per XTREME segment (xtreme_segments)."""
    if len(sentences) == len(examples):
        return [[s] for s in sentences]
    cuts = [xtreme_segments(e.words, tokenizer) for e in examples] if tokenizer is not None else []
    count = sum(len(sizes) for sizes in cuts)
    if not cuts or len(sentences) != count:
        at = min(len(sentences), count or len(examples))
        raise DataError(path, sentences[at - 1][-1][0] if sentences and at else 0,
                        f"{len(sentences)} sentences for the {len(examples)} of {what}"
                        f"{f' and their {count} segments' if count else ''}: X-Mixup's files pair sentence i with "
                        "the split's sentence or segment i (ner.py:99; XTREME's preprocessing cuts a sentence of more "
                        "than 125 sub-words into segments, counted with XLM-R's tokenizer); check that it translates "
                        "this split of this language (a last sentence without a blank line after it is not read, as "
                        "ner.py's read_tagging_file drops it)")
    rest = iter(sentences)
    return [list(itertools.islice(rest, len(sizes))) for sizes in cuts]


def soft_labels(path, number, cell, labels):
    """A word's soft labels, `cell` split at ";" as ner.py splits it, checked: one number a label."""
    try:
        values = [float(v) for v in cell.split(";")]
    except ValueError:
        raise DataError(path, number, f"soft labels {cell[:60]!r} are not numbers separated by ';' "
                                      "(X-Mixup ner.py:139-140)") from None
    if len(values) != len(labels):
        raise DataError(path, number, f"{len(values)} soft labels for the task's {len(labels)} labels "
                                      f"({', '.join(labels)}), one a label in labels.txt's order")
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise DataError(path, number, f"soft labels {cell[:60]!r}: a probability is a finite number, not below 0")
    return values


def read_soft_labelled(path, lang, sources, labels, columns=None, tokenizer=None):
    """[(Example, [each word's soft labels in `labels`' order])] of translate-train-logits/<lang>.txt."""
    sentences = segments(path, tagging_sentences(path), sources, source_file(sources), tokenizer)
    column = [list(columns or labels).index(label) for label in labels]
    out = []
    for source, parts in zip(sources, sentences):
        rows = [row for part in parts for row in part]
        words = [cells[0] for _, cells in rows]
        soft = [soft_labels(path, n, cells[1], labels) for n, cells in rows]
        out.append((Example(id=source.id, lang=lang, text=" ".join(words), words=words, where=f"{path}:{rows[0][0]}"),
                    [[values[c] for c in column] for values in soft]))
    return out


def label_columns(directory, labels):
    """The order of X-Mixup's soft-label columns: the folder's labels.txt, else XTREME's (the tags sorted)."""
    path = Path(directory) / "labels.txt"
    if not path.is_file():
        return sorted(labels)
    columns = [line.strip() for _, line in read_lines(path) if line.strip()]
    if sorted(columns) != sorted(labels):
        raise DataError(path, 0, f"labels {', '.join(columns)}: X-Mixup's soft labels need the task's, "
                                 f"{', '.join(labels)}, each once, in the order of their columns")
    return columns


def source_file(sources):
    return f"the source's training file ({sources[0].where.rpartition(':')[0] if sources else ''})"


def untagged_sentences(path, examples, lang, what, tokenizer=None, joined=True):
    """An X-Mixup token file's sentences, each example's joined under its id (not `joined`: a segment at a time)."""
    out = []
    for e, parts in zip(examples, segments(path, tagging_sentences(path, fields=None), examples, what, tokenizer)):
        parts = [[row for part in parts for row in part]] if joined else parts
        for k, rows in enumerate(parts):
            words = [cells[0] for _, cells in rows]
            out.append(Example(id=f"{e.id}#{k}" if k else e.id, lang=lang, text=" ".join(words), words=words,
                               where=f"{path}:{rows[0][0]}"))
    return out


def teacher_rows(items, soft, num_labels):
    """{(id, lang): (T, C) teacher log-probabilities} of encoded translations from their words' soft labels `soft`
    (NaN where they sum to at most KEPT: not trained on); an item without them (the source's own) is one-hot gold."""
    out = {}
    for it in items:
        row = torch.zeros(len(it.ids), num_labels)
        words = soft.get((it.id, it.lang))
        for w, token in it.extra["scored"]:
            p = (torch.tensor(words[w]) if words is not None
                 else torch.nn.functional.one_hot(torch.tensor(it.label[token]), num_labels).float())
            row[token] = p.clamp(min=1e-30).log() if p.sum() > KEPT else float("nan")
        out[(it.id, it.lang)] = row
    return out


class XmixupTranslations:
    """X-Mixup's translations as XTREME's tagging layouts read them where a run names them (--soft-labels)."""
    soft_labels = None  # the path of X-Mixup's translate-train-logits files, with {lang}

    def logits_file(self, lang):
        return Path(self.soft_labels.replace("{lang}", lang))

    def split_file(self, lang, split):
        if self.soft_labels and split == "train" and lang != self.source:
            return self.logits_file(lang)
        return super().split_file(lang, split)

    def read_translations(self, lang):
        if not self.soft_labels:
            return super().read_translations(lang)
        return [e for e, _ in self.soft_labelled(lang)]

    def soft_labelled(self, lang):
        """[(Example, [each word's soft labels])] of translate-train-logits/<lang>.txt, read once."""
        path = self.logits_file(lang)
        if not path.is_file():
            return []
        return self.once((lang, "soft labels"), lambda: read_soft_labelled(
            path, lang, self.source_train(), self.labels, label_columns(self.directory, self.labels), self.tokenizer))

    def each_round_trip(self, path, lang):
        """X-Mixup's round trips of the source's training sentences through `lang` (--round-trip), by sentence."""
        sources = self.source_train()
        return iter(untagged_sentences(Path(path), sources, lang, source_file(sources), self.tokenizer))

    def soft_labels_of(self, lang):
        """{(id, lang): [each word's soft labels]} of a target's training examples."""
        if not self.soft_labels:
            raise InputError("the released soft labels are read with --soft-labels")
        return {(e.id, e.lang): soft for e, soft in self.soft_labelled(lang)}
