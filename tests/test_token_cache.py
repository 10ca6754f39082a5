"""The token cache gives the items that encoding in memory gives, builds an entry once (per language,
named by its files where the task names them, found without reading them), and a run
on it trains exactly as a run without it."""
import itertools
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
import torch.multiprocessing as mp

import data
import levels
import train
from conftest import free_port, join_process_group_env
from methods import Run
from minxlt import tasks
from minxlt.parallel import distributed
from minxlt.text import token_cache
from minxlt.text.tokenizer import Tokenizer


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
    monkeypatch.setattr(token_cache, "READERS", token_cache.READERS[:-1])  # the code that tokenizes: another version
    assert token_cache.key(examples, tokenizer, ["a", "b"], 24) != first
    monkeypatch.undo()
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


def test_a_build_removes_what_killed_builds_of_this_host_left(cache, tiny_model_dir, monkeypatch):
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    examples = tasks.load_task("demo").train["en"]
    labels = sorted({e.label for e in examples})
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    left = {name: cache / name for name in (f"a.tmp{host}-{dead.pid}", f"b.tmp{host}-{os.getpid()}", f"c.tmpother-{dead.pid}")}
    for folder in left.values():
        folder.mkdir(parents=True)
    token_cache.encode(examples, tokenizer, labels, 24)
    assert [name for name, folder in left.items() if folder.exists()] == [f"b.tmp{host}-{os.getpid()}", f"c.tmpother-{dead.pid}"]


def test_a_cache_folder_a_single_process_cannot_write_is_named_with_what_to_do(tmp_path, tiny_model_dir, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("MINXLT_CACHE", str(tmp_path / "a-file" / "cache"))
    examples = tasks.load_task("demo").train["en"][:5]
    with pytest.raises(tasks.InputError, match=r"the token cache .*a-file/cache/tokens cannot be written to \(.*\): set "
                                         r"MINXLT_CACHE to a folder it can write$"):
        token_cache.encode(examples, Tokenizer.from_pretrained(tiny_model_dir), sorted({e.label for e in examples}), 24)


def test_an_entry_another_process_set_aside_is_built_again(cache, tiny_model_dir, monkeypatch):
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    examples = tasks.load_task("demo").train["en"]
    labels = sorted({e.label for e in examples})
    token_cache.encode(examples, tokenizer, labels, 24)
    [entry] = cache.iterdir()
    (entry / "ids.npy").write_bytes(b"0")
    damage = token_cache.damage

    def found_at_once(folder):  # another process finds it damaged too, and renames it first
        problem = damage(folder)
        shutil.rmtree(folder)
        return problem
    monkeypatch.setattr(token_cache, "damage", found_at_once)
    assert not token_cache.intact(entry)


def test_a_damaged_entry_is_found_before_it_is_used_and_built_again(cache, tiny_model_dir, capsys):
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    examples = tasks.load_task("demo").train["en"]
    labels = sorted({e.label for e in examples})
    expected = plain(data.encode_examples(examples, tokenizer, labels, 24))
    token_cache.encode(examples, tokenizer, labels, 24)
    [entry] = cache.iterdir()
    ids = entry / "ids.npy"
    whole = ids.read_bytes()
    ids.write_bytes(whole[:-40])  # cut short
    assert plain(token_cache.encode(examples, tokenizer, labels, 24)) == expected
    note = f"note: token cache entry {entry} is damaged"
    said = f"{note} (ids.npy holds {len(whole) - 40} bytes, not {len(whole)}): building it again\n"
    assert capsys.readouterr().err == said
    stored = entry / "labels.npy"
    raw = bytearray(stored.read_bytes())
    raw[-2:] = ((int.from_bytes(raw[-2:], "little") + 1) % len(labels)).to_bytes(2, "little")  # another label
    stored.write_bytes(bytes(raw))
    assert plain(token_cache.encode(examples, tokenizer, labels, 24)) == expected
    assert capsys.readouterr().err == f"{note} (labels.npy's CRC-32 differs): building it again\n"
    assert [p.name for p in cache.iterdir()] == [entry.name]


def test_the_warnings_an_entry_s_files_gave_are_said_by_every_run_that_uses_it(cache, tiny_model_dir, tmp_path,
                                                                                capsys):
    from test_faults import sib200
    german = "".join(f"{i}\t{['sports', 'health'][i % 2]}\tdeu_Latn sentence {i}.\n" for i in (0, 1, 2, 3, 9))
    folder = sib200(tmp_path / "sib", rows={("deu_Latn", "train"): german})  # no 4 and 5; a 9, which English lacks
    said = [f"warning: {folder / 'deu_Latn' / 'train.tsv'}: 1 of its 5 examples have no source example of the same "
            "id (first: '9'): they are left out; 2 of the 6 source examples have no translation in it (first: '4', "
            "'5') (--strict-data refuses this)"]
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    for run in range(2):  # the second run reads the entries the first built, not the files
        task = tasks.load_task("sib200", folder)
        texts = token_cache.training_texts(task.train, ["eng_Latn", "deu_Latn"], tokenizer, task.labels, 32)
        assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")] == said
        assert len(texts["deu_Latn"]) == 4 and len(list(cache.iterdir())) == 2
    import shutil
    copy = shutil.copytree(folder, tmp_path / "copy")  # the same bytes elsewhere: the same entries, named anew
    token_cache.training_texts(tasks.load_task("sib200", copy).train, ["eng_Latn", "deu_Latn"], tokenizer, task.labels,
                               32)
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")] == [
        said[0].replace(str(folder), str(copy))] and len(list(cache.iterdir())) == 2


