"""XNLI (Conneau et al. 2018): XNLI-1.0's dev and test and XNLI-MT-1.0's training sets as released, or XTREME's."""
from pathlib import Path

from data import Example, Layout
from minxlt.errors import DataError
from minxlt.tasks.readers import check_label, each_tsv, read_lines, unique_ids
from minxlt.tasks.xtreme import XtremePairs

XNLI_LABELS = ("entailment", "neutral", "contradiction")

XNLI_LANGS = ["en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur"]


def read_xnli(path, lang):
    """XNLI-1.0 xnli.{dev,test}.tsv: every language in one file, parallel by pairID; unread columns may be empty."""
    lines = read_lines(path)
    columns = lines[0][1].split("\t") if lines else []
    needed = {"language", "gold_label", "sentence1", "sentence2", "pairID"}
    if not needed <= set(columns):
        raise DataError(path, 1, f"header lacks {', '.join(sorted(needed - set(columns)))}")
    rows = [(n, r) for n, r in each_tsv(path, columns, blank=set(columns) - needed) if r["language"] == lang]
    unique_ids(path, [(n, r["pairID"]) for n, r in rows], f"{lang} pairID")
    return [Example(id=r["pairID"], lang=lang, text=r["sentence1"], pair=r["sentence2"],
                    label=check_label(path, n, r["gold_label"], XNLI_LABELS), where=f"{path}:{n}") for n, r in rows]


def each_xnli_mt(path, lang):
    """XNLI-MT multinli.train.<lang>.tsv (premise, hypo, label), parallel by line (the id); noisy: bad rows skipped."""
    for n, r in each_tsv(path, ("premise", "hypo", "label"), noisy=lang != "en"):
        label = "contradiction" if r["label"] == "contradictory" else r["label"]  # the files say "contradictory"
        yield Example(id=str(n), lang=lang, text=r["premise"], pair=r["hypo"],
                      label=check_label(path, n, label, XNLI_LABELS), where=f"{path}:{n}")


class Xnli(Layout):
    """<data>/XNLI-1.0/xnli.{dev,test}.tsv, XNLI-MT-1.0/multinli/multinli.train.<lang>.tsv; train-en.tsv: XTREME's."""
    langs, labels, pattern = XNLI_LANGS, list(XNLI_LABELS), "XNLI-MT-1.0/multinli/multinli.train.<lang>.tsv"
    listing = "XNLI-MT-1.0/multinli/multinli.train.{lang}.tsv"

    @classmethod
    def for_folder(cls, directory):
        return XtremeXnli if directory and (Path(directory) / "train-en.tsv").is_file() else cls

    def read(self, lang, split):
        return list(self.stream(lang)) if split == "train" else read_xnli(self.split_file(lang, split), lang)

    def stream(self, lang):
        return each_xnli_mt(self.train_files(lang)[0], lang)

    def train_files(self, lang):
        return [self.directory / "XNLI-MT-1.0" / "multinli" / f"multinli.train.{lang}.tsv"]

    def split_file(self, lang, split):
        return self.train_files(lang)[0] if split == "train" else self.directory / "XNLI-1.0" / f"xnli.{split}.tsv"

    def each_round_trip(self, path, lang):
        """X-Mixup's round trips of XNLI-MT's English through `lang`: line i (the id) renders English line i."""
        for n, r in each_tsv(path, ("premise", "hypo", "label"), header=False, noisy=True, optional=1):
            if n > 1:
                yield Example(id=str(n), lang=lang, text=r["premise"], pair=r["hypo"], where=f"{path}:{n}")


class XtremeXnli(XtremePairs, Xnli):
    """XNLI in XTREME's layout."""
