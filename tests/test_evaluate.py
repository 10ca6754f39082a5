"""Metrics against independent computations, and evaluation split across processes."""
import json
import math
import re
import sys

import pytest
import torch
import torch.multiprocessing as mp

import evaluate
import levels
from conftest import free_port, join_process_group_env
from minxlt import tasks
from minxlt.errors import InputError
from minxlt.parallel import distributed


def cka_by_hsic(x, y):
    """CKA from its definition with Gram matrices and the centring matrix H (Kornblith et al. 2019)."""
    n = len(x)
    H = torch.eye(n, dtype=torch.float64) - 1.0 / n
    K, L = x.double() @ x.double().T, y.double() @ y.double().T
    hsic = lambda a, b: torch.trace(a @ H @ b @ H)
    return (hsic(K, L) / torch.sqrt(hsic(K, K) * hsic(L, L))).item()


def test_linear_cka_against_its_definition():
    torch.manual_seed(0)
    x, y = torch.randn(30, 7), torch.randn(30, 5)
    assert evaluate.linear_cka(x, y) == pytest.approx(cka_by_hsic(x, y), abs=1e-10)
    q, _ = torch.linalg.qr(torch.randn(7, 7))
    assert evaluate.linear_cka(x, 3 * x @ q + 2) == pytest.approx(1.0)  # invariant to rotation, scale, shift
    assert evaluate.linear_cka(x, y) < 0.5


def test_sentence_vectors_of_texts_longer_than_the_encoders_positions(tiny_model_dir):
    # an encoder of 18 positions reads the first 18 tokens of a longer text (not an error)
    from minxlt.text.tokenizer import Tokenizer
    from model import Config, Encoder
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    encoder = Encoder(Config(vocab_size=tokenizer.vocab_size, hidden_size=16, num_layers=1, num_heads=2, ffn_size=24, max_positions=20)).eval()
    texts = ["wake me up at seven " * 8, "play some music"]
    assert len(tokenizer.encode_batch(texts[:1])[0]) > 18
    vectors = evaluate.sentence_representations(encoder, tokenizer, texts, 8, "cpu")
    ids, mask = tokenizer.batch(texts, max_length=18)
    assert torch.allclose(vectors, evaluate.mean_pool(encoder(ids, mask), mask), atol=1e-6)
    # an encoder computing in bf16 (a sharded run's, its layers gathered in bf16) gives float32 vectors
    halved = evaluate.sentence_representations(encoder.to(torch.bfloat16), tokenizer, texts, 8, "cpu")
    assert halved.dtype == torch.float32 and torch.allclose(halved, vectors, atol=0.05)


def test_retrieval_accuracy_both_directions():
    x = torch.eye(4)
    assert evaluate.retrieval_accuracy(x, x) == 1.0
    y = torch.eye(4)[[1, 0, 2, 3]]  # the first two swapped: 2 of 4 right in each direction
    assert evaluate.retrieval_accuracy(x, y) == 0.5
    z = torch.tensor([[1.0, 0, 0, 0], [1.0, 0.1, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]])
    # x -> z: row 1's nearest is z0 or z1 (x1 = e1: cosine with z1 > 0, with z0 = 0) -> all right;
    # z -> x: z1's nearest is x0 (cosine .995) -> 3 of 4
    assert evaluate.retrieval_accuracy(x, z) == pytest.approx((1.0 + 0.75) / 2)


def test_scores_from_a_confusion_matrix():
    counts = torch.tensor([[5, 1, 0], [2, 2, 0], [0, 0, 0]])  # gold rows, predicted columns; label 2 unused
    s = levels.accuracy_and_f1(counts)
    assert s["accuracy"] == pytest.approx(7 / 10) and s["n"] == 10
    f1 = [2 * 5 / (6 + 7), 2 * 2 / (4 + 3)]  # per label: 2 tp / (gold + predicted)
    assert s["macro_f1"] == pytest.approx(sum(f1) / 2)


def test_summary_average_and_gap():
    per_lang = {"en": {"accuracy": 0.9}, "de": {"accuracy": 0.8}, "zh": {"accuracy": 0.6}}
    results = evaluate.summarise(per_lang, "en")
    assert results["average"]["accuracy"] == pytest.approx(0.7) and results["transfer_gap"]["accuracy"] == pytest.approx(0.2)


