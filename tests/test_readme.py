"""The README's route from a clone to a paper's table, run as written on the CPU (a tiny model for the
file's hub id, PAWS-X's archive made small and served from here, one seed, one process for eight
GPUs), and its memory table against the plan train.py --dry-run prints."""
import json
import re
import shlex

import pytest

import download
import reproduce
from conftest import ROOT, variant_of
from minxlt import tasks
from minxlt.experiments import jobs, spec
from minxlt.parallel import memory
from model import Config
from test_download import archive, mirror, put, unpinned  # noqa: F401 - fixtures

README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(title):
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end]


def route():
    """The section's commands, one a line."""
    return section("A paper's table on your GPUs").split("```")[1].strip().splitlines()


def pawsx_archive(pairs=4):
    """x-final.tar.gz as PAWS-X releases it: x-final/<lang>/ with English's train.tsv, the others'
    translated_train.tsv, and every language's dev_2k.tsv and test_2k.tsv (id, sentence1, sentence2, label)."""
    files = {}
    for lang in tasks.PAWSX_LANGS:
        rows = "".join(f"{i}\t{lang} the cat {i} sat\t{lang} {f'the cat {i} sat' if i % 2 else 'a dog ran'}\t{i % 2}\n"
                       for i in range(1, pairs + 1))
        for name in (["train.tsv"] if lang == "en" else ["translated_train.tsv"]) + ["dev_2k.tsv", "test_2k.tsv"]:
            files[f"x-final/{lang}/{name}"] = "id\tsentence1\tsentence2\tlabel\n" + rows
    return archive(files, "tar")


def on_this_machine(path, folder, model):
    """The experiment file as a CPU runs it: the tiny model for its hub id, its first seed alone."""
    experiment = json.loads(path.read_text(encoding="utf-8"))
    experiment.update(model=str(model), seeds=experiment["seeds"][:1])
    seeds = experiment.get("settings", {}).get("seeds")
    if seeds:  # one seed, as the paper and the script have it: no departure to give a reason for
        seeds["run"] = 1
        seeds.pop("departure", None)
    (folder / path.parent.name).mkdir(exist_ok=True)
    (folder / path.parent.name / path.name).write_text(json.dumps(experiment), encoding="utf-8")


def test_the_route_to_a_paper_s_table_runs_as_written(tmp_path, tiny_model_dir, monkeypatch, capsys,
                                                       mirror, unpinned):  # noqa: F811 - fixtures
    install, fetch, dry_run, one_row, every_row, report = route()
    setup = section("Quick start").split("```")[1].strip().splitlines()[0]
    assert install == setup.removesuffix(" && python train.py")  # CI runs it (tests/test_layout.py)
    assert "huggingface_hub" in (ROOT / "requirements.txt").read_text().split()  # each file's model is a hub id
    folder, url, _ = mirror
    put(folder, download.sources("pawsx", None, None)[0].url, pawsx_archive())
    monkeypatch.chdir(tmp_path)
    python = lambda line: [arg if arg != "8" else "1" for arg in shlex.split(line)[2:]]  # one process for 8 GPUs
    assert fetch.startswith("python download.py pawsx ")
    download.main(python(fetch) + ["--mirror", url])

    path = ROOT / python(dry_run)[0]
    model = variant_of(tiny_model_dir, tmp_path / "model", 0, max_positions=514)
    on_this_machine(path, tmp_path, model)
    reproduce.main(python(dry_run))
    planned = capsys.readouterr().out
    assert "Departures" in planned and "cost, every run of every seed" in planned
    assert "train.py --method xeroalign" in planned

    experiment = spec.load_experiment(tmp_path / python(dry_run)[0])
    todo = jobs.jobs(experiment, tmp_path / "runs")
    reproduce.main(python(one_row))
    ran = [job.label for job in todo if jobs.state(job) == "done"]
    assert ran == ["xeroalign seed 1"]  # one row, one seed
    made = todo[[job.label for job in todo].index(ran[0])].results.stat().st_mtime_ns
    reproduce.main(python(every_row))
    assert all(jobs.state(job) == "done" for job in todo)
    assert next(job for job in todo if job.label == ran[0]).results.stat().st_mtime_ns == made  # counted, not run again
    capsys.readouterr()
    reproduce.main(python(report))
    table = capsys.readouterr().out
    assert "**--test-input text: each prediction sees the target text alone.**" in table
    assert all(f"| {run.name} (1 seed) | paper | Δ |" in table for run in experiment.runs)  # each row, its seed counted
    written = (tmp_path / "runs" / path.stem / "table.md").read_text(encoding="utf-8")
    assert written == table.split("written to")[0].rstrip("\n") + "\n"
    misspelt = [arg if arg != "xeroalign" else "xeroalgn" for arg in python(one_row)]
    with pytest.raises(tasks.InputError, match="has no run or seed .xeroalgn.: its runs are zero-shot, translate"):
        reproduce.main(misspelt)


XL = dict(vocab_size=250880, model_type="xlm-roberta-xl")  # XLM-R XL's and XXL's vocabulary, pre-LN layers
SHAPES = {"base": dict(hidden_size=768, num_layers=12, num_heads=12, ffn_size=3072, vocab_size=250002),
          "large": dict(hidden_size=1024, num_layers=24, num_heads=16, ffn_size=4096, vocab_size=250002),
          "XL": dict(hidden_size=2560, num_layers=36, num_heads=32, ffn_size=10240, **XL),
          "XXL": dict(hidden_size=4096, num_layers=48, num_heads=32, ffn_size=16384, **XL)}


def test_the_memory_table_is_the_plan_s():
    # each cell: the largest phase of train.py --dry-run --amp bf16 (one process under DDP; 8 sharded), a teacher's
    # in brackets
    table = section("A paper's table on your GPUs")
    rows = re.findall(r"^\| (base|large|XL|XXL) \| ([\d.]+) B \| (.+) \| (.+) \|$", table, re.M)
    assert [row[0] for row in rows] == list(SHAPES)
    for name, billions, single, sharded in rows:
        config = Config(max_positions=514, **SHAPES[name])
        cells = []
        for processes, mode in ((1, "ddp"), (8, "sharded")):
            plans = [memory.plan(config, processes, "bf16", teacher=taught, eval_bf16=True) for taught in (False, True)]
            peaks = [max(plan["phases"][mode].values()) / memory.GB for plan in plans]
            cells.append(f"{peaks[0]:.1f} GB ({peaks[1]:.1f} GB)")
        assert (billions, single, sharded) == (f"{memory.count_parameters(config)[0] / 1e9:.2f}", *cells), name


def test_the_readme_stays_short():
    assert len(README.encode()) < 15_000  # detail goes to docs/
