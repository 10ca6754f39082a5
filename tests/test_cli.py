"""The errors a person reads at the command line: a mistaken flag shows the error and where the flags
are listed, not the usage block; a missing data folder names the download.py command that makes
it; a run's folder given as --model names its model; under torchrun, one message, once."""
import importlib
import os
import subprocess
import sys

import pytest

import evaluate
import reproduce
import train
from conftest import ROOT
from minxlt.errors import InputError

MISTAKES = {"train": ["--method", "xeroalgn"], "evaluate": ["--split", "train"], "reproduce": ["--nproc-per-node", "0"],
            "download": ["sib200", "--to", "x", "--langs", ""], "cotrain": ["--threshold", "2"]}


@pytest.mark.parametrize("command", MISTAKES)
def test_a_mistaken_flag_shows_the_error_and_where_the_flags_are_listed(command, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [f"{command}.py"])
    module = importlib.import_module(command)
    with pytest.raises(SystemExit) as stop:
        (module.get_args if hasattr(module, "get_args") else module.main)(MISTAKES[command])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "usage:" not in err and err.count("\n") == 1  # one line
    assert err.startswith(f"{command}.py: error: argument ")
    assert err.endswith(f"; python {command}.py --help lists the flags\n")


def test_a_missing_data_folder_names_the_command_that_makes_it(tmp_path, tiny_model_dir):
    missing, model = tmp_path / "data" / "sib200", str(tiny_model_dir)
    made = f"make it with python download.py sib200 --to {missing}"
    with pytest.raises(InputError, match=f"^--data {missing}: no such folder; {made}$"):
        train.main(["--model", model, "--task", "sib200", "--data", str(missing), "--out", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()  # refused before anything is made (or a model fetched)
    with pytest.raises(InputError, match="^task xnli needs --data DIR, its data folder; make it with python "
                                         "download.py xnli --to DIR$"):
        train.main(["--model", model, "--task", "xnli", "--out", str(tmp_path / "run")])
    with pytest.raises(InputError, match=r"python download.py squad --to DIR/../squad$"):  # beside the data folder
        train.main(["--model", model, "--task", "xquad-squad", "--out", str(tmp_path / "run")])
    with pytest.raises(InputError, match=r"--data nowhere: no such folder; make it with python download.py xquad --to "
                                         r"nowhere and python download.py squad --to squad$"):
        evaluate.main(["--model", model, "--alignment-only", "--task", "xquad-squad", "--data", "nowhere"])
    with pytest.raises(InputError, match="--data nowhere: no such folder; docs/data.md says where to get it"):
        evaluate.main(["--model", model, "--alignment-only", "--task", "xsid", "--data", "nowhere"])
    with pytest.raises(InputError, match=f"^--tatoeba {tmp_path}: no pair of files tatoeba.<xxx>-eng.<xxx> and "):
        evaluate.main(["--model", model, "--tatoeba", str(tmp_path)])  # a folder without Tatoeba's files
    (tmp_path / "tatoeba.deu-eng.deu").write_text("Hallo.\n")
    (tmp_path / "tatoeba.deu-eng.eng").write_text("Hello.\n")
    with pytest.raises(InputError, match=r"tatoeba.deu-eng.\* hold 1 pair: CKA and retrieval compare two or more$"):
        evaluate.main(["--model", model, "--tatoeba", str(tmp_path)])
    with pytest.raises(InputError, match=f"^--data {tmp_path}: task demo reads no data folder .*: drop --data$"):
        train.main(["--model", model, "--data", str(tmp_path), "--out", str(tmp_path / "run")])  # nor hashes it
    with pytest.raises(InputError, match=r"xeroalign-pawsx.json: data: 'nowhere': no such folder; make it with python "
                                         r"download.py pawsx --to nowhere \(or give --data DIR\)"):
        reproduce.main([str(ROOT / "experiments" / "xeroalign-pawsx.json"), "--data", "nowhere"])


def test_a_run_s_folder_given_as_model_names_its_model(tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    train.main(["--model", str(tiny_model_dir), "--max-steps", "1", "--batch-size", "8", "--target-langs", "de",
                "--no-alignment", "--out", str(run)])
    with pytest.raises(InputError, match=f"^--model {run}: a run's folder, not a model: give --model {run / 'best'}, "
                                         "the model it kept$"):
        train.main(["--model", str(run), "--out", str(tmp_path / "again")])


def test_under_torchrun_the_error_is_said_once_and_the_run_fails(tmp_path, tiny_model_dir):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(ROOT / "train.py"), "--model", str(tiny_model_dir), "--task", "sib200", "--data",
                           str(tmp_path / "nowhere"), "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300, env=env)
    said = done.stdout + done.stderr
    assert done.returncode != 0 and said.count("no such folder; make it with python download.py sib200") == 1, said
