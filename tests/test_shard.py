"""Sharded training (--shard, shard.py) against DDP on a tiny encoder, on CPU with gloo: every method
at every level it supports, post-LN and pre-LN, logs the same losses; a sharded checkpoint resumes on
another number of processes; OUT/best of a sharded run holds the trained weights; two nodes on
localhost train like one node of two processes."""
import copy
import json
import os
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from test_pre_ln import CASES
from torch.distributed.tensor import DTensor

import train
from conftest import ROOT, free_port, join_process_group_env
from minxlt.parallel import distributed
from minxlt.run import compiled

COMMON = ["--target-langs", "de", "--batch-size", "8", "--max-steps", "5", "--eval-every", "5", "--no-alignment", "--dropout", "0",
          "--lr", "2e-3", "--log-every", "1", "--eval-batch-size", "24"]  # dev and test in batch counts that 2 processes split unevenly
TASKS = {"sentence": ["--task", "demo"], "word": ["--task", "demo-slots"]}
NO_ACCUMULATION = {"contrastive"}  # its label alignment contrasts the whole global batch at once (contrastive.py refuses it)


def full(tensor):
    """A parameter's whole value, gathered from every process (each must call this, in the same order)."""
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def logged(out):
    """Every log record's numbers but the time and learning rate: {step: {name: value}}."""
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return {r["step"]: {k: v for k, v in r.items() if k not in ("step", "seconds", "lr") and not isinstance(v, dict)}
            for r in records if "loss" in r}


def assert_same_losses(a, b, what):
    first, second = logged(a), logged(b)
    assert len(first) >= 5 and first.keys() == second.keys(), what
    for step in first:
        assert first[step].keys() == second[step].keys(), (what, step)
        for name, value in first[step].items():
            assert second[step][name] == pytest.approx(value, rel=1e-5, abs=1e-7), (what, step, name)


def runs_worker(rank, world_size, port, runs):
    """Every run of `runs` ([(argv, out)]) in turn, in one process group; a compiled one writes
    how many graphs it compiled to OUT/graphs-<rank>.txt."""
    join_process_group_env(rank, world_size, port)
    dist.init_process_group("gloo")
    for argv, out in runs:
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()  # reset() keeps the count
        train.main(argv + ["--out", str(out)])
        if "--compile" in argv:
            (out / f"graphs-{rank}.txt").write_text(str(compiled.compiles()))
    distributed.cleanup()


def spawn(runs, processes=2):
    mp.spawn(runs_worker, args=(processes, free_port(), runs), nprocs=processes)


def span_data(folder):
    """A small XQuAD-layout folder (the one test_pre_ln trains on)."""
    from test_qa import PEOPLE, write_squad
    folder.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "de"):
        write_squad(folder, lang, [("Article 0", PEOPLE * 2), ("Article 1", PEOPLE), ("Article 6", PEOPLE[1:3]), ("Article 7", PEOPLE)])
    return ["--task", "xquad", "--data", str(folder), "--max-length", "40", "--doc-stride", "6"]


def jobs(model, tmp_path, layout):
    """{name: argv} of every method at every level it supports (test_pre_ln.CASES), plus the two
    teachers' students: FILTER's self-teaching and X-Mixup's soft word labels. A pre-LN encoder's
    runs accumulate gradients over 2 micro-steps wherever the method allows it."""
    out = {}
    span = span_data(tmp_path / "xquad")
    for method, level in CASES:
        name = method.split("-in-")[0]
        extra = {"contrastive": ["--sa-steps", "1"], "xmixup-in-attention": ["--mixup-variant", "in-attention"]}.get(method, [])
        accumulate = ["--grad-accum", "2"] if layout == "pre-ln" and name not in NO_ACCUMULATION else []
        out[f"{method}-{level}"] = ["--model", str(model), *COMMON, *TASKS.get(level, span if level == "span" else []),
                                    "--method", name, *extra, *accumulate]
    teacher = lambda job: str(tmp_path / layout / job / "ddp" / "best")
    out["filter-self-teaching-sentence"] = out["filter-sentence"] + ["--teacher", teacher("filter-sentence")]
    out["xmixup-word"] = ["--model", str(model), *COMMON, *TASKS["word"], "--method", "xmixup", "--mixup-layer", "2", "--teacher",
                          teacher("zero-shot-word")]
    return out


def test_every_method_sharded_logs_the_losses_of_ddp(tmp_path, tiny_model_dir, xl_model_dir):
    # each run on one layout, the two layouts taking turns down the list (pre-LN with --grad-accum 2); a student on its
    # teacher's; test_pre_ln trains every run on the pre-LN encoder unsharded
    every = {"post-ln": jobs(tiny_model_dir, tmp_path, "post-ln"), "pre-ln": jobs(xl_model_dir, tmp_path, "pre-ln")}
    names = list(every["post-ln"])
    layout = {name: ("post-ln", "pre-ln")[i % 2] for i, name in enumerate(names)}
    layout.update({"filter-self-teaching-sentence": layout["filter-sentence"], "xmixup-word": layout["zero-shot-word"]})
    assert set(layout.values()) == {"post-ln", "pre-ln"} and len(names) == len(CASES) + 2
    spawn([(every[layout[name]][name] + flag, tmp_path / layout[name] / name / mode)
           for name in names for mode, flag in (("ddp", []), ("shard", ["--shard"]))])
    for name in names:
        folder = tmp_path / layout[name] / name
        assert_same_losses(folder / "ddp", folder / "shard", f"{layout[name]} {name}")
        assert (folder / "shard" / "best" / "config.json").is_file()


