"""Bad input, faults and signals, met as a user meets them: through the command line, on small
files. Every case ends in one line that names the problem (and the file and line where there is
one), never a traceback, and nothing that was there before is lost."""
import contextlib
import importlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT
from minxlt import tasks
from minxlt.run import cli

SIB = "index_id\tcategory\ttext\n"


def command(script, *args, cwd=None):
    """Run one of the project's commands as `python SCRIPT ARGS` runs it (cli.run(main), its exit status and its
    stderr), in this process to save a start; an error other than the one line it must end with raises here."""
    module, printed, argv = importlib.import_module(Path(script).stem), io.StringIO(), sys.argv
    sys.argv = [script, *map(str, args)]
    try:
        with contextlib.redirect_stderr(printed), contextlib.redirect_stdout(io.StringIO()), contextlib.chdir(cwd or "."):
            cli.run(module.main)
        status = 0
    except SystemExit as stop:  # a message is printed as the process ends, with status 1
        status = 1 if isinstance(stop.code, str) else stop.code or 0
        printed.write(f"{stop.code}\n" if isinstance(stop.code, str) else "")
    finally:
        sys.argv = argv
    return subprocess.CompletedProcess([script, *args], status, stderr=printed.getvalue())


def error_line(done):
    """The one line an error ends with (after any progress bars)."""
    assert done.returncode != 0, done.stderr
    return done.stderr.strip().splitlines()[-1]


def write(path, text, encoding="utf-8"):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding=encoding)
    return path


def sib200(directory, langs=("eng_Latn", "deu_Latn"), rows=None):
    """A small SIB-200-layout folder: 6 sentences per split, the same ids in every language."""
    for lang in langs:
        for split in ("train", "dev", "test"):
            body = rows.get((lang, split)) if rows and (lang, split) in rows else "".join(
                f"{i}\t{['sports', 'health'][i % 2]}\t{lang} sentence number {i} of {split}.\n" for i in range(6))
            write(directory / lang / f"{split}.tsv", body if isinstance(body, bytes) else SIB + body)
    return directory


def train(tmp_path, tiny_model_dir, *args):
    return command("train.py", "--model", tiny_model_dir, "--batch-size", "4", "--max-steps", "2", "--eval-every", "2",
                   "--no-alignment", *args, cwd=tmp_path)


# --- files that cannot be read as they are -------------------------------------------------------

@pytest.mark.parametrize("case,message", [
    ("invalid-utf8", "train.tsv:3: not UTF-8 (byte 0xe9"),
    ("empty-dev", "no dev examples in eng_Latn"),
    ("header-only-test", "no test examples in deu_Latn"),
    ("short-row", "dev.tsv:2: 2 columns, expected 3"),
])
def test_broken_tsv_files(tmp_path, tiny_model_dir, case, message):
    data = tmp_path / "sib"
    rows = {"invalid-utf8": {("eng_Latn", "train"): (SIB + "0\tsports\tok\n1\thealth\tcaf\xe9\n").encode("latin-1")},
            "empty-dev": {("eng_Latn", "dev"): b""},
            "header-only-test": {("deu_Latn", "test"): ""},
            "short-row": {("deu_Latn", "dev"): "0\tsports\n"}}[case]
    sib200(data, rows=rows)
    done = train(tmp_path, tiny_model_dir, "--task", "sib200", "--data", data, "--target-langs", "deu_Latn", "--out", tmp_path / "run")
    assert error_line(done).startswith("error: ") and message in error_line(done)
    assert not (tmp_path / "run" / "results.json").exists()


def test_long_tsv_field_is_read(tmp_path):
    long = "word " * 40000  # 200 KB, past the csv module's default field limit
    write(tmp_path / "xx" / "train.tsv", f"{SIB}7\tsports\t{long}\n")
    [example] = list(tasks.each_sib200(tmp_path, "xx", "train"))
    assert example.text == long.strip()


def test_byte_order_mark_is_dropped(tmp_path):
    write(tmp_path / "xx" / "train.tsv", ("\ufeff" + SIB + "7\tsports\tok\n").encode("utf-8"))
    assert [e.id for e in tasks.each_sib200(tmp_path, "xx", "train")] == ["7"]


CONLLU = "# sent_id = {id}\n1\tWe\twe\tPRON\t_\t_\t0\t_\t_\t_\n2\twalk\twalk\tVERB\t_\t_\t0\t_\t_\t_\n"


@pytest.mark.parametrize("text,message", [
    (CONLLU.format(id="a") + CONLLU.format(id="b"), "en_pud-ud-test.conllu:4: a comment line among a sentence's words"),
    (CONLLU.format(id="a") + CONLLU.format(id="b").split("\n", 1)[1], "en_pud-ud-test.conllu:4: word 1 after word 2"),
    ("# sent_id = a\n1\tnaïve\tx\tADJ\t_\t_\t0\t_\t_\t_\n".encode("latin-1"), "en_pud-ud-test.conllu:2: not UTF-8"),
])
def test_broken_conllu(tmp_path, tiny_model_dir, text, message):
    write(tmp_path / "ud" / "en_pud-ud-test.conllu", text)
    write(tmp_path / "ud" / "de_pud-ud-test.conllu", CONLLU.format(id="a") + "\n")
    done = train(tmp_path, tiny_model_dir, "--task", "udpos", "--data", tmp_path / "ud", "--out", tmp_path / "run")
    assert message in error_line(done)


def test_xsid_sentences_without_a_blank_line_between(tmp_path):
    text = "# text = hi\n# intent = weather/find\n1\thi\tweather/find\tO\n# text = yo\n# intent = weather/find\n1\tyo\tweather/find\tO\n"
    with pytest.raises(tasks.DataError, match="en.valid.conll:4: a comment line among a sentence's words"):
        tasks.read_xsid(write(tmp_path / "en.valid.conll", text), "en")


@pytest.mark.parametrize("answer,message", [
    ({"text": "Paris", "answer_start": -9}, "answer_start -9 is not a character position"),
    ({"text": "", "answer_start": 0}, "an answer's text is empty"),
    ({"text": "Paris", "answer_start": "0"}, "answer_start '0' is not a character position"),
])
def test_bad_squad_answers(tmp_path, tiny_model_dir, answer, message):
    context = "It is in Paris."
    for lang in ("en", "de"):
        qas = [{"id": "q1", "question": "Where?", "answers": [answer if lang == "en" else {"text": "Paris", "answer_start": 9}]}]
        write(tmp_path / "xq" / f"xquad.{lang}.json", json.dumps({"data": [{"title": "T", "paragraphs": [{"context": context, "qas": qas}]}]}))
    done = train(tmp_path, tiny_model_dir, "--task", "xquad", "--data", tmp_path / "xq", "--target-langs", "de", "--max-length", "64",
                 "--doc-stride", "16", "--out", tmp_path / "run")
    assert "xquad.en.json: article 0 ('T'), paragraph 0, question q1: " + message in error_line(done)


