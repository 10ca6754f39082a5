"""A paper's table in one command: every run of an experiment file, for every seed, through
torchrun, then the mean and standard deviation over seeds beside the paper's numbers.

    python reproduce.py experiments/sib-200.json --data ../shared/data/sib200   # runs, then the table
    python reproduce.py experiments/filter-xnli.json --nproc-per-node 8        # 8 GPUs per run
    python reproduce.py experiments/filter-xnli.json --dry-run                 # the runs and their commands
    python reproduce.py experiments/sib-200.json --report                       # the table of the runs there are

An experiment file (experiments/*.json) names the task, data and model, the seeds, the flags every
run gets, and the runs: a method with its test input and flags, or an evaluation of another run's
best model ("evaluate"), each with the paper's numbers where the paper has that row. Each (run,
seed) trains into OUT/<run>-seed<S> (OUT: --out, by default runs/<the file's name>), its console
output in OUT/logs/. A run with results is never started again; one with a checkpoint and no results
was interrupted and continues with --resume; one with neither starts afresh. A run that fails is
reported with the last lines of its log, and the others go on.

The table (OUT/table.md, OUT/table.csv, OUT/table.png) gives, per language and for the target
average, the mean ± sample standard deviation over the seeds whose runs finished: the number of
seeds is in each column's header, and a missing run is named there, never averaged over silently.
Rows are grouped by what a prediction sees at test time; compare columns within a group only.
"""
import argparse
import csv
import io
import json
import math
import re
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
from contextlib import redirect_stderr
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm import tqdm

import cli
import flags
import tasks
from methods import TEST_INPUTS

HERE = Path(__file__).resolve().parent
RESERVED = {"--method", "--task", "--data", "--model", "--seed", "--out", "--test-input", "--resume", "--overwrite"}
FIELDS = {"title", "about", "task", "data", "model", "metric", "seeds", "flags", "paper", "runs"}
RUN_FIELDS = {"name", "method", "test_input", "flags", "evaluate", "paper", "paper_row", "paper_table", "note"}
MODEL_OF = re.compile(r"\{(?!lang\})([a-z0-9][a-z0-9_.-]*)\}")  # "{filter}" in a run's flags: run filter's best model, same seed ({lang} is a path's)
PER_RUN = {"--teacher-cache": "a file each run writes for itself", "--source-lang": "the experiment's, in its top-level flags"}
EVALUATE_FLAGS = {"--test-translations", "--batch-size", "--max-length"}  # what an "evaluate" run may add


@dataclass
class Run:
    """One row of the table: a method trained (or, with `evaluate`, another run's model tested)."""
    name: str
    method: str
    test_input: str
    flags: list = field(default_factory=list)
    evaluate: str | None = None
    paper: dict = field(default_factory=dict)
    paper_row: str | None = None
    paper_table: str | None = None
    note: str | None = None

    @property
    def needs(self):
        """The runs whose best model (of the same seed) this one reads: the one it evaluates, and
        those its flags name as {run} (FILTER's self-teaching: --teacher {filter})."""
        return ([self.evaluate] if self.evaluate else []) + [name for flag in self.flags for name in MODEL_OF.findall(flag)]


@dataclass
class Experiment:
    path: Path
    title: str
    task: str
    data: str | None
    model: str | None
    metric: str
    seeds: list
    flags: list
    runs: list
    about: str = ""
    paper: dict = field(default_factory=dict)

    @property
    def source(self):
        """The source language: the top-level flags' --source-lang (either form), else the task's."""
        for i, flag in enumerate(self.flags):
            if flag.startswith("--source-lang="):
                return flag.split("=", 1)[1]
            if flag == "--source-lang" and i + 1 < len(self.flags):
                return self.flags[i + 1]
        return tasks.LAYOUTS[self.task].source


def refuse(path, where, problem):
    raise tasks.InputError(f"{path}: {where}: {problem}")