def test_sharded_and_ddp_agree_under_bf16_on_a_pre_ln_encoder(tmp_path, xl_model_dir):
    # DDP's autocast keeps the residual stream and LayerNorm in float32 and multiplies in bf16; a
    # sharded run gathers its layers in bf16 and computes in bf16 throughout (shard.py): the same
    # losses to within one bf16 step (2^-8 of the value; these differ by at most 5e-4 of it), not
    # float32's precision. The weights they train differ as much, and so may a score near a tie. With --eval-float32 both
    # evaluate in float32 (a sharded run, a float32 copy of its rows: shard.evaluated): CKA before training is the same.
    every = jobs(xl_model_dir, tmp_path, "pre-ln")
    runs = {name: every[name] + ["--amp", "bf16", "--eval-float32"] for name in ("translate-train-sentence", "xmixup-sentence", "filter-word")}
    runs["translate-train-sentence"].remove("--no-alignment")  # CKA and retrieval before training: in float32, of the same weights
    spawn([(argv + flag, tmp_path / name / mode) for name, argv in runs.items() for mode, flag in (("ddp", []), ("shard", ["--shard"]))]
          + [([f for f in runs["translate-train-sentence"] if f != "--eval-float32"] + ["--shard"], tmp_path / "evaluated-in-bf16")])
    for name in runs:
        ddp, sharded = logged(tmp_path / name / "ddp"), logged(tmp_path / name / "shard")
        assert len(ddp) == 5 and ddp.keys() == sharded.keys(), name
        for step in ddp:
            assert ddp[step].keys() == sharded[step].keys(), (name, step)
            for part, value in ddp[step].items():
                assert sharded[step][part] == pytest.approx(value, rel=2 ** -8, abs=1e-3), (name, step, part)
        ddp_test, shard_test = (json.loads((tmp_path / name / mode / "results.json").read_text()) for mode in ("ddp", "shard"))
        for lang in ("en", "de"):
            assert {metric: pytest.approx(score, abs=0.05) for metric, score in ddp_test[lang].items()} == shard_test[lang], (name, lang)
    ddp, sharded = (json.loads((tmp_path / "translate-train-sentence" / mode / "results.json").read_text())["alignment"]["de"]
                    for mode in ("ddp", "shard"))
    assert sharded["cka_before"] == pytest.approx(ddp["cka_before"], abs=1e-6) and sharded["retrieval_before"] == ddp["retrieval_before"]
    in_bf16 = json.loads((tmp_path / "evaluated-in-bf16" / "results.json").read_text())["alignment"]["de"]
    assert in_bf16["cka_before"] != pytest.approx(ddp["cka_before"], abs=1e-4)  # by default: in bf16 (autocast), as after training


