"""xSID (van der Goot et al. 2021): intents and BIO slots; English `valid` split to train on."""
import zlib
from dataclasses import replace

from data import Example, Layout
from minxlt.errors import DataError
from minxlt.tasks.readers import check_label, conll_sentences, conlleval_tags, unique_ids, warn_of_span_starts

# xSID 0.7's 16 intents and 35 slot types (the SNIPS and Facebook task-oriented parsing sets it joins).
XSID_INTENTS = ("AddToPlaylist", "BookRestaurant", "PlayMusic", "RateBook", "SearchCreativeWork",
                "SearchScreeningEvent", "alarm/cancel_alarm", "alarm/modify_alarm", "alarm/set_alarm",
                "alarm/show_alarms", "alarm/snooze_alarm", "alarm/time_left_on_alarm", "reminder/cancel_reminder",
                "reminder/set_reminder", "reminder/show_reminders", "weather/find")

XSID_SLOT_TYPES = ("album", "artist", "best_rating", "condition_description", "condition_temperature", "cuisine",
                   "datetime", "entity_name", "facility", "genre", "location", "movie_name", "movie_type", "music_item",
                   "object_location_type", "object_name", "object_part_of_series_type", "object_select", "object_type",
                   "party_size_description", "party_size_number", "playlist", "rating_unit", "rating_value",
                   "recurring_datetime", "reference", "reference-part", "reminder/todo", "restaurant_name",
                   "restaurant_type", "served_dish", "service", "sort", "track", "weather/attribute")

XSID_SLOTS = ("O",) + tuple(f"{prefix}-{kind}" for kind in XSID_SLOT_TYPES for prefix in "BI")

XSID_LANGS = ["en", "ar", "da", "de", "id", "it", "ja", "kk", "lt", "nl", "sr", "tr", "zh"]


def read_xsid(path, lang, intents=None, slots=None):
    """xSID CoNLL: '# id', '# text', '# text-en', '# intent' lines, then index, word, intent, BIO slot rows."""
    examples, starts = [], []
    for start, meta, rows in conll_sentences(path, 4):
        if "intent" not in meta:
            raise DataError(path, start, "sentence without a '# intent' line")
        if intents is not None:
            check_label(path, start, meta["intent"], intents)
        for number, cells in rows:
            if not cells[3].startswith(("B-", "I-")) and cells[3] != "O":
                raise DataError(path, number, f"slot label {cells[3]!r} is not O, B-... or I-...")
            if slots is not None:
                check_label(path, number, cells[3], slots)
        words, tags = [c[1] for _, c in rows], conlleval_tags([(n, c[3]) for n, c in rows], starts)
        examples.append(Example(id=meta.get("id", str(len(examples) + 1)), lang=lang,
                                text=meta.get("text", " ".join(words)), label=meta["intent"], words=words, tags=tags,
                                source_text=meta.get("text-en"), where=f"{path}:{start}"))
    warn_of_span_starts(path, starts)
    return examples


def match_source_text(sources, targets, path):
    """The targets, each with its English sentence's id: its own '# id' where that sentence is its '# text-en' (first
    use only), else the first untaken English sentence of that text (Lithuanian's ids are shuffled, one repeated)."""
    by_id = {e.id: e for e in sources}
    by_text = {}
    for e in sources:
        by_text.setdefault(e.text, []).append(e.id)
    taken, own = set(), []
    for t in targets:
        own.append(t.id in by_id and by_id[t.id].text == t.source_text and t.id not in taken)
        taken.update([t.id] if own[-1] else [])
    out = []
    for t, keeps in zip(targets, own):
        if not keeps:
            free = [i for i in by_text.get(t.source_text, []) if i not in taken]
            if not free:
                raise DataError(path, int(t.where.rpartition(":")[2]) if t.where else 0,
                                f"sentence '# id = {t.id}': its '# text-en' {t.source_text!r} is no English sentence "
                                "left unpaired")
            taken.add(free[0])
            t = replace(t, id=free[0])
        out.append(t)
    return out


def xsid_split(id):
    """xSID has no English training file: its `valid` sentences are split by id, 80% to train, 20% to select."""
    return "dev" if zlib.crc32(id.encode()) % 5 == 0 else "train"


class Xsid(Layout):
    """<data>/<lang>.{valid,test}.conll: train and dev from `valid` (`xsid_split`), test from `test`."""
    langs, labels, level, intents, pattern = (XSID_LANGS, list(XSID_SLOTS), "word", list(XSID_INTENTS),
                                              "<lang>.{valid,test}.conll")
    listing = "{lang}.valid.conll"

    def found(self):  # a language's valid and test files both
        return {lang for lang in super().found() if (self.directory / f"{lang}.test.conll").exists()}

    def file(self, lang, name):
        def read():
            path = self.directory / f"{lang}.{name}.conll"
            examples = read_xsid(path, lang, self.intents, self.labels)
            examples = examples if lang == "en" else match_source_text(self.file("en", name), examples, path)
            unique_ids(path, [(int(e.where.rpartition(":")[2]), e.id) for e in examples], "sentence id")
            return examples
        return self.once((lang, name), read)

    def split_file(self, lang, split):
        return self.directory / f"{lang}.{'test' if split == 'test' else 'valid'}.conll"

    def read(self, lang, split):
        examples = self.file(lang, "test" if split == "test" else "valid")
        return examples if split == "test" else [e for e in examples if xsid_split(e.id) == split]
