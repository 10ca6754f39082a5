"""UPOS tagging: UD PUD's parallel sentences split by id (Udpos), or XTREME's UD-POS (XtremeUdpos) and how
XTREME's scripts read a treebank (xtreme_sentences, which download.py udpos-xtreme follows)."""
import zlib
from pathlib import Path

from data import Example, Layout
from minxlt.errors import DataError
from minxlt.tasks.filter_tags import FilterTranslations
from minxlt.tasks.readers import conll_sentences, read_tagged_words, unique_ids
from minxlt.tasks.xmixup_tags import XmixupTranslations

UPOS_LABELS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
               "SCONJ", "SYM", "VERB", "X")

UDPOS_LANGS = ["en", "de", "fr", "ru", "zh", "hi"]

# utils_preprocess.py's UDPOS_LANGUAGES: XTREME's (UD v2.5), then XTREME-R's (v2.7)
XTREME_UDPOS_LANGS = ("af ar bg de el en es et eu fa fi fr he hi hu id it ja kk ko mr nl pt ru ta te th tl tr ur vi yo "
                      "zh lt pl uk wo ro").split()


def read_conllu(path, lang):
    """CoNLL-U: an Example a sentence, its syntactic words ("zur" is "zu dem") and UPOS tags; id: `# parallel_id`
    without its prefix ("pud/n01001011" -> "n01001011"), else `# sent_id` (PUD Russian), shared by translations."""
    examples, ids = [], []
    for start, meta, rows in conll_sentences(path, 10):
        words, tags = [], []
        for number, cells in rows:
            if "-" in cells[0] or "." in cells[0]:
                continue
            if not cells[0].isdigit():
                raise DataError(path, number, f"word index {cells[0]!r} is not a number, a range or a decimal")
            if cells[3] not in UPOS_LABELS:
                raise DataError(path, number, f"UPOS tag {cells[3]!r} is not one of {', '.join(UPOS_LABELS)}")
            words.append(cells[1])
            tags.append(cells[3])
        id = meta.get("parallel_id", "").rpartition("/")[2] or meta.get("sent_id")
        if not id:
            raise DataError(path, start, "sentence without '# sent_id' or '# parallel_id'")
        if not words:
            raise DataError(path, start, "sentence without words")
        examples.append(Example(id=id, lang=lang, text=meta.get("text", " ".join(words)), words=words, tags=tags,
                                source_text=meta.get("english_text"), where=f"{path}:{start}"))
        ids.append((start, id))
    unique_ids(path, ids, "sentence id")
    return examples


def ud_split(id):
    """A UD PUD sentence's split from its id alone (the same in every language): 70% train, 10% dev, 20% test."""
    bucket = zlib.crc32(id.encode()) % 10
    return "test" if bucket < 2 else "dev" if bucket == 2 else "train"


class Udpos(Layout):
    """UD PUD's <data>/<lang>_pud-ud-test.conllu, split by sentence id; a folder of test-<lang>.tsv is XtremeUdpos."""
    langs, labels, level, pattern = UDPOS_LANGS, list(UPOS_LABELS), "word", "<lang>_pud-ud-test.conllu"
    listing = "{lang}_pud-ud-test.conllu"

    @classmethod
    def for_folder(cls, directory):
        return XtremeUdpos if directory and any(Path(directory).glob("test-*.tsv")) else cls

    def read(self, lang, split):
        examples = read_conllu(self.directory / f"{lang}_pud-ud-test.conllu", lang)
        return [e for e in examples if ud_split(e.id) == split]


class XtremeUdpos(XmixupTranslations, FilterTranslations, Udpos):
    """XTREME's UD-POS, <data>/{train,dev,test}-<lang>.tsv, scored by seqeval's F1 as XTREME's run_tag.py does."""
    langs, pattern, listing = XTREME_UDPOS_LANGS, "{train,dev,test}-<lang>.tsv", "test-{lang}.tsv"
    parallel = False
    pos_metric = "f1"

    def read(self, lang, split):
        path = self.directory / f"{split}-{lang}.tsv"
        if lang != self.source and split == "train":
            return self.read_translations(lang)
        if lang != self.source and split == "dev" and not path.is_file():
            return []
        return read_tagged_words(path, lang, self.labels)


class ConverterStops(DataError):
    """Where XTREME's converter (conllu_to_conll.py) stops on a CoNLL-U file, before or while writing it."""


# conllu_to_conll.py: where a multi-word token's words are equally near the root, the first whose tag
# comes earliest in its language's list gives the token its tag; a tag not in the list stops the file
POS_PRECEDENCE = {"es": "VERB AUX PRON ADP DET", "fr": "VERB AUX PRON NOUN ADJ ADV ADP DET PART SCONJ CONJ",
                  "it": "VERB AUX ADV PRON ADP DET INTJ"}
DEFAULT_PRECEDENCE = "VERB NOUN PROPN PRON ADJ NUM ADV INTJ AUX ADP DET PART CCONJ SCONJ X PUNCT"