def load_worker(rank, world_size, port, best):
    """Each process loads OUT/best sharded and checks it against the whole model: its own rows of
    every tensor, no more; the same logits, alone and through a pair method's layers; and a
    teacher's cache, built in lockstep over an odd number of batches."""
    from types import SimpleNamespace

    from fusion import Filter
    from minxlt.parallel import shard
    from minxlt.run.teacher import Teacher
    from mixup import XMixup
    from model import Classifier
    join_process_group_env(rank, world_size, port)
    dist.init_process_group("gloo")
    whole, tokenizer, _ = Classifier.load(best)
    sharded, _, _ = shard.load_classifier(best, "cpu")
    whole.eval(), sharded.eval()  # OUT/best keeps the checkpoint's dropout (the run's --dropout 0 is its own)
    theirs = dict(whole.named_parameters())
    for name, param in sharded.named_parameters():
        rows = theirs[name].detach().chunk(world_size)  # FSDP2's cut: ceil(rows / N) each, the last fewer or none
        mine = param.to_local()
        assert torch.equal(mine, rows[rank] if rank < len(rows) else rows[0][:0]), name
        if theirs[name].shape[0] > 1:
            assert mine.shape[0] < theirs[name].shape[0], name  # never the whole tensor
    for name, param in sharded.named_parameters():  # what OUT/best is written from: process 0's host memory only
        first = shard.on_first_host(param)
        assert first is None if rank else (first.device.type == "cpu" and torch.equal(first, theirs[name].detach())), name
    generator = torch.Generator().manual_seed(rank)
    ids = torch.randint(5, tokenizer.vocab_size, (3, 9), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 6:] = mask[2, 4:] = 0
    with torch.no_grad(), shard.gathered(sharded):
        assert torch.allclose(sharded(ids, mask)[0], whole(ids, mask)[0], atol=1e-5)
        for pair in (lambda c: Filter(c, 1, 1), lambda c: XMixup(c, 2, 0.5, 0.3)):  # layers called by the method, one through Layer.run
            assert torch.allclose(pair(sharded)(ids, mask, ids.flip(0), mask.flip(0))[1], pair(whole)(ids, mask, ids.flip(0), mask.flip(0))[1],
                                  atol=1e-5)
    trained = copy.deepcopy(whole)  # sharded to train in bf16: its evaluation runs on a float32 copy of its rows
    shard.wrap(trained, trained.encoder, amp="bf16")
    with torch.no_grad():
        with shard.gathered(trained):
            in_bf16 = trained.eval()(ids, mask)[0].float()
        with shard.evaluated(trained) as evaluated:
            assert evaluated is not trained
            in_float32 = evaluated.eval()(ids, mask)[0]
        with shard.evaluated(trained, trained.encoder) as encoder:  # a part of the copy, gathered in float32
            assert encoder is not trained.encoder and all(p.dtype == torch.float32 for p in encoder.parameters())
    expected = whole.eval()(ids, mask)[0]
    assert torch.allclose(in_float32, expected, atol=1e-5) and not torch.allclose(in_bf16, expected, atol=1e-3)
    assert all(isinstance(p, DTensor) and p.dtype == torch.float32 for p in trained.parameters())  # the trained rows untouched
    pairs = [(SimpleNamespace(ids=[0, 7 + i, 9, 2]), SimpleNamespace(id=str(i), lang="de", ids=[0, 11, 8 + i, 2][:3 + i % 2]))
             for i in range(5)]  # 3 batches of 2: one process has 2, the other 1 and a placeholder
    build = lambda classifier, info: Filter(classifier, 1, 1).eval()
    cache = Teacher(best, device="cpu", pair_model=build, sharded=True).build_cache(tokenizer, pairs, 2, "cpu", rank, world_size)
    expected = Teacher(best, device="cpu", pair_model=build).build_cache(tokenizer, pairs, 2, "cpu", rank, world_size)
    assert cache.keys() == expected.keys() and len(cache) == 5
    assert all(torch.allclose(cache[k], expected[k], atol=1e-5) for k in cache)
    distributed.cleanup()


def test_a_saved_model_loads_sharded_each_process_its_own_rows(tmp_path, xl_model_dir):
    # OUT/best of a short run (pre-LN, random LayerNorms, a vocabulary of odd size) as the test and a teacher load it sharded
    train.main(["--model", str(xl_model_dir), *COMMON, *TASKS["sentence"], "--max-steps", "2", "--eval-every", "2", "--no-test",
                "--out", str(tmp_path)])
    mp.spawn(load_worker, args=(2, free_port(), tmp_path / "best"), nprocs=2)


def test_sharded_alignment_and_test_scores_are_ddp_s(tmp_path, tiny_model_dir):
    # CKA and retrieval before and after training (the sharded encoder gathered, every process measuring), and the
    # test scores of OUT/best loaded sharded, against DDP's of the whole model
    argv = ["--model", str(tiny_model_dir), *[a for a in COMMON if a != "--no-alignment"], *TASKS["sentence"], "--method", "xeroalign"]
    spawn([(argv, tmp_path / "ddp"), (argv + ["--shard"], tmp_path / "shard")])
    assert_same_losses(tmp_path / "ddp", tmp_path / "shard", "after CKA and retrieval before training")  # every layer trained
    ddp, sharded = (json.loads((tmp_path / mode / "results.json").read_text()) for mode in ("ddp", "shard"))
    assert ddp["alignment"] and sharded["alignment"].keys() == ddp["alignment"].keys()
    for lang, figures in ddp["alignment"].items():
        for name, value in figures.items():
            assert sharded["alignment"][lang][name] == pytest.approx(value, rel=1e-5, abs=1e-6), (lang, name)
    for lang in ("en", "de"):
        assert sharded[lang] == pytest.approx(ddp[lang], rel=1e-6), lang


def test_sharded_training_options_match_ddp(tmp_path, tiny_model_dir):
    # gradient clipping on the sharded gradients (a norm of 0.05 clips every step), gradient checkpointing, and
    # 2 micro-steps, sharded with and without --offload, and with the embeddings a unit of their own
    argv = ["--model", str(tiny_model_dir), *COMMON, *TASKS["sentence"], "--method", "translate-train", "--max-grad-norm", "0.05",
            "--gradient-checkpointing", "--grad-accum", "2"]
    spawn([(argv, tmp_path / "ddp"), (argv + ["--shard"], tmp_path / "shard"), (argv + ["--shard", "--offload"], tmp_path / "offload"),
           (argv + ["--shard", "--shard-embeddings"], tmp_path / "embeddings")])
    assert_same_losses(tmp_path / "ddp", tmp_path / "shard", "clipping, checkpointing, accumulation")
    assert_same_losses(tmp_path / "ddp", tmp_path / "offload", "the same, the parts in host memory (--offload)")
    assert_same_losses(tmp_path / "ddp", tmp_path / "embeddings", "the same, the embeddings a unit of their own (--shard-embeddings)")
    clipped = [json.loads(line) for line in (tmp_path / "ddp" / "log.jsonl").read_text().splitlines()]
    unclipped = tmp_path / "unclipped"
    spawn([([a if a != "0.05" else "0" for a in argv] + ["--shard"], unclipped)])
    assert logged(unclipped)[5]["loss"] != pytest.approx(clipped[4]["loss"], rel=1e-4)  # the clipping did act (the same: within 1e-5)


