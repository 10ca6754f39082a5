"""FILTER (fusion.py): its degenerate settings against the encoder's own forward, masking, the
self-teaching loss, and the two-stage run."""
import json
import math

import pytest
import torch

from conftest import padded_batch, padded_pairs, sharp_encoder
from fusion import Filter, filter_encode
from losses import self_teaching_loss
from minxlt.errors import InputError
from model import Classifier


@pytest.mark.parametrize("model_type", ["xlm-roberta", "bert", "xlm-roberta-xl"])
def test_all_local_layers_is_translate_train(model_type):
    enc = sharp_encoder(4, model_type)
    source, source_mask, target, target_mask = padded_pairs()
    with torch.no_grad():
        hs, ht = filter_encode(enc, source, source_mask, target, target_mask, m=4, k=0)
        for h, ids, mask in ((hs, source, source_mask), (ht, target, target_mask)):
            n = int(mask.sum(1).max())
            alone = enc(ids[:, :n], mask[:, :n])  # each text alone, padded only to its own batch
            assert (h[:, :n] - alone)[mask[:, :n].bool()].abs().max() < 1e-5


@pytest.mark.parametrize("model_type", ["xlm-roberta", "bert", "xlm-roberta-xl"])
def test_all_fusion_layers_is_the_plain_concatenation(model_type):
    enc = sharp_encoder(4, model_type)
    source, source_mask, target, target_mask = padded_pairs()
    with torch.no_grad():
        hs, ht = filter_encode(enc, source, source_mask, target, target_mask, m=0, k=4)
        for b in range(len(source)):
            s, t = source[b][source_mask[b].bool()], target[b][target_mask[b].bool()]
            joined = torch.cat([s, t])[None]  # no padding in between
            start = 0 if model_type == "bert" else 2  # positions count from each text's own start
            positions = torch.cat([torch.arange(len(s)), torch.arange(len(t))])[None] + start
            plain = enc(joined, position_ids=positions)[0]
            assert (hs[b, :len(s)] - plain[:len(s)]).abs().max() < 1e-5
            assert (ht[b, :len(t)] - plain[len(s):]).abs().max() < 1e-5


def test_pre_ln_fusion_is_the_layers_run_by_hand():
    """m = 1 local, k = 2 fusion and 1 domain layer of a pre-LN encoder (XLM-R XL's layout), each
    layer written out: x + Attn(LN_a(x)), then x + FFN(LN_f(x)); the final LayerNorm at the end."""
    import torch.nn.functional as F
    enc = sharp_encoder(4, "xlm-roberta-xl")
    source, source_mask, target, target_mask = padded_pairs()

    def layer(i, x, mask):
        one = enc.layers[i]
        x = x + one.attention(one.attn_norm(x), mask)
        return x + one.ffn_out(F.gelu(one.ffn_in(one.ffn_norm(x))))

    with torch.no_grad():
        hs, ht = filter_encode(enc, source, source_mask, target, target_mask, m=1, k=2)
        s, t = layer(0, enc.embed(source), source_mask), layer(0, enc.embed(target), target_mask)
        fused, fused_mask = torch.cat([s, t], 1), torch.cat([source_mask, target_mask], 1)
        fused = layer(2, layer(1, fused, fused_mask), fused_mask)
        T = source.shape[1]
        s, t = layer(3, fused[:, :T], source_mask), layer(3, fused[:, T:], target_mask)
        final = lambda x: F.layer_norm(x, (36,), enc.norm.weight, enc.norm.bias, enc.config.layer_norm_eps)
        for ours, hand, mask in ((hs, final(s), source_mask), (ht, final(t), target_mask)):
            assert (ours - hand)[mask.bool()].abs().max() < 1e-5


def test_no_fusion_means_no_influence_across_the_pair():
    enc = sharp_encoder(4)
    source, source_mask, target, target_mask = padded_pairs()
    other_source, other_mask = padded_batch(101, [5, 8, 3, 9])  # different sources, lengths and padding
    with torch.no_grad():
        _, ht = filter_encode(enc, source, source_mask, target, target_mask, m=2, k=0)
        _, again = filter_encode(enc, other_source, other_mask, target, target_mask, m=2, k=0)
        _, fused = filter_encode(enc, other_source, other_mask, target, target_mask, m=2, k=1)
    real = target_mask.bool()
    assert (ht - again)[real].abs().max() < 1e-5
    assert (ht - fused)[real].abs().max() > 1e-2  # with a fusion layer the source does matter


