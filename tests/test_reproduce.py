"""reproduce.py: an experiment file run end to end (tiny model, bundled corpus, 2 seeds, 2 methods
and an evaluation), its table checked against numpy, finished runs skipped, a stopped run resumed
to the numbers of an uninterrupted one, a failing run reported, and bad files refused."""
import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import reproduce
from minxlt import tasks
from minxlt.experiments import jobs, report, spec
from minxlt.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
STEPS = ["--max-steps", "4", "--eval-every", "2", "--batch-size", "8", "--no-alignment"]


def experiment_file(folder, model, **changes):
    written = {
        "title": "tiny", "task": "demo", "model": str(model), "metric": "accuracy", "seeds": [0, 1], "flags": STEPS,
        "paper": {"table": "Nobody's Table 1", "average": "all"},
        "runs": [
            {"name": "zero-shot", "method": "zero-shot", "test_input": "text", "paper": {"en": 90.0, "de": 80.0, "average": 75.0}},
            {"name": "xeroalign", "method": "xeroalign", "test_input": "text"},
            {"name": "translate-test", "evaluate": "zero-shot", "method": "translate-test", "test_input": "oracle"},
            {"name": "broken", "method": "zero-shot", "test_input": "text", "flags": ["--max-length", "9999"]},
        ],
    }
    written.update(changes)
    path = folder / "tiny.json"
    path.write_text(json.dumps(written))
    return path


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_model_dir):
    """The experiment run once, after xeroalign seed 1 was stopped at step 2 (as Ctrl-C leaves a
    run: a checkpoint, no results); also that run uninterrupted, elsewhere, to compare."""
    folder = tmp_path_factory.mktemp("reproduce")
    path, out = experiment_file(folder, tiny_model_dir), folder / "runs"
    experiment = spec.load_experiment(path)
    job = next(j for j in jobs.jobs(experiment, out) if j.label == "xeroalign seed 1")
    argv = jobs.command(job, experiment, 1, {})
    job.log.parent.mkdir(parents=True)
    job.record_file.write_text(json.dumps(jobs.record(job, experiment, {})))  # as reproduce.py launches it
    subprocess.run(argv + ["--stop-at", "2"], check=True, capture_output=True)
    assert jobs.state(job) == "interrupted"
    whole = folder / "whole"
    subprocess.run([a if a != str(job.folder) else str(whole) for a in argv], check=True, capture_output=True)
    with pytest.raises(SystemExit) as exit:
        reproduce.main([str(path), "--out", str(out)])
    return path, out, whole, str(exit.value)


def job_of(path, out, name, seed):
    """The job of a run and seed of the file at `path`, its folder in OUT/<task>/ as reproduce.py names it."""
    return next(j for j in jobs.jobs(spec.load_experiment(path), out) if j.run.name == name and j.seed == seed)


def test_a_failing_run_is_named_with_its_log_and_the_others_finish(finished):
    path, out, _, message = finished
    assert "2 run(s) did not finish" in message and "broken seed 0: exit status 1" in message
    assert "--max-length 9999 does not fit the model's" in message  # the log's last lines
    for name in ("zero-shot", "xeroalign", "translate-test"):
        for seed in (0, 1):
            assert jobs.state(job_of(path, out, name, seed)) == "done"
    table = (out / "tiny" / "table.md").read_text()
    assert "broken (0 of 2 seeds; missing: seed 0, 1)" in table and "| missing |" in table


def test_a_stopped_run_resumes_to_the_numbers_of_an_uninterrupted_one(finished):
    path, out, whole, _ = finished
    resumed = json.loads((job_of(path, out, "xeroalign", 1).folder / "results.json").read_text())
    straight = json.loads((whole / "results.json").read_text())
    assert {k: v for k, v in resumed.items() if isinstance(v, dict) and "n" in v} == \
           {k: v for k, v in straight.items() if isinstance(v, dict) and "n" in v}
    losses = lambda folder: [r["loss"] for r in map(json.loads, (folder / "log.jsonl").read_text().splitlines()) if "loss" in r]
    assert losses(job_of(path, out, "xeroalign", 1).folder) == losses(whole) and losses(whole)
    log = job_of(path, out, "xeroalign", 1).log.read_text()
    assert "--resume" in log.splitlines()[0]


def test_finished_runs_are_skipped(finished, capsys):
    path, out, _, _ = finished
    results = {p: p.stat().st_mtime_ns for p in out.glob("demo/*-seed*/results*.json")}
    broken = {job_of(path, out, "broken", seed).log for seed in (0, 1)}
    logs = {p: p.read_text() for p in (out / "demo" / "logs").glob("*.log") if p not in broken}
    with pytest.raises(SystemExit):
        reproduce.main([str(path), "--out", str(out)])
    assert results == {p: p.stat().st_mtime_ns for p in out.glob("demo/*-seed*/results*.json")} and len(results) == 6
    assert logs == {p: p.read_text() for p in logs}  # nothing launched again but the failed run
    reproduce.main([str(path), "--out", str(out), "--dry-run"])
    listed = capsys.readouterr().out
    assert listed.count(", seeds 0-1 (finished: skipped)") == 3
    assert "broken, seeds 0-1 (started: run again with --overwrite)" in listed
    assert "8 runs (4 x 2 seeds): 6 done, 2 started" in listed


def scores(path, out, name, seed, metric="accuracy"):
    folder = job_of(path, out, name, seed).folder
    results = json.loads(((folder / "results.json") if (folder / "results.json").exists() else folder / "results_test.json").read_text())
    return {lang: 100 * row[metric] for lang, row in results.items() if isinstance(row, dict) and "n" in row}


