"""X-Mixup's released translations of UD-POS and PAN-X (minxlt/tasks/xmixup_tags.py), in the files
its README.md lays out and its ner.py reads: translate-train-logits/<lang>.txt (a word and its
soft labels a line, ';'-separated, a blank line after each sentence), translate-{test,dev}-token/<lang>.txt
and the round trips of translate-train-en-token/<lang>.txt."""
import json
import math

import pytest
from test_xtreme import PANX, UD, panx_file, run, with_filter_translations, xtreme_panx, xtreme_udpos

from data import RoundTrips
from minxlt.tasks import DataError, InputError, load_task
from minxlt.tasks.translated import read_translations
from minxlt.tasks.xmixup_tags import read_soft_labelled, teacher_rows

PANX_SOFT = [[("Angela", "0.0;0.9;0.1;0.0;0.0;0.0;0.0"), ("Merkel", "0.0;0.0;1.0;0.0;0.0;0.0;0.0"),
              ("besuchte", "1;0;0;0;0;0;0"), ("Paris", "0.1;0;0;0;0;0.9;0")],
             [("Die", "0;0;0;0;0;0;0"), ("Vereinten", "0;0;0;0.8;0.1;0;0"), ("Nationen", "0;0;0;0;1;0;0")]]  # "Die": no soft labels


