"""A paper's table in one command: every run of an experiment file, for every seed, through
torchrun, then the mean and standard deviation over seeds beside the paper's numbers.

    python reproduce.py experiments/sib-200.json --data ../shared/data/sib200  # runs, then the table
    python reproduce.py experiments/filter-xnli.json --nproc-per-node 8       # 8 GPUs per run
    python reproduce.py experiments/filter-xnli.json --dry-run                # settings, departures, cost, commands
    python reproduce.py experiments/ --dry-run                                # every file, and their cost summed
    python reproduce.py experiments/sib-200.json --data ../shared/data/sib200 --report  # the runs there are
    python reproduce.py experiments/sib-200.json --runs xeroalign --seeds 0   # one row, one seed

An experiment file (experiments/*.json) names the task, data, model, seeds and runs, and for every
setting that decides a run what the paper says, what the authors' script uses, what the run uses,
and why it departs. Each (run, seed) trains into OUT/<task>/<key>-seed<S>, shared by the files
that ask for the same run, its log in OUT/<task>/logs/; a finished run is not started again, an
interrupted one resumes. The table (OUT/<file>/table.md, .csv, .png) gives the mean ± sample
standard deviation over the seeds that finished, never silently over fewer (docs/experiments.md).
"""
import argparse
import shlex
import signal
import sys
from dataclasses import replace
from pathlib import Path

from minxlt import tasks
from minxlt.experiments.cost import TOKENS_ASSUMED, Cost, cotrain_cost, gpu_hours, run_cost, say
from minxlt.experiments.jobs import by_name, command, execute, jobs, run_keys, status
from minxlt.experiments.report import report
from minxlt.experiments.spec import audit, check_languages, load_experiment, resolved_settings
from minxlt.run import cli

# what each state of a job means in --dry-run's list
WHAT = {"done": "finished: skipped", "changed": "changed: not counted; --rerun-changed runs it again with --overwrite",
        "interrupted": "interrupted: resumed with --resume", "started": "started: run again with --overwrite",
        "new": "to run"}


def get_args(argv=None):
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = p.add_argument
    add("experiment", type=Path, help="an experiment file (experiments/*.json); with --dry-run, also a folder of them")
    add("--out", type=Path, default=Path("runs"), help="where the runs (OUT/<task>/) and each file's table "
        "(OUT/<file>/) go (default: runs)")
    add("--data", help="the task's data folder, instead of the file's")
    add("--nproc-per-node", type=cli.positive_int, default=1, help="processes per run (GPUs of the machine; default 1)")
    add("--dry-run", action="store_true", help="the file's description (about), the settings (paper, authors' script, "
        "run) and the departures, the paper's rows not run, the cost, then the runs, what each would do and its "
        "command; run nothing")
    add("--report", action="store_true", help="only the table, from the runs that finished; run nothing")
    add("--runs", type=cli.languages, metavar="NAME,...", help="run only these runs of the file, and those whose "
        "models they read where those have none yet (default: every run); the table is the file's")
    add("--seeds", type=cli.languages, metavar="S,...", help="run only these of the file's seeds (default: all)")
    add("--rerun-changed", action="store_true", help="run again the runs whose results were made from another model "
        "than the one they read now (without it they are named, and not counted)")
    args = p.parse_args(argv)
    if not (args.experiment.is_file() or (args.dry_run and args.experiment.is_dir())):
        folder = " (a folder of files goes with --dry-run)" if args.experiment.is_dir() else ""
        p.error(f"{args.experiment}: no such file{folder}")
    return args


def plan(experiment):
    """The file's settings as lines, with the paper's, the authors' script's and the run's value (every trained
    run's, then each run's own), the departures and why, the runs that need files, the rows not run."""
    findings = {f.where: f for f in audit(experiment, variants=False)}  # a setting of every run: once
    shown = lambda value: "none" if value is None else repr(value)
    value = lambda s, source: f"{shown(s.get(source))} ({s[f'{source}_where']})" if f"{source}_where" in s else "silent"
    group = lambda where, f: "every trained run" if where.startswith("settings.") else f.run.name
    lines, owner = [], None
    for where, f in findings.items():
        if group(where, f) != owner:
            owner = group(where, f)
            lines.append(f"  {owner}:")
        lines.append(f"    {f.name}: paper {value(f.setting, 'paper')}; script {value(f.setting, 'script')}; "
                     f"run {shown(f.setting['run'])}" + (" *" if f.departs else ""))
    departures = [f"  {group(w, f)}, {f.name}: {f.setting['departure']}" for w, f in findings.items() if f.departs]
    out = ["Settings: what the paper states, what its authors' script uses, what the run uses "
           "(* departs from either):", *lines,
           "Departures, and the runs' own choices where neither the paper nor the script gives a value:",
           *(departures or ["  none"])] if lines else []
    variants = [f"  {run.name}: {run.variant}" for run in experiment.runs if run.variant]
    omitted = [f"  {row['row']} ({row['table']}): {row['reason']}" for row in experiment.omitted]
    out += ["Runs that need files of the data folder:", *variants] if variants else []
    return out + (["The paper's rows not run:", *omitted] if omitted else [])  # a heading with nothing under it goes


