"""Readers (including their error paths on broken files), pairing, batching and the bundled corpus."""
import unicodedata

import pytest

import data
from conftest import SHARED_DATA
from levels import LEVELS
from minxlt import tasks
from minxlt.tasks import demo as demo_corpus


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


SIB_HEADER = "index_id\tcategory\ttext\n"


def test_sib200_reader(tmp_path):
    write(tmp_path / "xx" / "train.tsv", SIB_HEADER + "7\tsports\tThe match ended in a draw.\n12\thealth\tDrink water.\n")
    examples = list(tasks.each_sib200(tmp_path, "xx", "train"))
    assert [(e.id, e.label, e.text) for e in examples] == [("7", "sports", "The match ended in a draw."), ("12", "health", "Drink water.")]


def test_sib200_is_read_as_csv_quotes_it(tmp_path):
    # SIB-200's files are written by pandas: a text with quotes is put in quotes, its own quotes doubled
    write(tmp_path / "xx" / "train.tsv", SIB_HEADER + '7\tsports\t"""Hi,"" she said."\n8\thealth\tA 5" screen.\n')
    assert [e.text for e in tasks.each_sib200(tmp_path, "xx", "train")] == ['"Hi," she said.', 'A 5" screen.']


@pytest.mark.skipif(not (SHARED_DATA / "sib200").exists(), reason="needs ../shared/data/sib200 (not in a fresh clone)")
def test_real_sib200_quotes():
    english = {e.id: e.text for e in tasks.each_sib200(SHARED_DATA / "sib200", "eng_Latn", "train")}
    assert english["1239"].startswith('"She’s very cute and sings quite well, too," he said')
    assert not any(text.startswith('"""') or '""' in text for text in english.values())


@pytest.mark.parametrize("rows,message", [
    ("7\tsports\n", r"train.tsv:2: 2 columns, expected 3"),
    ("7\tsports\tok\n8\tcooking\tA recipe.\n", r"train.tsv:3: unknown label 'cooking'"),
    ("7\tsports\t \n", r"train.tsv:2: empty field"),
])
def test_sib200_bad_rows_name_file_and_line(tmp_path, rows, message):
    write(tmp_path / "xx" / "train.tsv", SIB_HEADER + rows)
    with pytest.raises(tasks.DataError, match=message):
        list(tasks.each_sib200(tmp_path, "xx", "train"))


def test_missing_header_is_not_skipped_silently(tmp_path):
    # a file without its header would otherwise lose its first example (xtreme #70)
    write(tmp_path / "xx" / "train.tsv", "7\tsports\tThe match ended.\n")
    with pytest.raises(tasks.DataError, match="train.tsv:1: header"):
        list(tasks.each_sib200(tmp_path, "xx", "train"))


@pytest.mark.skipif(not (SHARED_DATA / "sib200").exists(), reason="needs ../shared/data/sib200 (not in a fresh clone)")
def test_real_sib200_is_parallel():
    english = list(tasks.each_sib200(SHARED_DATA / "sib200", "eng_Latn", "train"))
    assert len(english) == 701 and {e.label for e in english} == set(tasks.SIB200_LABELS)
    thai = tasks.load_task("sib200", SHARED_DATA / "sib200", targets=["tha_Thai"], strict=True).train["tha_Thai"]
    assert len(thai) == 701  # every one paired with its English by id


def test_pawsx_translated_train_skips_and_counts_failed_rows(tmp_path, capsys):
    path = write(tmp_path / "de" / "translated_train.tsv", "id\tsentence1\tsentence2\tlabel\n"
                 "1\tEin Satz.\tEin Satz!\t1\n2\tNS\tNS\t0\n\n3\tZwei Sätze.\t\t0\n4\tGut.\tSchlecht.\t0\n")
    examples = list(tasks.each_pawsx(path, "de"))
    assert [e.id for e in examples] == ["1", "4"]
    assert "skipped 3 malformed or untranslated rows of 5" in capsys.readouterr().err


