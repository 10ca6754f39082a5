"""PAN-X (WikiANN) as XTREME writes it: named entities; FILTER's translations of its training set."""
from data import Layout
from minxlt.tasks.filter_tags import FilterTranslations
from minxlt.tasks.readers import read_tagged_words
from minxlt.tasks.xmixup_tags import XmixupTranslations

PANX_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")

PANX_LANGS = ("en af ar bg bn de el es et eu fa fi fr he hi hu id it ja jv ka kk ko ml mr ms my nl pt ru sw ta te th "
              "tl tr ur vi yo zh").split()


class Panx(XmixupTranslations, FilterTranslations, Layout):
    """<data>/{train,dev,test}-<lang>.tsv; a target trains on FILTER's or X-Mixup's translations, not its own files."""
    langs, labels, level, pattern = PANX_LANGS, list(PANX_LABELS), "word", "{train,dev,test}-<lang>.tsv"
    listing, parallel = "test-{lang}.tsv", False

    def read(self, lang, split):
        if split == "train" and lang != self.source:
            return self.read_translations(lang)
        return read_tagged_words(self.directory / f"{split}-{lang}.tsv", lang, self.labels, bio=True)  # BIO tags
