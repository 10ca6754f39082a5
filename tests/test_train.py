"""The training loop on a tiny random model: DDP against one process, exact resume, the output files."""
import json

import pytest
import torch
import torch.multiprocessing as mp

import train
from conftest import free_port, join_process_group_env
from minxlt.errors import InputError
from minxlt.run import flags

COMMON = ["--task", "demo", "--target-langs", "de,zh", "--batch-size", "8", "--eval-every", "3", "--no-alignment",
          "--eval-batch-size", "32"]


def losses(out):
    return [r["loss"] for r in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "loss" in r]


def worker(rank, world_size, port, argv, result_dir):
    join_process_group_env(rank, world_size, port)
    model = train.main(argv)
    torch.save(model.state_dict(), f"{result_dir}/rank{rank}.pt")


@pytest.mark.parametrize("method,accum", [("xeroalign", "1"), ("translate-train", "2")])
def test_two_processes_train_like_one(tmp_path, tiny_model_dir, method, accum):
    # batch 8 over 2 processes and maybe 2 micro-steps; the last batch of an epoch is uneven; batches of
    # mixed lengths, whose losses fall within 5 steps (length-grouped ones differ by their texts)
    argv = ["--model", str(tiny_model_dir), *COMMON, "--method", method, "--grad-accum", accum, "--max-steps", "5",
            "--dropout", "0", "--lr", "2e-3", "--log-every", "1", "--no-group-by-length"]
    train.main(argv + ["--out", str(tmp_path / "one")])
    mp.spawn(worker, args=(2, free_port(), argv + ["--out", str(tmp_path / "two")], str(tmp_path)), nprocs=2)
    rank0, rank1 = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)  # DDP keeps the ranks identical
    # The same loss curve. (The weights agree only to about the learning rate: Adam's update is about
    # +-lr wherever a gradient is near zero, so float-order noise there flips its sign.)
    curve = losses(tmp_path / "one")
    assert losses(tmp_path / "two") == pytest.approx(curve, rel=1e-5) and curve[-1] < curve[0]
    results = [json.loads((tmp_path / d / "results.json").read_text()) for d in ("one", "two")]
    assert {l: r["accuracy"] for l, r in results[0].items() if l in ("en", "de", "zh")} == \
           {l: r["accuracy"] for l, r in results[1].items() if l in ("en", "de", "zh")}


def test_uneven_last_batch_counts_every_example_once(tmp_path, tiny_model_dir):
    # 336 examples in batches of 10: the 34th batch has 6, which 4 processes share as 2+2+1+1
    import data
    batches = data.epoch_batches(list(range(336)), 10, epoch=0, seed=0)
    seen = [i for b in batches for r in range(4) for i, w in zip(*data.shard(b, r, 4)) if w]
    assert sorted(seen) == list(range(336))


def test_resume_gives_the_same_weights(tmp_path, tiny_model_dir):
    argv = ["--model", str(tiny_model_dir), *COMMON, "--method", "xeroalign", "--max-steps", "7"]  # dropout on
    full = train.main(argv + ["--out", str(tmp_path / "full")])
    assert train.main(argv + ["--out", str(tmp_path / "split"), "--stop-at", "4"]) is None  # stopped before its end
    assert not (tmp_path / "split" / "results.json").exists()
    resumed = train.main(argv + ["--out", str(tmp_path / "split"), "--resume"])
    assert all(torch.equal(v, resumed.state_dict()[k]) for k, v in full.state_dict().items())
    assert losses(tmp_path / "split") == losses(tmp_path / "full")


def test_outputs_of_a_run(tmp_path, tiny_model_dir):
    out = tmp_path / "run"
    train.main(["--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--max-steps", "3", "--log-every", "1", "--out", str(out)])
    results = json.loads((out / "results.json").read_text())
    assert set(results) >= {"en", "de", "zh", "average", "transfer_gap"}
    assert all(0 <= results[l]["accuracy"] <= 1 for l in ("en", "de", "zh"))
    assert results["average"]["accuracy"] == pytest.approx((results["de"]["accuracy"] + results["zh"]["accuracy"]) / 2)
    assert results["transfer_gap"]["accuracy"] == pytest.approx(results["en"]["accuracy"] - results["average"]["accuracy"])
    assert "| en (source) |" in (out / "results.md").read_text()
    assert results["settings"]["group_by_length"] is True  # zero-shot's loss is per text: batches of similar lengths by default
    records = [json.loads(line) for line in open(out / "log.jsonl")]
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3] and any("dev_accuracy" in r for r in records)
    from model import Classifier
    model, tokenizer, task = Classifier.load(out / "best")  # an ordinary checkpoint directory plus the head
    assert task["labels"][0] == "weather" and model.encoder.config.hidden_size == 32


