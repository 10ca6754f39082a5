"""What --epochs counts (a pass over the method's own training items, as its authors' code counts
them), what --select-on keeps as OUT/best, and --eval-every epoch."""
import json
import math
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

import data
import train
from conftest import make_method
from methods import Run
from minxlt import tasks
from minxlt.errors import InputError
from minxlt.run import bookkeeping, flags

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def run(tiny_model_dir):
    from minxlt.text.tokenizer import Tokenizer
    return Run(tasks.load_task("demo", targets=["de", "zh"]), Tokenizer.from_pretrained(tiny_model_dir), 64, num_layers=2)


def total(method):
    """The steps of a method's phases: --max-steps, or what --epochs counts."""
    return sum(phase.steps for phase in method.phases(method.training_items()))


def visited(method):
    """Every training item the batch plan gives over the run's --max-steps, by (language, id) or a pair's."""
    seen = Counter()
    key = lambda it: (it.lang, it.id) if not isinstance(it, tuple) else tuple((side.lang, side.id) for side in it)

    def record(items, weights, step):
        seen.update(key(it) for it, w in zip(items, weights) if w)
    phases = [replace(phase, make_batch=record) for phase in method.phases(method.training_items())]
    for _ in bookkeeping.StepBatches(method.settings, method, phases):  # every step's
        pass
    return seen


def test_an_epoch_of_translate_train_visits_every_text_once(run):
    method = make_method("translate-train", run, "--epochs", "1", "--batch-size", "32")
    items = method.training_items()
    assert len(items) == 3 * 336  # English and both translations: XTREME's concatenated training set
    assert total(method) == math.ceil(len(items) / 32)
    seen = visited(method)
    assert len(seen) == len(items) and set(seen.values()) == {1}
    assert {lang for lang, _ in seen} == {"en", "de", "zh"}


@pytest.mark.parametrize("name", ["filter", "xmixup"])
def test_an_epoch_of_a_pair_method_visits_every_pair_once_english_with_itself_too(run, name):
    method = make_method(name, run, "--epochs", "1", "--batch-size", "24")
    seen = visited(method)
    assert len(seen) == 3 * 336 and set(seen.values()) == {1}  # (en, de), (en, zh) and (en, en) for each English example
    assert sum(source == target for source, target in seen) == 336
    assert total(method) == math.ceil(3 * 336 / 24)
    without = make_method(name, run, "--epochs", "1", "--batch-size", "24", "--no-self-pairs")
    assert total(without) == math.ceil(2 * 336 / 24) and len(visited(without)) == 2 * 336


def test_an_epoch_of_xeroalign_counts_the_english_examples(run):
    method = make_method("xeroalign", run, "--epochs", "2", "--batch-size", "32")
    assert total(method) == 2 * math.ceil(336 / 32) and method.settings.self_pairs is False
    assert len(method.training_items()) == 2 * 336  # the pairs it draws from: each source with each of its translations


def test_contrastive_has_epochs_of_its_own_for_semantic_alignment(run, capsys):
    method = make_method("contrastive", run, "--epochs", "2", "--batch-size", "16")
    label_alignment = 2 * math.ceil(3 * 336 / 16)  # D and D_bi
    phases = method.phases(method.training_items())
    assert [p.steps for p in phases] == [label_alignment, 2 * math.ceil(336 / 16)] and len(phases[1].items) == 336
    def steps(*given):
        method = make_method("contrastive", run, *given)
        return [p.steps for p in method.phases(method.training_items())]
    assert steps("--epochs", "2", "--sa-epochs", "1", "--batch-size", "16") == [label_alignment, 21]
    assert steps("--epochs", "2", "--sa-steps", "5", "--batch-size", "16") == [label_alignment, 5]
    assert steps("--max-steps", "40") == [30, 10]  # with --max-steps: its last quarter
    capsys.readouterr()
    assert steps("--max-steps", "3") == [3] and "note: --max-steps 3 leaves no step to semantic alignment (a quarter " \
                                                "of them rounds to 0): give --sa-steps for one" in capsys.readouterr().err
    with pytest.raises(InputError, match="--sa-epochs counts passes with --epochs"):
        make_method("contrastive", run, "--max-steps", "40", "--sa-epochs", "1")


def test_few_shot_epochs_count_the_sample_and_its_translations(run):
    few = replace(run, task=data.few_shot(run.task, 0.1, 5, seed=0))
    method = make_method("translate-train", few, "--epochs", "1", "--batch-size", "8", "--train-fraction", "0.1", "--translated", "5")
    assert total(method) == math.ceil((40 + 2 * 5) / 8)  # ceil(0.1 x 42) of each of 8 intents, 5 of them translated


def test_eval_every_epoch_and_what_an_epoch_counts(run):
    method = make_method("zero-shot", run, "--epochs", "3", "--batch-size", "32", "--eval-every", "epoch")
    phases = method.phases(method.training_items())
    assert sum(phase.steps for phase in phases) == 33  # 336 examples of 8 intents in batches of 32, 3 times
    assert bookkeeping.Book(Path("out"), method.settings, run, Path("model"), phases).eval_every == 11
    with pytest.raises(InputError, match="--eval-every epoch evaluates once an epoch: give --epochs"):
        make_method("zero-shot", run, "--eval-every", "epoch")
    counted = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    counted = counted[counted.index("## What one epoch counts"):].split("\n## ")[0]
    assert all(f"| `{name}` |" in counted for name in flags.METHODS)  # every method's, with its authors' code


def test_a_plan_resolves_without_data():
    # reproduce.py's plan: the flags and the defaults, --max-steps unset where --epochs counts the data
    values = flags.planned(["--method", "xmixup", "--task", "xnli", "--batch-size", "64", "--epochs", "4"], "xnli", 24)
    assert (values["batch_size"], values["epochs"], values["max_steps"], values["mixup_layer"], values["self_pairs"]) == (64, 4, None, 1, True)
    values = flags.planned(["--method", "contrastive", "--task", "xnli", "--epochs", "5"], "xnli", 12)
    assert (values["sa_epochs"], values["sa_steps"], values["sa_lr"]) == (5, None, 5e-5 / 5)  # the phases count sa_steps
    assert flags.planned(["--method", "filter", "--task", "xquad"], "xquad", 24)["filter_k"] == 20


def dev_records(out):
    return [r for r in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "dev_accuracy" in r]


@pytest.mark.parametrize("select_on", ["all", "last"])
def test_select_on(tmp_path, tiny_model_dir, select_on):
    out = tmp_path / select_on
    train.main(["--model", str(tiny_model_dir), "--target-langs", "de,zh", "--method", "zero-shot", "--batch-size", "8",
                "--max-steps", "6", "--eval-every", "2", "--lr", "3e-3", "--no-alignment", "--select-on", select_on, "--out", str(out)])
    records, results = dev_records(out), json.loads((out / "results.json").read_text())
    task_info = json.loads((out / "best" / "task.json").read_text())
    if select_on == "last":  # FILTER's and XeroAlign's code: the model after the last step, scored once
        assert [r["step"] for r in records] == [6] and results["best_step"] == task_info["step"] == 6
        return
    means = {r["step"]: sum(r["dev_accuracy"].values()) / 3 for r in records}  # X-Mixup's: every language's dev score, their mean
    assert [r["step"] for r in records] == [2, 4, 6] and all(set(r["dev_accuracy"]) == {"en", "de", "zh"} for r in records)
    best = max(means, key=lambda step: (means[step], -step))  # the first of the best
    assert results["best_step"] == best and results["dev_accuracy"] == pytest.approx(means[best])
