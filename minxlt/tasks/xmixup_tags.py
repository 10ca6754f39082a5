"""X-Mixup's translations of XTREME's UD-POS and PAN-X, as its README.md:25-33 lays them out
(udpos/ and panx/, from the folder README.md:64 links) and its xmixup/data/datasets/ner.py reads
them (TagProcessor.get_examples_with_trans, lines 73-120), each <lang>.txt:

    translate-train-logits/<lang>.txt   the English training sentences translated into <lang>, each
                                        word with a source model's soft labels (Sec. 4.2): floats
                                        separated by ";", in the order of the labels in the
                                        folder's labels.txt (label_columns), sentence i the
                                        translation of English's i-th
    translate-test-token/<lang>.txt     <lang>'s test sentences translated into English, sentence i
                                        the translation of the test file's i-th
    translate-dev-token/<lang>.txt      <lang>'s dev sentences, the same way
    translate-train-en-token/<lang>.txt the English training sentences translated into <lang> and
                                        back (scheduled sampling's round trips, Sec. 4.3), sentence
                                        i the round trip of English's i-th, without tags

A file is read as read_tagging_file (ner.py:56-71, with base.py:38-41's csv.reader: tab-separated,
every character as it is) reads one: a line of two fields is a word and its second column, a
blank line closes a sentence. Where ner.py would go on silently (a line of one field closes a
sentence there; several blank lines in a row make empty sentences), the file is refused, naming
its line. As there, a last sentence without a blank line after it is not read.

X-Mixup's data folder (README.md:25-33) holds en/train.tsv, <lang>/{dev,test}.tsv and
labels.txt (train_tagging.sh's --labels): the layout of XTREME's processed folder, which
scripts/preprocess_{panx,udpos}.sh write from train-en.tsv and {dev,test}-<lang>.tsv as
<lang>/{train,dev,test}.<model> beside labels.txt, each sentence whose words take more than 125 of
XLM-R's sub-words cut into segments (filter_tags.xtreme_segments), a segment a sentence. So
sentence i of a translation file is taken to be the i-th segment of XTREME's split: a file with a
sentence for each of the split's segments is read so (`segments`), one with a sentence for each of
its sentences (where none is cut, the same) sentence by sentence, and one with another number is
refused. Where ner.py:104-107 keeps a dev set's first 1,000, every dev sentence is read here, and
--dev-limit 1000 scores the first 1,000 sentences of each language.
"""
import math
from pathlib import Path

import torch

from data import Example
from minxlt.errors import DataError, InputError
from minxlt.tasks.filter_tags import xtreme_segments
from minxlt.tasks.readers import read_lines

TRAIN, TEST, DEV = "translate-train-logits", "translate-test-token", "translate-dev-token"  # README.md:30-32
ROUND_TRIP = "translate-train-en-token"  # README.md:33
KEPT = 0.5  # token_classification.py:120-121: a word is trained on where its soft labels sum to more than this


def tagging_sentences(path, fields=2):
    """[[(line number, cells)] of each sentence] of an X-Mixup tagging file: `fields` tab-separated
    fields a word (the token files: at least 2, of which ner.py reads the first), a blank line
    after each sentence (ner.py:60-64)."""
    sentences, rows = [], []
    for number, line in read_lines(path):
        if not line:
            if not rows:
                raise DataError(path, number, "a blank line after a blank line (or at the start): X-Mixup's read_tagging_file "
                                              "(ner.py:60-64) would read an empty sentence there, which no sentence of the split is")
            sentences.append(rows)
            rows = []
            continue
        cells = line.split("\t")
        if len(cells) < 2 or (fields == 2 and len(cells) != 2):
            raise DataError(path, number, f"{len(cells)} tab-separated field(s): a line is a word and its "
                                          f"{'soft labels' if fields == 2 else 'second column'}, a blank line after each sentence "
                                          "(X-Mixup ner.py:56-71)")
        rows.append((number, cells))
    return sentences


def segments(path, sentences, examples, what, tokenizer):
    """[[the file's sentences] of each of `examples`]: one each where the counts are equal, else each
    example's XTREME segments' (xtreme_segments, counted with `tokenizer`, XLM-R's), in order."""
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
    out, at = [], 0
    for sizes in cuts:
        out.append(sentences[at:at + len(sizes)])
        at += len(sizes)
    return out


def soft_labels(path, number, cell, labels):
    """A word's soft labels, `cell` as ner.py:139-140 splits it, checked: one number a label."""
    try:
        values = [float(v) for v in cell.split(";")]
    except ValueError:
        raise DataError(path, number, f"soft labels {cell[:60]!r} are not numbers separated by ';' (X-Mixup ner.py:139-140)") from None
    if len(values) != len(labels):
        raise DataError(path, number, f"{len(values)} soft labels for the task's {len(labels)} labels ({', '.join(labels)}), "
                                      "one a label in labels.txt's order")
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise DataError(path, number, f"soft labels {cell[:60]!r}: a probability is a finite number, not below 0")
    return values


