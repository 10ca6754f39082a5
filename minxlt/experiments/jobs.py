"""An experiment's jobs: one per (run, seed), each a torchrun of train.py, evaluate.py or cotrain.py into a
folder of its own, its state (done, interrupted, started, new, or changed) read from that folder."""
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from tqdm import tqdm

from minxlt import tasks
from minxlt.experiments.spec import DATA, GRIDDED, HERE, Run, train_arguments
from minxlt.run import cli

CHANGED = "changed: made from another model than the one it reads now (--rerun-changed runs it again)"


@dataclass
class Job:
    """One run of one seed (and grid value) in OUT/<task>/<key>-seed<S>, the key the run as it trains, hashed."""
    run: Run
    seed: int
    folder: Path
    log: Path
    key: str = ""
    value: float | None = None  # a grid run's value (its --lr)

    @property
    def label(self):
        return f"{self.run.name}{grid_label(self.run, self.value)} seed {self.seed}"

    @property
    def results(self):
        return self.folder / ("results_test.json" if self.run.evaluate else "results.json")

    @property
    def best(self):
        return self.folder / "final" / "lm" / "best" if self.run.cotrain else self.folder / "best"

    @property
    def record_file(self):
        """What its results were made with (record()), beside its log."""
        return self.log.with_suffix(".json")


def grid_label(run, value):
    return "" if value is None else f" {next(iter(run.grid or {'lr': 0}))}={value:g}"


def values(run, experiment):
    """The grid values a run is made with ([None]: no grid); an evaluation, its trained run's."""
    trained = next((r for r in experiment.runs if r.name == run.evaluate), run)
    return list(trained.grid["lr"]) if trained.grid else [None]


def with_value(run, value):
    """The run with a grid value as its flag."""
    return run if value is None or run.evaluate else replace(run, flags=run.flags + [GRIDDED["lr"], f"{value:g}"])


def run_keys(experiment):
    """{(run name, grid value): key}: the method and a hash of its command without its folders and seed, the
    data folder resolved, a model it reads named by that run's key."""
    keys, data = {}, str(Path(experiment.data).resolve()) if experiment.data else None
    local = experiment.model and Path(experiment.model).is_dir()
    model = str(Path(experiment.model).resolve()) if local else experiment.model
    fixed = replace(experiment, data=data, model=model)
    for run in experiment.runs:
        for value in values(run, experiment):
            if run.evaluate:
                described = ["evaluate.py", keys[run.evaluate, value], run.method, run.test_input,
                             [flag.replace(DATA, data or DATA) for flag in run.flags]]
            else:
                argv = train_arguments(fixed, with_value(run, value), 0, Path("out"), lambda name: keys[name, None])
                described = ["cotrain.py" if run.cotrain else "train.py", argv]
            keys[run.name, value] = f"{run.method}-{hashlib.sha256(json.dumps(described).encode()).hexdigest()[:10]}"
    return keys


def jobs(experiment, out):
    """Every (run, grid value, seed), seed by seed, so that the first seeds' table is complete first."""
    keys, folder = run_keys(experiment), Path(out) / experiment.task
    return [Job(with_value(run, value), seed, folder / f"{keys[run.name, value]}-seed{seed}",
                folder / "logs" / f"{keys[run.name, value]}-seed{seed}.log", keys[run.name, value], value)
            for seed in experiment.seeds for run in experiment.runs for value in values(run, experiment)]


def by_name(todo):
    return {(job.run.name, job.value, job.seed): job for job in todo}


def needed(job, jobs_by_name):
    """The jobs whose best model this one reads: the one it evaluates (of its grid value), its {run}s."""
    return [jobs_by_name[name, job.value if name == job.run.evaluate else None, job.seed] for name in job.run.needs]


def state(job):
    """done (results written), interrupted (a checkpoint to resume), started (a folder) or new."""
    if job.results.is_file():
        return "done"
    resumable = (job.folder / "pool.jsonl").is_file() if job.run.cotrain else cli.latest_checkpoint(job.folder)
    if resumable and not job.run.evaluate:  # co-training replays its recorded rounds (--resume)
        return "interrupted"
    return "started" if job.folder.exists() else "new"