def test_a_log_record_holds_the_mean_of_its_steps(tmp_path, tiny_model_dir):
    """--log-every N: one record per N steps (and at each evaluation), the mean of its steps' losses
    and parts; Unicoder's parts (a task per step) each over the steps that had it."""
    for method in ("xeroalign", "unicoder"):
        argv = ["--model", str(tiny_model_dir), *COMMON, "--method", method, "--max-steps", "7", "--eval-every", "5"]
        train.main(argv + ["--log-every", "1", "--out", str(tmp_path / method / "each")])
        train.main(argv + ["--log-every", "3", "--out", str(tmp_path / method / "three")])
        each = [r for r in map(json.loads, open(tmp_path / method / "each" / "log.jsonl")) if "loss" in r]
        three = [r for r in map(json.loads, open(tmp_path / method / "three" / "log.jsonl")) if "loss" in r]
        assert [r["step"] for r in three] == [1, 3, 5, 6, 7]  # the first step, every 3 steps, the evaluations (5, 7)
        for record, steps in zip(three, ([1], [2, 3], [4, 5], [6], [7])):
            for key in set(record) - {"step", "lr", "seconds"}:
                values = [r[key] for r in each if r["step"] in steps and key in r]
                assert record[key] == pytest.approx(sum(values) / len(values), rel=1e-6), (method, key, steps)
            assert record["lr"] == each[steps[-1] - 1]["lr"]


def test_resume_without_checkpoint_says_so(tmp_path, tiny_model_dir):
    with pytest.raises(InputError, match="checkpoint.pt not found"):
        train.main(["--model", str(tiny_model_dir), *COMMON, "--out", str(tmp_path), "--resume"])


def test_non_finite_loss_stops_with_advice(tmp_path, tiny_model_dir, capsys):
    argv = ["--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--max-steps", "30", "--lr", "1e6",
            "--max-grad-norm", "0", "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as stop:
        train.main(argv)
    assert stop.value.code == 1 and "try a lower --lr" in capsys.readouterr().err


def test_a_short_run_that_went_wrong_says_so_naming_the_learning_rate(tmp_path, tiny_model_dir, capsys):
    # 8 steps: too few for the divergence check (about 20 of log), enough for the loss to end 5 times above its start
    argv = ["--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--max-steps", "8", "--log-every", "1", "--lr", "10",
            "--max-grad-norm", "0", "--warmup", "0"]
    train.main(argv + ["--out", str(tmp_path / "wrong")])
    logged = losses(tmp_path / "wrong")
    assert logged[-1] > 5 * logged[0] and "the run went wrong; try a lower --lr (now 10.0)" in capsys.readouterr().err
    assert "the run went wrong" in json.loads((tmp_path / "wrong" / "results.json").read_text())["warning"]
    train.main([a if a != "10" else "1e-3" for a in argv] + ["--out", str(tmp_path / "right")])
    assert "warning" not in json.loads((tmp_path / "right" / "results.json").read_text()) and "went wrong" not in capsys.readouterr().err


def test_patience_stops_after_evaluations_without_a_better_dev_score_and_tests_the_best(tmp_path, tiny_model_dir):
    # at a learning rate too small to change a prediction, the dev score never improves after the first evaluation
    argv = ["--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--max-steps", "20", "--eval-every", "2", "--lr", "1e-12",
            "--patience", "2", "--out", str(tmp_path)]
    train.main(argv)
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "dev_accuracy" in r] == [2, 4, 6]  # the best at 2, then two without a better score
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["best_step"] == 2 and max(r["step"] for r in records) == 6 and results["settings"]["patience"] == 2


