"""Universal Dependencies: UPOS tagging. UD PUD's 1,000 parallel sentences, split by id (Udpos);
or XTREME's UD-POS, every treebank of a language, as XTREME's scripts write it (XtremeUdpos)."""
import zlib
from pathlib import Path

from data import Example
from minxlt.errors import DataError
from minxlt.tasks.readers import conll_sentences, read_tagged_words, unique_ids
from minxlt.tasks.task import Layout

UPOS_LABELS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
               "SCONJ", "SYM", "VERB", "X")

UDPOS_LANGS = ["en", "de", "fr", "ru", "zh", "hi"]

XTREME_UDPOS_LANGS = ("af ar bg de el en es et eu fa fi fr he hi hu id it ja kk ko mr nl pt ru ta te th tl tr ur vi yo zh "
                      "lt pl uk wo ro").split()  # utils_preprocess.py's UDPOS_LANGUAGES: XTREME's (UD v2.5), then XTREME-R's (v2.7)

def read_conllu(path, lang):
    """CoNLL-U (Universal Dependencies): one Example per sentence, its words and their UPOS tags.
    The words are the syntactic words, the units that are tagged (German "zur" is read as "zu
    dem"): multi-word token ranges ("5-6") and empty nodes ("7.1") are skipped. The id is the
    sentence's `# parallel_id` without its corpus prefix ("pud/n01001011" -> "n01001011"), or its
    `# sent_id` where there is none (PUD Russian), so that translations of a sentence share an id."""
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
    """The split of a UD PUD sentence, from its id alone, so that it is the same in every language
    and no test sentence is seen in any language during training: 70% train, 10% dev, 20% test."""
    bucket = zlib.crc32(id.encode()) % 10
    return "test" if bucket < 2 else "dev" if bucket == 2 else "train"

class Udpos(Layout):
    """UD PUD's <data>/<lang>_pud-ud-test.conllu, split by sentence id (`ud_split`); a folder with
    test-<lang>.tsv files is XTREME's (XtremeUdpos)."""
    langs, labels, level, pattern = UDPOS_LANGS, list(UPOS_LABELS), "word", "<lang>_pud-ud-test.conllu"

    @classmethod
    def for_folder(cls, directory):
        return XtremeUdpos if directory and any(Path(directory).glob("test-*.tsv")) else cls

    def found(self):
        return self.files_like("{lang}_pud-ud-test.conllu")

    def read(self, lang, split):
        examples = read_conllu(self.directory / f"{lang}_pud-ud-test.conllu", lang)
        return [e for e in examples if ud_split(e.id) == split]


class XtremeUdpos(Udpos):
    """UD-POS as XTREME writes it (utils_preprocess.py, udpos_preprocess): <data>/{train,dev,test}-<lang>.tsv,
    a word and its UPOS tag per line (test files: the word alone), a blank line after each sentence,
    every treebank of a language joined. Its sentences are not parallel across languages, the
    targets' own training files are not translations (zero-shot transfer does not train on them),
    and a language without a dev file (many have only a test set) has no dev examples."""
    langs, pattern = XTREME_UDPOS_LANGS, "{train,dev,test}-<lang>.tsv"
    parallel, translations = False, "none: XTREME has no translations of UD-POS"

    def found(self):
        return self.files_like("test-{lang}.tsv")

    def read(self, lang, split):
        path = self.directory / f"{split}-{lang}.tsv"
        if lang != self.source and (split == "train" or (split == "dev" and not path.is_file())):
            return []
        return read_tagged_words(path, lang, self.labels)

