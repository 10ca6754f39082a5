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
    # by a name written in the code: they reach methods through registry.METHODS and the interface
    import registry
    for name in ("train", "evaluate", "bench_train", "cotrain"):
        named = [ast.unparse(node) for node in ast.walk(MODULES[name]) if isinstance(node, (ast.Compare, ast.Subscript))
                 and any(isinstance(c, ast.Constant) and c.value in registry.METHODS for c in ast.walk(node))]
        assert not named, f"{name}.py: {named}"