def evaluate_worker(rank, world_size, port, model_dir, out):
    join_process_group_env(rank, world_size, port)
    rank, world_size, device = distributed.setup("cpu")
    counts, alignment = run_evaluation(model_dir, rank, world_size)
    if rank == 0:
        torch.save({"counts": counts, "alignment": alignment}, out)
    distributed.cleanup()


def run_evaluation(model_dir, rank=0, world_size=1):
    from methods import Run
    from minxlt.text.tokenizer import Tokenizer
    from model import Classifier, Encoder
    torch.manual_seed(0)
    model = Classifier(Encoder.from_pretrained(model_dir), 8).eval()
    tokenizer = Tokenizer.from_pretrained(model_dir)
    task = tasks.load_task("demo", targets=["de", "hi"])
    run = Run(task, tokenizer, 64, 16, "cpu", rank, world_size)
    counts = run.level.score(lambda ids, mask: model(ids, mask)[0], "text", task.test, run)  # accuracy, macro-F1 and n per language
    alignment = evaluate.alignment(model.encoder, tokenizer, task.test, "en", 16, "cpu", rank, world_size)
    return counts, alignment


def test_dev_limit_scores_the_first_examples_of_each_language(tiny_model_dir):
    """--dev-limit N: each evaluation on dev scores the first N examples of each language (X-Mixup's
    ner.py:104-107 keeps a tagging task's first 1,000 dev sentences); the test set stays whole."""
    from conftest import make_method
    from methods import Run
    from minxlt.text.tokenizer import Tokenizer
    from model import Classifier, Encoder
    task = tasks.load_task("demo", targets=["de"])
    run = Run(task, Tokenizer.from_pretrained(tiny_model_dir), 64, 16)
    model = Classifier(Encoder.from_pretrained(tiny_model_dir), len(task.labels)).eval()
    whole = make_method("zero-shot", run).evaluate(model, "dev", ["en", "de"])
    first = make_method("zero-shot", run, "--dev-limit", "5").evaluate(model, "dev", ["en", "de"])
    assert {lang: s["n"] for lang, s in first.items()} == {"en": 5, "de": 5} and all(whole[lang]["n"] > 5 for lang in whole)
    alone = run.level.score(lambda ids, mask: model(ids, mask)[0], "text", {lang: task.dev[lang][:5] for lang in ("en", "de")}, run)
    assert first == alone  # the first five, not any five
    assert make_method("zero-shot", run, "--dev-limit", "5").evaluate(model, "test", ["de"])["de"]["n"] == len(task.test["de"])


def test_one_and_two_processes_give_the_same_numbers(tmp_path, tiny_model_dir):
    counts, alignment = run_evaluation(tiny_model_dir)
    assert sum(c["n"] for c in counts.values()) == 3 * 128
    mp.spawn(evaluate_worker, args=(2, free_port(), tiny_model_dir, tmp_path / "two.pt"), nprocs=2)
    two = torch.load(tmp_path / "two.pt")
    assert counts == two["counts"]
    assert alignment == two["alignment"]  # exactly: each batch is computed alike, whoever computes it


def test_entities_by_hand():
    assert levels.entities(["B-PER", "I-PER", "O", "B-LOC"]) == {("PER", 0, 2), ("LOC", 3, 4)}
    assert levels.entities(["B-LOC", "B-LOC", "I-LOC"]) == {("LOC", 0, 1), ("LOC", 1, 3)}  # adjacent: two entities
    assert levels.entities(["O", "I-PER", "I-PER"]) == {("PER", 1, 3)}  # I- after O starts one, as in conlleval
    assert levels.entities(["B-PER", "I-LOC", "I-LOC"]) == {("PER", 0, 1), ("LOC", 1, 3)}  # a type change starts one


