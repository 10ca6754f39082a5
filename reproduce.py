"""A paper's table in one command: every run of an experiment file, for every seed, through
torchrun, then the mean and standard deviation over seeds beside the paper's numbers.

    python reproduce.py experiments/sib-200.json --data ../shared/data/sib200   # runs, then the table
    python reproduce.py experiments/filter-xnli.json --nproc-per-node 8        # 8 GPUs per run
    python reproduce.py experiments/filter-xnli.json --dry-run                 # the runs and their commands
    python reproduce.py experiments/sib-200.json --report                       # the table of the runs there are

An experiment file (experiments/*.json) names the task, data and model, the seeds, the flags every
run gets, and the runs: a method with its test input and flags, an evaluation of another run's
best model ("evaluate"), or a run of cotrain.py ("cotrain"), each with the paper's numbers where
the paper has that row. Its "settings" state, for every setting that decides a run, what the
paper says, what the authors' script uses and what the run uses, and why the run departs where it
does; the file is refused where a run's flags resolve otherwise, or depart without a reason
(audit; --dry-run prints them). Each (run, seed) trains into OUT/<run>-seed<S> (OUT: --out, by
default runs/<the file's name>), its console output in OUT/logs/ with a record of what it was
asked (record()). A run with results is never started again; one with a checkpoint and no results
was interrupted and continues with --resume; one with neither starts afresh; one made otherwise
than the file asks now is changed, not counted, and run again with --rerun-changed. A run that
fails is reported with the last lines of its log, and the others go on.

The table (OUT/table.md, OUT/table.csv, OUT/table.png) gives, per language and for the target
average, the mean ± sample standard deviation over the seeds whose runs finished: the number of
seeds is in each column's header, and a missing run is named there, never averaged over silently.
Rows are grouped by what a prediction sees at test time; compare columns within a group only.
"""
import argparse
import csv
import hashlib
import io
import json
import math
import os
import re
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

from methods import TEST_INPUTS
from minxlt import tasks
from minxlt.checkpoints import hub
from minxlt.run import cli, flags

HERE = Path(__file__).resolve().parent
RESERVED = {"--method", "--task", "--data", "--model", "--seed", "--out", "--test-input", "--resume", "--overwrite"}
FIELDS = {"title", "about", "task", "data", "model", "metric", "seeds", "flags", "paper", "settings", "runs"}
RUN_FIELDS = {"name", "method", "test_input", "flags", "evaluate", "cotrain", "paper", "paper_row", "paper_table", "paper_model",
              "settings", "note"}
SETTING_FIELDS = {"paper", "paper_where", "script", "script_where", "run", "departure"}
# Settings of every run that are no flag of train.py: what it always does, and what the file itself sets.
FIXED = {"optimizer": "AdamW", "schedule": "linear warmup, then linear decay to 0"}
DEPTHS = {"xlm-roberta-base": 12, "xlm-roberta-large": 24, "xlm-roberta-xl": 36, "xlm-roberta-xxl": 48}  # hub names' layers
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
    cotrain: bool = False          # a run of cotrain.py (co-training, self-training), not of train.py
    paper_model: str | None = None  # the paper's row is of another model (named here): its numbers are shown, no difference
    settings: dict = field(default_factory=dict)  # {setting: Setting}: the paper's, its authors' script's and the run's values

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
    settings: dict = field(default_factory=dict)  # {setting: Setting} of every trained run, unless a run states its own

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
                            check_flags(path, "flags", spec.get("flags", [])), [], spec.get("about", ""), spec.get("paper") or {},
                            check_settings(path, "settings", spec.get("settings", {})))
    if not isinstance(spec["runs"], list) or not spec["runs"]:
        refuse(path, "runs", "a non-empty list of runs")
    for i, run in enumerate(spec["runs"]):
        experiment.runs.append(check_run(experiment, f"runs[{i}]", run))
    check_paper(experiment)
    for finding in audit(experiment):
        if finding.problem:
            refuse(path, finding.where, finding.problem)
    return experiment