def test_the_table_is_numpys_mean_and_sample_std(finished):
    path, out, _, _ = finished
    experiment = spec.load_experiment(path)
    rows = list(csv.DictReader((out / "tiny" / "table.csv").open()))
    checked = 0
    for name in ("zero-shot", "xeroalign", "translate-test"):
        per_seed = [scores(path, out, name, seed) for seed in (0, 1)]
        columns = {c.run.name: c for c in report.read_scores(experiment, out)}
        targets = [[v for lang, v in s.items() if lang != "en"] for s in per_seed]
        expected = {lang: [s[lang] for s in per_seed] for lang in per_seed[0]}
        expected["target average"] = [np.mean(t) for t in targets]
        expected["average, as the paper's"] = [np.mean([s[lang] for lang in ("en", "de")]) if name == "zero-shot" else np.mean(list(s.values()))
                                               for s in per_seed]
        for key, values in expected.items():
            mean, std, n = report.cell(columns[name], key)
            assert n == 2 and mean == pytest.approx(np.mean(values), abs=1e-9) and std == pytest.approx(np.std(values, ddof=1), abs=1e-9)
            row = next(r for r in rows if r["run"] == name and r["language"] == key)
            assert float(row["mean"]) == pytest.approx(np.mean(values), abs=0.006) and row["seeds"] == "2"
            assert float(row["std"]) == pytest.approx(np.std(values, ddof=1), abs=0.006)
            checked += 1
    assert checked > 20
    results = job_of(path, out, "zero-shot", 1).results  # a seed without French: no average over the same languages
    whole = results.read_text()
    try:
        results.write_text(json.dumps({k: v for k, v in json.loads(whole).items() if k != "fr"}))
        column = next(c for c in report.read_scores(experiment, out) if c.run.name == "zero-shot")
        assert report.cell(column, "fr") is None and report.cell(column, "target average") is None
        assert report.cell(column, "de") is not None
    finally:
        results.write_text(whole)
    row = next(r for r in rows if r["run"] == "zero-shot" and r["language"] == "de")
    assert float(row["paper"]) == 80.0 and float(row["difference"]) == pytest.approx(float(row["mean"]) - 80.0, abs=0.011)
    table = (out / "tiny" / "table.md").read_text()
    assert "zero-shot (2 seeds) | paper | Δ" in table and (out / "tiny" / "table.png").read_bytes()[:4] == b"\x89PNG"
    text, oracle = table.index("sees the target text alone"), table.index("sees the task's parallel source-language text")
    assert text < table.index("xeroalign (2 seeds)") < oracle < table.index("translate-test (2 seeds)")  # grouped by test input
    # each group, and each run's own table, titled by what its predictions saw
    assert "**--test-input text: each prediction sees the target text alone.**" in table
    assert "**--test-input oracle: each prediction sees the task's parallel source-language text" in table
    evaluated = (job_of(path, out, "translate-test", 0).folder / "results_test.md").read_text().splitlines()[0]
    assert "on demo, test split; --test-input oracle: each prediction saw the task's parallel" in evaluated


def test_a_missing_seed_is_named_and_never_averaged_over(finished, tmp_path):
    path, out, _, _ = finished
    copy = tmp_path / "runs"
    shutil.copytree(out, copy)
    (job_of(path, copy, "xeroalign", 1).folder / "results.json").unlink()
    reproduce.main([str(path), "--out", str(copy), "--report"])
    table = (copy / "tiny" / "table.md").read_text()
    assert "xeroalign (1 of 2 seeds; missing: seed 1)" in table
    column = next(c for c in report.read_scores(spec.load_experiment(path), copy) if c.run.name == "xeroalign")
    assert report.cell(column, "de") == (scores(path, copy, "xeroalign", 0)["de"], None, 1)
    # a run launched by hand (no record): counted where it reads no model, not where it does (which one is unknown)
    job_of(path, copy, "xeroalign", 0).record_file.unlink()
    job_of(path, copy, "translate-test", 0).record_file.unlink()
    reproduce.main([str(path), "--out", str(copy), "--report"])
    table = (copy / "tiny" / "table.md").read_text()
    assert "xeroalign (1 of 2 seeds; missing: seed 1)" in table and "changed, not counted: seed 0" in table
    with pytest.raises(InputError, match=r"tiny.json: metric 'f1': .*results.json has no such score; its scores: "
                                         r"accuracy, macro_f1$"):
        report.read_scores(spec.load_experiment(path), copy, "f1")
    # --report over a folder without any of its runs: refused, the table written before kept
    with pytest.raises(InputError, match=r"no run of .*tiny.json has results under .*elsewhere/demo/: nothing to report"):
        reproduce.main([str(path), "--out", str(tmp_path / "elsewhere"), "--report"])
    (tmp_path / "elsewhere" / "tiny").mkdir(parents=True)
    (tmp_path / "elsewhere" / "tiny" / "table.md").write_text("kept")
    with pytest.raises(InputError, match="nothing to report"):
        reproduce.main([str(path), "--out", str(tmp_path / "elsewhere"), "--report"])
    assert (tmp_path / "elsewhere" / "tiny" / "table.md").read_text() == "kept"


def bad(tmp_path, tiny_model_dir, **changes):
    with pytest.raises(InputError) as e:
        spec.load_experiment(experiment_file(tmp_path, tiny_model_dir, **changes))
    return str(e.value)


def runs_with(run):
    return [{"name": "zero-shot", "method": "zero-shot", "test_input": "text"}, run]


def test_bad_experiment_files_are_refused_naming_file_and_field(tmp_path, tiny_model_dir):
    where = str(tmp_path / "tiny.json")
    message = bad(tmp_path, tiny_model_dir, runs=runs_with({"name": "x", "method": "fliter", "test_input": "text"}))
    assert message.startswith(f"{where}: runs[1].method: unknown method 'fliter'") and "\n" not in message
    written = experiment_file(tmp_path, tiny_model_dir)
    broken = json.loads(written.read_text())
    del broken["seeds"]
    written.write_text(json.dumps(broken))
    with pytest.raises(InputError, match=r"tiny.json: seeds: missing$"):
        spec.load_experiment(written)
    assert bad(tmp_path, tiny_model_dir, runs=runs_with({"name": "x", "test_input": "text"})) == f"{where}: runs[1].method: missing"
    message = bad(tmp_path, tiny_model_dir, runs=runs_with({"name": "x", "method": "zero-shot", "test_input": "text", "seed": 3}))
    assert message.startswith(f"{where}: runs[1].seed: unknown field")
    message = bad(tmp_path, tiny_model_dir, runs=runs_with({"name": "x", "method": "zero-shot", "test_input": "text", "flags": ["--lr", "fast"]}))
    assert message.startswith(f"{where}: runs[1].flags: train.py refuses them: argument --lr") and "\n" not in message
    assert message.endswith("; python train.py --help lists the flags")  # train.py's flags, not reproduce.py's
    message = bad(tmp_path, tiny_model_dir, runs=runs_with({"name": "x", "method": "zero-shot", "test_input": "text", "flags": ["--offload"]}))
    assert message.startswith(f"{where}: runs[1].flags: train.py refuses them: --offload moves a sharded run's parts")
    for own in (["--lr", "fast"], ["--lr=fast"], ["--bogus"]):  # the file's own flags: named there
        assert bad(tmp_path, tiny_model_dir, flags=STEPS + own).startswith(f"{where}: flags: train.py refuses them: ")
    assert "runs[1].name: 'zero-shot' names runs[0] already" in bad(tmp_path, tiny_model_dir, runs=runs_with(
        {"name": "zero-shot", "method": "xeroalign", "test_input": "text"}))
    assert "runs[1].evaluate: 'zs' is not the name of a trained run" in bad(tmp_path, tiny_model_dir, runs=runs_with(
        {"name": "tt", "evaluate": "zs", "method": "translate-test", "test_input": "oracle"}))
    assert "flags: --seed is set by reproduce.py" in bad(tmp_path, tiny_model_dir, flags=["--seed", "3"])
    assert "seeds: a list of distinct integers" in bad(tmp_path, tiny_model_dir, seeds=[1, 1])
    assert "runs[1].test_input: --method xeroalign predicts from text, not oracle" in bad(tmp_path, tiny_model_dir, runs=runs_with(
        {"name": "x", "method": "xeroalign", "test_input": "oracle"}))
    written.write_text('{"title": "x",\n "task": }')
    with pytest.raises(InputError, match=r"tiny.json:2: not JSON"):
        spec.load_experiment(written)


