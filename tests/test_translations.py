"""The authors' translation files, read as their releases and code write them: FILTER's Microsoft
Translator test and dev translations (fetched as its download_data.sh fetches them), X-Mixup's
round-trip translations of the training set (fed by scheduled sampling, through each pair's
language) and its translated dev set (what model selection pairs each dev text with); for QA, the
test sets' translations and the round trips in SQuAD JSON, paired by question id, window by window."""
import json
import zipfile

import pytest
import torch

import download
import methods
from conftest import make_method
from methods import Run, counterparts
from minxlt import tasks
from minxlt.errors import DataError, InputError
from minxlt.text.tokenizer import Tokenizer
from test_download import mirror, put, unpinned  # noqa: F401 (fixtures)

XNLI_HEADER = ("language\tgold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\t"
               "sentence2\tpromptID\tpairID\tgenre\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tsentence1_tokenized\tsentence2_tokenized\tmatch")


def xnli_row(lang, label, premise, hypothesis, pair_id):
    return f"{lang}\t{label}\t_\t_\t_\t_\t{premise}\t{hypothesis}\t1\t{pair_id}\tfiction" + f"\t{label}" * 5 + "\t_\t_\tTrue\n"


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def xnli_folder(root):
    """XNLI as download.py writes it (XNLI-1.0, XNLI-MT-1.0), English and German, plus X-Mixup's files in the layout its
    README's folder holds them: translate-train-en/multinli.train.<lang>-en.tsv, translate-dev/xnli.dev.tsv."""
    premises = ["A man sleeps.", "A dog runs in the park.", "Two women talk.", "The sun is hot today."]
    labels = ["neutral", "contradictory", "entailment", "neutral"]
    for lang, texts in (("en", premises), ("de", [f"DE {p}" for p in premises])):
        write(root / "XNLI-MT-1.0" / "multinli" / f"multinli.train.{lang}.tsv",
              "premise\thypo\tlabel\n" + "".join(f"{t}\tA thing.\t{label}\n" for t, label in zip(texts, labels)))
    for split in ("dev", "test"):
        rows = [xnli_row(lang, "neutral" if i % 2 else "entailment", f"{lang} {split} premise {i}.", f"{lang} hypothesis {i}.", i)
                for lang in ("en", "de") for i in range(3)]
        write(root / "XNLI-1.0" / f"xnli.{split}.tsv", XNLI_HEADER + "\n" + "".join(rows))
    # line i: the round trip of English line i through German (the header line stands for the header, as X-Mixup's xnli.py reads it)
    write(root / "translate-train-en" / "multinli.train.de-en.tsv",
          "premise\thypo\tlabel\n" + "".join(f"RT {p}\tA thing, again.\t{label}\n" for p, label in zip(premises, labels)))
    dev = [xnli_row(lang, "neutral" if i % 2 else "entailment", f"{lang} premise {i} in English.", f"{lang} hypothesis {i} in English.", i)
           for lang in ("en", "de") for i in range(3)]
    write(root / "translate-dev" / "xnli.dev.tsv", XNLI_HEADER + "\n" + "".join(dev))
    return root


def test_xmixup_s_translated_dev_set_and_filter_s_and_xtreme_s_test_translations(tmp_path):
    task = tasks.load_task("xnli", xnli_folder(tmp_path / "xnli"))
    read = tasks.read_translations(str(tmp_path / "xnli" / "translate-dev" / "xnli.dev.tsv"), "de", "en", task.dev["de"])
    assert [(e.id, e.lang, e.text) for e in read] == [(str(i), "en", f"de premise {i} in English.") for i in range(3)]
    # FILTER's xtreme.msft.<lang>-en.test: premise, hypothesis and label, no header, line i the test file's i-th row of the language
    msft = write(tmp_path / "msft" / "xtreme.msft.de-en.test", "".join(f"MS {i}.\tMS hyp {i}.\tneutral\n" for i in range(3)))
    read = tasks.read_translations(str(tmp_path / "msft" / "xtreme.msft.{lang}-en.test"), "de", "en", task.test["de"])
    assert [(e.id, e.text, e.pair) for e in read] == [(str(i), f"MS {i}.", f"MS hyp {i}.") for i in range(3)]
    msft.write_text("MS 0.\tMS hyp 0.\tneutral\n")
    with pytest.raises(DataError, match="xtreme.msft.de-en.test: 1 lines for the 3 examples of de: xtreme.msft.de-en.test is line-aligned"):
        tasks.read_translations(str(msft), "de", "en", task.test["de"])
    msft.write_text("MS 0.\tMS hyp 0.\tneutral\n\t\tneutral\nMS 2.\tMS hyp 2.\tneutral\n")
    with pytest.raises(DataError, match="xtreme.msft.de-en.test:2: the translation of 1 lacks its text or its second text"):
        tasks.read_translations(str(msft), "de", "en", task.test["de"])


