"""The compiled step (minxlt/run/compiled.py) on a tiny model, on the CPU: every method at every
level it trains on compiles its loss as one graph (fullgraph: no graph break, no host sync) and
gives the eager loss; batches padded to buckets and filled to their full size with weight-0
examples give the losses and gradients of batches padded to their longest; a run over batches of
several lengths compiles no more graphs than there are buckets; compiled under DDP and sharded, 2
processes log the losses of one eager process."""
import json

import pytest
import torch
from conftest import variant_of
from test_pre_ln import CASES
from test_shard import assert_same_losses, spawn

import data
import train
from methods import phase_index
from minxlt.run import bookkeeping, compiled, flags

COMMON = ["--target-langs", "de", "--batch-size", "6", "--dropout", "0", "--no-alignment", "--max-steps", "150"]  # contrastive: in phase 1
TASKS = {"sentence": ["--task", "demo"], "word": ["--task", "demo-slots"]}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles from nothing, and leaves torch._dynamo's settings as it found them."""
    limit, fail = torch._dynamo.config.recompile_limit, torch._dynamo.config.fail_on_recompile_limit_hit
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()  # compiled.compiles() counts this test's graphs
    yield
    torch._dynamo.reset()
    torch._dynamo.config.recompile_limit, torch._dynamo.config.fail_on_recompile_limit_hit = limit, fail


def span_task(folder):
    from test_qa import PEOPLE, write_squad
    for lang in ("en", "de"):
        write_squad(folder, lang, [("Article 0", PEOPLE * 2), ("Article 1", PEOPLE), ("Article 6", PEOPLE[1:3]), ("Article 7", PEOPLE)])
    return ["--task", "xquad", "--data", str(folder), "--max-length", "40", "--doc-stride", "6"]


def prepared(model_dir, argv, core=None, start=True):
    """(settings, method, phases, trained module) as train.main has them before its loop; `core`:
    another method's module to train instead of a new one."""
    args = flags.parse(["--model", str(model_dir), *COMMON, *argv])
    settings, run = flags.resolve(args, train.load_run(args, model_dir, "cpu", 0, 1))
    method = flags.METHODS[settings.method](settings, run)
    items = method.training_items()
    phases = method.phases(items)
    if core is None:
        core = method.wrap(train.build_model(settings, method, model_dir, "cpu", 0))
    if start:
        method.start(core, items)
    return settings, method, phases, core


def batch_of(settings, method, phases, step):
    return next(iter(bookkeeping.StepBatches(settings, method, phases, step)))[0][0]


def fake_teacher(folder, method):
    """A folder whose task.json passes for a --teacher trained by `method` (its soft labels are made up below)."""
    folder.mkdir(exist_ok=True)
    (folder / "task.json").write_text(json.dumps({"method": method}))
    return ["--teacher", str(folder)]


CHECKED = [case for case in CASES if case[0] != "unicoder" or case[1] == "sentence"]  # Unicoder's batches are the same at every level
CHECKED += [("filter-self-teaching", "sentence"), ("xmixup", "word")]  # with a teacher's soft labels


@pytest.mark.parametrize("method,level", CHECKED)
def test_every_method_compiles_as_one_graph_and_gives_the_eager_loss(tmp_path, tiny_model_dir, method, level):
    name = {"filter-self-teaching": "filter", "xmixup-in-attention": "xmixup"}.get(method, method)
    argv = ["--method", name, "--bucket", "16", *TASKS.get(level, span_task(tmp_path) if level == "span" else [])]
    argv += {"contrastive": ["--sa-steps", "1", "--max-steps", "3"], "unicoder": ["--max-steps", "5"],
             "xmixup-in-attention": ["--mixup-variant", "in-attention"]}.get(method, [])
    teacher = method == "filter-self-teaching" or (name == "xmixup" and level == "word")
    if teacher:
        argv += fake_teacher(tmp_path / "teacher", "filter" if name == "filter" else "zero-shot")
        argv += ["--mixup-layer", "2"] if name == "xmixup" else []
    settings, method_, phases, core = prepared(tiny_model_dir, argv, start=not teacher)
    for step in {"unicoder": [0, 2, 3], "contrastive": [0, 2]}.get(name, [0]):  # Unicoder's masked LMs, word recovery, paraphrase; each phase
        batch = batch_of(settings, method_, phases, step)
        if teacher:  # soft labels of the translations, as the teacher's logits would be
            C = len(method_.run.task.labels)
            batch["teacher_logits"] = torch.randn((len(batch["weights"]), C) if level == "sentence" else (*batch["target_ids"].shape, C))
        loss = phases[phase_index(phases, step)[0]].loss
        for fed in [False, True] if (name, level) == ("xmixup", "word") else [False]:  # a round trip fed: sources without tags
            if fed:
                batch["source_labels"], batch["round_trip"] = torch.full_like(batch["source_labels"], -100), torch.tensor(1.0)
                batch["gold_source"] = torch.tensor(False)
            eager, eager_parts = loss(core, batch)
            graph, graph_parts = torch.compile(loss, fullgraph=True, backend="eager")(core, batch)
            assert torch.allclose(graph, eager, rtol=1e-6, atol=0), (method, level, step, fed)
            assert graph_parts.keys() == eager_parts.keys()