@pytest.mark.parametrize("line,message", [
    ('{"id": "p1", "lang": "de", "text": "  ", "label": "alarm"}', "extra.jsonl:1: empty text"),
    ('{"id": "p1", "lang": "de", "label": "alarm"}', "extra.jsonl:1: not an object with id, lang, text and label"),
    (b'{"id": "p1", "lang": "de", "text": "caf\xe9", "label": "alarm"}', "extra.jsonl:1: not UTF-8"),
])
def test_bad_extra_examples(tmp_path, tiny_model_dir, line, message):
    path = write(tmp_path / "extra.jsonl", line)
    done = train(tmp_path, tiny_model_dir, "--method", "zero-shot", "--target-langs", "de", "--extra-train", path, "--out", tmp_path / "run")
    assert message in error_line(done)


# --- checkpoints and models ------------------------------------------------------------------------

def model_copy(tmp_path, tiny_model_dir, **config):
    import shutil
    directory = tmp_path / "model"
    shutil.copytree(tiny_model_dir, directory)
    hf = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(dict(hf, **config)))
    return directory


@pytest.mark.parametrize("config,message", [
    ({"hidden_size": "32"}, "hidden_size is '32'; it must be an integer from 1"),
    ({"num_attention_heads": 5}, "hidden_size 32 is not divisible by num_attention_heads 5"),
    ({"attention_probs_dropout_prob": 1.5}, "attention_probs_dropout_prob is 1.5; it must be a number from 0 below 1"),
])
def test_config_with_wrong_types(tmp_path, tiny_model_dir, config, message):
    directory = model_copy(tmp_path, tiny_model_dir, **config)
    done = command("train.py", "--model", directory, "--out", tmp_path / "run", cwd=tmp_path)
    assert message in error_line(done)


def test_tokenizer_of_another_model(tmp_path, tiny_model_dir):
    import shutil
    directory = tmp_path / "model"
    shutil.copytree(tiny_model_dir, directory)
    from model import Config, Encoder
    config = Config.from_directory(directory)
    Encoder(Config(**{**config.__dict__, "vocab_size": 500})).save_pretrained(directory)  # fewer rows than the tokenizer's ids
    done = command("train.py", "--model", directory, "--out", tmp_path / "run", cwd=tmp_path)
    assert "the tokenizer has 1002 ids but config.json's vocab_size is 500" in error_line(done)
    (directory / "sentencepiece.bpe.model").write_bytes(b"not a model")
    done = command("train.py", "--model", directory, "--out", tmp_path / "run", cwd=tmp_path)
    assert "sentencepiece.bpe.model: not a sentencepiece model" in error_line(done)


