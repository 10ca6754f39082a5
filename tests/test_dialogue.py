"""MTOP, MultiATIS++, MTOD and MARC read from small folders shaped as their releases write them
(MTOP's eight columns with character spans and a token JSON; MultiATIS++'s header and space-
separated tags, as LDC2021T04 and XeroAlign's authors' copy lay them out; MTOD's CoNLL files with
their # comments and NoLabel; MARC's JSON lines per language and split), XeroAlign's machine
translations paired with English, bad lines refused with their file and line, the slot tags'
spans as seqeval reads them, and a few steps of a run of each task to its test table."""
import json

import pytest

import levels
from minxlt import tasks
from minxlt.errors import DataError, InputError


def mtop_row(id, intent, utterance, slots, locale="en_XX", domain="alarm"):
    """A row as MTOP's release writes it: slots are start:end:SL:TYPE over the utterance's
    characters, and the tokens column is JSON with each token's start and length."""
    tokens, spans, at = [], [], 0
    for token in utterance.split():
        at = utterance.index(token, at)
        tokens.append(token)
        spans.append({"start": at, "length": len(token)})
        at += len(token)
    slot_string = ",".join(f"{a}:{b}:SL:{kind}" for a, b, kind in slots)
    decoupled = f"[IN:{intent} {utterance} ]"
    return "\t".join([id, f"IN:{intent}", slot_string, utterance, domain, locale, decoupled,
                      json.dumps({"tokens": tokens, "tokenSpans": spans})])


MTOP_EN = [("101", "CREATE_ALARM", "set an alarm for 7 am", [(13, 21, "DATE_TIME")]),
           ("102", "GET_WEATHER", "is it hot", []),
           # compositional: CONTACT lies in TODO, which is listed first and takes its tokens
           ("103", "CREATE_REMINDER", "remind me to call mom at 5", [(7, 9, "PERSON_REMINDED"), (13, 21, "TODO"), (18, 21, "CONTACT"),
                                                                       (22, 26, "DATE_TIME")]),
           # a slot that ends inside a token leaves that token O
           ("104", "CREATE_ALARM", "wake me at 6am tomorrow", [(8, 12, "DATE_TIME")])]
MTOP_DE = [("101", "CREATE_ALARM", "stelle einen Wecker für 7 Uhr", [(20, 29, "DATE_TIME")]),
           ("103", "CREATE_REMINDER", "erinnere mich", [(9, 13, "PERSON_REMINDED")])]


def write_mtop(folder):
    for lang, rows, locale in (("en", MTOP_EN, "en_XX"), ("de", MTOP_DE, "de_DE")):
        for split in ("train", "eval", "test"):
            path = folder / lang / f"{split}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(mtop_row(*row, locale=locale) + "\n" for row in rows), encoding="utf-8")
    return folder


def test_mtop_spans_become_bio_tags_as_xeroalign_reads_them(tmp_path):
    task = tasks.load_task("mtop", write_mtop(tmp_path))
    assert (task.source, task.targets, task.parallel) == ("en", ["de"], True)
    en = {e.id: e for e in task.train["en"]}
    assert (en["101"].label, en["101"].tags) == ("CREATE_ALARM", ["O", "O", "O", "B-DATE_TIME", "I-DATE_TIME", "I-DATE_TIME"])
    assert en["102"].tags == ["O"] * 3
    assert en["103"].words == ["remind", "me", "to", "call", "mom", "at", "5"]
    assert en["103"].tags == ["O", "B-PERSON_REMINDED", "O", "B-TODO", "I-TODO", "B-DATE_TIME", "I-DATE_TIME"]
    assert en["104"].tags == ["O", "O", "B-DATE_TIME", "O", "O"]  # "6am" ends after the slot's character 12
    assert [e.id for e in task.train["de"]] == ["101", "103"]  # translations keep their English utterance's id
    assert task.train["de"][0].tags == ["O", "O", "O", "B-DATE_TIME", "I-DATE_TIME", "I-DATE_TIME"]
    assert task.intents == ["CREATE_ALARM", "CREATE_REMINDER", "GET_WEATHER"]
    assert task.labels == ["O"] + [f"{p}-{t}" for t in ("DATE_TIME", "PERSON_REMINDED", "TODO") for p in "BI"]
    assert levels.LEVELS[task.level].metric(task) == "exact_match"