def test_a_build_holds_a_chunk_of_examples_not_the_language(cache, tiny_model_dir, monkeypatch):
    """Examples stream in, CHUNK at a time: what a build holds grows by a few numbers and an id's
    entry per text (measured with tracemalloc at two sizes), not by the examples it has read."""
    tokenizer, words = Tokenizer.from_pretrained(tiny_model_dir), [e.text for e in tasks.load_task("demo").train["en"]]
    monkeypatch.setattr(token_cache, "CHUNK", 100)
    read, tokenized = [0], []
    encode_examples = token_cache.encode_examples
    monkeypatch.setattr(token_cache, "encode_examples", lambda chunk, *rest: (tokenized.append(read[0]), encode_examples(chunk, *rest))[1])

    def examples(n):  # made as they are asked for, as a file's reader makes them
        for i in range(n):
            read[0] += 1
            text = " ".join(words[(i + k) % len(words)] for k in range(4)) + f" {i}"  # about 135 characters
            yield data.Example(id=f"example-{i}", lang="en", text=text, label="a" if i % 3 else "b", where=f"train.tsv:{i + 1}")

    def peak(n):
        read[0] = 0
        tokenized.clear()
        tracemalloc.start()
        token_cache.build(cache / f"entry{n}", examples(n), tokenizer, ["a", "b"], 24)
        _, high = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return high
    small, large = peak(1000), peak(10000)
    assert tokenized[:3] == [100, 200, 300]  # each chunk tokenized once it is read, before the next is read
    assert (large - small) / 9000 < 300, (small, large)  # bytes per text: about 150; a build that kept the examples, over 500
    entry = token_cache.load(cache / "entry10000")
    assert len(entry) == 10000 and entry[9999].id == "example-9999" and entry[1].label == 0 and entry[3].label == 1


def test_a_language_s_examples_come_as_its_file_is_read(tmp_path):
    from bench import data as bench_data
    bench_data.write_sib200(tmp_path, 30, ["de"])
    german = tmp_path / "deu_Latn" / "train.tsv"
    german.write_text(german.read_text() + "30\tsports\n")  # a last line of two columns
    examples = tasks.load_task("sib200", tmp_path).train.stream("deu_Latn")
    first = next(examples)  # read before the last line is
    assert first.id == "0" and first.lang == "deu_Latn"
    with pytest.raises(tasks.DataError, match=r"deu_Latn/train.tsv:32: 2 columns, expected 3"):
        list(examples)