RESUMED = ["--method", "xeroalign", "--max-steps", "6", "--save-every", "3", "--eval-every", "6", "--shard"]


def test_a_sharded_checkpoint_resumes_on_another_number_of_processes(tmp_path, tiny_model_dir):
    argv = ["--model", str(tiny_model_dir), *COMMON, *TASKS["sentence"], *RESUMED]
    spawn([(argv, tmp_path / "whole"), (argv + ["--stop-at", "3"], tmp_path / "two-one")])
    assert (tmp_path / "two-one" / "checkpoint" / "state.pt").is_file() and not (tmp_path / "two-one" / "checkpoint.pt").exists()
    assert len(list((tmp_path / "two-one" / "checkpoint").glob("*.distcp"))) == 2  # each process wrote its own shards
    train.main(argv + ["--out", str(tmp_path / "two-one"), "--resume"])  # one process, not under torchrun
    assert_same_losses(tmp_path / "whole", tmp_path / "two-one", "2 -> 1 processes")

    train.main(argv + ["--out", str(tmp_path / "one-two"), "--stop-at", "3"])
    spawn([(argv + ["--resume"], tmp_path / "one-two")])
    assert_same_losses(tmp_path / "whole", tmp_path / "one-two", "1 -> 2 processes")

    unsharded = [a for a in argv if a != "--shard"]  # a sharded checkpoint loads whole into a run without --shard
    spawn([(argv + ["--stop-at", "3"], tmp_path / "to-ddp")])
    spawn([(unsharded + ["--resume"], tmp_path / "to-ddp")])
    assert_same_losses(tmp_path / "whole", tmp_path / "to-ddp", "sharded -> DDP")
    assert (tmp_path / "to-ddp" / "checkpoint.pt").is_file() and not (tmp_path / "to-ddp" / "checkpoint").exists()


def test_a_ddp_checkpoint_is_not_resumed_sharded(tmp_path, tiny_model_dir):
    from minxlt.checkpoints.weights import CheckpointError
    argv = ["--model", str(tiny_model_dir), *COMMON, *TASKS["sentence"], *RESUMED[:-1], "--out", str(tmp_path)]
    train.main(argv + ["--stop-at", "3"])
    try:
        with pytest.raises(CheckpointError, match="written by a run without --shard: resume it without --shard"):
            train.main(argv + ["--resume", "--shard"])
    finally:
        distributed.cleanup()  # the group of one the sharded run made, which its error left


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_failed_checkpoint_write_leaves_the_last_one(tmp_path, tiny_model_dir, monkeypatch, asynchronous):
    from concurrent.futures import Future

    from minxlt.parallel import shard
    argv = ["--model", str(tiny_model_dir), *COMMON, *TASKS["sentence"], *RESUMED] + (["--async-checkpoint"] if asynchronous else [])
    train.main(argv + ["--out", str(tmp_path / "whole")])
    name = "async_save" if asynchronous else "save"  # --async-checkpoint: the failure comes from the background
    real, groups = getattr(shard.dcp, name), []

    def killed_at_the_second(state, checkpoint_id, **group):
        groups.append(group.get("process_group"))
        if len(groups) == 1:
            return real(state, checkpoint_id=checkpoint_id, **group)
        (tmp_path / "run" / "checkpoint.tmp").mkdir(exist_ok=True)
        (tmp_path / "run" / "checkpoint.tmp" / "__0_0.distcp").write_bytes(b"half")  # a write cut short
        failure = OSError(28, "No space left on device")
        if not asynchronous:
            raise failure
        written = Future()
        written.set_exception(failure)
        return written
    monkeypatch.setattr(shard.dcp, name, killed_at_the_second)
    try:
        with pytest.raises(OSError, match="No space left on device.*the checkpoint of step 3 is whole"):
            train.main(argv + ["--out", str(tmp_path / "run")])
    finally:
        distributed.cleanup()
    monkeypatch.setattr(shard.dcp, name, real)
    assert not (tmp_path / "run" / "checkpoint.tmp").exists()
    if asynchronous:  # written over a group of its own, apart from the training's collectives
        assert groups[0] is not None and groups[0] is not dist.group.WORLD
    train.main(argv + ["--out", str(tmp_path / "run"), "--resume"])
    assert_same_losses(tmp_path / "whole", tmp_path / "run", "resumed after a failed write")


