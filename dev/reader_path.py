"""A reader's path, measured: the project's functions and files that one eager training step of a
method enters, from train.py's main to the step's return; the names a method inherits; --help's lines.

    python -m dev.reader_path                  # XeroAlign and FILTER on the bundled corpus
    python -m dev.reader_path --method filter --list
"""
import argparse
import ast
import contextlib
import io
import sys
import tempfile
from pathlib import Path

import train

ROOT = Path(__file__).resolve().parent.parent


def ours(path):
    """`path` relative to the repository where it is the project's code (not dev/'s, nor a virtual environment's)."""
    if path.is_relative_to(ROOT) and ".venv" not in path.parts and path.relative_to(ROOT).parts[0] != "dev":
        return str(path.relative_to(ROOT))


class Stepped(Exception):
    """Raised once the first step has returned: the run ends there."""


def entered(argv):
    """[(file, function)] of the project's code entered before the first train_step returns."""
    seen, step = [], train.train_step

    def first_step(*args, **kwargs):
        step(*args, **kwargs)
        raise Stepped

    def profile(frame, event, arg):
        code = frame.f_code
        if event == "return" and code is step.__code__:
            sys.setprofile(None)  # the first step has returned
        elif event == "call" and (path := ours(Path(code.co_filename))):
            key = (path, code.co_qualname)
            if key not in seen and not code.co_name.startswith("<"):  # comprehensions and lambdas: their function's
                seen.append(key)

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
    from minxlt.run import flags
    cls = (getattr(methods, "METHODS", None) or flags.METHODS)[method_name]
    bases = [base for base in cls.__mro__[1:]
             if base is not object and Path(sys.modules[base.__module__].__file__).resolve().is_relative_to(ROOT)]
    return sorted({n for base in bases for n in vars(base) if not (n.startswith("__") and n.endswith("__"))})


def help_lines(argv=()):
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
        for f in files if args.list else []:
            names = [n for g, n in seen if g == f]
            print(f"  {f} ({len(names)}): {', '.join(names)}")
    print(f"train.py --help: {help_lines()} lines; --method filter --help: {help_lines(['--method', 'filter'])} lines")
    long_docstrings = [f"{path.name}:{node.name}" for path in sorted(ROOT.glob("*.py"))  # the root's functions'
                       for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                       if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and len((ast.get_docstring(node, clean=False) or "").strip().splitlines()) > 2]
    files = [p for p in ROOT.rglob("*.py") if not {"tests", ".venv", "runs"} & set(p.relative_to(ROOT).parts)]
    lines = [line for p in files for line in p.read_text(encoding="utf-8").splitlines()]
    print(f"root functions with docstrings over two lines: {len(long_docstrings)}; "
          f"Python outside tests/: {len(lines)} lines, {sum(len(line) > 120 for line in lines)} over 120 characters")


if __name__ == "__main__":
    main()
