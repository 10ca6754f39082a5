"""Extractive QA: answer scores against hand computations, windows and offsets, the span losses
against loops over positions, and XQuAD runs end to end for every method."""
import collections
import functools
import json
import math
import random
import re
import string
import sys
import unicodedata

import pytest
import torch

import data
from conftest import SHARED_DATA, make_run
from levels import LEVELS
from losses import position_logits, self_teaching_loss, span_loss
from minxlt import tasks
from minxlt.errors import InputError
from minxlt.tasks import qa

# --- exact match and F1 ---------------------------------------------------------------------------

@pytest.mark.parametrize("lang,prediction,golds,squad,mlqa", [
    # (exact match, F1) by SQuAD's normalisation and by MLQA's, worked out by hand
    ("en", "the Denver Broncos", ["Denver Broncos"], (1, 1), (1, 1)),
    ("en", "Denver Broncos won", ["the Denver Broncos"], (0, 0.8), (0, 0.8)),          # P 2/3, R 1
    ("en", "Broncos", ["Panthers", "Denver Broncos"], (0, 2 / 3), (0, 2 / 3)),          # the better gold: P 1, R 1/2
    ("de", "der Vertrag", ["Vertrag"], (0, 2 / 3), (1, 1)),                              # German article: MLQA only
    ("es", "la ciudad", ["ciudad"], (0, 2 / 3), (1, 1)),
    ("ar", "الكتاب", ["كتاب"], (0, 0), (1, 1)),                                          # al- removed by MLQA
    ("ru", "«Москва»", ["Москва"], (0, 0), (1, 1)),                                      # « » are not ASCII punctuation
    ("zh", "北京。", ["北京"], (0, 0), (1, 1)),
    ("zh", "北京大学", ["北京"], (0, 0), (0, 2 / 3)),                                   # characters: P 2/4, R 1
    ("zh", "東京", ["Tokyo (東京)"], (0, 2 / 3), (0, 0.8)),                            # 東 京 of tokyo 東 京: P 1, R 2/3
    ("en", "東京", ["Tokyo (東京)"], (0, 2 / 3), (0, 2 / 3)),                          # MLQA splits Chinese only in zh
    ("zh", "ポケ", ["ポケモン"], (0, 0), (0, 0)),                                        # kana is not split, even in zh
    ("th", "กรุงเทพ", ["กรุงเทพมหานคร"], (0, 0), (0, 0)),                              # nor Thai: one word each
    ("en", "", ["Denver"], (0, 0), (0, 0)),                                              # no answer found
])
def test_exact_match_and_f1_by_hand(lang, prediction, golds, squad, mlqa):
    example = data.Example(id="q", lang=lang, text="?", pair=" ".join(golds), answers=[(g, 0) for g in golds])
    scores = qa.answer_scores({"q": prediction} if prediction else {}, [example], lang)
    assert (scores["exact_match"], scores["f1"]) == pytest.approx(squad)
    assert (scores["mlqa_exact_match"], scores["mlqa_f1"]) == pytest.approx(mlqa)


