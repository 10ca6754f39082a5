"""XQuAD (Artetxe et al. 2020): split by article (Xquad), or every question tested with SQuAD v1.1 to train on
(XquadSquad), as XTREME and the papers test it."""
import zlib
from pathlib import Path

from data import Layout
from minxlt.errors import DataError
from minxlt.tasks.readers import read_squad, squad_blanked

XQUAD_LANGS = ["en", "ar", "de", "el", "es", "hi", "ro", "ru", "th", "tr", "vi", "zh"]


def xquad_split(title):
    """XQuAD's 48 articles split by title: 35 (897 questions) train, 4 (91) dev, 9 (202) test."""
    bucket = zlib.crc32(title.encode()) % 10
    return "test" if bucket < 3 else "dev" if bucket == 3 else "train"


class Xquad(Layout):
    """<data>/xquad.<lang>.json split by article; a folder XTREME blanked is a test set (XtremeXquad)."""
    langs, labels, level, pattern = XQUAD_LANGS, ["start", "end"], "span", "xquad.<lang>.json"
    listing = "xquad.{lang}.json"

    @classmethod
    def for_folder(cls, directory):
        english = Path(directory or ".") / "xquad.en.json"
        return XtremeXquad if english.is_file() and squad_blanked(english) else cls

    def read(self, lang, split):
        examples = self.once(lang, lambda: read_squad(self.directory / f"xquad.{lang}.json", lang))
        return [e for e in examples if xquad_split(e.group) == split]


class SquadTrained(Layout):
    """A QA test set trained on SQuAD v1.1 in <data>/../squad/, as XTREME's download writes it."""
    labels, level, name = ["start", "end"], "span", "a QA test set"
    translations = "../squad/translate-train/squad.translate.train.en-<lang>.json"

    def squad(self, name):
        path = self.directory.parent / "squad" / name
        if not path.is_file():
            raise DataError(path, 0, f"not found: {self.name} trains on SQuAD v1.1, which XTREME's download puts in "
                                     f"squad/ beside {self.directory.name}/ (python download.py squad --to "
                                     f"{path.parent})")
        return path

    def split_file(self, lang, split):
        if split == "train":
            return self.directory.parent / "squad" / ("train-v1.1.json" if lang == self.source else
                                                      f"translate-train/squad.translate.train.en-{lang}.json")
        return super().split_file(lang, split)

    def train(self, lang):
        if lang == self.source:
            return self.once("squad", lambda: read_squad(self.squad("train-v1.1.json"), lang))
        path = self.split_file(lang, "train")
        return read_squad(path, lang, noisy=True) if path.is_file() else []

    def each_round_trip(self, path, lang):
        """X-Mixup's round trips of SQuAD's training questions through `lang` (--round-trip)."""
        return read_squad(path, lang, noisy=True)


class XquadSquad(SquadTrained):
    """All of XQuAD tested (scored where its answers are kept, else predicted); SQuAD v1.1 trains and selects."""
    langs, pattern, listing, name = XQUAD_LANGS, "xquad.<lang>.json", "xquad.{lang}.json", "xquad-squad"

    def split_file(self, lang, split):
        return (self.directory.parent / "squad" / "dev-v1.1.json" if split == "dev"
                else super().split_file(lang, split))

    def read(self, lang, split):
        if split == "train":
            return self.train(lang)
        if split == "dev":
            return read_squad(self.squad("dev-v1.1.json"), lang) if lang == self.source else []
        return read_squad(self.directory / f"xquad.{lang}.json", lang, blank=True)


class XtremeXquad(XquadSquad):
    """XQuAD as XTREME writes it, its answers blanked: what task xquad reads such a folder as."""
    name = "xquad"
