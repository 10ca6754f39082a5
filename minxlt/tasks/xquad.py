"""XQuAD (Artetxe et al. 2020): extractive QA, split by article (Xquad); or, as XTREME and the papers
test it, every question a test question, with SQuAD v1.1 to train on (XquadSquad, SquadTrained)."""
import zlib
from pathlib import Path

from minxlt.errors import DataError
from minxlt.tasks.readers import read_squad, squad_blanked, squad_round_trips
from minxlt.tasks.task import Layout

XQUAD_LANGS = ["en", "ar", "de", "el", "es", "hi", "ro", "ru", "th", "tr", "vi", "zh"]

def xquad_split(title):
    """XQuAD has only a test set: its 48 articles are split by title, the same in every language,
    so that no test paragraph is seen in any language during training. 35 articles (897
    questions) train, 4 (91) are the dev set, 9 (202) the test set."""
    bucket = zlib.crc32(title.encode()) % 10
    return "test" if bucket < 3 else "dev" if bucket == 3 else "train"

class Xquad(Layout):
    """<data>/xquad.<lang>.json, split by article (`xquad_split`); a folder whose answers XTREME
    has blanked is a test set only, with SQuAD to train on (XtremeXquad). All of XQuAD tested,
    answers kept, is task xquad-squad (XquadSquad)."""
    langs, labels, level, pattern = XQUAD_LANGS, ["start", "end"], "span", "xquad.<lang>.json"

    @classmethod
    def for_folder(cls, directory):
        english = Path(directory or ".") / "xquad.en.json"
        return XtremeXquad if english.is_file() and squad_blanked(english) else cls

    def found(self):
        return self.files_like("xquad.{lang}.json")

    def read(self, lang, split):
        examples = self.once(lang, lambda: read_squad(self.directory / f"xquad.{lang}.json", lang))
        return [e for e in examples if xquad_split(e.group) == split]

class SquadTrained(Layout):
    """A QA test set that trains on SQuAD v1.1 in the sibling folder squad/ (<data>/../squad/
    train-v1.1.json, as XTREME's download writes it), with its translations where XTREME's
    translate-train files are there (squad/translate-train/squad.translate.train.en-<lang>.json)."""
    labels, level, name = ["start", "end"], "span", "a QA test set"
    translations = "../squad/translate-train/squad.translate.train.en-<lang>.json"

    def squad(self, name):
        path = self.directory.parent / "squad" / name
        if not path.is_file():
            raise DataError(path, 0, f"not found: {self.name} trains on SQuAD v1.1, which XTREME's download "
                                     f"puts in squad/ beside {self.directory.name}/ (python download.py squad --to {path.parent})")
        return path

    def split_file(self, lang, split):
        if split == "train":
            return self.directory.parent / "squad" / ("train-v1.1.json" if lang == self.source else
                                                      f"translate-train/squad.translate.train.en-{lang}.json")
        return super().split_file(lang, split)

    def train(self, lang):
        if lang == self.source:
            return self.once("squad", lambda: read_squad(self.squad("train-v1.1.json"), lang))
        path = self.directory.parent / "squad" / "translate-train" / f"squad.translate.train.en-{lang}.json"
        return read_squad(path, lang, noisy=True) if path.is_file() else []

    def each_round_trip(self, path, lang):
        """X-Mixup's round trips of SQuAD's training questions through `lang` (--round-trip:
        ../squad/translate-train-en/squad.translate.train.en-{lang}-en.json, as its README lays them out)."""
        return squad_round_trips(path, lang)

class XquadSquad(SquadTrained):
    """All of XQuAD as XTREME and the papers test it: <data>/xquad.<lang>.json is the test set, scored
    where the folder keeps its answers (google-deepmind/xquad's release), predicted where XTREME has
    blanked them; English SQuAD v1.1 trains (train-v1.1.json) and selects (dev-v1.1.json)."""
    langs, pattern, name = XQUAD_LANGS, "xquad.<lang>.json", "xquad-squad"

    def found(self):
        return self.files_like("xquad.{lang}.json")

    def split_file(self, lang, split):
        return self.directory.parent / "squad" / "dev-v1.1.json" if split == "dev" else super().split_file(lang, split)

    def read(self, lang, split):
        if split == "train":
            return self.train(lang)
        if split == "dev":
            return read_squad(self.squad("dev-v1.1.json"), lang) if lang == self.source else []
        return read_squad(self.directory / f"xquad.{lang}.json", lang, blank=True)

class XtremeXquad(XquadSquad):
    """XQuAD as XTREME writes it, its answers blanked: what task xquad reads such a folder as (XquadSquad)."""
    name = "xquad"
