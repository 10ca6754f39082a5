"""TyDiQA-GoldP (Clark et al. 2020) as XTREME writes it."""
import zlib
from dataclasses import replace

from data import Layout
from minxlt.tasks.readers import read_squad

TYDIQA_LANGS = ["en", "ar", "bn", "fi", "id", "ko", "ru", "sw", "te"]


def tydiqa_split(question, context):
    """TyDiQA-GoldP's English training questions split 90/10 by a hash of question and context, not by id (XTREME's
    files cut ids to their last part: english-5967113449718591924-1 becomes 1)."""
    return "dev" if zlib.crc32(f"{question}\n{context}".encode()) % 10 == 0 else "train"


def numbered_questions(examples):
    """TyDiQA-GoldP's English training questions, ids prefixed with their place where they repeat (XTREME's)."""
    ids = [e.id for e in examples]
    return examples if len(set(ids)) == len(ids) else [replace(e, id=f"{n}-{e.id}") for n, e in enumerate(examples)]


class Tydiqa(Layout):
    """TyDiQA-GoldP as XTREME writes it: English trains and selects (`tydiqa_split`), each language tests."""
    langs, labels, level, pattern = (TYDIQA_LANGS, ["start", "end"], "span",
                                     "tydiqa-goldp-v1.1-dev/tydiqa.goldp.<lang>.dev.json")
    parallel, translations = False, "translate-train/tydiqa.translate.train.en-<lang>.json"
    listing = "tydiqa-goldp-v1.1-dev/tydiqa.goldp.{lang}.dev.json"

    def split_file(self, lang, split):
        if split == "test":
            return self.directory / "tydiqa-goldp-v1.1-dev" / f"tydiqa.goldp.{lang}.dev.json"
        if lang != self.source:
            return self.directory / "translate-train" / f"tydiqa.translate.train.en-{lang}.json"
        return self.directory / "tydiqa-goldp-v1.1-train" / f"tydiqa.goldp.{lang}.train.json"

    def read(self, lang, split):
        path = self.split_file(lang, split)  # the source's dev questions are a tenth of its training file's
        if split == "test":
            return read_squad(path, lang, blank=True)
        if lang != self.source:
            return read_squad(path, lang, noisy=True) if split == "train" and path.is_file() else []
        questions = self.once("train", lambda: numbered_questions(read_squad(path, lang, unique=False)))
        return [e for e in questions if tydiqa_split(e.text, e.pair) == split]

    def each_round_trip(self, path, lang):
        """X-Mixup's round trips of the English training questions through `lang` (--round-trip), paired by id."""
        return read_squad(path, lang, noisy=True)  # a misplaced answer's question left out, its source fed gold
