"""MLQA (Lewis et al. 2020) as XTREME writes it, trained on SQuAD v1.1."""
from minxlt.tasks.readers import read_squad
from minxlt.tasks.xquad import SquadTrained

MLQA_LANGS = ["en", "ar", "de", "es", "hi", "vi", "zh"]


class Mlqa(SquadTrained):
    """<data>/MLQA_V1/{dev,test}/{dev,test}-context-<lang>-question-<lang>.json (test answers blanked)."""
    langs, pattern, name = MLQA_LANGS, "MLQA_V1/{dev,test}/{dev,test}-context-<lang>-question-<lang>.json", "mlqa"

    def found(self):
        names = (p.name.split("-")
                 for p in (self.directory / "MLQA_V1" / "test").glob("test-context-*-question-*.json"))
        return {parts[2] for parts in names if len(parts) == 5 and parts[2] == parts[4][:-len(".json")]}

    def read(self, lang, split):
        if split == "train":
            return self.train(lang)
        path = self.directory / "MLQA_V1" / split / f"{split}-context-{lang}-question-{lang}.json"
        return read_squad(path, lang, blank=split == "test")
