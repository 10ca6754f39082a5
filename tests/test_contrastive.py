"""Yu & Joty: co-training (Algorithm 1) on a toy problem, the contrastive method's phases and
groups, the few-shot settings, and extra labelled examples."""
import json
import random
import re
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

import cotrain
import data
import evaluate
import train
from conftest import free_port, join_process_group_env, make_method, make_run
from cotrain import co_train, select
from minxlt import tasks
from minxlt.errors import InputError
from model import Classifier

# A toy problem: texts are the numbers 0-59, labelled by parity. Each view is sure and right on one
# half and unsure and wrong on the other, unless it has been given the label.
POOL = {f"x:{n}": data.Example(id=str(n), lang="x", text=str(n)) for n in range(60)}
TRUTH = {key: ("even", "odd")[int(e.text) % 2] for key, e in POOL.items()}
LABELED = [data.Example(id=f"l{n}", lang="en", text=f"l{n}", label=("even", "odd")[n % 2]) for n in range(9)]


def view(knows):
    """A learner that memorises what it is given and otherwise guesses from its view."""
    def fit(examples, round_):
        memory = {f"x:{e.text}": e.label for e in examples if e.lang == "x"}

        def predict(unlabelled):
            out = {}
            for key, e in unlabelled.items():
                if key in memory:
                    out[key] = (memory[key], 1.0)
                elif knows(int(e.text)):
                    out[key] = (TRUTH[key], 0.95)
                else:  # wrong, and not sure of it
                    out[key] = ({"even": "odd", "odd": "even"}[TRUTH[key]], 0.6)
            return out
        return predict
    return fit


def accuracy(fit, examples):
    predictions = fit(examples, None)(POOL)
    return sum(label == TRUTH[key] for key, (label, _) in predictions.items()) / len(POOL)


def test_exchange_of_confident_labels_improves_each_view():
    fit_lm, fit_emb = view(lambda n: n < 30), view(lambda n: n >= 30)
    rounds = []
    D_lm, D_emb = co_train(fit_lm, fit_emb, LABELED, POOL, iterations=3, threshold=0.9, seed=0,
                           on_round=lambda r, picks_lm, picks_emb: rounds.append((picks_lm, picks_emb)))
    assert accuracy(fit_lm, D_lm) > accuracy(fit_lm, LABELED) == 0.5
    assert accuracy(fit_emb, D_emb) > accuracy(fit_emb, LABELED) == 0.5
    for picks_lm, picks_emb in rounds:
        assert len(picks_lm) == len(picks_emb) == len(LABELED) // 3  # the n/3 cap
        assert all(c > 0.9 for _, c in list(picks_lm.values()) + list(picks_emb.values()))
        assert all(label == TRUTH[key] for key, (label, _) in list(picks_lm.items()) + list(picks_emb.items()))
    given_to_lm = [e for e in D_lm if e.lang == "x"]
    assert len(given_to_lm) == 9 and len({e.id for e in given_to_lm}) == 9  # f_emb gives each text away once
    assert any(int(e.text) >= 30 for e in given_to_lm)  # including texts where f_lm was wrong


def test_self_training_gives_a_view_its_own_picks():
    # the paper's baseline (Dong and de Melo 2019): one view, its confident predictions join its own set,
    # wrong ones included when it is sure of them; its accuracy gains nothing it did not already know
    fit = view(lambda n: n < 30)
    rounds = []
    D_lm, D_emb = co_train(fit, None, LABELED, POOL, iterations=3, threshold=0.9, seed=0,
                           on_round=lambda r, picks_lm, picks_emb: rounds.append((picks_lm, picks_emb)))
    assert D_emb == LABELED and all(picks_emb == {} for _, picks_emb in rounds)
    own = [e for e in D_lm if e.lang == "x"]
    assert len(own) == 9 and {f"x:{e.text}" for e in own} == {key for picks, _ in rounds for key in picks}
    assert all(int(e.text) < 30 for e in own)  # only what it was already sure of: no text where it was wrong
    assert accuracy(fit, D_lm) == accuracy(fit, LABELED)