def load_experiment(path, data=None):
    """The experiment file at `path`, checked field by field (one line naming the file and field
    where one is wrong); `data` replaces its data folder."""
    path = Path(path)
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise tasks.InputError(f"{path}: cannot be read ({e})") from None
    except json.JSONDecodeError as e:
        raise tasks.InputError(f"{path}:{e.lineno}: not JSON ({e.msg})") from None
    if not isinstance(spec, dict):
        refuse(path, "top level", "an object with the fields " + ", ".join(sorted(FIELDS)))
    check_fields(path, "top level", spec, FIELDS, required=("title", "task", "metric", "seeds", "runs"))
    if spec["task"] not in tasks.LAYOUTS:
        refuse(path, "task", f"unknown task {spec['task']!r} (one of {', '.join(tasks.LAYOUTS)})")
    seeds = spec["seeds"]
    if not (isinstance(seeds, list) and seeds and all(type(s) is int for s in seeds) and len(set(seeds)) == len(seeds)):
        refuse(path, "seeds", f"a list of distinct integers, not {seeds!r}")
    for name in ("title", "about", "metric"):
        if not isinstance(spec.get(name, ""), str):
            refuse(path, name, "a string")
    for name in ("data", "model"):
        if spec.get(name) is not None and not isinstance(spec[name], str):
            refuse(path, name, "a string, or null")
    experiment = Experiment(path, spec["title"], spec["task"], data or spec.get("data"), spec.get("model"), spec["metric"], seeds,
                            check_flags(path, "flags", spec.get("flags", [])), [], spec.get("about", ""), spec.get("paper") or {})
    if not isinstance(spec["runs"], list) or not spec["runs"]:
        refuse(path, "runs", "a non-empty list of runs")
    for i, run in enumerate(spec["runs"]):
        experiment.runs.append(check_run(experiment, f"runs[{i}]", run))
    check_paper(experiment)
    return experiment


def check_fields(path, where, spec, known, required):
    missing = [name for name in required if name not in spec]
    if missing:
        refuse(path, f"{where}.{missing[0]}" if where != "top level" else missing[0], "missing")
    unknown = sorted(set(spec) - known)
    if unknown:
        refuse(path, f"{where}.{unknown[0]}" if where != "top level" else unknown[0],
               f"unknown field (the fields are {', '.join(sorted(known))})")


def check_flags(path, where, given):
    if not (isinstance(given, list) and all(isinstance(flag, str) for flag in given)):
        refuse(path, where, f"a list of strings (command-line flags), not {given!r}")
    named = {flag.split("=", 1)[0] for flag in given}
    reserved = sorted(RESERVED & named)
    if reserved:
        refuse(path, where, f"{reserved[0]} is set by reproduce.py (from the file's task, data, model, seeds and runs)")
    shared = sorted(named & set(PER_RUN) - ({"--source-lang"} if where == "flags" else set()))
    if shared:
        refuse(path, where, f"{shared[0]} cannot be given here: it is {PER_RUN[shared[0]]} (every seed's run would share it)"
               if shared[0] == "--teacher-cache" else f"{shared[0]} is {PER_RUN[shared[0]]}: every column must have the same source")
    return list(given)