def script_normalize(s, lang):
    """evaluate_mlqa.py's normalize_answer, written again from its rules (XTREME third_party/evaluate_mlqa.py:21-86):
    lower; drop its PUNCT (category P below sys.maxunicode, and string.punctuation); drop the
    language's articles; zh: mixed_segmentation, else whitespace tokens; join the tokens by spaces."""
    punct = script_punct()
    s = "".join(ch for ch in s.lower() if ch not in punct)
    articles = {"en": r"\b(a|an|the)\b", "es": r"\b(un|una|unos|unas|el|la|los|las)\b",
                "vi": r"\b(của|là|cái|chiếc|những)\b",
                "de": r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b", "ar": "\\sال^|ال"}
    if lang in articles:
        s = re.sub(articles[lang], " ", s)
    if lang != "zh":
        tokens = s.split()
    else:
        tokens, temp = [], ""
        for ch in s:
            if re.search(r"[\u4e00-\u9fa5]", ch) or ch in punct:
                tokens, temp = tokens + temp.split() + [ch], ""
            else:
                temp += ch
        tokens += temp.split()
    return " ".join(t for t in tokens if t.strip() != "")


@functools.lru_cache(maxsize=None)
def script_punct():
    """evaluate_mlqa.py:21's PUNCT."""
    return frozenset({chr(i) for i in range(sys.maxunicode) if unicodedata.category(chr(i)).startswith("P")}
                     | set(string.punctuation))


def script_scores(prediction, golds, lang):
    """evaluate_mlqa.py's exact_match_score and f1_score, each the best over the gold answers."""
    def f1(gold):
        p, g = script_normalize(prediction, lang).split(), script_normalize(gold, lang).split()
        same = sum((collections.Counter(p) & collections.Counter(g)).values())
        return 0 if same == 0 else 2 * (same / len(p)) * (same / len(g)) / (same / len(p) + same / len(g))
    exact = max(float(script_normalize(prediction, lang) == script_normalize(g, lang)) for g in golds)
    return exact, max(f1(g) for g in golds)


def test_mlqa_scores_follow_evaluate_mlqa_on_random_strings():
    pieces = (["the", "a", "an", "la", "los", "una", "der", "die", "des", "của", "những", "ال", "الكتاب", "The", "DER"]
              + list("東京北大学一龥") + ["\u9fa6", "\u3400", "\uf900"] + list("ポケモンひらがな") + list("กรุงเทพ")
              + list(".,;:!?\"'()[]-—–«»。、！？「」・$+<=>^`|~") + ["Tokyo", "x1", "42", "É", "ß"])
    rng = random.Random(0)
    draw = lambda: "".join(rng.choice(pieces) + rng.choice(["", "", " ", "  ", "\t"]) for _ in range(rng.randint(0, 8)))
    for n in range(3000):
        lang = ("en", "es", "de", "vi", "ar", "hi", "zh")[n % 7]
        prediction, golds = draw(), [draw() or "x" for _ in range(rng.randint(1, 3))]
        example = data.Example(id="q", lang=lang, text="?", pair="", answers=[(g, 0) for g in golds])
        scores = qa.answer_scores({"q": prediction}, [example], lang)
        expected = script_scores(prediction, golds, lang)
        assert (scores["mlqa_exact_match"], scores["mlqa_f1"]) == pytest.approx(expected), (lang, prediction, golds)


def test_scores_are_means_over_questions():
    examples = [data.Example(id=str(i), lang="en", text="?", pair="", answers=[(g, 0)]) for i, g in enumerate(["a cat", "two dogs"])]
    scores = qa.answer_scores({"0": "cat", "1": "two birds"}, examples, "en")
    assert scores["exact_match"] == 0.5 and scores["f1"] == pytest.approx((1 + 0.5) / 2) and scores["n"] == 2


# --- windows and offsets --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizer():
    from minxlt.checkpoints.prepare_default import default_model
    from minxlt.text.tokenizer import Tokenizer
    return Tokenizer.from_pretrained(default_model())


class Marker(torch.nn.Module):
    """A stand-in model: start logit 10 on one token id, end logit 10 on another, 0 elsewhere."""

    def __init__(self, start_id, end_id):
        super().__init__()
        self.start_id, self.end_id = start_id, end_id

    def forward(self, ids, mask):
        return torch.stack([10.0 * (ids == self.start_id), 10.0 * (ids == self.end_id)], dim=-1), None


def test_an_answer_across_two_windows_is_found_in_the_one_that_holds_it(tokenizer):
    context = "lorem " * 30 + "Alpha Omega" + " lorem" * 30
    start = context.index("Alpha")
    example = data.Example(id="q1", lang="en", text="Which letters?", pair=context, answers=[("Alpha Omega", start)])
    ids, offsets = tokenizer.tokenize_with_offsets(context)
    first, last = qa.answer_tokens(qa.token_spans(context, offsets), start, start + len("Alpha Omega"))
    question = len(tokenizer.tokenize(example.text))
    # the first window ends between the answer's tokens; the second starts before it
    windows = qa.encode_windows([example], tokenizer, max_length=first + 1 + question + 4, stride=10)
    assert len(windows) >= 2 and windows[0].label == (0, 0)
    c = windows[1].extra["context_start"]
    s, e = windows[1].label
    spans = windows[1].extra["spans"]
    assert context[spans[s - c][0]:spans[e - c][1]] == "Alpha Omega"
    model = Marker(ids[first], ids[last])
    # the first window alone offers a wrong span (the start, with some other end) ...
    logits = model(torch.tensor([windows[0].ids]), None)[0][0]
    _, a, b = qa.best_span(logits[:, 0], logits[:, 1], windows[0])
    assert context[a:b] != "Alpha Omega"
    # ... but the question's answer comes from the window that holds the whole answer
    run = make_run(["start", "end"], "span", tokenizer, max_length=first + 1 + question + 4, doc_stride=10, max_answer_length=30)
    scores = run.level.score(lambda ids, mask: model(ids, mask)[0], "text", {"en": [example]}, run)
    assert scores["en"]["exact_match"] == 1.0


def test_windows_start_doc_stride_apart_and_label_the_answer_in_either_layout(tokenizer):
    """As BERT's run_squad.py and XTREME's squad.py: window k starts at token k * doc_stride, the last reaches the
    context's end; a BERT vocabulary's [CLS] q [SEP] c [SEP] puts the context one token earlier than <s> q </s></s>."""
    from minxlt.text.tokenizer import WordPieceTokenizer
    words = [f"w{i}" for i in range(40)]
    wordpiece = WordPieceTokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "?",
                                                                 "who", *words])})
    context = " ".join(words)
    example = data.Example(id="q", lang="en", text="who?", pair=context, answers=[("w33", context.index("w33"))])
    for tok, specials in ((tokenizer, 4), (wordpiece, 3)):
        ids = tok.tokenize_with_offsets(context)[0]
        budget = 20 - len(tok.tokenize(example.text)) - specials
        windows = qa.encode_windows([example], tok, 20, 5)
        firsts = [w.extra["spans"][0][0] for w in windows]
        spans = qa.token_spans(context, tok.tokenize_with_offsets(context)[1])
        starts = list(range(0, len(ids), 5))[:len(windows)]
        assert firsts == [spans[k][0] for k in starts] and starts[-1] + budget >= len(ids) > starts[-2] + budget
        for w in windows:
            if w.label != (0, 0):
                assert w.ids[w.extra["context_start"] - 1] in (tok.eos_id, *tok.separator)
                assert tok.decode(w.ids[w.label[0]:w.label[1] + 1]).strip() == "w33"
        assert sum(w.label != (0, 0) for w in windows) >= 1


