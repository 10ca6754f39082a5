"""MTOP (Li et al. 2021), its flat intents and slots: <lang>/{train,eval,test}.txt as released, eight tab-separated
columns (MTOP_COLUMNS), its slots' character spans made BIO tags of its tokens (mtop_tags)."""
import json
import re

from data import Example
from minxlt.errors import DataError
from minxlt.tasks.dialogue import DialogueLayout
from minxlt.tasks.readers import UniqueIds, conlleval_tags, read_lines, warn_of_span_starts

MTOP_LANGS = ["en", "de", "es", "fr", "hi", "th"]
MTOP_COLUMNS = ("id", "intent", "slots", "utterance", "domain", "locale", "decoupled", "tokens")
SLOT = re.compile(r"(\d+):(\d+):SL:(\S+)")  # "start:end:SL:TYPE", characters of the utterance


def mtop_tags(path, line, tokens, spans, slots, length):
    """A row's tokens' BIO tags from its slots as XeroAlign's preprocess.py reads them (the first slot listed wins)."""
    parsed = []
    for entry in slots.split(",") if slots else []:
        match = SLOT.fullmatch(entry)
        if not match:
            raise DataError(path, line, f"slot {entry!r} is not start:end:SL:TYPE")
        start, end, kind = int(match.group(1)), int(match.group(2)), match.group(3)
        if not 0 <= start < end <= length:
            raise DataError(path, line, f"slot {entry!r} is not a span of the {length}-character utterance")
        parsed.append((start, end, kind))
    return [next((("B-" if start == a else "I-") + k for a, b, k in parsed
                  if start == a or (a < start and start + size <= b)), "O") for start, size in spans]


def token_spans(path, line, cell):
    """(tokens, [(start, length)]) of the tokens column, {"tokens": [...], "tokenSpans": [{"start", "length"}]}."""
    try:
        value = json.loads(cell)
        tokens, spans = value["tokens"], [(s["start"], s["length"]) for s in value["tokenSpans"]]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise DataError(path, line, f"the tokens column is not JSON of tokens and tokenSpans ({e!r})") from None
    if not tokens or len(tokens) != len(spans) or not all(isinstance(t, str) and t for t in tokens):
        raise DataError(path, line, f"{len(tokens)} tokens and {len(spans)} token spans: give each token its span")
    if not all(type(s) is int and type(n) is int and s >= 0 and n > 0 for s, n in spans):
        raise DataError(path, line, "a token span's start and length are not whole numbers")
    return tokens, spans


def read_mtop(path, lang):
    """A split: an Example a row, its intent (without "IN:") the label, its tokens' BIO slot tags (without "SL:")."""
    examples, starts, ids = [], [], UniqueIds(path)
    for line, text in read_lines(path):
        cells = text.split("\t")
        if len(cells) != len(MTOP_COLUMNS):
            raise DataError(path, line, f"{len(cells)} columns, expected {len(MTOP_COLUMNS)} "
                                        f"({', '.join(MTOP_COLUMNS)})")
        row = dict(zip(MTOP_COLUMNS, cells))
        if not row["intent"].startswith("IN:"):
            raise DataError(path, line, f"intent {row['intent']!r} does not start with IN: "
                                        "(is the first column the id?)")
        if not row["id"].strip() or not row["utterance"].strip():
            raise DataError(path, line, "empty id or utterance")
        ids.check(line, row["id"])
        tokens, spans = token_spans(path, line, row["tokens"])
        tags = mtop_tags(path, line, tokens, spans, row["slots"], len(row["utterance"]))
        examples.append(Example(id=row["id"], lang=lang, text=row["utterance"], label=row["intent"][3:],
                                words=tokens, tags=conlleval_tags([(line, tag) for tag in tags], starts),
                                where=f"{path}:{line}"))
    warn_of_span_starts(path, starts)
    return examples


class Mtop(DialogueLayout):
    """<data>/<lang>/{train,eval,test}.txt (dev is `eval`); a target's training file translates English's, by id."""
    langs, pattern = MTOP_LANGS, "<lang>/{train,eval,test}.txt"
    reader = staticmethod(read_mtop)

    def found(self):
        return {p.parent.name for p in self.directory.glob("*/eval.txt")
                if all((p.parent / f"{split}.txt").is_file() for split in ("train", "test"))}

    def split_file(self, lang, split):
        return self.directory / lang / f"{'eval' if split == 'dev' else split}.txt"