def costs(experiment, todo):
    """{job key: Cost} of every job, from the file's sizes and each run's settings."""
    out, level = {}, tasks.LAYOUTS[experiment.task].level
    for i, run in enumerate(experiment.runs):
        trained = next((r for r in experiment.runs if r.name == run.evaluate), run)
        values = resolved_settings(experiment, trained, f"runs[{i}]")
        for job in todo:
            if job.run.name == run.name and job.key not in out:
                given = dict(values, **({"lr": job.value} if job.value else {}))
                out[job.key] = (cotrain_cost(given, experiment.sizes, run.test_input, level) if trained.cotrain else
                                run_cost(run.method, given, experiment.sizes, run.test_input, not run.evaluate, level))
    return out


def shared_runs(experiment, data):
    """{job key: ["<file> (<run>)", ...]} of the other experiment files beside this one that ask for its runs."""
    shared = {}
    for path in sorted(experiment.path.parent.glob("*.json")):
        if path.resolve() == experiment.path.resolve():
            continue
        try:
            other = load_experiment(path, data if data and load_experiment(path).task == experiment.task else None)
        except tasks.InputError:
            continue
        for (name, _), key in run_keys(other).items():
            shared.setdefault(key, []).append(f"{path.name} ({name})")
    return shared


def seed_range(seeds):
    """Seeds as words: [1, 2, 3, 5] is "seeds 1-3, 5"."""
    spans = []
    for seed in seeds:
        if spans and seed == spans[-1][1] + 1:
            spans[-1][1] = seed
        else:
            spans.append([seed, seed])
    words = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)
    return f"seed{'s' * (len(seeds) > 1)} {words}"


def seeded_command(argvs, seeds):
    """The seeds' commands as one, `for S in ...; do ... "$S" ...; done`, where only the seed differs; else None."""
    if len(argvs) == 1:
        return shlex.join(argvs[0])
    if len({len(argv) for argv in argvs}) > 1:
        return None
    words = []
    for tokens in zip(*argvs):
        if len(set(tokens)) == 1:
            words.append(shlex.quote(tokens[0]))
            continue
        first = tokens[0]
        template = "\0" if first == str(seeds[0]) else first.replace(f"seed{seeds[0]}", "seed\0")  # \0: the seed
        if any(template.replace("\0", str(seed)) != token for seed, token in zip(seeds, tokens)):
            return None
        words.append('"$S"'.join(shlex.quote(part) if part else "" for part in template.split("\0")))
    return f"for S in {' '.join(map(str, seeds))}; do {' '.join(words)}; done"


