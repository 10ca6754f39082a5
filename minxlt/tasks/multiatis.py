"""MultiATIS++ (Xu et al. 2020): ATIS in nine languages, an intent and a BIO tag a word, as the release (LDC2021T04)
or XeroAlign's authors' corrected copy (github.com/milangritta/Datasets, m_atis.zip) write it."""
from data import Example
from minxlt.errors import DataError
from minxlt.tasks.dialogue import DialogueLayout, bio_tag
from minxlt.tasks.readers import UniqueIds, conlleval_tags, each_tsv, warn_of_span_starts

MULTIATIS_LANGS = ["en", "de", "es", "fr", "hi", "ja", "pt", "tr", "zh"]
MULTIATIS_COLUMNS = ("id", "utterance", "slot_labels", "intent")


def read_multiatis(path, lang):
    """A split as XeroAlign's preprocess.py reads it: words and tags split at ASCII spaces, one a word."""
    examples, starts, ids = [], [], UniqueIds(path)
    for line, row in each_tsv(path, MULTIATIS_COLUMNS):
        words, tags = row["utterance"].split(" "), row["slot_labels"].split(" ")  # ASCII spaces: "D.\xa0C." is one word
        if len(words) != len(tags):
            raise DataError(path, line, f"{len(words)} words and {len(tags)} slot tags (split at each space): "
                                        "give each word its tag (XeroAlign's authors' copy, "
                                        "github.com/milangritta/Datasets, corrects the release's)")
        words, tags = [w for w in words if w], [t for w, t in zip(words, tags) if w]
        ids.check(line, row["id"])
        tags = conlleval_tags([(line, bio_tag(path, line, tag)) for tag in tags], starts)
        examples.append(Example(id=row["id"], lang=lang, text=row["utterance"], label=row["intent"], words=words,
                                tags=tags, where=f"{path}:{line}"))
    warn_of_span_starts(path, starts)
    return examples


class MultiAtis(DialogueLayout):
    """<data>/{train,dev,test}_<LANG>.tsv (the release) or <data>/<lang>/{train,dev,test}.txt (XeroAlign's copy)."""
    langs, pattern = MULTIATIS_LANGS, "{train,dev,test}_<LANG>.tsv or <lang>/{train,dev,test}.txt"
    reader = staticmethod(read_multiatis)

    def found(self):
        released = {p.name[len("train_"):-len(".tsv")].lower() for p in self.directory.glob("train_*.tsv")}
        copied = {p.parent.name for p in self.directory.glob("*/train.txt")}
        return {lang for lang in released | copied
                if all(self.split_file(lang, split).is_file() for split in ("dev", "test"))}

    def split_file(self, lang, split):
        released = self.directory / f"{split}_{lang.upper()}.tsv"
        return (released if released.is_file() or not (self.directory / lang).is_dir()
                else self.directory / lang / f"{split}.txt")