def test_pawsx_human_files_stop_on_bad_rows(tmp_path):
    path = write(tmp_path / "de" / "test.tsv", "id\tsentence1\tsentence2\tlabel\n1\tEin Satz.\t \t1\n")
    with pytest.raises(tasks.DataError, match="test.tsv:2: empty field"):
        list(tasks.each_pawsx(path, "de"))
    path = write(tmp_path / "de" / "dev.tsv", "id\tsentence1\tsentence2\tlabel\n1\tA.\tB.\t2\n")
    with pytest.raises(tasks.DataError, match="dev.tsv:2: unknown label '2'"):
        list(tasks.each_pawsx(path, "de"))


PAWSX_HEADER = "id\tsentence1\tsentence2\tlabel\n"


def test_pawsx_human_dev_and_test_keep_their_ns_rows_as_xtreme_does(tmp_path, capsys):
    """The release's human dev_2k.tsv and test_2k.tsv hold a few rows whose sentence is NS, a sentence
    its translators left (google-research-datasets/paws issue 15: de dev_2k.tsv, id 684); XTREME's
    pawsx_preprocess keeps every row, and the papers scored them."""
    rows = {"en": ["684\tThe road continues west through 5th Street as Delphos .\tThe road continues as Delphos "
                   "further west through 5th Street .\t1", "685\tA b .\tB a .\t0"],
            "de": ["684\tDie Straße verläuft weiter nach Westen über die 5. Straße nach Delphos.\tNS\t0",
                   "685\tA b.\tB a.\t0"]}
    for lang, lines in rows.items():
        for name in (["train.tsv"] if lang == "en" else []) + ["dev_2k.tsv", "test_2k.tsv"]:
            write(tmp_path / lang / name, PAWSX_HEADER + "\n".join(lines) + "\n")
    task = tasks.load_task("pawsx", tmp_path)
    assert [(e.id, e.pair, e.label) for e in task.test["de"]] == [("684", "NS", "0"), ("685", "B a.", "0")]
    assert len(task.dev["de"]) == 2
    err = capsys.readouterr().err
    assert "de/test_2k.tsv: 1 of 2 rows have a sentence 'NS'" in err and "de/dev_2k.tsv: 1 of 2 rows" in err
    assert "en/test_2k.tsv" not in err


def test_xnli_as_released_with_its_empty_parse_columns(tmp_path):
    """XNLI-1.0's xnli.{dev,test}.tsv: 19 columns, the four parse columns empty in every row."""
    header = ("language\tgold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\t"
              "sentence1\tsentence2\tpromptID\tpairID\tgenre\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\t"
              "sentence1_tokenized\tsentence2_tokenized\tmatch\n")
    row = ("bg\tneutral\t\t\t\t\tИ той каза: Мамо, у дома съм.\tТой се обади на майка си.\t1\t1\tfacetoface\t"
           "neutral\tcontradiction\tneutral\tneutral\tneutral\tИ той каза : Мамо , у дома съм .\t"
           "Той се обади на майка си .\tTrue\n")
    second = row.replace("\t1\t1\t", "\t2\t2\t").replace("bg\tneutral", "bg\tentailment")
    path = write(tmp_path / "xnli.test.tsv", header + row + second)
    assert [(e.id, e.label, e.pair) for e in tasks.read_xnli(path, "bg")] == [
        ("1", "neutral", "Той се обади на майка си."), ("2", "entailment", "Той се обади на майка си.")]
    write(path, header + row.replace("Той се обади на майка си.\t", "\t", 1))
    with pytest.raises(tasks.DataError, match="xnli.test.tsv:2: empty field"):
        tasks.read_xnli(path, "bg")