def test_pawsx_translations_of_filter_and_xmixup_are_read_by_id(tmp_path):
    examples = [list(tasks.each_pawsx(write(tmp_path / "de" / "dev_2k.tsv", "id\tsentence1\tsentence2\tlabel\n7\tA.\tB.\t1\n9\tC.\tD.\t0\n"), "de"))]
    header = "id\tsentence1\tsentence2\tlabel\n"
    for name in ("translate-dev/dev_2k.de.tsv", "filter/xtreme.msft.de-en.dev"):  # X-Mixup's and FILTER's: PAWS-X's own layout
        path = write(tmp_path / name, header + "9\tC in English.\tD in English.\t0\n7\tA in English.\tB in English.\t1\n")
        assert [(e.id, e.text) for e in tasks.read_translations(str(path), "de", "en", examples[0])] == [("7", "A in English."),
                                                                                                         ("9", "C in English.")]


def test_xmixup_s_scheduled_sampling_feeds_each_source_its_round_trip_through_its_pair_s_language(tmp_path, tiny_model_dir):
    folder = xnli_folder(tmp_path / "xnli")
    task = tasks.load_task("xnli", folder)
    run = Run(task, Tokenizer.from_pretrained(tiny_model_dir), 64)
    method = make_method("xmixup", run, "--round-trip", str(folder / "translate-train-en" / "multinli.train.{lang}-en.tsv"),
                         "--ss-k", "1", "--dev-translations", str(folder / "translate-dev" / "xnli.dev.tsv"))
    items = method.training_items()  # 4 German pairs and English's own 4
    pairs = {(s.id, t.lang): (s, t) for s, t in items}
    german = [pairs[i, "de"] for i in ("2", "3", "4", "5")] + [pairs["2", "en"]]
    batch = method.make_batch(german, [1.0] * 5, step=100)  # p* = 1 / (1 + e^100): the round trips, always
    encode = lambda text: run.tokenizer.encode(text, "A thing, again.", 64)
    for row, text in enumerate(["RT A man sleeps.", "RT A dog runs in the park.", "RT Two women talk.", "RT The sun is hot today."]):
        ids = batch["source_ids"][row][batch["source_mask"][row].bool()].tolist()
        assert ids == encode(text)
    english_own = batch["source_ids"][4][batch["source_mask"][4].bool()].tolist()
    assert english_own == german[4][0].ids  # no round trip through English in the folder: the gold source
    assert batch["round_trip"].item() == 1.0 and batch["source_labels"].tolist() == [s.label for s, _ in german]
    # model selection pairs each German dev text with its translation into English, as the test pairs a test text
    dev = counterparts(run, "dev", "translation", method.settings.dev_translations)
    assert [e.text for e in dev["de"]] == [f"de premise {i} in English." for i in range(3)] and dev["en"] == task.dev["en"]
    broken = folder / "translate-train-en" / "multinli.train.de-en.tsv"
    broken.write_text("premise\thypo\tlabel\n")
    with pytest.raises(InputError, match="none of its rows is the round trip of a training example of en"):
        make_method("xmixup", Run(tasks.load_task("xnli", folder), run.tokenizer, 64), "--round-trip",
                    str(broken.parent / "multinli.train.{lang}-en.tsv")).training_items()


def test_filter_s_translations_are_fetched_as_its_download_script_fetches_them(tmp_path, mirror, unpinned):  # noqa: F811
    folder, url, _ = mirror
    # udpos.zip and panx.zip unzip into udpos/ and panx/, which download_data.sh:76 and 117 rename translations/, the folder
    # run_xtag.py:478 reads <split>-<pair>.tsv from: the English training segments into a language, a split's into English;
    # tydiqa.zip's test translations are moved into the data folder (download_data.sh:182-184, 200)
    tydiqa = squad_json([("swahili-5967113449718591924-0", "Who lives here?", "Anna lives here.", [("Anna", None)])])
    members = {"xnli": {"xnli/xtreme.msft.de-en.test": "A.\tB.\tneutral\n"}, "pawsx": {"pawsx/xtreme.msft.de-en.dev": "A.\tB.\t1\n"},
               "udpos": {"udpos/train-en-de.tsv": "Wir gehen .\n", "udpos/test-de-en.tsv": "We go .\n", "udpos/dev-de-en.tsv": "Go .\n"},
               "panx": {"panx/train-en-sw.tsv": "Angela Merkel alitembelea Paris\n", "panx/test-sw-en.tsv": "Angela Merkel\n",
                        "panx/train-en-de.tsv": "Angela Merkel besuchte Paris\n"},
               "tydiqa": {"tydiqa/tydiqa.translate.test.sw-en.json": tydiqa}}
    for task, files in members.items():
        buffer = tmp_path / f"{task}.zip"
        with zipfile.ZipFile(buffer, "w") as z:
            for member, text in files.items():
                z.writestr(member, text)
            z.writestr(f"{task}/xtreme.de.test", "not a translation\n")  # XTREME's own, which download.py fetches from the release
            z.writestr(f"{task}/{task}.translate.train.en-sw.json", "not a translation of a test set\n")
        put(folder, f"{download.FILTER_TRANSLATIONS}/{task}.zip", buffer.read_bytes())
    download.main(["filter-translations", "--to", str(tmp_path / "data"), "--mirror", url])
    assert (tmp_path / "data" / "xnli" / "filter-translations" / "xtreme.msft.de-en.test").read_text() == "A.\tB.\tneutral\n"
    assert sorted(p.name for p in (tmp_path / "data" / "pawsx" / "filter-translations").iterdir()) == ["xtreme.msft.de-en.dev"]
    written = lambda task: {p.name: p.read_text() for p in (tmp_path / "data" / task / "filter-translations").iterdir()}
    assert written("udpos") == {"train-en-de.tsv": "Wir gehen .\n", "test-de-en.tsv": "We go .\n", "dev-de-en.tsv": "Go .\n"}
    assert written("panx") == {"train-en-sw.tsv": "Angela Merkel alitembelea Paris\n", "test-sw-en.tsv": "Angela Merkel\n",
                               "train-en-de.tsv": "Angela Merkel besuchte Paris\n"}
    assert written("tydiqa") == {"tydiqa.translate.test.sw-en.json": tydiqa}
    download.main(["filter-translations", "--to", str(tmp_path / "some"), "--mirror", url, "--langs", "sw"])
    assert sorted(p.name for p in (tmp_path / "some" / "panx" / "filter-translations").iterdir()) == ["test-sw-en.tsv", "train-en-sw.tsv"]
    assert not (tmp_path / "some" / "xnli").exists()  # no translation of Swahili in it: a note, nothing written
    recorded = (tmp_path / "data" / "SHA256SUMS").read_text()
    assert f"{download.FILTER_TRANSLATIONS}/xnli.zip" in recorded  # no pinned checksum: the first download's is kept
    with zipfile.ZipFile(tmp_path / "empty.zip", "w") as z:
        z.writestr("readme.txt", "")
    put(folder, f"{download.FILTER_TRANSLATIONS}/xnli.zip", (tmp_path / "empty.zip").read_bytes())
    download.main(["filter-translations", "--to", str(tmp_path / "data"), "--mirror", url])  # done: nothing fetched again
    (tmp_path / "data" / ".download" / "filter-xnli.zip.done").unlink()
    with pytest.raises(InputError, match="SHA-256"):  # fetched again, a changed archive is refused
        download.main(["filter-translations", "--to", str(tmp_path / "data"), "--mirror", url])
    with pytest.raises(InputError, match="no xtreme.msft.<lang>-en.dev or .test file"):
        download.main(["filter-translations", "--to", str(tmp_path / "other"), "--mirror", url])


