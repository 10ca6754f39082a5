"""An experiment file (experiments/*.json), checked field by field and every setting it states audited
against what its runs' flags resolve to, before anything runs; refused in one line naming the field."""
import io
import json
import math
import re
from contextlib import redirect_stderr
from dataclasses import dataclass, field, replace
from pathlib import Path

from minxlt import tasks
from minxlt.checkpoints import hub
from minxlt.run import cli, flags

HERE = Path(__file__).resolve().parents[2]  # the repository, whose train.py, evaluate.py and cotrain.py runs start
RESERVED = {"--method", "--task", "--data", "--model", "--seed", "--out", "--test-input", "--resume", "--overwrite"}
FIELDS = {"title", "about", "task", "data", "model", "metric", "seeds", "flags", "paper", "settings", "runs", "omitted",
          "sizes"}
RUN_FIELDS = {"name", "method", "test_input", "flags", "evaluate", "cotrain", "paper", "paper_row", "paper_table",
              "paper_model", "settings", "note", "requires", "otherwise", "grid"}
FALLBACK_FIELDS = {"flags", "settings", "note", "paper", "paper_row", "paper_table", "paper_model", "test_input"}
SETTING_FIELDS = {"paper", "paper_where", "script", "script_where", "run", "departure"}
OMITTED_FIELDS = {"row", "table", "paper", "reason"}
SIZES_FIELDS = {"train", "dev", "test", "languages", "dev_languages", "extra_train", "from"}
# Settings of every run that are no flag of train.py, and what a method does that no flag changes (docs/experiments.md)
FIXED = {"optimizer": "AdamW", "schedule": "linear warmup, then linear decay to 0", "attention_mask": "padding masked",
         "word_representation": "the word's first sub-token's state", "text_case": "as written"}
WINDOWS = "each window with its counterpart's over the same part of the context (qa.matching_window)"  # QA's pairs
METHOD_FIXED = {"filter": {"source_prediction": "the source text's own states (its <s> for a sentence label)",
                           "tag_set": "the task's own tags", "window_pairing": WINDOWS,
                           "kl_positions": "a word label's: the translation's words, each on its first sub-token"},
                "xmixup": {"mixup_inference": "the mean of the two predicted distributions",
                           "scheduled_sampling": "a draw per step", "window_pairing": WINDOWS,
                           "soft_label_loss": "KL from each word's soft labels, renormalised to sum to 1"},
                "unicoder": {"tlm_positions": "counted on through the translation, as XLM-R numbers a pair of texts"}}
DEV_SETS = {"tydiqa": "a tenth of the English training questions, not trained on (minxlt/tasks/tydiqa.py)"}
DEPTHS = {"xlm-roberta-base": 12, "xlm-roberta-large": 24, "xlm-roberta-xl": 36, "xlm-roberta-xxl": 48}
MODEL_OF = re.compile(r"\{(?!lang\}|data\})([a-z0-9][a-z0-9_.-]*)\}")  # "{filter}": run filter's best model, same seed
DATA = "{data}"  # in a run's flags and required files: the experiment's data folder ({lang} is a path's language)
GRIDDED = {"lr": "--lr"}  # what a run's "grid" may give several values of
PER_RUN = {"--teacher-cache": "cannot be given here: it is a file each run writes for itself (every seed's run would "
                              "share it)",
           "--source-lang": "is the experiment's, in its top-level flags: every column must have the same source"}