def test_padding_is_never_attended_in_fusion_layers():
    enc = sharp_encoder(4)
    source, source_mask, target, target_mask = padded_pairs()
    noisy_source, noisy_target = source.clone(), target.clone()
    noisy_source[source_mask == 0] = torch.randint(4, 101, (int((source_mask == 0).sum()),))
    noisy_target[target_mask == 0] = torch.randint(4, 101, (int((target_mask == 0).sum()),))
    with torch.no_grad():
        a = filter_encode(enc, source, source_mask, target, target_mask, m=1, k=2)
        b = filter_encode(enc, noisy_source, source_mask, noisy_target, target_mask, m=1, k=2)
    for x, y, mask in zip(a, b, (source_mask, target_mask)):
        assert (x - y)[mask.bool()].abs().max() < 1e-5


def test_filter_adds_no_parameters_and_checks_depth():
    classifier = Classifier(sharp_encoder(4), 5)
    assert sum(p.numel() for p in Filter(classifier, 1, 1).parameters()) == sum(p.numel() for p in classifier.parameters())
    with pytest.raises(ValueError, match="m \\+ k <= 4"):
        filter_encode(classifier.encoder, *padded_pairs(), m=3, k=2)


def test_self_teaching_loss_by_hand():
    student = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    teacher = torch.tensor([[math.log(3.0), 0.0], [0.0, 0.0]])  # p_teacher = (3/4, 1/4) and (1/2, 1/2)
    p_student = [(0.5, 0.5), (math.e / (1 + math.e), 1 / (1 + math.e))]
    p_teacher = [(0.75, 0.25), (0.5, 0.5)]
    kl = [sum(t * math.log(t / s) for t, s in zip(pt, ps)) for pt, ps in zip(p_teacher, p_student)]
    assert self_teaching_loss(student, teacher).item() == pytest.approx(sum(kl) / 2, abs=1e-6)
    assert self_teaching_loss(student, teacher, torch.tensor([0.0, 1.0])).item() == pytest.approx(kl[1], abs=1e-6)
    assert self_teaching_loss(teacher, teacher).item() == pytest.approx(0.0, abs=1e-7)


def test_self_teaching_loss_per_token_with_mask():
    torch.manual_seed(0)
    student, teacher = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    mask = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    kl = (teacher.softmax(-1) * (teacher.log_softmax(-1) - student.log_softmax(-1))).sum(-1)
    assert self_teaching_loss(student, teacher, mask).item() == pytest.approx(((kl[0, 0] + kl[0, 2] + kl[1, 2]) / 3).item(), abs=1e-6)


def test_self_teaching_loss_as_the_authors_code_computes_it():
    # FILTER's modeling_xlm_roberta.py: KLDivLoss()(log_softmax(student / T), softmax(teacher / T)) * T * T, at torch's default
    # reduction, the mean over examples x classes; written out here with numpy-free loops over a 3-example, 4-class batch
    torch.manual_seed(1)
    student, teacher, T = torch.randn(3, 4), torch.randn(3, 4), 0.1
    total = 0.0
    for s_row, t_row in zip(student.tolist(), teacher.tolist()):
        zs, zt = [math.exp(v / T - max(s_row) / T) for v in s_row], [math.exp(v / T - max(t_row) / T) for v in t_row]
        ps, pt = [z / sum(zs) for z in zs], [z / sum(zt) for z in zt]
        total += sum(t * (math.log(t) - math.log(s)) for t, s in zip(pt, ps))
    assert self_teaching_loss(student, teacher, temperature=T, per_class=True).item() == pytest.approx(total / 12 * T * T, rel=1e-4)
    assert self_teaching_loss(student, teacher, temperature=T).item() == pytest.approx(total / 3 * T * T, rel=1e-4)  # summed over classes
    assert self_teaching_loss(student, teacher, temperature=1.0).item() == pytest.approx(self_teaching_loss(student, teacher).item())