def read_soft_labelled(path, lang, sources, labels, columns=None, tokenizer=None):
    """[(Example, [each word's soft labels, in `labels`' order])]: the translations into `lang` of
    the source's training sentences (`sources`, in their file's order), from
    translate-train-logits/<lang>.txt, each with its source's id and no tags (ner.py:96-99 and
    112-117), a sentence's segments' joined; the file's columns are the labels in the order of
    `columns` (label_columns)."""
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
    """The order of the labels in X-Mixup's soft-label columns: its labels.txt's (run_tagging.py:119
    reads the file its train_tagging.sh names, a label a line), from the data folder where it is
    there, else XTREME's, which scripts/preprocess_panx.sh:43 and preprocess_udpos.sh:45 write as
    `sort | uniq` of the tags: sorted (PAN-X: B-LOC, B-ORG, B-PER, I-LOC, I-ORG, I-PER, O; UPOS as
    listed). A labels.txt of other labels than the task's is refused."""
    path = Path(directory) / "labels.txt"
    if not path.is_file():
        return sorted(labels)
    columns = [line.strip() for _, line in read_lines(path) if line.strip()]
    if sorted(columns) != sorted(labels):
        raise DataError(path, 0, f"labels {', '.join(columns)}: X-Mixup's soft labels need the task's, {', '.join(labels)}, "
                                 "each once, in the order of their columns")
    return columns


def source_file(sources):
    return f"the source's training file ({sources[0].where.rpartition(':')[0] if sources else ''})"


def read_token_translations(path, source, examples, tokenizer=None):
    """The translations into the `source` language of a split's sentences (`examples`, in their
    file's order), from translate-{test,dev}-token/<lang>.txt: a sentence's (or its first
    segment's) with its id, its segment k's (k > 0) with "<id>#<k>", which levels.Word.score pairs
    with the sentence's window k."""
    what = f"{examples[0].lang if examples else ''}'s split"
    return untagged_sentences(path, examples, source, what, tokenizer, joined=False)


def read_round_trips(path, lang, sources, tokenizer=None):
    """The round trips through `lang` of the source's training sentences (`sources`, in their
    file's order), from translate-train-en-token/<lang>.txt: each with its source's id and no tags,
    a sentence's segments' joined, as ner.py:81-83 reads them (a word and a second column, unread,
    a line) and pairs sentence i with sentence i (ner.py:93 and 104-105)."""
    return untagged_sentences(path, sources, lang, source_file(sources), tokenizer)


def untagged_sentences(path, examples, lang, what, tokenizer=None, joined=True):
    """The sentences of an X-Mixup token file (a word and a second column, unread, a line) of
    `examples`' sentences or segments (`segments`; `what` they are, for the message where the counts
    differ), in `lang`: each example's joined under its id, or (not `joined`) a segment at a time."""
    out = []
    for e, parts in zip(examples, segments(path, tagging_sentences(path, fields=None), examples, what, tokenizer)):
        parts = [[row for part in parts for row in part]] if joined else parts
        for k, rows in enumerate(parts):
            words = [cells[0] for _, cells in rows]
            out.append(Example(id=f"{e.id}#{k}" if k else e.id, lang=lang, text=" ".join(words), words=words,
                               where=f"{path}:{rows[0][0]}"))
    return out


def is_token_file(path, lang):
    """Whether `path` is one of X-Mixup's translate-{test,dev}-token/<lang>.txt."""
    return path.name == f"{lang}.txt" and path.parent.name in (TEST, DEV)


def teacher_rows(items, soft, num_labels):
    """{(id, lang): (T, C) teacher logits} of the encoded translations `items` from their words'
    released soft labels `soft` ({(id, lang): [each word's]}), for teacher.Teacher's cache: each
    scored word's on its token as log-probabilities; a word whose soft labels sum to at most 0.5
    (token_classification.py:119-121) is not trained on: NaN there, which levels.Word.soft_label_loss
    leaves out, as it does the tokens that carry no word. An item without released soft labels
    (the source's own sentence, paired with itself) has its gold tags, one-hot."""
    out = {}
    for it in items:
        row = torch.zeros(len(it.ids), num_labels)
        words = soft.get((it.id, it.lang))
        for w, token in it.extra["scored"]:
            p = torch.tensor(words[w]) if words is not None else torch.nn.functional.one_hot(torch.tensor(it.label[token]), num_labels).float()
            row[token] = p.clamp(min=1e-30).log() if p.sum() > KEPT else float("nan")
        out[(it.id, it.lang)] = row
    return out

class XmixupTranslations:
    """What XTREME's word-tagging layouts (XtremeUdpos, Panx) read of X-Mixup's translations where
    a run names their soft labels (--soft-labels, load_task's soft_labels: a path with {lang}): a
    target's training examples are then translate-train-logits/<lang>.txt's sentences, or none
    where its file is not there (ner.py:91-92 goes on without it), and their soft labels are
    `soft_labels_of(lang)`; otherwise FILTER's (FilterTranslations)."""
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
        """X-Mixup's round trips of the source's training sentences through `lang` (--round-trip:
        translate-train-en-token/<lang>.txt), read_round_trips."""
        sources = self.source_train()
        return iter(read_round_trips(Path(path), lang, sources, self.tokenizer))

    def soft_labels_of(self, lang):
        """{(id, lang): [each word's soft labels]} of a target's training examples."""
        if not self.soft_labels:
            raise InputError("the released soft labels are read with --soft-labels")
        return {(e.id, e.lang): soft for e, soft in self.soft_labelled(lang)}