def check_settings(path, where, spec):
    """{setting: {"paper", "paper_where", "script", "script_where", "run", "departure"}}, each
    value where its source gives one (null where silent), each given value with where it is given."""
    if not isinstance(spec, dict):
        refuse(path, where, 'an object {"<setting>": {"paper": ..., "script": ..., "run": ..., ...}}')
    for name, setting in spec.items():
        if not isinstance(setting, dict):
            refuse(path, f"{where}.{name}", "an object with the fields " + ", ".join(sorted(SETTING_FIELDS)))
        check_fields(path, f"{where}.{name}", setting, SETTING_FIELDS, required=("run",))
        for source in ("paper", "script"):
            if setting.get(source) is not None and not isinstance(setting.get(f"{source}_where"), str):
                refuse(path, f"{where}.{name}.{source}_where", f"missing: where the {source} gives {setting[source]!r}")
        if "departure" in setting and not (isinstance(setting["departure"], str) and setting["departure"].strip()):
            refuse(path, f"{where}.{name}.departure", "the reason, as a sentence")
    return dict(spec)


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
    derived = "evaluate" in spec or spec.get("cotrain")  # the method is the evaluated run's, or co-training's --lm-method
    check_fields(path, where, spec, RUN_FIELDS, required=("name", "test_input") if derived else ("name", "method", "test_input"))
    name = spec["name"]
    if not (isinstance(name, str) and re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name)):
        refuse(path, f"{where}.name", f"{name!r} is not a folder name of lower-case letters, digits, '-', '_' and '.'")
    if name in names:
        refuse(path, f"{where}.name", f"{name!r} names runs[{names.index(name)}] already")
    if spec.get("cotrain", False) not in (True, False) or (spec.get("cotrain") and "evaluate" in spec):
        refuse(path, f"{where}.cotrain", "true for a run of cotrain.py (not with evaluate), or left out")
    run = Run(name, spec.get("method"), spec["test_input"], check_flags(path, f"{where}.flags", spec.get("flags", [])),
              spec.get("evaluate"), spec.get("paper") or {}, spec.get("paper_row"), spec.get("paper_table"), spec.get("note"),
              bool(spec.get("cotrain")), spec.get("paper_model"), check_settings(path, f"{where}.settings", spec.get("settings", {})))
    if run.cotrain:
        run.method = cotrain_arguments(experiment, run, 0, Path("out"), where)[0].lm_method
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
    if run.evaluate is None and not run.cotrain:
        planned_arguments(experiment, run, where)  # refused here where train.py would refuse them
    return run


def parsed(path, where, parse, argv, script="train.py"):
    """parse(argv), or the file and field refused with the parser's own message."""
    try:
        with redirect_stderr(io.StringIO()) as errors:
            return parse(argv)
    except SystemExit:
        problem = errors.getvalue().strip().splitlines()[-1].split("error: ", 1)[-1]
        refuse(path, f"{where}.flags", f"{script} refuses them: {problem}")


def planned_arguments(experiment, run, where):
    """A trained run's train.py flags as they will be, with placeholders for the folders that exist only then."""
    folder = str(HERE) if experiment.data else None  # the data folder is checked when the runs start (check_languages)
    models = replace(run, flags=[MODEL_OF.sub(str(HERE), flag) for flag in run.flags])  # a model to be trained: a folder now
    argv = train_arguments(replace(experiment, data=folder), models, 0, Path("out"))
    parsed(experiment.path, where, flags.parse, argv)
    return argv


def cotrain_arguments(experiment, run, seed, folder, where="runs"):
    """(co-training's own flags, the flags of its f_lm's train.py runs) of a cotrain.py run."""
    import cotrain
    argv = train_arguments(replace(experiment, data=str(HERE) if experiment.data else None), run, seed, folder)
    own, rest, _ = parsed(experiment.path, where, cotrain.get_args, argv, "cotrain.py")
    return own, rest + ["--method", own.lm_method]


@dataclass
class Finding:
    """A stated setting of a trained run against what its flags resolve to (audit)."""
    run: Run
    name: str
    setting: dict      # the file's paper, paper_where, script, script_where, run and departure
    resolved: object   # what the run's flags resolve to
    where: str         # the file's field
    problem: str | None

    @property
    def departs(self):
        """Whether the run's value differs from the paper's, or the script's where the paper is silent."""
        expected = self.setting.get("paper") if self.setting.get("paper") is not None else self.setting.get("script")
        return expected is None or not same(self.setting["run"], expected)