def test_clip_value_clips_each_gradient_element(tiny_model_dir):
    # train.train_step with plain SGD at learning rate 1: each parameter moves by its clipped gradient, so by at most V
    from conftest import make_run, make_method
    from minxlt.text.tokenizer import Tokenizer
    from model import Classifier, Encoder
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    for clip, norm in ((1e-4, 0.0), (0.0, 0.0)):
        run = make_run(["a", "b", "c"], tokenizer=tokenizer)
        method = make_method("zero-shot", run, "--clip-value", str(clip), "--max-grad-norm", str(norm))
        torch.manual_seed(0)
        model = Classifier(Encoder.from_pretrained(tiny_model_dir), 3)
        before = [p.detach().clone() for p in model.parameters()]
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        ids, mask = tokenizer.pad([tokenizer.encode(t) for t in ("one two", "three four five", "six")])
        batch = {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0, 1, 2]), "weights": torch.ones(3)}
        phase = method.phases([])[0]
        train.train_step(method.settings, run, phase, model, [(batch, 1.0)], optimizer, scheduler, torch.amp.GradScaler(enabled=False), None)
        moved = max((p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before))
        # clipped: the largest move is the bound, to float32's rounding of the weights; unclipped, many times it
        assert (clip * 0.999 < moved < clip + 1e-6) if clip else moved > 1e-3, (clip, moved)


def test_evaluation_runs_under_the_run_s_autocast_unless_asked_for_float32():
    settings = lambda *given: flags.Settings(dict(vars(flags.parse(["--amp", "bf16", *given])), device="cpu"))
    model = torch.nn.Linear(2, 2)
    with train.evaluating(settings(), model) as evaluated:
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16 and evaluated is model
    with train.evaluating(settings("--eval-float32"), model, model.weight) as evaluated:  # a part: itself, unsharded
        assert not torch.is_autocast_enabled("cpu") and evaluated is model.weight


def test_checkpoint_with_an_lm_head_trains_under_ddp(tmp_path, tiny_model_dir):
    # XLM-R checkpoints carry a masked-LM head that classification never uses: it is frozen, so DDP
    # does not wait for its gradients
    import shutil

    from model import Encoder
    directory = tmp_path / "with-head"
    shutil.copytree(tiny_model_dir, directory)
    encoder = Encoder.from_pretrained(directory)
    encoder.add_lm_head()
    encoder.save_pretrained(directory)
    argv = ["--model", str(directory), *COMMON, "--method", "zero-shot", "--max-steps", "2", "--out", str(tmp_path / "run")]
    mp.spawn(worker, args=(2, free_port(), argv, str(tmp_path)), nprocs=2)
    assert torch.equal(torch.load(tmp_path / "rank0.pt")["head.out_proj.weight"], torch.load(tmp_path / "rank1.pt")["head.out_proj.weight"])


def test_two_processes_on_a_word_level_task(tmp_path, tiny_model_dir):
    # shares of the global batch are counted in scored tokens, so the mean is the same
    argv = ["--model", str(tiny_model_dir), *COMMON, "--task", "demo-slots", "--method", "translate-train",
            "--max-steps", "4", "--dropout", "0", "--lr", "2e-3"]
    train.main(argv + ["--out", str(tmp_path / "one")])
    mp.spawn(worker, args=(2, free_port(), argv + ["--out", str(tmp_path / "two")], str(tmp_path)), nprocs=2)
    assert losses(tmp_path / "two") == pytest.approx(losses(tmp_path / "one"), rel=1e-5)
    results = json.loads((tmp_path / "one" / "results.json").read_text())
    assert {"f1", "precision", "recall", "word_accuracy"} <= set(results["de"])
    saved, pretrained = (json.loads((folder / "config.json").read_text()) for folder in (tmp_path / "one" / "best", tiny_model_dir))
    assert saved["hidden_dropout_prob"] == pretrained["hidden_dropout_prob"] > 0  # --dropout 0 was the run's alone