def test_truncated_and_foreign_checkpoints(tmp_path, tiny_model_dir):
    common = ["--target-langs", "de", "--method", "zero-shot", "--stop-at", "1"]
    assert train(tmp_path, tiny_model_dir, *common, "--out", tmp_path / "run").returncode == 0
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    whole = checkpoint.read_bytes()
    checkpoint.write_bytes(whole[:len(whole) // 2])
    done = train(tmp_path, tiny_model_dir, *common, "--out", tmp_path / "run", "--resume")
    assert "checkpoint.pt: not a readable checkpoint" in error_line(done) and "truncated" in error_line(done)
    checkpoint.write_bytes(whole)
    done = train(tmp_path, tiny_model_dir, "--target-langs", "de", "--method", "xeroalign", "--out", tmp_path / "run", "--resume")
    assert "belongs to another run (method 'zero-shot' there, 'xeroalign' here)" in error_line(done)
    done = train(tmp_path, tiny_model_dir, "--target-langs", "de,zh", "--method", "zero-shot", "--out", tmp_path / "run", "--resume")
    assert "languages ['en', 'de'] there, ['en', 'de', 'zh'] here" in error_line(done)


# --- faults during training ------------------------------------------------------------------------

def steps_logged(out):
    return [r["step"] for r in map(json.loads, open(out / "log.jsonl")) if "loss" in r]


def test_sigterm_saves_a_checkpoint_and_resume_logs_each_step_once_and_a_second_run_is_refused(tmp_path,
                                                                                                 tiny_model_dir):
    out = tmp_path / "run"
    argv = [sys.executable, str(ROOT / "train.py"), "--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "4",
            "--method", "zero-shot", "--max-steps", "100000", "--eval-every", "100000", "--log-every", "1", "--no-alignment", "--out", str(out)]
    process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.time() + 120
    while time.time() < deadline and not ((out / "log.jsonl").exists() and len(steps_logged(out)) >= 3):
        time.sleep(0.2)
    import train as train_module  # a second run into the folder, even one that would replace the run, is refused
    held = f"--out {out} is in use by another run (process {process.pid} on {socket.gethostname()}; {out / cli.LOCK})"
    with pytest.raises(tasks.InputError, match=re.escape(held + ": wait for it to end")):
        train_module.main(argv[2:] + ["--overwrite", "--max-steps", "2"])  # short, were it not refused
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0 and "Traceback" not in stderr and "SIGTERM: stopping after this step" in stderr
    step = torch.load(out / "checkpoint.pt", weights_only=True)["step"]
    assert stderr.strip().endswith(f"stopped at step {step}; continue with the same command and --resume")
    assert steps_logged(out) == list(range(1, step + 1)) and not (out / cli.LOCK).exists()  # given up at the end
    # a run killed after its checkpoint logged steps the resumed run logs again: they are not kept twice
    with open(out / "log.jsonl", "a") as f:
        f.write(json.dumps({"step": step + 1, "loss": 1.0}) + "\n" + '{"step": ')  # the last line cut by the kill
    done = command("train.py", *argv[2:], "--resume", "--stop-at", step + 2, cwd=tmp_path)
    assert done.returncode == 0 and steps_logged(out) == list(range(1, step + 3))


def test_a_single_process_stops_after_the_step_not_at_the_next_log_record(tmp_path, tiny_model_dir):
    """... also where SIGTERM reaches the whole process group (`timeout`, `kill -- -PGID`): its loader processes too."""
    out = tmp_path / "run"
    argv = [sys.executable, str(ROOT / "train.py"), "--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "4",
            "--method", "zero-shot", "--max-steps", "100000", "--eval-every", "100000", "--log-every", "50000", "--no-alignment",
            "--workers", "2", "--out", str(out)]
    process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=tmp_path, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not ((out / "log.jsonl").exists() and steps_logged(out) == [1]):  # a phase's first step logs
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    step = torch.load(out / "checkpoint.pt", weights_only=True)["step"]
    assert process.returncode == 0 and 1 < step < 50000 and stderr.strip().endswith(f"stopped at step {step}; continue with the "
                                                                                   "same command and --resume")


def test_ctrl_c_during_the_last_evaluation_stops_with_a_checkpoint_and_resume_tests(tmp_path, tiny_model_dir,
                                                                                       monkeypatch):
    import train as train_module
    evaluate_and_save, out = train_module.evaluate_and_save, tmp_path / "run"

    def interrupted(*args):  # Ctrl-C while dev is scored after the last step
        evaluate_and_save(*args)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(train_module, "evaluate_and_save", interrupted)
    argv = ["--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "4", "--max-steps", "2",
            "--no-alignment", "--out", str(out)]
    assert train_module.main(argv) is None and not (out / "results.json").exists()  # stopped: not tested
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 2
    monkeypatch.undo()
    assert train_module.main(argv + ["--resume"]) is not None and "de" in json.loads((out / "results.json").read_text())
    # two processes, the Ctrl-C on process 0 alone: both stop before the test, agreeing
    import torch.multiprocessing as mp
    from conftest import free_port
    argv[-1] = str(tmp_path / "two")
    mp.spawn(interrupted_on_process_0, args=(2, free_port(), argv), nprocs=2)
    assert torch.load(tmp_path / "two" / "checkpoint.pt", weights_only=True)["step"] == 2
    assert not (tmp_path / "two" / "results.json").exists()


def interrupted_on_process_0(rank, world_size, port, argv):
    from conftest import join_process_group_env
    join_process_group_env(rank, world_size, port)
    import train as train_module
    evaluate_and_save = train_module.evaluate_and_save

    def interrupted(*args):
        evaluate_and_save(*args)
        if rank == 0:
            os.kill(os.getpid(), signal.SIGINT)
    train_module.evaluate_and_save = interrupted
    assert train_module.main(argv) is None


def test_ctrl_c_during_the_test_names_the_command_that_tests_the_trained_model(tmp_path, tiny_model_dir, monkeypatch):
    import train as train_module

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "test", interrupted)
    out = tmp_path / "run"
    with pytest.raises(SystemExit, match=re.escape(f"interrupted during the test; test the trained model with python "
                                                   f"evaluate.py --checkpoint {out / 'best'}")):
        train_module.main(["--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "4", "--max-steps",
                           "2", "--no-alignment", "--out", str(out)])
    assert (out / "best" / "task.json").is_file()

    def lost(*args):  # another process died during the test: a collective's error, said in one line
        raise RuntimeError("[gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer")

    from minxlt.parallel import distributed
    monkeypatch.setattr(train_module, "test", lost)
    monkeypatch.setattr(distributed, "lost_process", lambda e: "Connection reset by peer" if "peer" in str(e) else None)
    with pytest.raises(SystemExit, match=re.escape("another process of the run stopped (Connection reset by peer) during "
                                                   "the test; test the trained model with python evaluate.py --checkpoint")):
        train_module.main(["--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "4", "--max-steps",
                           "2", "--no-alignment", "--out", str(out), "--overwrite"])


def test_divergence_stops_with_advice(tmp_path, tiny_model_dir):
    done = train(tmp_path, tiny_model_dir, "--target-langs", "de", "--max-steps", "200", "--eval-every", "10", "--save-every", "10", "--log-every", "1", "--lr", "10",
                 "--out", tmp_path / "run")
    line = error_line(done)
    assert done.returncode == 1 and "the run is diverging; try a lower --lr (now 10.0)" in line
    saved = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["step"]
    assert f"the last checkpoint is {tmp_path / 'run' / 'checkpoint.pt'}, of step {saved}" in line


def test_non_finite_weights_are_refused_when_loaded_naming_file_and_tensor(tmp_path, tiny_model_dir):
    from minxlt.checkpoints.weights import load_safetensors, save_safetensors
    from model import Encoder
    directory = model_copy(tmp_path, tiny_model_dir)
    encoder = Encoder.from_pretrained(directory)
    with torch.no_grad():
        encoder.layers[0].ffn_out.weight[0, :2] = float("nan")
        encoder.layers[0].ffn_out.weight[1, 0] = float("inf")
    encoder.save_pretrained(directory)
    done = train(tmp_path, directory, "--target-langs", "de", "--out", tmp_path / "run")
    assert error_line(done) == (f"error: {directory / 'model.safetensors'}: tensor encoder.layer.0.output.dense.weight is not finite "
                                "(2 NaN, 1 infinite of 1184 values): the file is damaged or was saved from a diverged run; use another checkpoint")
    assert not (tmp_path / "run" / "checkpoint.pt").exists()
    done = train(tmp_path, tiny_model_dir, "--target-langs", "de", "--out", tmp_path / "good")  # a trained model's head
    head = load_safetensors(tmp_path / "good" / "best" / "head.safetensors")
    name = sorted(head)[0]
    head[name] = head[name].clone().fill_(float("-inf"))
    save_safetensors(head, tmp_path / "good" / "best" / "head.safetensors")
    line = error_line(command("evaluate.py", "--checkpoint", tmp_path / "good" / "best"))
    assert f"{tmp_path / 'good' / 'best' / 'head.safetensors'}: tensor {name} is not finite (0 NaN, " in line


def test_a_resume_keeps_the_best_model_the_stopped_run_wrote_after_its_checkpoint(tmp_path, tiny_model_dir):
    """A run killed after step 3's best model, its checkpoint of step 2: the resumed run's table is of OUT/best, named
    by its step and dev score, unless an evaluation beats it."""
    import train as train_module
    out = tmp_path / "run"
    argv = ["--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "4", "--max-steps", "4",
            "--eval-every", "1", "--save-every", "2", "--no-alignment", "--out", str(out)]
    train_module.main(argv + ["--stop-at", "2"])
    info = json.loads((out / "best" / "task.json").read_text())
    metric = next(key for key, value in info.items() if key.startswith("dev_") and isinstance(value, (int, float)))
    (out / "best" / "task.json").write_text(json.dumps(dict(info, step=3, **{metric: 2.0})))  # as step 3 left it
    train_module.main(argv + ["--resume"])
    results = json.loads((out / "results.json").read_text())
    assert results["best_step"] == 3 and results[metric] == 2.0  # no evaluation beats 2.0: OUT/best is step 3's
    assert json.loads((out / "best" / "task.json").read_text())["step"] == 3
    # with --patience: the evaluations of the steps the resumed run does again (up to the kept best) are not stale,
    # so it stops where the run that was not stopped does
    argv = ["--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "4", "--max-steps", "8",
            "--patience", "2", "--eval-every", "1", "--save-every", "2", "--no-alignment", "--dropout", "0", "--lr",
            "3e-3", "--task", "demo-slots"]
    dev = lambda out: [r["step"] for r in map(json.loads, open(out / "log.jsonl")) if any(k.startswith("dev_") for k in r)]
    train_module.main(argv + ["--out", str(tmp_path / "whole")])
    whole = json.loads((tmp_path / "whole" / "results.json").read_text())
    train_module.main(argv + ["--out", str(out), "--overwrite", "--stop-at", "4"])
    info = json.loads((out / "best" / "task.json").read_text())
    metric = next(key for key, value in info.items() if key.startswith("dev_") and isinstance(value, (int, float)))
    assert whole["best_step"] > 4  # the best came after the checkpoint: as a run killed after it left OUT/best
    (out / "best" / "task.json").write_text(json.dumps(dict(info, step=whole["best_step"], **{metric: whole[metric]})))
    train_module.main(argv + ["--out", str(out), "--resume"])
    assert dev(out) == dev(tmp_path / "whole") and json.loads((out / "results.json").read_text())["best_step"] == whole[
        "best_step"]


def test_a_resume_checkpoint_with_non_finite_weights_is_refused(tmp_path, tiny_model_dir):
    out = tmp_path / "run"
    train(tmp_path, tiny_model_dir, "--target-langs", "de", "--out", out, "--max-steps", "4", "--stop-at", "2")
    saved = torch.load(out / "checkpoint.pt", weights_only=True)
    name = next(k for k, v in saved["model"].items() if v.is_floating_point())
    saved["model"][name][..., 0] = float("nan")
    torch.save(saved, out / "checkpoint.pt")
    line = error_line(train(tmp_path, tiny_model_dir, "--target-langs", "de", "--out", out, "--max-steps", "4", "--resume"))
    assert line.startswith(f"error: {out / 'checkpoint.pt'}: tensor {name} is not finite (")


def test_failed_checkpoint_write_keeps_the_previous_one(tmp_path, tiny_model_dir, monkeypatch):
    import train as train_module
    argv = ["--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "4", "--method", "zero-shot", "--max-steps", "4",
            "--eval-every", "2", "--save-every", "2", "--no-alignment", "--no-test", "--out", str(tmp_path / "run")]
    saves = []

    def full_disk(obj, path):  # the second checkpoint meets a full disk halfway
        saves.append(path)
        if len(saves) == 2:
            open(path, "wb").write(b"half")
            raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")
        return real_save(obj, path)
    real_save = torch.save
    monkeypatch.setattr(train_module.torch, "save", full_disk)
    with pytest.raises(OSError, match="writing the checkpoint failed .*; the checkpoint of step 2 is whole. Is the disk "
                                      "full. Free some space and continue with --resume"):
        train_module.main(argv)
    assert torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["step"] == 2
    assert not (tmp_path / "run" / "checkpoint.pt.tmp").exists()
    saves.clear()
    saves.append("a first checkpoint, made to fail")  # the first write fails: nothing to resume
    with pytest.raises(OSError, match="; no checkpoint is kept. Is the disk full. Free some space and start again "
                                      "with --overwrite"):
        train_module.main(argv + ["--overwrite"])
    # two processes: process 1, which writes nothing, stops with process 0's failure, never naming the checkpoint
    # that was not written
    import torch.multiprocessing as mp
    from conftest import free_port
    mp.spawn(full_disk_on_process_0, args=(2, free_port(), argv[:-1] + [str(tmp_path / "two")], tmp_path), nprocs=2)
    said = [(tmp_path / f"rank{rank}.txt").read_text() for rank in (0, 1)]
    assert all("writing the checkpoint failed (" in line and "the checkpoint of step 2 is whole" in line for line in said)


def full_disk_on_process_0(rank, world_size, port, argv, folder):
    from conftest import join_process_group_env
    join_process_group_env(rank, world_size, port)
    import train as train_module
    real_save, saves = torch.save, []

    def full_disk(obj, path, **options):  # process 0's second checkpoint meets a full disk
        saves.extend([path] if str(path).endswith("checkpoint.pt.tmp") else [])
        if rank == 0 and len(saves) == 2:
            raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")
        return real_save(obj, path, **options)
    train_module.torch.save = full_disk
    try:
        train_module.main(argv)
    except OSError as e:
        (folder / f"rank{rank}.txt").write_text(str(e))


# --- output folders --------------------------------------------------------------------------------

def test_a_fresh_run_never_deletes_another_runs_results(tmp_path, tiny_model_dir):
    out = tmp_path / "run"
    write(out / "results.json", '{"en": {"accuracy": 0.9}}')
    write(out / "best" / "task.json", "{}")
    done = train(tmp_path, tiny_model_dir, "--target-langs", "de", "--out", out)
    assert "holds a run (results.json, best): replace it with --overwrite, or choose" in error_line(done)  # no --resume
    done = train(tmp_path, tiny_model_dir, "--target-langs", "de", "--out", out, "--resume")  # which has no checkpoint
    assert "not found, nor a sharded run's checkpoint/; " in error_line(done) and error_line(done).endswith(
        "holds a run without one (results.json, best): replace it with --overwrite, or choose another --out")
    assert (out / "results.json").read_text() == '{"en": {"accuracy": 0.9}}' and (out / "best" / "task.json").exists()
    write(out / "predictions" / "zh.jsonl", "{}")  # the replaced run's, of a language this one does not test
    done = train(tmp_path, tiny_model_dir, "--target-langs", "de", "--out", out, "--overwrite")
    assert done.returncode == 0 and json.loads((out / "results.json").read_text())["best_step"] == 2
    assert sorted(p.name for p in (out / "predictions").iterdir()) == ["de.jsonl", "en.jsonl"]


@pytest.mark.parametrize("make,message", [
    (lambda tmp: write(tmp / "out.txt", "a file"), "out.txt: a file, not a folder"),
    (lambda tmp: write(tmp / "file", "x") / "run", "cannot be written to"),
])
def test_output_folder_that_cannot_hold_a_run(tmp_path, tiny_model_dir, make, message):
    done = train(tmp_path, tiny_model_dir, "--out", make(tmp_path))
    assert message in error_line(done) and "on demo" not in done.stderr  # refused before any training


def test_resuming_a_finished_run_with_another_method(tmp_path, tiny_model_dir):
    assert train(tmp_path, tiny_model_dir, "--target-langs", "de", "--method", "zero-shot", "--save-every", "2",
                 "--out", tmp_path / "run").returncode == 0
    before = (tmp_path / "run" / "results.json").read_text()
    done = train(tmp_path, tiny_model_dir, "--target-langs", "de", "--method", "filter", "--out", tmp_path / "run", "--resume")
    assert "belongs to another run (method 'zero-shot' there, 'filter' here)" in error_line(done)
    assert (tmp_path / "run" / "results.json").read_text() == before
    done = train(tmp_path, tiny_model_dir, "--target-langs", "de", "--method", "zero-shot", "--save-every", "2",
                 "--out", tmp_path / "run", "--resume")  # a finished run is not trained again
    assert "run holds a run that finished (results.json): --resume continues a stopped one" in error_line(done)
    assert (tmp_path / "run" / "results.json").read_text() == before


def test_a_dead_run_s_lock_is_taken_over_and_another_host_s_is_refused_with_the_way_out(tmp_path):
    out, here = tmp_path / "run", socket.gethostname()
    out.mkdir()
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (out / cli.LOCK).write_text(f"{here} {ended.stdout.strip()}")  # as a killed run leaves it: its process is gone
    assert cli.output_folder(out) == out and (out / cli.LOCK).read_text() == f"{here} {os.getpid()}"  # taken over
    cli.release(out)
    assert not (out / cli.LOCK).exists()
    (out / cli.LOCK).write_text("gpu-node-7 12345")  # another host's process cannot be asked
    lock = out / cli.LOCK
    with pytest.raises(tasks.InputError) as refused:
        cli.output_folder(out)
    assert str(refused.value) == (f"--out {out} is in use by another run (process 12345 on gpu-node-7; {lock}): wait "
                                  f"for it to end, or choose another --out; if that process no longer runs, delete {lock}")


def test_a_model_of_another_task_is_refused_before_predicting_naming_both_label_sets(tmp_path, tiny_model_dir):
    import evaluate
    import train as train_module
    best = tmp_path / "run" / "best"
    train_module.main(["--model", str(tiny_model_dir), "--target-langs", "de", "--method", "zero-shot", "--batch-size",
                       "4", "--max-steps", "1", "--no-alignment", "--no-test", "--out", str(tmp_path / "run")])
    intents = json.loads((best / "task.json").read_text())["labels"]
    with pytest.raises(tasks.InputError) as refused:
        evaluate.main(["--checkpoint", str(best), "--task", "sib200", "--data", str(sib200(tmp_path / "sib")),
                       "--source-lang", "eng_Latn", "--target-langs", "deu_Latn"])
    said, topics = str(refused.value), ", ".join(tasks.SIB200_LABELS)
    assert said.startswith(f"{best}: its head predicts the labels [{', '.join(intents[:12])}")
    assert f"] ({len(intents)}) (task.json: task demo), and task sib200 has [{topics}] (7)" in said
    assert not (tmp_path / "run" / "results_test.json").exists()


def children(pid):
    """The processes whose parent is `pid` (Linux)."""
    found = []
    for path in Path("/proc").iterdir():
        try:
            if path.name.isdigit() and int((path / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(path.name))
        except OSError:  # a process that ended meanwhile
            pass
    return found


def test_a_process_killed_under_torchrun_stops_the_others_naming_the_last_checkpoint(tmp_path, tiny_model_dir):
    from conftest import free_port
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
            str(ROOT / "train.py"), "--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "4",
            "--method", "zero-shot", "--max-steps", "100000", "--eval-every", "100000", "--log-every", "1",
            "--save-every", "2", "--no-alignment", "--device", "cpu", "--out", str(out)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    deadline = time.time() + 180
    while time.time() < deadline and not ((out / "checkpoint.pt").exists() and len(steps_logged(out)) >= 3):
        time.sleep(0.2)
    rank0 = int((out / cli.LOCK).read_text().split()[1])  # process 0 holds OUT
    os.kill(next(pid for pid in children(run.pid) if pid != rank0), signal.SIGKILL)  # process 1
    _, stderr = run.communicate(timeout=180)
    step = torch.load(out / "checkpoint.pt", weights_only=True)["step"]
    assert run.returncode != 0 and "please report it" not in stderr and "by peer. This" not in stderr
    checkpoint = re.escape(str(out / "checkpoint.pt"))
    assert re.search(r"error: step \d+: another process of the run stopped \(Connection (closed|reset) by peer\), "
                     f"and this one cannot go on without it; the last checkpoint is {checkpoint}, of step {step}: "
                     r"the same command with --resume continues from it", stderr), stderr[-3000:]


def test_the_survivor_of_a_lost_process_ignores_torchruns_sigterm_until_it_has_said_why(monkeypatch):
    """torchrun SIGTERMs the other processes as soon as one dies; the one that met the closed connection must live
    to print its line (CI once saw it killed between leaving the loop and printing)."""
    from types import SimpleNamespace
    from minxlt.parallel import distributed
    from minxlt.run import bookkeeping
    monkeypatch.setattr(distributed, "lost_process", lambda error: "Connection closed by peer" if error else None)
    book = SimpleNamespace(step=7, last_checkpoint=lambda: "the last checkpoint is c.pt, of step 6")
    before = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(ConnectionError, match=r"step 7: another process of the run stopped \(Connection closed"):
            with bookkeeping.Book.stop_requests(book):
                assert signal.getsignal(signal.SIGTERM) not in (before, signal.SIG_IGN)
                raise RuntimeError("gloo")
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)
    with bookkeeping.Book.stop_requests(book):  # a run that ends well gives the handlers back
        pass
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_sharded_checkpoint_in_place_is_named_though_a_process_is_lost_before_all_agree(tmp_path, monkeypatch):
    """Process 0 puts OUT/checkpoint/ in place, then the gather of everyone's errors meets a lost process: the
    message it then gives names that checkpoint's step, not the one before (the window CI found for checkpoint.pt)."""
    from concurrent.futures import Future
    from types import SimpleNamespace
    from minxlt.parallel import distributed
    from minxlt.run import bookkeeping

    def lost(problem):
        raise RuntimeError("Connection closed by peer")
    monkeypatch.setattr(distributed, "first_error", lost)
    written = Future()
    written.set_result(None)
    (tmp_path / "checkpoint.tmp").mkdir()
    book = SimpleNamespace(writing=(written, b"state", 4), out=tmp_path, run=SimpleNamespace(rank=0),
                           state=SimpleNamespace(saved_step=2), checkpoint_done=None)
    with pytest.raises(RuntimeError, match="by peer"):
        bookkeeping.Book.finish_checkpoint(book)
    assert (tmp_path / "checkpoint" / "state.pt").read_bytes() == b"state" and book.state.saved_step == 4


def test_a_resume_over_changed_training_data_is_refused_naming_the_files(tmp_path, tiny_model_dir, capsys):
    import train as train_module
    from minxlt.checkpoints.weights import CheckpointError
    data, out = sib200(tmp_path / "sib"), tmp_path / "run"
    argv = ["--model", str(tiny_model_dir), "--task", "sib200", "--data", str(data), "--method", "translate-train",
            "--batch-size", "4", "--max-steps", "4", "--log-every", "1", "--no-alignment", "--no-test", "--out",
            str(out)]
    train_module.main(argv + ["--stop-at", "2"])
    swapped = {"\tsports\t": "\thealth\t", "\thealth\t": "\tsports\t"}
    for lang in ("eng_Latn", "deu_Latn"):  # every training label edited, in both files alike (they still pair)
        path = data / lang / "train.tsv"
        path.write_text(re.sub("\t(sports|health)\t", lambda m: swapped[m.group()], path.read_text()))
    with pytest.raises(CheckpointError, match=r"belongs to another run \(lr 5e-05 there, 0.001 here; seed 0 there, "
                                              r"7 here\): resume with that run's settings"):  # --lr was not applied
        train_module.main(argv + ["--resume", "--lr", "1e-3", "--seed", "7", "--workers", "1"])
    with pytest.raises(CheckpointError, match=r"belongs to another run \(clip_value 0.0 there, 1.0 here; amp 'none' "
                                              r"there, 'bf16' here\)"):  # X-Mixup's clipping, the precision
        train_module.main(argv + ["--resume", "--clip-value", "1", "--amp", "bf16"])
    with pytest.raises(CheckpointError) as refused:
        train_module.main(argv + ["--resume"])
    german, english = (data.resolve() / lang / "train.tsv" for lang in ("deu_Latn", "eng_Latn"))
    assert str(refused.value) == (f"{out / 'checkpoint.pt'}: the files the run reads are not those it was trained on: "
                                  f"{german} (changed), {english} (changed); a resumed run would not continue the same "
                                  "run: start afresh with --overwrite, or continue knowingly with --resume-changed")
    capsys.readouterr()
    train_module.main(argv + ["--resume", "--resume-changed"])
    assert "note: --resume-changed: continuing over files changed since the checkpoint: " in capsys.readouterr().err
    assert steps_logged(out) == [1, 2, 3, 4]


def test_a_resume_over_a_changed_squad_beside_the_data_folder_is_refused(tmp_path, tiny_model_dir):
    """xquad-squad trains on SQuAD v1.1 in <data>/../squad, outside --data: its files are in the checkpoint's record."""
    import train as train_module
    from minxlt.checkpoints.weights import CheckpointError
    from test_xtreme import released_xquad
    data, out = released_xquad(tmp_path), tmp_path / "run"
    argv = ["--model", str(tiny_model_dir), "--task", "xquad-squad", "--data", str(data), "--method", "zero-shot",
            "--target-langs", "de", "--batch-size", "4", "--max-steps", "3", "--max-length", "64", "--doc-stride", "16",
            "--eval-every", "3", "--no-alignment", "--no-test", "--out", str(out)]
    train_module.main(argv + ["--stop-at", "1"])
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=False)  # as a run before the record held SQuAD's
    del checkpoint["files_beside"]
    files = {name: value for name, value in checkpoint["files"].items() if "squad" not in name}
    torch.save(dict(checkpoint, files=files), out / "checkpoint.pt")
    assert train_module.main(argv + ["--resume", "--stop-at", "2"]) is None  # resumed
    squad = tmp_path / "squad" / "train-v1.1.json"
    squad.write_text(squad.read_text().replace("Normandy 0", "Normandy 9"))  # an answer and its context, edited alike
    with pytest.raises(CheckpointError, match=re.escape(f"trained on: {squad.resolve()} (changed); a resumed run")):
        train_module.main(argv + ["--resume"])


