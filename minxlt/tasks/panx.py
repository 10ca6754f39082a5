"""PAN-X (WikiANN) as XTREME writes it: named entities, no translations."""

from data import Example
from minxlt.errors import DataError
from minxlt.tasks.readers import check_label, conlleval_tags, read_lines, warn_of_span_starts
from minxlt.tasks.task import Layout

PANX_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")

PANX_LANGS = ("en af ar bg bn de el es et eu fa fi fr he hi hu id it ja jv ka kk ko ml mr ms my nl pt ru sw ta te th tl tr ur vi "
              "yo zh").split()

def read_panx(path, lang, labels):
    """PAN-X (WikiANN) as XTREME writes it, {train,dev,test}-<lang>.tsv: a token and its BIO tag per
    line (test files: the token alone), a blank line after each sentence; the id is the sentence's number."""
    examples, rows, starts = [], [], []
    for number, line in read_lines(path) + [(None, "")]:
        if line.strip():
            rows.append((number, line.split("\t")))
            continue
        if not rows:
            continue
        if len({len(cells) for _, cells in rows}) > 1 or len(rows[0][1]) > 2:
            raise DataError(path, rows[0][0], "every line of a sentence is a token and its tag, or the token alone (a test file)")
        words = [cells[0] for _, cells in rows]
        tags = [check_label(path, n, cells[1].strip(), labels) for n, cells in rows] if len(rows[0][1]) == 2 else None
        examples.append(Example(id=str(len(examples) + 1), lang=lang, text=" ".join(words), words=words,
                                tags=tags and conlleval_tags(zip([n for n, _ in rows], tags), starts), where=f"{path}:{rows[0][0]}"))
        rows = []
    warn_of_span_starts(path, starts)
    return examples

class Panx(Layout):
    """PAN-X (WikiANN) as XTREME writes it: <data>/{train,dev,test}-<lang>.tsv. The target
    languages' own training files are not translations, and zero-shot transfer does not train on
    them, so the targets have no training examples; XTREME has no translations of PAN-X."""
    langs, labels, level, pattern = PANX_LANGS, list(PANX_LABELS), "word", "{train,dev,test}-<lang>.tsv"
    parallel, translations = False, "none: XTREME has no translations of PAN-X"

    def found(self):
        return self.files_like("test-{lang}.tsv")

    def read(self, lang, split):
        if split == "train" and lang != self.source:
            return []
        return read_panx(self.directory / f"{split}-{lang}.tsv", lang, self.labels)
