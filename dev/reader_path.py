"""A reader's path, measured: the project's functions and files that one eager training step of a
method enters, from train.py's main to the step's return; the names a method inherits; --help's lines.

    python -m dev.reader_path                  # XeroAlign and FILTER on the bundled corpus
    python -m dev.reader_path --method filter --list
"""
import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Stepped(Exception):
    """Raised once the first step has returned: the run ends there."""


def entered(argv):
    """[(file, function)] of the project's code entered before the first train_step returns."""
    import train
    seen, done, step = [], [], train.train_step

    def first_step(*args, **kwargs):
        step(*args, **kwargs)
        raise Stepped

    def profile(frame, event, arg):
        code = frame.f_code
        if done:
            return
        if event == "call":
            path = Path(code.co_filename)
            if path.is_relative_to(ROOT) and ".venv" not in path.parts and "dev" != path.parts[len(ROOT.parts)]:
                key = (str(path.relative_to(ROOT)), code.co_qualname)
                if key not in seen and not code.co_name.startswith("<"):  # comprehensions and lambdas are their function's
                    seen.append(key)
        elif event == "return" and code is step.__code__:
            done.append(True)

    with tempfile.TemporaryDirectory() as out, contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(Stepped):
        train.train_step = first_step
        sys.setprofile(profile)
        try:
            train.main([*argv, "--max-steps", "1", "--out", out])
        finally:
            sys.setprofile(None)
            train.train_step = step
    return seen


def inherited(method_name):
    """The names a method's class inherits from the project's classes above it."""
    import methods
    cls = methods.METHODS[method_name] if hasattr(methods, "METHODS") else __import__("minxlt.run.flags").run.flags.METHODS[method_name]
    names = set()
    for base in cls.__mro__[1:]:
        if base is object or not Path(sys.modules[base.__module__].__file__).resolve().is_relative_to(ROOT):
            continue
        names |= {n for n in vars(base) if not (n.startswith("__") and n.endswith("__"))}
    return sorted(names)


def long_docstrings():
    """The functions of the root's files whose docstrings run over two lines."""
    import ast
    found = []
    for path in sorted(ROOT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc and len(doc.strip().splitlines()) > 2:
                    found.append(f"{path.name}:{node.name}")
    return found


def code_lines():
    """(lines of Python outside tests/, of them over 120 characters)."""
    files = [p for p in ROOT.rglob("*.py") if not {"tests", ".venv", "runs"} & set(p.relative_to(ROOT).parts)]
    lines = [line for p in files for line in p.read_text(encoding="utf-8").splitlines()]
    return len(lines), sum(len(line) > 120 for line in lines)


def help_lines(argv=()):
    import train
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        train.main([*argv, "--help"])
    return len(text.getvalue().splitlines())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--method", action="append", help="a method to trace (default: xeroalign and filter)")
    p.add_argument("--list", action="store_true", help="list the functions entered")
    args = p.parse_args()
    for method in args.method or ["xeroalign", "filter"]:
        seen = entered(["--method", method])
        files = sorted({f for f, _ in seen})
        print(f"{method}: {len(seen)} functions in {len(files)} files before the first step returns; "
              f"a method inherits {len(inherited(method))} names")
        if args.list:
            for f in files:
                names = [n for g, n in seen if g == f]
                print(f"  {f} ({len(names)}): {', '.join(names)}")
    print(f"train.py --help: {help_lines()} lines; --method filter --help: {help_lines(['--method', 'filter'])} lines")
    total, wide = code_lines()
    print(f"root functions with docstrings over two lines: {len(long_docstrings())}; "
          f"Python outside tests/: {total} lines, {wide} over 120 characters")


if __name__ == "__main__":
    main()
