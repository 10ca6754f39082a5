"""flags.py: a run's settings, resolved once from the flags (given, else the method's or the task's
default, else the flag's own) and read-only from then on; what results.json records; a flag of
another method refused rather than ignored."""
import ast
import inspect
import json
import math
import pickle
import textwrap
from dataclasses import FrozenInstanceError

import pytest

import data
import train
from conftest import make_method
from methods import Run
from minxlt import tasks
from minxlt.errors import InputError
from minxlt.run import compiled, flags
from minxlt.run.flags import METHODS


@pytest.fixture
def run(tiny_model_dir):
    from minxlt.text.tokenizer import Tokenizer
    return Run(tasks.load_task("demo", targets=["de"]), Tokenizer.from_pretrained(tiny_model_dir), 64, num_layers=2)


def test_settings_are_read_only(run):
    settings = make_method("xeroalign", run).settings
    with pytest.raises(FrozenInstanceError, match="settings are read-only"):
        settings.lr = 1.0
    with pytest.raises(FrozenInstanceError):
        del settings.max_steps
    with pytest.raises(AttributeError, match="no setting 'learning_rate'"):
        settings.learning_rate
    assert isinstance(make_method("xeroalign", run, "--target-langs", "de").settings.target_langs, tuple)  # nor inside
    again = pickle.loads(pickle.dumps(settings))  # loader processes that spawn receive them pickled
    assert again.as_dict() == settings.as_dict() and again.lr == settings.lr


def test_each_setting_comes_from_the_first_that_gives_it(run):
    pairs = len(run.task.train["de"]) + len(run.task.train["en"])  # X-Mixup's epoch: every (target, source) pair, English's own too
    total = lambda method: sum(phase.steps for phase in method.phases(method.training_items()))
    method = make_method("xmixup", run)  # sentence labels: the paper's first layer, alpha 0.4 (the method's defaults)
    settings = method.settings
    assert (settings.mixup_layer, settings.mixup_alpha, settings.batch_size, total(method)) == (1, 0.4, 32, 50)
    assert settings.max_length == 64 and settings.group_by_length is True and settings.test_input == "oracle"
    method = make_method("xmixup", run, "--batch-size", "64", "--epochs", "4", "--mixup-layer", "2")  # given beats the default
    assert (method.settings.max_steps, total(method), method.settings.mixup_layer) == (None, math.ceil(pairs / 64) * 4, 2)
    assert make_method("xmixup", run, "--task", "xquad").settings.mixup_alpha == 0.4  # the task is the run's: demo
    contrastive = make_method("contrastive", run, "--max-steps", "40")
    assert [phase.steps for phase in contrastive.phases(contrastive.training_items())] == [30, 10]  # follows --max-steps
    assert contrastive.settings.sa_lr == pytest.approx(5e-5 / 5) and contrastive.settings.group_by_length is False
    assert make_method("xeroalign", run).settings.self_pairs is False and make_method("filter", run).settings.self_pairs
    with pytest.raises(SystemExit):
        flags.parse(["--method", "xeroalign", "--epochs", "2", "--max-steps", "5"])


@pytest.mark.parametrize("argv,message", [
    (["--method", "xeroalign", "--mixup-layer", "2"], "--mixup-layer is a flag of --method xmixup; --method xeroalign does not read it"),
    (["--method", "filter", "--parallel", "a.de,a.en"], "--parallel is a flag of --method unicoder; --method filter does not read it"),
    (["--kl-weight", "0.3"], "--kl-weight is a flag of --method filter; --method xeroalign does not read it"),  # the default's
    (["--method", "zero-shot", "--teacher-cache", "t.pt"], "--teacher-cache is a flag of --method filter and --method xmixup"),
])
def test_a_flag_the_method_does_not_read_is_refused(run, argv, message, capsys):
    with pytest.raises(SystemExit):
        flags.parse(argv)
    assert message in capsys.readouterr().err
    with pytest.raises(InputError, match="--teacher-cache t.pt does not exist yet: give --teacher CKPT"):
        flags.resolve(flags.parse(["--method", "xmixup", "--teacher-cache", "t.pt"]), run)