EVALUATE_FLAGS = {"--test-translations", "--batch-size", "--max-length"}  # what an "evaluate" run may add
JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"\s*:?|[{}\[\]]')  # a string (a key where a colon follows), or a bracket
FILES = ("test_translations", "dev_translations", "round_trip", "soft_labels", "extra_train")  # settings naming files


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
    cotrain: bool = False           # a run of cotrain.py, not of train.py
    paper_model: str | None = None  # the paper's row is of another model: its numbers are shown, no difference
    settings: dict = field(default_factory=dict)  # {setting: {paper, script, run, ...}}
    papers: dict = field(default_factory=dict)    # {metric: {lang: score}}: the paper's numbers of every metric
    requires: dict | None = None    # {"files": [paths with {data}, {lang}], "from": how to get them}
    fallback: "Run | None" = None   # what runs instead where they are missing ("otherwise")
    grid: dict | None = None        # {"lr": [values]}: each value runs over the seeds, the best on dev is the table's
    variant: str | None = None      # which of the two a run with `requires` is, and why (choose_variants)
    overrides: tuple = ()           # a fallback's: the settings its "otherwise" states

    @property
    def needs(self):
        """The runs whose best model (of the same seed) this one reads: the one it evaluates, its flags' {run}s."""
        return ([self.evaluate] if self.evaluate else []) + [n for flag in self.flags for n in MODEL_OF.findall(flag)]

    @property
    def pretrains(self):
        """Whether it pre-trains an encoder for other runs (--method unicoder): no test, no column."""
        return flags.METHODS[self.method].draws == "parallel"


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
    settings: dict = field(default_factory=dict)  # of every trained run, unless a run states its own
    omitted: list = field(default_factory=list)   # the paper's rows not run: [{"row", "table", "paper", "reason"}]
    sizes: dict = field(default_factory=dict)     # the data set's sizes, for the cost of the runs (cost.py)
    metrics: list = field(default_factory=list)   # every metric of the table, `metric` first

    @property
    def source(self):
        """The source language: the top-level flags' --source-lang, else the task's."""
        return flag_value(self.flags, "--source-lang") or tasks.LAYOUTS[self.task].source


def flag_value(flags, name):
    """The value the last `name` (--flag VALUE, --flag=VALUE) in a list of flags gives, or None."""
    value = None
    for i, flag in enumerate(flags):
        if flag.startswith(f"{name}="):
            value = flag.split("=", 1)[1]
        elif flag == name and i + 1 < len(flags):
            value = flags[i + 1]
    return value


def refuse(path, where, problem):
    raise tasks.InputError(f"{path}: {where}: {problem}")


