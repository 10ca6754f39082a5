"""bench_data.py: the set it generates is read as XNLI in XTREME's layout, and its four runs print
their rows, with the second run on a set reusing the first's token cache."""
import re

from bench import data as bench_data
from minxlt.tasks import load_task


def test_generated_set_reads_as_xtreme_xnli(tmp_path):
    bench_data.write_xnli(tmp_path, 30, ["de", "zh"])
    task = load_task("xnli", tmp_path)
    assert task.source == "en" and sorted(task.targets) == ["de", "zh"]
    assert [len(task.train[lang]) for lang in ("en", "de", "zh")] == [30, 30, 30]  # each translation paired with its source
    assert [e.id for e in task.train["de"]] == [e.id for e in task.train["en"]]


def test_generated_set_reads_as_sib200(tmp_path):
    bench_data.write_sib200(tmp_path, 30, ["de", "zh"])
    task = load_task("sib200", tmp_path)
    assert task.source == "eng_Latn" and sorted(task.targets) == ["deu_Latn", "zho_Hans"]
    assert [len(task.train[lang]) for lang in ("eng_Latn", "deu_Latn", "zho_Hans")] == [30, 30, 30]
    assert [e.id for e in task.train["deu_Latn"]] == [e.id for e in task.train["eng_Latn"]]
    assert [e.label for e in task.train["zho_Hans"]] == [e.label for e in task.train["eng_Latn"]]


def test_four_runs_and_the_ratio(tiny_model_dir, capsys):
    bench_data.main(["--pairs", "40", "--langs", "1", "--model", str(tiny_model_dir)])
    out = capsys.readouterr().out
    rows = re.findall(r"^\| (small|full) set, cache (built|reused) \| (\d+) \| ([\d.]+) \| (\d+) \|$", out, re.M)
    assert [(size, how, int(pairs)) for size, how, pairs, _, _ in rows] == [
        ("small", "built", 8), ("small", "reused", 8), ("full", "built", 80), ("full", "reused", 80)]
    assert re.search(r"cache reused / built: \d+\.\d\d", out) and re.search(r"token cache on disk: \d+ B per training pair", out)
    for how in ("cache built \\(a cold first run\\)", "cache reused"):
        assert re.search(rf"before the model, {how}: peak \d+ MiB on the small set, \d+ MiB on the full set: -?\d+ B per training pair", out)