def test_xnli_readers(tmp_path, capsys):
    columns = "language\tgold_label\tsentence1_binary_parse\tsentence1\tsentence2\tpromptID\tpairID"
    path = write(tmp_path / "xnli.test.tsv", columns + "\nde\tneutral\t(x)\tEr schläft.\tEr träumt.\t1\t10\n"
                 "en\tneutral\t(x)\tHe sleeps.\tHe dreams.\t1\t10\nde\tentailment\t(x)\tJa.\tJa!\t2\t11\n")
    german = tasks.read_xnli(path, "de")
    assert [(e.id, e.label, e.text, e.pair) for e in german] == [("10", "neutral", "Er schläft.", "Er träumt."), ("11", "entailment", "Ja.", "Ja!")]
    train = write(tmp_path / "multinli.train.de.tsv", "premise\thypo\tlabel\nA.\tB.\tcontradictory\nkaputt\n\tC.\tneutral\nD.\tE.\tentailment\n")
    examples = list(tasks.each_xnli_mt(train, "de"))
    assert [(e.id, e.label) for e in examples] == [("2", "contradiction"), ("5", "entailment")]  # ids are line numbers
    assert "skipped 2" in capsys.readouterr().err


def test_xsid_reader(tmp_path):
    path = write(tmp_path / "de.valid.conll", "# id = 1\n# text-en = Is it going to rain today?\n# text = Regnet es heute?\n"
                 "# intent = weather/find\n1\tRegnet\tweather/find\tB-weather/attribute\n2\tes\tweather/find\tO\n"
                 "3\theute\tweather/find\tB-datetime\n4\t?\tweather/find\tO\n\n")
    [example] = tasks.read_xsid(path, "de")
    assert example.id == "1" and example.source_text == "Is it going to rain today?" and example.label == "weather/find"
    assert example.words == ["Regnet", "es", "heute", "?"] and example.tags == ["B-weather/attribute", "O", "B-datetime", "O"]
    write(path, "# intent = x\n1\tRegnet\tx\n")
    with pytest.raises(tasks.DataError, match="de.valid.conll:2: 3 columns"):
        tasks.read_xsid(path, "de")
    write(path, "# intent = x\n1\tRegnet\tx\tweather\n")
    with pytest.raises(tasks.DataError, match="slot label 'weather'"):
        tasks.read_xsid(path, "de")


@pytest.mark.skipif(not (SHARED_DATA / "xsid").exists(), reason="needs ../shared/data/xsid (not in a fresh clone)")
def test_real_xsid_targets_pair_with_english_by_position():
    english = tasks.read_xsid(SHARED_DATA / "xsid" / "en.valid.conll", "en")
    german = tasks.read_xsid(SHARED_DATA / "xsid" / "de.valid.conll", "de")
    assert len(english) == len(german) == 300 and len({e.text for e in english}) < 300  # English repeats itself
    task = tasks.load_task("xsid", SHARED_DATA / "xsid", targets=["de"], strict=True)  # training ids paired strictly
    for split in (task.train, task.dev):
        sources = {e.id: e for e in split["en"]}
        assert len(split["de"]) == len(sources) and all(sources[t.id].text == t.source_text for t in split["de"])


CONLLU = ("# sent_id = n01\n# parallel_id = pud/n01\n# text = Wir gehen zum Markt.\n"
          "1\tWir\twir\tPRON\t_\t_\t2\tnsubj\t_\t_\n"
          "2\tgehen\tgehen\tVERB\t_\t_\t0\troot\t_\t_\n"
          "3-4\tzum\t_\t_\t_\t_\t_\t_\t_\t_\n"
          "3\tzu\tzu\tADP\t_\t_\t5\tcase\t_\t_\n"
          "4\tdem\tder\tDET\t_\t_\t5\tdet\t_\t_\n"
          "4.1\tgehen\tgehen\tVERB\t_\t_\t_\t_\t2:conj\t_\n"
          "5\tMarkt\tMarkt\tNOUN\t_\t_\t2\tobl\t_\tSpaceAfter=No\n"
          "6\t.\t.\tPUNCT\t_\t_\t2\tpunct\t_\t_\n\n"
          "# sent_id = n02\n# english_text = Yes.\n1\tJa\tja\tINTJ\t_\t_\t0\troot\t_\t_\n\n")