def load_experiment(path, data=None):
    """The experiment file at `path`, checked field by field; `data` replaces its data folder."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        spec = json.loads(text)
    except (OSError, UnicodeDecodeError) as e:
        raise tasks.InputError(f"{path}: cannot be read ({e})") from None
    except json.JSONDecodeError as e:
        raise tasks.InputError(f"{path}:{e.lineno}: not JSON ({e.msg})") from None
    if repeated := repeated_key(text):
        raise tasks.InputError(f"{path}:{repeated[0]}: key {repeated[1]!r} given twice in one object (JSON would "
                               "keep the last without a word): give it once")
    check_fields(path, "top level", spec, FIELDS, required=("title", "task", "metric", "seeds", "runs"))
    if spec["task"] not in tasks.LAYOUTS:
        refuse(path, "task", f"unknown task {spec['task']!r} (one of {', '.join(tasks.LAYOUTS)})")
    seeds = spec["seeds"]
    if not (isinstance(seeds, list) and seeds and all(type(s) is int for s in seeds) and len(set(seeds)) == len(seeds)):
        refuse(path, "seeds", f"a list of distinct integers, not {seeds!r}")
    for name in ("title", "about"):
        if not isinstance(spec.get(name, ""), str):
            refuse(path, name, "a string")
    metrics = spec["metric"] if isinstance(spec["metric"], list) else [spec["metric"]]
    if not (metrics and all(isinstance(m, str) and m for m in metrics) and len(set(metrics)) == len(metrics)):
        refuse(path, "metric", "a score's name, or a list of them, the first the table's own "
               "(XTREME's QA: f1, exact_match)")
    for name in ("data", "model"):
        if spec.get(name) is not None and not isinstance(spec[name], str):
            refuse(path, name, "a string, or null")
    experiment = Experiment(path, spec["title"], spec["task"], data or spec.get("data"), spec.get("model"), metrics[0],
                            seeds, check_flags(path, "flags", spec.get("flags", [])), [], spec.get("about", ""),
                            spec.get("paper") or {}, check_settings(path, "settings", spec.get("settings", {})),
                            check_omitted(path, spec.get("omitted", [])), check_sizes(path, spec.get("sizes", {})),
                            metrics)
    if not isinstance(spec["runs"], list) or not spec["runs"]:
        refuse(path, "runs", "a non-empty list of runs")
    for i, run in enumerate(spec["runs"]):
        experiment.runs.append(check_run(experiment, f"runs[{i}]", run))
    check_paper(experiment)
    for finding in audit(experiment):
        if finding.problem:
            refuse(path, finding.where, finding.problem)
    return choose_variants(experiment)


def repeated_key(text):
    """(line, key) of the first key given twice in one object of a JSON text that parses, or None."""
    objects = []  # the keys of each object open at this point ([] for an array)
    for token in JSON_TOKENS.finditer(text):
        mark = token.group()
        if mark in ("{", "["):
            objects.append(set() if mark == "{" else None)
        elif mark in ("}", "]"):
            objects.pop()
        elif mark.endswith(":"):
            key = json.loads(mark[:-1])
            if key in objects[-1]:
                return text.count("\n", 0, token.start()) + 1, key
            objects[-1].add(key)
    return None


def choose_variants(experiment):
    """Each run with `requires` as written where the data folder holds its files (or is not here to tell),
    else its fallback ("otherwise"), saying which and why (`variant`)."""
    folder = experiment.data
    for i, run in enumerate(experiment.runs):
        if run.requires is None:
            continue
        files = ", ".join(run.requires["files"])
        if not (folder and Path(folder).is_dir()):
            run.variant = f"as written, if the data folder holds {files} (it is not here to tell)"
            continue
        layout = tasks.LAYOUTS[experiment.task].for_folder(folder)(folder, experiment.source)
        given = flag_value(experiment.flags + run.flags, "--target-langs")  # what {lang} stands for
        targets = cli.languages(given) if given else [lang for lang in layout.languages if lang != experiment.source]
        paths = [pattern.replace(DATA, folder).replace("{lang}", lang) for pattern in run.requires["files"]
                 for lang in (targets if "{lang}" in pattern else [""])]
        missing = [path for path in paths if not Path(path).is_file()]
        if missing:
            experiment.runs[i] = replace(run.fallback, variant=f"the fallback: {missing[0]} is missing "
                                         f"({run.requires['from']})")
        else:
            run.variant = f"as written: the data folder holds {files}"
    return experiment


def check_omitted(path, omitted):
    """The paper's rows that no run reproduces, each with its reason."""
    if not isinstance(omitted, list):
        refuse(path, "omitted", 'a list of {"row": ..., "table": ..., "reason": ...}: the paper\'s rows not run, '
               "and why")
    for i, row in enumerate(omitted):
        check_fields(path, f"omitted[{i}]", row, OMITTED_FIELDS, required=("row", "table", "reason"))
        if not all(isinstance(row[k], str) and row[k].strip() for k in ("row", "table", "reason")):
            refuse(path, f"omitted[{i}]", "row, table and reason are sentences")
    return list(omitted)


def check_sizes(path, sizes):
    """The data set's sizes, for the cost of its runs (docs/experiments.md says what each counts)."""
    if not isinstance(sizes, dict):
        refuse(path, "sizes", 'an object {"train": N, "dev": N, "test": N, "languages": N, '
               '"from": "<where the numbers come from>"}')
    if sizes and not (isinstance(sizes.get("from"), str) and sizes["from"].strip()):
        refuse(path, "sizes.from", "where the numbers come from, as a sentence")
    required = tuple(sorted(SIZES_FIELDS - {"dev_languages", "extra_train"})) if sizes else ()
    check_fields(path, "sizes", sizes, SIZES_FIELDS, required=required)
    for name in ("train", "dev", "test", "languages", "dev_languages", "extra_train"):
        if name in sizes and not (type(sizes[name]) is int and sizes[name] > 0):
            refuse(path, f"sizes.{name}", f"a count of examples, not {sizes[name]!r}")
    return dict(sizes)