def test_a_run_on_the_cache_trains_as_one_without_it(cache, tiny_model_dir, tmp_path, monkeypatch):
    from bench import data as bench_data
    bench_data.write_xnli(tmp_path / "xnli", 40, ["de", "zh"])
    argv = ["--model", str(tiny_model_dir), "--task", "xnli", "--data", str(tmp_path / "xnli"), "--batch-size", "8",
            "--max-steps", "4", "--eval-every", "4", "--log-every", "1", "--no-alignment", "--no-test"]
    train.main(argv[:1] + [str(tiny_model_dir), "--target-langs", "de", "--max-steps", "2", "--no-test",
                           "--out", str(tmp_path / "demo")])
    assert not cache.exists() or not list(cache.iterdir())  # the bundled corpus, in memory, is encoded as it is
    logs = {}
    for method in ("translate-train", "filter"):
        train.main(argv + ["--method", method, "--out", str(tmp_path / method / "first")])
        entries = sorted(p.name for p in cache.iterdir())
        train.main(argv + ["--method", method, "--out", str(tmp_path / method / "again")])  # reads the entries the first built
        assert sorted(p.name for p in cache.iterdir()) == entries
        with monkeypatch.context() as patch:  # every item encoded in memory, as without the cache
            patch.setattr(Run, "training_texts", lambda self, langs, extra=(): self.encode([e for lang in langs for e in
                                                                                            self.task.train[lang]] + list(extra)))
            patch.setattr(levels.Level, "pair", lambda self, sources, translations: data.translation_pairs(sources, translations))
            train.main(argv + ["--method", method, "--out", str(tmp_path / method / "in-memory")])
        logs[method] = [[json.loads(line)["loss"] for line in (tmp_path / method / run / "log.jsonl").read_text().splitlines()
                         if '"loss"' in line] for run in ("first", "again", "in-memory")]
        assert logs[method][0] == logs[method][1] == logs[method][2]


def test_entries_named_by_files_are_found_without_reading_them(cache, tiny_model_dir, tmp_path, monkeypatch):
    from bench import data as bench_data
    bench_data.write_xnli(tmp_path / "xnli", 30, ["de", "zh"])
    tokenizer, langs = Tokenizer.from_pretrained(tiny_model_dir), ["en", "de", "zh"]

    def read(folder):  # the texts and pairs a run trains on, and what encoding the examples in memory gives
        task = tasks.load_task("xnli", folder)
        run = Run(task, tokenizer, 32)
        texts, pairs = run.training_texts(langs), run.level.pair(run.training_texts(["en"]), run.training_texts(["de", "zh"]))
        return plain(texts), [(plain([s])[0], plain([t])[0]) for s, t in pairs], task

    texts, pairs, task = read(tmp_path / "xnli")
    encoded = {lang: data.encode_examples(task.train[lang], tokenizer, task.labels, 32) for lang in langs}
    assert texts == plain([it for lang in langs for it in encoded[lang]])
    expected_pairs = data.translation_pairs(encoded["en"], encoded["de"] + encoded["zh"])
    assert pairs == [(plain([s])[0], plain([t])[0]) for s, t in expected_pairs] and len(pairs) == 60
    assert len(list(cache.iterdir())) == 3  # an entry per language
    shutil.copytree(tmp_path / "xnli", tmp_path / "moved")
    with monkeypatch.context() as patch:  # the same bytes elsewhere: the same entries, and no training file is parsed
        patch.setattr(data.TrainSplit, "stream", lambda self, lang: pytest.fail(f"{lang}'s training file was parsed"))
        assert read(tmp_path / "xnli")[:2] == read(tmp_path / "moved")[:2] == (texts, pairs)
    german = tmp_path / "moved" / "translate-train" / "en-de-translated.tsv"
    german.write_text(german.read_text().replace("\t", "\tx ", 3).replace("\tx ", "\t", 2))  # one translated text changed
    changed, _, moved = read(tmp_path / "moved")
    assert len(list(cache.iterdir())) == 4 and changed != texts  # German's entry is new, the others are reused
    assert changed == plain(data.encode_examples([e for lang in langs for e in moved.train[lang]], tokenizer, task.labels, 32))
    english = tmp_path / "moved" / "train-en.tsv"
    english.write_text(english.read_text().replace('"', '"x ', 1))  # one English text changed
    read(tmp_path / "moved")
    assert len(list(cache.iterdir())) == 7  # the translations are checked against the source: their entries follow its bytes