def test_a_language_the_data_lacks_is_refused(tmp_path, tiny_model_dir):
    experiment = spec.load_experiment(experiment_file(tmp_path, tiny_model_dir, runs=runs_with(
        {"name": "x", "method": "zero-shot", "test_input": "text", "paper": {"en": 90, "xx": 50.0}})))
    with pytest.raises(InputError, match=r"tiny.json: runs\[1\].paper.xx: task demo has no language 'xx' \(it has de, en"):
        spec.check_languages(experiment)


SHARED = ROOT.parent / "shared" / "data" / "sib200"


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("*.json")), ids=lambda p: p.name)
def test_every_experiment_file_loads_and_lists_its_runs(path, capsys, tmp_path):
    experiment = spec.load_experiment(path)
    assert experiment.runs and experiment.seeds
    if experiment.paper:
        assert any(run.paper for run in experiment.runs) and "Table" in experiment.paper["table"]
    data = ["--data", str(SHARED)] if path.stem == "sib-200" and SHARED.is_dir() else []
    reproduce.main([str(path), "--dry-run", "--out", str(tmp_path)] + data)
    listed = capsys.readouterr().out
    assert f"{len(experiment.runs) * len(experiment.seeds)} runs" in listed and "torch.distributed.run" in listed
    assert f"{experiment.title}\n{experiment.about}\n" in listed  # what the file is, and what its runs cost beyond the table


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/data/sib200 (a sample of SIB-200)")
def test_the_sib200_file_reads_the_languages_of_its_data_folder():
    experiment = spec.load_experiment(ROOT / "experiments" / "sib-200.json", str(SHARED))
    spec.check_languages(experiment)  # no language named in the file: the folder's are the table's
    assert not any(run.paper for run in experiment.runs)


def test_the_command_line_help():
    text = subprocess.run([sys.executable, str(ROOT / "reproduce.py"), "--help"], capture_output=True, text=True).stdout
    assert "--nproc-per-node" in text and "--dry-run" in text and "--report" in text


def test_a_run_reads_another_runs_model_of_the_same_seed(tmp_path, tiny_model_dir):
    runs = [{"name": "filter", "method": "filter", "test_input": "oracle"},
            {"name": "filter-st", "method": "filter", "test_input": "oracle", "flags": ["--teacher", "{filter}"],
             "paper_table": "Nobody's Table 2", "paper_row": "+ ST", "paper": {"average": 80.0}}]
    experiment = spec.load_experiment(experiment_file(tmp_path, tiny_model_dir, runs=runs))
    todo = jobs.jobs(experiment, tmp_path / "out")
    student, teacher = (next(j for j in todo if j.label == label) for label in ("filter-st seed 1", "filter seed 1"))
    argv = jobs.command(student, experiment, 1, jobs.by_name(todo))
    assert argv[argv.index("--teacher") + 1] == str(teacher.folder / "best") and student.run.needs == ["filter"]
    assert teacher.folder == tmp_path / "out" / "demo" / f"{teacher.key}-seed1" and teacher.key.startswith("filter-")
    assert "filter-st: (the paper's numbers: Nobody's Table 2, '+ ST')" in report.markdown(experiment, report.read_scores(experiment, tmp_path / "out"))
    runs[1]["flags"] = ["--teacher", "{filtre}"]
    assert "runs[1].flags: {filtre} is not the name of a trained run before it (filter)" in bad(tmp_path, tiny_model_dir, runs=runs)


def test_flags_that_would_make_seeds_or_columns_share_a_setting_are_refused(tmp_path, tiny_model_dir):
    assert "runs[1].flags: --teacher-cache cannot be given here: it is a file each run writes for itself" in bad(
        tmp_path, tiny_model_dir, runs=runs_with({"name": "x", "method": "filter", "test_input": "oracle", "flags": ["--teacher-cache", "t.pt"]}))
    assert "runs[1].flags: --source-lang is the experiment's, in its top-level flags" in bad(
        tmp_path, tiny_model_dir, runs=runs_with({"name": "x", "method": "zero-shot", "test_input": "text", "flags": ["--source-lang=de"]}))
    assert "--split: an evaluation takes only" in bad(tmp_path, tiny_model_dir, runs=runs_with(
        {"name": "tt", "evaluate": "zero-shot", "method": "translate-test", "test_input": "oracle", "flags": ["--split", "dev"]}))
    for given in (["--source-lang", "de"], ["--source-lang=de"]):
        assert spec.load_experiment(experiment_file(tmp_path, tiny_model_dir, flags=STEPS + given)).source == "de"
    runs = runs_with({"name": "tt", "evaluate": "zero-shot", "method": "translate-test", "test_input": "translation",
                      "flags": ["--test-translations", "tt/test-{lang}-en.tsv"]})  # a path's {lang} is no run
    assert spec.load_experiment(experiment_file(tmp_path, tiny_model_dir, runs=runs)).runs[1].needs == ["zero-shot"]


def with_settings(tmp_path, tiny_model_dir, settings, run_settings=None, flags=STEPS):
    runs = [{"name": "zero-shot", "method": "zero-shot", "test_input": "text", **({"settings": run_settings} if run_settings else {})}]
    return experiment_file(tmp_path, tiny_model_dir, flags=flags, settings=settings, runs=runs)


def test_every_stated_setting_is_checked_against_the_runs_flags(tmp_path, tiny_model_dir, capsys):
    lr = {"paper": 1e-4, "paper_where": "Sec. 4", "script": 5e-5, "script_where": "run.sh:3"}
    path = with_settings(tmp_path, tiny_model_dir, {"lr": dict(lr, run=5e-5, departure="the script's, for the demo")})
    reproduce.main([str(path), "--dry-run", "--out", str(tmp_path / "out")])
    listed = capsys.readouterr().out
    assert "lr: paper 0.0001 (Sec. 4); script 5e-05 (run.sh:3); run 5e-05 *" in listed  # train.py's default 5e-5
    assert "every trained run, lr: the script's, for the demo" in listed
    problems = {
        "the 0.001 the file says": {"lr": dict(lr, run=1e-3, departure="x")},  # the flags resolve to another value
        "departs from the paper's 0.0001 with no departure listed": {"lr": dict(lr, run=5e-5)},
        "a departure is listed, but the run takes every value the paper and the script give": {
            "batch_size": {"paper": 8, "paper_where": "Sec. 4", "run": 8, "departure": "none really"}},
        "departs from the script's 64 with no departure listed": {  # the paper's value, where the authors' script has another
            "max_length": {"paper": 128, "paper_where": "Sec. 4", "script": 64, "script_where": "run.sh:4", "run": 128}},
        "neither the paper nor its authors' script gives it": {"warmup": {"paper": None, "script": None, "run": 0.1}},
        "is neither a setting of train.py": {"learning_rate": {"paper": None, "run": 1, "departure": "x"}},
        "runs[0].settings.seeds: run zero-shot resolves it to 2": None,
    }
    for message, settings in problems.items():
        if settings is None:  # a run's own settings, checked as the file's are
            path = with_settings(tmp_path, tiny_model_dir, {}, {"seeds": {"paper": 3, "paper_where": "x", "run": 3}})
        else:
            path = with_settings(tmp_path, tiny_model_dir, settings)
        with pytest.raises(InputError, match=re.escape(message)):
            spec.load_experiment(path)
    with pytest.raises(InputError, match=r"settings.lr.paper_where: missing: where the paper gives 0.0001"):
        spec.load_experiment(with_settings(tmp_path, tiny_model_dir, {"lr": {"paper": 1e-4, "run": 1e-4}}, flags=STEPS + ["--lr", "1e-4"]))