def check_settings(path, where, spec):
    """{setting: {SETTING_FIELDS}}, each given value with where it is given (null where the source is silent)."""
    if not isinstance(spec, dict):
        refuse(path, where, 'an object {"<setting>": {"paper": ..., "script": ..., "run": ..., ...}}')
    for name, setting in spec.items():
        check_fields(path, f"{where}.{name}", setting, SETTING_FIELDS, required=("run",))
        for source in ("paper", "script"):
            if setting.get(source) is not None and not isinstance(setting.get(f"{source}_where"), str):
                refuse(path, f"{where}.{name}.{source}_where", f"missing: where the {source} gives {setting[source]!r}")
        if "departure" in setting and not (isinstance(setting["departure"], str) and setting["departure"].strip()):
            refuse(path, f"{where}.{name}.departure", "the reason, as a sentence")
    return dict(spec)


def check_fields(path, where, spec, known, required, shape=None):
    """An object (else refused with `shape`, or its fields named) holding the fields `required` and no others."""
    if not isinstance(spec, dict):
        refuse(path, where, shape or "an object with the fields " + ", ".join(sorted(known)))
    at = "" if where == "top level" else f"{where}."
    missing = [name for name in required if name not in spec]
    if missing:
        refuse(path, at + missing[0], "missing")
    unknown = sorted(set(spec) - known)
    if unknown:
        refuse(path, at + unknown[0], f"unknown field (the fields are {', '.join(sorted(known))})")


def check_flags(path, where, given, before=()):
    """Flags, none reproduce.py's own (RESERVED) but a run's --model {run}, none twice here or in `before`."""
    if not (isinstance(given, list) and all(isinstance(flag, str) for flag in given)):
        refuse(path, where, f"a list of strings (command-line flags), not {given!r}")
    name = lambda flag: flag.split("=", 1)[0]
    names = [name(flag) for flag in list(before) + given if flag.startswith("--")]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        also = " (here and in the file's flags)" if twice[0] in map(name, before) else ""
        refuse(path, where, f"{twice[0]} is given twice{also}: give each flag once")
    named = set(map(name, given))
    if where != "flags" and model_run(given):
        named.discard("--model")  # a model another run of the file trains (Unicoder's pre-training)
    reserved = sorted(RESERVED & named)
    if reserved:
        refuse(path, where, f"{reserved[0]} is set by reproduce.py (from the file's task, data, model, seeds and runs)")
    shared = sorted(named & set(PER_RUN) - ({"--source-lang"} if where == "flags" else set()))
    if shared:
        refuse(path, where, f"{shared[0]} {PER_RUN[shared[0]]}")
    return list(given)


def model_run(given):
    """The run that a run's `--model {run}` names (it starts from that run's best model), or None."""
    match = MODEL_OF.fullmatch(flag_value(given, "--model") or "")
    return match.group(1) if match else None


