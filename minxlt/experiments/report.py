"""An experiment's table: per language and averages, the mean ± sample standard deviation over the seeds
that finished as the file asks, beside the paper's numbers (OUT/<file>/table.md, table.csv, table.png)."""
import csv
import io
import json
import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

from methods import TEST_INPUTS
from minxlt import tasks
from minxlt.experiments.jobs import by_name, grid_label, jobs, status
from minxlt.experiments.spec import Run
from minxlt.run import cli

AVERAGES = ("target average", "average, as the paper's")  # the rows after the languages
# the settings a column's line names, beside those the file states
SHOWN = ("lr", "batch_size", "epochs", "max_steps", "max_length", "warmup", "weight_decay", "select_on")


@dataclass
class Column:
    """A run's scores: {language or "target average": [score per finished seed]}, in percent."""
    run: Run
    seeds: list      # the seeds whose runs finished as the file asks
    missing: list    # the seeds whose runs did not
    scores: dict
    changed: list = field(default_factory=list)   # the seeds whose results were made otherwise: not counted
    settings: dict = field(default_factory=dict)  # the resolved settings its first counted seed recorded
    grid: dict = field(default_factory=dict)      # a grid run's {value: mean dev score}, and its chosen value
    chosen: float | None = None
    warnings: dict = field(default_factory=dict)  # {seed: what went wrong} (train.py's end-of-run check)
    dev: float | None = None                      # the mean dev score of its tested models, where every seed has one


def read_scores(experiment, out, metric=None):
    """A Column per run from its finished seeds (changed ones named, not counted); a grid run's is the value of
    the best mean dev score, as a paper chooses on dev."""
    todo = jobs(experiment, out)
    named, columns, chosen_of = by_name(todo), [], {}
    for run in (run for run in experiment.runs if not run.pretrains):  # a pre-training is tested by its fine-tunings
        values = dict.fromkeys(j.value for j in todo if j.run.name == run.name)
        by_value = {value: column_of(experiment, run, value, named, metric or experiment.metric) for value in values}
        grid = {} if run.evaluate else {value: c.dev for value, c in by_value.items() if c.dev is not None}
        # an evaluation takes its model's value
        chosen = chosen_of.get(run.evaluate) if run.evaluate else max(grid, key=grid.get) if grid else None
        chosen = chosen if chosen in by_value else next(iter(by_value))
        chosen_of[run.name] = chosen
        columns.append(replace(by_value[chosen], grid=grid, chosen=chosen))
    return columns