@pytest.mark.parametrize("argv,message", [
    (["--offload"], "--offload moves a sharded run's parts to host memory: add --shard"),
    (["--shard-embeddings"], "--shard-embeddings makes the embeddings a unit of a sharded model: add --shard"),
    (["--shard", "--shard-embeddings", "--method", "unicoder"], "--shard-embeddings: Unicoder's LM head reads"),
    (["--patience", "2", "--select-on", "last"], "--patience 2 stops when the dev score stops improving, and --select-on last"),
    (["--method", "contrastive", "--patience", "2"], "--patience would end the run before the second"),
    (["--method", "xmixup", "--round-trip", "rt/de.txt"], "--round-trip and --soft-labels name a file a language"),
    (["--method", "contrastive", "--epochs", "2", "--eval-every", "epoch"], "an epoch is no evaluation point across both"),
    (["--async-checkpoint"], "--async-checkpoint writes a sharded run's checkpoint: add --shard"),
    (["--shard", "--amp", "fp16"], "--shard computes in bf16 or float32: give --amp bf16"),
    (["--shard", "--compile", "--compile-mode", "reduce-overhead"], "--compile-mode reduce-overhead .CUDA graphs. with --grad-accum or --shard"),
    (["--grad-accum", "2", "--compile", "--compile-mode", "reduce-overhead"], "the graphs' memory would hold the gradients"),
    (["--grad-accum", "2", "--compile", "--compile-mode", "max-autotune"], "max-autotune .CUDA graphs. with --grad-accum"),
    (["--compile-mode", "default"], "--compile-mode chooses how --compile compiles: add --compile"),
])
def test_sharding_options_that_do_not_go_together_are_refused(run, argv, message):
    with pytest.raises(InputError, match=message):
        flags.resolve(flags.parse(["--method", "zero-shot", *argv]), run)


def test_contrastive_without_semantic_alignment_may_stop_early(run):
    flags.resolve(flags.parse(["--method", "contrastive", "--sa-steps", "0", "--patience", "2"]), run)


def test_the_modes_that_capture_cuda_graphs_are_inductor_s():
    from torch._inductor import list_mode_options
    assert compiled.GRAPHS == tuple(m for m in compiled.MODES if list_mode_options(m).get("triton.cudagraphs"))


def test_asynchronous_checkpoints_need_torch_s_staging(run, monkeypatch):
    assert flags.staging_available()  # this torch has it: the flag resolves
    flags.resolve(flags.parse(["--method", "zero-shot", "--shard", "--async-checkpoint"]), run)
    monkeypatch.setattr(flags, "staging_available", lambda: False)  # as on torch before 2.9
    with pytest.raises(InputError, match=r"--async-checkpoint needs torch 2.9 or later .* upgrade torch, or leave --async-checkpoint out"):
        flags.resolve(flags.parse(["--method", "zero-shot", "--shard", "--async-checkpoint"]), run)


def test_a_method_reads_its_own_flags_only():
    # what a method computes reads the flags every run has and its own (its Settings), never another method's
    read_by = {}
    own = {name: {f.name for f in flags.own_flags(method)} for name, method in METHODS.items()}
    for name, method in METHODS.items():
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
        read = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "settings"}
        foreign = set().union(*(flags_ for other, flags_ in own.items() if other != name)) - own[name] - set(flags.DEFAULTS)
        assert not read & foreign, (name, read & foreign)
        read_by[name] = read
    assert {"mixup_layer", "sa_steps", "max_steps"} <= read_by["xmixup"] | read_by["contrastive"]  # the test sees them