def staging_worker(rank, world_size, port, argv, result_dir):
    """A run whose second asynchronous checkpoint cannot be copied to process 1's host memory."""
    from torch.distributed.checkpoint.staging import DefaultStager
    join_process_group_env(rank, world_size, port)
    dist.init_process_group("gloo")
    real, calls = DefaultStager.stage, []

    def out_of_host_memory(self, state_dict, **kwargs):
        calls.append(1)
        if rank == 1 and len(calls) == 2:
            raise MemoryError("cannot allocate 1.2 GB of host memory")
        return real(self, state_dict, **kwargs)
    DefaultStager.stage = out_of_host_memory
    stopped_with(argv, rank, result_dir)


def stopped_with(argv, rank, result_dir):
    """Run train.py's `argv` and write what it stopped with (an OSError's message, or "returned") to
    result_dir/rank<rank>.txt."""
    try:
        train.main(argv)
        message = "returned"
    except OSError as e:
        message = str(e)
    (result_dir / f"rank{rank}.txt").write_text(message)
    distributed.cleanup()


def test_an_asynchronous_checkpoint_that_one_process_cannot_stage_stops_every_process_at_once(tmp_path, tiny_model_dir):
    argv = ["--model", str(tiny_model_dir), *COMMON, *TASKS["sentence"], *RESUMED, "--async-checkpoint", "--out", str(tmp_path / "run")]
    processes, deadline = mp.spawn(staging_worker, args=(2, free_port(), argv, tmp_path), nprocs=2, join=False), time.monotonic() + 240
    while not processes.join(timeout=5):  # True once both have ended
        if time.monotonic() > deadline:  # without agreement, process 0 waits in the write's collectives for 30 minutes
            for process in processes.processes:
                process.kill()
            pytest.fail("the processes did not stop within 4 minutes of a failed copy to host memory")
    messages = [(tmp_path / f"rank{rank}.txt").read_text() for rank in (0, 1)]
    assert messages[0] == messages[1], messages
    assert "writing the checkpoint failed (copying process 1's shards to host memory: cannot allocate 1.2 GB" in messages[0]
    assert "the checkpoint of step 3 is whole" in messages[0]  # the second, at step 6, was never written
    assert not (tmp_path / "run" / "checkpoint.tmp").exists() and (tmp_path / "run" / "checkpoint" / "state.pt").is_file()


def test_an_asynchronous_checkpoint_resumes_to_the_same_losses(tmp_path, tiny_model_dir):
    # written in the background (--async-checkpoint): put in place when the next starts, and at the end
    argv = ["--model", str(tiny_model_dir), *COMMON, *TASKS["sentence"], *RESUMED, "--save-every", "2"]
    spawn([(argv, tmp_path / "whole"), (argv + ["--async-checkpoint", "--stop-at", "3"], tmp_path / "run")])
    assert (tmp_path / "run" / "checkpoint" / "state.pt").is_file() and not (tmp_path / "run" / "checkpoint.tmp").exists()
    assert torch.load(tmp_path / "run" / "checkpoint" / "state.pt", weights_only=False)["step"] == 3  # the last, not step 2's
    spawn([(argv + ["--async-checkpoint", "--resume"], tmp_path / "run")])
    assert_same_losses(tmp_path / "whole", tmp_path / "run", "resumed from an asynchronous checkpoint")


def export_worker(rank, world_size, port, argv, result):
    join_process_group_env(rank, world_size, port)
    dist.init_process_group("gloo")
    model = train.main(argv)
    state = {name: full(value) for name, value in model.state_dict().items()}  # every process gathers, in order
    if rank == 0:
        torch.save(state, result)
    distributed.cleanup()


def test_best_of_a_sharded_run_holds_the_trained_weights(tmp_path, tiny_model_dir):
    from model import Classifier
    argv = ["--model", str(tiny_model_dir), *COMMON, *TASKS["word"], "--method", "zero-shot", "--shard", "--out", str(tmp_path / "run")]
    mp.spawn(export_worker, args=(2, free_port(), argv, tmp_path / "trained.pt"), nprocs=2)  # best = step 5, the last
    trained = torch.load(tmp_path / "trained.pt")
    best, _, task = Classifier.load(tmp_path / "run" / "best")
    saved = best.state_dict()
    assert saved.keys() == trained.keys() and all(torch.equal(saved[k], trained[k]) for k in saved)
    assert task["transformers"] == "ForTokenClassification" and task["step"] == 5
    transformers = pytest.importorskip("transformers")  # and transformers loads it with its trained head
    theirs = transformers.AutoModelForTokenClassification.from_pretrained(tmp_path / "run" / "best").eval()
    ids = torch.tensor([[0, 25, 36, 47, 2, 1]])
    mask = ids.ne(1).long()
    with torch.no_grad():
        assert torch.allclose(theirs(input_ids=ids, attention_mask=mask).logits, best.eval()(ids, mask)[0], atol=1e-5)


