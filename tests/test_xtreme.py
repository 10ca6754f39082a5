"""XTREME's benchmarks in XTREME's layouts (scripts/download_data.sh, utils_preprocess.py): small
folders written here the way those scripts write them, read by tasks.load_task, and runs whose
test files have no labels, which write predictions and no scores."""
import csv
import json
import re

import pytest

import train
from minxlt import tasks
from minxlt.tasks import InputError, load_task

NLI = [("The cat sat on the mat.", 'He said "it sat".', "entailment"),
       ("A man plays\tguitar.", "Nobody plays.", "contradiction"),
       ("It rains today.", "The weather is wet.", "entailment"),
       ("She reads a book.", "She is asleep.", "neutral")]


def write_csv(path, rows):
    """As utils_preprocess.py writes its TSVs: Python's csv, tab-delimited, quoting as needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        csv.writer(f, delimiter="\t").writerows(rows)


def xtreme_xnli(folder, three_columns=False):
    write_csv(folder / "train-en.tsv", NLI)
    for lang in ("en", "de"):
        write_csv(folder / f"dev-{lang}.tsv", NLI[:2])
        write_csv(folder / f"test-{lang}.tsv", [row[:2] for row in NLI[:3]])  # XTREME drops the test labels
    (folder / "translate-train").mkdir()
    if three_columns:  # text, second text, label: row i translates row i of train-en.tsv
        rows = ["Die Katze sass.\tEr sagte \"sie sass\".\tentailment", "NS\tNS\tcontradictory",  # skipped, still row 2
                "Es regnet heute.\tDas Wetter ist nass.\tentailment", "Sie liest ein Buch.\tSie schläft.\tneutral"]
    else:  # English texts, their translations, label; not csv-quoted, noisy
        rows = ['A man plays\tguitar.\tNobody plays.\tEin Mann spielt.\tNiemand spielt.\tcontradictory',  # a tab in the text: skipped
                'She reads a book.\tShe is asleep.\tSie liest "ein" Buch.\tSie schläft.\tneutral',
                'The cat  sat on the mat.\tHe said "it sat".\tDie Katze sass.\tEr sagte "sie sass".\tentailment',
                'Not in the training file.\tAt all.\tNicht.\tGar nicht.\tneutral',
                'Too few columns\tentailment']
    (folder / "translate-train" / "en-de-translated.tsv").write_text("\n".join(rows) + "\n")
    (folder / "translate-test").mkdir()
    (folder / "translate-test" / "test-de-en-translated.tsv").write_text(
        "The cat sat.\tHe said it sat.\nA man plays.\tNobody plays.\nIt rains.\tIt is wet.\n")
    return folder


def test_xnli_as_xtreme_writes_it(tmp_path, capsys):
    task = load_task("xnli", xtreme_xnli(tmp_path))
    assert (task.source, task.targets) == ("en", ["de"])
    en = task.train["en"]
    assert [(e.id, e.text, e.pair, e.label) for e in en[:2]] == [
        ("1", "The cat sat on the mat.", 'He said "it sat".', "entailment"), ("2", "A man plays\tguitar.", "Nobody plays.", "contradiction")]
    de = {e.id: e for e in task.train["de"]}  # paired with train-en by its English texts, whitespace aside
    assert sorted(de) == ["1", "4"]
    assert (de["1"].text, de["1"].pair, de["1"].label) == ("Die Katze sass.", 'Er sagte "sie sass".', "entailment")
    assert (de["4"].text, de["4"].label) == ('Sie liest "ein" Buch.', "neutral")  # a quote as written
    err = capsys.readouterr().err
    assert "skipped 2 malformed or untranslated rows" in err and "skipped 1 rows whose English texts are not in the training file" in err
    assert [e.label for e in task.dev["de"]] == ["entailment", "contradiction"]
    assert [e.label for e in task.test["de"]] == [None] * 3 and not any(e.labelled for e in task.test["en"])
    assert task.test_translations == str(tmp_path / "translate-test" / "test-{lang}-en-translated.tsv")
    assert task.parallel


def test_three_column_translations_pair_by_row(tmp_path):
    task = load_task("xnli", xtreme_xnli(tmp_path, three_columns=True))
    assert [(e.id, e.text, e.label) for e in task.train["de"]] == [("1", "Die Katze sass.", "entailment"),
                                                                   ("3", "Es regnet heute.", "entailment"),
                                                                   ("4", "Sie liest ein Buch.", "neutral")]


def test_pawsx_as_xtreme_writes_it(tmp_path):
    write_csv(tmp_path / "train-en.tsv", [("a b", "b a", "1"), ("c d", "e f", "0")])
    for lang in ("en", "ja"):
        write_csv(tmp_path / f"dev-{lang}.tsv", [("a b", "b a", "1")])
        write_csv(tmp_path / f"test-{lang}.tsv", [("a b", "b a"), ("c", "NS")])  # pawsx_preprocess keeps NS rows
    task = load_task("pawsx", tmp_path)
    assert task.targets == ["ja"] and task.train["ja"] == [] and [e.label for e in task.train["en"]] == ["1", "0"]
    assert [(e.id, e.pair) for e in task.test["ja"]] == [("1", "b a"), ("2", "NS")]
    write_csv(tmp_path / "dev-ja.tsv", [("a b", "b a", "2")])
    with pytest.raises(InputError, match=r"dev-ja.tsv:1: unknown label '2'"):
        load_task("pawsx", tmp_path)


def test_a_repeated_english_pair_pairs_its_translations_in_turn(tmp_path):
    write_csv(tmp_path / "train-en.tsv", [("a b", "b a", "1"), ("c d", "e f", "0"), ("a b", "b a", "0")])
    for lang in ("en", "de"):
        write_csv(tmp_path / f"dev-{lang}.tsv", [("a b", "b a", "1")])
        write_csv(tmp_path / f"test-{lang}.tsv", [("a b", "b a")])
    (tmp_path / "translate-train").mkdir()
    (tmp_path / "translate-train" / "en-de-translated.tsv").write_text(
        "a b\tb a\tA B\tB A\t1\nc d\te f\tC D\tE F\t0\na b\tb a\tA B.\tB A.\t0\n")
    task = load_task("pawsx", tmp_path)
    assert [(e.id, e.text, e.label) for e in task.train["de"]] == [("1", "A B", "1"), ("2", "C D", "0"),
                                                                   ("3", "A B.", "0")]


def panx_file(path, sentences, labelled=True):
    lines = []
    for sentence in sentences:
        lines += [f"{word}\t{tag}" if labelled else word for word, tag in sentence] + [""]
    path.write_text("\n".join(lines[:-1]) + "\n")  # XTREME drops the last blank line


PANX = [[("Angela", "B-PER"), ("Merkel", "I-PER"), ("visited", "O"), ("Paris", "B-LOC")],
        [("The", "O"), ("United", "B-ORG"), ("Nations", "I-ORG")]]


def xtreme_panx(folder):
    folder.mkdir(exist_ok=True)
    for lang in ("en", "de", "sw"):
        for split in ("train", "dev", "test"):
            panx_file(folder / f"{split}-{lang}.tsv", PANX, labelled=split != "test")
    return folder


def test_panx_as_xtreme_writes_it(tmp_path):
    task = load_task("panx", xtreme_panx(tmp_path), targets=["sw", "de"])
    assert (task.level, task.targets, task.parallel) == ("word", ["sw", "de"], False)
    assert task.train["sw"] == [] and task.train["de"] == []  # the targets' own training files are not translations
    assert [(e.words, e.tags) for e in task.train["en"]] == [([w for w, _ in s], [t for _, t in s]) for s in PANX]
    assert [e.words for e in task.test["de"]] == [[w for w, _ in s] for s in PANX] and task.test["de"][0].tags is None
    (tmp_path / "dev-en.tsv").write_text("Angela\tB-PERSON\n")
    with pytest.raises(InputError, match=r"dev-en.tsv:1: unknown label 'B-PERSON'"):
        load_task("panx", tmp_path)


def conll(sentences):
    """A file as ud-conversion-tools' conllu_to_conll.py writes it (download_data.sh's first step):
    CoNLL 2006's ten columns (ID FORM LEMMA CPOSTAG=UPOS POSTAG FEATS HEAD DEPREL PHEAD PDEPREL), a
    blank line after each sentence. `sentences`: [[(form, upos)]]."""
    return "".join("".join(f"{i}\t{form}\t_\t{upos}\t_\t_\t{int(i > 1)}\tdep\t_\t_\n" for i, (form, upos) in enumerate(s, 1)) + "\n"
                   for s in sentences)


def xtreme_udpos_preprocess(conll_dir, out_dir):
    """XTREME's utils_preprocess.py udpos_preprocess, transcribed here from its steps, on the
    converter's files, <conll_dir>/<lang>/*.conll: each language's files in the order of their
    names, put in train, dev or test by the first of those words that the name holds; a sentence
    ends at a line that is not ten tab-separated columns, and is kept unless all its FORMs, or all
    but one, are "_"; words lose zero-width non-joiners and spaces; a split with sentences becomes
    <out_dir>/<split>-<lang>.tsv, a word TAB its tag per line (test: the word alone), a newline
    after each sentence's last word and another after it, except that the file's last word has
    only the second."""
    for lang_dir in sorted(p for p in conll_dir.iterdir() if p.is_dir()):
        data = {"train": [], "dev": [], "test": []}
        for path in sorted(lang_dir.iterdir()):
            split = next((split for split in data if split in path.name), None)
            words, tags = [], []
            with open(path, encoding="utf-8") as f:
                for line in f:
                    cells = line.strip().split("\t")
                    if len(cells) == 10:
                        words.append(cells[1].strip())
                        tags.append(cells[3].strip())
                        continue
                    blank = words.count("_")
                    if split and (blank == 0 or blank < len(words) - 1):
                        data[split].append((["".join(w.replace("\u200c", "").split(" ")) for w in words], tags))
                    words, tags = [], []
        for split, sentences in data.items():
            if not sentences:
                continue
            with open(out_dir / f"{split}-{lang_dir.name}.tsv", "w", encoding="utf-8") as f:
                for s, (words, tags) in enumerate(sentences):
                    for w, (word, tag) in enumerate(zip(words, tags)):
                        end = "" if (s, w) == (len(sentences) - 1, len(words) - 1) else "\n"
                        f.write(f"{word}{end}" if split == "test" else f"{word}\t{tag}{end}")
                    f.write("\n")


UD = {"en": [[("We", "PRON"), ("walk", "VERB"), ("home", "ADV"), (".", "PUNCT")], [("Angela", "PROPN"), ("cannot", "AUX"), ("go", "VERB")]],
      "de": [[("Wir", "PRON"), ("gehen", "VERB"), ("zum", "ADP"), ("Haus", "NOUN"), (".", "PUNCT")]]}


def xtreme_udpos(folder):
    """XTREME's UD-POS made by the transcription of its preprocessing from the converter's files: an
    English treebank with train, dev and test, a second English one (its sentences follow, by
    name), one released without its text ("_" forms: left out), and German with a test set only."""
    conll_dir = folder / "conll"
    for name, sentences in {"en/en_ewt-ud-train.conll": UD["en"], "en/en_ewt-ud-dev.conll": UD["en"][:1],
                            "en/en_ewt-ud-test.conll": UD["en"], "en/en_gum-ud-train.conll": [[("Hi", "INTJ"), ("\u200cthere", "ADV")]],
                            "en/en_esl-ud-train.conll": [[("_", "PRON"), ("_", "VERB"), (".", "PUNCT")]],
                            "de/de_gsd-ud-test.conll": UD["de"]}.items():
        (conll_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (conll_dir / name).write_text(conll(sentences), encoding="utf-8")
    xtreme_udpos_preprocess(conll_dir, folder)
    return folder


def test_udpos_as_xtreme_writes_it(tmp_path):
    xtreme_udpos(tmp_path)
    assert (tmp_path / "test-de.tsv").read_text() == "Wir\ngehen\nzum\nHaus\n.\n"  # the script's test files: no tags
    assert sorted(p.name for p in tmp_path.glob("*.tsv")) == ["dev-en.tsv", "test-de.tsv", "test-en.tsv", "train-en.tsv"]
    task = load_task("udpos", tmp_path)
    assert (task.level, task.source, task.targets, task.parallel, task.labels) == ("word", "en", ["de"], False, list(tasks.UPOS_LABELS))
    assert [(e.words, e.tags) for e in task.train["en"]] == [([w for w, _ in s], [t for _, t in s]) for s in UD["en"]] + \
        [(["Hi", "there"], ["INTJ", "ADV"])]  # EWT, then GUM; the zero-width non-joiner gone; ESL's hidden forms left out
    assert task.train["de"] == [] and task.dev["de"] == [] and len(task.dev["en"]) == 1
    assert [e.words for e in task.test["de"]] == [[w for w, _ in UD["de"][0]]] and task.test["de"][0].tags is None
    (tmp_path / "dev-en.tsv").write_text("We\tPRON\nwalk\tVERBS\n")
    with pytest.raises(InputError, match=r"dev-en.tsv:2: unknown label 'VERBS'"):
        load_task("udpos", tmp_path)
    (tmp_path / "dev-en.tsv").write_text("We\tPRON\nwalk\tVERB\tx\n")
    with pytest.raises(InputError, match=r"dev-en.tsv:2: 3 tab-separated fields: a line is a word and its tag, or \(a test file\) the word"):
        load_task("udpos", tmp_path)


def squad(questions, blank=False):
    """A SQuAD v1.1 file of (id, question, context, answer) questions, blanked as XTREME blanks tests."""
    paragraphs = [{"context": c, "qas": [{"id": i, "question": q, "answers": [{"answer_start": 0, "text": ""}] if blank else
                                          [{"answer_start": c.index(a), "text": a}]}]} for i, q, c, a in questions]
    return json.dumps({"version": "1.1", "data": [{"paragraphs": [p]} for p in paragraphs] if blank else
                       [{"title": "Article", "paragraphs": paragraphs}]})


QUESTIONS = [(f"q{i}", f"Who lives in house {i}?", f"House {i} is where Anna {i} lives with her cat.", f"Anna {i}") for i in range(12)]


def xtreme_qa(root):
    (root / "squad").mkdir(parents=True)
    (root / "squad" / "train-v1.1.json").write_text(squad(QUESTIONS[:8]))
    (root / "squad" / "dev-v1.1.json").write_text(squad(QUESTIONS[8:]))
    for split in ("dev", "test"):
        folder = root / "mlqa" / "MLQA_V1" / split
        folder.mkdir(parents=True)
        for c, q in (("en", "en"), ("de", "de"), ("en", "de")):  # en-de: G-XLT's mixed pairs, not a language
            (folder / f"{split}-context-{c}-question-{q}.json").write_text(squad(QUESTIONS[:4], blank=split == "test"))
    (root / "xquad").mkdir()
    for lang in ("en", "ar"):
        (root / "xquad" / f"xquad.{lang}.json").write_text(squad(QUESTIONS[:5], blank=True))
    return root


def test_mlqa_trains_on_squad_beside_it(tmp_path):
    task = load_task("mlqa", xtreme_qa(tmp_path) / "mlqa")
    assert (task.source, task.targets, task.level) == ("en", ["de"], "span")
    assert [e.id for e in task.train["en"]] == [f"q{i}" for i in range(8)] and task.train["de"] == []
    assert [e.answers for e in task.dev["de"]][0] == [("Anna 0", 17)]
    assert [e.answers for e in task.test["de"]] == [None] * 4
    (tmp_path / "squad" / "train-v1.1.json").unlink()
    task = load_task("mlqa", tmp_path / "mlqa")  # evaluation reads no training file
    with pytest.raises(InputError, match="train-v1.1.json: not found: mlqa trains on SQuAD v1.1, .* beside mlqa/"):
        task.train["en"]


def test_squad_translations_pair_by_question_id(tmp_path):
    (xtreme_qa(tmp_path) / "squad" / "translate-train").mkdir()
    translated = [(i, "Wer wohnt hier?", f"Hier wohnt {a}.", a) for i, _, _, a in QUESTIONS[:3]]
    broken = json.loads(squad(translated))
    broken["data"][0]["paragraphs"][2]["qas"][0]["answers"][0]["answer_start"] = 0  # not where the answer is: skipped
    (tmp_path / "squad" / "translate-train" / "squad.translate.train.en-de.json").write_text(json.dumps(broken))
    task = load_task("mlqa", tmp_path / "mlqa")
    assert [(e.id, e.answers) for e in task.train["de"]] == [("q0", [("Anna 0", 11)]), ("q1", [("Anna 1", 11)])]


@pytest.mark.parametrize("name", ["xquad", "xquad-squad"])
def test_blanked_xquad_is_a_test_set_trained_on_squad(tmp_path, name):
    task = load_task(name, xtreme_qa(tmp_path) / "xquad")
    assert len(task.train["en"]) == 8 and len(task.dev["en"]) == 4 and task.dev["ar"] == []
    assert len(task.test["ar"]) == 5 and not any(e.labelled for e in task.test["ar"])


def squad_v11(articles, answers=1):
    """A file as SQuAD v1.1's train-v1.1.json and dev-v1.1.json are written: one line, each article
    its title then its paragraphs, each question its answers, question and id (the dev set's
    questions have three answers, repeated where the annotators agreed)."""
    data = [{"title": title, "paragraphs": [{"context": c, "qas": [{"answers": [{"answer_start": c.index(a), "text": a}] * answers,
                                                                    "question": q, "id": i} for i, q, a in qas]} for c, qas in paragraphs]}
            for title, paragraphs in articles]
    return json.dumps({"data": data, "version": "1.1"})


def deepmind_xquad(articles):
    """A file as google-deepmind/xquad releases xquad.<lang>.json: keys sorted, indented by two, a
    newline at the end; every question one answer, its id the SQuAD dev question's in every language."""
    data = [{"paragraphs": [{"context": c, "qas": [{"answers": [{"answer_start": c.index(a), "text": a}], "id": i, "question": q}
                                                   for i, q, a in qas]} for c, qas in paragraphs], "title": title}
            for title, paragraphs in articles]
    return json.dumps({"data": data, "version": "1.1"}, indent=2, sort_keys=True) + "\n"