def test_span_f1_against_seqeval():
    seqeval = pytest.importorskip("seqeval.metrics", reason="the reference span F1 comes from seqeval (requirements-test.txt)")
    import random
    rng = random.Random(0)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG"]
    gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(300)]
    guess = [[t if rng.random() < 0.7 else rng.choice(tags) for t in sentence] for sentence in gold]
    counts = torch.zeros(8, dtype=torch.long)
    for g, p in zip(gold, guess):
        a, b = levels.entities(g), levels.entities(p)
        counts += torch.tensor([len(a & b), len(b), len(a), 0, 1, 0, 0, 1])
    ours = levels.tagging_scores(counts)
    assert ours["f1"] == pytest.approx(seqeval.f1_score(gold, guess), abs=1e-12)
    assert ours["precision"] == pytest.approx(seqeval.precision_score(gold, guess), abs=1e-12)
    assert ours["recall"] == pytest.approx(seqeval.recall_score(gold, guess), abs=1e-12)


def test_pos_scores_are_word_accuracy_and_chunk_f1():
    counts = torch.tensor([3, 4, 6, 7, 9, 0, 0, 2])  # (chunks found, predicted, gold, words right, words, ..., sentences)
    f1 = 2 * (3 / 4) * (3 / 6) / (3 / 4 + 3 / 6)
    assert levels.tagging_scores(counts, spans=False) == {"accuracy": 7 / 9, "f1": f1, "precision": 3 / 4, "recall": 3 / 6, "n": 9}
    assert list(levels.tagging_scores(counts, spans=False, first="f1")) == ["f1", "accuracy", "precision", "recall", "n"]


def test_pos_chunks_by_hand():
    """seqeval reads POS tags as chunks: a run of one tag is one, S-prefixed tags stand alone."""
    assert levels.chunk_counts([["NOUN", "NOUN", "VERB"]], [["NOUN", "VERB", "VERB"]]) == (0, 2, 2)
    assert levels.chunk_counts([["SCONJ", "SCONJ", "PRON"]], [["SCONJ", "SCONJ", "PRON"]]) == (3, 3, 3)
    assert levels.chunk_counts([["DET", "NOUN"], ["NOUN"]], [["DET", "NOUN"], ["NOUN"]]) == (3, 3, 3)  # sentences apart