def gradients(model):
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("method,task", [("translate-train", "sentence"), ("xeroalign", "word"), ("filter", "sentence"),
                                         ("xmixup", "sentence"), ("contrastive", "sentence")])
def test_bucketed_and_filled_batches_give_the_losses_and_gradients_of_the_longest(tiny_model_dir, method, task):
    argv = ["--method", method, *TASKS[task], "--batch-size", "10"]
    settings, plain, phases, core = prepared(tiny_model_dir, argv + ["--bucket", "0"])
    bucketed = prepared(tiny_model_dir, argv + ["--bucket", "16"], core=core)
    sizes = bookkeeping.lengths(phases[0].items)
    plan = data.epoch_batches(sizes, 10, 0, settings.seed, group_by_length=settings.group_by_length)
    short_step = next(step for step, batch in enumerate(plan) if len(batch) < 10)  # the epoch's short batch
    for step in (0, short_step):
        results = []
        for settings_, method_, phases_, _ in ((settings, plain, phases, core), bucketed):
            batch = batch_of(settings_, method_, phases_, step)
            core.zero_grad()
            loss, parts = phases_[0].loss(core, batch)
            loss.backward()
            results.append((batch, loss, parts, gradients(core)))
        (short, loss, parts, grads), (full, loss_b, parts_b, grads_b) = results
        ids = next(key for key in ("input_ids", "source_ids") if key in full)
        assert full[ids].shape[1] % 16 == 0 and full[ids].shape[1] >= short[ids].shape[1]
        assert len(full["weights"]) == 10 and (step == 0 or len(short["weights"]) < 10)  # the last batch filled with weight 0
        assert full["weights"][len(short["weights"]):].eq(0).all()
        assert torch.allclose(loss_b, loss, rtol=1e-5, atol=1e-7), (method, step)
        assert all(torch.allclose(parts_b[k], v, rtol=1e-5, atol=1e-6) for k, v in parts.items()), (method, step)
        assert grads.keys() == grads_b.keys()
        for name, grad in grads.items():
            assert torch.allclose(grads_b[name], grad, rtol=1e-4, atol=1e-6), (method, step, name)


def test_a_run_compiles_no_more_graphs_than_there_are_buckets(tiny_model_dir, monkeypatch):
    from torch._dynamo.testing import CompileCounter
    counter = CompileCounter()
    monkeypatch.setattr(compiled, "BACKEND", counter)
    settings, method, phases, core = prepared(tiny_model_dir, ["--method", "xeroalign", "--bucket", "4", "--max-length", "48",
                                                                 "--compile", "--no-group-by-length", "--max-steps", "40"])
    phases = compiled.compiled_phases(settings, phases, core.encoder)
    assert torch._dynamo.config.fail_on_recompile_limit_hit  # past its limit a run stops, never goes on uncompiled
    shapes = set()
    for step in range(40):
        batch = batch_of(settings, method, phases, step)
        shapes.add(tuple(batch["input_ids"].shape))
        phases[0].loss(core, batch)
    assert len({T for _, T in shapes}) >= 3 and {B for B, _ in shapes} == {12}  # several lengths, one batch size
    assert all(T % 4 == 0 for _, T in shapes)
    assert counter.frame_count <= compiled.buckets(settings) and counter.frame_count == 1  # the lengths dynamic from the first


@pytest.mark.parametrize("device,mode,marks", [("cuda", "reduce-overhead", 3), ("cuda", "default", 0), ("cpu", "reduce-overhead", 0)])
def test_with_cuda_graphs_each_call_starts_a_step(monkeypatch, device, mode, marks):
    """The CUDA-only part of compiled_loss, run on the CPU: with CUDA graphs (reduce-overhead on
    CUDA) each call marks a new step, after which the last step's outputs, read already, may be
    overwritten; no mark without them. The lengths are dynamic from the first call either way."""
    from types import SimpleNamespace
    counted = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: counted.append(1))
    monkeypatch.setattr(compiled, "BACKEND", "eager")
    settings = SimpleNamespace(compile=True, compile_mode=mode, device=device, bucket=16, max_length=48, shard=False)
    step = compiled.compiled_loss(settings, lambda model, batch: (batch["input_ids"].float().mean(), {}), encoder=None)
    for length in (16, 32, 48):
        assert step(None, {"input_ids": torch.ones(4, length, dtype=torch.long)})[0] == 1
    assert len(counted) == marks and compiled.compiles() == 1  # one graph for the three lengths


