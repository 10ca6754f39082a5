"""A new method is one file and one line in flags.METHODS: docs/methods.md's example, added here, trains,
logs its loss's parts, resumes and is tested as every method is; and what a method inherits is the
interface alone."""
import json
import types

import pytest

import methods
import train
from minxlt.run import flags

DOCS = (train.__file__.rsplit("/", 1)[0] + "/docs/methods.md")


def example():
    """docs/methods.md's l2align.py, as the page gives it, made a module."""
    text = open(DOCS, encoding="utf-8").read()
    code = text[text.index("### Adding a method"):].split("```python\n")[1].split("```")[0]
    module = types.ModuleType("l2align")
    exec(compile(code, "l2align.py", "exec"), module.__dict__)
    return module.L2Align


@pytest.fixture
def l2align(monkeypatch):
    method = example()
    monkeypatch.setitem(flags.METHODS, "l2align", method)
    return method


def test_the_example_of_adding_a_method_trains_and_is_tested(tmp_path, tiny_model_dir, l2align, capsys):
    argv = ["--model", str(tiny_model_dir), "--method", "l2align", "--target-langs", "de", "--max-steps", "4",
            "--batch-size", "8", "--log-every", "1", "--eval-every", "2", "--no-alignment", "--l2-weight", "0.5"]
    train.main(argv + ["--out", str(tmp_path / "run")])
    records = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    losses = [r for r in records if "loss" in r]
    assert [r["step"] for r in losses] == [1, 2, 3, 4]
    assert all(r["loss"] == pytest.approx(r["task"] + 0.5 * r["l2"], rel=1e-5) and r["l2"] > 0 for r in losses)
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert set(results) >= {"de", "en", "average"} and results["settings"]["l2_weight"] == 0.5
    train.main(argv + ["--out", str(tmp_path / "split"), "--stop-at", "2"])  # stopped, then resumed: the same losses
    train.main(argv + ["--out", str(tmp_path / "split"), "--resume"])
    resumed = [json.loads(line) for line in (tmp_path / "split" / "log.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in resumed if "loss" in r] == [r["loss"] for r in losses]
    with pytest.raises(SystemExit):
        flags.parse(["--method", "l2align", "--help"])
    assert "--l2-weight X" in capsys.readouterr().out and "weight of the L2 term (default: 0.1)" in " ".join(
        flags.parser(method="l2align").format_help().split())
    # a common flag's default as the method sets it: FILTER pairs a text with itself, contrastive batches unsorted
    said = {method: " ".join(flags.parser(method=method).format_help().split()) for method in ("filter", "contrastive")}
    assert "pair each source text with itself too (default: True)" in said["filter"]
    assert "batch texts of similar length --" in said["contrastive"] and "length (default: True)" in said["filter"]


def test_a_method_inherits_the_interface_alone():
    # twelve names: what train.py calls; everything else a method needs comes with its run (methods.Run)
    names = {name for name in vars(methods.Method) if not name.startswith("__")}
    assert names == {"draws", "levels", "test_inputs", "training_items", "phases", "build", "wrap", "start", "make_batch",
                     "loss", "predictor", "evaluate"}
    for name, method in flags.METHODS.items():
        inherited = {n for base in method.__mro__[1:] if base is not object for n in vars(base) if not n.startswith("__")}
        assert inherited <= names, (name, inherited - names)
