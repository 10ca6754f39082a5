"""The codebase's shape: flat modules that import one another without cycles (imports inside
functions count), and functions short enough to read at once."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = {path.stem: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(ROOT.glob("*.py"))}
LONGEST = 80  # lines of a function, docstring included


def imports(tree):
    """The project's modules that a module imports anywhere in its body."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & set(MODULES)


def test_no_import_cycles():
    graph = {name: imports(tree) for name, tree in MODULES.items()}
    done, path = set(), []

    def visit(name):
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(name):] + [name]))
        if name in done:
            return
        path.append(name)
        for other in sorted(graph[name]):
            visit(other)
        path.pop()
        done.add(name)
    for name in graph:
        visit(name)
    assert "train" in graph["cotrain"] and "cotrain" not in graph["train"]  # co-training drives train.py, not the reverse


def test_functions_are_short():
    long = [f"{name}.py:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for name, tree in MODULES.items() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > LONGEST]
    assert not long, long


def test_the_loop_names_no_method():
    # train.py, evaluate.py and the benchmarks compare no string with a method's name, nor look one up
    # by a name written in the code: they reach methods through flags.METHODS and the interface
    import flags
    for name in ("train", "evaluate", "bench_train", "cotrain"):
        named = [ast.unparse(node) for node in ast.walk(MODULES[name]) if isinstance(node, (ast.Compare, ast.Subscript))
                 and any(isinstance(c, ast.Constant) and c.value in flags.METHODS for c in ast.walk(node))]
        assert not named, f"{name}.py: {named}"


def test_the_training_step_reads_on_one_screen():
    # train.py is the run from the command line to the test table, its loop and its step; what the
    # loop does around the step is bookkeeping.py
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
        if name == "flags":
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            assigned += [f"{name}.py:{node.lineno}" for t in targets if isinstance(t, (ast.Attribute, ast.Subscript)) and settings_like(t.value)]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") and settings_like(node.args[0]):
                assigned.append(f"{name}.py:{node.lineno}")
    assert not assigned, assigned