def test_unicoder_compiles_a_graph_for_each_of_its_five_tasks_whatever_its_lengths(tiny_model_dir, monkeypatch):
    """Unicoder's five tasks each make a batch of their own kind, one graph each; over buckets of
    several lengths, and the count of masked positions that each bucket fixes, none more."""
    from torch._dynamo.testing import CompileCounter
    counter = CompileCounter()
    monkeypatch.setattr(compiled, "BACKEND", counter)
    settings, method, phases, core = prepared(tiny_model_dir, ["--method", "unicoder", "--bucket", "16", "--compile", "--max-length", "128"])
    phases = compiled.compiled_phases(settings, phases, None)
    shapes = {}
    for step in range(20):
        batch = batch_of(settings, method, phases, step)
        shapes.setdefault(batch["task"], set()).add(tuple(tuple(v.shape) for v in batch.values() if torch.is_tensor(v)))
        phases[phase_index(phases, step)[0]].loss(core, batch)
    assert len(shapes) == 5 and sum(len(kind) > 1 for kind in shapes.values()) >= 3  # most seen at two lengths
    assert counter.frame_count == 5


def resolved(tokenizer, device, world_size=1, **given):
    """(the settings that compiled.resolve fills in, the run it returns) for a run on `device`."""
    from methods import Run
    values = {"compile": None, "bucket": None, "compile_mode": None, "grad_accum": 1, "shard": False, **given}
    return values, compiled.resolve(values, Run(None, tokenizer, 64, device=device, world_size=world_size, max_positions=128))


def test_compiled_where_asked_with_cuda_graphs_where_a_step_is_one_micro_batch(tiny_model_dir):
    from minxlt.text.tokenizer import Tokenizer
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    values, run = resolved(tokenizer, "cuda:0", compile=True)
    assert (values["compile"], values["bucket"], values["compile_mode"]) == (True, 16, "reduce-overhead")
    assert run.tokenizer.pad([[0, 5, 2]])[0].shape == (1, 16) and tokenizer.pad([[0, 5, 2]])[0].shape == (1, 3)
    assert resolved(tokenizer, "cuda:0", compile=True, grad_accum=2)[0]["compile_mode"] == "default"  # graphs would overwrite
    assert resolved(tokenizer, "cuda:0", compile=True, world_size=2)[0]["compile_mode"] == "default"  # a micro-batch's gradients
    values, run = resolved(tokenizer, "cpu", compile=True)
    assert (values["bucket"], values["compile_mode"]) == (16, "default")
    # opt-in on every device, CUDA's too: no GPU has yet measured it faster for every method (RESULTS.md)
    args = flags.parse(["--model", str(tiny_model_dir), "--device", "cpu"])
    assert args.compile is False and flags.DEFAULTS["compile"] is False


def test_compiled_under_ddp_and_sharded_logs_the_losses_of_one_eager_process(tmp_path, tiny_model_dir):
    """--compile in 2 gloo processes, TorchInductor as on a GPU: under DDP with 2 micro-batches a step
    (DDP's forward run eagerly between graphs, the first micro-batch under no_sync), and sharded (each
    encoder layer compiled, FSDP2 gathering around it), each logs the losses of one eager process over
    the same bucketed batches within 1e-5, training compiled, in a graph or two, not one per layer or
    step."""
    deep = variant_of(tiny_model_dir, tmp_path / "deep", seed=0, num_layers=5)  # 5 layers, 5 steps: a graph per layer or per step would show in the count
    common = ["--model", str(deep), "--task", "demo", "--target-langs", "de,zh", "--batch-size", "8", "--max-steps", "5",
              "--log-every", "1", "--dropout", "0", "--no-test", "--no-group-by-length", "--lr", "2e-3", "--eval-every", "5",
              "--no-alignment", "--bucket", "16"]
    runs = {"ddp": ["--method", "xeroalign", "--grad-accum", "2"], "shard": ["--method", "xmixup", "--shard"]}
    for name, argv in runs.items():
        train.main(common + argv + ["--out", str(tmp_path / f"{name}-eager")])
    spawn([(common + argv + ["--compile"], tmp_path / name) for name, argv in runs.items()])
    for name in runs:
        assert_same_losses(tmp_path / f"{name}-eager", tmp_path / name, name)
        graphs = [int((tmp_path / name / f"graphs-{rank}.txt").read_text()) for rank in (0, 1)]
        # DDP: the model's graph and the loss's, which its second length may compile again (the loss
        # alone is compiled: evaluation is eager); sharded: the layers' graph and evaluation's
        assert all(2 <= count <= 3 for count in graphs) if name == "ddp" else graphs == [2, 2], (name, graphs)