def check_run(experiment, where, spec):
    path, names = experiment.path, [run.name for run in experiment.runs]
    if not isinstance(spec, dict):
        refuse(path, where, "an object with the fields " + ", ".join(sorted(RUN_FIELDS)))
    check_fields(path, where, spec, RUN_FIELDS, required=("name", "test_input") if "evaluate" in spec else ("name", "method", "test_input"))
    name = spec["name"]
    if not (isinstance(name, str) and re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name)):
        refuse(path, f"{where}.name", f"{name!r} is not a folder name of lower-case letters, digits, '-', '_' and '.'")
    if name in names:
        refuse(path, f"{where}.name", f"{name!r} names runs[{names.index(name)}] already")
    run = Run(name, spec.get("method"), spec["test_input"], check_flags(path, f"{where}.flags", spec.get("flags", [])),
              spec.get("evaluate"), spec.get("paper") or {}, spec.get("paper_row"), spec.get("paper_table"), spec.get("note"))
    trained_before = [r.name for r in experiment.runs if r.evaluate is None]
    for needed in run.needs[1 if run.evaluate else 0:]:
        if needed not in trained_before:
            refuse(path, f"{where}.flags", f"{{{needed}}} is not the name of a trained run before it ({', '.join(trained_before) or 'none'})")
    if run.evaluate is not None:
        trained = {r.name: r for r in experiment.runs if r.evaluate is None}
        if run.evaluate not in trained:
            refuse(path, f"{where}.evaluate", f"{run.evaluate!r} is not the name of a trained run before it ({', '.join(trained) or 'none'})")
        run.method = run.method or trained[run.evaluate].method
        extra = sorted({flag.split("=", 1)[0] for flag in run.flags if flag.startswith("--")} - EVALUATE_FLAGS)
        if extra:
            refuse(path, f"{where}.flags", f"{extra[0]}: an evaluation takes only {', '.join(sorted(EVALUATE_FLAGS))}")
    if run.method not in flags.METHODS:
        refuse(path, f"{where}.method", f"unknown method {run.method!r} (one of {', '.join(flags.METHODS)})")
    if run.test_input not in TEST_INPUTS:
        refuse(path, f"{where}.test_input", f"{run.test_input!r} is not one of {', '.join(TEST_INPUTS)}")
    if run.test_input not in flags.METHODS[run.method].test_inputs:
        refuse(path, f"{where}.test_input", f"--method {run.method} predicts from "
               f"{' or '.join(flags.METHODS[run.method].test_inputs)}, not {run.test_input}")
    if run.evaluate is None:
        folder = str(HERE) if experiment.data else None  # the data folder is checked when the runs start (check_languages)
        models = replace(run, flags=[MODEL_OF.sub(str(HERE), flag) for flag in run.flags])  # a model to be trained: a folder now
        argv = train_arguments(replace(experiment, data=folder), models, 0, Path("out"))
        try:
            with redirect_stderr(io.StringIO()) as errors:
                flags.parse(argv)
        except SystemExit:
            problem = errors.getvalue().strip().splitlines()[-1].split("error: ", 1)[-1]
            refuse(path, f"{where}.flags", f"train.py refuses them: {problem}")
    return run


def check_paper(experiment):
    path, numbered = experiment.path, [run for run in experiment.runs if run.paper]
    if not isinstance(experiment.paper, dict) or set(experiment.paper) - {"table", "average"}:
        refuse(path, "paper", 'an object {"table": "<paper> Table N", "average": "all" or "targets"}')
    if numbered and not isinstance(experiment.paper.get("table"), str):
        refuse(path, "paper.table", "missing: the table the runs' paper numbers are typed from")
    if numbered and experiment.paper.get("average") not in ("all", "targets"):
        refuse(path, "paper.average", 'what the paper\'s average covers: "all" languages, or the "targets" only')
    for i, run in enumerate(experiment.runs):
        for lang, value in run.paper.items():
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)):
                refuse(path, f"runs[{i}].paper.{lang}", f"a score in percent, not {value!r}")


def check_languages(experiment):
    """Refuse paper numbers of languages the data folder lacks (the file and the field named)."""
    layout = tasks.LAYOUTS[experiment.task]
    folder = experiment.data
    if layout.needs_data and not (folder and Path(folder).is_dir()):
        refuse(experiment.path, "data", f"{folder!r}: no such folder (download.py fetches it; or give --data DIR)")
    found = set(layout.for_folder(folder)(folder, experiment.source).languages())
    for i, run in enumerate(experiment.runs):
        lacking = sorted(set(run.paper) - found - {"average"})
        if lacking:
            holder = f"the data folder {folder}" if folder else f"task {experiment.task}"
            refuse(experiment.path, f"runs[{i}].paper.{lacking[0]}", f"{holder} has no language {lacking[0]!r} "
                   f"(it has {', '.join(sorted(found))})")