def test_a_tagged_sentence_longer_than_max_length_is_predicted_whole_in_windows(tiny_model_dir):
    from conftest import make_run
    from data import Example
    from levels import LEVELS
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    labels = ["NOUN", "VERB", "ADJ"]
    words = ("the cat sleeps on a warm mat while the dog runs in the green park and birds sing " * 3).split()
    example = Example(id="1", lang="en", text=" ".join(words), words=words, tags=[labels[i % 3] for i in range(len(words))])
    # a predictor that tags a token by its id alone: a sentence predicted in windows gets each word's tag as whole
    predict = lambda ids, mask: torch.nn.functional.one_hot(ids % 3, 3).float()
    tags = {}
    for max_length in (512, 40):
        run = make_run(labels, level="word", tokenizer=tokenizer, max_length=max_length)
        found = {}
        scores = LEVELS["word"].score(predict, "text", {"en": [example]}, run, predictions=found)
        tags[max_length] = found["en"][0]["prediction"]
        assert scores["en"]["n"] == len(words)
    budget = 40 - 2
    assert sum(len(p) for p in tokenizer.tokenize_words(words)) > 3 * budget  # three times what one window holds
    import data
    assert len(data.word_windows([example], tokenizer, 40)) >= 3
    assert tags[40] == tags[512] and "O" not in tags[40]


# QA: SQuAD v1.1 JSON, as XTREME's and the authors' files are written: {"data": [{"title", "paragraphs": [{"context",
# "qas": [{"id", "question", "answers": [{"answer_start", "text"}]}]}]}], "version"}. A translation keeps the id of the
# question it translates (FILTER's run_xqa.py:85-117 asserts one for every test question; X-Mixup's data/tasks/qa.py
# keys its dicts by it); a translate-test file's answers are read by neither author's code for the translation.
SQUAD_IDS = ["5733be284776f41900661182", "5733be284776f4190066117f", "5733bf84d058e614000b61be", "5733bed24776f41900661188"]
MLQA_IDS = ["a0ec9d5a7b2b4d16ba73f1d0e8c1b2a3c4d5e6f7", "b1fd0e6b8c3c5e27cb84f2e1f9d2c3b4d5e6f708", "c20e1f7c9d4d6f38dc9503f2"]
PEOPLE = [("Anna", "Paris", "red"), ("Ben", "Rome", "blue"), ("Carl", "Oslo", "green"), ("Dora", "Lima", "black")]
LONG = "On Sundays the old market by the river is full of people who sell fruit, bread, fish and flowers to everyone. "


def squad_json(questions, title="Article"):
    """[(id, question, context, [(answer, its first character or None for its place in the context)])] as SQuAD v1.1."""
    paragraphs = [{"context": c, "qas": [{"id": i, "question": q, "answers": [
        {"answer_start": c.index(a) if start is None else start, "text": a} for a, start in answers]}]} for i, q, c, answers in questions]
    return json.dumps({"data": [{"title": title, "paragraphs": paragraphs}], "version": "1.1"}, ensure_ascii=False)


