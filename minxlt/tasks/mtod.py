"""MTOD (Schuster et al. 2019): alarm, reminder and weather requests, each language's own (no translations but
XeroAlign's), from the release's CoNLL files as XeroAlign's preprocess.py reads them."""
from data import Example
from minxlt.errors import DataError
from minxlt.tasks.dialogue import DialogueLayout, bio_tag
from minxlt.tasks.readers import conll_sentences, conlleval_tags, warn_of_span_starts

MTOD_LANGS = ["en", "es", "th"]


def read_mtod(path, lang):
    """A split: an Example a sentence, its '# intent' the label, its words and tags (NoLabel is O); id: its number."""
    examples, starts = [], []
    for start, meta, rows in conll_sentences(path, 4):
        if not meta.get("intent") or "text" not in meta:
            raise DataError(path, start, "sentence without its '# text:' and '# intent:' lines")
        tags = []
        for line, cells in rows:
            if not cells[1].strip():
                raise DataError(path, line, "empty word")
            tags.append((line, bio_tag(path, line, "O" if cells[3] == "NoLabel" else cells[3])))
        examples.append(Example(id=str(len(examples) + 1), lang=lang, text=meta["text"], label=meta["intent"],
                                words=[cells[1] for _, cells in rows], tags=conlleval_tags(tags, starts),
                                where=f"{path}:{start}"))
    warn_of_span_starts(path, starts)
    return examples


class Mtod(DialogueLayout):
    """<data>/<lang>/{train,eval,test}-<locale>.conllu (XeroAlign's copy: dev-, and th for th_TH); not parallel."""
    langs, pattern = MTOD_LANGS, "<lang>/{train,eval,test}-<locale>.conllu"
    reader = staticmethod(read_mtod)
    own_translations = False
    parallel = False
    translations = ("XeroAlign's machine translations of the English training utterances (<lang>/train.tsv; "
                    "the release has none)")

    def found(self):
        return {p.parent.name for p in self.directory.glob("*/train-*.conllu")
                if all(self.split_file(p.parent.name, split).is_file() for split in ("dev", "test"))}

    def split_file(self, lang, split):
        names = ["eval", "dev"] if split == "dev" else [split]
        found = sorted(p for name in names for p in (self.directory / lang).glob(f"{name}-*.conllu"))
        return found[0] if found else self.directory / lang / f"{names[0]}-{lang}.conllu"
