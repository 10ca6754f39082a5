"""What MTOP, MultiATIS++ and MTOD share: intents and BIO slots as the data folder holds them (label_sets), and
XeroAlign's machine translations of the English training utterances (read_machine_translations)."""
import os
import sys

from data import Example, Layout
from minxlt.errors import DataError
from minxlt.tasks.readers import read_lines


class DialogueLayout(Layout):
    """A joint task; a target trains on XeroAlign's <lang>/train.tsv where there, else the release's own."""
    level = "word"
    reader = None  # each task's reader of a file as the release writes it: reader(path, lang) -> [Example]
    own_translations = True  # the release's target training files translate the English one, with its ids
    translations = ("the release's translations of the English training utterances (or XeroAlign's machine "
                    "translations, <lang>/train.tsv)")

    def read(self, lang, split):
        if split == "train" and lang != self.source:
            return self.once((lang, "translations"), lambda: self.translations_of(lang))
        return self.once((lang, split), lambda: self.reader(self.split_file(lang, split), lang))

    def translations_of(self, lang):
        english, target = self.directory / self.source / "train.tsv", self.directory / lang / "train.tsv"
        if english.is_file() and target.is_file():
            return read_machine_translations(english, target, lang, self.read(self.source, "train"))
        return self.reader(self.split_file(lang, "train"), lang) if self.own_translations else []

    @property
    def labels(self):
        return self.label_sets()[0]

    @property
    def intents(self):
        return self.label_sets()[1]

    def label_sets(self):
        """(slot labels, intents) of every file of the folder, read once."""
        def collect():
            examples = [e for lang in self.languages for split in ("train", "dev", "test")
                        for e in self.read(lang, split)]
            types = {tag[2:] for e in examples for tag in e.tags or () if tag != "O"}
            intents = {e.label for e in examples} - {None}
            return ["O"] + [f"{p}-{t}" for t in sorted(types) for p in "BI"], sorted(intents)
        return self.once("labels", collect)


def bio_tag(path, line, tag):
    """A BIO tag as written (O, B-x, I-x), else refused with its file and line."""
    if tag != "O" and not (tag[:2] in ("B-", "I-") and tag[2:].strip()):
        raise DataError(path, line, f"slot tag {tag!r} is not O, B-<type> or I-<type>")
    return tag


def read_machine_translations(english_path, target_path, lang, sources):
    """XeroAlign's translations, each with the id and intent of the English example of its en/train.tsv line."""
    english, target = read_lines(english_path), read_lines(target_path)
    if len(english) != len(target):
        raise DataError(target_path, 0, f"{len(target)} lines against {len(english)} in {english_path}: "
                                        "not line-aligned")
    normal = lambda text: " ".join(text.lower().split())
    by_text, used = {}, set()
    for e in sources:  # an English line is the utterance, or its words joined by spaces (MTOD's)
        for key in {normal(e.text), normal(" ".join(e.words or ()))}:
            by_text.setdefault(key, []).append(e)
    out, unmatched, blank = [], 0, 0
    for (number, text), (_, source_text) in zip(target, english):
        source = next((e for e in by_text.get(normal(source_text), ()) if e.id not in used), None)
        if not text.strip():
            blank += 1
        elif source is None:
            unmatched += 1
        else:
            used.add(source.id)
            out.append(Example(id=source.id, lang=lang, text=text.strip(), label=source.label, words=text.split(),
                               source_text=source_text.strip(), where=f"{target_path}:{number}"))
    if unmatched > len(target) / 2:
        raise DataError(english_path, 0, f"{unmatched} of its {len(target)} lines are no English training utterance "
                                         "of this folder: check that the translations are of this release's training "
                                         "file")
    if (unmatched or blank) and os.environ.get("RANK", "0") == "0":
        print(f"warning: {target_path}: left out {blank} blank translations and {unmatched} whose English line is no "
              f"training utterance, of {len(target)}", file=sys.stderr)
    return out