def test_slot_spans_agree_with_seqeval():
    """The tags' spans, as levels.entities and seqeval read them, are the slots' tokens."""
    seqeval = pytest.importorskip("seqeval.metrics.sequence_labeling", reason="seqeval reads the spans (requirements-test.txt)")
    for id, intent, utterance, slots in MTOP_EN:
        line = mtop_row(id, intent, utterance, slots).split("\t")
        tokens, spans = tasks.mtop.token_spans("x", 1, line[7])
        tags = tasks.mtop_tags("x", 1, tokens, spans, line[2], len(utterance))
        ours = {(kind, a, b - 1) for kind, a, b in levels.entities(tags)}
        assert ours == set(seqeval.get_entities(tags))
    assert levels.entities(["O", "B-TODO", "I-TODO", "O", "B-DATE_TIME"]) == {("TODO", 1, 3), ("DATE_TIME", 4, 5)}


@pytest.mark.parametrize("row, message", [
    ("\t".join(mtop_row("1", "GET_WEATHER", "is it hot", []).split("\t")[1:]), "7 columns, expected 8"),  # the first revision: no id
    (mtop_row("1", "GET_WEATHER", "is it hot", []).replace("\t\t", "\t0:2:DATE\t", 1), "slot '0:2:DATE' is not start:end:SL:TYPE"),
    (mtop_row("1", "GET_WEATHER", "is it hot", [(0, 40, "DATE_TIME")]), "not a span of the 9-character utterance"),
    (mtop_row("1", "GET_WEATHER", "is it hot", []).replace("tokenSpans", "spans"), "not JSON of tokens and tokenSpans"),
    (mtop_row("1", "GET_WEATHER", "is it hot", []).replace("IN:GET", "GET"), "does not start with IN:"),
])
def test_bad_mtop_rows_are_refused_with_file_and_line(tmp_path, row, message):
    path = tmp_path / "train.txt"
    path.write_text(mtop_row("0", "GET_WEATHER", "is it cold", []) + "\n" + row + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"train.txt:2: .*{message}"):
        tasks.read_mtop(path, "en")


ATIS_EN = [("1", "show flights to boston", "O O O B-toloc.city_name", "atis_flight"),
           ("2", "cheapest fare to san jose", "B-cost_relative O O B-toloc.city_name I-toloc.city_name", "atis_airfare#atis_flight")]
ATIS_ES = [("1", "muestra vuelos a Washington D.\u00a0C.", "O O O B-toloc.city_name B-toloc.state_code", "atis_flight"),
           ("2", "tarifa más barata a San José", "O B-cost_relative I-cost_relative O B-toloc.city_name I-toloc.city_name",
            "atis_airfare#atis_flight")]


