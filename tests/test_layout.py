"""The codebase's shape: at the top, what a reader of the papers opens or runs; the machinery one
folder down (minxlt/, bench/, dev/); modules that import one another without cycles (imports
inside functions count), and functions short enough to read at once, in every folder; CI runs the
README's quick start."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("minxlt", "bench", "dev")
PAPERS = {"model", "data", "losses", "train", "evaluate",  # the encoder, the examples, the losses, the run, the test tables
          "methods", "levels",  # the interface every method implements, and what differs between task levels
          "xeroalign", "fusion", "mixup", "contrastive", "cotrain", "unicoder",  # one file per paper's method
          "reproduce", "download"}  # the user's commands: a paper's table, a task's data


def module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PATHS = sorted(ROOT.glob("*.py")) + sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))
MODULES = {module_name(path): ast.parse(path.read_text(encoding="utf-8")) for path in PATHS}
LONGEST = 80  # lines of a function, docstring included


def imports(tree):
    """The project's modules that a module imports anywhere in its body (`from package import module`
    names the module)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module for alias in node.names}
    return found & set(MODULES)


def test_the_root_holds_the_papers_and_the_commands():
    assert {path.stem for path in ROOT.glob("*.py")} == PAPERS
    assert len(PAPERS) <= 16
    for folder in ("minxlt", "minxlt/run", "minxlt/checkpoints", "minxlt/text", "minxlt/tasks", "minxlt/parallel", "minxlt/experiments",
                   "bench", "dev"):
        assert ast.get_docstring(MODULES[folder.replace("/", ".")]), f"{folder}/__init__.py says what the folder holds"


def test_no_import_cycles():
    graph = {name: imports(tree) - {name} for name, tree in MODULES.items()}
    done, path = set(), []

    def visit(name):
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(name):] + [name]))
        if name in done:
            return
        path.append(name)
        for other in sorted(graph[name]):
            if not name.startswith(other + "."):  # a package's own modules import through it (minxlt.tasks.* and its __init__)
                visit(other)
        path.pop()
        done.add(name)
    for name in graph:
        visit(name)
    assert "train" in graph["cotrain"] and "cotrain" not in graph["train"]  # co-training drives train.py, not the reverse


def test_the_paper_files_import_only_what_the_papers_need():
    # the encoder, the losses, the interface, the data readers and the errors: no run machinery (flags, the loop,
    # sharding, checkpoints), which reaches them through the interface, and nothing re-exported for them
    allowed = {"model", "losses", "methods", "data", "minxlt.errors", "minxlt.tasks"}
    for name in ("xeroalign", "fusion", "mixup", "contrastive", "unicoder"):
        assert imports(MODULES[name]) <= allowed, (name, imports(MODULES[name]) - allowed)


def test_functions_are_short():
    long = [f"{name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for name, tree in MODULES.items() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > LONGEST]
    assert not long, long


def test_the_loop_names_no_method():
    # train.py, evaluate.py and the benchmarks compare no string with a method's name, nor look one up
    # by a name written in the code: they reach methods through flags.METHODS and the interface
    from minxlt.run import flags
    for name in ("train", "evaluate", "bench.train_step", "cotrain"):
        named = [ast.unparse(node) for node in ast.walk(MODULES[name]) if isinstance(node, (ast.Compare, ast.Subscript))
                 and any(isinstance(c, ast.Constant) and c.value in flags.METHODS for c in ast.walk(node))]
        assert not named, f"{name}.py: {named}"


def test_the_training_step_reads_on_one_screen():
    # train.py is the run from the command line to the test table, its loop and its step; what the
    # loop does around the step is minxlt/run/bookkeeping.py
    lines = len((ROOT / "train.py").read_text(encoding="utf-8").splitlines())
    assert lines <= 350, f"train.py has {lines} lines"
    step = next(node for node in ast.walk(MODULES["train"]) if isinstance(node, ast.FunctionDef) and node.name == "train_step")
    assert step.end_lineno - step.lineno + 1 <= 60, f"train_step has {step.end_lineno - step.lineno + 1} lines"


def test_settings_are_not_assigned_after_resolution():
    # flags.resolve makes a run's settings once; no module assigns to them (nor to the parsed flags)
    # afterwards, so that a run's settings can be read from the command line and flags.py alone
    def settings_like(node):
        return (isinstance(node, ast.Name) and node.id in ("settings", "args")) or (isinstance(node, ast.Attribute) and node.attr == "settings")
    assigned = []
    for name, tree in MODULES.items():
        if name == "minxlt.run.flags":
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            assigned += [f"{name}:{node.lineno}" for t in targets if isinstance(t, (ast.Attribute, ast.Subscript)) and settings_like(t.value)]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") and settings_like(node.args[0]):
                assigned.append(f"{name}:{node.lineno}")
    assert not assigned, assigned


def test_ci_runs_the_readme_s_quick_start():
    # the quick start's two commands, on a stock python3 (no `python`, no pip outside a virtual
    # environment): the first makes and uses .venv, the second uses it from a shell of its own;
    # CI runs both as written, the first without its default job
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("## Quick start"):].split("```")[1]
    setup, tests = block.strip().splitlines()
    assert setup.startswith("python3 -m venv --upgrade-deps .venv && . .venv/bin/activate && ") and setup.endswith(" && python train.py")
    assert tests.startswith(". .venv/bin/activate && ") and "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert setup.removesuffix(" && python train.py") in ci and tests in ci


def test_the_reader_s_path_tracer_follows_a_run_to_its_first_step(tiny_model_dir):
    # dev/reader_path.py's count, on the tiny model: from main through XeroAlign's loss (Eq. 1), and
    # nothing of what comes after the first step: the dev evaluation, the test, CKA and retrieval
    from dev.reader_path import entered
    seen = entered(["--method", "xeroalign", "--model", str(tiny_model_dir)])
    assert seen[0] == ("train.py", "main") and len(set(seen)) == len(seen)
    assert {("xeroalign.py", "XeroAlign.loss"), ("losses.py", "xeroalign_loss"), ("train.py", "train_step")} <= set(seen)
    assert not [name for name in seen if name[0] == "evaluate.py" or name[1] in ("test", "evaluate_and_save")]
    assert all(not path.startswith(("dev/", "tests/")) for path, _ in seen)


def test_every_project_file_the_docs_and_the_experiment_files_name_exists():
    texts = [ROOT / "README.md", ROOT / "RESULTS.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "experiments").glob("*.json"))]  # what --dry-run and the manual send a reader to
    named = {m for path in texts for m in re.findall(r"\b(?:minxlt|bench|dev|tests)/[\w/]+\.(?:py|json|sh)\b",
                                                      path.read_text(encoding="utf-8"))}
    assert len(named) > 20 and sorted(n for n in named if not (ROOT / n).exists()) == []
