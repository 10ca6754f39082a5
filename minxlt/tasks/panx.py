"""PAN-X (WikiANN) as XTREME writes it: named entities; FILTER's translations of its training set."""

from minxlt.tasks.filter_tags import FilterTranslations
from minxlt.tasks.readers import read_tagged_words
from minxlt.tasks.task import Layout
from minxlt.tasks.xmixup_tags import XmixupTranslations

PANX_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")

PANX_LANGS = ("en af ar bg bn de el es et eu fa fi fr he hi hu id it ja jv ka kk ko ml mr ms my nl pt ru sw ta te th tl tr ur vi "
              "yo zh").split()

def read_panx(path, lang, labels):
    """PAN-X (WikiANN) as XTREME writes it, {train,dev,test}-<lang>.tsv: a token and its BIO tag per
    line (test files: the token alone), a blank line after each sentence; the id is the sentence's number."""
    return read_tagged_words(path, lang, labels, bio=True)

class Panx(XmixupTranslations, FilterTranslations, Layout):
    """PAN-X (WikiANN) as XTREME writes it: <data>/{train,dev,test}-<lang>.tsv. The target
    languages' own training files are not translations, and zero-shot transfer does not train on
    them. XTREME has no translations of PAN-X; FILTER's, where the folder has them, are a target's
    training examples, untagged (FilterTranslations), or X-Mixup's, with their soft labels, where a
    run names them (--soft-labels, XmixupTranslations)."""
    langs, labels, level, pattern = PANX_LANGS, list(PANX_LABELS), "word", "{train,dev,test}-<lang>.tsv"
    parallel = False

    def found(self):
        return self.files_like("test-{lang}.tsv")

    def read(self, lang, split):
        if split == "train" and lang != self.source:
            return self.read_translations(lang)
        return read_panx(self.directory / f"{split}-{lang}.tsv", lang, self.labels)
