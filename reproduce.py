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
import shlex
import signal
import sys
from pathlib import Path

from minxlt import tasks
from minxlt.experiments.jobs import command, execute, jobs, status
from minxlt.experiments.report import report
from minxlt.experiments.spec import audit, check_languages, load_experiment
from minxlt.run import cli


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