SQUAD_TRAIN = [("Normans", [(f"The Normans lived in Normandy {i}, a region of France.",
                             [(f"n{i}", "Where did the Normans live?", f"Normandy {i}")]) for i in range(4)]),
               ("Amazon", [("The Amazon is a rainforest in South America.", [("a0", "What is the Amazon?", "a rainforest"),
                                                                              ("a1", "Where is the Amazon?", "South America")])])]
SQUAD_DEV = [("Warsaw", [("Warsaw is the capital of Poland.", [("w0", "What is Warsaw?", "the capital of Poland"),
                                                                 ("w1", "Of which country is Warsaw the capital?", "Poland")])])]
XQUAD = {  # three articles, parallel by id, whose titles xquad_split puts in train, test and dev
    "en": [("Super_Bowl_50", [("The Panthers defense gave up just 308 points.", [("56beb4343aeaaa14008c925b", "How many points?", "308")]),
                              ("Kawann Short led the team in sacks with 11.", [("56beb4343aeaaa14008c925c", "Who led in sacks?",
                                                                                 "Kawann Short")])]),
           ("Oxygen", [("Carl Wilhelm Scheele discovered oxygen in 1773.", [("571c8539dd7acb1400e4c0e2", "When was oxygen discovered?",
                                                                               "1773")])]),
           ("Rhine", [("The Rhine flows through Basel.", [("572ff7ab04bcaa1900d76f53", "Where does the Rhine flow?", "Basel")])])],
    "de": [("Super_Bowl_50", [("Die Verteidigung der Panthers gab nur 308 Punkte ab.", [("56beb4343aeaaa14008c925b", "Wie viele Punkte?",
                                                                                          "308")]),
                              ("Kawann Short führte das Team mit 11 Sacks an.", [("56beb4343aeaaa14008c925c", "Wer führte bei den Sacks?",
                                                                                  "Kawann Short")])]),
           ("Oxygen", [("Carl Wilhelm Scheele entdeckte den Sauerstoff 1773.", [("571c8539dd7acb1400e4c0e2", "Wann wurde Sauerstoff entdeckt?",
                                                                                    "1773")])]),
           ("Rhine", [("Der Rhein fließt durch Basel.", [("572ff7ab04bcaa1900d76f53", "Wo fließt der Rhein?", "Basel")])])],
    "ar": [("Super_Bowl_50", [("تخلى دفاع الفهود عن 308 نقاط فقط.", [("56beb4343aeaaa14008c925b", "كم نقطة؟", "308")]),
                              ("قاد كاوان شورت الفريق بـ 11.", [("56beb4343aeaaa14008c925c", "من قاد الفريق؟", "كاوان شورت")])]),
           ("Oxygen", [("اكتشف كارل فيلهلم شيله الأكسجين عام 1773.", [("571c8539dd7acb1400e4c0e2", "متى اكتُشف الأكسجين؟", "1773")])]),
           ("Rhine", [("يتدفق نهر الراين عبر بازل.", [("572ff7ab04bcaa1900d76f53", "أين يتدفق الراين؟", "بازل")])])],
}


