"""XNLI and PAWS-X as XTREME writes them: csv-quoted pair files, and translations of the English training set."""
import itertools
from collections import Counter

from data import Example, Layout
from minxlt.errors import DataError, warn
from minxlt.tasks.readers import check_label, each_tsv, open_text, utf8


def each_xtreme_pairs(path, lang, labels):
    """XTREME's {train,dev,test}-<lang>.tsv: text, second text, label (test: none), csv-quoted; id: the row number."""
    for i, (n, r) in enumerate(each_tsv(path, ("text", "pair", "label"), header=False, quoted=True, optional=1),
                               start=1):
        label = r.get("label")
        yield Example(id=str(i), lang=lang, text=r["text"], pair=r["pair"],
                      label=label and check_label(path, n, label, labels), where=f"{path}:{n}")


def english(text, pair):
    """The English texts of a pair, spaces evened out: what a translation is paired by."""
    return " ".join(text.split()), " ".join(pair.split())


def english_ids(examples):
    """{english(): [id]} of the source's examples, in their order."""
    ids = {}
    for e in examples:
        ids.setdefault(english(e.text, e.pair), []).append(e.id)
    return ids


def each_xtreme_translations(path, lang, labels, texts):
    """XTREME's translate-train/en-<lang>-translated.tsv (noisy), paired by English texts (`texts()`: {english():
    [id]} of the source's) or (3 columns) by row."""
    with open_text(path) as f:
        head = list(utf8(path, itertools.islice(f, 1000)))
    wide = bool(head) and Counter(line.count("\t") for line in head).most_common(1)[0][0] == 4  # most rows' columns
    columns = ("en_text", "en_pair", "text", "pair", "label") if wide else ("text", "pair", "label")
    by_text = {key: iter(ids) for key, ids in texts().items()} if wide else {}  # a repeated pair: its ids in turn
    kept, unpaired = 0, 0
    for n, r in each_tsv(path, columns, header=False, noisy=True):  # not csv-quoted: line n is row n, skipped or not
        id = next(by_text.get(english(r["en_text"], r["en_pair"]), iter(())), None) if wide else str(n)
        if id is None:
            unpaired += 1
            continue
        label = "contradiction" if r["label"] == "contradictory" else r["label"]  # as XNLI's translations say it
        kept += 1
        yield Example(id=id, lang=lang, text=r["text"], pair=r["pair"], label=check_label(path, n, label, labels),
                      where=f"{path}:{n}")
    if unpaired:
        warn(f"{path}: skipped {unpaired} rows whose English texts are not in the training file")
    if head and not kept:
        raise DataError(path, 0, "no row pairs with an example of the training file (train-en.tsv)")


class XtremePairs(Layout):
    """<data>/{train-en,dev-<lang>,test-<lang>}.tsv, translate-train/en-<lang>-translated.tsv, translate-test/."""
    pattern = "{dev,test}-<lang>.tsv"
    translations, listing = "translate-train/en-<lang>-translated.tsv", "test-{lang}.tsv"

    def read(self, lang, split):
        if split == "train" and lang != self.source:
            return list(self.stream(lang))
        path = self.split_file(lang, split)
        return self.once((lang, split), lambda: list(each_xtreme_pairs(path, lang, self.labels)))

    def stream(self, lang):
        path = self.train_files(lang)[0]
        if lang == self.source:
            return each_xtreme_pairs(path, lang, self.labels)
        texts = lambda: self.once(("train", "english texts"), lambda: english_ids(self.stream(self.source)))
        return each_xtreme_translations(path, lang, self.labels, texts) if path.is_file() else iter([])

    def train_files(self, lang):
        return [self.directory / (f"train-{lang}.tsv" if lang == self.source
                                  else f"translate-train/en-{lang}-translated.tsv")]

    def split_file(self, lang, split):
        return self.train_files(lang)[0] if split == "train" else self.directory / f"{split}-{lang}.tsv"

    def each_round_trip(self, path, lang):
        raise DataError(path, 0, "X-Mixup's round-trip translations are aligned with the released training files "
                                 "(XNLI-MT's lines, PAWS-X's ids), which XTREME's layout renumbers: use the released "
                                 "layout (download.py)")
