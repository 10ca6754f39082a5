"""PAWS-X (Yang et al. 2019) as released, or as XTREME writes it (XtremePawsx)."""
from pathlib import Path

from data import Example, Layout
from minxlt.tasks.readers import UniqueIds, check_label, each_tsv, first_existing
from minxlt.tasks.xtreme import XtremePairs

PAWSX_LANGS = ["en", "de", "es", "fr", "ja", "ko", "zh"]


def each_pawsx(path, lang, noisy=None):
    """PAWS-X <lang>/{train,dev,test}.tsv or translated_train.tsv: id, sentence1, sentence2, label."""
    path = Path(path)
    noisy = path.name.startswith("translated") if noisy is None else noisy
    unique = UniqueIds(path)
    for n, r in each_tsv(path, ("id", "sentence1", "sentence2", "label"), noisy=noisy):
        unique.check(n, r["id"])
        yield Example(id=r["id"], lang=lang, text=r["sentence1"], pair=r["sentence2"],
                      label=check_label(path, n, r["label"], ("0", "1")), where=f"{path}:{n}")


class Pawsx(Layout):
    """<data>/<lang>/{train|translated_train,dev|dev_2k,test|test_2k}.tsv; a folder with train-en.tsv is XTREME's."""
    langs, labels, pattern = PAWSX_LANGS, ["0", "1"], "<lang>/{train,translated_train,dev,test}.tsv"

    @classmethod
    def for_folder(cls, directory):
        return XtremePawsx if directory and (Path(directory) / "train-en.tsv").is_file() else cls

    def found(self):
        return {p.name for p in self.directory.iterdir() if (p / "test.tsv").is_file() or (p / "test_2k.tsv").is_file()}

    def read(self, lang, split):
        return list(each_pawsx(first_existing(self.directory / lang, self.names(lang, split)), lang))

    def stream(self, lang):
        return each_pawsx(first_existing(self.directory / lang, self.names(lang, "train")), lang)

    def names(self, lang, split):
        return {"train": ["train.tsv"] if lang == self.source else ["translated_train.tsv"],
                "dev": ["dev.tsv", "dev_2k.tsv"], "test": ["test.tsv", "test_2k.tsv"]}[split]

    def split_file(self, lang, split):
        paths = [self.directory / lang / name for name in self.names(lang, split)]
        return next((path for path in paths if path.is_file()), paths[0])

    def train_files(self, lang):
        return [self.split_file(lang, "train")]

    def each_round_trip(self, path, lang):
        """X-Mixup's round trips of PAWS-X's English through `lang` (translated_train.<lang>-en.tsv), paired by id."""
        for n, r in each_tsv(path, ("id", "sentence1", "sentence2", "label"), header=False, noisy=True, optional=1):
            if n > 1:
                yield Example(id=r["id"], lang=lang, text=r["sentence1"], pair=r["sentence2"], where=f"{path}:{n}")


class XtremePawsx(XtremePairs, Pawsx):
    """PAWS-X in XTREME's layout."""
    found = Layout.found  # its languages by XtremePairs.listing, not by the release's folders