def test_best_span_respects_order_and_length(tokenizer):
    context = "one two three four five six"
    example = data.Example(id="q", lang="en", text="?", pair=context, answers=[("two", 4)])
    [window] = qa.encode_windows([example], tokenizer, 64, 8)
    c, n = window.extra["context_start"], len(window.extra["spans"])
    start, end = torch.zeros(len(window.ids)), torch.zeros(len(window.ids))
    start[c + 4], end[c + 1] = 5.0, 4.0   # the best start lies after the best end: not a span
    end[c + 5] = 3.0
    _, a, b = qa.best_span(start, end, window)
    assert context[a:b] == "five six"
    start[c], end[c + n - 1] = 9.0, 9.0   # the whole context, longer than max_answer_tokens = 2
    _, a, b = qa.best_span(start, end, window, max_answer_tokens=2)
    assert context[a:b] != context


def test_windows_pair_by_where_they_lie_in_the_context():
    window = lambda centre: data.Encoded([], extra={"centre": centre})
    english = [window(0.25), window(0.75)]
    german = [window(0.2), window(0.5), window(0.85)]  # a longer translation: three windows
    assert [english.index(qa.matching_window(w, english)) for w in german] == [0, 0, 1]


def test_translation_pairs_match_windows_by_position(tokenizer):
    english = data.Example(id="q", lang="en", text="?", pair="short " * 60, answers=[("short", 0)])
    german = data.Example(id="q", lang="de", text="?", pair="kurz " * 140, answers=[("kurz", 0)])
    sources = qa.encode_windows([english], tokenizer, 48, 8)
    targets = qa.encode_windows([german], tokenizer, 48, 8)
    pairs = LEVELS["span"].pair(sources, targets)
    assert len(pairs) == len(targets) > len(sources) > 1
    matched = [sources.index(s) for s, _ in pairs]
    assert matched == sorted(matched) and matched[0] == 0 and matched[-1] == len(sources) - 1