def test_two_nodes_on_localhost_train_like_one_node_of_two(tmp_path, tiny_model_dir):
    """--out shared, the token cache each node's own (MINXLT_CACHE on a node's disk): each node
    builds the entries it reads."""
    from bench import data as bench_data
    bench_data.write_xnli(tmp_path / "xnli", 40, ["de"])  # read from files: the token cache holds them
    argv = ["train.py", "--model", str(tiny_model_dir), *COMMON, "--task", "xnli", "--data", str(tmp_path / "xnli"),
            "--method", "xeroalign", "--shard"]
    env = dict(os.environ, OMP_NUM_THREADS="1", MINXLT_CACHE=str(tmp_path / "cache"))
    one = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
                          *argv, "--out", str(tmp_path / "one-node")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert one.returncode == 0, one.stderr[-2000:]
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(r), "--nproc-per-node", "1",
                               "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "test", *argv,
                               "--out", str(tmp_path / "two-nodes")], cwd=ROOT, env=dict(env, MINXLT_CACHE=str(tmp_path / f"node{r}")),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outputs = [node.communicate(timeout=300) for node in nodes]
    assert all(node.returncode == 0 for node in nodes), [err[-2000:] for _, err in outputs]
    assert_same_losses(tmp_path / "one-node", tmp_path / "two-nodes", "2 nodes of 1 process")
    entries = lambda cache: sorted(p.name for p in (cache / "tokens").iterdir())
    assert entries(tmp_path / "node0") == entries(tmp_path / "node1") == entries(tmp_path / "cache") != []


def shared_worker(rank, world_size, port, folders, result):
    from minxlt.run import cli
    join_process_group_env(rank, world_size, port)
    dist.init_process_group("gloo")
    try:
        cli.output_folder(folders[rank], rank=rank)  # each process given its own folder: as node-local disks look
        message = None
    except Exception as e:  # noqa: BLE001
        message = str(e)
    if rank == 1:
        result.write_text(message or "")
    distributed.cleanup()


def test_a_folder_that_not_every_node_sees_is_refused(tmp_path):
    folders = [tmp_path / "node0", tmp_path / "node1"]
    mp.spawn(shared_worker, args=(2, free_port(), folders, tmp_path / "message"), nprocs=2)
    message = (tmp_path / "message").read_text()
    assert message.startswith(f"--out {folders[1]} is not on storage every process sees: process 1 (on ")
    assert "put it on a file system that every node shares" in message and not list(folders[0].glob(".shared-*"))


def measure_worker(rank, world_size, port, result):
    from bench import shard as bench_shard
    from minxlt.parallel import distributed
    from model import Config
    join_process_group_env(rank, world_size, port)
    dist.init_process_group("gloo")
    config = Config(vocab_size=101, hidden_size=36, num_layers=3, num_heads=3, ffn_size=37, max_positions=40, model_type="xlm-roberta-xl")
    held = distributed.gather({mode: bench_shard.measure(config, mode == "sharded") for mode in ("ddp", "sharded")})
    if rank == 0:
        result.write_text(json.dumps(held))
    distributed.cleanup()


def test_the_memory_plan_is_what_each_process_holds(tmp_path):
    # the --dry-run plan's parameters, gradients and moments, against the bytes two real processes hold after a step
    from minxlt.parallel import memory
    from model import Config
    mp.spawn(measure_worker, args=(2, free_port(), tmp_path / "held.json"), nprocs=2)
    held = json.loads((tmp_path / "held.json").read_text())
    config = Config(vocab_size=101, hidden_size=36, num_layers=3, num_heads=3, ffn_size=37, max_positions=40, model_type="xlm-roberta-xl")
    plan = memory.plan(config, 2)
    parts = ("parameters", "gradients", "AdamW moments")
    assert held[0]["sharded"] == {k: plan["sharded"][k] for k in parts}  # the first process holds the most
    assert all(held[r]["ddp"] == {k: plan["ddp"][k] for k in parts} for r in (0, 1))
    assert sum(held[1]["sharded"].values()) < sum(held[0]["sharded"].values()) < 0.52 * sum(held[0]["ddp"].values())


def test_a_checkpoint_before_every_head_has_trained_resumes(tmp_path, tiny_model_dir):
    # Unicoder trains one task per step: at step 2 its paraphrase head and W have had no gradient, so AdamW holds no
    # state for them; the resumed run starts theirs at the first gradient, as the uninterrupted run does
    argv = ["--model", str(tiny_model_dir), *COMMON, *TASKS["sentence"], "--method", "unicoder", "--max-steps", "6", "--shard"]
    spawn([(argv, tmp_path / "whole"), (argv + ["--stop-at", "2"], tmp_path / "split"), (argv + ["--resume"], tmp_path / "split")])
    assert_same_losses(tmp_path / "whole", tmp_path / "split", "Unicoder resumed at step 2")


def cotrain_worker(rank, world_size, port, argv):
    import cotrain
    join_process_group_env(rank, world_size, port)
    cotrain.main(argv)


