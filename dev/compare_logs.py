"""Compare the logs of two runs, or of two folders of runs, record by record: the same seed and
settings must give the same losses (after a refactor, across process counts, after a resume).

    python -m dev.compare_logs runs/a runs/b                 # two runs' OUT folders
    python -m dev.compare_logs before/ after/ --tolerance 0  # every run found under both folders

A run is a folder with a log.jsonl (co-training's sub-runs each have theirs). Every number in
log.jsonl and results.json must agree within --tolerance (relative; 0 means exactly), but for
wall-clock "seconds", results.json's "settings" (which name the run's --out), co-training's "args"
and any --ignore KEY. Exits 1 on any difference.
"""
import argparse
import json
import math
import sys
from pathlib import Path

IGNORED = {"seconds", "args", "settings"}


def records(run):
    """The run's log.jsonl records and its results.json (if any), as one list."""
    out = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if line.strip()]
    if (run / "results.json").exists():
        out.append({"results.json": json.loads((run / "results.json").read_text())})
    return out


def differences(a, b, tolerance, where=""):
    """Where two JSON values differ, as readable lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [k for k in dict.fromkeys([*a, *b]) if k not in IGNORED]
        named = lambda k: f"{where}.{k}" if where else k
        return [line for k in keys for line in differences(a.get(k), b.get(k), tolerance, named(k))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [line for i, (x, y) in enumerate(zip(a, b)) for line in differences(x, y, tolerance, f"{where}[{i}]")]
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    same = a == b or numbers and math.isclose(a, b, rel_tol=tolerance, abs_tol=0.0)
    return [] if same else [f"{where}: {a!r} != {b!r}"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--tolerance", type=float, default=0.0, help="relative difference allowed between numbers "
                        "(default: none)")
    parser.add_argument("--ignore", action="append", default=[], metavar="KEY",
                        help="a record key to leave out too, such as one that only the newer run writes (repeatable)")
    args = parser.parse_args(argv)
    IGNORED.update(args.ignore)
    runs = lambda f: {str(log.parent.relative_to(f)): log.parent for log in sorted(f.rglob("log.jsonl"))}  # f's too
    a, b = runs(args.a), runs(args.b)  # {relative path: run folder} of every run under each
    if not a:
        sys.exit(f"error: no log.jsonl under {args.a}")
    failed, names = 0, sorted(set(a) | set(b))
    for name in names:
        if name not in a or name not in b:
            print(f"{name}: only under {args.a if name in a else args.b}")
            failed += 1
            continue
        x, y = records(a[name]), records(b[name])
        found = differences(x, y, args.tolerance) if len(x) == len(y) else [f"{len(x)} records against {len(y)}"]
        steps = sum("loss" in r for r in x)
        print(f"{name}: {'identical' if not found else 'DIFFERENT'} ({steps} logged steps, {len(x)} records)")
        for line in found[:10]:
            print(f"    {line}")
        failed += bool(found)
    print(f"{len(names) - failed} of {len(names)} runs agree")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
