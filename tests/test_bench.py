"""bench_train.py runs end to end on the CPU: every method's row and transformers' baseline on the
same batches, and the ratios it prints; bench/gpu.sh's commands parse."""
import collections
import inspect
import json
import os
import re
import subprocess
import sys

import pytest
import torch

from bench import encoder as bench_encoder
from bench import train_step as bench_train
from minxlt.run import compiled, flags
from model import Config


def test_bench_train_prints_each_method_and_the_baseline(tiny_model_dir, capsys):
    pytest.importorskip("transformers")
    bench_train.main(["--model", str(tiny_model_dir), "--methods", "translate-train,xeroalign,filter", "--batch-sizes", "4,8",
                      "--steps", "2", "--warmup", "1", "--max-length", "48", "--target-langs", "de,zh", "--device", "cpu"])
    out = capsys.readouterr().out
    for batch in (4, 8):
        table = out.split(f"batch {batch}\n")[1].split("\n\n")[0]
        rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in table.splitlines() if re.match(r"\| [a-z]", line)}
        assert set(rows) == {"method", "translate-train", "xeroalign", "filter", "transformers"}
        assert rows["translate-train"][-1] == "1.00 |" and float(rows["xeroalign"][-1][:-2]) > 0
        texts = float(rows["xeroalign"][3]) * float(rows["xeroalign"][2])  # texts per pipelined step: a pair is two
        assert texts == pytest.approx(2 * batch, rel=0.02) and float(rows["xeroalign"][1]) > 0  # and the synced step's time
    assert re.search(r"translate-train: \d+\.\d\dx the texts/s of transformers' classifier padded to --max-length", out)


def test_bench_train_compiles_as_train_py_and_fixes_the_length(tiny_model_dir, capsys, monkeypatch):
    monkeypatch.setattr(compiled, "BACKEND", "eager")  # dynamo's graph, run as it is: no code to generate on the CPU
    made = []
    monkeypatch.setattr(bench_train.Trainee, "batch", lambda self, pairs, step, batch=bench_train.Trainee.batch: made.append(
        batch(self, pairs, step)) or made[-1])
    stepped = []
    monkeypatch.setattr(bench_train.Trainee, "step", lambda self, batch, eager=False, step=bench_train.Trainee.step: stepped.append(
        batch) or step(self, batch, eager))
    try:
        bench_train.main(["--model", str(tiny_model_dir), "--methods", "xeroalign", "--batch-sizes", "4", "--steps", "2", "--warmup", "1",
                          "--max-length", "32", "--target-langs", "de", "--device", "cpu", "--no-baseline", "--compile", "--fixed-length"])
    finally:
        torch._dynamo.reset()
    out = capsys.readouterr().out
    assert "compiled: default; length buckets: multiples of 16; every text --max-length tokens" in out
    assert all(batch["input_ids"].shape == (8, 32) and batch["attention_mask"].all() for batch, _, _ in made)  # 32 tokens, no padding
    assert all(tokens == 8 * 32 for _, _, tokens in made)
    # the timed batches (after the 1 warm-up) stepped once before any step: a compiled length's CUDA graph is recorded
    assert [id(batch) for batch in stepped[:3]] == [id(batch) for batch, _, _ in made[1:] + made[:1]]


def test_the_loop_s_time_a_step_leaves_out_compilation_and_evaluations(tmp_path):
    records = [{"step": 10, "loss": 1, "seconds": 60.0}, {"step": 20, "loss": 1, "seconds": 60.5}, {"step": 30, "loss": 1, "seconds": 61.0},
               {"step": 30, "dev_accuracy": {"en": 0.5}}, {"step": 40, "loss": 1, "seconds": 65.0}, {"step": 50, "loss": 1, "seconds": 65.6}]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert bench_train.loop_ms_per_step(tmp_path) == pytest.approx(55.0)  # 50 and 60 ms; not the compiling first, nor 30 -> 40


def test_xlmr_shapes_with_random_weights(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(bench_train.SHAPES, "small", dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                                             intermediate_size=24))
    folder = bench_train.shaped_model(tiny_model_dir, "small", tmp_path)
    config = Config.from_directory(folder)
    assert (config.hidden_size, config.num_layers, config.max_positions) == (16, 1, 514)
    assert (folder / "sentencepiece.bpe.model").exists()


def test_bench_train_runs_the_methods_sharded(tiny_model_dir, capsys):
    from minxlt.parallel import distributed
    try:
        bench_train.main(["--model", str(tiny_model_dir), "--methods", "translate-train,xmixup", "--batch-sizes", "4", "--steps", "2",
                          "--warmup", "1", "--max-length", "48", "--target-langs", "de", "--device", "cpu", "--no-baseline", "--shard"])
    finally:
        distributed.cleanup()  # the group of one that a sharded model needs
    table = capsys.readouterr().out.split("batch 4\n")[1]
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in table.splitlines() if re.match(r"\| [a-z]", line)}
    assert {"translate-train", "xmixup"} <= set(rows) and float(rows["xmixup"][1]) > 0