def test_every_paper_file_states_the_settings_that_decide_a_run():
    needed = {"lr", "batch_size", "max_length", "warmup", "weight_decay", "select_on", "seeds", "optimizer", "schedule",
              "group_by_length", "amp"}
    for path in sorted((ROOT / "experiments").glob("*.json")):
        experiment = spec.load_experiment(path)  # every stated setting checked (audit)
        if path.stem == "sib-200":
            continue
        for run in experiment.runs:
            if run.evaluate:
                continue
            stated = set(experiment.settings) | set(run.settings)
            assert needed <= stated and stated & {"epochs", "max_steps"}, (path.name, run.name, needed - stated)
            # where the authors' code pairs QA windows otherwise, and FILTER's KL over a translation's words: said
            # as settings, which --dry-run lists with their departures, not only in a note
            qa, tags = tasks.LAYOUTS[experiment.task].level == "span", path.stem in ("filter-udpos", "filter-panx")
            if qa and run.method in ("filter", "xmixup"):
                assert "window_pairing" in stated, (path.name, run.name)
            if tags and "--teacher" in run.flags:
                assert "kl_positions" in stated, (path.name, run.name)


def test_the_xquad_files_test_the_papers_eleven_languages_and_type_their_averages():
    # XQuAD has had Romanian since the papers: --target-langs leaves it out, so that the table's averages are over the papers' 11
    xmixup = spec.load_experiment(ROOT / "experiments" / "xmixup-xquad.json")
    for experiment in (spec.load_experiment(ROOT / "experiments" / "filter-xquad.json"), xmixup):
        assert (experiment.task, experiment.metrics, experiment.paper["average"]) == ("xquad-squad", ["f1", "exact_match"], "all")
        targets = experiment.flags[experiment.flags.index("--target-langs") + 1].split(",")
        assert ["en", *targets] == [lang for lang in tasks.XQUAD_LANGS if lang != "ro"]
    # Table 15's rows that run, XLM-R's and X-Mixup's: each average is the mean of its 11 languages, as typed
    rows = {run.paper_row: run for run in xmixup.runs if run.paper_table == "X-Mixup Table 15"}
    assert sorted(rows) == ["X-Mixup", "XLM-R"]
    for row, run in rows.items():
        for metric, scores in run.papers.items():
            assert set(scores) == {"en", *targets, "average"}, (row, metric)
            assert scores["average"] == pytest.approx(sum(v for k, v in scores.items() if k != "average") / 11, abs=0.05), (row, metric)
    # F1 is never below exact match for one set of predictions: the one place Table 15 prints it so is X-Mixup's Chinese
    # (72.4 / 75.6), typed as printed (the averages are of it), which the row's note says
    below = [(row, lang) for row, run in rows.items() for lang, f1 in run.papers["f1"].items() if f1 < run.papers["exact_match"][lang]]
    assert below == [("X-Mixup", "zh")] and "72.4 / 75.6, F1 below exact match" in rows["X-Mixup"].note


def test_a_run_made_otherwise_goes_to_a_folder_of_its_own_and_one_from_another_model_is_changed(finished, tmp_path, capsys):
    path, out, _, _ = finished
    written = json.loads(path.read_text())
    written["runs"] = [dict(r, flags=["--lr", "1e-3"]) if r["name"] == "zero-shot" else r for r in written["runs"] if r["name"] != "broken"]
    edited = tmp_path / "tiny.json"
    edited.write_text(json.dumps(written))
    copy = tmp_path / "runs"
    shutil.copytree(out, copy)
    experiment = spec.load_experiment(edited)
    named = jobs.by_name(jobs.jobs(experiment, copy))
    before = job_of(path, copy, "zero-shot", 0)
    assert named["zero-shot", None, 0].folder != before.folder and before.results.is_file()  # the old results are kept where they are
    assert [jobs.status(named["zero-shot", None, s], experiment, named) for s in (0, 1)] == ["new"] * 2
    assert jobs.status(named["xeroalign", None, 0], experiment, named) == "done"  # unchanged: the same folder
    reproduce.main([str(edited), "--out", str(copy)])  # the edited run trains; its evaluation, of a new model, too
    table = (copy / "tiny" / "table.md").read_text()
    assert "zero-shot (2 seeds)" in table and "translate-test (2 seeds)" in table and "lr 0.001" in table
    # a model retrained in place (its files rewritten): what was made from it is changed, not counted, until run again
    teacher = named["zero-shot", None, 0].best / "task.json"
    teacher.write_text(teacher.read_text())
    assert jobs.status(named["translate-test", None, 0], experiment, named) == "changed"
    reproduce.main([str(edited), "--out", str(copy), "--dry-run"])
    listed = capsys.readouterr().out
    assert listed.count("changed: not counted; --rerun-changed runs it again") == 1
    assert ("translate-test, seeds 0-1 (seed 0 changed: not counted; --rerun-changed runs it again with --overwrite; "
            "seed 1 finished: skipped)") in listed
    with pytest.raises(SystemExit, match="1 run\\(s\\) did not finish"):
        reproduce.main([str(edited), "--out", str(copy)])  # nothing runs again unasked
    assert "translate-test (1 of 2 seeds; changed, not counted: seed 0)" in (copy / "tiny" / "table.md").read_text()
    reproduce.main([str(edited), "--out", str(copy), "--rerun-changed"])
    assert "changed" not in (copy / "tiny" / "table.md").read_text()
    assert named["translate-test", None, 0].log.read_text().count("$ ") == 2  # run again, its model having changed


def test_a_difference_over_fewer_seeds_is_marked_and_another_models_row_has_none(tmp_path, tiny_model_dir):
    experiment = spec.load_experiment(experiment_file(tmp_path, tiny_model_dir, runs=[
        {"name": "zero-shot", "method": "zero-shot", "test_input": "text", "paper": {"de": 80.0}},
        {"name": "other", "method": "zero-shot", "test_input": "text", "paper": {"de": 70.0}, "paper_model": "Their own model"}]))
    columns = [report.Column(experiment.runs[0], [0], [1], {"de": {0: 81.0}}),
               report.Column(experiment.runs[1], [0, 1], [], {"de": {0: 75.0, 1: 77.0}})]
    table = report.markdown(experiment, columns)
    assert "| de | 81.0 | 80.0 | +1.0 (1 of 2 seeds) | 76.0 ± 1.4 | 70.0 |" in table
    assert "other (2 seeds) | paper (another model) |" in table and "The paper's row is of another model: Their own model." in table
    assert ",other,zero-shot,de,2,76.00,1.41,70.0,," in report.csv_text(experiment, columns)