def mlqa_folder(root):
    """MLQA as download.py writes it (MLQA_V1, test answers kept, SQuAD beside it with XTREME's translate-train), and
    X-Mixup's files where its README lays them out: squad/translate-train-en/squad.translate.train.en-<lang>-en.json
    (round trips of SQuAD's training questions, each under its question's id) and mlqa/translate-test/
    mlqa.translate.test.<lang>-en.json (MLQA's test questions in English, each under its question's id)."""
    train = [(i, f"Where does {name} live?", f"{name} lives in {city}. " + LONG * 2 + f"{name} likes {colour} bikes.", [(city, None)])
             for i, (name, city, colour) in zip(SQUAD_IDS, PEOPLE)]
    write(root / "squad" / "train-v1.1.json", squad_json(train))
    write(root / "squad" / "translate-train" / "squad.translate.train.en-de.json", squad_json(
        [(i, f"Wo wohnt {name}?", f"{name} wohnt in {city}. {name} mag Fahrräder.", [(city, None)]) for i, (name, city, _) in zip(SQUAD_IDS, PEOPLE)]))
    trips = [(i, f"Where is {name} living?", f"{name} is living in {city}. " + LONG * 2 + f"{name} likes bikes that are {colour}.",
              [(city, None)]) for i, (name, city, colour) in zip(SQUAD_IDS, PEOPLE)]
    trips[3] = trips[3][:3] + ([("Lima", 0)],)  # its answer lost in translation, as machine translation loses some: not read
    write(root / "squad" / "translate-train-en" / "squad.translate.train.en-de-en.json", squad_json(trips))
    for split in ("dev", "test"):
        for lang, (question, where) in (("en", ("Who lives in {}?", "{} lives in {}.")), ("de", ("Wer wohnt in {}?", "{} wohnt in {}."))):
            questions = [(i, question.format(city), where.format(name, city) + " " + LONG, [(name, None)])
                         for i, (name, city, _) in zip(MLQA_IDS, PEOPLE)]
            write(root / "mlqa" / "MLQA_V1" / split / f"{split}-context-{lang}-question-{lang}.json", squad_json(questions))
    # in another order than the test file, its answers as the translation left them (one not where it says): unread
    translated = [(i, f"Who is living in {city}?", f"{name} is living in {city}.", [(name, 3)]) for i, (name, city, _) in
                  reversed(list(zip(MLQA_IDS, PEOPLE)))]
    write(root / "mlqa" / "translate-test" / "mlqa.translate.test.de-en.json", squad_json(translated))
    return root


def test_a_qa_test_set_s_translation_is_read_by_question_id(tmp_path):
    folder = mlqa_folder(tmp_path)
    task = tasks.load_task("mlqa", folder / "mlqa")
    spec = str(folder / "mlqa" / "translate-test" / "mlqa.translate.test.{lang}-en.json")
    read = tasks.read_translations(spec, "de", "en", task.test["de"])
    assert [(e.id, e.lang, e.text, e.pair, e.answers) for e in read] == [
        (MLQA_IDS[0], "en", "Who is living in Paris?", "Anna is living in Paris.", None),
        (MLQA_IDS[1], "en", "Who is living in Rome?", "Ben is living in Rome.", None),
        (MLQA_IDS[2], "en", "Who is living in Oslo?", "Carl is living in Oslo.", None)]
    path = folder / "mlqa" / "translate-test" / "mlqa.translate.test.de-en.json"
    raw = json.loads(path.read_text())
    raw["data"][0]["paragraphs"] = raw["data"][0]["paragraphs"][1:]  # Carl's question (the file's first) untranslated
    path.write_text(json.dumps(raw))
    with pytest.raises(DataError, match=rf"mlqa.translate.test.de-en.json: no translation of 1 of the 3 examples of de, first ids "
                                        rf"\['{MLQA_IDS[2]}'\]"):
        tasks.read_translations(spec, "de", "en", task.test["de"])
    raw["data"][0]["paragraphs"][1]["qas"][0]["question"] = " "
    path.write_text(json.dumps(raw))
    with pytest.raises(DataError, match=rf"article 0, paragraph 1 \(data\[0\].paragraphs\[1\]\), question 0: the translation of "
                                        rf"'{MLQA_IDS[0]}' lacks its question or its context"):
        tasks.read_translations(spec, "de", "en", task.test["de"])
    raw["data"][0]["paragraphs"][1]["qas"][0]["id"] = MLQA_IDS[1]
    path.write_text(json.dumps(raw).replace('" "', '"Who?"'))
    with pytest.raises(DataError, match=rf"question id '{MLQA_IDS[1]}' is used twice, in article 0, paragraph 0 .* and in article 0, "
                                        "paragraph 1"):
        tasks.read_translations(spec, "de", "en", task.test["de"])
    path.write_text(json.dumps(raw)[:-5])
    with pytest.raises(DataError, match=r"mlqa.translate.test.de-en.json: not SQuAD v1.1 JSON"):
        tasks.read_translations(spec, "de", "en", task.test["de"])