@pytest.mark.skipif(not (SHARED_DATA / "xquad").exists(), reason="needs ../shared/data/xquad (not in a fresh clone)")
@pytest.mark.parametrize("lang", tasks.XQUAD_LANGS)
def test_offsets_map_every_training_answer_back(tokenizer, lang):
    task = tasks.load_task("xquad", SHARED_DATA / "xquad", targets=[lang])
    examples = task.train[lang]
    windows = qa.encode_windows(examples, tokenizer, 256, 64)
    labelled = {}
    for w in windows:
        if w.label != (0, 0):
            labelled.setdefault(w.extra["question"], w)
    assert len(labelled) == len(examples) > 800
    exact = 0
    for e in examples:
        w, (text, start) = labelled[e.id], e.answers[0]
        c, spans = w.extra["context_start"], w.extra["spans"]
        s, t = w.label[0] - c, w.label[1] - c
        found = e.pair[spans[s][0]:spans[t][1]]
        # the smallest run of tokens that holds the answer ...
        assert spans[s][0] <= start and start + len(text) <= spans[t][1]
        assert spans[s][1] > start and spans[t][0] < start + len(text)
        # ... which is the answer exactly wherever it begins and ends at token edges
        if any(a == start for a, _ in spans) and any(b == start + len(text) for _, b in spans):
            assert found == text
            exact += 1
    assert exact > 0.9 * len(examples)  # the rest share a token with a neighbouring character, "2017." or "(118)"


def test_real_xquad_split_keeps_articles_whole():
    if not (SHARED_DATA / "xquad").exists():
        pytest.skip("needs ../shared/data/xquad (not in a fresh clone)")
    task = tasks.load_task("xquad", SHARED_DATA / "xquad")
    assert [task.source] + task.targets == tasks.XQUAD_LANGS
    sizes = {split: len(getattr(task, split)["en"]) for split in ("train", "dev", "test")}
    assert sizes == {"train": 897, "dev": 91, "test": 202}
    for lang in task.targets:  # the same questions in every language, no article in two splits
        for split in ("train", "dev", "test"):
            assert [e.id for e in getattr(task, split)[lang]] == [e.id for e in getattr(task, split)["en"]]
    titles = {split: {e.group for e in getattr(task, split)["en"]} for split in ("train", "dev", "test")}
    assert not titles["train"] & titles["test"] and not titles["dev"] & titles["test"] and not titles["train"] & titles["dev"]


def test_reader_names_the_problem(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"data": [{"title": "T", "paragraphs": [
        {"context": "Paris is big.", "qas": [{"id": "x1", "question": "?", "answers": [{"text": "Rome", "answer_start": 0}]}]}]}]}))
    with pytest.raises(tasks.DataError, match=r"bad.json: article 0 \('T'\), paragraph 0, question x1: answer 'Rome' is not at character 0"):
        tasks.read_squad(path, "en")
    path.write_text("[1, 2]")
    with pytest.raises(tasks.DataError, match="not SQuAD v1.1 JSON"):
        tasks.read_squad(path, "en")
    for article in ({"title": "T", "paragraphs": None}, "T"):  # and a file of translated questions, read by id
        path.write_text(json.dumps({"data": [{"title": "S", "paragraphs": []}, article]}))
        for read in (lambda: tasks.read_squad(path, "en"), lambda: tasks.readers.squad_texts(path)):
            with pytest.raises(tasks.DataError, match=r"bad.json: article 1 \(data\[1\]\) is not an object with a "
                                                      r"'paragraphs' list"):
                read()


# --- losses ---------------------------------------------------------------------------------------

def random_span_batch():
    torch.manual_seed(1)
    lengths = [7, 4, 9]
    T = max(lengths)
    mask = torch.tensor([[1] * n + [0] * (T - n) for n in lengths])
    logits = torch.randn(3, T, 2) * 3
    labels = torch.tensor([[2, 5], [0, 0], [8, 8]])
    return lengths, mask, logits, labels


def test_span_loss_against_a_loop_over_real_positions():
    lengths, mask, logits, labels = random_span_batch()
    weights = torch.tensor([1.0, 1.0, 0.0])
    expected = []
    for b, n in enumerate(lengths[:2]):
        per_side = []
        for side in range(2):
            row = logits[b, :n, side].tolist()
            log_z = math.log(sum(math.exp(v) for v in row))
            per_side.append(log_z - row[labels[b, side]])
        expected.append(sum(per_side) / 2)
    assert span_loss(logits, labels, weights, mask).item() == pytest.approx(sum(expected) / 2, rel=1e-6)
    # padding is no candidate: its logits do not matter
    changed = logits.clone()
    changed[mask == 0] = 50.0
    assert span_loss(changed, labels, weights, mask).item() == pytest.approx(span_loss(logits, labels, weights, mask).item(), rel=1e-6)