def test_an_experiment_file_that_gives_a_key_twice_is_refused_naming_the_line(tmp_path):
    from minxlt.experiments import spec
    text = (ROOT / "experiments" / "sib-200.json").read_text(encoding="utf-8")
    number = text[:text.index('"seeds":')].count("\n") + 1
    path = write(tmp_path / "sib-200.json", text.replace('"seeds":', '"seeds": [7],\n  "seeds":', 1))
    with pytest.raises(tasks.InputError) as refused:
        spec.load_experiment(path)
    assert str(refused.value) == (f"{path}:{number + 1}: key 'seeds' given twice in one object (JSON would keep the "
                                  "last without a word): give it once")


# --- arguments -------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["--batch-size", "0"], "argument --batch-size: 0 is not in [1, inf]"),
    (["--max-steps", "-5"], "argument --max-steps: -5 is not in [1, inf]"),
    (["--lr", "0"], "argument --lr: 0 is not in (0, inf]"),
    (["--lr", "nan"], "argument --lr: 'nan' is not a finite number"),
    (["--warmup", "1.5"], "argument --warmup: 1.5 is not in [0, 1)"),
    (["--train-fraction", "0"], "argument --train-fraction: 0 is not in (0, 1]"),
    (["--eval-every", "0"], "argument --eval-every: 0 is not in [1, inf]"),
    (["--batch-size", "8", "--grad-accum", "16"], "--batch-size 8 must be a multiple of --grad-accum 16"),
    (["--max-length", "3"], "argument --max-length: 3 is not in [8, inf]"),
    (["--method", "mixup"], "argument --method: invalid choice: 'mixup'"),
    (["--teacher", "no-teacher", "--method", "filter"], "argument --teacher: no-teacher: no such directory"),
    (["--resume", "--overwrite"], "--resume continues the run in --out and --overwrite replaces it"),
    (["--device", "gpu"], "argument --device: 'gpu': give cpu, cuda or cuda:N"),
])
def test_impossible_arguments_are_refused_by_the_parser(tmp_path, args, message):
    done = command("train.py", *args, cwd=tmp_path)
    assert done.returncode == 2 and message in error_line(done)