def test_pos_chunk_f1_against_seqeval():
    """POS scored as XTREME's run_tag.py scores it: seqeval's f1_score over a language's sentences,
    every UPOS tag drawn, X (whose chunks seqeval reads oddly) and INTJ/SCONJ/SYM (whose first
    letters are seqeval's I and S prefixes) included."""
    seqeval = pytest.importorskip("seqeval.metrics", reason="the reference F1 comes from seqeval (requirements-test.txt)")
    import random
    import warnings
    from minxlt.tasks.udpos import UPOS_LABELS
    rng = random.Random(1)
    tags = list(UPOS_LABELS) + ["NOUN", "NOUN", "X", "X"]  # runs of one tag, and X, more often
    gold = [[rng.choice(tags) for _ in range(rng.randint(1, 9))] for _ in range(400)]
    guess = [[t if rng.random() < 0.6 else rng.choice(tags) for t in sentence] for sentence in gold]
    found, predicted, wanted = levels.chunk_counts(gold, guess)
    ours = levels.tagging_scores(torch.tensor([found, predicted, wanted, 0, 1, 0, 0, 1]), spans=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "NOUN seems not to be NE tag"
        assert ours["f1"] == pytest.approx(seqeval.f1_score(gold, guess), abs=1e-12)
        assert ours["precision"] == pytest.approx(seqeval.precision_score(gold, guess), abs=1e-12)
        assert ours["recall"] == pytest.approx(seqeval.recall_score(gold, guess), abs=1e-12)


def test_udpos_runs_end_to_end(tmp_path, tiny_model_dir):
    import zlib

    import train
    sentences = {"en": [("We", "PRON"), ("walk", "VERB"), ("home", "ADV"), (".", "PUNCT")],
                 "de": [("Wir", "PRON"), ("gehen", "VERB"), ("heim", "ADV"), (".", "PUNCT")]}
    ids = [f"n{i:03d}" for i in range(60)]
    for lang, words in sentences.items():
        rows = "".join(f"# sent_id = {id}\n" + "".join(f"{j + 1}\t{w}\t_\t{t}\t_\t_\t0\t_\t_\t_\n" for j, (w, t) in enumerate(words)) + "\n"
                       for id in ids)
        (tmp_path / f"{lang}_pud-ud-test.conllu").write_text(rows, encoding="utf-8")
    out = tmp_path / "run"
    train.main(["--model", str(tiny_model_dir), "--task", "udpos", "--data", str(tmp_path), "--target-langs", "de",
                "--method", "translate-train", "--batch-size", "8", "--max-steps", "30", "--eval-every", "10", "--lr", "3e-3",
                "--no-alignment", "--out", str(out)])
    results = json.loads((out / "results.json").read_text())
    n_test = sum(zlib.crc32(id.encode()) % 10 < 2 for id in ids)
    assert results["en"]["n"] == results["de"]["n"] == 4 * n_test and list(results["en"])[0] == "accuracy"  # UD PUD: word accuracy first
    assert results["en"]["accuracy"] == 1.0 and results["de"]["accuracy"] == 1.0  # one sentence per language, learnt
    (tmp_path / "en-only").mkdir()  # another copy of the data, without the run's German
    (tmp_path / "en-only" / "en_pud-ud-test.conllu").write_text((tmp_path / "en_pud-ud-test.conllu").read_text())
    with pytest.raises(InputError, match=r"task udpos has no language\(s\) de in .*; it has en. The languages are the "
                                         r"run's, from its task.json: choose others with --target-langs \(and"):
        evaluate.main(["--checkpoint", str(out / "best"), "--data", str(tmp_path / "en-only"), "--out", str(tmp_path / "e")])
    alone = next(f"x{i}" for i in range(100) if zlib.crc32(f"x{i}".encode()) % 10 < 2)  # a test sentence ...
    with open(tmp_path / "de_pud-ud-test.conllu", "a", encoding="utf-8") as f:  # ... that English lacks
        f.write(f"# sent_id = {alone}\n1\tNein\t_\tINTJ\t_\t_\t0\t_\t_\t_\n\n")
    with pytest.raises(InputError, match=re.escape(f"de_pud-ud-test.conllu: 1 of its texts have no en text of the "
                                                   f"same id (first: '{alone}'), which the oracle test input reads")):
        train.main(["--model", str(tiny_model_dir), "--task", "udpos", "--data", str(tmp_path), "--method", "filter",
                    "--max-steps", "1", "--out", str(tmp_path / "filter")])  # refused before its first step
    assert not (tmp_path / "filter" / "log.jsonl").exists()
    train.main(["--model", str(tiny_model_dir), "--task", "udpos", "--data", str(tmp_path), "--max-steps", "1",
                "--method", "zero-shot", "--out", str(tmp_path / "alone")])  # a text alone: tested, pair or not
    assert json.loads((tmp_path / "alone" / "results.json").read_text())["de"]["n"] == 4 * n_test + 1


@pytest.mark.parametrize("method, keep", [("filter", []), ("xmixup", ["--save-dtype", "bf16", "--no-keep-checkpoint"])])
def test_evaluate_cli_reproduces_the_run(tmp_path, tiny_model_dir, method, keep, monkeypatch):
    # and a run that keeps less: OUT/best in bf16, no OUT/checkpoint.pt once it has finished, which the
    # test at the end and evaluate.py read alike
    import train
    from minxlt.checkpoints.weights import load_safetensors
    out = tmp_path / "run"
    train.main(["--model", str(tiny_model_dir), "--method", method, "--target-langs", "de,zh", "--batch-size", "8",
                "--max-steps", "4", "--eval-every", "2", "--save-every", "2", "--lr", "3e-3", "--no-alignment", "--out", str(out), *keep])
    assert (out / "checkpoint.pt").exists() == (not keep)
    saved = {**load_safetensors(out / "best" / "model.safetensors"), **load_safetensors(out / "best" / "head.safetensors")}
    assert {t.dtype for t in saved.values() if t.is_floating_point()} == {torch.bfloat16 if keep else torch.float32}
    monkeypatch.setattr(sys, "argv", ["evaluate.py", "--checkpoint", str(out / "best")])
    evaluate.main()
    ours, theirs = (json.loads((out / name).read_text()) for name in ("results_test.json", "results.json"))
    assert {l: ours[l]["accuracy"] for l in ("en", "de", "zh")} == {l: theirs[l]["accuracy"] for l in ("en", "de", "zh")}
    monkeypatch.setattr(sys, "argv", ["evaluate.py", "--checkpoint", str(out / "best"), "--plain-inference"])
    evaluate.main()
    assert (out / "results_test_plain.json").exists()
    if method == "filter":  # X-Mixup's predictions read its trained ratio, which this run has not
        with pytest.raises(InputError, match=r"the checkpoint has no trained .*: its run trained --method filter; "
                                             "evaluate it with that --method"):
            evaluate.main(["--checkpoint", str(out / "best"), "--method", "xmixup"])


def results_file(path, method, scores, metric="accuracy", key="settings"):
    path.mkdir(parents=True)
    results = {lang: {metric: value, "n": 10} for lang, value in scores.items()}
    results.update(average={metric: 0.5}, unscored=[], **{key: {"method": method, "source_lang": None}})
    (path / "results.json").write_text(json.dumps(results))
    return path


def test_plot_of_several_runs(tmp_path):
    a = results_file(tmp_path / "a", "zero-shot", {"en": 0.9, "de": 0.6, "sw": 0.3})
    b = results_file(tmp_path / "b", "translate-train", {"en": 0.8, "de": 0.7, "yo": 0.5})
    c = results_file(tmp_path / "c", "zero-shot", {"en": 0.5, "de": 0.5}, key="args")  # as runs before the settings wrote it
    metric, langs, scores, gaps = evaluate.plot_data([a, b, c / "results.json"])
    assert (metric, langs) == ("accuracy", ["en", "de", "sw", "yo"])
    assert list(scores) == ["zero-shot (a)", "translate-train", "zero-shot (results.json)"]
    assert scores["translate-train"][:2] == pytest.approx([80, 70]) and math.isnan(scores["translate-train"][2])
    assert gaps["zero-shot (a)"] == pytest.approx({"de": 30, "sw": 60, "yo": math.nan}, nan_ok=True)  # in points
    # a run whose source is not its results' first language: the gaps are of the other languages, from its source
    f = results_file(tmp_path / "f", "zero-shot", {"de": 0.6, "en": 0.9})
    (f / "results.json").write_text((f / "results.json").read_text().replace('"source_lang": null', '"source_lang": "en"'))
    assert evaluate.plot_data([f])[3] == {"zero-shot": pytest.approx({"de": 30})}
    pytest.importorskip("matplotlib")
    evaluate.main(["--plot", str(a), str(b), "--plot-file", str(tmp_path / "scores.png")])
    assert (tmp_path / "scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit):  # a format matplotlib does not draw, refused before anything is read
        evaluate.main(["--plot", str(a), "--plot-file", str(tmp_path / "scores.jpgx")])
    # runs of one method in folders of one name (seed1/run, seed2/run): each its own bars, named by its path
    d, e = (results_file(tmp_path / seed / "run", "zero-shot", {"en": 0.5, "de": 0.4}) for seed in ("seed1", "seed2"))
    assert list(evaluate.plot_data([a, d, e])[2]) == ["zero-shot (a)", f"zero-shot ({d})", f"zero-shot ({e})"]
    qa = results_file(tmp_path / "qa", "zero-shot", {"en": 0.9}, metric="f1")
    with pytest.raises(InputError, match="has no accuracy .*plot runs of one task together"):
        evaluate.plot_data([a, qa])


def test_evaluate_refuses_before_predicting_and_names_the_task_it_reads(tmp_path, tiny_model_dir, monkeypatch, capsys):
    import shutil

    import train
    from minxlt.checkpoints.weights import CheckpointError
    out = tmp_path / "slots"
    train.main(["--model", str(tiny_model_dir), "--task", "demo-slots", "--target-langs", "de", "--batch-size", "8",
                "--max-steps", "1", "--no-test", "--no-alignment", "--out", str(out)])
    best = out / "best"
    with pytest.raises(InputError, match="--method translate-test trains on sentence labels; --task demo-slots labels"):
        evaluate.main(["--checkpoint", str(best), "--method", "translate-test"])  # the checkpoint's task, named
    with pytest.raises(SystemExit):
        evaluate.main(["--checkpoint", str(best), "--model", str(tiny_model_dir)])
    assert "--model is the encoder measured without --checkpoint" in capsys.readouterr().err
    # another --task reads its own languages and folder, not the checkpoint's: then its labels are what differs
    info = json.loads((best / "task.json").read_text())
    (best / "task.json").write_text(json.dumps(dict(info, data=str(tmp_path / "slots-data"))))
    with pytest.raises(InputError, match=r"its head predicts the labels .* \(task.json: task demo-slots\), and task demo"):
        evaluate.main(["--checkpoint", str(best), "--task", "demo"])
    (best / "task.json").write_text(json.dumps(info))
    # --alignment on a task whose languages are not parallel: refused before anything is predicted
    load_task = tasks.load_task
    monkeypatch.setattr(tasks, "load_task", lambda *a, **k: setattr(task := load_task(*a, **k), "parallel", False) or task)
    monkeypatch.setattr(tasks, "check_labels", lambda *a: pytest.fail("predicted before the refusal"))
    with pytest.raises(InputError, match="--alignment: task demo-slots's languages are not parallel"):
        evaluate.main(["--checkpoint", str(best), "--alignment"])
    monkeypatch.undo()
    # a Unicoder run's OUT/best is an encoder: named so, and measured with its run's alignment pooling
    encoder = tmp_path / "unicoder-best"
    shutil.copytree(tiny_model_dir, encoder)
    (encoder / "unicoder.json").write_text(json.dumps({"alignment_pooling": "cls"}))
    with pytest.raises(CheckpointError, match="a Unicoder run's encoder, with no task head: measure it with --model"):
        evaluate.main(["--checkpoint", str(encoder)])
    evaluate.main(["--model", str(encoder), "--alignment-only", "--target-langs", "de", "--out", str(tmp_path / "a")])
    assert json.loads((tmp_path / "a" / "alignment.json").read_text())["alignment_pooling"] == "cls"


def test_plot_without_matplotlib_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    a = results_file(tmp_path / "a", "zero-shot", {"en": 0.9, "de": 0.6})
    with pytest.raises(InputError, match="--plot needs matplotlib: pip install matplotlib"):
        evaluate.main(["--plot", str(a)])


def test_evaluate_measures_what_the_run_measured_and_each_title_says_what_predictions_saw(tmp_path, tiny_model_dir,
                                                                                          capsys):
    # XeroAlign compares <s> vectors, by default: evaluate.py --alignment on its checkpoint gives train.py's numbers
    # (the pooling in each title), also where task.json predates alignment_pooling (train.py's rule for the run's
    # method and --pooling), and --alignment-only on the untrained encoder train.py's "before"; each title names
    # what each prediction saw
    import train
    out, saw_text = tmp_path / "run", "--test-input text: each prediction saw the target text alone"
    pooled = "CKA and retrieval compare the final layer's <s> vectors"
    train.main(["--model", str(tiny_model_dir), "--target-langs", "de,zh", "--batch-size", "8", "--max-steps", "2",
                "--out", str(out)])
    run = json.loads((out / "results.json").read_text())
    assert (out / "results.md").read_text().splitlines()[0].endswith(f"; {saw_text}; {pooled}")
    capsys.readouterr()
    evaluate.main(["--checkpoint", str(out / "best"), "--alignment"])
    printed, written = capsys.readouterr().out, (out / "results_test.md").read_text()
    assert printed.splitlines()[0] == written.splitlines()[0] == (
        f"xeroalign checkpoint {out / 'best'} on demo, test split; {saw_text}; {pooled}")
    after = lambda results: {lang: (row["cka"], row["retrieval"]) for lang, row in results["alignment"].items()}
    assert after(json.loads((out / "results_test.json").read_text())) == after(run)
    task = json.loads((out / "best" / "task.json").read_text())
    (out / "best" / "task.json").write_text(json.dumps({k: v for k, v in task.items() if k != "alignment_pooling"}))
    evaluate.main(["--checkpoint", str(out / "best"), "--alignment"])
    assert after(json.loads((out / "results_test.json").read_text())) == after(run)
    evaluate.main(["--checkpoint", str(out / "best"), "--method", "translate-test", "--test-input", "oracle"])
    assert (out / "results_test.md").read_text().splitlines()[0] == (
        f"translate-test checkpoint {out / 'best'} on demo, test split; --test-input oracle: each prediction saw the "
        "task's parallel source-language text, the human original (an oracle: an upper bound)")
    encoder = tmp_path / "encoder"
    evaluate.main(["--model", str(tiny_model_dir), "--alignment-only", "--target-langs", "de,zh",
                   "--out", str(encoder)])
    before = json.loads((encoder / "alignment.json").read_text())["alignment"]
    assert {lang: (row["cka"], row["retrieval"]) for lang, row in before.items()} == \
           {lang: (row["cka_before"], row["retrieval_before"]) for lang, row in run["alignment"].items()}
    title = (encoder / "alignment.md").read_text().splitlines()[0]
    assert title == f"{tiny_model_dir} on demo, test split; {pooled}"


def udpos_folder(folder, langs=("en", "de")):
    """A UD PUD folder: one tagged sentence per language, 60 times over, as test files (dev and train drawn
    from them)."""
    words = {"en": [("We", "PRON"), ("walk", "VERB"), (".", "PUNCT")], "de": [("Wir", "PRON"), ("gehen", "VERB"),
                                                                              (".", "PUNCT")]}
    folder.mkdir(parents=True, exist_ok=True)
    for lang in langs:
        rows = "".join(f"# sent_id = n{i:03d}\n" + "".join(f"{j + 1}\t{w}\t_\t{t}\t_\t_\t0\t_\t_\t_\n"
                                                          for j, (w, t) in enumerate(words[lang])) + "\n"
                       for i in range(60))
        (folder / f"{lang}_pud-ud-test.conllu").write_text(rows, encoding="utf-8")
    return folder


def test_evaluate_on_dev_predicts_from_the_input_given_else_as_train_py_scores_dev(tmp_path, tiny_model_dir,
                                                                                  monkeypatch):
    # FILTER's dev rule is the oracle (train.py's dev scores): evaluate.py --split dev keeps it where no input is
    # given, and predicts from the input given (--test-input, --plain-inference), each title saying which
    import train
    from minxlt.run import flags
    seen, predictor = [], flags.METHODS["filter"].predictor
    monkeypatch.setattr(flags.METHODS["filter"], "predictor",
                        lambda self, model, test_input: seen.append(test_input) or predictor(self, model, test_input))
    out = tmp_path / "run"
    train.main(["--model", str(tiny_model_dir), "--method", "filter", "--target-langs", "de", "--batch-size", "8",
                "--max-steps", "2", "--eval-every", "2", "--no-alignment", "--no-test", "--out", str(out)])
    assert seen == ["oracle"]
    for given, expected, stem in ((["--plain-inference"], "text", "results_dev_plain"),
                                  (["--test-input", "text"], "text", "results_dev"), ([], "oracle", "results_dev")):
        seen.clear()
        evaluate.main(["--checkpoint", str(out / "best"), "--split", "dev", *given])
        assert seen == [expected] and json.loads((out / f"{stem}.json").read_text())["test_input"]["input"] == expected
        assert f"--test-input {expected}: each prediction saw" in (out / f"{stem}.md").read_text().splitlines()[0]
    # --max-length beyond the model's positions: refused in a line, as train.py refuses it
    with pytest.raises(InputError, match=r"^--max-length 200 does not fit the model's 128 positions: lower it$"):
        evaluate.main(["--checkpoint", str(out / "best"), "--max-length", "200"])


def test_evaluate_tests_with_the_runs_translations_and_precision_from_any_folder(tmp_path, tiny_model_dir,
                                                                                 monkeypatch):
    # task.json keeps the run's --test-translations and --dev-translations (absolute) and its evaluation's autocast:
    # evaluate.py, from another folder, tests as the run tested, and its title says the autocast; --amp given wins
    import test_test_input
    import train
    monkeypatch.chdir(tmp_path)
    task = tasks.load_task("demo", targets=["de"])
    test_test_input.write_translations(tmp_path / "mt", task)
    english = {e.id: e.text for e in task.dev["en"]}
    (tmp_path / "mt-dev").mkdir()
    (tmp_path / "mt-dev" / "de.tsv").write_text("".join(f"{e.id}\t{english[e.id]}\n" for e in task.dev["de"]))
    out = tmp_path / "run"
    train.main(["--model", str(tiny_model_dir), "--method", "filter", "--target-langs", "de", "--batch-size", "8",
                "--max-steps", "2", "--no-alignment", "--test-translations", "mt", "--dev-translations", "mt-dev",
                "--amp", "bf16", "--out", str(out)])
    run = json.loads((out / "results.json").read_text())
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    evaluate.main(["--checkpoint", str(out / "best")])
    ours = json.loads((out / "results_test.json").read_text())
    assert ours["test_input"] == dict(run["test_input"], translations=str(tmp_path / "mt")) and ours["amp"] == "bf16"
    assert {lang: ours[lang] for lang in ("en", "de")} == {lang: run[lang] for lang in ("en", "de")}
    assert (out / "results_test.md").read_text().splitlines()[0].endswith("; computed under bf16 autocast")
    evaluate.main(["--checkpoint", str(out / "best"), "--amp", "none"])
    assert "autocast" not in (out / "results_test.md").read_text().splitlines()[0]
    evaluate.main(["--checkpoint", str(out / "best"), "--split", "dev"])  # dev as train.py scored it: its translations
    dev = json.loads((out / "results_dev.json").read_text())["test_input"]
    assert (dev["input"], dev["translations"]) == ("translation", str(tmp_path / "mt-dev"))


def test_evaluate_reads_the_runs_data_folder_from_any_folder(tmp_path, tiny_model_dir, monkeypatch):
    # task.json's --data is absolute: evaluate.py finds it from another folder, and where it is gone says it came from
    # task.json; a folder with none of the task's files is not answered with --target-langs; a Unicoder run's
    # encoder is measured on its run's task (unicoder.json)
    import shutil

    import train
    monkeypatch.chdir(tmp_path)
    udpos_folder(tmp_path / "ud")
    out = tmp_path / "run"
    train.main(["--model", str(tiny_model_dir), "--task", "udpos", "--data", "ud", "--target-langs", "de",
                "--batch-size", "8", "--max-steps", "2", "--no-alignment", "--no-test", "--out", str(out)])
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    evaluate.main(["--checkpoint", str(out / "best")])
    assert json.loads((out / "results_test.json").read_text())["de"]["n"] > 0
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"task udpos has no language\(s\) en, de in .*; it has none$"):
        evaluate.main(["--checkpoint", str(out / "best"), "--data", str(tmp_path / "empty")])
    encoder = tmp_path / "unicoder-best"
    shutil.copytree(tiny_model_dir, encoder)
    info = json.loads((out / "best" / "task.json").read_text())
    (encoder / "unicoder.json").write_text(json.dumps(dict(info, method="unicoder", alignment_pooling="cls")))
    evaluate.main(["--model", str(encoder), "--alignment-only", "--out", str(tmp_path / "a")])
    assert list(json.loads((tmp_path / "a" / "alignment.json").read_text())["alignment"]) == ["de"]
    assert (tmp_path / "a" / "alignment.md").read_text().startswith(f"{encoder} on udpos, test split")
    (tmp_path / "ud").rename(tmp_path / "moved")
    with pytest.raises(InputError, match=rf"^{re.escape(str(out / 'best' / 'task.json'))}: its run's data folder "
                                         rf"{re.escape(str(tmp_path / 'ud'))} is not there: give --data"):
        evaluate.main(["--checkpoint", str(out / "best")])


def test_the_docs_name_the_heads_that_load_in_transformers():
    # weights.transformers_head exports <s> under --head roberta, tags and QA; the docs say so, and name the rest
    from conftest import ROOT
    from minxlt.checkpoints.weights import transformers_head
    exported = {(style, pooling) for style in ("roberta", "linear", "relu", "joint", "token", "span")
                for pooling in ("cls", "mean", "pooler") if transformers_head(style, pooling, {}, ["a"], False)}
    poolings = ("cls", "mean", "pooler")
    assert exported == {("roberta", "cls"), *((style, p) for style in ("token", "span") for p in poolings)}
    for page in ("training.md", "evaluation.md"):
        text = " ".join((ROOT / "docs" / page).read_text().split())
        assert "`--head linear` or `relu`, `--pooling mean` or `pooler` and xSID's joint" in text, page