def check_run(experiment, where, spec, fallback_of=None):
    path, names = experiment.path, [run.name for run in experiment.runs]
    # the method is the evaluated run's, or cotrain's --lm-method
    derived = isinstance(spec, dict) and ("evaluate" in spec or spec.get("cotrain"))
    required = ("name", "test_input") if derived else ("name", "method", "test_input")
    check_fields(path, where, spec, RUN_FIELDS, required=required)
    name = spec["name"]
    if not (isinstance(name, str) and re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name)):
        refuse(path, f"{where}.name", f"{name!r} is not a folder name of lower-case letters, digits, '-', '_' and '.'")
    if name in names and fallback_of is None:
        refuse(path, f"{where}.name", f"{name!r} names runs[{names.index(name)}] already")
    if spec.get("cotrain", False) not in (True, False) or (spec.get("cotrain") and "evaluate" in spec):
        refuse(path, f"{where}.cotrain", "true for a run of cotrain.py (not with evaluate), or left out")
    given = check_flags(path, f"{where}.flags", spec.get("flags", []), experiment.flags)
    run = Run(name, spec.get("method"), spec["test_input"], given, spec.get("evaluate"), spec.get("paper") or {},
              spec.get("paper_row"), spec.get("paper_table"), spec.get("note"), bool(spec.get("cotrain")),
              spec.get("paper_model"), check_settings(path, f"{where}.settings", spec.get("settings", {})),
              grid=check_grid(experiment, where, spec))
    check_requires(experiment, where, spec, run)
    if run.cotrain:
        run.method = planned_arguments(experiment, run, where)[0].lm_method
    trained = {r.name: r for r in experiment.runs if r.evaluate is None}
    before = f"a trained run before it ({', '.join(trained) or 'none'})"
    for needed in run.needs[1 if run.evaluate else 0:]:
        if needed not in trained:
            refuse(path, f"{where}.flags", f"{{{needed}}} is not the name of {before}")
    if run.evaluate is not None:
        if run.evaluate not in trained:
            refuse(path, f"{where}.evaluate", f"{run.evaluate!r} is not the name of {before}")
        run.method = run.method or trained[run.evaluate].method
        extra = sorted({flag.split("=", 1)[0] for flag in run.flags if flag.startswith("--")} - EVALUATE_FLAGS)
        if extra:
            refuse(path, f"{where}.flags", f"{extra[0]}: an evaluation takes only {', '.join(sorted(EVALUATE_FLAGS))}")
    if run.method not in flags.METHODS:
        refuse(path, f"{where}.method", f"unknown method {run.method!r} (one of {', '.join(flags.METHODS)})")
    if run.test_input not in flags.METHODS[run.method].test_inputs:
        refuse(path, f"{where}.test_input", f"--method {run.method} predicts from "
               f"{' or '.join(flags.METHODS[run.method].test_inputs)}, not {run.test_input}")
    if run.evaluate is None and not run.cotrain:
        planned_arguments(experiment, run, where)  # refused here where train.py would refuse them
    if run.pretrains and (run.paper or run.evaluate):
        refuse(path, f"{where}.{'paper' if run.paper else 'evaluate'}", f"--method {run.method} pre-trains an encoder "
               f"and tests nothing: fine-tune its model in a run of its own (--model {{{run.evaluate or run.name}}})")
    return run


def check_grid(experiment, where, spec):
    """A run's "grid", {"lr": [values]}: every value runs over the seeds."""
    grid = spec.get("grid")
    if grid is None:
        return None
    if not (isinstance(grid, dict) and len(grid) == 1 and set(grid) <= set(GRIDDED)):
        refuse(experiment.path, f"{where}.grid", f'{{"lr": [values]}}: the one setting a grid may give '
               f'({", ".join(GRIDDED)})')
    values, flag = next(iter(grid.values())), GRIDDED[next(iter(grid))]
    if not (isinstance(values, list) and len(values) > 1 and len(set(values)) == len(values)
            and all(isinstance(v, (int, float)) and v > 0 for v in values)):
        refuse(experiment.path, f"{where}.grid.lr", f"two or more distinct positive values, not {values!r}")
    if spec.get("evaluate") or spec.get("cotrain"):
        refuse(experiment.path, f"{where}.grid", "a grid is of a trained run of train.py")
    for named, given in (("flags", experiment.flags), (f"{where}.flags", spec.get("flags", []))):
        if any(value.split("=", 1)[0] == flag for value in given):
            refuse(experiment.path, named, f"{flag} is the grid's ({where}.grid): give it there only")
    return dict(grid)