def released_xquad(root, langs=("en", "ar", "de"), translations=()):
    """XQuAD as google-deepmind/xquad releases it (download.py xquad) in root/xquad, SQuAD v1.1 as
    download.py squad writes it in root/squad, and XTREME's translations of SQuAD's training set into
    `translations` (squad/translate-train/squad.translate.train.en-<lang>.json)."""
    (root / "xquad").mkdir(parents=True)
    (root / "squad" / "translate-train").mkdir(parents=True)
    (root / "squad" / "train-v1.1.json").write_text(squad_v11(SQUAD_TRAIN))
    (root / "squad" / "dev-v1.1.json").write_text(squad_v11(SQUAD_DEV, answers=3))
    for lang in langs:
        (root / "xquad" / f"xquad.{lang}.json").write_text(deepmind_xquad(XQUAD[lang]), encoding="utf-8")
    for lang in translations:  # XQuAD's questions, in turn, stand in for the translations: what matters is the ids and answers
        questions = [(c, qa) for _, paragraphs in XQUAD[lang] for c, qas in paragraphs for qa in qas]
        ids = [i for _, paragraphs in SQUAD_TRAIN for _, qas in paragraphs for i, _, _ in qas]
        rendered = [(c, [(i, q, a)]) for i, (c, (_, q, a)) in zip(ids, questions * len(ids))]
        (root / "squad" / "translate-train" / f"squad.translate.train.en-{lang}.json").write_text(
            squad_v11([("Translated", rendered)]), encoding="utf-8")
    return root / "xquad"


