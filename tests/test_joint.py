"""Joint intent classification and slot filling (xSID): the data, the head, the summed loss, the
scores, and a run of every method on a small xSID-format corpus."""
import json

import pytest
import torch
import torch.nn.functional as F

import data
import levels
from conftest import SHARED_DATA, make_run
from losses import task_loss
from minxlt import tasks
from minxlt.errors import InputError
from model import JointHead

SLOTS = ["O", "B-datetime", "I-datetime", "B-location", "I-location"]
INTENTS = ["weather/find", "alarm/set_alarm", "alarm/cancel_alarm"]


def test_joint_head_is_two_softmaxes_over_their_own_labels():
    head = JointHead(8, len(SLOTS), len(INTENTS), dropout=0.0).eval()
    hidden = torch.randn(3, 6, 8)
    logits = head(hidden)
    assert logits.shape == (3, 6, len(SLOTS) + len(INTENTS))
    p = logits.softmax(-1)
    intent = head.intent(hidden).softmax(-1)      # the intent head alone, over <s>
    slots = head.slots(hidden).softmax(-1)        # the slot head alone, per token
    assert torch.allclose(p[:, 0, len(SLOTS):], intent, atol=1e-6) and torch.all(p[:, 0, :len(SLOTS)] == 0)
    assert torch.allclose(p[:, 1:, :len(SLOTS)], slots[:, 1:], atol=1e-6) and torch.all(p[:, 1:, len(SLOTS):] == 0)


def test_joint_loss_is_intent_loss_plus_slot_loss():
    head = JointHead(8, len(SLOTS), len(INTENTS), dropout=0.0)
    hidden = torch.randn(4, 7, 8)
    logits = head(hidden)
    slot_labels = torch.randint(0, len(SLOTS), (4, 7))
    slot_labels[:, 0] = -100
    slot_labels[torch.rand(4, 7) < 0.4] = -100     # tokens that are not a word's first piece
    intents = torch.tensor([0, 2, 1, 2])
    labels = slot_labels.clone()
    labels[:, 0] = len(SLOTS) + intents            # data.encode_tagged puts the intent on <s>
    # Independently: a sentence classifier's cross-entropy plus a tagger's, each over its own labels.
    intent_loss = F.cross_entropy(head.intent(hidden), intents)
    scored = slot_labels != -100
    slot_loss = F.cross_entropy(head.slots(hidden)[scored], slot_labels[scored])
    assert task_loss(logits, labels).item() == pytest.approx((intent_loss + slot_loss).item(), abs=1e-5)
    # A weight of 0 removes a sentence from both means.
    w = torch.tensor([1.0, 1.0, 0.0, 1.0])
    keep = w.bool()
    intent_loss = F.cross_entropy(head.intent(hidden)[keep], intents[keep])
    slot_loss = F.cross_entropy(head.slots(hidden)[keep][scored[keep]], slot_labels[keep][scored[keep]])
    assert task_loss(logits, labels, w).item() == pytest.approx((intent_loss + slot_loss).item(), abs=1e-5)


def test_encode_tagged_puts_the_intent_on_s(tiny_model_dir):
    from minxlt.text.tokenizer import Tokenizer
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    example = data.Example(id="1", lang="en", text="wake me at seven", label="alarm/set_alarm",
                           words=["wake", "me", "at", "seven"], tags=["O", "O", "O", "B-datetime"])
    [item] = data.encode_tagged([example], tokenizer, SLOTS, 64, INTENTS)
    assert item.label[0] == len(SLOTS) + INTENTS.index("alarm/set_alarm")
    scored = dict(item.extra["scored"])
    assert [item.label[scored[w]] for w in range(4)] == [0, 0, 0, SLOTS.index("B-datetime")]
    assert sum(label != -100 for label in item.label) == 5  # the intent and one label per word
    [plain] = data.encode_tagged([example], tokenizer, SLOTS, 64)  # a tagging task leaves <s> unscored
    assert plain.label[0] == -100 and plain.label[1:] == item.label[1:]
    bad = data.Example(id="2", lang="en", text="x", label="music/play", words=["x"], tags=["O"])
    with pytest.raises(ValueError, match="intent 'music/play'"):
        data.encode_tagged([bad], tokenizer, SLOTS, 64, INTENTS)