def check_requires(experiment, where, spec, run):
    """A run's "requires" (the files it needs) and "otherwise" (what runs without them, run.fallback)."""
    path = experiment.path
    if ("requires" in spec) != ("otherwise" in spec):  # an "otherwise" has no "requires" (FALLBACK_FIELDS)
        refuse(path, f"{where}.requires", 'give "requires" and "otherwise" together: the files a run needs, and what '
               "runs without them")
    if "requires" not in spec:
        return
    requires = spec["requires"]
    if not (isinstance(requires, dict) and set(requires) == {"files", "from"} and isinstance(requires["files"], list)
            and requires["files"] and all(isinstance(f, str) and f.startswith(DATA + "/") for f in requires["files"])
            and isinstance(requires["from"], str)):
        refuse(path, f"{where}.requires", '{"files": ["{data}/<path>", ...] ({lang} for each target language), '
               '"from": "<how to get them>"}')
    otherwise = spec["otherwise"]
    check_fields(path, f"{where}.otherwise", otherwise, FALLBACK_FIELDS, required=(), shape="an object with the "
                 "fields that change: " + ", ".join(sorted(FALLBACK_FIELDS)))
    merged = {k: v for k, v in spec.items() if k not in ("requires", "otherwise")}
    merged.update(otherwise, settings={**spec.get("settings", {}), **otherwise.get("settings", {})})
    run.requires, run.fallback = dict(requires), check_run(experiment, f"{where}.otherwise", merged, fallback_of=run)
    run.fallback.overrides = tuple(otherwise.get("settings", {}))


def planned_arguments(experiment, run, where):
    """A trained run's train.py flags as they will be (placeholders for the folders that exist only then), or the field
    refused with train.py's message; of a cotrain.py run, (its own flags, the flags of its f_lm's train.py runs)."""
    folder = str(HERE) if experiment.data else None  # the data folder is checked when the runs start (check_languages)
    argv = train_arguments(replace(experiment, data=folder), run, 0, Path("out"))
    if run.cotrain:
        import cotrain
        parse, script = cotrain.get_args, "cotrain.py"
    else:
        parse, script = flags.parse, "train.py"
    try:
        with redirect_stderr(io.StringIO()) as errors:
            parsed = parse(argv)
    except (SystemExit, tasks.InputError) as e:  # argparse's message, or a refusal of flags that go together
        problem = (str(e) if isinstance(e, tasks.InputError)
                   else errors.getvalue().strip().splitlines()[-1].split("error: ", 1)[-1].split("; python ")[0])
        named = re.match(r"argument (--[\w-]+)|unrecognized arguments: (--[\w-]+)", problem)
        flag, names = named and (named.group(1) or named.group(2)), lambda given: {f.split("=")[0] for f in given}
        mine = flag in names(experiment.flags) and flag not in names(run.flags)  # the file's own "flags": named so
        refuse(experiment.path, "flags" if mine else f"{where}.flags", f"{script} refuses them: {problem}; python "
               f"{script} --help lists the flags")
    if not run.cotrain:
        return argv
    own, rest, _ = parsed
    return own, rest + ["--method", own.lm_method]


