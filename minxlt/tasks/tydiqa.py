"""TyDiQA-GoldP (Clark et al. 2020) as XTREME writes it."""
import zlib
from dataclasses import replace

from minxlt.tasks.readers import read_squad, squad_round_trips
from minxlt.tasks.task import Layout

TYDIQA_LANGS = ["en", "ar", "bn", "fi", "id", "ko", "ru", "sw", "te"]

def tydiqa_split(question, context):
    """TyDiQA-GoldP has no English dev set beside its test (XTREME tests on the released dev
    files): its English training questions are split by a hash of the question and its context,
    90% to train on and 10% to select. Not by id: XTREME's utils_preprocess.py keeps only the last
    part of each training question's id (english-5967113449718591924-1 becomes 1), so on its files
    almost every id is 0 or 1."""
    return "dev" if zlib.crc32(f"{question}\n{context}".encode()) % 10 == 0 else "train"

def numbered_questions(examples):
    """The English training questions of TyDiQA-GoldP, the one training file read with repeated
    ids (see tydiqa_split), since XTREME writes it so: where ids repeat, each is prefixed with
    the question's place in the file, so that the dev questions drawn from it are predicted and
    scored by unique ids. Translations pair with them by id only where the ids were unique."""
    ids = [e.id for e in examples]
    return examples if len(set(ids)) == len(ids) else [replace(e, id=f"{n}-{e.id}") for n, e in enumerate(examples)]

class Tydiqa(Layout):
    """TyDiQA-GoldP as XTREME writes it: English trains from tydiqa-goldp-v1.1-train/
    tydiqa.goldp.en.train.json (split by `tydiqa_split`), each language tests on
    tydiqa-goldp-v1.1-dev/tydiqa.goldp.<lang>.dev.json (answers blanked). The other languages'
    training files are not translations and are not used; XTREME's translations of the English
    training set are, where they are in translate-train/tydiqa.translate.train.en-<lang>.json."""
    langs, labels, level, pattern = TYDIQA_LANGS, ["start", "end"], "span", "tydiqa-goldp-v1.1-dev/tydiqa.goldp.<lang>.dev.json"
    parallel, translations = False, "translate-train/tydiqa.translate.train.en-<lang>.json"

    def found(self):
        return self.files_like("tydiqa-goldp-v1.1-dev/tydiqa.goldp.{lang}.dev.json")

    def split_file(self, lang, split):
        if split == "test":
            return self.directory / "tydiqa-goldp-v1.1-dev" / f"tydiqa.goldp.{lang}.dev.json"
        if lang != self.source:
            return self.directory / "translate-train" / f"tydiqa.translate.train.en-{lang}.json"
        return self.directory / "tydiqa-goldp-v1.1-train" / f"tydiqa.goldp.{lang}.train.json"

    def read(self, lang, split):
        if split == "test":
            return read_squad(self.directory / "tydiqa-goldp-v1.1-dev" / f"tydiqa.goldp.{lang}.dev.json", lang, blank=True)
        if lang != self.source:
            path = self.directory / "translate-train" / f"tydiqa.translate.train.en-{lang}.json"
            return read_squad(path, lang, noisy=True) if split == "train" and path.is_file() else []
        path = self.directory / "tydiqa-goldp-v1.1-train" / f"tydiqa.goldp.{lang}.train.json"
        questions = self.once("train", lambda: numbered_questions(read_squad(path, lang, unique=False)))
        return [e for e in questions if tydiqa_split(e.text, e.pair) == split]

    def each_round_trip(self, path, lang):
        """X-Mixup's round trips of the English training questions through `lang` (--round-trip:
        translate-train-en/tydiqa.translate.train.en-{lang}-en.json, as its README lays them out),
        paired by id as translate-train's files are (not where numbered_questions renamed the English ones)."""
        return squad_round_trips(path, lang)