def test_each_test_window_is_predicted_beside_its_own_question_s_translation(tmp_path, tiny_model_dir):
    from levels import LEVELS
    folder = mlqa_folder(tmp_path)
    task = tasks.load_task("mlqa", folder / "mlqa")
    task.doc_stride = 8  # as train.py sets it from --doc-stride
    run = Run(task, Tokenizer.from_pretrained(tiny_model_dir), 48, batch_size=2)
    partners = counterparts(run, "test", "translation", str(folder / "mlqa" / "translate-test" / "mlqa.translate.test.{lang}-en.json"))
    seen = []  # (the source side's tokens, the target side's tokens) of every window predicted

    def predict(source_ids, source_mask, target_ids, target_mask):
        seen.extend((s[m.bool()].tolist(), t[n.bool()].tolist()) for s, m, t, n in zip(source_ids, source_mask, target_ids, target_mask))
        return torch.zeros(*target_ids.shape, 2)

    LEVELS["span"].score(predict, "pair", {"de": task.test["de"]}, run, partners)
    encode = lambda question, context: run.tokenizer.add_special_tokens(run.tokenizer.tokenize(question), run.tokenizer.tokenize(context))
    german = {(0, *run.tokenizer.tokenize(f"Wer wohnt in {city}?"), 2): (name, city) for name, city, _ in PEOPLE[:3]}  # <s> question </s>
    assert len(seen) > 3  # each German context is read in several windows
    for source, target in seen:  # the German question's, whatever its window, beside its own translation (short: one window)
        name, city = next(person for question, person in german.items() if tuple(target[:len(question)]) == question)
        assert source == encode(f"Who is living in {city}?", f"{name} is living in {city}.")


def test_xmixup_feeds_each_qa_window_the_round_trip_window_over_the_same_text(tmp_path, tiny_model_dir):
    folder = mlqa_folder(tmp_path)
    task = tasks.load_task("mlqa", folder / "mlqa")
    task.doc_stride = 24  # as train.py sets it from --doc-stride
    run = Run(task, Tokenizer.from_pretrained(tiny_model_dir), 48)
    method = make_method("xmixup", run, "--round-trip", str(folder / "squad" / "translate-train-en" / "squad.translate.train.en-{lang}-en.json"))
    items = method.training_items()
    assert {s.extra["question"] for s, t in items if t.lang == "de"} == set(SQUAD_IDS) and len(items) > 30  # several windows each
    batch = method.make_batch(items, [1.0] * len(items), step=10 ** 6)  # p* = 0: the round trips wherever there are some
    trips = {}  # the round trips' windows, encoded here: {question: [(window, its context's characters)]}
    for e in tasks.read_squad(folder / "squad" / "translate-train-en" / "squad.translate.train.en-de-en.json", "de", noisy=True):
        trips[e.id] = [(w, (w.extra["spans"][0][0], w.extra["spans"][-1][1])) for w in tasks.qa.encode_windows([e], run.tokenizer, 48, 24)]
    assert sorted(trips) == sorted(SQUAD_IDS[:3])  # Dora's answer lost in translation: not read
    fed_trips = 0
    for row, (source, target) in enumerate(items):
        ids = batch["source_ids"][row][batch["source_mask"][row].bool()].tolist()
        label = tuple(batch["source_labels"][row].tolist())
        question = source.extra["question"]
        if target.lang == "en" or question not in trips:  # no round trip through English, none of Dora's: the gold window
            assert (ids, label) == (source.ids, source.label)
            continue
        # the round trip's window over most of the source window's text: the round trip's first sentence is longer
        # by `shift` characters ("is living" for "lives"), the rest of its context the source's
        shift = len(" is living") - len(" lives")
        a, b = source.extra["spans"][0][0], source.extra["spans"][-1][1]
        overlap = lambda span: min(b, span[1] - shift) - max(a, span[0] - shift)
        window = max(trips[question], key=lambda pair: overlap(pair[1]))[0]
        assert (ids, label) == (window.ids, window.label)
        fed_trips += 1
    labelled = [w.label for windows in trips.values() for w, _ in windows if w.label != (0, 0)]
    assert fed_trips >= 3 and len(labelled) == 3 and batch["round_trip"].item() == 1.0  # each answer in one window of its trip
    sources = {s.id: s.label for s, _ in items}  # a round trip's window has its own answer's label, not its source's
    assert all(windows[0][0].label != sources[f"{question}/0"] != (0, 0) for question, windows in trips.items())


def test_xmixup_on_mlqa_with_the_authors_round_trips_and_test_translations_reaches_its_test_table(tmp_path, tiny_model_dir):
    """As experiments/xmixup-mlqa.json runs it: trained with the round trips, tested beside MLQA's English originals (as the
    authors' code tests), then evaluated beside X-Mixup's translate-test files (as the paper describes)."""
    import evaluate
    from test_xtreme import run
    folder = mlqa_folder(tmp_path / "data")
    out = tmp_path / "xmixup"
    run(tiny_model_dir, "mlqa", folder / "mlqa", out, "--method", "xmixup", "--doc-stride", "8", "--no-alignment", "--ss-k", "1",
        "--test-input", "oracle", "--round-trip", str(folder / "squad" / "translate-train-en" / "squad.translate.train.en-{lang}-en.json"))
    results = json.loads((out / "results.json").read_text())
    assert results["test_input"]["input"] == "oracle" and {lang: results[lang]["n"] for lang in ("en", "de")} == {"en": 3, "de": 3}
    assert "| de |" in (out / "results.md").read_text() and 0 <= results["de"]["mlqa_f1"] <= 1
    translations = str(folder / "mlqa" / "translate-test" / "mlqa.translate.test.{lang}-en.json")
    evaluate.main(["--checkpoint", str(out / "best"), "--method", "xmixup", "--test-input", "translation", "--data", str(folder / "mlqa"),
                   "--test-translations", translations, "--out", str(tmp_path / "translated")])
    tested = json.loads((tmp_path / "translated" / "results_test.json").read_text())
    assert tested["test_input"] == {"input": "translation", "what": methods.TEST_INPUTS["translation"], "translations": translations}
    assert {lang: tested[lang]["n"] for lang in ("en", "de")} == {"en": 3, "de": 3}
    assert tested["en"] == pytest.approx(results["en"])  # English beside itself either way; German beside another text


