"""The bundled corpus, read from minxlt/tasks/demo_corpus.json, gives exactly the examples it gave
when its templates were Python literals: every field of every example of every split, the round
trips, the labels and both tasks, hashed then."""
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from minxlt.tasks import demo, load_task

EXPECTED = {  # sha256 of the corpus as the Python literals built it
    "train": "c2778e8e959feda64eab25813cc0ad66b71c61a1b8157414e631e0082e11361d",
    "dev": "906825a6574fba9376136d621a2f1bfdf104a06e9c55dda1a04f8e9608f34040",
    "test": "8e3974de2486c5f693b361322286174a1942e4e49dfcc6a1af953291c9cd99da",
    "round_trip": "2e0304db05c01d79cf2dccf8f8f53f4bef56ca47c1aa6f16ba47ec8d1556fb02",
    "demo": "9d2583285bafd1541217873a43acc6d507a6eb12f7d95c61b3ee5c0954f42502",
    "demo-slots": "4311b2808816721eb94c2dcb879483b78ec1bf175ea1bfdd67ce7c48ec70bf6d",
    "consts": "5acf63045ad87af481a109e6381dd4e764c7df5d7058e6cee004cf047389c342",
}


def digest(obj):
    return hashlib.sha256(json.dumps(obj, ensure_ascii=False).encode()).hexdigest()


def fields(e):
    return [e.id, e.lang, e.text, e.pair, e.label, e.words, e.tags, e.source_text, e.answers, e.group]


def test_the_corpus_is_the_one_the_literals_built():
    got = {split: digest({lang: [fields(e) for e in examples] for lang, examples in demo.build(split).items()})
           for split in ("train", "dev", "test")}
    got["round_trip"] = digest([fields(e) for e in demo.build("train", round_trip=True)["en"]])
    for name in ("demo", "demo-slots"):
        t = load_task(name)
        got[name] = digest({"labels": t.labels, "source": t.source, "targets": t.targets, "level": t.level,
                            "train": {lang: [fields(e) for e in t.train[lang]] for lang in [t.source, *t.targets]},
                            "dev": {lang: [fields(e) for e in es] for lang, es in t.dev.items()},
                            "test": {lang: [fields(e) for e in es] for lang, es in t.test.items()},
                            "round_trip": sorted((k, fields(e)) for k, e in t.round_trip.items())})
    got["consts"] = digest([demo.LANGS, demo.INTENTS, demo.SLOT_LABELS])
    assert got == EXPECTED


def test_the_corpus_file_is_tracked():
    path = Path(demo.__file__).with_name("demo_corpus.json")
    try:
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path.name], cwd=path.parent, capture_output=True)
    except FileNotFoundError:
        pytest.skip("no git")
    if b"not a git repository" in tracked.stderr:
        pytest.skip("not a git checkout")
    assert tracked.returncode == 0, f"{path} is not tracked by git: the bundled corpus would not ship"