@dataclass
class Finding:
    """A stated setting of a trained run against what its flags resolve to (audit)."""
    run: Run
    name: str
    setting: dict      # the file's paper, paper_where, script, script_where, run, departure
    resolved: object   # what the run's flags resolve to
    where: str         # the file's field

    @property
    def departs(self):
        """The sources (paper, script) whose value the run's differs from, or ["neither"] where both are
        silent; a source gives a value where it has its `<source>_where` (check_settings), a null one meaning none."""
        given = [source for source in ("paper", "script") if f"{source}_where" in self.setting]
        return [s for s in given if not same(self.setting["run"], self.setting.get(s))] if given else ["neither"]

    @property
    def problem(self):
        """Where the run's value disagrees with the file, or with the sources unexplained; None where it is said."""
        setting, resolved, run = self.setting, self.resolved, self.run
        if resolved is KeyError:
            fixed = ", ".join(METHOD_FIXED.get(run.method, {})) or "fixed settings: it has none"
            return (f"{self.name!r} is neither a setting of train.py (python train.py --help) nor one of "
                    f"{', '.join(FIXED)} (nor --method {run.method}'s {fixed})")
        if not same(resolved, setting["run"]):
            return f"run {run.name} resolves it to {resolved!r}, not to the {setting['run']!r} the file says"
        departs = self.departs
        if departs == ["neither"] and "departure" not in setting:
            return (f"neither the paper nor its authors' script gives it: say why the run takes {setting['run']!r} "
                    "(departure)")
        if departs and "departure" not in setting:
            return (f"the run's {setting['run']!r} departs from the {departs[0]}'s {setting[departs[0]]!r} with no "
                    "departure listed")
        if not departs and "departure" in setting:
            return "a departure is listed, but the run takes every value the paper and the script give"


def same(a, b):
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    return math.isclose(a, b, rel_tol=1e-9) if numbers else a == b


def audit(experiment, variants=True):
    """[Finding] for every setting the file states of each trained run (its fallback's too with `variants`):
    the paper's, the script's and the run's values, and a problem where they disagree unexplained."""
    findings = []
    for i, run in enumerate(experiment.runs):
        for variant in [run] + ([run.fallback] if variants and run.fallback else []):
            stated = {**experiment.settings, **variant.settings}
            if variant.evaluate or not stated:
                continue
            here = f"runs[{i}].otherwise" if variant is run.fallback else f"runs[{i}]"
            values = resolved_settings(experiment, variant, here)
            for name, setting in stated.items():
                where = (f"runs[{i}].otherwise.settings.{name}" if name in variant.overrides else
                         f"runs[{i}].settings.{name}" if name in variant.settings else f"settings.{name}")
                findings.append(Finding(variant, name, setting, values.get(name, KeyError), where))
    return findings


def resolved_settings(experiment, run, where):
    """{setting: value} a trained run resolves to before any data is read (flags.planned), with FIXED, the
    model, the seeds and the test input; a co-training run's f_lm's settings and its own."""
    try:
        argv = planned_arguments(experiment, run, where)
        values = flags.planned(argv[1] if run.cotrain else argv, experiment.task, model_depth(experiment))
    except tasks.InputError as e:
        refuse(experiment.path, f"{where}.flags", str(e))
    if run.cotrain:
        values.update({k: v for k, v in vars(argv[0]).items() if k not in ("out", "resume", "overwrite", "model")})
    if run.grid:
        values.update({name: list(grid) for name, grid in run.grid.items()})
    trained = model_run(run.flags)
    dev_set = DEV_SETS.get(experiment.task, "the data set's own")
    model = f"run {trained}'s model" if trained else experiment.model or "the bundled multilingual-e5-small"
    return {**values, **FIXED, **METHOD_FIXED.get(run.method, {}), "dev_set": dev_set, "model": model,
            "seeds": len(experiment.seeds), "test_input": run.test_input,
            **{name: file_name(values.get(name)) for name in FILES}}


def file_name(path):
    """A file setting as the files state it: its name, with its folder where the name is the language's."""
    if not path:
        return path
    path = Path(path)
    return f"{path.parent.name}/{path.name}" if path.name.startswith("{lang}.") else path.name


def model_depth(experiment):
    """The encoder's layers (QA's settings scale with it): its config.json's, else XLM-R's sizes' by name."""
    from model import Config
    if experiment.model is None:
        return 12
    folder = Path(experiment.model) if Path(experiment.model).is_dir() else hub.cached(experiment.model)
    if folder is not None:
        return Config.from_directory(folder).num_layers
    return DEPTHS.get(experiment.model.rsplit("/", 1)[-1])