def test_xmixup_on_xquad_squad_with_the_authors_round_trips_and_test_translations_reaches_its_test_table(tmp_path, tiny_model_dir):
    """As experiments/xmixup-xquad.json runs it: task xquad-squad, trained on SQuAD and its translations with X-Mixup's round
    trips of SQuAD (beside the XQuAD folder, in squad/translate-train-en/, the MLQA row's files), each test question beside
    XQuAD's English original of it (as the authors' code tests), then evaluated beside X-Mixup's xquad/translate-test files."""
    import evaluate
    from test_xtreme import SQUAD_TRAIN, XQUAD, released_xquad, run
    data = released_xquad(tmp_path / "data", translations=["ar", "de"])
    squad = data.parent / "squad"
    for lang in ("ar", "de"):  # each SQuAD training question through ar and de and back, under its own id
        write(squad / "translate-train-en" / f"squad.translate.train.en-{lang}-en.json", squad_json(
            [(i, f"{q[:-1]}, then?", f"It is said that {c}", [(a, None)]) for _, paragraphs in SQUAD_TRAIN for c, qas in paragraphs
             for i, q, a in qas]))
        # XQuAD's test questions in English, each under the id of the one it translates, in another order: unread answers
        write(data / "translate-test" / f"xquad.translate.test.{lang}-en.json", squad_json(
            [(i, f"{q[:-1]} ({lang})?", f"They say: {c}", [(a, None)]) for _, paragraphs in reversed(XQUAD["en"]) for c, qas in paragraphs
             for i, q, a in qas]))
    trips = str(data / ".." / "squad" / "translate-train-en" / "squad.translate.train.en-{lang}-en.json")  # the file's {data}/../squad
    out = tmp_path / "xmixup"
    run(tiny_model_dir, "xquad-squad", data, out, "--method", "xmixup", "--doc-stride", "8", "--no-alignment", "--ss-k", "1",
        "--select-on", "source", "--test-input", "oracle", "--round-trip", trips)
    results = json.loads((out / "results.json").read_text())
    assert results["test_input"]["input"] == "oracle" and not results.get("unscored")
    assert {lang: results[lang]["n"] for lang in ("en", "ar", "de")} == {"en": 4, "ar": 4, "de": 4}
    assert all(0 <= results[lang][m] <= 1 for lang in ("en", "ar", "de") for m in ("f1", "exact_match"))
    translations = str(data / "translate-test" / "xquad.translate.test.{lang}-en.json")
    evaluate.main(["--checkpoint", str(out / "best"), "--method", "xmixup", "--test-input", "translation", "--data", str(data),
                   "--test-translations", translations, "--out", str(tmp_path / "translated")])
    tested = json.loads((tmp_path / "translated" / "results_test.json").read_text())
    assert tested["test_input"] == {"input": "translation", "what": methods.TEST_INPUTS["translation"], "translations": translations}
    assert {lang: tested[lang]["n"] for lang in ("en", "ar", "de")} == {"en": 4, "ar": 4, "de": 4}
    assert tested["en"] == pytest.approx(results["en"])  # English beside itself either way
    # the round trips are read: a file that renders no SQuAD training question (XQuAD's questions, say) is refused, naming it
    write(squad / "translate-train-en" / "squad.translate.train.en-de-en.json", squad_json(
        [(i, q, c, [(a, None)]) for _, paragraphs in XQUAD["en"] for c, qas in paragraphs for i, q, a in qas]))
    with pytest.raises(InputError, match=r"squad.translate.train.en-de-en.json: none of its rows is the round trip of a training example"):
        run(tiny_model_dir, "xquad-squad", data, tmp_path / "unpaired", "--method", "xmixup", "--doc-stride", "8", "--no-alignment",
            "--select-on", "source", "--test-input", "oracle", "--round-trip", trips)