def xtreme_sentences(path, text, lang):
    """(sentences [(words, tags)] XTREME's UD-POS keeps of a CoNLL-U file, where the converter stops writing or None),
    as conllu_to_conll.py --replace_subtokens_with_fused_forms and udpos_preprocess make them (docs/data.md)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    sentences, words, ranges, start, stop, written = [], [], {}, None, None, None
    for number, line in enumerate(lines[:-1] if lines[-1] == "" else lines, start=1):
        if not line:
            if words or ranges:
                forms, tags = fused_words(path, start, words, ranges, lang)
                blank = sum(form == "_" for form in forms)
                if blank == 0 or blank < len(forms) - 1:
                    sentences.append(([form.replace("\u200c", "").replace(" ", "") for form in forms], tags))
            elif stop is None:
                stop, written = ConverterStops(path, number, "a sentence without words"), len(sentences)
            words, ranges, start = [], {}, None
            continue
        start = start or number
        if line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) != 10:
            raise ConverterStops(path, number, f"{len(cells)} columns, expected 10")
        id, head, deps = (conllu_id(path, number, cells[0]), conllu_id(path, number, cells[6]),
                          enhanced_heads(path, number, cells[8]))
        if isinstance(id, tuple):
            ranges[id[0]] = (number, id, cells[1])
        elif id is not None:
            if not isinstance(head, int):
                raise ConverterStops(path, number, f"word {id} has head {cells[6]!r}, not a word's number")
            words.append((number, id, cells[1].strip(), cells[3].strip(), {head, *deps}))
    return (sentences, None) if stop is None else (sentences[:written], stop)


def conllu_id(path, line, cell):
    """An ID or HEAD cell as conllu_to_conll.py reads it: a word's number, a range (first, last), or None (7.1, _)."""
    if cell == "_" or "." in cell:
        return None
    try:
        numbers = tuple(int(n) for n in cell.split("-"))
    except ValueError:
        raise ConverterStops(path, line, f"{cell!r} is not a word's number or a range") from None
    if len(numbers) > 2:
        raise ConverterStops(path, line, f"{cell!r} is not a word's number or a range")
    return numbers[0] if len(numbers) == 1 else numbers


def enhanced_heads(path, line, cell):
    """The heads in a DEPS cell ("4:nsubj|7:obj") that are words, as conllu_to_conll.py reads them."""
    heads = set()
    for pair in [] if cell == "_" else [pair.split(":") for pair in cell.split("|")]:
        if pair[0].isdigit():
            if len(pair) < 2 or not pair[0].isdecimal():  # int() reads what isdecimal() accepts
                raise ConverterStops(path, line, f"DEPS {cell!r} is not head:relation pairs")
            heads.add(int(pair[0]))
    return heads


def fused_words(path, line, words, ranges, lang):
    """A sentence's forms and tags with each multi-word token one word: its form, the tag of its word nearest the
    root (ties: POS_PRECEDENCE). `words`: (line, number, form, upos, heads); `ranges`: (line, (first, last), form)."""
    numbers = [number for _, number, _, _, _ in words]
    if numbers != list(range(1, len(words) + 1)):
        raise DataError(path, line, f"word numbers {numbers[:10]}: a sentence's words are numbered 1, 2, ... in order")
    outside = next(((n, head) for n, _, _, _, parents in words for head in parents if not 0 <= head <= len(words)),
                   None)
    if outside:
        raise DataError(path, outside[0], f"head {outside[1]} is not a word of the sentence (it has {len(words)})")
    heads = {number: parents for _, number, _, _, parents in words}
    forms, tags = [w[2] for w in words], [w[3] for w in words]
    for at, (first, last), form in ranges.values():
        span = list(range(first, last + 1))
        if last < first or any(n not in heads for n in span):
            raise ConverterStops(path, at, f"multi-word token {first}-{last} is not a range of the sentence's words")
        depth = {n: len(ancestors(n, heads)) for n in span}
        top = [n for n in span if depth[n] == min(depth.values())]
        order = POS_PRECEDENCE.get(lang, DEFAULT_PRECEDENCE).split()
        if len(top) > 1 and any(tags[n - 1] not in order for n in top):
            raise ConverterStops(path, at, f"multi-word token {first}-{last}: its words {', '.join(map(str, top))} are "
                                           "equally near the root and a tag of theirs is not in conllu_to_conll.py's "
                                           f"list for {lang!r}")
        head = top[0] if len(top) == 1 else min(top, key=lambda n: order.index(tags[n - 1]))
        for n in span:
            forms[n - 1] = form.strip() if n == head else None
    return [f for f in forms if f is not None], [t for f, t in zip(forms, tags) if f is not None]


def ancestors(number, heads):
    """The words (and the root, 0) that a word hangs from, through any chain of heads."""
    seen, todo = set(), [number]
    while todo:
        new = heads.get(todo.pop(), set()) - seen
        seen |= new
        todo += new
    seen.discard(number)
    return seen