def record(job, experiment, jobs_by_name):
    """What a job's results mean: its key and a fingerprint of each model it reads, which a retraining changes
    (the model folder's files by name, size and time of writing, hashed)."""
    reads = {}
    for other in needed(job, jobs_by_name):
        files = sorted((str(p.relative_to(other.best)), p.stat().st_size, p.stat().st_mtime_ns)
                       for p in Path(other.best).rglob("*") if p.is_file())
        reads[other.key] = hashlib.sha256(json.dumps(files).encode()).hexdigest()[:16] if files else None
    return {"key": job.key, "seed": job.seed, "reads": reads}


def status(job, experiment, jobs_by_name):
    """state(), or "changed": results or a checkpoint made from another model than it reads now, or of a job that
    reads one, unrecorded."""
    current = state(job)
    if current in ("done", "interrupted"):
        try:
            made = json.loads(job.record_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            made = None
        if made != record(job, experiment, jobs_by_name) and (made or needed(job, jobs_by_name)):
            return "changed"  # unrecorded counts where the job reads a model: which one made it is not known
    return current


def command(job, experiment, nproc, jobs_by_name, again=False):
    """A job's command as it runs now: --resume where interrupted, --overwrite where started or `again`."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
    if job.run.evaluate:
        trained = needed(job, jobs_by_name)[0]
        argv = ["--checkpoint", str(trained.best), "--method", job.run.method, "--test-input", job.run.test_input]
        argv += ["--data", experiment.data] if experiment.data else []
        flags = [flag.replace(DATA, experiment.data or DATA) for flag in job.run.flags]
        return launcher + [str(HERE / "evaluate.py")] + argv + flags + ["--out", str(job.folder)]
    model_of = lambda name: str(jobs_by_name[name, None, job.seed].best)
    argv = train_arguments(experiment, job.run, job.seed, job.folder, model_of)
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


def execute(experiment, out, nproc, rerun_changed=False):
    """Run every job without results (and every changed one with `rerun_changed`); {label: why} of those that
    failed, could not start, or were left changed."""
    todo = jobs(experiment, out)
    named, failed = by_name(todo), {}
    done = sum(status(job, experiment, named) == "done" for job in todo)
    with tqdm(total=len(todo), initial=done, desc=f"{experiment.path.stem}: runs", unit="run",
              dynamic_ncols=True) as bar:
        for job in todo:
            current = status(job, experiment, named)  # after the runs before: a retrained model changes its evaluations
            if current == "done":
                continue
            lacking = [other.label for other in needed(job, named) if status(other, experiment, named) != "done"]
            if lacking or (current == "changed" and not rerun_changed):
                failed[job.label] = f"not run: {lacking[0]} has no model made as the file asks" if lacking else CHANGED
                bar.update()
                continue
            how = {"interrupted": "resuming", "started": "starting again",
                   "changed": "running again (changed)"}.get(current, "starting")
            bar.set_postfix_str(f"{how} {job.label}; {len(failed)} failed")
            started, argv = time.monotonic(), command(job, experiment, nproc, named, again=current == "changed")
            cli.write_text(job.record_file, json.dumps(record(job, experiment, named), indent=1) + "\n")
            with open(job.log, "a", encoding="utf-8") as log:
                log.write(f"$ {shlex.join(argv)}\n")
                log.flush()
                code, interrupted = launch(argv, log)
            if interrupted or (code == 0 and state(job) == "interrupted"):  # stopped by a signal
                raise tasks.InputError(f"stopped during {job.label}: run the same command to continue (finished runs "
                                       "are kept)")
            if code or state(job) != "done":
                failed[job.label] = f"exit status {code}; the last lines of {job.log}:\n  " + "\n  ".join(tail(job.log))
                tqdm.write(f"failed: {job.label} (exit status {code}); its log: {job.log}")
            else:
                tqdm.write(f"finished {job.label} in {(time.monotonic() - started) / 60:.1f} min")
            bar.update()
    return failed


def launch(argv, log):
    """(exit status, whether the user stopped it): the command in its own session, so that Ctrl-C reaches it
    once, from here (it saves a checkpoint and stops); a second Ctrl-C kills it."""
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