def test_selection_threshold_and_cap():
    predictions = {"a": ("x", 0.95), "b": ("y", 0.9), "c": ("x", 0.99), "d": ("y", 0.2), "e": ("x", 0.91)}
    assert select(predictions, 0.9, cap=10, rng=random.Random(0)) == {k: predictions[k] for k in ("a", "c", "e")}  # strictly above
    chosen = select(predictions, 0.9, cap=2, rng=random.Random(0))
    assert len(chosen) == 2 and set(chosen) <= {"a", "c", "e"}
    assert chosen == select(predictions, 0.9, cap=2, rng=random.Random(0))


def test_replayed_rounds_are_not_refitted_and_a_resumed_run_picks_what_an_uninterrupted_one_does():
    fitted = []

    def counting(fit):
        return lambda examples, round_: fitted.append(round_) or fit(examples, round_)
    rounds = []
    full = co_train(view(lambda n: n < 30), view(lambda n: n >= 30), LABELED, POOL, 4, 0.9, 0,
                    on_round=lambda r, a, b: rounds.append((a, b)))
    assert all(len(picks) == 3 for both in rounds for picks in both)  # 3 of about 30 above the threshold: drawn
    for done in (1, 2):  # stopped after `done` rounds, resumed in a new process: the rounds replayed, the rest drawn
        fitted.clear()
        later = []
        resumed = co_train(counting(view(lambda n: n < 30)), counting(view(lambda n: n >= 30)), LABELED, POOL, 4, 0.9,
                           0, history=rounds[:done], on_round=lambda r, a, b: later.append((a, b)))
        assert fitted == [r for r in range(done, 4) for _ in ("lm", "emb")]
        assert later == rounds[done:] and resumed == full  # every round's picks, and the final sets
    other = []
    co_train(view(lambda n: n < 30), view(lambda n: n >= 30), LABELED, POOL, 4, 0.9, 1,
             on_round=lambda r, a, b: other.append((a, b)))
    assert other != rounds  # --seed draws them