def dry_run(experiment, out, nproc, data=None):
    """Print a file's description, plan, runs and cost; returns {job key and seed: (Cost, model)}, each job once."""
    print("\n".join([f"== {experiment.path}: {experiment.title}", *[experiment.about] * bool(experiment.about),
                     *plan(experiment)]))
    todo = jobs(experiment, out)
    named, price, shared = by_name(todo), costs(experiment, todo), shared_runs(experiment, data)
    statuses = {job.label: status(job, experiment, named) for job in todo}
    for key in dict.fromkeys((job.run.name, job.value) for job in todo):
        mine = [job for job in todo if (job.run.name, job.value) == key]
        argvs = [command(job, experiment, nproc, named) for job in mine]
        argvs = [argv[:-1] if argv[-1] in ("--resume", "--overwrite") else argv for argv in argvs]  # said by its state
        by_state = {state: [job.seed for job in mine if statuses[job.label] == state]
                    for state in dict.fromkeys(statuses[job.label] for job in mine)}
        states = [WHAT[state] if len(by_state) == 1 else f"{seed_range(held)} {WHAT[state]}"
                  for state, held in by_state.items()]
        also = f"; shared with {', '.join(shared[mine[0].key])}" if mine[0].key in shared else ""
        joined = seeded_command(argvs, experiment.seeds)  # each run has a job of every seed
        print(f"{mine[0].label.rpartition(' seed ')[0]}, {seed_range(experiment.seeds)} ({'; '.join(states)}{also})")
        print("\n".join(f"  {line}" for line in ([joined] if joined else map(shlex.join, argvs))))
    counts = {s: sum(value == s for value in statuses.values()) for s in WHAT}
    rows = len(todo) // len(experiment.seeds)  # a job of each run (a grid's each value) for every seed
    print(f"{len(todo)} runs ({rows} x {len(experiment.seeds)} seeds): "
          + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    print("cost of each run, one seed:")
    for job in todo[:rows]:
        cost = price[job.key]
        length = (cost.training_tokens // cost.training if cost.training else
                  cost.evaluation_tokens // max(1, cost.evaluation))  # the run's --max-length
        counted = f"; texts counted at {length} tokens" if length else ""
        print(f"  {job.label.rpartition(' seed ')[0]}: {say(cost)}{counted}")
    jobs_cost = {job.key + str(job.seed): (price[job.key], experiment.model) for job in todo}
    total = sum((cost for cost, _ in jobs_cost.values()), Cost())
    sizes = experiment.sizes
    counted = (f" (from the file's sizes: {sizes['train']:,} training examples, {sizes['dev']:,} dev and "
               f"{sizes['test']:,} test a language, {sizes['languages']} languages; {sizes['from']})" if sizes else "")
    print(f"cost, every run of every seed: {say(total)}{counted}")
    hours = gpu_hours(total, experiment.model)  # its words; the hours are each run's, summed
    if hours:
        each = sum(gpu_hours(cost, experiment.model)[0] for cost, _ in jobs_cost.values())
        print(f"about {each:,.1f} GPU-hours: {hours[1]}")
    return jobs_cost


def narrowed(experiment, runs=None, seeds=None):
    """The experiment with only the runs (and those whose models they read) and seeds that --runs and --seeds give."""
    names = [run.name for run in experiment.runs]
    given = [str(seed) for seed in experiment.seeds]
    unknown = [name for name in runs or [] if name not in names] + [seed for seed in seeds or [] if seed not in given]
    if unknown:
        raise tasks.InputError(f"{experiment.path} has no run or seed {unknown[0]!r}: its runs are "
                               f"{', '.join(names)}; its seeds {', '.join(given)}")
    kept = set(runs or names)
    for run in reversed(experiment.runs):  # a run reads the models of runs before it
        kept |= set(run.needs) if run.name in kept else set()
    return replace(experiment, runs=[run for run in experiment.runs if run.name in kept],
                   seeds=[seed for seed in experiment.seeds if not seeds or str(seed) in seeds])


def main(argv=None):
    args = get_args(argv)
    if args.experiment.is_dir():  # --dry-run of every file, each run counted once however many files share it
        every, paths = {}, sorted(args.experiment.glob("*.json"))
        for path in paths:
            every.update(dry_run(load_experiment(path), args.out, args.nproc_per_node))
            print()
        total = sum((cost for cost, _ in every.values()), Cost())
        hours = sum((gpu_hours(cost, model) or (0,))[0] for cost, model in every.values())
        print(f"all {len(paths)} files, each shared run once: {say(total)}; about {hours:,.1f} GPU-hours on one "
              "NVIDIA H200, an estimate from the step times bench.train_step measured for each model's shape "
              f"(RESULTS.md), for the runs of a model measured: {TOKENS_ASSUMED}")
        return
    experiment = load_experiment(args.experiment, args.data)
    if args.dry_run:
        try:
            check_languages(experiment)
        except tasks.InputError as e:
            print(f"note: {e}")
        dry_run(narrowed(experiment, args.runs, args.seeds), args.out, args.nproc_per_node, args.data)
        return
    failed = None
    if not args.report:
        check_languages(experiment)
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # as Ctrl-C: the running run saves a checkpoint
        failed = execute(narrowed(experiment, args.runs, args.seeds), args.out, args.nproc_per_node, args.rerun_changed)
    report(experiment, args.out, failed)
    if failed:
        sys.exit(f"{len(failed)} run(s) did not finish:\n" + "\n".join(f"{run}: {why}" for run, why in failed.items()))


if __name__ == "__main__":
    cli.run(main)