def test_conllu_reader_reads_syntactic_words(tmp_path):
    path = write(tmp_path / "de_pud-ud-test.conllu", CONLLU)
    first, second = tasks.read_conllu(path, "de")
    # the multi-word token "zum" is read as its words "zu dem"; the empty node 4.1 is left out
    assert first.words == ["Wir", "gehen", "zu", "dem", "Markt", "."]
    assert first.tags == ["PRON", "VERB", "ADP", "DET", "NOUN", "PUNCT"]
    assert (first.id, first.text) == ("n01", "Wir gehen zum Markt.")
    assert (second.id, second.words, second.source_text) == ("n02", ["Ja"], "Yes.")  # no parallel_id: the sent_id


@pytest.mark.parametrize("line,message", [
    ("1\tJa\tja\tINTJ\t_\t_\t0\troot\t_\n", r"\.conllu:2: 9 columns, expected 10"),
    ("1\tJa\tja\tYES\t_\t_\t0\troot\t_\t_\n", r"\.conllu:2: UPOS tag 'YES'"),
    ("a\tJa\tja\tINTJ\t_\t_\t0\troot\t_\t_\n", r"\.conllu:2: word index 'a'"),
])
def test_conllu_bad_rows_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path / "xx.conllu", "# sent_id = 1\n" + line)
    with pytest.raises(tasks.DataError, match=message):
        tasks.read_conllu(path, "xx")
    write(path, "# text = Ja\n1\tJa\tja\tINTJ\t_\t_\t0\troot\t_\t_\n")
    with pytest.raises(tasks.DataError, match=r"xx\.conllu:1: sentence without '# sent_id'"):
        tasks.read_conllu(path, "xx")


@pytest.mark.skipif(not (SHARED_DATA / "ud_pud").exists(), reason="needs ../shared/data/ud_pud (not in a fresh clone)")
def test_real_ud_pud_split_is_the_same_in_every_language():
    task = tasks.load_task("udpos", SHARED_DATA / "ud_pud")
    assert task.level == "word" and LEVELS[task.level].metric(task) == "accuracy" and task.source == "en"
    ids = {split: {lang: {e.id for e in getattr(task, split)[lang]} for lang in tasks.UDPOS_LANGS}
           for split in ("train", "dev", "test")}
    for split, by_lang in ids.items():
        assert all(by_lang[lang] == by_lang["en"] for lang in tasks.UDPOS_LANGS), split  # one split for every language
    assert not ids["train"]["en"] & ids["test"]["en"] and not ids["dev"]["en"] & ids["test"]["en"]
    assert not ids["train"]["en"] & ids["dev"]["en"]
    assert sum(len(ids[s]["en"]) for s in ids) == 1000 and 150 <= len(ids["test"]["en"]) <= 250
    german = {e.id: e for e in task.test["de"]}
    assert all(len(e.words) == len(e.tags) > 0 for e in german.values())


def test_task_metric():
    metric = lambda task: LEVELS[task.level].metric(task)
    assert metric(tasks.load_task("demo")) == "accuracy" and metric(tasks.load_task("demo-slots")) == "f1"


class Given(data.Layout):
    """Training examples given in memory, as if read from <lang>.tsv."""
    langs, needs_data = [], False

    def __init__(self, examples):
        self.examples = examples
        super().__init__(None, "en")

    def read(self, lang, split):
        return self.examples[lang]

    def split_file(self, lang, split):
        return f"{lang}.tsv"