def test_co_training_sharded_logs_the_losses_of_ddp(tmp_path, tiny_model_dir):
    # both views, f_lm and the embedding model f_emb, are train.py runs that take --shard; a threshold of 0 makes
    # every prediction qualify, so the picks are the seeded draws alone
    argv = ["--model", str(tiny_model_dir), "--embedding-model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "8",
            "--max-steps", "5", "--eval-every", "5", "--log-every", "1", "--dropout", "0", "--lr", "2e-3", "--cotrain-iterations", "1",
            "--threshold", "0.0", "--train-fraction", "0.2", "--eval-batch-size", "24"]
    for mode, flag in (("ddp", []), ("shard", ["--shard"])):
        mp.spawn(cotrain_worker, args=(2, free_port(), argv + flag + ["--out", str(tmp_path / mode)]), nprocs=2)
    picks = [json.loads((tmp_path / mode / "round0" / "picks.json").read_text()) for mode in ("ddp", "shard")]
    for view in ("lm", "emb"):  # the same texts with the same labels, their confidences to float precision
        assert {k: label for k, (label, _) in picks[0][view].items()} == {k: label for k, (label, _) in picks[1][view].items()}
        assert [c for _, c in picks[1][view].values()] == pytest.approx([c for _, c in picks[0][view].values()], rel=1e-5)
    for run in ("round0/lm", "round0/emb", "final/lm", "final/emb"):
        assert_same_losses(tmp_path / "ddp" / run, tmp_path / "shard" / run, f"co-training {run}")


def failing_write_worker(rank, world_size, port, argv, result_dir):
    import model
    from minxlt.checkpoints import weights
    join_process_group_env(rank, world_size, port)
    dist.init_process_group("gloo")
    if rank == 0:  # a full disk where process 0 writes OUT/best; the others only gather
        def full(*args, **kwargs):
            raise OSError(28, "No space left on device")
        weights.save_safetensors = model.save_safetensors = full
    stopped_with(argv, rank, result_dir)


def test_a_failed_write_of_the_best_model_stops_every_process_with_its_message(tmp_path, tiny_model_dir):
    argv = ["--model", str(tiny_model_dir), *COMMON, *TASKS["sentence"], "--method", "zero-shot", "--shard", "--out", str(tmp_path / "run")]
    mp.spawn(failing_write_worker, args=(2, free_port(), argv, tmp_path), nprocs=2)
    for rank in (0, 1):
        message = (tmp_path / f"rank{rank}.txt").read_text()
        assert ("writing the best model failed ([Errno 28] No space left on device); the previous one, if any, is whole. "
                "Is the disk full? Free some space and start again with --overwrite (no checkpoint yet)") in message, message
    assert not (tmp_path / "run" / "best").exists() and not (tmp_path / "run" / "best.tmp").exists()


def micro_step_worker(rank, world_size, port, result_dir):
    """Two micro-steps of a sharded tiny classifier: after each backward, what a process holds of each gradient."""
    join_process_group_env(rank, world_size, port)
    dist.init_process_group("gloo")

    from conftest import padded_batch, sharp_encoder
    from minxlt.parallel import shard
    from model import Classifier
    classifier = Classifier(sharp_encoder(2), 3)
    model = shard.wrap(classifier, classifier.encoder)
    held = []
    for micro in range(2):
        ids, mask = padded_batch(101, [5, 3, 6][:2 + micro])
        model(ids, mask)[0].sum().backward()  # as train_step runs a sharded model's micro-steps: no DDP no_sync()
        held.append({name: (isinstance(p.grad, DTensor), tuple(p.grad.to_local().shape), tuple(p.shape))
                     for name, p in model.named_parameters() if p.grad is not None})
    torch.save(held, f"{result_dir}/held{rank}.pt")
    distributed.cleanup()


