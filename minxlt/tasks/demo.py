"""The bundled corpus (`--task demo`): requests to a voice assistant in seven languages, with intents
and BIO slots, from parallel templates written for this project (demo_corpus.json, docs/data.md)."""
import itertools
import json
import math
import random
import re
from pathlib import Path

from data import Example, Layout

# parallel templates and slot values; [brackets] mark a value's words in the slot (French "au [musée]")
CORPUS = json.loads((Path(__file__).parent / "demo_corpus.json").read_text(encoding="utf-8"))
LANGS, SLOTS, TEMPLATES = CORPUS["langs"], CORPUS["slots"], CORPUS["templates"]
TEMPLATE_SPLITS = {"train": range(0, 7), "dev": range(7, 8), "test": range(8, 10)}  # each intent's templates
EXAMPLES_PER_TEMPLATE = {"train": 6, "dev": 8, "test": 8}
INTENTS = list(TEMPLATES)
SLOT_TYPES = dict.fromkeys(slot["label"] for slot in SLOTS.values())
SLOT_LABELS = ["O"] + [f"{p}-{label}" for label in SLOT_TYPES for p in ("B", "I")]


def build(split, round_trip=False):
    """{lang: [Example]} of a split, ids shared across languages (`round_trip`: {"en": the round trips}): each
    template filled with slot values, a value's words (or those in [brackets]) tagged B-/I-<slot>, the rest O."""
    langs = ["en"] if round_trip else LANGS
    out = {lang: [] for lang in langs}
    for intent, k in itertools.product(INTENTS, TEMPLATE_SPLITS[split]):
        template = {"en": TEMPLATES[intent][k]["round_trip"]} if round_trip else TEMPLATES[intent][k]
        slots = re.findall(r"\{(\w+)\}", TEMPLATES[intent][k]["en"])
        rng, seen = random.Random(f"{intent}/{k}"), set()
        combinations = math.prod(len(SLOTS[s]["en"]) for s in slots)
        while len(seen) < min(EXAMPLES_PER_TEMPLATE[split], combinations):
            values = {s: rng.randrange(len(SLOTS[s]["en"])) for s in slots}
            key = tuple(sorted(values.items()))
            if key in seen:
                continue
            seen.add(key)
            for lang in langs:
                words, tags = [], []
                for token in template[lang].split():
                    slot = re.fullmatch(r"\{(\w+)\}", token)
                    if not slot:
                        words.append(token)
                        tags.append("O")
                        continue
                    label, value = SLOTS[slot.group(1)]["label"], SLOTS[slot.group(1)][lang][values[slot.group(1)]]
                    inside, first = "[" not in value, True  # without brackets, every word is in the slot
                    for word in value.split():
                        inside = inside or word.startswith("[")
                        words.append(word.strip("[]"))
                        tags.append(("B-" if first else "I-") + label if inside else "O")
                        first = first and not inside
                        inside = inside and not word.endswith("]")
                # Chinese without spaces; elsewhere no space before . , ? ! : or after ¿ ¡
                text = "".join(words) if lang == "zh" else re.sub(
                    r"([¿¡]) ", r"\1", re.sub(r" ([.,?!:])", r"\1", " ".join(words)))
                out[lang].append(Example(id=f"{intent}.{k}.{len(seen)}", lang=lang, text=text, label=intent,
                                         words=words, tags=tags))
    return out


class Demo(Layout):
    """The bundled corpus's intents (py); no files."""
    langs, labels, needs_data, pattern = LANGS, INTENTS, False, "the bundled corpus"

    def read(self, lang, split):
        if split not in self.parsed:
            self.parsed[split] = build(split)
        return self.parsed[split][lang]

    def round_trip(self):
        return {e.id: e for e in build("train", round_trip=True)["en"]} if self.source == "en" else {}


class DemoSlots(Demo):
    """The bundled corpus's BIO slots."""
    labels, level = SLOT_LABELS, "word"
