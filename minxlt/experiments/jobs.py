"""The jobs of an experiment: one per (run, seed), each a torchrun of train.py, evaluate.py or
cotrain.py into a folder of its own, what it was asked recorded beside its log; its state (done,
interrupted, started, new, or changed: made otherwise than the file asks now) read from its folder.
"""
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from minxlt import tasks
from minxlt.experiments.spec import HERE, Run, train_arguments
from minxlt.run import cli


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