def test_a_cotraining_run_is_run_by_cotrain_py(tmp_path, tiny_model_dir):
    runs = [{"name": "self-training", "cotrain": True, "test_input": "text", "flags": ["--self-training", "--threshold", "0.5"],
             "settings": {"threshold": {"paper": None, "run": 0.5, "departure": "the demo's"}}},
            {"name": "adapted", "cotrain": True, "test_input": "text", "flags": ["--lm-method", "contrastive"]}]
    experiment = spec.load_experiment(experiment_file(tmp_path, tiny_model_dir, runs=runs))
    assert [run.method for run in experiment.runs] == ["zero-shot", "contrastive"]
    job = jobs.jobs(experiment, tmp_path / "out")[0]
    argv = jobs.command(job, experiment, 1, {})
    assert argv[argv.index("--nproc-per-node") + 2].endswith("cotrain.py") and "--method" not in argv and "--self-training" in argv
    assert jobs.state(job) == "new"
    job.folder.mkdir(parents=True)
    (job.folder / "pool.jsonl").write_text("")
    assert jobs.state(job) == "interrupted" and "--resume" in jobs.command(job, experiment, 1, {})
    assert job.best == job.folder / "final" / "lm" / "best"
    message = bad(tmp_path, tiny_model_dir, runs=runs_with({"name": "x", "cotrain": True, "test_input": "text", "flags": ["--threshold", "2"]}))
    assert "runs[1].flags: cotrain.py refuses them: argument --threshold" in message
    assert message.endswith("; python cotrain.py --help lists the flags")
    assert "runs[1].cotrain: true for a run of cotrain.py" in bad(tmp_path, tiny_model_dir, runs=runs_with(
        {"name": "x", "cotrain": "yes", "test_input": "text"}))


def test_two_files_that_ask_for_the_same_run_share_its_folder(tmp_path, tiny_model_dir, capsys):
    first = spec.load_experiment(experiment_file(tmp_path, tiny_model_dir))
    other = tmp_path / "other.json"
    other.write_text(json.dumps(dict(json.loads(first.path.read_text()), title="other", runs=[
        {"name": "zs", "method": "zero-shot", "test_input": "text"},  # the same run, named otherwise
        {"name": "xeroalign", "method": "xeroalign", "test_input": "text", "flags": ["--align-weight", "2"]}])))  # another run
    keys, theirs = jobs.run_keys(first), jobs.run_keys(spec.load_experiment(other))
    assert keys["zero-shot", None] == theirs["zs", None] and keys["xeroalign", None] != theirs["xeroalign", None]
    reproduce.main([str(first.path), "--dry-run", "--out", str(tmp_path / "out")])
    listed = capsys.readouterr().out
    assert "zero-shot, seeds 0-1 (to run; shared with other.json (zs))" in listed
    assert "xeroalign, seeds 0-1 (to run)" in listed
    folders = {job.folder for job in jobs.jobs(first, tmp_path / "out")} & {job.folder for job in jobs.jobs(spec.load_experiment(other), tmp_path / "out")}
    assert {folder.name.rsplit("-seed", 1)[0] for folder in folders} == {keys["zero-shot", None]}


def test_a_run_that_needs_files_runs_its_fallback_without_them(tmp_path, tiny_model_dir, capsys):
    data = tmp_path / "data"
    data.mkdir()
    run = {"name": "mix", "method": "xmixup", "test_input": "text", "flags": ["--round-trip", "{data}/rt.{lang}.tsv"],
           "paper": {"de": 80.0}, "note": "with round trips", "settings": {"max_steps": {"paper": 4, "paper_where": "x", "run": 4}},
           "requires": {"files": ["{data}/rt.{lang}.tsv", "{data}/dev.tsv"], "from": "make them"},
           "otherwise": {"flags": [], "paper": {"de": 70.0}, "note": "without them",
                         "settings": {"max_steps": {"paper": 4, "paper_where": "x", "run": 4}}}}
    path = experiment_file(tmp_path, tiny_model_dir, data=str(data), runs=[run])
    chosen = spec.load_experiment(path).runs[0]
    assert chosen.paper == {"de": 70.0} and chosen.flags == [] and chosen.variant.startswith("the fallback: " + str(data / "rt."))
    for name in ["dev.tsv"] + [f"rt.{lang}.tsv" for lang in ("de", "fr", "es", "ru", "zh", "hi")]:  # every target of the corpus
        (data / name).write_text("")
    chosen = spec.load_experiment(path).runs[0]
    assert chosen.paper == {"de": 80.0} and chosen.note == "with round trips" and chosen.variant.startswith("as written")
    job = jobs.jobs(spec.load_experiment(path), tmp_path / "out")[0]
    argv = jobs.command(job, spec.load_experiment(path), 1, {})
    assert argv[argv.index("--round-trip") + 1] == f"{data}/rt.{{lang}}.tsv"  # {data} is the data folder; {lang}, train.py's
    (data / "rt.hi.tsv").unlink()
    assert spec.load_experiment(path).runs[0].paper == {"de": 70.0}
    reproduce.main([str(path), "--dry-run", "--out", str(tmp_path / "out")])
    assert f"mix: the fallback: {data / 'rt.hi.tsv'} is missing (make them)" in capsys.readouterr().out
    narrowed = dict(run, flags=run["flags"] + ["--target-langs", "de, fr,es,ru,zh"])  # Hindi's is not needed
    assert spec.load_experiment(experiment_file(tmp_path, tiny_model_dir, data=str(data), runs=[narrowed])).runs[0].paper == {
        "de": 80.0}
    broken = dict(run, otherwise={"flags": [], "settings": {"max_steps": {"paper": 4, "paper_where": "x", "run": 5}}})
    assert "runs[0].otherwise.settings.max_steps: run mix resolves it to 4, not to the 5" in bad(tmp_path, tiny_model_dir, runs=[broken])
    assert 'give "requires" and "otherwise" together' in bad(tmp_path, tiny_model_dir, runs=[{k: v for k, v in run.items() if k != "otherwise"}])