def check_paper(experiment):
    """The file's "paper" and each run's paper numbers ({lang: score}, or {metric: {lang: score}})."""
    path, numbered = experiment.path, [run for run in experiment.runs if run.paper]
    if not isinstance(experiment.paper, dict) or set(experiment.paper) - {"table", "average"}:
        refuse(path, "paper", 'an object {"table": "<paper> Table N", "average": "all" or "targets"}')
    if numbered and not isinstance(experiment.paper.get("table"), str):
        refuse(path, "paper.table", "missing: the table the runs' paper numbers are typed from")
    if numbered and experiment.paper.get("average") not in ("all", "targets"):
        refuse(path, "paper.average", 'what the paper\'s average covers: "all" languages, or the "targets" only')
    for i, run in enumerate(experiment.runs):
        for where, variant in ((f"runs[{i}]", run), (f"runs[{i}].otherwise", run.fallback)):
            if variant is not None:
                variant.papers = paper_numbers(experiment, f"{where}.paper", variant.paper)
                variant.paper = variant.papers.get(experiment.metric, {})


def paper_numbers(experiment, where, paper):
    """{metric: {lang: score}} of a run's "paper": {lang: score} of the file's metric, or of several."""
    nested = any(isinstance(value, dict) for value in paper.values())
    if nested and set(paper) - set(experiment.metrics):
        refuse(experiment.path, f"{where}.{min(set(paper) - set(experiment.metrics))}", "not one of the file's "
               f"metrics ({', '.join(experiment.metrics)}): give {{lang: score}}, or {{metric: {{lang: score}}}}")
    papers = paper if nested else {experiment.metric: paper}
    for metric, scores in papers.items():
        for lang, value in (scores.items() if isinstance(scores, dict) else [("", scores)]):
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)):
                refuse(experiment.path, f"{where}.{metric + '.' if nested else ''}{lang}",
                       f"a score in percent, not {value!r}")
    return papers


def check_languages(experiment):
    """Refuse paper numbers of languages the data folder lacks (the file and the field named)."""
    layout = tasks.LAYOUTS[experiment.task]
    folder = experiment.data
    if layout.needs_data and not (folder and Path(folder).is_dir()):
        made = tasks.made_by(experiment.task, folder or "DIR")
        refuse(experiment.path, "data", f"{folder!r}: no such folder; {made} (or give --data DIR)")
    found = set(layout.for_folder(folder)(folder, experiment.source).languages)
    for i, run in enumerate(experiment.runs):
        lacking = sorted({lang for scores in run.papers.values() for lang in scores} - found - {"average"})
        if lacking:
            holder = f"the data folder {folder}" if folder else f"task {experiment.task}"
            refuse(experiment.path, f"runs[{i}].paper.{lacking[0]}", f"{holder} has no language {lacking[0]!r} "
                   f"(it has {', '.join(sorted(found))})")


def train_arguments(experiment, run, seed, folder, model_of=None):
    """A trained run's train.py (or cotrain.py) flags: {data} the data folder, {name} `model_of(name)`, the best
    model of run `name` of the same seed (a placeholder folder where not given)."""
    argv = ([] if run.cotrain else ["--method", run.method]) + ["--task", experiment.task, "--seed", str(seed),
                                                                "--test-input", run.test_input]
    argv += ["--data", experiment.data] if experiment.data else []
    argv += ["--model", experiment.model] if experiment.model and not model_run(run.flags) else []  # else the run's own
    model_of = model_of or (lambda name: str(HERE))
    filled = lambda flag: MODEL_OF.sub(lambda m: model_of(m.group(1)), flag).replace(DATA, experiment.data or DATA)
    return argv + [filled(flag) for flag in experiment.flags + run.flags] + ["--out", str(folder)]