def test_pairing_refuses_a_label_mismatch_and_warns_of_what_does_not_pair(capsys):
    source = [data.Example("a", "en", "x", label="p", where="en.tsv:2"), data.Example("b", "en", "y", label="q", where="en.tsv:3"),
              data.Example("c", "en", "w", label="q", where="en.tsv:4")]

    def train(target, strict=False):  # the source's and a target's training split, read from <lang>.tsv
        return data.TrainSplit("t", Given({"en": source, **target}), "en", ["en", *target], strict)

    mismatch = [data.Example("a", "de", "x", label="p"), data.Example("b", "de", "y", label="p", where="de.tsv:3")]
    with pytest.raises(ValueError, match=r"^de.tsv:3: the translation of 'b' is labelled 'p', and its source \(en.tsv:3\) 'q'"):
        train({"de": mismatch})["de"]
    targets = [data.Example("a", "de", "x", label="p"), data.Example("b", "de", "y", label="q"), data.Example("z", "de", "?", label="p")]
    assert [e.id for e in train({"fr": targets})["fr"]] == ["a", "b"]
    warning = capsys.readouterr().err
    assert warning == ("warning: fr.tsv: 1 of its 3 examples have no source example of the same id (first: 'z'): they are left out; "
                       "1 of the 3 source examples have no translation in it (first: 'c') (--strict-data refuses this)\n")
    train({"fr": targets})["fr"]
    assert capsys.readouterr().err == ""  # once per file
    with pytest.raises(ValueError, match=r"^fr.tsv does not pair with the source's training examples by id: 1 of its 3"):
        train({"fr": targets}, strict=True)["fr"]
    with pytest.raises(ValueError, match=r"most of it does not pair, so it is refused"):
        train({"it": targets[2:]})["it"]


@pytest.mark.parametrize("group_by_length", [False, True])
def test_every_example_once_per_epoch(group_by_length):
    lengths = [(i * 7) % 23 + 1 for i in range(101)]
    for epoch in range(3):
        batches = data.epoch_batches(lengths, 8, epoch, seed=1, group_by_length=group_by_length)
        assert sorted(i for b in batches for i in b) == list(range(101))
        assert batches == data.epoch_batches(lengths, 8, epoch, seed=1, group_by_length=group_by_length)  # same on every rank
    assert data.epoch_batches(lengths, 8, 0, 1) != data.epoch_batches(lengths, 8, 1, 1)


def test_length_grouping_reduces_padding():
    lengths = [(i * 37) % 97 + 1 for i in range(400)]
    padding = lambda batches: sum(max(lengths[i] for i in b) * len(b) - sum(lengths[i] for i in b) for b in batches)
    assert padding(data.epoch_batches(lengths, 16, 0, 0, group_by_length=True)) < padding(data.epoch_batches(lengths, 16, 0, 0)) / 3
    assert data.padding_share([3, 1, 2, 2], [[0, 1], [2, 3]]) == pytest.approx(2 / 10)  # (3 + 3) + (2 + 2) slots, 2 of them padding


@pytest.mark.parametrize("size,world", [(8, 2), (7, 2), (5, 4), (2, 4), (1, 3)])
def test_shards_are_disjoint_and_cover_the_batch(size, world):
    batch = list(range(100, 100 + size))
    shards = [data.shard(batch, rank, world) for rank in range(world)]
    assert len({len(index) for index, _ in shards}) == 1  # every rank runs the same number of examples
    counted = [i for index, weights in shards for i, w in zip(index, weights) if w == 1.0]
    assert sorted(counted) == batch
    assert all(w in (0.0, 1.0) for _, weights in shards for w in weights)


def test_demo_corpus():
    splits = {split: demo_corpus.build(split) for split in ("train", "dev", "test")}
    assert len(splits["train"]["en"]) >= 300 and len(demo_corpus.LANGS) - 1 >= 6
    scripts = {unicodedata.name(ch).split()[0] for lang in demo_corpus.LANGS for ch in splits["test"][lang][0].text if ch.isalpha()}
    assert {"CYRILLIC", "CJK", "DEVANAGARI"} <= scripts  # three non-Latin scripts
    for split, by_lang in splits.items():
        ids = [e.id for e in by_lang["en"]]
        assert len(set(ids)) == len(ids)
        for lang, examples in by_lang.items():
            assert [e.id for e in examples] == ids and [e.label for e in examples] == [e.label for e in by_lang["en"]]
            for e in examples:
                assert len(e.words) == len(e.tags) and e.text
                for previous, tag in zip(["O"] + e.tags, e.tags):  # valid BIO: I- continues its own type
                    assert tag == "O" or tag[:2] == "B-" or previous[2:] == tag[2:], (e.id, lang, e.tags)
                # the same slots in every language, in any order
                assert sorted(t for t in e.tags if t[0] == "B") == sorted(t for t in by_lang["en"][ids.index(e.id)].tags if t[0] == "B")
    templates = {split: {e.id.rsplit(".", 1)[0] for e in by_lang["en"]} for split, by_lang in splits.items()}
    assert not templates["train"] & templates["test"] and not templates["dev"] & templates["test"]


