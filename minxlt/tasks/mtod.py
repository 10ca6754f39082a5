"""MTOD (Schuster et al. 2019): alarm, reminder and weather requests in English, Spanish and
Thai, each language's own utterances (not translations of the English ones). Read from the
release's CoNLL files, <lang>/{train,eval,test}-<locale>.conllu (Thai's locale is th_TH), as
XeroAlign's preprocess.py:27-64 reads them: "# text:", "# intent:" and "# slots:" lines, then a row
a word of index, word, intent, slot tag (NoLabel for O). XeroAlign's authors' copy
(github.com/milangritta/Datasets, mtod.zip) names dev `dev` and Thai `th`, and holds their
machine translations of the English training utterances, <lang>/train.tsv: the only translations
the data set has."""
from data import Example
from minxlt.errors import DataError
from minxlt.tasks.dialogue import DialogueLayout, bio_tag
from minxlt.tasks.readers import conll_sentences, conlleval_tags, warn_of_span_starts

MTOD_LANGS = ["en", "es", "th"]


def read_mtod(path, lang):
    """A language's split: one Example a sentence, its '# intent' the label, its words and their
    tags (NoLabel read as O). Sentences have no ids in the release: a sentence's number in its
    file is its id (no other language's sentence translates it)."""
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
                                words=[cells[1] for _, cells in rows], tags=conlleval_tags(tags, starts), where=f"{path}:{start}"))
    warn_of_span_starts(path, starts)
    return examples


class Mtod(DialogueLayout):
    """<data>/<lang>/{train,eval,test}-<locale>.conllu (or dev- for eval-); the target languages'
    dev and test sentences are not parallel with English, and their training sentences are no
    translations: a target's translations are XeroAlign's machine translations where the folder
    has them (<lang>/train.tsv beside en/train.tsv), else there are none."""
    langs, pattern = MTOD_LANGS, "<lang>/{train,eval,test}-<locale>.conllu"
    own_translations = False
    parallel = False
    translations = "XeroAlign's machine translations of the English training utterances (<lang>/train.tsv; the release has none)"

    def found(self):
        return {p.parent.name for p in self.directory.glob("*/train-*.conllu")
                if all(self.split_file(p.parent.name, split).is_file() for split in ("dev", "test"))}

    def split_file(self, lang, split):
        names = ["eval", "dev"] if split == "dev" else [split]
        found = sorted(p for name in names for p in (self.directory / lang).glob(f"{name}-*.conllu"))
        return found[0] if found else self.directory / lang / f"{names[0]}-{lang}.conllu"

    def read_file(self, lang, split):
        return read_mtod(self.split_file(lang, split), lang)