def test_the_kl_of_fp16_logits_masked_at_minus_1e4_is_finite_at_temperature_0_1():
    student, teacher = torch.randn(2, 3, 6), torch.randn(2, 3, 6)
    student[..., 4:], teacher[..., 4:] = -1e4, -1e4  # a joint task's head: another label set's slots
    expected = self_teaching_loss(student, teacher, temperature=0.1)
    got = self_teaching_loss(student.half(), teacher.half(), temperature=0.1)
    assert torch.isfinite(got) and got.item() == pytest.approx(expected.item(), rel=1e-2)


def test_no_gradient_reaches_the_teacher():
    student = torch.randn(3, 5, requires_grad=True)
    teacher = torch.randn(3, 5, requires_grad=True)
    self_teaching_loss(student, teacher).backward()
    assert teacher.grad is None and student.grad.abs().sum() > 0


@pytest.mark.parametrize("task", ["demo", "demo-slots"])
def test_two_stage_run(tmp_path, tiny_model_dir, task):
    import train
    common = ["--model", str(tiny_model_dir), "--task", task, "--method", "filter", "--target-langs", "de,zh",
              "--batch-size", "8", "--max-steps", "3", "--eval-every", "3", "--no-alignment", "--dropout", "0"]
    train.main(common + ["--out", str(tmp_path / "teacher"), "--max-steps", "8", "--lr", "5e-3"])  # unlike the student's start
    teacher = tmp_path / "teacher" / "best"
    assert json.loads((teacher / "task.json").read_text())["filter_m"] == 1
    train.main(common + ["--teacher", str(teacher), "--out", str(tmp_path / "on-the-fly")])
    cache = tmp_path / "teacher.pt"
    train.main(common + ["--teacher", str(teacher), "--teacher-cache", str(cache), "--out", str(tmp_path / "cache-written")])
    assert cache.exists()
    train.main(common + ["--teacher-cache", str(cache), "--out", str(tmp_path / "cache-read")])
    logs = {run: [json.loads(line) for line in open(tmp_path / run / "log.jsonl") if '"loss"' in line]
            for run in ("on-the-fly", "cache-written", "cache-read")}
    kl = {run: [r["kl"] for r in records] for run, records in logs.items()}
    assert all(k > 1e-3 for k in kl["on-the-fly"])
    assert kl["cache-written"] == kl["cache-read"] == pytest.approx(kl["on-the-fly"], rel=1e-4)
    results = json.loads((tmp_path / "cache-read" / "results.json").read_text())
    assert {"en", "de", "zh", "average"} <= set(results)
    if task == "demo-slots":  # a cache of other encodings is refused, not read as zero logits past its rows
        with pytest.raises(InputError, match=r"teacher.pt: the teacher's logits of .* cover \d+ tokens, its encoding "
                                             r"here 8: the cache was written with another --max-length"):
            train.main(common + ["--teacher-cache", str(cache), "--max-length", "8", "--out", str(tmp_path / "short")])


def test_teacher_must_be_a_filter_model(tmp_path, tiny_model_dir):
    import train
    common = ["--model", str(tiny_model_dir), "--target-langs", "de", "--batch-size", "8", "--max-steps", "1",
              "--eval-every", "1", "--no-alignment"]
    train.main(common + ["--method", "zero-shot", "--out", str(tmp_path / "plain")])
    with pytest.raises(ValueError, match="must be a FILTER model"):
        train.main(common + ["--method", "filter", "--teacher", str(tmp_path / "plain" / "best"), "--out", str(tmp_path / "s")])