def test_qa_self_teaching_is_a_kl_over_each_windows_own_positions():
    lengths, mask, student, _ = random_span_batch()
    teacher = torch.randn_like(student)
    weights = torch.ones(3)
    loss = self_teaching_loss(position_logits(student, mask), position_logits(teacher, mask), weights[:, None].expand(-1, 2))
    expected = []
    for b, n in enumerate(lengths):
        for side in range(2):
            p = torch.softmax(teacher[b, :n, side].double(), 0)
            q = torch.softmax(student[b, :n, side].double(), 0)
            expected.append((p * (p / q).log()).sum().item())
    assert loss.item() == pytest.approx(sum(expected) / len(expected), rel=1e-5)
    # each window's part is its own: computed alone it is the same
    alone = self_teaching_loss(position_logits(student[:1, :7], mask[:1, :7]), position_logits(teacher[:1, :7], mask[:1, :7]))
    assert alone.item() == pytest.approx(sum(expected[:2]) / 2, rel=1e-5)


# --- end to end -----------------------------------------------------------------------------------

PEOPLE = [("Anna", "Paris", "red", "rote"), ("Ben", "Rome", "blue", "blaue"), ("Carl", "Oslo", "green", "grüne"),
          ("Dora", "Lima", "black", "schwarze"), ("Emil", "Bern", "white", "weiße")]


def write_squad(directory, lang, articles):
    """A SQuAD v1.1 file; every context says where someone lives and which bikes they like."""
    out = []
    for title, people in articles:
        paragraphs = []
        for i, (name, city, colour, farbe) in enumerate(people):
            if lang == "en":
                context = f"{name} lives in {city}. {name} likes {colour} bikes and plays chess on Sundays."
                qas = [(f"{title}-{i}-city", f"Where does {name} live?", city), (f"{title}-{i}-colour", f"Which bikes does {name} like?", colour)]
            else:
                context = f"{name} wohnt in {city}. {name} mag {farbe} Fahrräder und spielt sonntags Schach."
                qas = [(f"{title}-{i}-city", f"Wo wohnt {name}?", city), (f"{title}-{i}-colour", f"Welche Fahrräder mag {name}?", farbe)]
            paragraphs.append({"context": context, "qas": [{"id": id, "question": q, "answers": [{"text": a, "answer_start": context.index(a)}]}
                                                           for id, q, a in qas]})
        out.append({"title": title, "paragraphs": paragraphs})
    (directory / f"xquad.{lang}.json").write_text(json.dumps({"version": "1.1", "data": out}), encoding="utf-8")


@pytest.fixture
def tiny_xquad(tmp_path):
    # titles chosen for their split (tasks.xquad_split): two train articles, a dev and a test one
    articles = [("Article 0", PEOPLE * 3), ("Article 1", PEOPLE[::-1] * 3), ("Article 6", PEOPLE[1:3]), ("Article 7", PEOPLE)]
    assert [tasks.xquad_split(t) for t, _ in articles] == ["train", "train", "dev", "test"]
    for lang in ("en", "de"):
        write_squad(tmp_path, lang, articles)
    return tmp_path


@pytest.mark.parametrize("method", ["translate-train", "xeroalign", "filter", "xmixup"])
def test_xquad_runs_end_to_end(tiny_xquad, tiny_model_dir, tmp_path, method):
    import train
    # windows of 40 tokens starting 6 apart: every context is read in several windows
    common = ["--model", str(tiny_model_dir), "--task", "xquad", "--data", str(tiny_xquad), "--target-langs", "de",
              "--batch-size", "16", "--eval-every", "50", "--lr", "3e-3", "--no-alignment", "--max-length", "40", "--doc-stride", "6"]
    out = tmp_path / method
    train.main(common + ["--method", method, "--max-steps", "150" if method == "translate-train" else "3", "--out", str(out)])
    if method == "filter":  # self-teaching: the FILTER model above is the teacher
        out = tmp_path / "student"
        train.main(common + ["--method", "filter", "--teacher", str(tmp_path / method / "best"), "--max-steps", "3", "--out", str(out)])
    results = json.loads((out / "results.json").read_text())
    for lang in ("en", "de"):
        scores = results[lang]
        assert scores["n"] == 10 and all(0 <= scores[k] <= 1 for k in ("exact_match", "f1", "mlqa_exact_match", "mlqa_f1"))
        assert scores["exact_match"] <= scores["f1"]
    if method == "translate-train":  # learnt: the answer follows "in" or "likes"/"mag"
        assert results["en"]["f1"] > 0.5 and results["de"]["f1"] > 0.5
    info = json.loads((out / "best" / "task.json").read_text())
    assert info["head_style"] == "span" and info["doc_stride"] == 6 and info["max_length"] == 40