@pytest.mark.parametrize("args,message", [
    (["--task", "sib300"], "unknown task 'sib300'"),
    (["--target-langs", "de,xx"], "task demo has no language(s) xx"),
    (["--method", "filter", "--filter-m", "2", "--filter-k", "1"], "FILTER needs m + k <= 2, the encoder's layers"),
    (["--method", "xmixup", "--mixup-layer", "3"], "--mixup-layer 3 is not one of the encoder's layers 1..2"),
    (["--method", "contrastive", "--sa-steps", "3"], "--sa-steps 3 is more than --max-steps 2"),
    (["--max-length", "200"], "--max-length 200 does not fit the model's 128 positions"),
    (["--extra-train", "missing.jsonl"], "--extra-train missing.jsonl: no such file"),
    (["--data", "no/such/folder", "--task", "sib200"], "--data no/such/folder: no such folder; make it with python"),
])
def test_arguments_that_do_not_fit_the_task_or_model_stop_before_training(tmp_path, tiny_model_dir, args, message):
    done = train(tmp_path, tiny_model_dir, *args, "--out", tmp_path / "run")
    assert message in error_line(done) and " on demo" not in done.stderr  # no progress bar: the model never trained


def test_the_project_s_own_bug_shows_its_traceback_and_bad_input_one_line():
    with pytest.raises(KeyError):  # not foreseen: the project's bug, whose traceback says where
        cli.run(lambda: {}["missing"])

    def refused():
        raise tasks.InputError("--data x: no such folder")
    with pytest.raises(SystemExit) as stop:
        cli.run(refused)
    assert stop.value.code == "error: --data x: no such folder"

    def full():
        raise OSError(28, "No space left on device", "OUT/checkpoint.pt")
    with pytest.raises(SystemExit) as stop:
        cli.run(full)
    assert stop.value.code.startswith("error: no space left on the device writing OUT/checkpoint.pt")