def test_a_grid_runs_each_value_and_the_table_takes_the_best_on_dev(tmp_path, tiny_model_dir, capsys):
    runs = [{"name": "zs", "method": "zero-shot", "test_input": "text", "grid": {"lr": [1e-3, 1e-4]}, "paper": {"de": 50.0}},
            {"name": "plain", "evaluate": "zs", "method": "zero-shot", "test_input": "text"}]
    experiment = spec.load_experiment(experiment_file(tmp_path, tiny_model_dir, runs=runs))
    todo = jobs.jobs(experiment, tmp_path / "out")
    assert sorted((j.run.name, j.value, j.seed) for j in todo) == sorted((n, v, s) for n in ("zs", "plain") for v in (1e-3, 1e-4) for s in (0, 1))
    grid = next(j for j in todo if j.run.name == "zs" and j.value == 1e-3)
    assert grid.run.flags[-2:] == ["--lr", "0.001"] and grid.label == "zs lr=0.001 seed 0"
    dev = {1e-3: (0.6, 0.7), 1e-4: (0.8, 0.9)}  # the second value is the better on dev, its test the worse
    for job in todo:
        job.folder.mkdir(parents=True)
        test = 0.2 if job.value == 1e-4 else 0.4
        results = {"de": {"accuracy": test + 0.01 * job.seed, "n": 10}, "en": {"accuracy": 0.9, "n": 10},
                   "dev_accuracy": dev[job.value][job.seed], "settings": {"lr": job.value}}
        job.results.write_text(json.dumps(results))
        job.record_file.parent.mkdir(parents=True, exist_ok=True)
        job.record_file.write_text(json.dumps(jobs.record(job, experiment, jobs.by_name(todo))))
    columns = {c.run.name: c for c in report.read_scores(experiment, tmp_path / "out")}
    assert columns["zs"].chosen == 1e-4 and columns["zs"].grid == {1e-3: pytest.approx(65.0), 1e-4: pytest.approx(85.0)}
    assert report.cell(columns["zs"], "de")[0] == pytest.approx(20.5) and columns["plain"].chosen == 1e-4
    table = report.markdown(experiment, list(columns.values()))
    assert "zs lr=0.0001 (2 seeds)" in table and "lr chosen on dev among 0.001, 0.0001" in table and "0.0001: 85.0, 0.001: 65.0" in table
    assert 'a grid is of a trained run' in bad(tmp_path, tiny_model_dir, runs=[runs[0], dict(runs[1], grid={"lr": [1, 2]})])
    assert 'runs[1].grid: a grid is of a trained run' in bad(tmp_path, tiny_model_dir, flags=STEPS + ["--lr", "1e-3"],
                                                             runs=[runs[1] | {"evaluate": None, "method": "zero-shot",
                                                                              "name": "a"}, dict(runs[1], grid={"lr": [1, 2]}, evaluate="a")])
    assert "--lr is the grid's" in bad(tmp_path, tiny_model_dir, runs=[dict(runs[0], flags=["--lr", "1e-3"])])
    experiment_file(tmp_path, tiny_model_dir, runs=runs)  # as it was before bad() wrote the others
    reproduce.main([str(experiment.path), "--dry-run", "--out", str(tmp_path / "out")])
    assert "8 runs (4 x 2 seeds): 8 done" in capsys.readouterr().out  # a grid's every value counted
    reproduce.main([str(experiment.path), "--dry-run", "--runs", "zs", "--seeds", "1", "--out", str(tmp_path / "out")])
    listed = capsys.readouterr().out  # what the same command without --dry-run would run
    assert "2 runs (2 x 1 seeds): 2 done" in listed and "plain" not in listed.split("== ")[1].split("\n", 1)[1]
    with pytest.raises(tasks.InputError, match="has no run or seed '9'"):
        reproduce.main([str(experiment.path), "--dry-run", "--seeds", "9", "--out", str(tmp_path / "out")])


def test_the_cost_of_a_file_counts_its_steps_and_forward_passes(tmp_path, tiny_model_dir, capsys):
    steps = ["--epochs", "2", "--batch-size", "8", "--eval-every", "5", "--no-alignment"]
    runs = [{"name": "zs", "method": "zero-shot", "test_input": "text"}, {"name": "fusion", "method": "filter", "test_input": "oracle"},
            {"name": "tt", "evaluate": "zs", "method": "translate-test", "test_input": "oracle"}]
    sizes = {"train": 100, "dev": 10, "test": 20, "languages": 3, "from": "a hand count"}
    path = experiment_file(tmp_path, tiny_model_dir, flags=steps, runs=runs, sizes=sizes,
                           omitted=[{"row": "Their ablation", "table": "Nobody's Table 2", "reason": "not run here"}])
    reproduce.main([str(path), "--dry-run", "--out", str(tmp_path / "out")])
    listed = capsys.readouterr().out
    # zero-shot: ceil(100 / 8) x 2 = 26 steps of 8 texts; dev every 5 steps and at the last (6 x 10), the test 3 x 20
    assert "  zs: 26 steps; 208 texts through the encoder in training (each also backward), 120 in evaluation" in listed
    # FILTER: 100 x (2 targets + itself) pairs, ceil(300 / 8) x 2 = 76 steps of 8 pairs of two texts; 16 dev evaluations of
    # 10 pairs, the test of 3 x 20 pairs
    assert "  fusion: 76 steps; 1,216 texts through the encoder in training (each also backward), 440 in evaluation" in listed
    assert "  tt: 0 steps; 0 texts through the encoder in training (each also backward), 60 in evaluation" in listed  # the English originals
    assert "cost, every run of every seed: 204 steps; 2,848 texts" in listed
    assert "The paper's rows not run:\n  Their ablation (Nobody's Table 2): not run here" in listed
    assert "sizes.languages: missing" in bad(tmp_path, tiny_model_dir, sizes={k: v for k, v in sizes.items() if k != "languages"})
    # selected on every language's dev set: 6 evaluations of 3 x 10, unless the file says the source alone has one
    for dev_languages, evaluation in ((None, 240), (1, 120)):
        folder = tmp_path / f"dev-{dev_languages}"
        folder.mkdir()
        given = dict(sizes, **({"dev_languages": dev_languages} if dev_languages else {}))
        path = experiment_file(folder, tiny_model_dir, flags=steps, sizes=given,
                               runs=[{"name": "all", "method": "zero-shot", "test_input": "text", "flags": ["--select-on", "all"]}])
        reproduce.main([str(path), "--dry-run", "--out", str(folder / "out")])
        assert f"  all: 26 steps; 208 texts through the encoder in training (each also backward), {evaluation} in" in capsys.readouterr().out
    assert "sizes.dev_languages: a count" in bad(tmp_path, tiny_model_dir, sizes=dict(sizes, dev_languages=0))
    # --extra-train's examples (SQuAD's beside TyDiQA-GoldP's): the source's, without translations, a pair method's each with itself
    from minxlt.experiments.cost import training_items
    extra = dict(sizes, extra_train=40)
    assert training_items("zero-shot", {"extra_train": "x"}, extra) == (140, 100)
    assert training_items("translate-train", {"extra_train": "x"}, extra) == (100 + 2 * 100 + 40, 100)
    assert training_items("filter", {"extra_train": "x", "self_pairs": True}, extra) == (100 * 3 + 40, 100)
    assert training_items("filter", {"self_pairs": True}, extra) == (300, 100)  # a run without --extra-train
    # --dev-limit: each evaluation scores at most that many dev examples a language (13 steps, 3 evaluations of 3 languages)
    from minxlt.experiments.cost import run_cost
    values = {"batch_size": 8, "epochs": 1, "eval_every": 5, "select_on": "all", "max_length": 128}
    assert run_cost("zero-shot", values, sizes, "text").evaluation == 3 * 3 * 10 + 3 * 20
    assert run_cost("zero-shot", dict(values, dev_limit=4), sizes, "text").evaluation == 3 * 3 * 4 + 3 * 20
    assert "GPU-hours" not in listed  # no step time measured for the tiny model's shape
    from minxlt.experiments.cost import Cost, gpu_hours
    hours, how = gpu_hours(Cost(training_tokens=1000 * 384, evaluation_tokens=300 * 384), "xlm-roberta-large")
    assert hours == pytest.approx((1000 + 300 / 3) * 384 / 47 * 0.0866 / 128 / 3600)  # a token of 47-token texts
    assert "NVIDIA H200" in how and "estimate" in how