def ids_of(examples):
    return [e.id for e in examples]


def test_xquad_squad_tests_all_of_xquad_and_trains_on_squad(tmp_path):
    assert [tasks.xquad_split(title) for title in ("Super_Bowl_50", "Oxygen", "Rhine")] == ["train", "test", "dev"]  # task xquad's split
    folder = released_xquad(tmp_path)
    task = load_task("xquad-squad", folder)
    assert (task.source, task.targets, task.level, task.parallel) == ("en", ["ar", "de"], "span", True)
    assert ids_of(task.train["en"]) == ["n0", "n1", "n2", "n3", "a0", "a1"] and task.train["de"] == []  # no translations here
    assert [(e.id, e.answers) for e in task.dev["en"]] == [("w0", [("the capital of Poland", 10)] * 3), ("w1", [("Poland", 25)] * 3)]
    assert task.dev["de"] == [] and task.dev["ar"] == []
    xquad_ids = ["56beb4343aeaaa14008c925b", "56beb4343aeaaa14008c925c", "571c8539dd7acb1400e4c0e2", "572ff7ab04bcaa1900d76f53"]
    assert {lang: ids_of(task.test[lang]) for lang in ("en", "ar", "de")} == dict.fromkeys(("en", "ar", "de"), xquad_ids)
    assert [e.answers for e in task.test["de"]] == [[("308", 38)], [("Kawann Short", 0)], [("1773", 46)], [("Basel", 23)]]
    assert [e.group for e in task.test["ar"]] == ["Super_Bowl_50", "Super_Bowl_50", "Oxygen", "Rhine"]
    assert all(e.labelled for lang in ("en", "ar", "de") for e in task.test[lang])
    split = load_task("xquad", folder)  # the same folder as task xquad: XQuAD split by article, as before
    assert (ids_of(split.train["en"]), ids_of(split.test["de"]), ids_of(split.dev["de"])) == (xquad_ids[:2], xquad_ids[2:3], xquad_ids[3:])
    (folder / "xquad.ar.json").unlink()
    assert load_task("xquad-squad", folder).targets == ["de"]  # the languages the folder holds