def test_results_record_the_resolved_settings(tmp_path, tiny_model_dir):
    out = tmp_path / "run"
    train.main(["--model", str(tiny_model_dir), "--target-langs", "de", "--method", "xmixup", "--epochs", "1", "--batch-size", "64",
                "--eval-every", "100", "--no-alignment", "--out", str(out)])
    settings = json.loads((out / "results.json").read_text())["settings"]
    assert settings["max_steps"] == math.ceil(2 * 336 / 64) and settings["max_length"] == 128  # (de, en) and (en, en) pairs; the level's length
    assert settings["mixup_layer"] == 1 and settings["test_input"] == "oracle" and settings["target_langs"] == ["de"]
    info = json.loads((out / "best" / "task.json").read_text())  # the method's own settings, and its ratio's trained W and b
    assert info["mixup_layer"] == 1 and set(info["parameters"]) == {"ratio_net.linear.weight", "ratio_net.linear.bias"}


def test_a_level_the_method_does_not_train_on_is_refused_first():
    # translate-test on a word-level task whose languages are not parallel (PAN-X's layout): the level is
    # what the method cannot do, before which test input it would see
    task = data.Task("panx", ["O", "B-PER"], "en", ["de"], {"en": []}, {}, {}, level="word", parallel=False)
    with pytest.raises(InputError, match="--method translate-test trains on sentence labels; --task panx labels words: use"):
        make_method("translate-test", Run(task, None, 128))


@pytest.mark.parametrize("command", ["train", "evaluate"])
def test_help_reads_in_80_columns_and_gives_every_default(monkeypatch, command):
    # a newcomer's terminal: no line wider than 80, a paragraph broken only where its next word would
    # not fit (not where the source's line ended), every flag explained, with the default it takes
    import evaluate
    monkeypatch.setenv("COLUMNS", "80")
    parser = flags.parser(train.__doc__) if command == "train" else evaluate.arguments()
    lines = parser.format_help().splitlines()
    assert max(map(len, lines)) <= 80, [line for line in lines if len(line) > 80]
    description = lines[next(i for i, line in enumerate(lines) if not line.strip()):lines.index("options:")]
    for line, after in zip(description, description[1:]):
        indent = lambda text: len(text) - len(text.lstrip())
        continues = after.strip() and line.strip() and not line.endswith("\\") and (
            indent(after) == indent(line) == 0 or indent(after) > indent(line) > 0)  # prose, or a method's hanging lines
        if continues and not line.endswith(":"):
            assert len(line) + 1 + len(after.split()[0]) > 80 - 2, (line, after)  # argparse fills to the terminal less 2
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            assert action.help, action.option_strings
            default = flags.DEFAULTS.get(action.dest) if command == "train" else action.default
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                assert "default" in action.help or "default" in parser.format_help(), action.option_strings
    assert "runs/default/best" in evaluate.__doc__ and "runs/demo" not in evaluate.__doc__  # what the quick start writes


def test_a_run_starts_by_saying_what_it_will_do(run, capsys):
    # the first lines a newcomer reads: how long, which model is tested, where the results go, how to
    # stop and go on; padding only where --no-group-by-length gave away what grouping saves
    from pathlib import Path
    from minxlt.run import bookkeeping

    def start_report(method, out):  # what the run's Book says before the first step
        phases, _ = method.phases(method.training_items()), capsys.readouterr()
        bookkeeping.Book(Path(out), method.settings, run, Path("model"), phases)
        return capsys.readouterr().err
    method = make_method("xeroalign", run)
    items = len(method.phases(method.training_items())[0].items)
    report = start_report(method, "runs/default")
    assert report.splitlines()[0] == (f"xeroalign on demo: 50 steps of 32 from {items} training items; "
                                      "the model tested is the model after the last step, scored on en dev")  # its one evaluation
    assert "writing runs/default: log.jsonl, best/" in report and "--resume continues" in report and "padding" not in report
    method = make_method("contrastive", run, "--max-steps", "120", "--eval-every", "40", "--no-group-by-length")
    report = start_report(method, "out")
    assert "contrastive on demo: label alignment, 90 steps of 32 from" in report and "; semantic alignment, 30 steps of 32 from" in report
    assert "the best on en dev, scored every 40 steps" in report and "padding" not in report  # its batches are drawn at random
    method = make_method("zero-shot", run, "--no-group-by-length", "--select-on", "last", "--batch-size", "8")
    report = start_report(method, "out")
    assert "the model tested is the model after the last step\n" in report and "--group-by-length would make it" in report