def test_a_language_named_twice_is_refused():
    import argparse
    assert cli.languages(" de, zh ") == ["de", "zh"]
    with pytest.raises(argparse.ArgumentTypeError, match="'de,zh,de' names de more than once"):
        cli.languages("de,zh,de")


# --- data that does not line up across files (copies of real SIB-200, xSID and UD PUD) -----------

from conftest import SHARED_DATA  # noqa: E402

needs_shared = pytest.mark.skipif(not (SHARED_DATA / "sib200").is_dir(), reason="needs ../shared/data (copies of real data)")


def sib200_copy(tmp_path, langs=("eng_Latn", "deu_Latn")):
    import shutil
    for lang in langs:
        shutil.copytree(SHARED_DATA / "sib200" / lang, tmp_path / "sib200" / lang)
    return tmp_path / "sib200"


def xsid_copy(tmp_path):
    import shutil
    (tmp_path / "xsid").mkdir()
    for name in ("en.valid.conll", "en.test.conll", "de.valid.conll", "de.test.conll"):
        shutil.copy(SHARED_DATA / "xsid" / name, tmp_path / "xsid" / name)


def edit_line(path, number, change):
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[number - 1] = change(lines[number - 1])
    path.write_text("\n".join(lines), encoding="utf-8")
    return lines