def tydiqa_folder(root):
    """TyDiQA-GoldP as download.py writes it (XTREME's layout: the English training questions' ids cut to their last part,
    here all different; the dev files renamed, answers kept), XTREME's translate-train into Swahili (each question under
    its English question's id), and FILTER's translate-test where download.py filter-translations puts it:
    filter-translations/tydiqa.translate.test.<lang>-en.json, each question under the id of the question it translates
    (run_xqa.py:405-409 reads 'translate.test.<lang>-en' beside '<lang>.dev', MixDataset pairs them by id)."""
    article = lambda i, q, c, a: {"paragraphs": [{"context": c, "qas": [{"answers": [{"answer_start": c.index(a), "text": a}],
                                                                           "question": q, "id": i}]}]}
    english = [(str(n), f"Who lives in house {n}?", f"House {n} is where Anna {n} lives with her cat.", f"Anna {n}") for n in range(40)]
    write(root / "tydiqa-goldp-v1.1-train" / "tydiqa.goldp.en.train.json", json.dumps({"data": [article(*q) for q in english],
                                                                                         "version": "TyDiQA-GoldP-1.1-train"}))
    write(root / "translate-train" / "tydiqa.translate.train.en-sw.json", squad_json(
        [(i, f"Nani anaishi katika nyumba {i}?", f"Nyumba {i} ni mahali Anna {i} anaishi.", [(f"Anna {i}", None)]) for i, *_ in english]))
    ids = {lang: [f"{name}-{5967113449718591924 + n}-{n}" for n in range(3)] for lang, name in (("en", "english"), ("sw", "swahili"))}
    for lang, question in (("en", "Who lives in house {}?"), ("sw", "Nani anaishi katika nyumba {}?")):
        dev = [article(i, question.format(n), f"Anna {n} lives in house {n}.", f"Anna {n}") for n, i in enumerate(ids[lang])]
        write(root / "tydiqa-goldp-v1.1-dev" / f"tydiqa.goldp.{lang}.dev.json", json.dumps({"data": dev, "version": "TyDiQA-GoldP-1.1-dev"}))
    write(root / "filter-translations" / "tydiqa.translate.test.sw-en.json", squad_json(
        [(i, f"Who lives in house {n}?", f"Anna {n} lives in house {n}.", [(f"Anna {n}", None)]) for n, i in enumerate(ids["sw"])]))
    return root, ids["sw"]


def test_filter_on_tydiqa_reads_its_test_translations_and_stops_before_training_without_one(tmp_path, tiny_model_dir):
    from test_xtreme import run
    data, ids = tydiqa_folder(tmp_path / "tydiqa")
    translations = str(data / "filter-translations" / "tydiqa.translate.test.{lang}-en.json")
    out = tmp_path / "filter"
    run(tiny_model_dir, "tydiqa", data, out, "--method", "filter", "--doc-stride", "8", "--no-alignment", "--test-translations", translations)
    results = json.loads((out / "results.json").read_text())
    assert results["test_input"]["input"] == "translation" and {lang: results[lang]["n"] for lang in ("en", "sw")} == {"en": 3, "sw": 3}
    write(data / "filter-translations" / "tydiqa.translate.test.sw-en.json", squad_json([(ids[0], "Who?", "Anna 0.", [("Anna 0", None)])]))
    with pytest.raises(DataError, match=rf"tydiqa.translate.test.sw-en.json: no translation of 2 of the 3 examples of sw, first ids "
                                        rf"\['{ids[1]}', '{ids[2]}'\]"):
        run(tiny_model_dir, "tydiqa", data, tmp_path / "missing", "--method", "filter", "--doc-stride", "8", "--no-alignment",
            "--test-translations", translations)
    assert not (tmp_path / "missing" / "best").exists() and not (tmp_path / "missing" / "checkpoint.pt").exists()  # no step made


def test_tydiqa_trains_with_squads_questions_beside_it_as_filters_caption_says(tmp_path, tiny_model_dir, capsys):
    """FILTER's TyDiQA-GoldP runs add SQuAD v1.1's English training questions (its Table 2's caption;
    run_xqa.py:1127-1144): --extra-train with a SQuAD file adds each of them once to what zero-shot and
    translate-train train on, and FILTER pairs each with itself (run_xqa.py:1140), never with a translation."""
    import re
    from test_xtreme import run
    data, _ = tydiqa_folder(tmp_path / "tydiqa")
    squad = tmp_path / "squad" / "train-v1.1.json"
    write(squad, squad_json([(f"5733be28{n:04x}", f"Who sings song {n}?", f"Bob {n} sings.", [(f"Bob {n}", None)]) for n in range(5)]))
    translations = str(data / "filter-translations" / "tydiqa.translate.test.{lang}-en.json")
    runs = iter(range(100))

    def items(method, *flags):
        run(tiny_model_dir, "tydiqa", data, tmp_path / f"run{next(runs)}", "--method", method, "--doc-stride", "8",
            "--no-alignment", *flags)
        return int(re.search(r"from ([\d,]+) training items", capsys.readouterr().err).group(1).replace(",", ""))

    for method, flags in (("zero-shot", []), ("translate-train", []), ("filter", ["--test-translations", translations])):
        assert items(method, *flags, "--extra-train", str(squad)) - items(method, *flags) == 5, method  # one window each
    with pytest.raises(InputError, match=r"each question paired with itself \(--self-pairs\)"):
        items("filter", "--test-translations", translations, "--extra-train", str(squad), "--no-self-pairs")
    write(squad, squad_json([("3", "Who sings?", "Bob sings.", [("Bob", None)])]))  # the id of a TyDiQA-GoldP training question
    with pytest.raises(DataError, match=r"train-v1.1.json: question id '3' .* is also one of the task's own training questions"):
        items("zero-shot", "--extra-train", str(squad))


LONG_WORDS = ("the cat sleeps on a warm mat while the dog runs in the green park and birds sing " * 4).split()[:60]