def test_a_run_reads_no_training_file_the_second_time(cache, tiny_model_dir, tmp_path, monkeypatch):
    from bench import data as bench_data
    bench_data.write_xnli(tmp_path / "xnli", 24, ["de"])
    argv = ["--model", str(tiny_model_dir), "--task", "xnli", "--data", str(tmp_path / "xnli"), "--method", "xeroalign",
            "--batch-size", "8", "--eval-every", "3", "--log-every", "1", "--no-alignment", "--no-test"]
    train.main(argv + ["--out", str(tmp_path / "first"), "--max-steps", "3"])
    with monkeypatch.context() as patch:
        patch.setattr(data.TrainSplit, "stream", lambda self, lang: pytest.fail(f"{lang}'s training file was parsed"))
        train.main(argv + ["--out", str(tmp_path / "again"), "--epochs", "1"])  # --epochs counts the source's examples in its entry
    losses = lambda run: [json.loads(line)["loss"] for line in (tmp_path / run / "log.jsonl").read_text().splitlines() if '"loss"' in line]
    assert losses("first") == losses("again") and len(losses("first")) == 3


def test_a_training_file_is_read_and_checked_when_first_asked_for(tmp_path):
    from bench import data as bench_data
    bench_data.write_xnli(tmp_path, 6, ["de"])
    german = tmp_path / "translate-train" / "en-de-translated.tsv"
    german.write_text(german.read_text().replace("\tneutral\n", "\tentailment\n").replace("\tcontradiction\n", "\tentailment\n"))
    (tmp_path / "train-en.tsv").write_text((tmp_path / "train-en.tsv").read_text().replace("\tentailment\n", "\tneutral\n"))
    task = tasks.load_task("xnli", tmp_path)  # dev and test are read and checked; training files wait
    assert task.test["de"] and task.train.examples == {} and "de" in task.train and task.train.examples == {}
    assert pickle.loads(pickle.dumps(task)).train.langs == ["en", "de"]  # loader processes that spawn get the task pickled
    shutil.copy(tmp_path / "train-en.tsv", tmp_path / "train-de.tsv")
    assert [p.name for p in tasks.load_task("xnli", tmp_path, source="de").train.files("de")] == ["train-de.tsv"]  # the file it reads
    with pytest.raises(tasks.InputError, match=r"en-de-translated.tsv:1: the translation of .1. is labelled .entailment., and its source"):
        task.train["de"]
    assert len(task.train["en"]) == 6
    (tmp_path / "train-en.tsv").write_text("")
    with pytest.raises(tasks.InputError, match="task xnli: no train examples in en"):
        tasks.load_task("xnli", tmp_path).train["en"]


def build_worker(rank, world_size, port, folder, model_dir, result_dir, caches):
    join_process_group_env(rank, world_size, port)
    os.environ["MINXLT_CACHE"] = str(caches[rank])
    distributed.setup("cpu")
    built, build = [], token_cache.build

    def recorded(entry, examples, *rest):  # the language of each entry this process builds
        examples = iter(examples)
        first = next(examples)
        built.append(first.lang)
        return build(entry, itertools.chain([first], examples), *rest)
    token_cache.build = recorded
    task = tasks.load_task("xnli", folder)
    texts = token_cache.training_texts(task.train, ["en", "de", "zh"], Tokenizer.from_pretrained(model_dir), task.labels, 32, rank)
    (result_dir / f"rank{rank}.json").write_text(json.dumps({"built": built, "texts": {lang: plain(t) for lang, t in texts.items()}}))
    distributed.barrier()
    distributed.cleanup()  # a process that exits with its process group alive may abort


@pytest.mark.parametrize("nodes", [1, 2])
def test_the_processes_that_share_a_cache_folder_build_its_missing_entries_in_turn(tiny_model_dir, tmp_path, nodes):
    """One node (or a shared file system): one cache folder, each entry built once, by the two
    processes in turn. Two nodes, each with its own cache folder: each builds every entry."""
    from bench import data as bench_data
    bench_data.write_xnli(tmp_path / "xnli", 20, ["de", "zh"])
    caches = [tmp_path / f"cache{rank % nodes}" for rank in (0, 1)]
    mp.spawn(build_worker, args=(2, free_port(), tmp_path / "xnli", tiny_model_dir, tmp_path, caches), nprocs=2)
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["built"] for r in ranks] == ([["en", "zh"], ["de"]] if nodes == 1 else [["en", "de", "zh"]] * 2)
    for folder in set(caches):  # three entries each, no temporary folder or mark left
        assert sorted(len(p.name) for p in (folder / "tokens").iterdir()) == [32] * 3
    task, tokenizer = tasks.load_task("xnli", tmp_path / "xnli"), Tokenizer.from_pretrained(tiny_model_dir)
    expected = {lang: [list(x) for x in plain(data.encode_examples(task.train[lang], tokenizer, task.labels, 32))] for lang in task.train}
    assert ranks[0]["texts"] == ranks[1]["texts"] == expected