def sib_train(tmp_path, tiny_model_dir, data, *args):
    return train(tmp_path, tiny_model_dir, "--task", "sib200", "--data", data, "--method", "translate-train", "--out", tmp_path / "run", *args)


@needs_shared
def test_an_id_used_twice_in_one_file_is_refused_with_both_lines(tmp_path, tiny_model_dir):
    data = sib200_copy(tmp_path)
    path = data / "deu_Latn" / "train.tsv"
    lines = path.read_text(encoding="utf-8").split("\n")
    first = lines[1].split("\t")[0]
    edit_line(path, 6, lambda line: "\t".join([first] + line.split("\t")[1:]))
    assert error_line(sib_train(tmp_path, tiny_model_dir, data)) == (
        f"error: {path}:6: index_id '{first}' is used twice in the file, on lines 2 and 6: give each example its own "
        "(translations are paired and predictions keyed by it)")
    test = data / "eng_Latn" / "test.tsv"
    edit_line(test, 9, lambda line: "\t".join([test.read_text().split("\n")[2].split("\t")[0]] + line.split("\t")[1:]))
    assert error_line(sib_train(tmp_path, tiny_model_dir, data)).startswith(f"error: {test}:9: index_id ")  # predictions are keyed by it


@needs_shared
def test_a_translation_labelled_otherwise_than_its_source_is_refused_with_both_lines(tmp_path, tiny_model_dir):
    data = sib200_copy(tmp_path)
    path = data / "deu_Latn" / "train.tsv"
    lines = path.read_text(encoding="utf-8").split("\n")
    id, label = lines[4].split("\t")[:2]
    other = "travel" if label != "travel" else "health"
    edit_line(path, 5, lambda line: "\t".join([id, other] + line.split("\t")[2:]))
    english = [n for n, line in enumerate((data / "eng_Latn" / "train.tsv").read_text().split("\n"), 1) if line.startswith(id + "\t")][0]
    assert error_line(sib_train(tmp_path, tiny_model_dir, data)) == (
        f"error: {path}:5: the translation of '{id}' is labelled '{other}', and its source ({data / 'eng_Latn' / 'train.tsv'}:"
        f"{english}) '{label}': a translation keeps its source's label")