def tagging_file(path, sentences, last_blank=True):
    """Word TAB second column a line, a blank line after each sentence (the last's optional)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join("".join(f"{w}\t{c}\n" for w, c in s) + "\n" for s in sentences)
    path.write_text(text if last_blank else text[:-1])
    return path


ROUND_TRIPS = [[("Angela", "O"), ("Merkel", "O"), ("went", "O"), ("to", "O"), ("Paris", "O")],
               [("The", "O"), ("UN", "O")]]  # English's training sentences through German and back: a second column, unread


def in_columns(sentences, order):
    """PANX_SOFT's soft labels (in the task's label order) with their columns in `order`."""
    from minxlt.tasks.panx import PANX_LABELS
    at = [PANX_LABELS.index(label) for label in order]
    return [[(w, ";".join(cell.split(";")[i] for i in at)) for w, cell in s] for s in sentences]


def with_xmixup_translations(data, langs=("de",)):
    """X-Mixup's tagging folders in the data folder: German's soft-labelled translations of the two
    English training sentences (their columns in the order of XTREME's labels.txt, the tags sorted),
    their round trips through German, and German's dev and test sentences translated into English."""
    from minxlt.tasks.panx import PANX_LABELS
    for lang in langs:
        tagging_file(data / "translate-train-logits" / f"{lang}.txt", in_columns(PANX_SOFT, sorted(PANX_LABELS)))
        tagging_file(data / "translate-train-en-token" / f"{lang}.txt", ROUND_TRIPS)
        for split in ("dev", "test"):
            tagging_file(data / f"translate-{split}-token" / f"{lang}.txt", [[(w, "O") for w, _ in s] + [("(en)", "O")] for s in PANX])
    return data


def test_soft_labelled_translations_pair_with_the_english_training_sentences_by_number(tmp_path):
    data = with_xmixup_translations(xtreme_panx(tmp_path / "panx"))
    task = load_task("panx", data, targets=["de"], soft_labels=str(data / "translate-train-logits" / "{lang}.txt"))
    de = task.train["de"]
    assert [e.id for e in de] == [e.id for e in task.train["en"]] == ["1", "2"]
    assert de[0].words == ["Angela", "Merkel", "besuchte", "Paris"] and de[0].tags is None
    soft = task.train.layout.soft_labels_of("de")
    assert soft[("2", "de")][1] == [0, 0, 0, 0.8, 0.1, 0, 0]
    assert load_task("panx", data, targets=["de"]).train["de"] == []  # without --soft-labels: FILTER's (none here)


def test_soft_label_columns_follow_labels_txt_or_else_xtremes_sorted_labels(tmp_path):
    """X-Mixup's run_tagging.py:119 gives the soft labels' columns the order of its labels.txt, which
    XTREME's preprocess_panx.sh:43 writes sorted; a labels.txt in the data folder says the order."""
    from minxlt.tasks.panx import PANX_LABELS
    data = with_xmixup_translations(xtreme_panx(tmp_path / "panx"))
    soft = lambda: load_task("panx", data, targets=["de"], soft_labels=str(data / "translate-train-logits" / "{lang}.txt")
                             ).train.layout.soft_labels_of("de")[("1", "de")][0]
    assert soft() == [0.0, 0.9, 0.1, 0.0, 0.0, 0.0, 0.0]  # Angela: B-PER 0.9, I-PER 0.1, in the task's order
    order = ["I-LOC", "O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC"]
    (data / "labels.txt").write_text("\n".join(order) + "\n")
    tagging_file(data / "translate-train-logits" / "de.txt", in_columns(PANX_SOFT, order))
    assert soft() == [0.0, 0.9, 0.1, 0.0, 0.0, 0.0, 0.0]
    (data / "labels.txt").write_text("\n".join(list(PANX_LABELS[:-1]) + ["B-MISC"]) + "\n")
    with pytest.raises(DataError, match=r"panx/labels.txt: labels .*B-MISC: X-Mixup's soft labels need the task's"):
        soft()


def test_released_soft_labels_become_the_teachers_logits_and_a_word_without_them_is_left_out(tmp_path, tiny_model_dir):
    from methods import Run
    from minxlt.text.tokenizer import Tokenizer
    data = with_xmixup_translations(xtreme_panx(tmp_path / "panx"))
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    task = load_task("panx", data, targets=["de"], soft_labels=str(data / "translate-train-logits" / "{lang}.txt"))
    items = Run(task, tokenizer, 48).encode(task.train["de"])
    rows = teacher_rows(items, task.train.layout.soft_labels_of("de"), len(task.labels))
    (word, token), = [st for st in items[1].extra["scored"] if st[0] == 0]  # "Die": its soft labels sum to 0
    assert rows[("2", "de")][token].isnan().all()
    (_, token), = [st for st in items[0].extra["scored"] if st[0] == 1]  # "Merkel": I-PER with probability 1
    assert rows[("1", "de")][token].softmax(-1)[2].item() == pytest.approx(1.0)


PARIS = "Paris\t0;0;0;0;0;1;0\n\n"  # a good second sentence


@pytest.mark.parametrize("lines, problem", [
    ("Angela\t0;1;0;0;0;0;0\nMerkel\n\n" + PARIS, r"logits/de.txt:2: 1 tab-separated field"),
    ("Angela\t0;1;0;0;0;0;0\textra\n\n" + PARIS, r"logits/de.txt:1: 3 tab-separated field"),
    ("Angela\t0;1;0;0;0\n\n" + PARIS, r"logits/de.txt:1: 5 soft labels for the task's 7 labels"),
    ("Angela\t0;one;0;0;0;0;0\n\n" + PARIS, r"logits/de.txt:1: soft labels '0;one;0;0;0;0;0' are not numbers"),
    ("Angela\t0;nan;0;0;0;0;0\n\n" + PARIS, r"logits/de.txt:1: .*a probability is a finite number"),
    ("Angela\t0;1;0;0;0;0;0\n\n\nParis\t0;0;0;0;0;1;0\n\n", r"logits/de.txt:3: a blank line after a blank line"),
    ("Angela\t0;1;0;0;0;0;0\n\n", r"logits/de.txt:1: 1 sentences for the 2 of the source's training file"),
    ("Angela\t0;1;0;0;0;0;0\n\nParis\t0;0;0;0;0;1;0\n", r"logits/de.txt:1: 1 sentences for the 2 .*without a blank line after it"),
])
def test_a_soft_label_file_that_is_not_x_mixups_is_refused_at_its_line(tmp_path, lines, problem):
    data = xtreme_panx(tmp_path / "panx")
    (data / "translate-train-logits").mkdir()
    (data / "translate-train-logits" / "de.txt").write_text(lines)
    task = load_task("panx", data, targets=["de"], soft_labels=str(data / "translate-train-logits" / "{lang}.txt"))
    with pytest.raises(DataError, match=problem):
        task.train["de"]


def test_test_and_dev_sentences_are_paired_with_x_mixups_english_token_files_by_number(tmp_path):
    data = with_xmixup_translations(xtreme_panx(tmp_path / "panx"))
    task = load_task("panx", data, targets=["de"])
    english = read_translations(str(data / "translate-test-token" / "{lang}.txt"), "de", "en", task.test["de"])
    assert [(e.id, e.lang, e.words) for e in english] == [("1", "en", ["Angela", "Merkel", "visited", "Paris", "(en)"]),
                                                           ("2", "en", ["The", "United", "Nations", "(en)"])]
    tagging_file(data / "translate-test-token" / "de.txt", [[("Angela", "O")]])
    with pytest.raises(DataError, match=r"test-token/de.txt:1: 1 sentences for the 2 of de's split"):
        read_translations(str(data / "translate-test-token" / "{lang}.txt"), "de", "en", task.test["de"])
    (data / "translate-test-token" / "de.txt").write_text("Angela\n\n")
    with pytest.raises(DataError, match=r"test-token/de.txt:1: 1 tab-separated field"):
        read_translations(str(data / "translate-test-token" / "{lang}.txt"), "de", "en", task.test["de"])


def test_round_trips_pair_with_the_english_training_sentences_by_number_and_have_no_tags(tmp_path):
    data = with_xmixup_translations(xtreme_panx(tmp_path / "panx"))
    task = load_task("panx", data, targets=["de"], soft_labels=str(data / "translate-train-logits" / "{lang}.txt"))
    trips = RoundTrips(task.train, str(data / "translate-train-en-token" / "{lang}.txt"))
    assert trips.langs == ["de"]  # English has none
    assert [(e.id, e.lang, e.words, e.tags) for e in trips["de"]] == [
        ("1", "de", ["Angela", "Merkel", "went", "to", "Paris"], None), ("2", "de", ["The", "UN"], None)]
    assert trips["de"][1].where.endswith("translate-train-en-token/de.txt:7")


@pytest.mark.parametrize("lines, problem", [
    ("Angela\tO\nMerkel\n\nThe\tO\n\n", r"en-token/de.txt:2: 1 tab-separated field"),
    ("Angela\tO\n\n\nThe\tO\n\n", r"en-token/de.txt:3: a blank line after a blank line"),
    ("Angela\tO\n\n", r"en-token/de.txt:1: 1 sentences for the 2 of the source's training file"),
    ("Angela\tO\n\nThe\tO\n\nUN\tO\n\n", r"en-token/de.txt:3: 3 sentences for the 2 of the source's training file"),
])
def test_a_round_trip_file_that_is_not_x_mixups_is_refused_at_its_line(tmp_path, lines, problem):
    data = xtreme_panx(tmp_path / "panx")
    (data / "translate-train-en-token").mkdir()
    (data / "translate-train-en-token" / "de.txt").write_text(lines)
    task = load_task("panx", data, targets=["de"])
    with pytest.raises(DataError, match=problem):
        RoundTrips(task.train, str(data / "translate-train-en-token" / "{lang}.txt"))["de"]


def test_a_long_sentence_pairs_with_x_mixups_translations_of_xtremes_segments(tmp_path, tiny_model_dir):
    """X-Mixup's data folder is XTREME's processed one (<lang>/{split}.tsv beside labels.txt), where a
    sentence of more than 125 of XLM-R's sub-words is cut into segments: its translations pair with
    those, a sentence's segments joined for training, a test sentence's one a window (<id>, <id>#1)."""
    from test_translations import LONG_WORDS

    from minxlt.tasks import xtreme_segments
    from minxlt.text.tokenizer import Tokenizer
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    assert xtreme_segments(LONG_WORDS, tokenizer) == [50, 10]
    data = tmp_path / "panx"
    data.mkdir()
    short, long = PANX[0], [(w, "O") for w in LONG_WORDS]
    panx_file(data / "train-en.tsv", [short, long, PANX[1]])  # 4 segments
    for split in ("dev", "test"):
        panx_file(data / f"{split}-en.tsv", [short])
        panx_file(data / f"{split}-de.tsv", [long, short], labelled=split != "test")  # 3 segments
    soft = lambda words: [(w, "1;0;0;0;0;0;0") for w in words]
    tagging_file(data / "translate-train-logits" / "de.txt",
                 [soft(["Angela", "Merkel"]), soft(["Teil", "eins"]), soft(["zwei"]), soft(["Die", "UN"])])
    tagging_file(data / "translate-train-en-token" / "de.txt", [[(w, "O")] for w in ("Angela", "part", "two", "UN")])
    tagging_file(data / "translate-test-token" / "de.txt",
                 [[("Part", "O"), ("one", "O")], [("Part", "O"), ("two", "O")], [("Angela", "O")]])
    tokens = str(data / "translate-test-token" / "{lang}.txt")
    logits = str(data / "translate-train-logits" / "{lang}.txt")
    task = load_task("panx", data, targets=["de"], tokenizer=tokenizer, soft_labels=logits)
    assert [(e.id, e.words) for e in task.train["de"]] == [("1", ["Angela", "Merkel"]), ("2", ["Teil", "eins", "zwei"]),
                                                            ("3", ["Die", "UN"])]
    assert len(task.train.layout.soft_labels_of("de")[("2", "de")]) == 3
    trips = RoundTrips(task.train, str(data / "translate-train-en-token" / "{lang}.txt"))
    assert [(e.id, e.words) for e in trips["de"]] == [("1", ["Angela"]), ("2", ["part", "two"]), ("3", ["UN"])]
    english = read_translations(tokens, "de", "en", task.test["de"], tokenizer)
    assert [(e.id, e.words) for e in english] == [("1", ["Part", "one"]), ("1#1", ["Part", "two"]), ("2", ["Angela"])]
    with pytest.raises(DataError, match=r"test-token/de.txt:\d+: 3 sentences for the 2 of de's split: X-Mixup's files"):
        read_translations(tokens, "de", "en", task.test["de"])  # no tokenizer to count the segments with
    tagging_file(data / "translate-test-token" / "de.txt", [[("Part", "O")]] * 4)
    with pytest.raises(DataError, match=r"4 sentences for the 2 of de's split and their 3 segments"):
        read_translations(tokens, "de", "en", task.test["de"], tokenizer)


def test_read_soft_labelled_keeps_every_column_as_written(tmp_path):
    """base.py's csv.reader with quotechar=None: a quote is a character of the word."""
    path = tagging_file(tmp_path / "de.txt", [[('"Angela"', "0;1;0;0;0;0;0")]])
    sources = load_task("panx", xtreme_panx(tmp_path / "panx")).train["en"][:1]
    (e, soft), = read_soft_labelled(path, "de", sources, ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"])
    assert e.words == ['"Angela"'] and soft == [[0, 1, 0, 0, 0, 0, 0]] and e.where == f"{path}:1"


def test_x_mixup_runs_on_panx_from_its_released_files(tmp_path, tiny_model_dir, capsys):
    """A few steps of X-Mixup on PAN-X from X-Mixup's layout: each English sentence beside its
    soft-labelled German translation (the soft labels the teacher's), each dev and test sentence
    beside its English translation, the best model on every language's dev F1."""
    data = xtreme_panx(tmp_path / "panx")
    for lang in ("en", "de"):
        panx_file(data / f"test-{lang}.tsv", PANX)  # tagged, as download.py leaves them
    with_xmixup_translations(data)
    out = tmp_path / "run"
    run(tiny_model_dir, "panx", data, out, "--method", "xmixup", "--target-langs", "de", "--no-alignment", "--eval-batch-size", "8",
        "--soft-labels", str(data / "translate-train-logits" / "{lang}.txt"), "--mixup-layer", "1", "--select-on", "all",
        "--test-input", "translation", "--test-translations", str(data / "translate-test-token" / "{lang}.txt"),
        "--dev-translations", str(data / "translate-dev-token" / "{lang}.txt"))
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert all(math.isfinite(r["target"]) and r["target"] > 0 for r in records if "loss" in r)
    results = json.loads((out / "results.json").read_text())
    assert results["test_input"]["input"] == "translation" and not results.get("unscored")
    assert {lang: results[lang]["n"] for lang in ("en", "de")} == {"en": 7, "de": 7} and 0 <= results["de"]["f1"] <= 1
    assert "| de |" in (out / "results.md").read_text()
    with pytest.raises(InputError, match=r"has none in de .*\(they come from: --soft-labels .*elsewhere/\{lang\}.txt\)"):
        run(tiny_model_dir, "panx", data, tmp_path / "none", "--method", "xmixup", "--target-langs", "de", "--mixup-layer",
            "1", "--test-input", "text", "--soft-labels", str(tmp_path / "elsewhere" / "{lang}.txt"))  # that file named


def test_x_mixup_feeds_the_round_trips_on_word_labels_and_trains_on_the_soft_labels_alone_there(tmp_path, tiny_model_dir):
    """Scheduled sampling on PAN-X from X-Mixup's translate-train-en-token (k = 1: from the third
    step on the round trips are fed nearly always): a step that feeds them trains on the target's
    soft labels alone, weight 1 (English paired with itself keeps its gold source, unused); the
    others on Eq. 8's two terms, alpha 0.8."""
    data = with_xmixup_translations(xtreme_panx(tmp_path / "panx"))
    out = tmp_path / "run"
    run(tiny_model_dir, "panx", data, out, "--method", "xmixup", "--target-langs", "de", "--no-alignment", "--eval-batch-size", "8",
        "--soft-labels", str(data / "translate-train-logits" / "{lang}.txt"), "--mixup-layer", "1", "--max-steps", "6",
        "--round-trip", str(data / "translate-train-en-token" / "{lang}.txt"), "--ss-k", "1", "--test-input", "text", "--log-every", "1")
    steps = [r for r in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "loss" in r]
    assert len(steps) == 6 and {r["round_trip"] for r in steps} == {0.0, 1.0}
    for r in steps:
        task = r["target"] if r["round_trip"] else 0.8 * r["source"] + 0.2 * r["target"]
        assert r["loss"] == pytest.approx(task + r["mse"], rel=1e-5) and r["target"] > 0
    assert json.loads((out / "results.json").read_text())["unscored"] == ["en", "de"]  # XTREME's test files: predictions only


@pytest.mark.parametrize("task", ["udpos", "panx"])
def test_without_x_mixups_files_the_fallback_trains_on_filters_translations_tagged_by_the_zero_shot_model(tmp_path, tiny_model_dir, task):
    """xmixup-udpos.json's and xmixup-panx.json's fallback: a zero-shot model (2 steps) tags FILTER's
    translations as the source model of Sec. 4.2 (--teacher), no round trips, each test sentence
    beside FILTER's English translation; the run reaches its test table."""
    data = xtreme_udpos(tmp_path / task) if task == "udpos" else xtreme_panx(tmp_path / task)
    for lang in ("en", "de"):
        panx_file(data / f"test-{lang}.tsv", UD.get(lang, UD["en"]) if task == "udpos" else PANX)  # tagged, as download.py leaves them
    with_filter_translations(data, task)
    common = ["--target-langs", "de", "--no-alignment", "--eval-batch-size", "8"]
    run(tiny_model_dir, task, data, tmp_path / "zero-shot", "--method", "zero-shot", *common)
    out = tmp_path / "xmixup"
    run(tiny_model_dir, task, data, out, "--method", "xmixup", *common, "--mixup-layer", "1", "--select-on", "all",
        "--teacher", str(tmp_path / "zero-shot" / "best"), "--test-translations", str(data / "filter-translations" / "test-{lang}-en.tsv"))
    steps = [r for r in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "loss" in r]
    assert steps and all(r["round_trip"] == 0 and r["target"] > 0 and math.isfinite(r["loss"]) for r in steps)
    results = json.loads((out / "results.json").read_text())
    assert results["test_input"]["input"] == "translation" and 0 <= results["de"]["f1"] <= 1
    assert "| de |" in (out / "results.md").read_text()