def unwritable_worker(rank, world_size, port, folders, result_dir):
    join_process_group_env(rank, world_size, port)
    distributed.setup("cpu")
    try:
        token_cache.sharing(folders[rank], rank)
        message = "returned"
    except tasks.InputError as e:
        message = str(e)
    (result_dir / f"rank{rank}.txt").write_text(message)
    distributed.cleanup()


def test_a_cache_folder_one_process_cannot_write_stops_every_process(tmp_path):
    (tmp_path / "a-file").write_text("")  # process 1's cache folder is under a file: it cannot be made
    folders = [tmp_path / "cache", tmp_path / "a-file" / "cache"]
    mp.spawn(unwritable_worker, args=(2, free_port(), folders, tmp_path), nprocs=2)
    messages = [(tmp_path / f"rank{rank}.txt").read_text() for rank in (0, 1)]
    assert messages[0] == messages[1] and messages[0].startswith(f"the token cache {folders[1]} cannot be written to by process 1")


def test_an_entry_named_by_files_changes_with_all_that_decides_its_ids(tiny_model_dir, tmp_path, monkeypatch):
    from bench import data as bench_data
    bench_data.write_xnli(tmp_path, 5, ["de"])
    tokenizer, files = Tokenizer.from_pretrained(tiny_model_dir), [tmp_path / "train-en.tsv"]
    name = lambda **changed: token_cache.files_key(**dict(dict(files=files, reader=["XtremeXnli", "en"], lang="en", tokenizer=tokenizer,
                                                                labels=["a", "b"], max_length=24), **changed))
    names = {name(), name(files=[tmp_path / "dev-en.tsv"]), name(reader=["XtremePawsx", "en"]), name(lang="de"),
             name(labels=["b", "a"]), name(max_length=32)}
    monkeypatch.setattr(token_cache, "READERS", token_cache.READERS[:-1])  # the code that reads and tokenizes
    names.add(name())
    assert len(names) == 7


def test_unicoder_builds_no_entry(cache, tiny_model_dir, tmp_path):
    train.main(["--model", str(tiny_model_dir), "--method", "unicoder", "--target-langs", "de", "--batch-size", "8", "--max-steps", "1",
                "--no-alignment", "--no-test", "--out", str(tmp_path / "run")])
    assert not cache.exists() or not list(cache.iterdir())  # it trains on pre-training pairs, not on the token cache


def bad_file_worker(rank, world_size, port, folder, model_dir, result_dir):
    join_process_group_env(rank, world_size, port)
    distributed.setup("cpu")
    task = tasks.load_task("xnli", folder)
    try:
        token_cache.training_texts(task.train, ["de", "zh"], Tokenizer.from_pretrained(model_dir), task.labels, 32, rank)
    except tasks.InputError as e:
        (result_dir / f"rank{rank}.txt").write_text(str(e))
    distributed.barrier()
    distributed.cleanup()


def test_a_bad_file_stops_every_process(cache, tiny_model_dir, tmp_path):
    from bench import data as bench_data
    bench_data.write_xnli(tmp_path / "xnli", 12, ["de", "zh"])
    chinese = tmp_path / "xnli" / "translate-train" / "en-zh-translated.tsv"  # built by process 1
    chinese.write_text(chinese.read_text().replace("\tneutral\n", "\tcontradiction\n").replace("\tentailment\n", "\tcontradiction\n"))
    mp.spawn(bad_file_worker, args=(2, free_port(), tmp_path / "xnli", tiny_model_dir, tmp_path), nprocs=2)
    messages = [(tmp_path / f"rank{rank}.txt").read_text() for rank in (0, 1)]
    assert messages[0] == messages[1] and "en-zh-translated.tsv:2: the translation of" in messages[0]