@needs_shared
def test_translations_that_do_not_pair_are_said_once_and_refused_when_strict_or_mostly_unpaired(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("MINXLT_CACHE", str(tmp_path / "cache"))  # files are checked as they are read, before the token cache holds them
    data = sib200_copy(tmp_path)
    path = data / "deu_Latn" / "train.tsv"
    lines = path.read_text(encoding="utf-8").split("\n")
    missing = [line.split("\t")[0] for line in lines[10:13]]
    path.write_text("\n".join(lines[:10] + lines[13:]).replace(lines[20].split("\t")[0] + "\t", "9999\t", 1), encoding="utf-8")
    done = sib_train(tmp_path, tiny_model_dir, data)
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    order = [line.split("\t")[0] for line in (data / "eng_Latn" / "train.tsv").read_text(encoding="utf-8").split("\n")[1:]]
    untranslated = sorted(missing + [lines[20].split("\t")[0]], key=order.index)
    assert warning == [f"warning: {path}: 1 of its 698 examples have no source example of the same id (first: '9999'): they are left "
                       f"out; 4 of the 701 source examples have no translation in it (first: {', '.join(map(repr, untranslated))}) "
                       "(--strict-data refuses this)"]
    line = error_line(sib_train(tmp_path, tiny_model_dir, data, "--strict-data", "--overwrite"))
    assert line.startswith(f"error: {path} does not pair with the source's training examples by id: 1 of its 698 examples")
    body = "\n".join([lines[0]] + [f"x{n}\t{line.split(chr(9), 1)[1]}" for n, line in enumerate(lines[1:]) if line])
    path.write_text(body + "\n", encoding="utf-8")  # another data set's ids: nothing pairs
    line = error_line(sib_train(tmp_path, tiny_model_dir, data, "--overwrite"))
    assert line.endswith("most of it does not pair, so it is refused: check that it is this task's translation")


@needs_shared
def test_an_empty_split_names_its_file(tmp_path, tiny_model_dir):
    data = sib200_copy(tmp_path)
    dev = data / "eng_Latn" / "dev.tsv"
    whole = dev.read_text(encoding="utf-8")
    dev.write_text(whole.split("\n")[0] + "\n", encoding="utf-8")
    assert error_line(sib_train(tmp_path, tiny_model_dir, data)) == (
        f"error: task sib200: no dev examples in eng_Latn (read from {dev}); check the file, or leave the language out of "
        "--source-lang/--target-langs")
    (data / "deu_Latn" / "train.tsv").write_text(dev.read_text(encoding="utf-8"), encoding="utf-8")  # a header alone
    dev.write_text(whole, encoding="utf-8")
    line = error_line(sib_train(tmp_path, tiny_model_dir, data, "--target-langs", "deu_Latn"))
    assert "deu_Latn" in line and str(data / "deu_Latn" / "train.tsv") in line


@needs_shared
def test_conll_sentences_named_by_id_give_their_line(tmp_path, tiny_model_dir):
    xsid_copy(tmp_path)
    path = tmp_path / "xsid" / "de.test.conll"
    lines = path.read_text(encoding="utf-8").split("\n")
    number = [n for n, line in enumerate(lines, 1) if line.startswith("# id")][5]
    id = lines[number - 1].split("=", 1)[1].strip()
    lines[number] = "# text-en = a sentence the English file does not have"
    path.write_text("\n".join(lines), encoding="utf-8")
    line = error_line(train(tmp_path, tiny_model_dir, "--task", "xsid", "--data", tmp_path / "xsid", "--method", "zero-shot",
                            "--out", tmp_path / "run"))
    assert line == (f"error: {path}:{number}: sentence '# id = {id}': its '# text-en' 'a sentence the English file does not have' "
                    "is no English sentence left unpaired")


@needs_shared
def test_an_i_tag_that_starts_a_span_is_said_with_its_line_and_read_as_conlleval_reads_it(tmp_path, tiny_model_dir):
    xsid_copy(tmp_path)
    path = tmp_path / "xsid" / "de.test.conll"
    lines = path.read_text(encoding="utf-8").split("\n")
    number = next(n for n, line in enumerate(lines, 1) if line.count("\t") == 3 and line.split("\t")[3].startswith("B-")
                  and lines[n - 2].split("\t")[-1] == "O")  # a B- after O
    tag = lines[number - 1].split("\t")[3]
    lines[number - 1] = lines[number - 1].replace("\tB-", "\tI-")
    path.write_text("\n".join(lines), encoding="utf-8")
    done = train(tmp_path, tiny_model_dir, "--task", "xsid", "--data", tmp_path / "xsid", "--method", "zero-shot", "--out", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    assert f"warning: {path}:{number}: I-{tag[2:]} follows O: read as the start of a span ({tag}), as conlleval reads it; " \
           f"1 such tag in the file, on lines {number}" in done.stderr
    german = tasks.read_xsid(path, "de")
    assert tag in [t for e in german for t in e.tags] and not any(
        t.startswith("I-") and (i == 0 or e.tags[i - 1][2:] != t[2:]) for e in german for i, t in enumerate(e.tags))


def test_divergence_fires_on_a_loss_that_explodes_and_stays_finite_never_on_healthy_curves():
    import math as m
    from types import SimpleNamespace

    from minxlt.run.bookkeeping import Book

    def rule():  # Book's rule alone, for a run logged every 10 steps: a window of 2 records (20 steps)
        return SimpleNamespace(settings=SimpleNamespace(log_every=10), loss_phase=None)

    def first_alarm(losses, phases=None):
        book = rule()
        return next((i for i, (phase, loss) in enumerate(zip(phases or ["train"] * len(losses), losses))
                     if Book.divergence(book, phase, loss)), None)
    exploding = [2.0, 2.1, 9.0, 60.0, 180.0, 350.0, 340.0, 352.0]  # about 2 to about 350, finite
    assert first_alarm(exploding) == 3
    healthy = [2.0 * m.exp(-i / 8) + 0.05 * m.sin(i) + 0.1 for i in range(60)]  # falling, noisy
    assert first_alarm(healthy) is None
    spiky = [2.0, 1.5, 1.2, 6.0, 1.0, 0.9, 5.5, 0.8, 0.7]  # single spikes of a healthy run average out
    assert first_alarm(spiky) is None
    # a new phase (contrastive's semantic alignment, Unicoder's tasks) starts its own reference
    phased = [1.9, 1.2, 0.6, 0.3, 0.2] + [4.5, 4.0, 3.8, 3.5]
    assert first_alarm(phased, ["la"] * 5 + ["sa"] * 4) is None
    book = rule()
    for loss in exploding[:5]:
        problem = Book.divergence(book, "t", loss)
    assert problem == "the loss has averaged 120 over the last 20 steps, against 2 at the start"
