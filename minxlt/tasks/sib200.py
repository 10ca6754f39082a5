"""SIB-200 (Adelani et al. 2024): topic classification of Flores-200 sentences, parallel by index_id."""
from pathlib import Path

from data import Example, Layout
from minxlt.tasks.readers import UniqueIds, check_label, each_tsv

SIB200_LABELS = ("science/technology", "travel", "politics", "sports", "health", "entertainment", "geography")

SIB200_LANGS = ["eng_Latn", "deu_Latn", "fra_Latn", "spa_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "hin_Deva",
                "swh_Latn", "tha_Thai", "tur_Latn", "urd_Arab", "vie_Latn", "ell_Grek", "bul_Cyrl", "jpn_Jpan",
                "kor_Hang", "ind_Latn", "yor_Latn", "amh_Ethi", "quy_Latn", "wol_Latn"]


def each_sib200(directory, lang, split):
    """SIB-200: <directory>/<lang>/<split>.tsv with index_id, category, text, csv-quoted; parallel by index_id."""
    path = Path(directory) / lang / f"{split}.tsv"
    unique = UniqueIds(path, "index_id")
    for n, r in each_tsv(path, ("index_id", "category", "text"), quoted=True):
        unique.check(n, r["index_id"])
        yield Example(id=r["index_id"], lang=lang, text=r["text"],
                      label=check_label(path, n, r["category"], SIB200_LABELS), where=f"{path}:{n}")


class Sib200(Layout):
    """<data>/<lang>/{train,dev,test}.tsv."""
    langs, labels, source, pattern = SIB200_LANGS, list(SIB200_LABELS), "eng_Latn", "<lang>/{train,dev,test}.tsv"

    def found(self):
        return {p.name for p in self.directory.iterdir() if (p / "test.tsv").is_file()}

    def read(self, lang, split):
        return list(each_sib200(self.directory, lang, split))

    def stream(self, lang):
        return each_sib200(self.directory, lang, "train")

    def train_files(self, lang):
        return [self.directory / lang / "train.tsv"]