@pytest.mark.parametrize("script,args,message", [
    ("train.py", ["--task", "udpos", "--data", "{tmp}"], "error: task udpos has no language(s) en in {tmp} (a language's files: "
                                                        "<lang>_pud-ud-test.conllu); it has none"),
    ("train.py", ["--task", "demo", "--target-langs", "xx"], "error: task demo has no language(s) xx"),
    ("evaluate.py", ["--checkpoint", "{tmp}"], "error: {tmp}: no task.json"),
])
def test_command_line_mistakes_get_a_message_not_a_traceback(tmp_path, tiny_model_dir, script, args, message):
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    args = [a.format(tmp=tmp_path) for a in args] + (["--model", str(tiny_model_dir)] if script == "train.py" else [])
    done = subprocess.run([sys.executable, str(root / script), *args], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith(message.format(tmp=tmp_path)), done.stderr


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_xeroalign_on_tags_aligns_cls_or_mean_pooled_states(pooling):
    # a tagging batch: sources first, then one translation each; the alignment term of the loss is
    # the MSE between the chosen sentence vectors of the final layer
    from conftest import make_method, make_run, padded_pairs, sharp_encoder
    from model import Classifier
    torch.manual_seed(0)
    model = Classifier(sharp_encoder(2), 5, "token", pooling).eval()
    source, source_mask, target, target_mask = padded_pairs()
    ids, mask = torch.cat([source, target]), torch.cat([source_mask, target_mask])
    labels = torch.where(mask.bool(), torch.randint(0, 5, ids.shape), -100)
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels, "weights": torch.ones(4)}
    _, parts = make_method("xeroalign", make_run(range(5), "word")).loss(model, batch)
    hidden = model.encoder(ids, mask)
    if pooling == "cls":
        vectors = hidden[:, 0]
    else:  # mean over each text's real tokens, written out
        vectors = torch.stack([hidden[i, mask[i].bool()].mean(0) for i in range(len(ids))])
    expected = ((vectors[:4] - vectors[4:]) ** 2).mean()
    assert parts["align"].item() == pytest.approx(expected.item(), rel=1e-5)


def test_filter_and_xmixup_honour_mean_pooling():
    from conftest import padded_pairs, sharp_encoder
    from fusion import Filter, filter_encode
    from mixup import XMixup, mixup_encode
    from model import Classifier
    classifier = Classifier(sharp_encoder(3), 5, "linear", pooling="mean").eval()
    source, source_mask, target, target_mask = pairs = padded_pairs()
    mean = lambda h, mask: (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)  # written out
    with torch.no_grad():
        hs, ht = filter_encode(classifier.encoder, *pairs, m=1, k=1)
        logits = Filter(classifier, 1, 1)(*pairs)
        assert torch.allclose(logits[1], classifier.head.out_proj(mean(ht, target_mask)), atol=1e-5)
        model = XMixup(classifier, 2)
        hs, ht, _ = mixup_encode(classifier.encoder, model.ratio_net, *pairs, 2)
        assert torch.allclose(model(*pairs)[0], classifier.head.out_proj(mean(hs, source_mask)), atol=1e-5)