# --- the jobs: one per (run, seed) ---

@dataclass
class Job:
    run: Run
    seed: int
    folder: Path
    log: Path

    @property
    def label(self):
        return f"{self.run.name} seed {self.seed}"

    @property
    def results(self):
        return self.folder / ("results_test.json" if self.run.evaluate else "results.json")


def jobs(experiment, out):
    """Every (run, seed), seed by seed, so that the first seeds' table is complete first."""
    return [Job(run, seed, out / f"{run.name}-seed{seed}", out / "logs" / f"{run.name}-seed{seed}.log")
            for seed in experiment.seeds for run in experiment.runs]


def train_arguments(experiment, run, seed, folder):
    argv = ["--method", run.method, "--task", experiment.task, "--seed", str(seed), "--test-input", run.test_input]
    argv += ["--data", experiment.data] if experiment.data else []
    argv += ["--model", experiment.model] if experiment.model else []
    model_of = lambda name: str(folder.parent / f"{name}-seed{seed}" / "best")
    return argv + experiment.flags + [MODEL_OF.sub(lambda m: model_of(m.group(1)), flag) for flag in run.flags] + ["--out", str(folder)]


def state(job):
    """done (results written), interrupted (a checkpoint to resume), started (a folder to start
    again) or new."""
    if job.results.is_file():
        return "done"
    if not job.run.evaluate and cli.has_checkpoint(job.folder):
        return "interrupted"
    return "started" if job.folder.exists() else "new"


def command(job, experiment, nproc, jobs_by_name):
    """The command of a job, as it runs now (--resume for an interrupted run, --overwrite for one to start again)."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
    if job.run.evaluate:
        trained = jobs_by_name[job.run.evaluate, job.seed]
        argv = ["--checkpoint", str(trained.folder / "best"), "--method", job.run.method, "--test-input", job.run.test_input]
        argv += ["--data", experiment.data] if experiment.data else []
        return launcher + [str(HERE / "evaluate.py")] + argv + job.run.flags + ["--out", str(job.folder)]
    argv = train_arguments(experiment, job.run, job.seed, job.folder)
    argv += {"interrupted": ["--resume"], "started": ["--overwrite"]}.get(state(job), [])
    return launcher + [str(HERE / "train.py")] + argv


def tail(path, lines=12):
    """The last lines the run wrote before torchrun's own report of its failure."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").replace("\r", "\n")
    except OSError:
        return ["(no log)"]
    kept = [line for line in text.splitlines() if line.strip()]
    ends = [i for i, line in enumerate(kept) if "elastic/multiprocessing" in line and "failed (exitcode" in line]
    return kept[:ends[0] if ends else len(kept)][-lines:]


def execute(experiment, out, nproc):
    """Run every job that has no results; returns {label: why} of those that failed or could not start."""
    todo = jobs(experiment, out)
    by_name = {(job.run.name, job.seed): job for job in todo}
    failed = {}
    done = sum(state(job) == "done" for job in todo)
    bar = tqdm(total=len(todo), initial=done, desc=f"{experiment.path.stem}: runs", unit="run", dynamic_ncols=True)
    for job in todo:
        if state(job) == "done":
            continue
        lacking = [name for name in job.run.needs if state(by_name[name, job.seed]) != "done"]
        if lacking:
            failed[job.label] = f"not run: {lacking[0]} seed {job.seed} has no model"
            bar.update()
            continue
        how = {"interrupted": "resuming", "started": "starting again"}.get(state(job), "starting")
        bar.set_postfix_str(f"{how} {job.label}; {len(failed)} failed")
        job.log.parent.mkdir(parents=True, exist_ok=True)
        started, argv = time.monotonic(), command(job, experiment, nproc, by_name)
        with open(job.log, "a", encoding="utf-8") as log:
            log.write(f"$ {shlex.join(argv)}\n")
            log.flush()
            code, interrupted = launch(argv, log)
        if interrupted or (code == 0 and state(job) == "interrupted"):  # stopped by a signal: it saved a checkpoint, or starts again
            bar.close()
            raise tasks.InputError(f"stopped during {job.label}: run the same command to continue (finished runs are kept)")
        if code or state(job) != "done":
            failed[job.label] = f"exit status {code}; the last lines of {job.log}:\n  " + "\n  ".join(tail(job.log))
            tqdm.write(f"failed: {job.label} (exit status {code}); its log: {job.log}")
        else:
            tqdm.write(f"finished {job.label} in {(time.monotonic() - started) / 60:.1f} min")
        bar.update()
    bar.close()
    return failed