def column_of(experiment, run, value, named, metric):
    """The Column of a run's seeds made with one grid value (None: no grid), in `metric`."""
    seeds, missing, scores, changed, settings, dev, warnings, source = [], [], {}, [], {}, [], {}, experiment.source
    targets_of = {}  # each seed's target languages
    for seed in experiment.seeds:
        job = named[run.name, value, seed]
        try:
            results = json.loads(job.results.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            missing.append(seed)
            continue
        if status(job, experiment, named) == "changed":
            changed.append(seed)
            continue
        settings = settings or results.get("settings") or {}
        rows = {lang: row for lang, row in results.items() if isinstance(row, dict) and "n" in row}  # a language's
        per_lang = {lang: 100 * row[metric] for lang, row in rows.items() if metric in row}
        if not per_lang:
            raise tasks.InputError(f"{experiment.path}: metric {metric!r}: {job.results} has no such score; its "
                                   "scores: " + ", ".join(sorted({k for row in rows.values() for k in row} - {"n"})))
        seeds.append(seed)
        dev += [100 * v for key, v in results.items() if key.startswith("dev_") and isinstance(v, (int, float))][:1]
        if results.get("warning"):
            warnings[seed] = results["warning"]
        targets_of[seed] = {lang for lang in per_lang if lang != source}
        targets = [score for lang, score in per_lang.items() if lang != source]
        averages = {"target average": sum(targets) / len(targets)} if targets else {}
        if experiment.paper.get("average"):
            kept = [lang for lang in run.papers.get(metric, run.paper) if lang != "average"] or list(per_lang)
            if experiment.paper["average"] == "targets":
                kept = [lang for lang in kept if lang != source]
            if all(lang in per_lang for lang in kept):
                averages["average, as the paper's"] = sum(per_lang[lang] for lang in kept) / len(kept)
        for key, score in {**per_lang, **averages}.items():
            scores.setdefault(key, {})[seed] = score
    for seed, targets in targets_of.items():  # an average over fewer languages is not one of the same: missing
        if targets != set().union(*targets_of.values()):
            scores.get("target average", {}).pop(seed, None)
    return Column(run, seeds, missing, scores, changed, settings, warnings=warnings,
                  dev=statistics.mean(dev) if dev and len(dev) == len(seeds) else None)


def cell(column, key):
    """(mean, std, n) over the column's seeds, or None where a finished seed lacks the key."""
    values = column.scores.get(key, {})
    if not column.seeds or len(values) < len(column.seeds):
        return None
    scores = [values[seed] for seed in column.seeds]
    return statistics.mean(scores), statistics.stdev(scores) if len(scores) > 1 else None, len(scores)


def rows_of(experiment, columns):
    keys = list(dict.fromkeys(key for c in columns for key in c.scores if key not in AVERAGES))
    keys.sort(key=lambda key: key != experiment.source)
    return keys + [key for key in AVERAGES if any(key in c.scores for c in columns)]


def header(column, total):
    run, n = column.run, len(column.seeds)
    seeds = f"{n} seed{'s' * (n != 1)}" if n == total else f"{n} of {total} seeds"
    for what, held in (("missing", column.missing), ("changed, not counted", column.changed),
                       ("went wrong", column.warnings)):
        seeds += f"; {what}: seed {', '.join(map(str, held))}" if held else ""
    return f"{run.name}{grid_label(run, column.chosen)} ({seeds})"


def paper_value(run, key, metric=None):
    paper = run.papers.get(metric, {}) if metric and run.papers else run.paper
    return paper.get("average" if key == "average, as the paper's" else key)


def markdown(experiment, columns, failed=None, more=None):
    """The table in markdown (sections()); with `more` ({metric: columns}), the same for each further metric."""
    lines = [f"# {experiment.title}", ""] + ([experiment.about, ""] if experiment.about else [])
    total, metrics = len(experiment.seeds), " and ".join(experiment.metrics)
    lines += [f"Task {experiment.task} ({experiment.data}), model {experiment.model or 'the bundled default'}, "
              f"seeds {', '.join(map(str, experiment.seeds))}, {metrics} in percent: mean ± sample standard deviation "
              "over the seeds in each column's header. Settings as each run resolved them (results.json):", ""]
    for c in (c for c in columns if c.settings or c.run.evaluate):  # the settings its results were made with
        names = [n for n in dict.fromkeys([*experiment.settings, *c.run.settings, *SHOWN]) if n in c.settings]
        made = ", ".join(f"{name} {c.settings[name]}" for name in names) or "none recorded"
        lines.append(f"- {c.run.name}: " + (f"the {c.run.evaluate} model's" if c.run.evaluate else made))
    if experiment.paper.get("table"):
        over = "all its languages" if experiment.paper["average"] == "all" else "its target languages"
        lines += ["", f"Paper: {experiment.paper['table']}; Δ is ours minus the paper's, with the seeds it averages "
                      f"where fewer than {total}. The paper's average is over {over}. A row of another model than ours "
                      "is shown with no Δ."]
    for metric, shown in [(experiment.metric, columns)] + list((more or {}).items()):
        lines += [f"\n### {metric}"] if more else []
        lines += sections(experiment, shown, metric, notes=metric == experiment.metric)
    if experiment.omitted:
        lines += ["", "The paper's rows not run:", ""]
        lines += [f"- {row['row']} ({row['table']}): {row['reason']}" for row in experiment.omitted]
    if failed:
        lines += ["", "Runs that did not finish: "
                  + "; ".join(f"{label} ({why.splitlines()[0]})" for label, why in failed.items()) + "."]
    return "\n".join(lines) + "\n"


def sections(experiment, columns, metric, notes=True):
    """The lines of a metric's table: a section per test input, a row per language and average."""
    lines, total, keys = [], len(experiment.seeds), rows_of(experiment, columns)
    for test_input in dict.fromkeys(c.run.test_input for c in columns):
        group = [c for c in columns if c.run.test_input == test_input]
        names = []
        for c in group:
            names.append(header(c, total))
            if c.run.papers.get(metric, c.run.paper):
                names += ["paper (another model)"] if c.run.paper_model else ["paper", "Δ"]
        lines += ["", f"**--test-input {test_input}: each prediction sees {TEST_INPUTS[test_input]}.**", "",
                  "| language | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for key in keys:
            cells = []
            for c in group:
                value = cell(c, key)
                std = f" ± {value[1]:.1f}" if value is not None and value[1] is not None else ""
                cells.append("missing" if value is None else f"{value[0]:.1f}{std}")
                if c.run.papers.get(metric, c.run.paper):
                    paper = paper_value(c.run, key, metric)
                    cells.append("" if paper is None else f"{paper:.1f}")
                    if not c.run.paper_model:
                        cells.append("" if paper is None or value is None else f"{value[0] - paper:+.1f}"
                                     + (f" ({value[2]} of {total} seeds)" if value[2] < total else ""))
            label = f"{key} (source)" if key == experiment.source else key
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        said = [f"{c.run.name}: " + " ".join(parts) for c in group if (parts := column_notes(c))]
        lines += [""] + [f"- {note}" for note in said] if said and notes else []
    return lines


def column_notes(c):
    """What is said under the table of a column: the run's note, the paper's row, its variant, grid, warnings."""
    row = f", {c.run.paper_row!r}" if c.run.paper_row else ""
    notes = [c.run.note, c.run.paper_table and f"(the paper's numbers: {c.run.paper_table}{row})",
             c.run.paper_model and f"The paper's row is of another model: {c.run.paper_model}.",
             c.run.variant and f"Run {c.run.variant}."]
    if c.chosen is not None and c.run.evaluate:  # a grid run's choice; an evaluation's, its model's
        notes.append(f"The {c.run.evaluate} model of{grid_label(c.run, c.chosen)}, the one chosen on dev.")
    elif c.chosen is not None:  # each value's mean dev score, the best first
        name = next(iter(c.run.grid))
        scores = ", ".join(f"{value:g}: {score:.1f}" for value, score in sorted(c.grid.items(), key=lambda v: -v[1]))
        notes.append(f"{name} chosen on dev among {', '.join(f'{v:g}' for v in c.run.grid[name])}, by the mean dev "
                     f"score of each value's tested models over the seeds that finished: {scores}.")
    return list(filter(None, notes + [f"Seed {seed} went wrong: {why}." for seed, why in c.warnings.items()]))


def csv_text(experiment, columns, more=None):
    """One line per (run, language, metric): the seeds, mean, std, the paper's number and the difference."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["test_input", "run", "method", "language", "seeds", "mean", "std", "paper", "difference", "scores",
                     "metric"])
    for metric, shown in [(experiment.metric, columns)] + list((more or {}).items()):
        for c in shown:
            for key in rows_of(experiment, shown):
                value, paper = cell(c, key), paper_value(c.run, key, metric)
                mean, std, n = value or (None, None, len(c.scores.get(key, {})))
                scores = " ".join(f"{seed}:{score:.2f}" for seed, score in c.scores.get(key, {}).items())
                writer.writerow([c.run.test_input, c.run.name, c.run.method, key, n,
                                 "" if mean is None else f"{mean:.2f}", "" if std is None else f"{std:.2f}",
                                 "" if paper is None else paper,
                                 "" if paper is None or mean is None or c.run.paper_model else f"{mean - paper:.2f}",
                                 scores, metric])
    return buffer.getvalue()


def plot(experiment, columns, path):
    """Bars per language (mean over seeds, the standard deviation as error bars), the paper's value
    marked; False where matplotlib is missing (an optional dependency)."""
    try:
        from matplotlib.figure import Figure  # drawn without pyplot: no display, no figure to close
    except ImportError:
        return False
    keys = [key for key in rows_of(experiment, columns) if key != "average, as the paper's"]
    drawn = [c for c in columns if c.seeds]
    figure = Figure(figsize=(min(24, max(7, 0.5 * len(keys) * max(1, len(drawn) / 2))), 6))
    axes = figure.subplots()
    width = 0.8 / max(1, len(drawn))
    for i, c in enumerate(drawn):
        x = [k + i * width for k in range(len(keys))]
        values = [cell(c, key) for key in keys]
        axes.bar(x, [v[0] if v else math.nan for v in values], width, yerr=[v[1] or 0 if v else 0 for v in values],
                 capsize=2, label=f"{header(c, len(experiment.seeds))}, --test-input {c.run.test_input}")
        # the paper's average is a row of its own
        papers = [None if key == "target average" else paper_value(c.run, key) for key in keys]
        if any(p is not None for p in papers):
            axes.scatter(x, [math.nan if p is None else p for p in papers], marker="_", s=120, color="black", zorder=3,
                         label="paper" if i == min(j for j, d in enumerate(drawn) if d.run.paper) else None)
    axes.set_xticks([k + 0.4 - width / 2 for k in range(len(keys))], keys, rotation=60 if len(keys) > 8 else 0,
                    ha="right")
    axes.set_ylabel(f"test {experiment.metric} (%)")
    axes.set_title(experiment.title, fontsize="medium")
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return True


def report(experiment, out, failed=None):
    """Write OUT/<the file's name>/table.md, table.csv and table.png; print the markdown."""
    columns = read_scores(experiment, out)
    more = {metric: read_scores(experiment, out, metric) for metric in experiment.metrics[1:]}
    out = Path(out) / experiment.path.stem  # its runs are in OUT/<task>/, shared
    if failed is None and not any(column.seeds or column.changed for column in columns):  # a table written before stays
        raise tasks.InputError(f"no run of {experiment.path} has results under {out.parent}/{experiment.task}/: "
                               "nothing to report (another --out or --data?)")
    table = markdown(experiment, columns, failed, more)
    cli.write_text(out / "table.md", table)
    cli.write_text(out / "table.csv", csv_text(experiment, columns, more))
    drew = plot(experiment, columns, out / "table.png")
    print(table)
    print(f"written to {out}/table.md and table.csv"
          + (", table.png" if drew else "; no plot: pip install matplotlib for table.png"))