def same(a, b):
    return math.isclose(a, b, rel_tol=1e-9) if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)) else a == b


def audit(experiment):
    """[Finding] for every setting an experiment file states, for each trained run it applies to
    (the file's `settings`, then the run's own): what the paper states, what its authors' script
    uses, what the run uses. A problem where the run's flags resolve to another value than the
    file says, where the run's value departs from the paper's (or, where the paper is silent, the
    script's) with no departure listed, or where a departure is listed and there is none."""
    findings = []
    for i, run in enumerate(experiment.runs):
        stated = {**experiment.settings, **run.settings}
        if run.evaluate or not stated:
            continue
        values = resolved_settings(experiment, run, f"runs[{i}]")
        for name, setting in stated.items():
            where = f"runs[{i}].settings.{name}" if name in run.settings else f"settings.{name}"
            resolved = values.get(name, KeyError)
            findings.append(Finding(run, name, setting, resolved, where, None))
            findings[-1].problem = setting_problem(findings[-1], run)
    return findings


def setting_problem(finding, run):
    setting, resolved = finding.setting, finding.resolved
    source = "paper" if setting.get("paper") is not None else "script"
    if resolved is KeyError:
        return f"{finding.name!r} is neither a setting of train.py (python train.py --help) nor one of {', '.join(FIXED)}"
    if not same(resolved, setting["run"]):
        return f"run {run.name} resolves it to {resolved!r}, not to the {setting['run']!r} the file says"
    if setting.get(source) is None and "departure" not in setting:
        return f"neither the paper nor its authors' script gives it: say why the run takes {setting['run']!r} (departure)"
    if finding.departs and "departure" not in setting:
        return f"the run's {setting['run']!r} departs from the {source}'s {setting[source]!r} with no departure listed"
    if not finding.departs and "departure" in setting:
        return f"a departure is listed, but the run takes the {source}'s {setting[source]!r}"
    return None


def resolved_settings(experiment, run, where):
    """{setting: value} a trained run resolves to before any data is read (flags.planned), with
    what every run does (FIXED), the model, the number of seeds and the test input; for a
    co-training run, its f_lm's settings and co-training's own."""
    depth = model_depth(experiment)
    try:
        if run.cotrain:
            own, rest = cotrain_arguments(experiment, run, 0, Path("out"), where)
            values = flags.planned(rest, experiment.task, depth)
            values.update({k: v for k, v in vars(own).items() if k not in ("out", "resume", "overwrite", "model")})
        else:
            values = flags.planned(planned_arguments(experiment, run, where), experiment.task, depth)
    except tasks.InputError as e:
        refuse(experiment.path, f"{where}.flags", str(e))
    return {**values, **FIXED, "model": experiment.model or "the bundled multilingual-e5-small", "seeds": len(experiment.seeds),
            "test_input": run.test_input}


def model_depth(experiment):
    """The encoder's layers (the papers' settings for QA scale with it): from a checkpoint folder's
    or the hub cache's config.json, else from the hub names of XLM-R's sizes; 12 for the bundled model."""
    from model import Config
    if experiment.model is None:
        return 12
    folder = Path(experiment.model) if Path(experiment.model).is_dir() else hub.cached(experiment.model)
    if folder is not None:
        return Config.from_directory(folder).num_layers
    return DEPTHS.get(experiment.model.rsplit("/", 1)[-1])


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

    @property
    def best(self):
        """The model it leaves, which other runs of the same seed may read."""
        return self.folder / "final" / "lm" / "best" if self.run.cotrain else self.folder / "best"

    @property
    def record_file(self):
        """What its results were made with (record()), beside its log: no run writes into the logs."""
        return self.log.with_suffix(".json")


def jobs(experiment, out):
    """Every (run, seed), seed by seed, so that the first seeds' table is complete first."""
    return [Job(run, seed, out / f"{run.name}-seed{seed}", out / "logs" / f"{run.name}-seed{seed}.log")
            for seed in experiment.seeds for run in experiment.runs]