def test_demo_slot_brackets():
    train = {lang: {e.id: e for e in examples} for lang, examples in demo_corpus.build("train").items()}
    german = train["de"]["directions.1.1"]  # "bring mich {destination}": "zum [Museum]"
    assert list(zip(german.words, german.tags)) == [("bring", "O"), ("mich", "O"), ("zum", "O"), ("Museum", "B-destination")]
    french = train["fr"]["music.0.3"]  # "mets {genre}": "de la [musique classique]"
    assert french.tags == ["O", "O", "O", "B-genre", "I-genre"] and french.words[-2:] == ["musique", "classique"]
    assert train["es"]["weather.0.1"].words[:2] == ["¿", "qué"] and train["es"]["weather.0.1"].words[-2:] == ["semana", "?"]
    assert train["es"]["weather.0.1"].text == "¿qué tiempo hará en Londres la próxima semana?"
    assert train["zh"]["weather.0.1"].words[-2:] == ["怎么样", "？"] and train["zh"]["weather.0.1"].text == "下周伦敦的天气怎么样？"


def test_load_task_checks_languages():
    with pytest.raises(ValueError, match="task demo has no language\\(s\\) xx"):
        tasks.load_task("demo", targets=["de", "xx"])
    with pytest.raises(ValueError, match="needs --data"):
        tasks.load_task("sib200")
    task = tasks.load_task("demo", targets=["ru"])
    assert task.source == "en" and task.targets == ["ru"] and set(task.test) == {"en", "ru"}


def test_a_tasks_languages_are_those_its_folder_holds(tmp_path):
    # any of SIB-200's 205 languages, and UD PUD's 20: what the folder holds, not what a list names
    for lang in ("eng_Latn", "zul_Latn", "deu_Latn"):
        for split in ("train", "dev", "test"):
            write(tmp_path / "sib" / lang / f"{split}.tsv", SIB_HEADER + "1\tsports\tA match.\n2\thealth\tWater.\n")
    task = tasks.load_task("sib200", tmp_path / "sib")
    assert task.source == "eng_Latn" and task.targets == ["deu_Latn", "zul_Latn"]  # the released order, then the others by name
    assert tasks.load_task("sib200", tmp_path / "sib", targets=["zul_Latn"]).targets == ["zul_Latn"]
    with pytest.raises(tasks.InputError, match=r"task sib200 has no language\(s\) fra_Latn in .*; it has eng_Latn, deu_Latn, zul_Latn"):
        tasks.load_task("sib200", tmp_path / "sib", targets=["fra_Latn"])
    sentence = "# sent_id = {}\n1\tWe\twe\tPRON\t_\t_\t0\t_\t_\t_\n\n"
    for lang in ("en", "ko", "pt"):
        write(tmp_path / "ud" / f"{lang}_pud-ud-test.conllu", "".join(sentence.format(f"n{i:03d}") for i in range(40)))
    assert tasks.load_task("udpos", tmp_path / "ud").targets == ["ko", "pt"]