def filter_udpos(folder, tokenizer):
    """XTREME's UD-POS (a word TAB its tag a line, a blank line after each sentence) with an English
    training sentence and a German test sentence longer than one of XTREME's segments, and FILTER's
    translations as its udpos.zip holds them, in filter-translations/ (download.py filter-translations):
    a translated segment a line, in the order of the split's segments."""
    from test_xtreme import panx_file
    assert tasks.xtreme_segments(LONG_WORDS, tokenizer) == [50, 10]  # two segments of XTREME's preprocessing, 125 sub-words at most
    short = [("We", "PRON"), ("go", "VERB"), (".", "PUNCT")]
    folder.mkdir()
    panx_file(folder / "train-en.tsv", [short, [(w, "NOUN") for w in LONG_WORDS], [("Hi", "INTJ")]])
    panx_file(folder / "dev-en.tsv", [short])
    panx_file(folder / "test-en.tsv", [short])
    panx_file(folder / "test-de.tsv", [[(w, "NOUN") for w in LONG_WORDS], [("Wir", "PRON"), ("gehen", "VERB")]], labelled=False)
    write(folder / "filter-translations" / "train-en-de.tsv", "Wir gehen .\nTeil eins\nTeil zwei\n\n")  # the last: empty
    write(folder / "filter-translations" / "test-de-en.tsv", "Part one\nPart two\nWe go\n")
    return folder


def test_filter_s_translations_of_ud_pos_are_read_by_xtreme_s_segments(tmp_path, tiny_model_dir):
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    assert len(tokenizer.tokenize_words(["the"])[0]) == 1 and len(tokenizer.tokenize_words(["q" * 200])[0]) > 125
    assert tokenizer.tokenize_words(["\u200c"]) == [[]]
    # utils_preprocess.py: 125 sub-words a segment; a word of none, or of more than fit alone, counts as one (<unk>)
    assert tasks.xtreme_segments(["q" * 200] + ["the"] * 124 + ["\u200c", "the"], tokenizer) == [125, 2]
    folder = filter_udpos(tmp_path / "udpos", tokenizer)
    task = tasks.load_task("udpos", folder, tokenizer=tokenizer)
    assert task.translations.startswith("FILTER's Microsoft Translator translations")
    assert task.test_translations == str(folder / "filter-translations" / "test-{lang}-en.tsv")
    # a sentence's segments' lines joined; an empty line stands for its segment's own words (utils_tag.py:58-66); no tags
    assert [(e.id, e.lang, e.text, e.words, e.tags) for e in task.train["de"]] == [
        ("1", "de", "Wir gehen .", ["Wir", "gehen", "."], None), ("2", "de", "Teil eins Teil zwei", ["Teil", "eins", "Teil", "zwei"], None),
        ("3", "de", "Hi", ["Hi"], None)]
    assert task.train["de"][2].where.endswith("train-en-de.tsv:4")
    read = tasks.read_translations(task.test_translations, "de", "en", task.test["de"], tokenizer)
    assert [(e.id, e.lang, e.words) for e in read] == [("1", "en", ["Part", "one"]), ("1#1", "en", ["Part", "two"]), ("2", "en", ["We", "go"])]
    for lines, line, count in (("Wir gehen .\nTeil eins\nTeil zwei\n", 4, 3), ("Wir gehen .\nTeil eins\nTeil zwei\nHallo\nNoch eine\n", 5, 5)):
        (folder / "filter-translations" / "train-en-de.tsv").write_text(lines)  # one line missing, one too many
        with pytest.raises(DataError, match=rf"train-en-de.tsv:{line}: {count} lines for the 4 segments that XTREME's "
                                            "preprocessing cuts the 3 sentences into"):
            tasks.load_task("udpos", folder, tokenizer=tokenizer).train["de"]
    with pytest.raises(InputError, match="FILTER's translations are aligned with the segments"):
        tasks.load_task("udpos", folder).train["de"]
    (folder / "filter-translations" / "test-de-en.tsv").write_text("Part one\nWe go\n")
    with pytest.raises(DataError, match="test-de-en.tsv:3: 2 lines for the 3 segments"):
        tasks.read_translations(task.test_translations, "de", "en", task.test["de"], tokenizer)


def test_each_window_of_a_long_test_sentence_is_paired_with_its_own_segment_s_translation(tmp_path, tiny_model_dir):
    from levels import LEVELS
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    task = tasks.load_task("udpos", filter_udpos(tmp_path / "udpos", tokenizer), tokenizer=tokenizer)
    run = Run(task, tokenizer, 128, batch_size=8)
    seen = []

    def predict(source_ids, source_mask, target_ids, target_mask):  # a FILTER predictor: the translation beside the text
        seen.extend(ids[mask.bool()].tolist() for ids, mask in zip(source_ids, source_mask))
        return torch.zeros(*target_ids.shape, len(task.labels))

    partners = counterparts(run, "test", "translation", task.test_translations)
    found = {}
    LEVELS["word"].score(predict, "pair", {"de": task.test["de"]}, run, partners, found)
    encoded = {e.id: it.ids for e, it in zip(partners["de"], run.encode(partners["de"]))}
    assert sorted(seen) == sorted([encoded["1"], encoded["1#1"], encoded["2"]])  # the long sentence's two windows, each its own
    assert [len(p["prediction"]) for p in found["de"]] == [60, 2]