def test_bench_load_prints_both_loads_and_the_ratio(capsys, monkeypatch):
    from bench import load as bench_load
    monkeypatch.setattr(sys, "argv", ["bench_load.py", "--hidden", "64", "--layers", "2", "--vocab", "2000", "--shard-mb", "1"])
    bench_load.main()
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith(("| float32", "| bfloat16"))]
    assert len(rows) == 2 and all(float(row[-1].rstrip(" |")) > 0 for row in rows)


def test_bench_encoder_times_the_pre_ln_layout_against_transformers(monkeypatch):
    import argparse

    from bench import encoder as bench_encoder
    pytest.importorskip("transformers")
    monkeypatch.setitem(bench_encoder.SHAPES, "tiny-xl", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                              intermediate_size=37, model_type="xlm-roberta-xl"))
    args = argparse.Namespace(device="cpu", amp="none", vocab=100, batch=2, seq=16, steps=1, warmup=0)
    ours, _, _ = bench_encoder.build("ours", "tiny-xl", args)
    theirs, ids, mask = bench_encoder.build("theirs", "tiny-xl", args)
    assert type(theirs).__name__ == "XLMRobertaXLModel" and ours.config.pre_norm
    with torch.no_grad():
        assert torch.allclose(ours.eval()(ids, mask), theirs.eval()(input_ids=ids, attention_mask=mask).last_hidden_state, atol=1e-5)
    assert all(t > 0 for t in bench_encoder.time_steps(args, "tiny-xl").values())


def test_bench_shard_measures_each_phase_within_five_percent_of_the_plan(capsys):
    # what each of 2 processes holds (live tensors) at loading, the step's peak, the test and writing OUT/best, the
    # embeddings in the root unit as training shards them (bench/shard.py --phases measures them as a unit of their own too)
    from bench import shard as bench_shard
    from model import Config
    config = Config(vocab_size=20000, hidden_size=96, num_layers=3, num_heads=4, ffn_size=200)
    figures = bench_shard.phases_table(config, [2], ["bf16"])  # the test phase gathers in float32
    assert {phase for *_, phase in figures} == {"loading", "step", "dev evaluation", "test", "writing OUT/best"}
    for (processes, amp, unit, phase), (measured, planned) in figures.items():
        assert measured == pytest.approx(planned, rel=0.05), (amp, unit, phase)
    assert "| 2 | bf16 | in the root | step |" in capsys.readouterr().out


def test_gpu_sh_gives_each_command_flags_its_parser_takes(tiny_model_dir, tmp_path, monkeypatch):
    """bench/gpu.sh with every part turned on (AUTOTUNE=1 XL=1), its python3 and nvidia-smi replaced by
    stubs that note their arguments: each train.py and bench command parses, its compile flags
    agree (a misspelt flag or --compile-mode without --compile fails here, not minutes into a GPU
    run), and the model it shapes is one bench can make."""
    stubs, calls = tmp_path / "bin", tmp_path / "calls"
    stubs.mkdir()
    (tmp_path / "sib200").mkdir()
    (stubs / "python3").write_text(f'#!/bin/bash\nprintf "%s\\x1f" "$@" >> {calls}\necho >> {calls}\n')
    (stubs / "nvidia-smi").write_text("#!/bin/bash\necho 'NVIDIA H200, 143771 MiB, 570.00'\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "AUTOTUNE": "1", "XL": "1"}
    subprocess.run(["bash", "bench/gpu.sh", str(tiny_model_dir), str(tmp_path / "sib200"), str(tmp_path / "out")], env=env,
                   check=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), capture_output=True)
    runs = [line.split("\x1f")[:-1] for line in calls.read_text().splitlines()]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # --device cuda, as on the GPU's machine
    for argv in runs:
        if argv[0] == "train.py":
            args = flags.parse(argv[1:])
            assert args.device == "cuda" and compiled.problem(args) is None, argv
        elif argv[:2] == ["-m", "bench.train_step"]:
            _, _, given = bench_train.parse(argv[2:])
            assert all(args.device == "cuda" and compiled.problem(args) is None for args in given.values()), argv
        elif argv[:2] == ["-m", "bench.encoder"]:
            bench_encoder.parse(argv[2:])
        elif argv[0] == "-c" and "shaped_model" in argv[1]:
            shape = re.search(r"shaped_model\(sys.argv\[1\], '(\w+)', sys.argv\[2\]\)", argv[1]).group(1)
            assert shape in bench_train.SHAPES and len(argv) == 4, argv
            inspect.signature(bench_train.shaped_model).bind(argv[2], shape, argv[3])
    kinds = collections.Counter(argv[1] if argv[0] == "-m" else argv[0] for argv in runs)
    assert kinds == {"-c": 2, "train.py": 2, "bench.train_step": 13, "bench.encoder": 1}, kinds  # 13: 1 + 2 x 4 + 2 + 2
    compiling = [argv for argv in runs if "--compile" in argv]
    assert any("max-autotune-no-cudagraphs" in argv for argv in compiling) and any("--fixed-length" in argv for argv in compiling)