def test_cotrain_run(tmp_path, tiny_model_dir, capsys, monkeypatch):
    out = tmp_path / "co"
    argv = ["--model", str(tiny_model_dir), "--embedding-model", str(tiny_model_dir),
            "--target-langs", "de", "--batch-size", "8", "--max-steps", "2", "--eval-every", "2", "--cotrain-iterations", "2",
            "--threshold", "0.0", "--train-fraction", "0.2", "--out", str(out)]
    cotrain.main(argv)
    pool = [json.loads(line) for line in open(out / "pool.jsonl")]
    assert len(pool) == 336 and {p["lang"] for p in pool} == {"de"}
    picks = [json.loads((out / f"round{r}" / "picks.json").read_text()) for r in (0, 1)]
    n = len(data.few_shot(tasks.load_task("demo", targets=["de"]), 0.2).train["en"])
    assert all(len(p["lm"]) == len(p["emb"]) == n // 3 for p in picks)
    assert not set(picks[0]["lm"]) & set(picks[1]["lm"])  # a text is given away once
    extra = [json.loads(line) for line in open(out / "final" / "lm-extra.jsonl")]
    assert {e["id"] for e in extra} == set(picks[0]["emb"]) | set(picks[1]["emb"])  # f_emb's picks train f_lm
    results = json.loads((out / "results.json").read_text())
    assert results["pseudo_labels"] == {"lm": 2 * (n // 3), "emb": 2 * (n // 3)} and "de" in results["embedding_model"]
    assert json.loads((out / "final" / "emb" / "best" / "task.json").read_text())["pooling"] == "mean"
    # resuming replays the recorded rounds and does the final fits again
    cotrain.main(argv + ["--resume"])
    assert json.loads((out / "results.json").read_text())["pseudo_labels"] == results["pseudo_labels"]
    # a --resume with other settings than the run's own (OUT/cotrain.json) is refused, naming them
    with pytest.raises(InputError, match=r"co belongs to another co-training run \(threshold 0.0 there, 0.5 here; "
                                         r"lr 5e-05 there, 0.001 here\): resume with that run's settings"):
        cotrain.main(argv + ["--resume", "--threshold", "0.5", "--lr", "1e-3"])
    assert json.loads((out / "cotrain.json").read_text())["threshold"] == 0.0
    # a smaller pool: a random sample of each target language's texts; a threshold nothing passes says so
    capsys.readouterr()
    cotrain.main(argv[:-2] + ["--cotrain-iterations", "1", "--pool-per-lang", "30", "--threshold", "1.0", "--out", str(tmp_path / "small")])
    pool = [json.loads(line) for line in open(tmp_path / "small" / "pool.jsonl")]
    german = {e.id: e.text for e in tasks.load_task("demo", targets=["de"]).train["de"]}
    assert len(pool) == 30 and all(german[p["key"].partition(":")[2]] == p["text"] for p in pool)
    assert json.loads((tmp_path / "small" / "round0" / "picks.json").read_text()) == {"lm": {}, "emb": {}}
    assert "nothing was exchanged" in capsys.readouterr().err
    with pytest.raises(tasks.InputError, match=r"another co-training run \(pool_per_lang None there, 30 here\)"):
        cotrain.main(argv + ["--resume", "--pool-per-lang", "30"])  # another pool than the rounds recorded drew from
    assert len((out / "pool.jsonl").read_text().splitlines()) == 336  # the recorded pool kept
    # a fine-tuning stopped before its end (here --stop-at; Ctrl-C, SIGTERM) stops co-training, its round unrecorded
    with pytest.raises(SystemExit, match="co-training stopped in round 0: continue with the same command and --resume"):
        cotrain.main(argv[:-2] + ["--cotrain-iterations", "1", "--stop-at", "1", "--out", str(tmp_path / "stopped")])
    assert not (tmp_path / "stopped" / "round0" / "picks.json").exists()
    runs = []  # --resume continues that fine-tuning from its checkpoint, not from its start
    real = train.main
    monkeypatch.setattr(cotrain.train, "main", lambda argv: runs.append(argv) or real(argv))
    cotrain.main(argv[:-2] + ["--cotrain-iterations", "1", "--out", str(tmp_path / "stopped"), "--resume"])
    assert "--resume" in runs[0] and "--overwrite" not in runs[0] and (tmp_path / "stopped" / "round0" / "picks.json").exists()
    for flag in ("--method=xeroalign", "--extra-train", "--no-test"):
        with pytest.raises(SystemExit):
            cotrain.get_args(argv + [flag])
    assert "--no-test: co-training sets it for each fine-tuning run" in capsys.readouterr().err


def test_a_stopped_co_training_resumes_its_fine_tunings_and_skips_those_that_finished(tmp_path, tiny_model_dir,
                                                                                       monkeypatch):
    out = tmp_path / "co"
    argv = ["--model", str(tiny_model_dir), "--embedding-model", str(tiny_model_dir), "--target-langs", "de",
            "--batch-size", "8", "--max-steps", "2", "--eval-every", "2", "--save-every", "3",  # rounds: no checkpoint
            "--cotrain-iterations", "1", "--threshold", "0.0", "--train-fraction", "0.2", "--out", str(out)]
    real_main, real_test, runs = train.main, train.test, []
    where = lambda out: "/".join(Path(out).parts[-2:])
    stops = {"final/lm": "--stop-at", "final/emb": "test"}  # each once: a Ctrl-C (a SIGTERM) in a final fine-tuning

    def main(argv):
        out = where(argv[argv.index("--out") + 1])
        runs.append((out, "--resume" in argv))
        return real_main(argv + (["--stop-at", "1"] if stops.get(out) == "--stop-at" and stops.pop(out) else []))

    def test(settings, *rest):
        if stops.get(where(settings.out)) == "test" and stops.pop(where(settings.out)):
            raise KeyboardInterrupt
        return real_test(settings, *rest)
    monkeypatch.setattr(cotrain.train, "main", main)
    monkeypatch.setattr(cotrain.train, "test", test)
    with pytest.raises(SystemExit, match=r"^co-training stopped in the final fine-tuning of f_lm: continue with the "
                                         r"same command and --resume$"):
        cotrain.main(argv)
    assert runs == [("round0/lm", False), ("round0/emb", False), ("final/lm", False)]
    runs.clear()
    # the rounds' fine-tunings finished (their `done`; no checkpoint): not run again; f_lm's continued from its checkpoint
    with pytest.raises(SystemExit, match=r"^co-training stopped in the final fine-tuning of f_emb \(interrupted during "
                                         r"the test\): continue with the same command and --resume$"):
        cotrain.main(argv + ["--resume"])
    assert runs == [("final/lm", True), ("final/emb", False)]
    runs.clear()
    cotrain.main(argv + ["--resume"])
    assert runs == [("final/emb", False)]  # trained, not tested, no checkpoint: fine-tuned again
    assert re.match(r"co-training on demo \(f_lm zero-shot, 1 round, \d+ pseudo-labels\): f_lm's final model, test split, "
                    r"best dev step 2[^\n]*\n\n\| ", (out / "results.md").read_text())
    assert json.loads((out / "results.json").read_text())["embedding_model"]["settings"]["method"] == "zero-shot"
    # a Ctrl-C outside train.py's loop (f_lm's model loading, here) says how to go on, as one inside it does
    monkeypatch.setattr(cotrain.Classifier, "load", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(SystemExit, match=r"^co-training stopped in round 0: continue with the same command and --resume$"):
        cotrain.main(argv[:-1] + [str(tmp_path / "interrupted")])


def test_co_training_a_sentence_pair_task_predicts_and_labels_each_pair(tmp_path, tiny_model_dir):
    header, data = "id\tsentence1\tsentence2\tlabel\n", tmp_path / "pawsx"
    for lang, names in (("en", ["train", "dev_2k", "test_2k"]), ("de", ["translated_train", "dev_2k", "test_2k"])):
        rows = "".join(f"{i}\t{lang} erste {i} a\t{lang} zweite {i % 5} b\t{i % 2}\n" for i in range(1, 31))
        for name in names:
            (data / lang).mkdir(parents=True, exist_ok=True)
            (data / lang / f"{name}.tsv").write_text(header + rows)
    out = tmp_path / "co"
    cotrain.main(["--model", str(tiny_model_dir), "--task", "pawsx", "--data", str(data), "--target-langs", "de",
                  "--batch-size", "8", "--max-steps", "1", "--eval-every", "1", "--cotrain-iterations", "1",
                  "--threshold", "0.0", "--self-training", "--out", str(out)])
    pool = {p["key"]: p for p in map(json.loads, open(out / "pool.jsonl"))}
    assert len(pool) == 30 and all(p["pair"] == f"de zweite {int(k[3:]) % 5} b" for k, p in pool.items())
    extra = [json.loads(line) for line in open(out / "final" / "lm-extra.jsonl")]
    assert len(extra) == 10 and all(e["pair"] == pool[e["id"]]["pair"] for e in extra)  # read back: pairs required
    # the predictions see each pair: they differ from those of the first texts alone
    model, tokenizer, _ = Classifier.load(out / "round0" / "lm" / "best")
    texts, pairs = [p["text"] for p in pool.values()], [p["pair"] for p in pool.values()]
    both = evaluate.predict_probabilities(model, tokenizer, texts, pairs, 7, 64, "cpu")
    ids, mask = tokenizer.batch(texts, pairs, max_length=64)
    assert torch.allclose(both, model(ids, mask)[0].softmax(-1), atol=1e-5)
    assert not torch.allclose(both, evaluate.predict_probabilities(model, tokenizer, texts, None, 7, 64, "cpu"))


def test_self_training_and_language_adaptation_with_co_training_runs(tmp_path, tiny_model_dir, monkeypatch):
    common = ["--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "8", "--max-steps", "2", "--eval-every", "2",
              "--cotrain-iterations", "1", "--threshold", "0.0", "--train-fraction", "0.2"]
    cotrain.main(common + ["--self-training", "--out", str(tmp_path / "self")])
    picks = json.loads((tmp_path / "self" / "round0" / "picks.json").read_text())
    extra = [json.loads(line) for line in open(tmp_path / "self" / "final" / "lm-extra.jsonl")]
    assert picks["emb"] == {} and {e["id"] for e in extra} == set(picks["lm"]) and picks["lm"]  # f_lm's own picks train f_lm
    results = json.loads((tmp_path / "self" / "results.json").read_text())
    assert results["embedding_model"] is None and not (tmp_path / "self" / "final" / "emb").exists()
    assert results["settings"]["method"] == "zero-shot"
    cotrain.main(common + ["--embedding-model", str(tiny_model_dir), "--lm-method", "contrastive", "--translated", "20",
                           "--tau", "0.2", "--sa-group=2", "--out", str(tmp_path / "adapted")])
    results = json.loads((tmp_path / "adapted" / "results.json").read_text())
    assert results["settings"]["method"] == "contrastive" and "de" in results["embedding_model"]
    assert (results["settings"]["tau"], results["settings"]["sa_group"]) == (0.2, 2)  # f_lm's method's flags: its own
    assert "tau" not in results["embedding_model"]["settings"]  # f_emb's zero-shot runs are not given them
    log = [json.loads(line) for line in open(tmp_path / "adapted" / "final" / "lm" / "log.jsonl") if '"loss"' in line]
    assert any("la" in r for r in log)  # f_lm trained with label alignment
    emb = json.loads((tmp_path / "adapted" / "final" / "emb" / "results.json").read_text())
    assert emb["settings"]["method"] == "zero-shot"
    with pytest.raises(SystemExit):
        cotrain.get_args(common + ["--self-training", "--embedding-model", str(tiny_model_dir)])
    # both views' flags are checked before any training: f_emb's (zero-shot) as well as f_lm's
    assert cotrain.common(["--tau", "0.2", "--lr", "1e-4", "--sa-group=2", "--seed", "3"], "contrastive") == [
        "--lr", "1e-4", "--seed", "3"]
    checked = []
    monkeypatch.setattr(cotrain.flags, "parse", lambda argv: checked.append(argv[argv.index("--method") + 1]))
    cotrain.get_args(common + ["--lm-method", "contrastive", "--tau", "0.2"])
    assert sorted(checked) == ["contrastive", "zero-shot"]


def test_semantic_alignment_groups(tiny_model_dir):
    from minxlt.text.tokenizer import Tokenizer
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    task = tasks.load_task("demo", targets=["de", "zh", "hi"])
    run = make_run(task.labels, tokenizer=tokenizer)
    encoded = {lang: run.encode(task.train[lang][::8]) for lang in task.train}  # every intent
    translations = {}
    for lang in ("de", "zh", "hi"):
        for it in encoded[lang]:
            translations.setdefault(it.id, {})[lang] = it
    anchors = encoded["en"]
    method = make_method("contrastive", run, "--sa-group", "2")
    method.translations_of, method.anchors = translations, anchors
    batch = method.group_batch(anchors[:3], [1.0] * 3, 7)
    rows = batch["input_ids"].view(3, 5, -1)
    lengths = batch["attention_mask"].view(3, 5, -1).sum(-1)
    labels = batch["labels"].view(3, 5)
    for a, anchor in enumerate(anchors[:3]):
        text = lambda p: rows[a, p, :lengths[a, p]].tolist()
        assert text(0) == anchor.ids
        assert all(text(p) in [t.ids for t in translations[anchor.id].values()] for p in (1, 2))  # its own translations
        assert labels[a, 1].item() == labels[a, 2].item() == anchor.label
        assert labels[a, 3].item() != anchor.label and labels[a, 4].item() != anchor.label  # negatives do not
    # An anchor's group depends on the step and the anchor alone, not on how the batch is split
    # into micro-steps or processes.
    def groups(batch):
        texts = [row[:n].tolist() for row, n in zip(batch["input_ids"], batch["attention_mask"].sum(-1))]
        return [(texts[i:i + 5], batch["labels"][i:i + 5].tolist()) for i in range(0, len(texts), 5)]
    split = [method.group_batch(part, [1.0] * len(part), 7) for part in (anchors[:1], anchors[1:3])]
    assert groups(batch) == groups(split[0]) + groups(split[1])


def test_contrastive_phases(tmp_path, tiny_model_dir):
    out = tmp_path / "c"
    train.main(["--model", str(tiny_model_dir), "--method", "contrastive", "--target-langs", "de,zh", "--batch-size", "8",
                "--max-steps", "6", "--sa-steps", "2", "--lr", "1e-3", "--sa-lr", "2e-4", "--warmup", "0", "--eval-every", "3",
                "--log-every", "1", "--no-alignment", "--out", str(out)])
    log = [json.loads(line) for line in open(out / "log.jsonl") if '"loss"' in line]
    assert ["la" in r for r in log] == [True] * 4 + [False] * 2 and all("sa" in r for r in log[4:])
    assert json.loads((out / "results.json").read_text())["settings"]["group_by_length"] is False  # Eq. 2 contrasts a random batch
    # the learning rate for the next step: phase one decays from 1e-3 over 4 steps, phase two from 2e-4 over 2
    assert [round(r["lr"], 6) for r in log] == [0.00075, 0.0005, 0.00025, 0.0002, 0.0001, 0.0]


def test_few_shot_settings():
    task = tasks.load_task("demo", targets=["de", "zh"])
    few = data.few_shot(task, fraction=0.1, translated=5, seed=3)
    counts = {}
    for e in few.train["en"]:
        counts[e.label] = counts.get(e.label, 0) + 1
    assert set(counts) == set(task.labels) and all(c == 5 for c in counts.values())  # ceil(0.1 * 42) per label
    assert len(few.train["de"]) == len(few.train["zh"]) == 5
    assert {e.id for e in few.train["de"]} <= {e.id for e in few.train["en"]}
    assert few.test == task.test and few_shot_ids(few) == few_shot_ids(data.few_shot(task, 0.1, 5, seed=3))


def test_a_few_shot_sample_without_translations_is_refused_naming_the_sample(tiny_model_dir):
    from methods import Run
    from minxlt.text.tokenizer import Tokenizer
    task = data.few_shot(tasks.load_task("demo", targets=["de"]), 0.1, translated=0)
    run = Run(task, Tokenizer.from_pretrained(tiny_model_dir), 64)
    with pytest.raises(InputError, match=re.escape("(they come from: the target languages' training files; a few-shot "
                                                   "sample (--train-fraction 0.1, --translated 0) keeps those of its "
                                                   "examples alone)")):
        make_method("translate-train", run, "--train-fraction", "0.1", "--translated", "0").training_items()


def few_shot_ids(task):
    return [e.id for e in task.train["en"]], [e.id for e in task.train["de"]]


def test_extra_train_file(tmp_path, tiny_model_dir):
    path = tmp_path / "extra.jsonl"
    path.write_text('{"id": "p1", "lang": "de", "text": "Weck mich um sieben", "label": "alarm"}\n')
    assert [e.label for e in tasks.read_jsonl_examples(path, ["alarm", "music"])] == ["alarm"]
    path.write_text('{"id": "p1", "lang": "de", "text": "x", "label": "alarm"}\n{"id": "p2", "text": "y"}\n')
    with pytest.raises(tasks.DataError, match="extra.jsonl:2: not an object with id, lang, text and label"):
        tasks.read_jsonl_examples(path, ["alarm"])
    path.write_text('{"id": "p1", "lang": "de", "text": "x", "label": "cooking"}\n')
    with pytest.raises(tasks.DataError, match="extra.jsonl:1: unknown label 'cooking'"):
        tasks.read_jsonl_examples(path, ["alarm"])
    path.write_text('{"id": "p1", "lang": "de", "text": "x", "label": "alarm"}\n')  # a sentence-pair task's lack one
    with pytest.raises(tasks.DataError, match=r'extra.jsonl:1: no "pair": the task\'s examples are sentence pairs'):
        tasks.read_jsonl_examples(path, ["alarm"], pairs=True)
    path.write_text('{"id": "p1", "lang": "de", "text": "x", "pair": "y", "label": "alarm"}\n')
    assert [e.pair for e in tasks.read_jsonl_examples(path, ["alarm"], pairs=True)] == ["y"]
    with pytest.raises(tasks.DataError, match=r'extra.jsonl:1: a "pair", but the task\'s examples are single texts'):
        tasks.read_jsonl_examples(path, ["alarm"])
    path.write_text('{"id": "p1", "lang": "de", "text": "Weck mich um sieben", "label": "alarm"}\n')
    for method, draws in (("filter", "pairs"), ("unicoder", "parallel sentences")):  # neither reads them
        with pytest.raises(InputError, match=rf"--method {method} \(trained on {draws}\) cannot use"):
            train.main(["--model", str(tiny_model_dir), "--method", method, "--extra-train", str(path), "--out", str(tmp_path / "r")])


def worker(rank, world_size, port, argv, result_dir):
    join_process_group_env(rank, world_size, port)
    model = train.main(argv)
    torch.save(model.state_dict(), f"{result_dir}/rank{rank}.pt")


def test_label_alignment_is_over_the_global_batch(tmp_path, tiny_model_dir):
    # With dropout 0, one process and two give the same losses at every step, in both phases: label
    # alignment (Eq. 2) contrasts the whole global batch, and its gradient reaches every text
    argv = ["--model", str(tiny_model_dir), "--method", "contrastive", "--target-langs", "de,zh", "--batch-size", "8",
            "--max-steps", "6", "--sa-steps", "2", "--eval-every", "6", "--log-every", "1", "--no-alignment", "--no-test", "--dropout", "0",
            "--lr", "2e-3"]
    train.main(argv + ["--out", str(tmp_path / "one")])
    mp.spawn(worker, args=(2, free_port(), argv + ["--out", str(tmp_path / "two")], str(tmp_path)), nprocs=2)
    logs = {run: [json.loads(line) for line in open(tmp_path / run / "log.jsonl") if '"loss"' in line] for run in ("one", "two")}
    for key in ("loss", "task"):
        assert [r[key] for r in logs["two"]] == pytest.approx([r[key] for r in logs["one"]], rel=1e-5)
    assert [r["la"] for r in logs["two"][:4]] == pytest.approx([r["la"] for r in logs["one"][:4]], rel=1e-5)
    # the loss over 8 texts is not the mean of two losses over 4 of them (what each process alone would compute)
    from losses import label_alignment_loss
    torch.manual_seed(0)
    vectors, labels = torch.randn(8, 16), torch.tensor([0, 1, 0, 1, 2, 2, 0, 1])
    halves = [label_alignment_loss(vectors[i::2], labels[i::2]) for i in range(2)]
    assert abs(label_alignment_loss(vectors, labels) - sum(halves) / 2) > 1e-2
    with pytest.raises(InputError, match="--method contrastive takes --grad-accum 1"):
        train.main(argv + ["--grad-accum", "2", "--out", str(tmp_path / "accum")])


def test_contrastive_under_two_processes(tmp_path, tiny_model_dir):
    argv = ["--model", str(tiny_model_dir), "--method", "contrastive", "--target-langs", "de,zh", "--batch-size", "6",
            "--max-steps", "4", "--sa-steps", "2", "--eval-every", "4", "--no-alignment", "--out", str(tmp_path / "run")]
    mp.spawn(worker, args=(2, free_port(), argv, str(tmp_path)), nprocs=2)
    rank0, rank1 = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)


def test_each_process_keeps_its_anchors_share_of_label_alignment():
    # Two processes of a global batch of 10 (the second holds a padded example of weight 0): each
    # keeps its own anchors' part of Eq. 2, and the parts, weighted by each process's share of the
    # examples as the training loop weights a loss, add up to Eq. 2 over the whole batch, written
    # out anchor by anchor.
    from test_losses import label_alignment_by_loop

    from contrastive import share_of_label_alignment
    from losses import label_alignment_terms
    torch.manual_seed(0)
    vectors, labels = torch.randn(10, 6), torch.tensor([0, 1, 0, 2, 1, 0, 3, 1, 2, 0])
    weights = torch.tensor([1.0] * 9 + [0.0])
    per_anchor, anchors = label_alignment_terms(vectors, labels, 0.3, weights)
    parts = [share_of_label_alignment(per_anchor, anchors, weights, slice(r * 5, r * 5 + 5)) for r in range(2)]
    shares = [weights[:5].sum() / weights.sum(), weights[5:].sum() / weights.sum()]
    whole = label_alignment_by_loop(vectors[:9], labels[:9], 0.3)
    assert sum(s * p for s, p in zip(shares, parts)).item() == pytest.approx(whole, rel=1e-5)
    assert parts[0].item() != pytest.approx(whole, rel=1e-2)  # neither part is the whole alone