def launch(argv, log):
    """(exit status, whether the user stopped it): the command in its own session, so that Ctrl-C
    reaches it once, from here: torchrun passes SIGINT to the run, which saves a checkpoint and
    stops; a second Ctrl-C kills it."""
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        return process.wait(), False
    except KeyboardInterrupt:
        tqdm.write("stopping: the run saves a checkpoint (Ctrl-C again to kill it)")
        process.send_signal(signal.SIGINT)
        try:
            process.wait()
        except KeyboardInterrupt:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return process.returncode, True


# --- the table: mean ± sample standard deviation over seeds ---

@dataclass
class Column:
    """A run's scores: {language or "target average": [score per finished seed]}, in percent."""
    run: Run
    seeds: list      # the seeds whose runs finished
    missing: list    # the seeds whose runs did not
    scores: dict


def read_scores(experiment, out):
    """A Column per run, from the results of its finished seeds."""
    columns, source = [], experiment.source
    for run in experiment.runs:
        seeds, missing, scores = [], [], {}
        for seed in experiment.seeds:
            job = Job(run, seed, out / f"{run.name}-seed{seed}", out / "logs")
            try:
                results = json.loads(job.results.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                missing.append(seed)
                continue
            per_lang = {lang: 100 * row[experiment.metric] for lang, row in results.items()
                        if isinstance(row, dict) and "n" in row and experiment.metric in row}
            if not per_lang:
                raise tasks.InputError(f"{job.results}: no {experiment.metric!r} score (the file's metric); its scores: "
                                       + ", ".join(sorted({k for row in results.values() if isinstance(row, dict) for k in row} - {"n"})))
            seeds.append(seed)
            targets = [score for lang, score in per_lang.items() if lang != source]
            averages = {"target average": sum(targets) / len(targets)} if targets else {}
            if experiment.paper.get("average"):
                kept = [lang for lang in run.paper if lang != "average"] or list(per_lang)
                if experiment.paper["average"] == "targets":
                    kept = [lang for lang in kept if lang != source]
                if all(lang in per_lang for lang in kept):
                    averages["average, as the paper's"] = sum(per_lang[lang] for lang in kept) / len(kept)
            for key, score in {**per_lang, **averages}.items():
                scores.setdefault(key, {})[seed] = score
        columns.append(Column(run, seeds, missing, scores))
    return columns


def mean_std(values):
    """(mean, sample standard deviation, or None for one value)."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else None


def cell(column, key):
    """(mean, std, n) over the column's seeds, or None where a finished seed lacks the key."""
    values = column.scores.get(key, {})
    if not column.seeds or len(values) < len(column.seeds):
        return None
    mean, std = mean_std([values[seed] for seed in column.seeds])
    return mean, std, len(column.seeds)


def rows_of(experiment, columns):
    keys = list(dict.fromkeys(key for c in columns for key in c.scores if key not in ("target average", "average, as the paper's")))
    keys.sort(key=lambda key: key != experiment.source)
    return keys + [key for key in ("target average", "average, as the paper's") if any(key in c.scores for c in columns)]


def header(column, total):
    run = column.run
    seeds = f"{len(column.seeds)} seed{'s' * (len(column.seeds) != 1)}" if not column.missing else \
        f"{len(column.seeds)} of {total} seeds; missing: seed {', '.join(map(str, column.missing))}"
    return f"{run.name} ({seeds})"


def paper_value(run, key):
    return run.paper.get("average" if key == "average, as the paper's" else key)


def markdown(experiment, columns, failed=None):
    """The table in markdown: a section per test input, a row per language and average."""
    lines = [f"# {experiment.title}", ""] + ([experiment.about, ""] if experiment.about else [])
    lines += [f"Task {experiment.task} ({experiment.data}), model {experiment.model or 'the bundled default'}, "
              f"seeds {', '.join(map(str, experiment.seeds))}, {experiment.metric} in percent: mean ± sample standard "
              "deviation over the seeds in each column's header. Flags of every run: "
              f"`{shlex.join(experiment.flags) or '(none)'}`."]
    if experiment.paper.get("table"):
        lines += ["", f"Paper: {experiment.paper['table']}; Δ is ours minus the paper's. The paper's average is over "
                      f"{'all its languages' if experiment.paper['average'] == 'all' else 'its target languages'}."]
    keys = rows_of(experiment, columns)
    for test_input in dict.fromkeys(c.run.test_input for c in columns):
        group = [c for c in columns if c.run.test_input == test_input]
        names = []
        for c in group:
            names.append(header(c, len(experiment.seeds)))
            names += ["paper", "Δ"] if c.run.paper else []
        lines += ["", f"**Each prediction sees {TEST_INPUTS[test_input]}.**", "",
                  "| language | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for key in keys:
            cells = []
            for c in group:
                value = cell(c, key)
                cells.append("missing" if value is None else f"{value[0]:.1f}" + (f" ± {value[1]:.1f}" if value[1] is not None else ""))
                if c.run.paper:
                    paper = paper_value(c.run, key)
                    cells += ["" if paper is None else f"{paper:.1f}",
                              "" if paper is None or value is None else f"{value[0] - paper:+.1f}"]
            label = f"{key} (source)" if key == experiment.source else key
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        notes = [f"{c.run.name}: " + " ".join(filter(None, [c.run.note, c.run.paper_table and f"(the paper's numbers: "
                                                             f"{c.run.paper_table}{', ' + repr(c.run.paper_row) if c.run.paper_row else ''})"]))
                 for c in group if c.run.note or c.run.paper_table]
        lines += [""] + [f"- {note}" for note in notes] if notes else []
    if failed:
        lines += ["", "Runs that did not finish: " + "; ".join(f"{label} ({why.splitlines()[0]})" for label, why in failed.items()) + "."]
    return "\n".join(lines) + "\n"


def csv_text(experiment, columns):
    """One line per (run, language): the seeds, mean, std, the paper's number and the difference."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["test_input", "run", "method", "language", "seeds", "mean", "std", "paper", "difference", "scores"])
    for c in columns:
        for key in rows_of(experiment, columns):
            value, paper = cell(c, key), paper_value(c.run, key)
            mean, std, n = value if value else ("", "", len(c.scores.get(key, {})))
            writer.writerow([c.run.test_input, c.run.name, c.run.method, key, n, "" if mean == "" else f"{mean:.2f}",
                             "" if std in ("", None) else f"{std:.2f}", "" if paper is None else paper,
                             "" if paper is None or mean == "" else f"{mean - paper:.2f}",
                             " ".join(f"{seed}:{score:.2f}" for seed, score in c.scores.get(key, {}).items())])
    return buffer.getvalue()


def plot(experiment, columns, path):
    """Bars per language (mean over seeds, the standard deviation as error bars), the paper's value
    marked; False where matplotlib is missing (an optional dependency)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    keys = [key for key in rows_of(experiment, columns) if key != "average, as the paper's"]
    drawn = [c for c in columns if c.seeds]
    figure, axes = plt.subplots(figsize=(min(24, max(7, 0.5 * len(keys) * max(1, len(drawn) / 2))), 6))
    width = 0.8 / max(1, len(drawn))
    for i, c in enumerate(drawn):
        x = [k + i * width for k in range(len(keys))]
        values = [cell(c, key) for key in keys]
        axes.bar(x, [v[0] if v else math.nan for v in values], width, yerr=[v[1] or 0 if v else 0 for v in values],
                 capsize=2, label=header(c, len(experiment.seeds)))
        papers = [None if key == "target average" else paper_value(c.run, key) for key in keys]  # the paper's average is another row
        if any(p is not None for p in papers):
            axes.scatter(x, [math.nan if p is None else p for p in papers], marker="_", s=120, color="black", zorder=3,
                         label="paper" if i == min(j for j, d in enumerate(drawn) if d.run.paper) else None)
    axes.set_xticks([k + 0.4 - width / 2 for k in range(len(keys))], keys, rotation=60 if len(keys) > 8 else 0, ha="right")
    axes.set_ylabel(f"test {experiment.metric} (%)")
    axes.set_title(experiment.title, fontsize="medium")
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def report(experiment, out, failed=None):
    """Write OUT/table.md, table.csv and table.png; print the markdown."""
    columns = read_scores(experiment, out)
    out.mkdir(parents=True, exist_ok=True)
    table = markdown(experiment, columns, failed)
    cli.write_text(out / "table.md", table)
    cli.write_text(out / "table.csv", csv_text(experiment, columns))
    drew = plot(experiment, columns, out / "table.png")
    print(table)
    print(f"written to {out}/table.md and table.csv" + (", table.png" if drew else "; no plot: pip install matplotlib for table.png"))


def get_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiment", type=cli.existing_file, help="an experiment file (experiments/*.json)")
    p.add_argument("--out", help="where the runs and the table go (default: runs/<the file's name>)")
    p.add_argument("--data", type=cli.existing_directory, help="the task's data folder, instead of the file's")
    p.add_argument("--nproc-per-node", type=cli.positive_int, default=1, help="processes per run (GPUs of the machine; default 1)")
    p.add_argument("--dry-run", action="store_true", help="list the runs, what each would do, and its command; run nothing")
    p.add_argument("--report", action="store_true", help="only the table, from the runs that finished; run nothing")
    return p.parse_args(argv)


def dry_run(experiment, out, nproc):
    todo = jobs(experiment, out)
    by_name = {(job.run.name, job.seed): job for job in todo}
    what = {"done": "finished: skipped", "interrupted": "interrupted: resumed", "started": "started: run again", "new": "to run"}
    for job in todo:
        print(f"{job.label} ({what[state(job)]})\n  {shlex.join(command(job, experiment, nproc, by_name))}")
    counts = {s: sum(state(job) == s for job in todo) for s in what}
    print(f"{len(todo)} runs ({len(experiment.runs)} x {len(experiment.seeds)} seeds): " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))


def main(argv=None):
    args = get_args(argv)
    experiment = load_experiment(args.experiment, args.data)
    out = Path(args.out or Path("runs") / experiment.path.stem)
    if args.dry_run:
        try:
            check_languages(experiment)
        except tasks.InputError as e:
            print(f"note: {e}")
        return dry_run(experiment, out, args.nproc_per_node)
    if not args.report:
        check_languages(experiment)
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # as Ctrl-C: the running run saves a checkpoint
        failed = execute(experiment, out, args.nproc_per_node)
    else:
        failed = {}
    report(experiment, out, failed)
    if failed:
        sys.exit(f"{len(failed)} run(s) did not finish:\n" + "\n".join(f"{label}: {why}" for label, why in failed.items()))


if __name__ == "__main__":
    cli.run(main)