def write_multiatis(folder, released=True):
    """LDC2021T04's {split}_<LANG>.tsv, or the authors' copy's <lang>/{split}.txt; a header, then rows."""
    for lang, rows in (("en", ATIS_EN), ("es", ATIS_ES)):
        for split in ("train", "dev", "test"):
            path = folder / (f"{split}_{lang.upper()}.tsv" if released else f"{lang}/{split}.txt")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("id\tutterance\tslot_labels\tintent\n" + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    return folder


@pytest.mark.parametrize("released", [True, False])
def test_multiatis_as_released_and_as_xeroalign_s_authors_copy_it(tmp_path, released):
    task = tasks.load_task("multiatis", write_multiatis(tmp_path, released))
    es = task.train["es"]
    assert [e.id for e in es] == ["1", "2"] and es[0].words[-1] == "D.\u00a0C."  # a no-break space is inside a word
    assert es[0].tags[-2:] == ["B-toloc.city_name", "B-toloc.state_code"] and es[1].label == "atis_airfare#atis_flight"
    assert task.intents == ["atis_airfare#atis_flight", "atis_flight"] and task.test["es"][1].text == "tarifa más barata a San José"


def test_multiatis_two_spaces_are_read_as_xeroalign_s_preprocess_reads_them(tmp_path):
    """preprocess.py:148-160: words and tags split at each space, as many of each, and an empty
    word gets no token, so it and its tag are left out."""
    write_multiatis(tmp_path)
    path = tmp_path / "test_ES.tsv"
    path.write_text("id\tutterance\tslot_labels\tintent\n1\tvuelos a  Boston\tO O O B-toloc.city_name\tatis_flight\n"
                    "2\tvuelos  a Boston\tO O O B-toloc.city_name\tatis_flight\n", encoding="utf-8")
    test = tasks.load_task("multiatis", tmp_path).test["es"]
    assert [(e.words, e.tags) for e in test] == [(["vuelos", "a", "Boston"], ["O", "O", "B-toloc.city_name"]),
                                                 (["vuelos", "a", "Boston"], ["O", "O", "B-toloc.city_name"])]


def test_multiatis_bad_rows_are_refused(tmp_path):
    write_multiatis(tmp_path)
    path = tmp_path / "test_ES.tsv"
    path.write_text(path.read_text(encoding="utf-8").replace("O O O B-toloc.city_name", "O O O  B-toloc.city_name"), encoding="utf-8")
    with pytest.raises(DataError, match=r"test_ES.tsv:2: 5 words and 6 slot tags"):
        tasks.load_task("multiatis", tmp_path)
    path.write_text("id\tutterance\tslot_labels\tintent\n1\ta b\tO\tatis_flight\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test_ES.tsv:2: 2 words and 1 slot tags"):
        tasks.load_task("multiatis", tmp_path)
    path.write_text("id\tutterance\tslot_labels\tintent\n1\ta b  c\tO  O O\tatis_flight\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test_ES.tsv:2: slot tag '' is not O"):  # a word without its tag
        tasks.load_task("multiatis", tmp_path)
    path.write_text("id\tutterance\tslot_labels\tintent\n1\ta\tX-city\tatis_flight\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test_ES.tsv:2: slot tag 'X-city' is not O, B-<type> or I-<type>"):
        tasks.load_task("multiatis", tmp_path)


MTOD_EN = [("tell me the weather for half moon bay", "weather/find", "31:44:location",
            [("tell", "NoLabel"), ("me", "NoLabel"), ("the", "NoLabel"), ("weather", "B-weather/noun"), ("for", "NoLabel"),
             ("half", "B-location"), ("moon", "I-location"), ("bay", "I-location")]),
           ("Alarms now, if you please", "alarm/show_alarms", "", [("alarms", "NoLabel"), ("now", "NoLabel"), (",", "NoLabel"),
                                                                    ("if", "NoLabel"), ("you", "NoLabel"), ("please", "NoLabel")]),
           ("set an alarm for 7:00 am", "alarm/set_alarm", "17:24:datetime",
            [("set", "NoLabel"), ("an", "NoLabel"), ("alarm", "NoLabel"), ("for", "NoLabel"), ("7:00", "B-datetime"),
             ("am", "I-datetime")])]
MTOD_TH = [("ตั้งนาฬิกาปลุกสำหรับ 8 นาที", "alarm/set_alarm", "21:29:datetime",
            [("ตั้ง", "NoLabel"), ("นาฬิกา", "NoLabel"), ("ปลุก", "NoLabel"), ("สําหรับ", "B-datetime"), ("8", "I-datetime"),
             ("นาที", "I-datetime")])]


def write_mtod(folder, translations=True):
    """The release's <lang>/{train,eval,test}-<locale>.conllu; with `translations`, XeroAlign's
    en/train.tsv (the English words, lower-cased) and th/train.tsv, line by line."""
    for lang, locale, sentences in (("en", "en", MTOD_EN), ("th", "th_TH", MTOD_TH)):
        blocks = [f"# text: {text}\n# intent: {intent}\n# slots: {slots}\n"
                  + "".join(f"{i}\t{word}\t{intent}\t{tag}\n" for i, (word, tag) in enumerate(rows, start=1))
                  for text, intent, slots, rows in sentences]
        for split in ("train", "eval", "test"):
            (folder / lang).mkdir(parents=True, exist_ok=True)
            (folder / lang / f"{split}-{locale}.conllu").write_text("\n".join(blocks) + "\n", encoding="utf-8")
    if translations:
        (folder / "en" / "train.tsv").write_text("".join(" ".join(w for w, _ in rows).lower() + " \n" for *_, rows in MTOD_EN),
                                                 encoding="utf-8")
        (folder / "th" / "train.tsv").write_text("บอกสภาพอากาศ\n\nตั้งนาฬิกาปลุก 7 โมง\n", encoding="utf-8")
    return folder


def test_mtod_as_released_with_xeroalign_s_translations(tmp_path, capsys):
    task = tasks.load_task("mtod", write_mtod(tmp_path))
    assert (task.targets, task.parallel) == (["th"], False)
    en = task.train["en"]
    assert [e.id for e in en] == ["1", "2", "3"] and en[2].text == "set an alarm for 7:00 am"  # a colon in the text
    assert en[0].tags == ["O", "O", "O", "B-weather/noun", "O", "B-location", "I-location", "I-location"]
    th = task.train["th"]  # the authors' translations, paired with English by the English line; the blank one left out
    assert [(e.id, e.label, e.tags, e.source_text) for e in th] == [("1", "weather/find", None, "tell me the weather for half moon bay"),
                                                                   ("3", "alarm/set_alarm", None, "set an alarm for 7:00 am")]
    assert "left out 1 blank translations" in capsys.readouterr().err
    assert task.test["th"][0].tags == ["O", "O", "O", "B-datetime", "I-datetime", "I-datetime"]
    assert "weather/find" in task.intents and "B-weather/noun" in task.labels


def test_mtod_without_translations_trains_on_english_alone(tmp_path):
    task = tasks.load_task("mtod", write_mtod(tmp_path, translations=False))
    assert task.train["th"] == []  # Thai's training sentences are no translations of English ones
    (tmp_path / "en" / "test-en.conllu").write_text("# text: hi\n# intent: x\n# slots: \n1\thi\tx\tB-\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test-en.conllu:4: slot tag 'B-' is not O"):
        tasks.load_task("mtod", tmp_path)


def marc_line(id, stars, body, lang="en"):
    """A review as the release writes it: stars a string ("stars": "5"; the Hugging Face loader casts it to int)."""
    return json.dumps({"review_id": f"{lang}_{id:07d}", "product_id": f"product_{lang}_{id}", "reviewer_id": f"reviewer_{lang}_{id}",
                       "stars": str(stars), "review_body": body, "review_title": "Title", "language": lang,
                       "product_category": "home"}, ensure_ascii=False)


def write_marc(folder):
    """json/{split}/dataset_<lang>_<split>.json, a JSON object a line."""
    reviews = {"en": ["works great", "broke after a day", "it is fine", "love it", "awful"],
               "de": ["sehr gut", "kaputt", "geht so", "toll", "schlecht"]}
    for split in ("train", "dev", "test"):
        (folder / split).mkdir(parents=True, exist_ok=True)
        for lang, bodies in reviews.items():
            stars = [5, 1, 3, 4, 2]
            lines = [marc_line(i + (0 if split == "train" else 100), s, b, lang) for i, (s, b) in enumerate(zip(stars, bodies))]
            (folder / split / f"dataset_{lang}_{split}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_marc_as_released(tmp_path, capsys):
    task = tasks.load_task("marc", write_marc(tmp_path))
    assert (task.labels, task.targets, task.parallel) == (["negative", "positive"], ["de"], False)
    assert [(e.id, e.text, e.label) for e in task.train["en"]] == [("en_0000000", "works great", "positive"),
                                                                   ("en_0000001", "broke after a day", "negative"),
                                                                   ("en_0000003", "love it", "positive"), ("en_0000004", "awful", "negative")]
    assert len(task.train["de"]) == 4 and "pair" not in capsys.readouterr().err  # other reviews, not translations: not paired
    stars = tasks.load_task("marc-stars", tmp_path)
    assert [e.label for e in stars.test["de"]] == ["5", "1", "3", "4", "2"]
    path = tmp_path / "test" / "dataset_de_test.json"
    path.write_text(marc_line(8, 5, "gut", "de").replace('"5"', "5") + "\n", encoding="utf-8")  # as the hub gives it
    assert [e.label for e in tasks.load_task("marc-stars", tmp_path).test["de"]] == ["5"]
    for bad, message in ((marc_line(9, 5, "gut", "fr"), "in language 'fr', in the file of 'de'"),
                         (marc_line(9, 6, "gut", "de"), "stars '6'"),
                         (marc_line(9, 5, "gut", "de").replace('"5"', '"5.0"'), "stars '5.0'"),
                         (marc_line(9, 5, " ", "de"), "empty review_body"), ("{not json", "not a JSON object")):
        path.write_text(marc_line(8, 5, "gut", "de") + "\n" + bad + "\n", encoding="utf-8")
        with pytest.raises(DataError, match=rf"dataset_de_test.json:2: .*{message}"):
            tasks.load_task("marc", tmp_path)


@pytest.mark.parametrize("task, method", [("mtop", "xeroalign"), ("multiatis", "zero-shot"), ("mtod", "xeroalign"), ("marc", "zero-shot")])
def test_a_few_steps_of_each_task_reach_its_test_table(tmp_path, tiny_model_dir, task, method):
    import train
    folder = {"mtop": write_mtop, "multiatis": write_multiatis, "mtod": write_mtod, "marc": write_marc}[task](tmp_path / "data")
    out = tmp_path / "run"
    train.main(["--model", str(tiny_model_dir), "--task", task, "--data", str(folder), "--method", method, "--batch-size", "4",
                "--max-steps", "2", "--eval-every", "2", "--no-alignment", "--out", str(out)])
    results = json.loads((out / "results.json").read_text())
    target = [lang for lang in results if lang in ("de", "es", "th")]
    assert target and all(0 <= results[lang]["intent_accuracy" if task != "marc" else "accuracy"] <= 1 for lang in target + ["en"])
    if task != "marc":
        assert 0 <= results[target[0]]["slot_f1"] <= 1


def test_an_empty_folder_says_what_it_lacks(tmp_path):
    with pytest.raises(InputError, match="task mtop has no language"):
        tasks.load_task("mtop", tmp_path)