def train_arguments(experiment, run, seed, folder):
    """The flags of a trained run's train.py (co-training: cotrain.py, which takes --lm-method, not --method)."""
    argv = ([] if run.cotrain else ["--method", run.method]) + ["--task", experiment.task, "--seed", str(seed), "--test-input", run.test_input]
    argv += ["--data", experiment.data] if experiment.data else []
    argv += ["--model", experiment.model] if experiment.model else []
    model_of = lambda name: str(folder.parent / f"{name}-seed{seed}" / "best")
    return argv + experiment.flags + [MODEL_OF.sub(lambda m: model_of(m.group(1)), flag) for flag in run.flags] + ["--out", str(folder)]


def state(job):
    """done (results written), interrupted (a checkpoint to resume), started (a folder to start
    again) or new."""
    if job.results.is_file():
        return "done"
    if job.run.cotrain and (job.folder / "pool.jsonl").is_file():
        return "interrupted"  # co-training replays its recorded rounds (--resume)
    if not job.run.evaluate and not job.run.cotrain and cli.has_checkpoint(job.folder):
        return "interrupted"
    return "started" if job.folder.exists() else "new"


def record(job, experiment, jobs_by_name):
    """What a job's results mean: the run as the file asks for it now (its folders aside) and a
    fingerprint of each model it reads (the run it evaluates, a teacher), which a retraining changes."""
    run = job.run
    return {"run": "evaluate" if run.evaluate else "cotrain.py" if run.cotrain else "train.py", "method": run.method,
            "task": experiment.task, "model": experiment.model, "seed": job.seed, "test_input": run.test_input,
            "flags": run.flags if run.evaluate else experiment.flags + run.flags,
            "reads": {name: fingerprint(jobs_by_name[name, job.seed].best) for name in run.needs}}


def fingerprint(folder):
    """The files of a model folder by name, size and time of writing (a retrained model differs), hashed."""
    files = sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in Path(folder).rglob("*") if p.is_file())
    return hashlib.sha256(json.dumps(files).encode()).hexdigest()[:16] if files else None