def test_alignment_pooling_is_chosen_and_recorded(tmp_path, tiny_model_dir):
    argv = ["--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "8", "--method", "zero-shot", "--max-steps", "1"]
    runs = {}
    for pooling in ("mean", "cls"):
        train.main(argv + ["--alignment-pooling", pooling, "--out", str(tmp_path / pooling)])
        runs[pooling] = json.loads((tmp_path / pooling / "results.json").read_text())
        assert runs[pooling]["alignment_pooling"] == pooling
    assert runs["mean"]["alignment"]["de"]["cka_before"] != runs["cls"]["alignment"]["de"]["cka_before"]
    assert "CKA and retrieval compare the final layer's <s> vectors" in (tmp_path / "cls" / "results.md").read_text()
    # by default, what the method aligns: XeroAlign its --pooling (<s>), the others the tokens' mean
    from conftest import make_method, make_run
    pooling = lambda name, *given: make_method(name, make_run(["a", "b"]), *given).settings.alignment_pooling
    assert (pooling("xeroalign"), pooling("xeroalign", "--pooling", "mean"), pooling("zero-shot"), pooling("xmixup")) == ("cls", "mean", "mean", "mean")


def test_prediction_files_agree_with_the_scores(tmp_path, tiny_model_dir):
    from minxlt import tasks
    out = tmp_path / "run"
    train.main(["--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--max-steps", "3", "--out", str(out)])
    results, task = json.loads((out / "results.json").read_text()), tasks.load_task("demo", targets=["de", "zh"])
    for lang in ("en", "de", "zh"):
        rows = [json.loads(line) for line in open(out / "predictions" / f"{lang}.jsonl")]
        assert [r["id"] for r in rows] == [e.id for e in task.test[lang]]  # every test example, in order
        right = sum(r["prediction"] == e.label for r, e in zip(rows, task.test[lang]))
        assert right / len(rows) == pytest.approx(results[lang]["accuracy"])
    train.main(["--model", str(tiny_model_dir), *COMMON, "--task", "demo-slots", "--method", "zero-shot", "--max-steps", "1",
                "--out", str(tmp_path / "slots")])
    rows = [json.loads(line) for line in open(tmp_path / "slots" / "predictions" / "de.jsonl")]
    slots = tasks.load_task("demo-slots", targets=["de"]).test["de"]
    assert [len(r["prediction"]) for r in rows] == [len(e.words) for e in slots]  # a tag per word


def test_tensorboard_gets_what_the_log_gets(tmp_path, tiny_model_dir, monkeypatch):
    """With torch.utils.tensorboard importable, every number of log.jsonl is a scalar at its step."""
    import sys
    import types
    scalars = []

    class SummaryWriter:
        def __init__(self, folder):
            self.folder = folder

        def add_scalar(self, tag, value, step):
            scalars.append((self.folder, tag, value, step))

        def flush(self):
            pass

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", types.SimpleNamespace(SummaryWriter=SummaryWriter))
    out = tmp_path / "run"
    train.main(["--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--max-steps", "4", "--eval-every", "2",
                "--dev-langs", "all", "--out", str(out)])
    expected = []
    for line in (out / "log.jsonl").read_text().splitlines():
        record = json.loads(line)
        for key, value in record.items():
            for name, number in (value.items() if isinstance(value, dict) else [("", value)]):
                if key != "step":
                    expected.append((str(out / "tensorboard"), f"{key}/{name}" if name else key, number, record["step"]))
    assert scalars == expected and {"loss", "lr", "dev_accuracy/de"} <= {tag for _, tag, _, _ in scalars}

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # not installed: the run logs to log.jsonl alone
    train.main(["--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--max-steps", "2", "--out", str(tmp_path / "plain")])
    assert (tmp_path / "plain" / "log.jsonl").exists() and not (tmp_path / "plain" / "tensorboard").exists()


@pytest.mark.parametrize("method", ["xeroalign", "unicoder"])
def test_batches_built_by_loader_workers_are_the_same(tmp_path, tiny_model_dir, method):
    """Two worker processes build the steps' batches ahead, in turn: the same batches in the same
    order, so the same losses and weights (dropout on; Unicoder's draws follow from the step)."""
    argv = ["--model", str(tiny_model_dir), *COMMON, "--method", method, "--max-steps", "5", "--log-every", "1", "--no-test"]
    inline = train.main(argv + ["--workers", "0", "--out", str(tmp_path / "inline")])
    ahead = train.main(argv + ["--workers", "2", "--out", str(tmp_path / "ahead")])
    assert losses(tmp_path / "ahead") == losses(tmp_path / "inline")
    assert all(torch.equal(v, ahead.state_dict()[k]) for k, v in inline.state_dict().items())


def test_compiled_model_trains_as_the_plain_one(tmp_path, tiny_model_dir):
    """--compile (TorchInductor: the method's forward, loss and backward as one graph, batches padded
    to buckets of 16 tokens and filled to --batch-size with weight 0) gives the plain model's losses
    within 1e-5 (without dropout, whose compiled random draws differ)."""
    argv = ["--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--max-steps", "3", "--log-every", "1", "--dropout", "0",
            "--no-test"]
    train.main(argv + ["--out", str(tmp_path / "plain")])
    train.main(argv + ["--compile", "--out", str(tmp_path / "compiled")])
    assert losses(tmp_path / "compiled") == pytest.approx(losses(tmp_path / "plain"), rel=1e-5)


def test_gradient_checkpointing_keeps_less_and_changes_nothing(tiny_model_dir, tmp_path):
    from torch.utils.checkpoint import checkpoint

    import model
    from model import Encoder
    encoder = Encoder.from_pretrained(tiny_model_dir).train()  # dropout on: the recomputed layers must draw the same masks
    ids = torch.randint(5, 100, (4, 24))

    def step(on):
        encoder.checkpoint_layers(on)
        encoder.zero_grad()
        torch.manual_seed(0)
        saved = []  # what autograd keeps for backward outside the checkpointed layers (inside them: nothing)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel() * t.element_size()) or t, lambda t: t):
            loss = encoder(ids).pow(2).mean()
        loss.backward()
        return loss, sum(saved), [p.grad.clone() for p in encoder.parameters() if p.grad is not None]

    (plain, kept_plain, grads_plain), (ckpt, kept_ckpt, grads_ckpt) = step(False), step(True)
    assert torch.equal(plain, ckpt) and len(grads_plain) == len(grads_ckpt) and all(map(torch.equal, grads_plain, grads_ckpt))
    assert kept_ckpt < kept_plain / 4
    argv = ["--model", str(tiny_model_dir), *COMMON, "--method", "filter", "--max-steps", "4", "--log-every", "1"]
    train.main(argv + ["--out", str(tmp_path / "plain")])
    recomputed = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model, "checkpoint", lambda *args, **kwargs: recomputed.append(1) or checkpoint(*args, **kwargs))
        train.main(argv + ["--out", str(tmp_path / "checkpointed"), "--gradient-checkpointing"])
    assert len(recomputed) >= 4  # layers were checkpointed at every step
    assert losses(tmp_path / "plain") == losses(tmp_path / "checkpointed") and len(losses(tmp_path / "plain")) == 4