def test_xquad_squad_trains_on_xtremes_translations_of_squad(tmp_path):
    task = load_task("xquad-squad", released_xquad(tmp_path, translations=["de"]))
    assert [(e.id, e.text) for e in task.train["de"]] == [("n0", "Wie viele Punkte?"), ("n1", "Wer führte bei den Sacks?"),
                                                         ("n2", "Wann wurde Sauerstoff entdeckt?"), ("n3", "Wo fließt der Rhein?"),
                                                         ("a0", "Wie viele Punkte?"), ("a1", "Wer führte bei den Sacks?")]


def test_xquad_squad_refuses_a_bad_file_naming_it_and_the_place(tmp_path):
    folder = released_xquad(tmp_path)
    broken = json.loads((folder / "xquad.de.json").read_text())
    broken["data"][1]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 3
    (folder / "xquad.de.json").write_text(json.dumps(broken, indent=2, sort_keys=True) + "\n")
    with pytest.raises(InputError, match=re.escape(f"{folder / 'xquad.de.json'}: article 1 ('Oxygen'), paragraph 0, question "
                                                   "571c8539dd7acb1400e4c0e2: answer '1773' is not at character 3 of the context")):
        load_task("xquad-squad", folder)
    lines = deepmind_xquad(XQUAD["de"]).split("\n")
    assert lines[5].startswith('          "context": "Die Verteidigung')
    lines[5] = lines[5].replace('",', '" x,')  # a stray word after the first context, on line 6
    (folder / "xquad.de.json").write_text("\n".join(lines))
    with pytest.raises(InputError, match=re.escape(f"{folder / 'xquad.de.json'}: not SQuAD v1.1 JSON") + ".*line 6 column"):
        load_task("xquad-squad", folder)
    (folder / "xquad.de.json").unlink()
    (tmp_path / "squad" / "dev-v1.1.json").unlink()
    with pytest.raises(InputError, match=re.escape(f"{tmp_path / 'squad' / 'dev-v1.1.json'}: not found: xquad-squad trains on SQuAD "
                                                   f"v1.1, which XTREME's download puts in squad/ beside xquad/ (python download.py "
                                                   f"squad --to {tmp_path / 'squad'})")):
        load_task("xquad-squad", folder)


