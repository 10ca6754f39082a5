"""compare_logs.py: the same records agree whatever their wall-clock times; any other difference is reported."""
import json

import pytest

from dev import compare_logs


def write_run(directory, losses, seconds, accuracy=0.5):
    directory.mkdir(parents=True)
    records = [{"step": i + 1, "loss": loss, "lr": 1e-4, "seconds": s} for i, (loss, s) in enumerate(zip(losses, seconds))]
    records.append({"step": len(losses), "dev_accuracy": {"en": accuracy}})
    (directory / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (directory / "results.json").write_text(json.dumps({"en": {"accuracy": accuracy}, "args": {"out": str(directory)}}))


def run(capsys, *argv):
    with pytest.raises(SystemExit) as done:
        compare_logs.main([str(a) for a in argv])
    return done.value.code, capsys.readouterr().out


def test_identical_runs_agree_whatever_their_times_and_outputs(tmp_path, capsys):
    write_run(tmp_path / "a" / "zero-shot", [2.0, 1.5], [0.1, 0.2])
    write_run(tmp_path / "b" / "zero-shot", [2.0, 1.5], [9.0, 9.5])  # other wall-clock times, another --out
    code, out = run(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 0 and "zero-shot: identical (2 logged steps, 4 records)" in out


def test_a_different_loss_score_or_run_is_reported(tmp_path, capsys):
    write_run(tmp_path / "a" / "x", [2.0, 1.5], [0, 0])
    write_run(tmp_path / "b" / "x", [2.0, 1.5000001], [0, 0], accuracy=0.6)
    write_run(tmp_path / "a" / "only-here", [1.0], [0])
    code, out = run(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 1 and "[1].loss: 1.5 != 1.5000001" in out and "results.json.en.accuracy: 0.5 != 0.6" in out
    assert "only-here: only under" in out
    code, _ = run(capsys, tmp_path / "a" / "x", tmp_path / "b" / "x", "--tolerance", "1e-3")  # within a tolerance, only the score differs
    assert code == 1