def test_loader_processes_leave_ctrl_c_to_the_training_process(tiny_model_dir):
    # Ctrl-C in a terminal reaches the loader processes too. They ignore it: the training processes
    # stop at a step they agree on (at the next log record), and need the batches up to it.
    import os
    import signal
    import time

    from minxlt.run import bookkeeping, flags
    args = flags.parse(["--model", str(tiny_model_dir), *COMMON, "--method", "xeroalign", "--max-steps", "40", "--workers", "2"])
    settings, run = flags.resolve(args, train.load_run(args, tiny_model_dir, "cpu", 0, 1))
    method = flags.METHODS[settings.method](settings, run)
    phases = method.phases(method.training_items())
    batches = bookkeeping.batch_loader(settings, method, phases, 0)
    next(batches)
    for worker in batches._workers:
        os.kill(worker.pid, signal.SIGINT)
    time.sleep(1)
    assert len([next(batches) for _ in range(30)]) == 30  # past what was built ahead (4 steps per worker)
    assert all(worker.is_alive() for worker in batches._workers)


def test_the_optimizer_is_freed_before_the_final_test(tmp_path, tiny_model_dir, monkeypatch):
    # AdamW's moments (twice the trained weights) are gone when the test loads OUT/best: a large run needs the room
    import gc
    import weakref
    optimizers, alive = [], []
    real = torch.optim.AdamW

    class Tracked(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            optimizers.append(weakref.ref(self))
    monkeypatch.setattr(torch.optim, "AdamW", Tracked)
    test = train.test
    monkeypatch.setattr(train, "test", lambda *args: (gc.collect(), alive.extend(o() for o in optimizers), test(*args)))
    train.main(["--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--max-steps", "2", "--out", str(tmp_path / "run")])
    assert len(optimizers) == 1 and alive == [None]


def test_a_run_s_output_in_a_file_keeps_each_record_on_a_line_of_its_own(tmp_path, tiny_model_dir):
    # stdout and stderr in one file (python train.py > log 2>&1, or reproduce.py's logs), stdout block-buffered as
    # it is there: the progress bar a line at a time, and each "step N: loss" record a line of its own, in its place
    import os
    import subprocess
    import sys
    from pathlib import Path
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(tmp_path / "log", "w") as log:
        subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "train.py"),
                        "--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--max-steps", "6",
                        "--out", str(tmp_path / "run")],
                       stdout=log, stderr=log, env=env, check=True)
    text = (tmp_path / "log").read_bytes().decode()  # as written: no newline translated
    lines = text.split("\n")
    records = [i for i, line in enumerate(lines) if ": loss " in line]
    assert "\r" not in text and [lines[i].split(":")[0] for i in records] == ["step 3", "step 6"]
    assert records[-1] < next(i for i, line in enumerate(lines) if "test split" in line)


def test_one_step_is_one_step(tmp_path, tiny_model_dir, capsys):
    train.main(["--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--max-steps", "1",
                "--out", str(tmp_path / "run")])
    assert "zero-shot on demo: 1 step of 8 from " in capsys.readouterr().err


def test_fp16_on_the_cpu_scales_its_loss(tmp_path, tiny_model_dir):
    import warnings
    out = tmp_path / "run"
    argv = ["--model", str(tiny_model_dir), *COMMON, "--amp", "fp16", "--device", "cpu", "--max-steps", "2", "--no-test",
            "--log-every", "1", "--out", str(out)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # torch's "GradScaler is enabled, but CUDA is not available"
        assert train.main(argv + ["--stop-at", "1"]) is None
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=False)
    assert checkpoint["scaler"]["scale"] > 1  # the loss was scaled
    torch.save(dict(checkpoint, scaler={}), out / "checkpoint.pt")  # as a CPU run's before its scaler ran: resumed
    assert train.main(argv + ["--resume"]) is not None and all(torch.isfinite(torch.tensor(losses(out))))