def tydiqa_as_xtreme_writes_it(root, questions, blank=True):
    """TyDiQA-GoldP as XTREME's utils_preprocess.py (tydiqa_preprocess) writes it: the training
    file split by language, each question an article of its own without a title, its id cut to
    the last part after '-' (english-<n>-1 becomes 1); the dev files renamed by ISO code, their
    ids whole and, as remove_qa_test_annotations leaves them, their answers blanked."""
    def article(i, q, c, a, answers):
        return {"paragraphs": [{"context": c, "qas": [{"answers": answers, "question": q, "id": i}]}]}
    (root / "tydiqa-goldp-v1.1-train").mkdir(parents=True)
    (root / "tydiqa-goldp-v1.1-dev").mkdir()
    for name, iso in (("english", "en"), ("swahili", "sw")):
        full = [(f"{name}-{5967113449718591924 + n}-{n % 2}", q, c, a) for n, (_, q, c, a) in enumerate(questions)]
        train = [article(i.split("-")[-1], q, c, a, [{"answer_start": c.index(a), "text": a}]) for i, q, c, a in full]
        (root / "tydiqa-goldp-v1.1-train" / f"tydiqa.goldp.{iso}.train.json").write_text(
            json.dumps({"data": train, "version": "TyDiQA-GoldP-1.1-train"}))
        dev = [article(i, q, c, a, [{"answer_start": 0, "text": ""}] if blank else [{"answer_start": c.index(a), "text": a}])
               for i, q, c, a in full[:3]]
        (root / "tydiqa-goldp-v1.1-dev" / f"tydiqa.goldp.{iso}.dev.json").write_text(json.dumps({"data": dev, "version": "TyDiQA-GoldP-1.1-dev"}))
    return root


@pytest.mark.parametrize("blank", [True, False], ids=["test-answers-withheld", "test-answers-kept"])
def test_tydiqa_as_xtreme_writes_it(tmp_path, blank):
    questions = [(None, f"Who lives in house {i}?", f"House {i} is where Anna {i} lives with her cat.", f"Anna {i}") for i in range(40)]
    task = load_task("tydiqa", tydiqa_as_xtreme_writes_it(tmp_path, questions, blank))
    assert (task.targets, task.parallel) == (["sw"], False)
    raw = json.loads((tmp_path / "tydiqa-goldp-v1.1-train" / "tydiqa.goldp.en.train.json").read_text())
    assert {qa["id"] for a in raw["data"] for p in a["paragraphs"] for qa in p["qas"]} == {"0", "1"}  # as XTREME leaves them
    dev = [(e.text, e.pair) for e in task.dev["en"]]
    assert dev == [(q, c) for _, q, c, _ in questions if tasks.tydiqa_split(q, c) == "dev"] and 0 < len(dev) < 40
    ids = [e.id for e in task.dev["en"] + task.train["en"]]
    assert len(ids) == len(set(ids)) == 40  # each question its own id, for the dev predictions
    assert task.train["sw"] == [] and len(task.test["sw"]) == 3 and all(e.labelled for e in task.test["sw"]) == (not blank)


def test_tydiqa_as_xtreme_writes_it_trains_through_the_command_line(tmp_path, tiny_model_dir):
    questions = [(None, f"Who lives in house {i}?", f"House {i} is where Anna {i} lives with her cat.", f"Anna {i}") for i in range(40)]
    tydiqa_as_xtreme_writes_it(tmp_path / "tydiqa", questions)
    run(tiny_model_dir, "tydiqa", tmp_path / "tydiqa", tmp_path / "out", "--method", "zero-shot", "--no-alignment", "--doc-stride", "8")
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["unscored"] == ["en", "sw"] and results["dev_f1"] is not None


@pytest.mark.parametrize("name,where", [("xquad", "xquad/xquad.ar.json"), ("mlqa", "mlqa/MLQA_V1/dev/dev-context-de-question-de.json"),
                                        ("mlqa", "squad/train-v1.1.json")])
def test_a_question_id_used_twice_is_refused_naming_both_places(tmp_path, name, where):
    xtreme_qa(tmp_path)
    twice = [QUESTIONS[0], QUESTIONS[1], (QUESTIONS[0][0],) + QUESTIONS[2][1:]]
    (tmp_path / where).write_text(squad(twice, blank=where.startswith("xquad")))
    with pytest.raises(InputError) as e:
        load_task(name, tmp_path / name).train["en"]  # training files are read when first asked for
    assert str(e.value).startswith(f"{tmp_path / where}: question id 'q0' is used twice, in article 0 (") and \
        "question q0 and in article " in str(e.value) and "predictions are keyed by it" in str(e.value)