def test_a_teacher_that_runs_in_make_batch_keeps_batches_in_the_training_process(tmp_path, tiny_model_dir, capsys,
                                                                                 monkeypatch):
    # A forked loader process cannot run a model on CUDA: with a teacher to run, batches are made
    # inline there; with its logits all cached, or on the CPU, loader processes may make them.
    from types import SimpleNamespace

    import train
    from minxlt.run import bookkeeping, flags
    from minxlt.run.flags import METHODS

    def workers(asked, device, shard=False):  # the loader processes batch_loader starts for the student's batches
        started = []
        monkeypatch.setattr(torch.utils.data, "DataLoader", lambda dataset, num_workers, **_: started.append(num_workers) or ())
        student = SimpleNamespace(run=SimpleNamespace(device=device), teacher=method.teacher)
        bookkeeping.batch_loader(SimpleNamespace(workers=asked, shard=shard), student, [], 0)
        return started[0]
    common = ["--model", str(tiny_model_dir), "--method", "filter", "--target-langs", "de", "--batch-size", "8", "--max-steps", "2",
              "--eval-every", "2", "--no-alignment", "--no-test"]
    train.main(common + ["--out", str(tmp_path / "teacher")])
    args = flags.parse(common + ["--teacher", str(tmp_path / "teacher" / "best"), "--out", str(tmp_path / "student")])
    settings, run = flags.resolve(args, train.load_run(args, tiny_model_dir, "cpu", 0, 1))
    method = METHODS["filter"](settings, run)
    items = method.training_items()
    method.start(method.wrap(train.build_model(settings, method, tiny_model_dir, "cpu", 0)), items)
    capsys.readouterr()
    assert workers(None, "cuda") == 0 and workers(None, "cpu") == 0 and not capsys.readouterr().err
    assert workers(3, "cuda") == 0 and "--workers 3 ignored" in capsys.readouterr().err
    assert workers(3, "cpu") == 3
    assert workers(3, "cpu", shard=True) == 0 and "sharded" in capsys.readouterr().err
    # the teacher's logits, computed or cached, come back on the batch's device, whatever the teacher's own
    computed = method.make_batch(items[:4], [1.0] * 4, 0)["teacher_logits"]
    method.teacher.build_cache(run.tokenizer, items, 8, "cpu")
    assert workers(None, "cuda") == 2 and workers(None, "cpu") == 0 and workers(3, "cpu", shard=True) == 3
    cached = method.make_batch(items[:4], [1.0] * 4, 0)["teacher_logits"]
    assert computed.device == cached.device == torch.device("cpu") and torch.allclose(computed, cached, atol=1e-5)


def test_eq6_with_the_papers_lambda_and_every_term_logged():
    """FilterMethod.loss against Eq. 4 and Eq. 6 written out: L_s + L_t for the teacher's own run;
    L_s + lambda L_t + (1 - lambda) KL(p_teacher || p_student) for the student, --kl-weight being
    the paper's stated KL weight, 1 - lambda."""
    import torch.nn.functional as F

    from conftest import make_method, make_run
    method = make_method("filter", make_run(["a", "b", "c"]), "--kl-weight", "0.3")
    model = Filter(Classifier(sharp_encoder(3), 3), 1, 1).eval()
    source, source_mask, target, target_mask = padded_pairs()
    labels, weights = torch.tensor([0, 2, 1, 2]), torch.tensor([1.0, 1.0, 0.0, 1.0])  # one example of DDP padding
    batch = dict(source_ids=source, source_mask=source_mask, target_ids=target, target_mask=target_mask, source_labels=labels,
                 target_labels=labels, weights=weights)
    with torch.no_grad():
        s, t = model(source, source_mask, target, target_mask)
        kept = weights.bool()
        L_s, L_t = F.cross_entropy(s[kept], labels[kept]), F.cross_entropy(t[kept], labels[kept])
        loss, parts = method.loss(model, batch)
        assert loss.item() == pytest.approx((L_s + L_t).item(), rel=1e-5)  # Eq. 4, the teacher's own training
        assert parts["source"].item() == pytest.approx(L_s.item(), rel=1e-5) and parts["target"].item() == pytest.approx(L_t.item(), rel=1e-5)
        teacher = torch.randn(4, 3)
        p = teacher.softmax(-1)
        kl = (p * (p.log() - t.log_softmax(-1))).sum(-1)[kept].mean()
        loss, parts = method.loss(model, dict(batch, teacher_logits=teacher))
        lam = 0.7
        assert loss.item() == pytest.approx((L_s + lam * L_t + (1 - lam) * kl).item(), rel=1e-5)  # Eq. 6
        assert set(parts) == {"source", "target", "kl"}
        assert [parts[n].item() for n in ("source", "target", "kl")] == pytest.approx([L_s.item(), L_t.item(), kl.item()], rel=1e-5)