def status(job, experiment, jobs_by_name):
    """state(), or "changed": results or a checkpoint made with other flags than the file asks now,
    or from another model than the one it reads now (or with no record of what they were made with)."""
    current = state(job)
    if current in ("done", "interrupted"):
        try:
            made = json.loads(job.record_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            made = None
        if made != record(job, experiment, jobs_by_name):
            return "changed"
    return current


def command(job, experiment, nproc, jobs_by_name, again=False):
    """The command of a job, as it runs now (--resume for an interrupted run, --overwrite for one to
    start again, or with `again` for a changed one)."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
    if job.run.evaluate:
        trained = jobs_by_name[job.run.evaluate, job.seed]
        argv = ["--checkpoint", str(trained.best), "--method", job.run.method, "--test-input", job.run.test_input]
        argv += ["--data", experiment.data] if experiment.data else []
        return launcher + [str(HERE / "evaluate.py")] + argv + job.run.flags + ["--out", str(job.folder)]
    argv = train_arguments(experiment, job.run, job.seed, job.folder)
    argv += ["--overwrite"] if again else {"interrupted": ["--resume"], "started": ["--overwrite"]}.get(state(job), [])
    return launcher + [str(HERE / ("cotrain.py" if job.run.cotrain else "train.py"))] + argv


def tail(path, lines=12):
    """The last lines the run wrote before torchrun's own report of its failure."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").replace("\r", "\n")
    except OSError:
        return ["(no log)"]
    kept = [line for line in text.splitlines() if line.strip()]
    ends = [i for i, line in enumerate(kept) if "elastic/multiprocessing" in line and "failed (exitcode" in line]
    return kept[:ends[0] if ends else len(kept)][-lines:]


CHANGED = "changed: made with other flags or from another model than the file asks for now (--rerun-changed runs it again)"


def execute(experiment, out, nproc, rerun_changed=False):
    """Run every job that has no results, and with `rerun_changed` every changed one (status());
    returns {label: why} of those that failed, could not start, or were left changed."""
    todo = jobs(experiment, out)
    by_name = {(job.run.name, job.seed): job for job in todo}
    failed = {}
    done = sum(status(job, experiment, by_name) == "done" for job in todo)
    bar = tqdm(total=len(todo), initial=done, desc=f"{experiment.path.stem}: runs", unit="run", dynamic_ncols=True)
    for job in todo:
        current = status(job, experiment, by_name)  # after the runs before it: a retrained model changes its evaluations
        if current == "done":
            continue
        lacking = [name for name in job.run.needs if status(by_name[name, job.seed], experiment, by_name) != "done"]
        if lacking or (current == "changed" and not rerun_changed):
            failed[job.label] = f"not run: {lacking[0]} seed {job.seed} has no model made as the file asks" if lacking else CHANGED
            bar.update()
            continue
        how = {"interrupted": "resuming", "started": "starting again", "changed": "running again (changed)"}.get(current, "starting")
        bar.set_postfix_str(f"{how} {job.label}; {len(failed)} failed")
        job.log.parent.mkdir(parents=True, exist_ok=True)
        started, argv = time.monotonic(), command(job, experiment, nproc, by_name, again=current == "changed")
        cli.write_text(job.record_file, json.dumps(record(job, experiment, by_name), indent=1) + "\n")
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
    seeds: list      # the seeds whose runs finished as the file asks
    missing: list    # the seeds whose runs did not
    scores: dict
    changed: list = field(default_factory=list)  # the seeds whose results were made otherwise (status(): not counted)
    settings: dict = field(default_factory=dict)  # the resolved settings its first counted seed recorded (results.json)


def read_scores(experiment, out):
    """A Column per run, from the results of its finished seeds; results made otherwise than the
    file asks now (status(): changed) are named, not counted."""
    columns, source = [], experiment.source
    by_name = {(job.run.name, job.seed): job for job in jobs(experiment, out)}
    for run in experiment.runs:
        seeds, missing, scores, changed, settings = [], [], {}, [], {}
        for seed in experiment.seeds:
            job = by_name[run.name, seed]
            try:
                results = json.loads(job.results.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                missing.append(seed)
                continue
            if status(job, experiment, by_name) == "changed":
                changed.append(seed)
                continue
            settings = settings or results.get("settings") or {}
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
        columns.append(Column(run, seeds, missing, scores, changed, settings))
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
    run, n = column.run, len(column.seeds)
    seeds = f"{n} seed{'s' * (n != 1)}" if n == total else f"{n} of {total} seeds"
    seeds += f"; missing: seed {', '.join(map(str, column.missing))}" if column.missing else ""
    seeds += f"; changed, not counted: seed {', '.join(map(str, column.changed))}" if column.changed else ""
    return f"{run.name} ({seeds})"


SHOWN = ("lr", "batch_size", "epochs", "max_steps", "max_length", "warmup", "weight_decay", "select_on")  # where the file states none


def settings_line(experiment, column):
    """The settings a run's results were made with, as train.py resolved them (presets, defaults, --epochs as steps)."""
    if column.run.evaluate:
        return f"the {column.run.evaluate} model's"
    names = [n for n in dict.fromkeys([*experiment.settings, *column.run.settings, *SHOWN]) if n in column.settings]
    return ", ".join(f"{name} {column.settings[name]}" for name in names) or "none recorded"


def paper_value(run, key):
    return run.paper.get("average" if key == "average, as the paper's" else key)


def markdown(experiment, columns, failed=None):
    """The table in markdown: a section per test input, a row per language and average."""
    lines = [f"# {experiment.title}", ""] + ([experiment.about, ""] if experiment.about else [])
    total = len(experiment.seeds)
    lines += [f"Task {experiment.task} ({experiment.data}), model {experiment.model or 'the bundled default'}, "
              f"seeds {', '.join(map(str, experiment.seeds))}, {experiment.metric} in percent: mean ± sample standard "
              "deviation over the seeds in each column's header. Settings as each run resolved them (results.json):", ""]
    lines += [f"- {c.run.name}: {settings_line(experiment, c)}" for c in columns if c.settings or c.run.evaluate]
    if experiment.paper.get("table"):
        lines += ["", f"Paper: {experiment.paper['table']}; Δ is ours minus the paper's, with the seeds it averages where "
                      f"fewer than {total}. The paper's average is over "
                      f"{'all its languages' if experiment.paper['average'] == 'all' else 'its target languages'}. A row "
                      "of another model than ours is shown with no Δ."]
    keys = rows_of(experiment, columns)
    for test_input in dict.fromkeys(c.run.test_input for c in columns):
        group = [c for c in columns if c.run.test_input == test_input]
        names = []
        for c in group:
            names.append(header(c, total))
            names += (["paper (another model)"] if c.run.paper_model else ["paper", "Δ"]) if c.run.paper else []
        lines += ["", f"**Each prediction sees {TEST_INPUTS[test_input]}.**", "",
                  "| language | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for key in keys:
            cells = []
            for c in group:
                value = cell(c, key)
                cells.append("missing" if value is None else f"{value[0]:.1f}" + (f" ± {value[1]:.1f}" if value[1] is not None else ""))
                if c.run.paper:
                    paper = paper_value(c.run, key)
                    cells.append("" if paper is None else f"{paper:.1f}")
                    if not c.run.paper_model:
                        cells.append("" if paper is None or value is None else f"{value[0] - paper:+.1f}"
                                     + (f" ({value[2]} of {total} seeds)" if value[2] < total else ""))
            label = f"{key} (source)" if key == experiment.source else key
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        notes = [f"{c.run.name}: " + " ".join(filter(None, [c.run.note, c.run.paper_table and f"(the paper's numbers: "
                                                             f"{c.run.paper_table}{', ' + repr(c.run.paper_row) if c.run.paper_row else ''})",
                                                             c.run.paper_model and f"The paper's row is of another model: {c.run.paper_model}."]))
                 for c in group if c.run.note or c.run.paper_table or c.run.paper_model]
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
                             "" if paper is None or mean == "" or c.run.paper_model else f"{mean - paper:.2f}",
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
    p.add_argument("--dry-run", action="store_true", help="the settings (paper, authors' script, run) and the departures, then "
                   "the runs, what each would do, and its command; run nothing")
    p.add_argument("--report", action="store_true", help="only the table, from the runs that finished; run nothing")
    p.add_argument("--rerun-changed", action="store_true", help="run again the runs whose results were made with other flags, or "
                   "from another model, than the file asks for now (without it they are named, and not counted)")
    return p.parse_args(argv)


def plan(experiment):
    """The file's settings as lines: each with the paper's, the authors' script's and the run's
    value (every trained run's, then each run's own), then the departures with their reasons."""
    findings = {f.where: f for f in audit(experiment)}  # a setting of every run: once
    value = lambda s, source: "silent" if s.get(source) is None else f"{s[source]!r} ({s[f'{source}_where']})"
    lines, owner = [], None
    for where, f in findings.items():
        group = "every trained run" if where.startswith("settings.") else f.run.name
        if group != owner:
            lines.append(f"  {group}:")
            owner = group
        lines.append(f"    {f.name}: paper {value(f.setting, 'paper')}; script {value(f.setting, 'script')}; run {f.setting['run']!r}"
                     + (" *" if f.departs else ""))
    departures = [f"  {'every trained run' if w.startswith('settings.') else f.run.name}, {f.name}: {f.setting['departure']}"
                  for w, f in findings.items() if f.departs]
    if not lines:
        return []
    return (["Settings: what the paper states, what its authors' script uses, what the run uses (* departs):"] + lines
            + ["Departures, and the runs' own choices where neither the paper nor the script gives a value:"] + (departures or ["  none"]))


def dry_run(experiment, out, nproc):
    for line in plan(experiment):
        print(line)
    todo = jobs(experiment, out)
    by_name = {(job.run.name, job.seed): job for job in todo}
    what = {"done": "finished: skipped", "changed": "changed: not counted; --rerun-changed runs it again",
            "interrupted": "interrupted: resumed", "started": "started: run again", "new": "to run"}
    statuses = {job.label: status(job, experiment, by_name) for job in todo}
    for job in todo:
        argv = command(job, experiment, nproc, by_name, again=statuses[job.label] == "changed")
        print(f"{job.label} ({what[statuses[job.label]]})\n  {shlex.join(argv)}")
    counts = {s: sum(value == s for value in statuses.values()) for s in what}
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
        failed = execute(experiment, out, args.nproc_per_node, args.rerun_changed)
    else:
        failed = {}
    report(experiment, out, failed)
    if failed:
        sys.exit(f"{len(failed)} run(s) did not finish:\n" + "\n".join(f"{label}: {why}" for label, why in failed.items()))


if __name__ == "__main__":
    cli.run(main)