def test_only_test_files_may_be_unlabelled(tmp_path):
    folder = xtreme_xnli(tmp_path)
    write_csv(folder / "test-de.tsv", [NLI[0], NLI[1][:2]])
    with pytest.raises(InputError, match="1 of the 2 test examples in de have no label, first '2'.*labelled throughout or not at all"):
        load_task("xnli", folder)
    write_csv(folder / "test-de.tsv", [row[:2] for row in NLI])
    write_csv(folder / "dev-en.tsv", [row[:2] for row in NLI])
    with pytest.raises(InputError, match="4 of the 4 dev examples in en have no label.*only test files may be unlabelled"):
        load_task("xnli", folder)


def run(model, task, data, out, *flags):
    return train.main(["--model", str(model), "--task", task, "--data", str(data), "--batch-size", "4", "--max-steps", "2",
                       "--eval-every", "2", "--max-length", "48", "--out", str(out), *flags])


def test_unlabelled_tests_give_predictions_and_no_scores(tmp_path, tiny_model_dir):
    """XNLI as XTREME writes it, tested as translate-test on XTREME's translate-test files."""
    out = tmp_path / "run"
    run(tiny_model_dir, "xnli", xtreme_xnli(tmp_path / "xnli"), out, "--method", "translate-test", "--test-input", "translation")
    results = json.loads((out / "results.json").read_text())
    assert results["unscored"] == ["en", "de"] and "en" not in results and "average" not in results
    assert results["test_input"]["translations"].endswith("translate-test/test-{lang}-en-translated.tsv")
    assert "No score for en, de: the test files have no gold labels" in (out / "results.md").read_text()
    for lang in ("en", "de"):
        rows = [json.loads(line) for line in (out / "predictions" / f"{lang}.jsonl").read_text().splitlines()]
        assert [r["id"] for r in rows] == ["1", "2", "3"] and all(r["prediction"] in tasks.XNLI_LABELS for r in rows)


