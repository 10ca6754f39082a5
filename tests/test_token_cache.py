"""The token cache gives the items that encoding in memory gives, builds an entry once, and a run
on it trains exactly as a run without it."""
import json

import numpy as np
import pytest

import data
import tasks
import token_cache
import train
from methods import Run
from tokenizer import Tokenizer


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINXLT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "tokens"


def plain(items):
    return [(it.ids, it.label, it.lang, it.id) for it in items]


def test_cached_items_and_pairs_are_those_encoded_in_memory(cache, tiny_model_dir):
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    task = tasks.load_task("demo", targets=["de", "zh"])
    sources = task.train["en"] + task.train["en"][:3]  # ids twice: each copy pairs with every translation of its id
    translations = task.train["de"] + task.train["zh"]
    for examples in (sources, translations):
        assert plain(token_cache.encode(examples, tokenizer, task.labels, 24)) == \
            plain(data.encode_examples(examples, tokenizer, task.labels, 24))
    cached = token_cache.encode(sources, tokenizer, task.labels, 24).pair_with(token_cache.encode(translations, tokenizer, task.labels, 24))
    expected = data.translation_pairs(data.encode_examples(sources, tokenizer, task.labels, 24),
                                      data.encode_examples(translations, tokenizer, task.labels, 24))
    assert [(plain([s])[0], plain([t])[0]) for s, t in cached] == [(plain([s])[0], plain([t])[0]) for s, t in expected]
    lengths = [max(len(s.ids), len(t.ids)) for s, t in expected]
    assert cached.lengths() == lengths and len(cached) == len(expected) and cached[-1][1].id == expected[-1][1].id
    assert len(list(cache.iterdir())) == 2  # one entry per set of examples, each built once
    # sources without a translation are dropped, translations in another order keep theirs
    some = task.train["zh"][::-1] + task.train["de"][7:]
    cached = token_cache.encode(sources, tokenizer, task.labels, 24).pair_with(token_cache.encode(some, tokenizer, task.labels, 24))
    expected = data.translation_pairs(data.encode_examples(sources, tokenizer, task.labels, 24),
                                      data.encode_examples(some, tokenizer, task.labels, 24))
    assert [(plain([s])[0], plain([t])[0]) for s, t in cached] == [(plain([s])[0], plain([t])[0]) for s, t in expected]


def test_an_entry_is_named_by_everything_that_decides_its_ids(cache, tiny_model_dir, monkeypatch):
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    examples = tasks.load_task("demo").train["en"][:20]
    first = token_cache.key(examples, tokenizer, ["a", "b"], 24)
    changed = [data.Example(e.id, e.lang, e.text + "!" if i == 7 else e.text, e.pair, e.label) for i, e in enumerate(examples)]
    assert len({first, token_cache.key(examples, tokenizer, ["a", "b"], 32), token_cache.key(examples, tokenizer, ["b", "a"], 24),
                token_cache.key(changed, tokenizer, ["a", "b"], 24)}) == 4
    labels = sorted({e.label for e in examples})
    token_cache.encode(examples, tokenizer, labels, 24)
    monkeypatch.setattr(token_cache, "write", lambda *a: pytest.fail("an existing entry was built again"))
    assert plain(token_cache.encode(examples, tokenizer, labels, 24)) == plain(data.encode_examples(examples, tokenizer, labels, 24))


def test_an_interrupted_build_leaves_no_entry(cache, tiny_model_dir, monkeypatch):
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    examples = tasks.load_task("demo").train["en"]
    labels = sorted({e.label for e in examples})
    real_save = np.save

    def killed(path, array):
        if str(path).endswith("labels.npy"):
            raise KeyboardInterrupt
        real_save(path, array)
    monkeypatch.setattr(token_cache.np, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        token_cache.encode(examples, tokenizer, labels, 24)
    assert list(cache.iterdir()) == []


def test_a_run_on_the_cache_trains_as_one_without_it(cache, tiny_model_dir, tmp_path, monkeypatch):
    argv = ["--model", str(tiny_model_dir), "--target-langs", "de,zh", "--batch-size", "8", "--max-steps", "4", "--eval-every", "4",
            "--log-every", "1", "--no-alignment", "--no-test"]
    logs = {}
    for method in ("translate-train", "filter"):
        train.main(argv + ["--method", method, "--out", str(tmp_path / method / "first")])
        entries = sorted(p.name for p in cache.iterdir())
        train.main(argv + ["--method", method, "--out", str(tmp_path / method / "again")])  # reads the entries the first built
        assert sorted(p.name for p in cache.iterdir()) == entries
        with monkeypatch.context() as patch:  # every item encoded in memory, as without the cache
            patch.setattr(Run, "encode", lambda self, examples, cache=False: self.level.encode(examples, self.tokenizer, self.task,
                                                                                               self.max_length))
            train.main(argv + ["--method", method, "--out", str(tmp_path / method / "in-memory")])
        logs[method] = [[json.loads(line)["loss"] for line in (tmp_path / method / run / "log.jsonl").read_text().splitlines()
                         if '"loss"' in line] for run in ("first", "again", "in-memory")]
        assert logs[method][0] == logs[method][1] == logs[method][2]