def test_a_table_of_several_metrics_has_a_section_and_paper_numbers_for_each(tmp_path, tiny_model_dir):
    # XTREME scores QA by F1 and exact match: a file gives both, and the paper's numbers of each
    runs = [{"name": "zs", "method": "zero-shot", "test_input": "text", "paper": {"accuracy": {"de": 50.0}, "macro_f1": {"de": 40.0}}}]
    experiment = spec.load_experiment(experiment_file(tmp_path, tiny_model_dir, runs=runs, metric=["accuracy", "macro_f1"]))
    assert experiment.metrics == ["accuracy", "macro_f1"] and experiment.runs[0].paper == {"de": 50.0}
    for job in jobs.jobs(experiment, tmp_path / "out"):
        job.folder.mkdir(parents=True)
        job.results.write_text(json.dumps({"de": {"accuracy": 0.6, "macro_f1": 0.3 + 0.1 * job.seed, "n": 10},
                                           "en": {"accuracy": 0.9, "macro_f1": 0.9, "n": 10}}))
        job.record_file.parent.mkdir(parents=True, exist_ok=True)
        job.record_file.write_text(json.dumps(jobs.record(job, experiment, {})))
    reproduce.main([str(experiment.path), "--out", str(tmp_path / "out"), "--report"])
    table = (tmp_path / "out" / "tiny" / "table.md").read_text()
    accuracy, f1 = table.index("### accuracy"), table.index("### macro_f1")
    assert "| de | 60.0 ± 0.0 | 50.0 | +10.0 |" in table[accuracy:f1] and "| de | 35.0 ± 7.1 | 40.0 | -5.0 |" in table[f1:]
    assert ",zs,zero-shot,de,2,35.00,7.07,40.0,-5.00,0:30.00 1:40.00,macro_f1" in (tmp_path / "out" / "tiny" / "table.csv").read_text()
    assert "runs[0].paper.bleu: not one of the file's metrics" in bad(tmp_path, tiny_model_dir, metric=["accuracy", "macro_f1"],
                                                                      runs=[dict(runs[0], paper={"bleu": {"de": 1.0}})])


def test_a_flag_given_twice_is_refused_and_no_command_of_the_files_repeats_one(tmp_path, tiny_model_dir):
    run = {"name": "x", "method": "zero-shot", "test_input": "text"}
    assert f"{tmp_path / 'tiny.json'}: runs[1].flags: --lr is given twice: give each flag once" == bad(
        tmp_path, tiny_model_dir, runs=runs_with(dict(run, flags=["--lr", "1e-3", "--lr=1e-4"])))
    assert "runs[1].flags: --batch-size is given twice (here and in the file's flags)" in bad(
        tmp_path, tiny_model_dir, runs=runs_with(dict(run, flags=["--batch-size", "4"])))
    assert "flags: --no-alignment is given twice" in bad(tmp_path, tiny_model_dir, flags=STEPS + ["--no-alignment"])
    assert "tiny.json: flags: --lr is the grid's (runs[0].grid): give it there only" in bad(
        tmp_path, tiny_model_dir, flags=STEPS + ["--lr", "1e-3"], runs=[dict(run, grid={"lr": [1e-3, 1e-4]})])
    for path in sorted((ROOT / "experiments").glob("*.json")):
        experiment = spec.load_experiment(path)
        todo = jobs.jobs(experiment, tmp_path / "out")
        for job in todo:
            argv = jobs.command(job, experiment, 1, jobs.by_name(todo))
            names = [token.split("=", 1)[0] for token in argv if token.startswith("--")]
            assert sorted({n for n in names if names.count(n) > 1}) == [], (path.name, job.label)


def test_the_dry_run_prints_one_command_per_run_its_seeds_a_range(tmp_path, tiny_model_dir, capsys):
    import shlex
    path = experiment_file(tmp_path, tiny_model_dir, seeds=[1, 2, 3, 7])
    experiment = spec.load_experiment(path)
    reproduce.main([str(path), "--dry-run", "--out", str(tmp_path / "out")])
    listed = capsys.readouterr().out
    commands = [line.strip() for line in listed.splitlines() if "torch.distributed.run" in line]
    assert len(commands) == len(experiment.runs) and "zero-shot, seeds 1-3, 7 (to run)" in listed
    named = jobs.by_name(jobs.jobs(experiment, tmp_path / "out"))
    for line, run in zip(commands, experiment.runs):  # each seed's command, as the shell makes it of the loop
        head, _, body = line.partition("; do ")
        assert head == "for S in 1 2 3 7" and body.endswith("; done")
        for seed in experiment.seeds:
            job = named[run.name, None, seed]
            made = shlex.split(body.removesuffix("; done").replace('"$S"', str(seed)))
            assert made == jobs.command(job, experiment, 1, named)
    assert reproduce.seed_range([3]) == "seed 3" and reproduce.seed_range([0, 1, 2, 5, 6, 9]) == "seeds 0-2, 5-6, 9"


def test_a_run_fine_tunes_the_model_another_run_pre_trains(tmp_path, tiny_model_dir):
    # Unicoder: --method unicoder pre-trains an encoder, which a run of the same seed fine-tunes (--model {pre})
    runs = [{"name": "pre", "method": "unicoder", "test_input": "text"},
            {"name": "tuned", "method": "zero-shot", "test_input": "text", "flags": ["--model", "{pre}"],
             "paper": {"de": 80.0}}]
    path, out = experiment_file(tmp_path, tiny_model_dir, runs=runs, seeds=[0]), tmp_path / "out"
    experiment = spec.load_experiment(path)
    named = jobs.by_name(jobs.jobs(experiment, out))
    pre, tuned = named["pre", None, 0], named["tuned", None, 0]
    argv = jobs.command(tuned, experiment, 1, named)
    assert argv.count("--model") == 1 and argv[argv.index("--model") + 1] == str(pre.best)
    assert tuned.run.needs == ["pre"]
    assert spec.resolved_settings(experiment, experiment.runs[1], "runs[1]")["model"] == "run pre's model"
    (tmp_path / "other").mkdir()
    other = experiment_file(tmp_path / "other", tiny_model_dir, seeds=[0],
                            runs=[dict(runs[0], flags=["--lr", "1e-3"]), runs[1]])  # another pre-training
    assert jobs.run_keys(spec.load_experiment(other))["tuned", None] != tuned.key  # fine-tunes into another folder
    reproduce.main([str(path), "--out", str(out)])
    assert jobs.state(pre) == jobs.state(tuned) == "done" and (pre.best / "config.json").is_file()
    assert f"--model {pre.best}" in tuned.log.read_text().splitlines()[0]
    table = (out / "tiny" / "table.md").read_text()
    assert "tuned (1 seed)" in table and "pre (" not in table  # the pre-training tests nothing: no column
    assert "runs[0].paper: --method unicoder pre-trains an encoder and tests nothing" in bad(
        tmp_path, tiny_model_dir, runs=[dict(runs[0], paper={"de": 1.0}), runs[1]])
    assert "runs[1].flags: --model is set by reproduce.py" in bad(tmp_path, tiny_model_dir, runs=runs_with(
        {"name": "x", "method": "zero-shot", "test_input": "text", "flags": ["--model", str(tiny_model_dir)]}))