def test_a_qa_resume_refuses_other_windows(tiny_xquad, tiny_model_dir, tmp_path):
    import train
    from minxlt.checkpoints.weights import CheckpointError
    out = tmp_path / "run"
    argv = ["--model", str(tiny_model_dir), "--task", "xquad", "--data", str(tiny_xquad), "--target-langs", "de",
            "--method", "zero-shot", "--batch-size", "8", "--max-steps", "4", "--no-alignment", "--max-length", "40",
            "--out", str(out)]
    train.main(argv + ["--doc-stride", "16", "--stop-at", "2"])
    with pytest.raises(CheckpointError, match=r"belongs to another run \(doc_stride 16 there, 8 here\)"):
        train.main(argv + ["--doc-stride", "8", "--resume"])
    saved = torch.load(out / "checkpoint.pt", weights_only=True)
    del saved["identity"]["doc_stride"]  # as a run before --doc-stride set the distance of the windows' starts
    torch.save(saved, out / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="windows that shared --doc-stride tokens there, windows that start "
                                              "--doc-stride apart here"):
        train.main(argv + ["--doc-stride", "16", "--resume"])


def test_qa_refuses_sentence_methods(tiny_xquad, tiny_model_dir, tmp_path):
    import train
    with pytest.raises(InputError, match="answer spans"):
        train.main(["--model", str(tiny_model_dir), "--task", "xquad", "--data", str(tiny_xquad), "--target-langs", "de", "--method", "contrastive",
                    "--out", str(tmp_path / "run")])


def qa_worker(rank, world_size, port, argv):
    from conftest import join_process_group_env
    join_process_group_env(rank, world_size, port)
    import train
    train.main(argv)


def test_two_processes_answer_like_one(tiny_xquad, tiny_model_dir, tmp_path):
    # the ranks split the windows of a question between them and share their best spans
    import torch.multiprocessing as mp

    import train
    from conftest import free_port
    argv = ["--model", str(tiny_model_dir), "--task", "xquad", "--data", str(tiny_xquad), "--target-langs", "de", "--method", "xeroalign",
            "--batch-size", "8", "--max-steps", "20", "--eval-every", "20", "--lr", "3e-3", "--dropout", "0", "--no-alignment",
            "--max-length", "40", "--doc-stride", "16", "--eval-batch-size", "3", "--no-group-by-length"]
    train.main(argv + ["--out", str(tmp_path / "one")])
    mp.spawn(qa_worker, args=(2, free_port(), argv + ["--out", str(tmp_path / "two")]), nprocs=2)
    curves = [[r["loss"] for r in map(json.loads, open(tmp_path / d / "log.jsonl")) if "loss" in r] for d in ("one", "two")]
    assert curves[1] == pytest.approx(curves[0], rel=1e-4)
    one, two = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("one", "two"))
    assert one["de"]["f1"] > 0  # something to agree on
    for lang in ("en", "de"):
        assert two[lang] == pytest.approx(one[lang], abs=1e-9)


def test_evaluate_reads_the_windows_of_a_qa_checkpoint(tiny_xquad, tiny_model_dir, tmp_path):
    import subprocess
    import sys

    import train
    from conftest import ROOT
    train.main(["--model", str(tiny_model_dir), "--task", "xquad", "--data", str(tiny_xquad), "--target-langs", "de", "--method",
                "filter", "--batch-size", "8", "--max-steps", "3", "--eval-every", "3", "--no-alignment", "--max-length", "40",
                "--doc-stride", "6", "--out", str(tmp_path / "run")])
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--checkpoint", str(tmp_path / "run" / "best")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    again = json.loads((tmp_path / "run" / "results_test.json").read_text())
    trained = json.loads((tmp_path / "run" / "results.json").read_text())
    for lang in ("en", "de"):  # the same windows (max length, stride from task.json), the same FILTER inference
        assert again[lang] == pytest.approx(trained[lang])