def test_translations_take_the_id_of_their_english_text():
    english = [data.Example(id=str(i), lang="en", text=t) for i, t in enumerate(["a", "b", "a", "c"], start=1)]
    target = lambda id, text: data.Example(id=id, lang="lt", text=text.upper(), source_text=text)
    # Right ids stay; a wrong id is replaced by the first free English sentence with that text,
    # and a repeated English text is taken once per translation.
    fixed = tasks.match_source_text(english, [target("1", "a"), target("1", "c"), target("9", "a"), target("2", "b")], "lt.valid.conll")
    assert [(t.id, t.text) for t in fixed] == [("1", "A"), ("4", "C"), ("3", "A"), ("2", "B")]
    with pytest.raises(tasks.DataError, match="lt.valid.conll: sentence '# id = 7'.*'d'"):
        tasks.match_source_text(english, [target("7", "d")], "lt.valid.conll")
    with pytest.raises(tasks.DataError, match="'# id = 5'"):  # a third "a" has no English sentence left
        tasks.match_source_text(english, [target("1", "a"), target("3", "a"), target("5", "a")], "lt.valid.conll")


def test_xsid_reader_checks_labels(tmp_path):
    path = tmp_path / "en.valid.conll"
    path.write_text("# text = play jazz\n# intent = PlayMusic\n1\tplay\tPlayMusic\tO\n2\tjazz\tPlayMusic\tB-genre\n\n")
    with pytest.raises(tasks.DataError, match="en.valid.conll:1: unknown label 'PlayMusic'"):
        tasks.read_xsid(path, "en", INTENTS, SLOTS)
    with pytest.raises(tasks.DataError, match="en.valid.conll:4: unknown label 'B-genre'"):
        tasks.read_xsid(path, "en", ["PlayMusic"], SLOTS)
    assert tasks.read_xsid(path, "en", tasks.XSID_INTENTS, tasks.XSID_SLOTS)[0].tags == ["O", "B-genre"]


class Constant(torch.nn.Module):
    """A stand-in model that predicts one intent and "O" for every word."""

    def __init__(self, intent):
        super().__init__()
        self.intent = intent

    def forward(self, ids, mask):
        logits = torch.full((*ids.shape, len(SLOTS) + len(INTENTS)), -5.0)
        logits[:, 1:, SLOTS.index("O")] = 5.0
        logits[:, 0, len(SLOTS) + self.intent] = 5.0
        return logits, None


def test_joint_scores_against_a_direct_count(tiny_model_dir):
    from minxlt.text.tokenizer import Tokenizer
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    rows = [("weather/find", ["rain", "today"], ["O", "B-datetime"]), ("weather/find", ["is", "it", "hot"], ["O", "O", "O"]),
            ("alarm/set_alarm", ["wake", "me"], ["O", "O"]), ("weather/find", ["rain", "in", "Oslo"], ["O", "O", "B-location"])]
    examples = [data.Example(id=str(i), lang="en", text=" ".join(w), label=l, words=w, tags=t) for i, (l, w, t) in enumerate(rows)]
    run = make_run(SLOTS, "word", tokenizer, INTENTS)
    scores = run.level.score(lambda ids, mask: Constant(0)(ids, mask)[0], "text", {"en": examples}, run)["en"]
    # "weather/find" and all "O": intents right in rows 0, 1 and 3, every slot right in rows 1 and 2.
    assert scores["intent_accuracy"] == 3 / 4 and scores["exact_match"] == 1 / 4 and scores["n"] == 4
    assert scores["slot_f1"] == 0.0 and scores["word_accuracy"] == 8 / 10
    assert list(scores)[:3] == ["intent_accuracy", "slot_f1", "exact_match"]


def write_xsid(directory, lang, sentences, split):
    """An xSID-format file: targets carry '# id' and '# text-en', as in the real data."""
    blocks = []
    for i, (intent, words, tags, english) in enumerate(sentences, start=1):
        head = "" if lang == "en" else f"# id = {i}\n# text-en = {english}\n"
        rows = "".join(f"{j}\t{w}\t{intent}\t{t}\n" for j, (w, t) in enumerate(zip(words, tags), start=1))
        blocks.append(f"{head}# text = {' '.join(words)}\n# intent = {intent}\n{rows}")
    (directory / f"{lang}.{split}.conll").write_text("\n".join(blocks) + "\n", encoding="utf-8")