def test_the_cost_counts_each_text_at_its_runs_max_length_and_co_training_at_its_most(tmp_path, tiny_model_dir, capsys):
    from minxlt.experiments.cost import Cost, gpu_hours
    steps = ["--epochs", "2", "--batch-size", "8", "--eval-every", "5", "--no-alignment"]
    sizes = {"train": 100, "dev": 10, "test": 20, "languages": 3, "from": "a hand count"}
    runs = [{"name": "short", "method": "zero-shot", "test_input": "text", "flags": ["--max-length", "64"]},
            {"name": "long", "method": "zero-shot", "test_input": "text", "flags": ["--max-length", "128"]},
            {"name": "st", "cotrain": True, "test_input": "text",
             "flags": ["--max-length", "64", "--self-training", "--cotrain-iterations", "2", "--pool-per-lang", "10"]}]
    path = experiment_file(tmp_path, "FacebookAI/xlm-roberta-base", flags=steps, runs=runs, sizes=sizes)
    priced = reproduce.dry_run(spec.load_experiment(path), tmp_path / "out", 1)
    listed = capsys.readouterr().out
    # zero-shot: 26 steps of 8, 208 texts; 6 dev evaluations of 10 and the test of 3 x 20 (test_the_cost_of_a_file_...)
    assert "  short: 26 steps; 208 texts through the encoder in training (each also backward), 120 in evaluation" \
           in listed
    assert "texts counted at 64 tokens" in listed and "texts counted at 128 tokens" in listed
    # self-training at its most, n = 100 labelled, n/3 = 33 pseudo-labels a round, a pool of 2 x 10: round 0 fits on
    # 100 (26 steps, 6 dev evaluations) and labels 20; round 1 on 133 (34 steps, 7) and labels 20; then 166 (42 steps,
    # 9), tested
    assert "  st: 102 steps; 816 texts through the encoder in training (each also backward), 320 in evaluation" \
           in listed
    # base's shape: a token of bench.train_step's 47-token texts, and a step at least its fastest step (0.0342 s)
    token = 0.0554 / 256 / 47
    seconds = sum(max(training * length * token, steps * 0.0342) + evaluation * length * token / 3
                  for training, evaluation, steps, length in ((208, 120, 26, 64), (208, 120, 26, 128), (816, 320, 102, 64)))
    assert sum(gpu_hours(cost, "FacebookAI/xlm-roberta-base")[0] for cost, _ in priced.values()) == \
           pytest.approx(2 * seconds / 3600)  # two seeds
    assert gpu_hours(Cost(steps=10, training_tokens=47), "xlm-roberta-base")[0] == pytest.approx(10 * 0.0342 / 3600)
    line = next(line for line in listed.splitlines() if "GPU-hours" in line)
    assert "every text counted at its run's --max-length" in line and "at least as long as the fastest step" in line
    assert f"about {2 * seconds / 3600:,.1f} GPU-hours" in line


def test_a_setting_its_source_says_there_is_none_of(tmp_path, tiny_model_dir, capsys):
    # a null value with its where: the source states none (the script passes no such flag), which a run matches or not
    none = {"paper": None, "script": None, "script_where": "run.sh:3, no --extra-train"}
    path = with_settings(tmp_path, tiny_model_dir, {"extra_train": dict(none, run=None)})
    reproduce.main([str(path), "--dry-run", "--out", str(tmp_path / "out")])
    listed = capsys.readouterr().out
    assert "extra_train: paper silent; script none (run.sh:3, no --extra-train); run none\n" in listed
    departs = "the run's 'as written' departs from the script's None with no departure listed"
    with pytest.raises(InputError, match=re.escape(departs)):
        spec.load_experiment(with_settings(tmp_path, tiny_model_dir, {"text_case": dict(none, run="as written")}))


def test_the_departures_the_authors_code_shows_are_listed_by_the_dry_run(tmp_path, capsys):
    listed = {
        "filter-tydiqa.json": ["script none (FILTER train.sh:161-186: tydiqa() passes no --use_squad_for_tydiqa",
                               "filter, extra_train: SQuAD v1.1's 87,599",
                               "7,556 steps of 64 a seed where TyDiQA-GoldP alone makes 2,080",
                               "translate-train, extra_train:", "every trained run, dev_set:", "filter, text_case:",
                               "filter-st, text_case:"],
        "xmixup-tydiqa.json": ["every trained run, dev_set:"],
        "filter-xnli.json": ["filter, source_prediction:", "filter-st, source_prediction:"],
        "filter-pawsx.json": ["filter, source_prediction:", "filter-st, source_prediction:"],
        "filter-mlqa.json": ["translate-train, text_case:", "filter, text_case:", "filter-st, text_case:"],
        "filter-xquad.json": ["translate-train, text_case:", "filter, text_case:", "filter-st, text_case:"],
        "yu-joty-xnli.json": ["zero-shot-1.2, train_fraction: ", "draws 4,713 pairs"],
        "unicoder-xnli.json": ["unicoder, model:", "unicoder, parallel:", "unicoder, epochs:"],
    }
    for name, lines in listed.items():
        reproduce.main([str(ROOT / "experiments" / name), "--dry-run", "--out", str(tmp_path)])
        out = capsys.readouterr().out
        departures = out[out.index("Departures, and the runs' own choices"):out.index("The paper's rows not run:")]
        for line in lines:
            assert line in (out if line.startswith("script") else departures), (name, line)


def test_runs_and_seeds_narrow_what_runs_and_each_run_keeps_its_folder():
    experiment = spec.load_experiment(ROOT / "experiments" / "filter-xnli.json")
    chosen = reproduce.narrowed(experiment, ["filter-st"], ["1"])
    assert [run.name for run in chosen.runs] == ["filter", "filter-st"] and chosen.seeds == [1]  # and its teacher
    keys = jobs.run_keys(chosen)
    assert keys == {name: key for name, key in jobs.run_keys(experiment).items() if name in keys}
    with pytest.raises(InputError, match="has no run or seed '6': its runs are zero-shot, translate-train, filter, "):
        reproduce.narrowed(experiment, None, ["6"])