def test_every_micro_step_reduce_scatters_so_no_whole_gradient_is_held(tmp_path):
    mp.spawn(micro_step_worker, args=(2, free_port(), tmp_path), nprocs=2)
    for rank in (0, 1):
        for step in torch.load(tmp_path / f"held{rank}.pt"):
            assert step and all(is_shard for is_shard, _, _ in step.values())
            for name, (_, local, whole) in step.items():  # each process holds its rows of every gradient, never all of them
                first = -(-whole[0] // 2)  # FSDP2 cuts the first dimension into ceil(rows / 2) and the rest
                assert local[0] == (first if rank == 0 else whole[0] - first) and local[1:] == whole[1:], (name, local, whole)


def gather_order_worker(rank, world_size, port, result_dir):
    """One forward and backward of a sharded 4-layer classifier: which layers hold their whole
    parameters after each layer's forward and backward, and what each layer prefetches."""
    join_process_group_env(rank, world_size, port)
    dist.init_process_group("gloo")

    from conftest import padded_batch, sharp_encoder
    from minxlt.parallel import shard
    from model import Classifier
    classifier = Classifier(sharp_encoder(4), 3)
    layers = list(classifier.encoder.layers)
    model = shard.wrap(classifier, classifier.encoder)
    whole = lambda: [i for i, layer in enumerate(layers) if not any(isinstance(p, DTensor) for p in layer.parameters())]
    seen = {"forward": [], "backward": []}
    for i, layer in enumerate(layers):  # after FSDP2's own hooks: what stays gathered once the layer has run
        layer.register_forward_hook(lambda module, args, out, i=i: seen["forward"].append((i, whole())))
    ids, mask = padded_batch(101, [5, 3, 6])
    model(ids, mask)[0].sum().backward()
    seen["after backward"] = whole()
    states = [layer._get_fsdp_state() for layer in layers]  # FSDP2 keeps the explicit prefetch targets on each layer's state
    seen["prefetch"] = {direction: [[states.index(s) for s in getattr(state, f"_states_to_{direction}_prefetch")] for state in states]
                        for direction in ("forward", "backward")}
    if rank == 0:
        (result_dir / "seen.json").write_text(json.dumps(seen))
    distributed.cleanup()


def test_each_layer_prefetches_its_neighbour_and_the_last_stays_gathered_into_backward(tmp_path):
    mp.spawn(gather_order_worker, args=(2, free_port(), tmp_path), nprocs=2)
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["prefetch"] == {"forward": [[1], [2], [3], []], "backward": [[], [0], [1], [2]]}
    assert seen["forward"] == [[0, []], [1, []], [2, []], [3, [3]]]  # the others released after their forward
    assert seen["after backward"] == []


def test_unicoder_s_lm_head_is_its_own_unit_released_after_it_runs():
    from torch.distributed.fsdp import FSDPModule

    from conftest import padded_batch, sharp_encoder
    from minxlt.parallel import shard
    from unicoder import Unicoder, masked_positions
    torch.manual_seed(0)
    model = Unicoder(sharp_encoder(2))
    try:
        shard.wrap(model, model.encoder)  # a group of one
        head = model.encoder.lm_head
        assert isinstance(head, FSDPModule) and not isinstance(model.encoder.embeddings, FSDPModule)
        ids, mask = padded_batch(101, [5, 3])
        with shard.gathered(model):  # the root's embeddings whole, as Unicoder's evaluation calls the encoder and the head
            logits = model.encoder.mlm_logits(model.encoder(ids, mask)[mask.bool()])
            assert logits.shape == (8, 101) and all(isinstance(p, DTensor) for p in head.parameters())  # released once it has run
        masked, masked_labels = masked_positions(torch.where(mask.bool(), ids, -100))
        loss = model({"task": "mlm", "input_ids": ids, "attention_mask": mask, "masked": masked, "masked_labels": masked_labels})
        assert all(isinstance(p, DTensor) for p in head.parameters())
        loss.backward()
        assert head.dense.weight.grad is not None and model.encoder.embeddings.word.weight.grad is not None  # the tied words too
    finally:
        distributed.cleanup()


def mixup_unit_worker(rank, world_size, port, result_dir, variant):
    """X-Mixup on a sharded 3-layer classifier, mixing at layer 2: its gradients, gathered whole,
    and whether the mixup layer holds its whole parameters once the forward is done."""
    join_process_group_env(rank, world_size, port)
    dist.init_process_group("gloo")

    from conftest import padded_batch, sharp_encoder
    from minxlt.parallel import shard
    from mixup import XMixup
    from model import Classifier
    torch.manual_seed(0)
    model = XMixup(Classifier(sharp_encoder(3), 3), layer=2, variant=variant)
    mixup_layer = model.classifier.encoder.layers[1]
    if world_size > 1:
        shard.wrap(model, model.classifier.encoder)
    (source, source_mask), (target, target_mask) = padded_batch(101, [5, 3, 6]), padded_batch(101, [4, 6, 2])
    out = model(source, source_mask, target, target_mask)
    released = all(isinstance(p, DTensor) for p in mixup_layer.parameters())
    (out[0].sum() + out[1].square().sum() + out[4].sum()).backward()
    grads = {name: full(p.grad) for name, p in model.named_parameters()}
    if rank == 0:
        torch.save({"released": released, "grads": grads}, result_dir / f"{variant}{world_size}.pt")
    distributed.cleanup()


@pytest.mark.parametrize("variant", ["paper", "in-attention"])
def test_the_mixup_layer_is_its_own_unit_released_after_eq_2_to_5(tmp_path, variant):
    mp.spawn(mixup_unit_worker, args=(1, free_port(), tmp_path, variant), nprocs=1)  # not sharded: the reference
    mp.spawn(mixup_unit_worker, args=(2, free_port(), tmp_path, variant), nprocs=2)
    whole, sharded = torch.load(tmp_path / f"{variant}1.pt"), torch.load(tmp_path / f"{variant}2.pt")
    assert sharded["released"] and not whole["released"]
    assert whole["grads"].keys() == sharded["grads"].keys() and any("layers.1." in name for name in whole["grads"])
    for name, grad in whole["grads"].items():
        assert torch.allclose(sharded["grads"][name], grad, rtol=1e-5, atol=1e-7), name