def test_word_and_span_tasks_without_test_labels(tmp_path, tiny_model_dir):
    run(tiny_model_dir, "panx", xtreme_panx(tmp_path / "panx"), tmp_path / "ner", "--method", "zero-shot", "--target-langs", "de")
    results = json.loads((tmp_path / "ner" / "results.json").read_text())
    assert results["unscored"] == ["en", "de"] and results["alignment"] == {}
    rows = [json.loads(line) for line in (tmp_path / "ner" / "predictions" / "de.jsonl").read_text().splitlines()]
    assert [len(r["prediction"]) for r in rows] == [4, 3] and all(t in tasks.PANX_LABELS for r in rows for t in r["prediction"])
    with pytest.raises(InputError, match="--method translate-train trains on each translation's labels, and --task panx's translations "
                                         r"\(FILTER's .*\) have none: word labels do not carry over"):
        run(tiny_model_dir, "panx", tmp_path / "panx", tmp_path / "tt", "--method", "translate-train", "--target-langs", "de")
    with pytest.raises(InputError, match="word labels do not carry over"):  # nor in a few-shot sample of them
        run(tiny_model_dir, "panx", tmp_path / "panx", tmp_path / "tt", "--method", "translate-train", "--target-langs", "de",
            "--train-fraction", "0.9")
    data = xtreme_qa(tmp_path / "qa") / "mlqa"
    run(tiny_model_dir, "mlqa", data, tmp_path / "qa-run", "--method", "zero-shot", "--max-length", "64", "--doc-stride", "16")
    results = json.loads((tmp_path / "qa-run" / "results.json").read_text())
    assert results["unscored"] == ["en", "de"] and results["dev_f1"] >= 0
    rows = [json.loads(line) for line in (tmp_path / "qa-run" / "predictions" / "de.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["q0", "q1", "q2", "q3"] and all(isinstance(r["prediction"], str) for r in rows)


@pytest.mark.parametrize("task", ["udpos", "panx", "xquad-squad"])
def test_tasks_in_xtremes_layout_reach_their_test_table(tmp_path, tiny_model_dir, task):
    """A few steps of zero-shot transfer on XTREME's UD-POS and PAN-X whose test files keep their
    tags (as download.py writes them), and on all of XQuAD with its answers, trained on SQuAD: the
    test table scores every language (QA: SQuAD's F1 and exact match, as XTREME scores XQuAD)."""
    if task == "xquad-squad":
        data, flags = released_xquad(tmp_path), ["--max-length", "64", "--doc-stride", "16"]
    else:
        data, flags = xtreme_udpos(tmp_path / "udpos") if task == "udpos" else xtreme_panx(tmp_path / "panx"), []
        for lang in ("en", "de"):
            panx_file(data / f"test-{lang}.tsv", UD[lang] if task == "udpos" else PANX)  # tagged, as download.py leaves them
    out = tmp_path / "run"
    run(tiny_model_dir, task, data, out, "--method", "zero-shot", "--target-langs", "de", "--no-alignment", "--eval-batch-size", "8", *flags)
    results = json.loads((out / "results.json").read_text())
    metric, counts = {"udpos": ("f1", {"en": 7, "de": 5}), "panx": ("f1", {"en": 7, "de": 7}),
                      "xquad-squad": ("exact_match", {"en": 4, "de": 4})}[task]  # words; QA: questions
    assert not results.get("unscored") and results["alignment"] == {}
    assert {lang: results[lang]["n"] for lang in ("en", "de")} == counts and 0 <= results["de"][metric] <= 1
    if task == "udpos":  # XTREME's UD-POS: seqeval's F1 over the tags first, and selected on
        assert list(results["de"])[0] == "f1" and "dev_f1" in results and "accuracy" in results["de"]
    assert "| de |" in (out / "results.md").read_text()


def test_filter_reads_each_xquad_test_question_beside_its_english_original(tmp_path, tiny_model_dir):
    """FILTER as its authors' code tests XQuAD (run_xqa.py pairs each test question with the English
    question of the same id): --test-input oracle on task xquad-squad, a few steps on SQuAD's translations."""
    data = released_xquad(tmp_path, translations=["ar", "de"])
    out = tmp_path / "run"
    run(tiny_model_dir, "xquad-squad", data, out, "--method", "filter", "--test-input", "oracle", "--no-alignment",
        "--max-length", "64", "--doc-stride", "16", "--eval-batch-size", "8")
    results = json.loads((out / "results.json").read_text())
    assert results["test_input"]["input"] == "oracle" and not results.get("unscored")
    assert {lang: results[lang]["n"] for lang in ("en", "ar", "de")} == {"en": 4, "ar": 4, "de": 4}
    assert all(0 <= results[lang][m] <= 1 for lang in ("en", "ar", "de") for m in ("f1", "exact_match"))


def with_filter_translations(data, task):
    """FILTER's translations as its udpos.zip and panx.zip hold them, in filter-translations/
    (download.py filter-translations): the English training segments into German, a line each, and
    German's test segments into English; none into Swahili (PAN-X's third language)."""
    folder = data / "filter-translations"
    folder.mkdir()
    english, german = (UD["en"] + [[("Hi", "INTJ"), ("there", "ADV")]], UD["de"]) if task == "udpos" else (PANX, PANX)
    train = {"udpos": ["Wir gehen nach Hause .", "Angela kann nicht gehen", "Hallo"], "panx": ["Angela Merkel besuchte Paris", ""]}[task]
    assert len(train) == len(english)  # a sentence a segment: these are short
    (folder / "train-en-de.tsv").write_text("\n".join(train) + "\n")
    (folder / "test-de-en.tsv").write_text("".join(" ".join(w for w, _ in s) + " (in English)\n" for s in german))
    return data


@pytest.mark.parametrize("task", ["udpos", "panx"])
def test_filter_and_its_student_run_on_xtremes_tagging_sets_beside_filter_s_translations(tmp_path, tiny_model_dir, task, capsys):
    """A few steps of FILTER, then of its self-teaching student, on XTREME's UD-POS and PAN-X with
    FILTER's translations: trained on (translation, English) pairs, each test text beside its
    translation; PAN-X's Swahili, which has none, is trained on nothing and tested beside itself
    where --missing-translations self says so, and refused otherwise."""
    from math import ceil

    from conftest import make_method
    from methods import Run
    from minxlt.text.tokenizer import Tokenizer
    data = xtreme_udpos(tmp_path / task) if task == "udpos" else xtreme_panx(tmp_path / task)
    langs = ("en", "de") if task == "udpos" else ("en", "de", "sw")
    for lang in langs:
        panx_file(data / f"test-{lang}.tsv", UD.get(lang, UD["en"]) if task == "udpos" else PANX)  # tagged, as download.py leaves them
    with_filter_translations(data, task)
    flags = ["--method", "filter", "--no-alignment", "--eval-batch-size", "8", "--test-input", "translation",
             "--test-translations", str(data / "filter-translations" / "test-{lang}-en.tsv")]
    if task == "panx":
        with pytest.raises(InputError, match=r"none in sw \(.*filter-translations/train-en-sw.tsv\).*--missing-translations self"):
            run(tiny_model_dir, task, data, tmp_path / "refused", *flags)
        flags += ["--missing-translations", "self"]
    else:
        flags += ["--target-langs", "de"]
    capsys.readouterr()
    run(tiny_model_dir, task, data, tmp_path / "filter", *flags)
    english = 3 if task == "udpos" else 2
    assert f"2 steps of 4 from {2 * english} training items" in capsys.readouterr().err  # English's own pairs and German's
    run(tiny_model_dir, task, data, tmp_path / "student", *flags, "--teacher", str(tmp_path / "filter" / "best"))
    records = [json.loads(line) for line in (tmp_path / "student" / "log.jsonl").read_text().splitlines()]
    assert all(r["kl"] > 0 and r["target"] == 0 for r in records if "loss" in r)  # lambda = 0: the words' KL alone (Eq. 6)
    for out in ("filter", "student"):
        results = json.loads((tmp_path / out / "results.json").read_text())
        assert results["test_input"]["input"] == "translation" and not results.get("unscored")
        words = {"en": 7, "de": 5} if task == "udpos" else {"en": 7, "de": 7, "sw": 7}
        assert {lang: results[lang]["n"] for lang in langs} == words
    # one epoch: as many pairs as English has sentences, as FILTER's run_xtag.py counts one for tagging
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    method = make_method("filter", Run(load_task(task, data, tokenizer=tokenizer), tokenizer, 48), "--epochs", "3", "--batch-size", "2",
                         *flags[flags.index("--test-input"):])
    items = method.training_items()
    assert method.phases(items)[0].steps == 3 * ceil(english / 2) and len(items) == 2 * english