@pytest.fixture
def tiny_xsid(tmp_path):
    """Two sentences, each repeated, in English and German: a model can learn them exactly."""
    en = [("weather/find", ["weather", "today"], ["O", "B-datetime"]), ("alarm/set_alarm", ["wake", "me", "up"], ["O", "O", "O"])]
    de = [("weather/find", ["Wetter", "heute"], ["O", "B-datetime"]), ("alarm/set_alarm", ["weck", "mich"], ["O", "O"])]
    for split, n in (("valid", 40), ("test", 4)):
        write_xsid(tmp_path, "en", [(*en[i % 2], None) for i in range(n)], split)
        write_xsid(tmp_path, "de", [(*de[i % 2], " ".join(en[i % 2][1])) for i in range(n)], split)
    return tmp_path


def test_xsid_task_from_files(tiny_xsid):
    task = tasks.load_task("xsid", tiny_xsid, targets=["de"])
    assert task.intents == list(tasks.XSID_INTENTS) and task.labels == list(tasks.XSID_SLOTS)
    assert levels.LEVELS[task.level].metric(task) == "exact_match"
    train_ids, dev_ids = {e.id for e in task.train["en"]}, {e.id for e in task.dev["en"]}
    assert train_ids and dev_ids and not train_ids & dev_ids and len(train_ids | dev_ids) == 40
    assert {e.id for e in task.train["de"]} == train_ids and len(task.test["de"]) == 4


@pytest.mark.parametrize("method", ["translate-train", "xeroalign", "filter", "xmixup"])
def test_xsid_runs_end_to_end(tiny_xsid, tiny_model_dir, tmp_path, method):
    import train
    common = ["--model", str(tiny_model_dir), "--task", "xsid", "--data", str(tiny_xsid), "--target-langs", "de",
              "--batch-size", "8", "--eval-every", "10", "--lr", "3e-3", "--no-alignment"]
    extra = []
    if method == "xmixup":  # soft slot labels of the translations from a zero-shot model
        train.main(common + ["--method", "zero-shot", "--max-steps", "10", "--no-test", "--out", str(tmp_path / "teacher")])
        extra = ["--teacher", str(tmp_path / "teacher" / "best"), "--mixup-layer", "2"]  # the tiny model has 2 layers
    out = tmp_path / method
    train.main(common + ["--method", method, "--max-steps", "80" if method == "translate-train" else "4", "--out", str(out)] + extra)
    results = json.loads((out / "results.json").read_text())
    for lang in ("en", "de"):
        assert 0 <= results[lang]["intent_accuracy"] <= 1 and 0 <= results[lang]["slot_f1"] <= 1
        assert results[lang]["exact_match"] <= results[lang]["intent_accuracy"] and results[lang]["n"] == 4
    if method == "translate-train":  # learnt: two sentences per language
        assert results["en"]["exact_match"] == results["de"]["exact_match"] == 1.0
    info = json.loads((out / "best" / "task.json").read_text())
    assert info["head_style"] == "joint" and info["intents"] == list(tasks.XSID_INTENTS)


def test_contrastive_methods_refuse_word_tasks(tiny_xsid, tiny_model_dir, tmp_path):
    import train
    with pytest.raises(InputError, match="labels words"):
        train.main(["--model", str(tiny_model_dir), "--task", "xsid", "--data", str(tiny_xsid), "--target-langs", "de", "--method", "contrastive",
                    "--out", str(tmp_path / "run")])


@pytest.mark.skipif(not (SHARED_DATA / "xsid").exists(), reason="needs ../shared/data/xsid (not in a fresh clone)")
def test_real_xsid_split_and_pairing():
    task = tasks.load_task("xsid", SHARED_DATA / "xsid")
    assert [task.source] + task.targets == tasks.XSID_LANGS
    english = {e.id: e.text for split in (task.train, task.dev) for e in split["en"]}
    assert len(english) == 300 and not {e.id for e in task.train["en"]} & {e.id for e in task.dev["en"]}
    english_test = {e.id: e.text for e in task.test["en"]}
    for lang in task.targets:
        assert len(task.test[lang]) == (250 if lang == "ja" else 500)
        # FILTER and X-Mixup pair each test sentence with its English original by id
        assert all(english_test[e.id] == e.source_text for e in task.test[lang])
        for split in (task.train, task.dev):  # Lithuanian's '# id' lines are wrong; '# text-en' pairs it
            assert all(english[e.id] == e.source_text for e in split[lang])
            assert {e.id for e in split[lang]} <= {e.id for e in split["en"]}
    assert sum(len(task.train[lang]) for lang in task.targets) == 11 * 244 + 118