def test_parallel_lines(tmp_path):
    en = write(tmp_path / "corpus.en", "Good morning.\nThank you.\n")
    de = write(tmp_path / "corpus.de", "Guten Morgen.\nDanke.\n")
    english, german = tasks.read_parallel_lines(en, de, "en", "de")
    assert [(a.id, a.text, b.text) for a, b in zip(english, german)] == [("1", "Good morning.", "Guten Morgen."), ("2", "Thank you.", "Danke.")]
    write(de, "Guten Morgen.\n")
    with pytest.raises(tasks.DataError, match="corpus.de: 1 lines against 2 in .*corpus.en: not line-aligned"):
        tasks.read_parallel_lines(en, de, "en", "de")
    write(de, "Guten Morgen.\n\n")
    with pytest.raises(tasks.DataError, match="corpus.de:2: empty line"):
        tasks.read_parallel_lines(en, de, "en", "de")


@pytest.mark.skipif(not (SHARED_DATA / "tatoeba").exists(), reason="needs ../shared/data/tatoeba (not in a fresh clone)")
def test_real_tatoeba():
    english, german = tasks.read_tatoeba(SHARED_DATA / "tatoeba", "deu")
    assert len(english) == len(german) == 1000 and german[0].lang == "deu"


def test_word_labels_sit_on_first_sub_tokens(tiny_model_dir):
    from minxlt.text.tokenizer import Tokenizer
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    bare_space = tokenizer.sp.piece_to_id("\u2581") + 1
    words = ["Reservierungsbestätigungen", "für", "\u200b", "伦敦", "heute"]  # a long word, a vanishing one, CJK
    example = data.Example("1", "de", " ".join(words), words=words, tags=["B-x", "O", "O", "B-y", "I-y"])
    [item] = data.encode_tagged([example], tokenizer, ["O", "B-x", "B-y", "I-y"], max_length=64)
    ids, word_ids = tokenizer.encode_words(words)
    scored = dict(item.extra["scored"])
    assert 2 not in scored and set(scored) == {0, 1, 3, 4}  # the zero-width space has no token
    for w, t in scored.items():
        assert word_ids[t] == w and ids[t] != bare_space and all(word_ids[u] != w or ids[u] == bare_space for u in range(t))
    assert [item.label[t] for t in sorted(scored.values())] == [1, 0, 2, 3]
    assert sum(l != -100 for l in item.label) == 4
    [short] = data.encode_tagged([example], tokenizer, ["O", "B-x", "B-y", "I-y"], max_length=4)
    assert len(short.ids) == 4 and max(w for w, _ in short.extra["scored"]) < 2  # later words truncated away


@pytest.mark.parametrize("name,text,read,message", [
    ("xnli.test.tsv", "language\tgold_label\tsentence1\tsentence2\tpairID\nde\tneutral\tA\tB\t7\nen\tneutral\tA\tB\t7\nde\tneutral\tC\tD\t7\n",
     lambda p: tasks.read_xnli(p, "de"), r"xnli.test.tsv:4: de pairID '7' is used twice in the file, on lines 2 and 4"),
    ("test.tsv", "id\tsentence1\tsentence2\tlabel\n3\tA\tB\t1\n3\tC\tD\t0\n",
     lambda p: list(tasks.each_pawsx(p, "de")), r"test.tsv:3: id '3' is used twice in the file, on lines 2 and 3"),
    ("de_pud-ud-test.conllu", CONLLU + "\n" + CONLLU, lambda p: tasks.read_conllu(p, "de"),
     r"de_pud-ud-test.conllu:18: sentence id 'n01' is used twice in the file, on lines 1 and 18"),
    ("extra.jsonl", '{"id": 1, "lang": "de", "text": "a", "label": "x"}\n{"id": 1, "lang": "fr", "text": "b", "label": "x"}\n'
     '{"id": 1, "lang": "de", "text": "c", "label": "x"}\n', lambda p: tasks.read_jsonl_examples(p, ["x"]),
     r"extra.jsonl:3: \(lang, id\) \('de', '1'\) is used twice in the file, on lines 1 and 3"),
])
def test_every_reader_refuses_an_id_used_twice(tmp_path, name, text, read, message):
    with pytest.raises(tasks.DataError, match=message):
        read(write(tmp_path / name, text))
