"""X-Mixup (mixup.py): degenerate settings against the plain encoder, the entropy, the schedule,
the ratio's gradient, the consistency losses, and runs with the ablations."""
import json
import math

import pytest
import torch

from conftest import make_method, make_run, padded_pairs, sharp_encoder
from losses import prediction_consistency_loss, representation_consistency_loss
from minxlt.errors import InputError
from mixup import MixupRatio, XMixup, alignment_entropies, attention_entropy, inverse_sigmoid_decay, mixup_encode, mixup_layer, untagged
from model import Classifier, mean_pool


@pytest.mark.parametrize("model_type,variant", [("xlm-roberta", "in-attention"), ("xlm-roberta-xl", "in-attention"),
                                                ("xlm-roberta-xl", "paper")], ids=["post-ln-in-attention", "pre-ln-in-attention", "pre-ln-paper"])
@pytest.mark.parametrize("layer", [1, 3])  # counted from 1, as --mixup-layer
def test_ratio_zero_is_the_plain_forward(layer, variant, model_type):
    enc = sharp_encoder(3, model_type)  # random LayerNorms: a LayerNorm applied twice would show
    source, source_mask, target, target_mask = padded_pairs()
    with torch.no_grad():
        hs, ht, lam = mixup_encode(enc, MixupRatio(), source, source_mask, target, target_mask, layer, fixed_ratio=0.0,
                                   variant=variant)
        for h, ids, mask in ((hs, source, source_mask), (ht, target, target_mask)):
            assert (h - enc(ids, mask))[mask.bool()].abs().max() < 1e-5
    assert torch.equal(lam, torch.zeros(4))


@pytest.mark.parametrize("layer", [1, 3])
def test_post_ln_paper_mix_at_ratio_zero_normalises_twice_as_the_authors_code_does(layer):
    # Eq. 4 at lambda = 0 is LN_a(h'_T) = LN_a(LN_a(h_T + MHA(h_T))): not the plain layer, as in the
    # authors' BertSelfOutput, whose input_tensor is already normalised; the source's side is plain
    enc = sharp_encoder(3)
    source, source_mask, target, target_mask = padded_pairs()
    with torch.no_grad():
        hs, ht, _ = mixup_encode(enc, MixupRatio(), source, source_mask, target, target_mask, layer, fixed_ratio=0.0)
        assert (hs - enc(source, source_mask))[source_mask.bool()].abs().max() < 1e-5
        assert (ht - enc(target, target_mask))[target_mask.bool()].abs().max() > 0.1
        h = enc.embed(target)
        for number, block in enumerate(enc.layers, start=1):
            if number == layer:  # written out: the attention sub-layer, its LayerNorm again, the feed-forward sub-layer
                h = block.feed_forward(block.attn_norm(block.attn_norm(h + block.attention(h, target_mask))))
            else:
                h = block(h, target_mask)
        assert (ht - enc.norm(h))[target_mask.bool()].abs().max() < 1e-5


def test_in_attention_mixing_with_itself_changes_nothing():
    enc = sharp_encoder(3)
    _, _, target, target_mask = padded_pairs()
    with torch.no_grad():  # cross-attention over the same text is its self-attention, whatever the ratio
        _, ht, lam = mixup_encode(enc, MixupRatio(), target, target_mask, target, target_mask, 2, variant="in-attention")
        assert (ht - enc(target, target_mask))[target_mask.bool()].abs().max() < 1e-5
        _, mixed, _ = mixup_encode(enc, MixupRatio(), *padded_pairs(), 2, fixed_ratio=0.5, variant="in-attention")
        assert (mixed - enc(target, target_mask))[target_mask.bool()].abs().max() > 1e-2
    assert ((lam > 0) & (lam < 0.5)).all()  # lambda0 * sigmoid(...)


# --- Eq. 2-5 as the paper writes them, computed again from the formulas, one example at a time ---

def multi_head(layer, queries, keys_values, key_mask):
    """Appendix A.1, Eq. 9-11: MultiHead(Q, K, V) = Concat(head_1..N) W^O, head_n = softmax(Q_n K_n^T / sqrt(d)) V_n,
    over one example's real key tokens, with the layer's projections. (Tq, H), (Tk, H) -> (Tq, H)."""
    N, H = layer.num_heads, queries.shape[-1]
    d = H // N
    Q = queries @ layer.query.weight.T + layer.query.bias
    K = keys_values @ layer.key.weight.T + layer.key.bias
    V = keys_values @ layer.value.weight.T + layer.value.bias
    heads = []
    for n in range(N):
        part = slice(n * d, (n + 1) * d)
        scores = Q[:, part] @ K[:, part].T / math.sqrt(d)
        scores[:, key_mask == 0] = float("-inf")
        heads.append(scores.softmax(-1) @ V[:, part])
    return torch.cat(heads, -1) @ layer.attn_out.weight.T + layer.attn_out.bias


def entropies_by_hand(h_t, h_s):
    """Eq. 5 with loops, for one example's real tokens: A_ij = softmax_j(h_Ti . h_Sj / sqrt(n));
    H(A) over A's rows, H(A^T) over its columns normalised to sum to 1."""
    n = h_t.shape[-1]
    A = [[math.exp(float(h_t[i] @ h_s[j]) / math.sqrt(n)) for j in range(len(h_s))] for i in range(len(h_t))]
    A = [[a / sum(row) for a in row] for row in A]
    rows = [-sum(a * math.log(a) for a in row if a > 0) for row in A]
    columns = []
    for j in range(len(h_s)):
        column = [A[i][j] for i in range(len(h_t))]
        column = [a / sum(column) for a in column]
        columns.append(-sum(a * math.log(a) for a in column if a > 0))
    return sum(rows) / len(rows), sum(columns) / len(columns)


def mixup_of_random_states(model_type):
    """A one-layer encoder's layer of `model_type`, a ratio with W = -0.7 and b = 1.3, padded random
    states of 4 pairs, and mixup_layer's outputs on them: (layer, masks, states, outputs)."""
    torch.manual_seed(0)
    layer = sharp_encoder(1, model_type).layers[0].eval()
    ratio = MixupRatio(0.5)
    with torch.no_grad():
        ratio.linear.weight.fill_(-0.7)
        ratio.linear.bias.fill_(1.3)
        source_ids, source_mask, target_ids, target_mask = padded_pairs()
        source, target = torch.randn(4, source_ids.shape[1], 36), torch.randn(4, target_ids.shape[1], 36)
        return layer, (source_mask, target_mask), (source, target), mixup_layer(layer, ratio, source, source_mask, target, target_mask)


def test_paper_mixup_layer_against_the_equations():
    layer, (source_mask, target_mask), (source, target), (out_s, out_t, lam) = mixup_of_random_states("xlm-roberta")
    with torch.no_grad():
        ln_a = lambda x: torch.nn.functional.layer_norm(x, (36,), layer.attn_norm.weight, layer.attn_norm.bias, layer.attn_norm.eps)
        ffn = lambda x: torch.nn.functional.layer_norm(x + layer.ffn_out(torch.nn.functional.gelu(layer.ffn_in(x))), (36,),
                                                       layer.ffn_norm.weight, layer.ffn_norm.bias, layer.ffn_norm.eps)
        for b in range(4):
            ns, nt = int(source_mask[b].sum()), int(target_mask[b].sum())
            h_s, h_t = source[b, :ns], target[b, :nt]
            h_s1 = ln_a(h_s + multi_head(layer, h_s, h_s, torch.ones(ns)))           # Eq. 2
            h_t1 = ln_a(h_t + multi_head(layer, h_t, h_t, torch.ones(nt)))           # Eq. 2
            h_ts = multi_head(layer, h_t1, h_s1, torch.ones(ns))                      # Eq. 3
            H_A, H_At = entropies_by_hand(h_t1.double(), h_s1.double())             # Eq. 5
            expected_lam = 0.5 / (1 + math.exp(-((H_A + H_At) * -0.7 + 1.3)))
            assert lam[b].item() == pytest.approx(expected_lam, rel=1e-5)
            mixed = ln_a(expected_lam * h_ts + (1 - expected_lam) * h_t1)             # Eq. 4
            assert (out_t[b, :nt] - ffn(mixed)).abs().max() < 1e-4
            assert (out_s[b, :ns] - ffn(h_s1)).abs().max() < 1e-4


def test_pre_ln_mixup_layer_against_the_equations():
    """The module docstring's pre-LN placement, one example at a time: h' = h + MHA(LN_a(h)) (Eq. 2),
    h_T|S = h'_T + MHA over LN_a of both (Eq. 3, and Eq. 5's A), the mix unnormalised and the residual
    stream not rescaled (Eq. 4), then x + FFN(LN_f(x))."""
    layer, (source_mask, target_mask), (source, target), (out_s, out_t, lam) = mixup_of_random_states("xlm-roberta-xl")
    F = torch.nn.functional
    with torch.no_grad():
        ln_a = lambda x: F.layer_norm(x, (36,), layer.attn_norm.weight, layer.attn_norm.bias, layer.attn_norm.eps)
        ln_f = lambda x: F.layer_norm(x, (36,), layer.ffn_norm.weight, layer.ffn_norm.bias, layer.ffn_norm.eps)
        ffn = lambda x: x + layer.ffn_out(F.gelu(layer.ffn_in(ln_f(x))))
        for b in range(4):
            ns, nt = int(source_mask[b].sum()), int(target_mask[b].sum())
            h_s, h_t = source[b, :ns], target[b, :nt]
            h_s1 = h_s + multi_head(layer, ln_a(h_s), ln_a(h_s), torch.ones(ns))     # Eq. 2
            h_t1 = h_t + multi_head(layer, ln_a(h_t), ln_a(h_t), torch.ones(nt))     # Eq. 2
            h_ts = h_t1 + multi_head(layer, ln_a(h_t1), ln_a(h_s1), torch.ones(ns))  # Eq. 3, with its residual
            H_A, H_At = entropies_by_hand(ln_a(h_t1).double(), ln_a(h_s1).double())  # Eq. 5
            expected_lam = 0.5 / (1 + math.exp(-((H_A + H_At) * -0.7 + 1.3)))
            assert lam[b].item() == pytest.approx(expected_lam, rel=1e-5)
            mixed = expected_lam * h_ts + (1 - expected_lam) * h_t1                    # Eq. 4, its LN in the FFN's LN_f
            assert (mixed - (h_t1 + expected_lam * (h_ts - h_t1))).abs().max() < 1e-5  # h'_T at weight 1: not rescaled
            assert (out_t[b, :nt] - ffn(mixed)).abs().max() < 1e-4
            assert (out_s[b, :ns] - ffn(h_s1)).abs().max() < 1e-4


def test_alignment_entropies_by_hand_with_padding():
    torch.manual_seed(1)
    target, source = torch.randn(2, 5, 8), torch.randn(2, 4, 8)
    target_mask, source_mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]), torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    H_A, H_At = alignment_entropies(source, source_mask, target, target_mask)
    for b in range(2):
        expected = entropies_by_hand(target[b, :int(target_mask[b].sum())].double(), source[b, :int(source_mask[b].sum())].double())
        assert (H_A[b].item(), H_At[b].item()) == pytest.approx(expected, rel=1e-5)
    # a text whose every token attends to one source token has H(A) = 0
    one = torch.zeros(1, 3, 8)
    one[0, :, 0] = 50.0
    peak = torch.zeros(1, 2, 8)
    peak[0, 0, 0] = 1.0
    assert alignment_entropies(peak, torch.ones(1, 2), one, torch.ones(1, 3))[0].item() == pytest.approx(0.0, abs=1e-6)


def test_entropy_of_uniform_and_one_hot_attention():
    B, N, Tq, Tk = 3, 2, 4, 6
    key_mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]])
    query_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]])
    n = key_mask.sum(1).float()
    uniform = (key_mask[:, None, None, :] / n[:, None, None, None]).expand(B, N, Tq, Tk)
    assert torch.allclose(attention_entropy(uniform, query_mask, key_mask), n.log())
    leaky = torch.full((B, N, Tq, Tk), 1.0 / Tk)  # mass on padded keys is dropped, the rest renormalised
    assert torch.allclose(attention_entropy(leaky, query_mask, key_mask), n.log())
    one_hot = torch.zeros(B, N, Tq, Tk)
    one_hot[..., 0] = 1.0
    assert torch.allclose(attention_entropy(one_hot, query_mask, key_mask), torch.zeros(B))
    mixed = uniform.clone()
    mixed[0, :, 3] = one_hot[0, :, 3]  # one of the first example's four queries is certain
    assert torch.allclose(attention_entropy(mixed, query_mask, key_mask)[0], 3 * n[0].log() / 4)
    mixed[1, :, 3] = one_hot[1, :, 3]  # a padded query changes nothing
    assert torch.allclose(attention_entropy(mixed, query_mask, key_mask)[1], n[1].log())


def test_entropy_gradient_is_finite_with_padding():
    scores = torch.randn(2, 3, 4, 5, requires_grad=True)
    key_mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    probs = scores.masked_fill(key_mask[:, None, None, :] == 0, float("-inf")).softmax(-1)  # exact zeros
    attention_entropy(probs, torch.ones(2, 4), key_mask).sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_inverse_sigmoid_decay():
    assert inverse_sigmoid_decay(0, 1000) == pytest.approx(1000 / 1001)
    assert inverse_sigmoid_decay(1000 * math.log(1000), 1000) == pytest.approx(0.5)  # exp(step / k) = k
    assert inverse_sigmoid_decay(5000, 1000) == pytest.approx(1000 / (1000 + math.exp(5)))
    assert inverse_sigmoid_decay(20000, 1000) < 1e-5


def test_ratio_gradient_reaches_w_and_b():
    model = XMixup(Classifier(sharp_encoder(3), 4), layer=2)
    outputs = model(*padded_pairs())
    (outputs[1].sum() + outputs[3].sum()).backward()
    for p in (model.ratio_net.linear.weight, model.ratio_net.linear.bias):
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0


def test_ratio_in_bf16_reads_float32_entropies():
    # a sharded run under --amp bf16 gathers W and b in bf16, while the entropies come in float32 (an evaluation
    # outside autocast): lambda = lambda0 * sigmoid((H + H^T) W + b), as in float32 to bf16's precision
    ratio = MixupRatio(0.4)
    with torch.no_grad():
        ratio.linear.weight.fill_(0.7)
        ratio.linear.bias.fill_(-0.3)
    entropy, transposed = torch.tensor([0.5, 1.5, 2.0]), torch.tensor([1.0, 0.25, 0.0])
    expected = 0.4 * torch.sigmoid((entropy + transposed) * 0.7 - 0.3)
    assert torch.allclose(ratio.to(torch.bfloat16)(entropy, transposed).float(), expected, atol=1e-2)


def test_representation_consistency_by_hand():
    hidden_s = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])  # the last token is padding
    hidden_t = torch.tensor([[[0.0, 0.0], [0.0, 2.0], [0.0, 0.0]]])
    mask_s, mask_t = torch.tensor([[1, 1, 0]]), torch.tensor([[1, 1, 1]])
    r_s, r_t = mean_pool(hidden_s, mask_s), mean_pool(hidden_t, mask_t)
    assert r_s.tolist() == [[2.0, 3.0]] and torch.allclose(r_t, torch.tensor([[0.0, 2.0 / 3]]))
    assert representation_consistency_loss(r_s, r_t).item() == pytest.approx((2.0 ** 2 + (3 - 2 / 3) ** 2) / 2)


def test_prediction_consistency_by_hand():
    source = torch.tensor([[0.0, 0.0], [2.0, 0.0]])
    target = torch.tensor([[math.log(3.0), 0.0], [2.0, 0.0]])
    kl = 0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25)  # KL((1/2, 1/2) || (3/4, 1/4)); the second pair agrees
    assert prediction_consistency_loss(source, target).item() == pytest.approx(kl / 2, abs=1e-6)
    assert prediction_consistency_loss(source, target, torch.tensor([1.0, 0.0])).item() == pytest.approx(kl, abs=1e-6)


def test_mixup_inference_averages_the_two_distributions():
    model = XMixup(Classifier(sharp_encoder(3), 4), layer=1).eval()
    inputs = padded_pairs()
    with torch.no_grad():
        source_logits, target_logits = model(*inputs)[:2]
        expected = (source_logits.softmax(-1) + target_logits.softmax(-1)) / 2
        assert torch.allclose(model.predict(*inputs).exp(), expected, atol=1e-6)


def run(tmp_path, tiny_model_dir, name, *extra):
    import train
    train.main(["--model", str(tiny_model_dir), "--method", "xmixup", "--target-langs", "de,zh", "--batch-size", "8",
                "--max-steps", "6", "--eval-every", "3", "--no-alignment", "--ss-k", "2", "--out", str(tmp_path / name), *extra])
    log = [json.loads(line) for line in open(tmp_path / name / "log.jsonl") if '"loss"' in line]
    return log, json.loads((tmp_path / name / "best" / "task.json").read_text())


def test_runs_with_scheduled_sampling_and_ablations(tmp_path, tiny_model_dir):
    log, mixup = run(tmp_path, tiny_model_dir, "full")
    assert [r["round_trip"] for r in log][:1] == [0.0] and log[-1]["round_trip"] == 1.0  # p* decays with k = 2
    assert all("mse" in r and "kl" in r and 0 < r["lambda"] < 0.5 for r in log) and not mixup["no_mixup_inference"]
    log, mixup = run(tmp_path, tiny_model_dir, "constant", "--constant-ratio", "--no-consistency", "--no-mixup-inference")
    assert all(r["lambda"] == pytest.approx(0.5) and "mse" not in r for r in log)
    assert mixup["constant_ratio"] and mixup["lambda0"] == 0.5 and mixup["no_mixup_inference"]


def test_resume_keeps_the_ratio(tmp_path, tiny_model_dir):
    import train
    argv = ["--model", str(tiny_model_dir), "--method", "xmixup", "--target-langs", "de", "--batch-size", "8",
            "--max-steps", "4", "--eval-every", "2", "--no-alignment", "--lr", "1e-2"]
    train.main(argv + ["--out", str(tmp_path / "full")])
    train.main(argv + ["--out", str(tmp_path / "split"), "--stop-at", "2"])
    train.main(argv + ["--out", str(tmp_path / "split"), "--resume"])
    losses = lambda d: [json.loads(line)["loss"] for line in open(tmp_path / d / "log.jsonl") if '"loss"' in line]
    assert losses("split") == losses("full")


def word_batch(source_labelled):
    """A word-label pair batch on padded pairs: source tags on about half the real tokens (where
    `source_labelled` is false, a step that feeds the round trips, on the first pair's only), the
    translation's scored tokens, a teacher's logits, the last pair DDP padding (weight 0)."""
    torch.manual_seed(0)
    source_ids, source_mask, target_ids, target_mask = padded_pairs()
    B, T = source_ids.shape
    source_labels = torch.where(torch.rand(B, T) < 0.5, torch.randint(0, 5, (B, T)), -100) * source_mask - 100 * (1 - source_mask)
    source_labels[:, 0] = -100  # <s> (a joint task's intent would sit there)
    if not source_labelled:  # the round trips, untagged; the first pair's source has none and stays gold
        source_labels[1:] = -100
    return dict(source_ids=source_ids, source_mask=source_mask, target_ids=target_ids, target_mask=target_mask,
                source_labels=source_labels, target_labels=torch.full((B, T), -100),
                target_scored=(torch.rand(B, T) < 0.6).float() * target_mask, teacher_logits=torch.randn(B, T, 5),
                weights=torch.tensor([1.0, 1.0, 1.0, 0.0]), round_trip=torch.tensor(float(not source_labelled)),
                gold_source=torch.tensor(source_labelled))


def authors_word_loss(model, batch, alpha, sample_gold):
    """X-Mixup's loss on word labels, token by token as token_classification.py:115-151 computes
    it: the target's soft-label cross-entropy over its scored tokens; with the gold source
    (sample_gold) alpha CE(source tags) + (1 - alpha) that, else that alone; plus the MSE of the
    mean-pooled states (Eq. 7). KL(p || q) stands for its -sum p log q: they differ by p's entropy,
    a constant of the teacher."""
    s_logits, t_logits, s_r, t_r, _ = model(batch["source_ids"], batch["source_mask"], batch["target_ids"], batch["target_mask"])
    labels, scored, teacher = batch["source_labels"], batch["target_scored"], batch["teacher_logits"]
    real = [b for b in range(len(batch["weights"])) if batch["weights"][b] > 0]
    tokens = [(b, t) for b in real for t in range(labels.shape[1])]
    ce = [-s_logits[b, t].log_softmax(-1)[labels[b, t]] for b, t in tokens if labels[b, t] != -100]
    kl = [(p * (p.log() - q.log())).sum() for p, q in ((teacher[b, t].softmax(-1), t_logits[b, t].softmax(-1))
                                                       for b, t in tokens if scored[b, t])]
    target = sum(kl) / len(kl)
    task = alpha * sum(ce) / len(ce) + (1 - alpha) * target if sample_gold else target
    return task + sum(((s_r[b] - t_r[b]) ** 2).mean() for b in real) / len(real)


@pytest.mark.parametrize("fed", [False, True], ids=["gold-source", "round-trip"])
def test_word_labels_of_the_translation_are_the_labellers_soft_tags(tmp_path, fed):
    # Eq. 8 on word labels (Sec. 4.2): alpha * CE(source tags) + (1 - alpha) * KL(labeller || model)
    # on the translation's scored tokens, plus the MSE of Eq. 7 (no KL between predictions); where
    # scheduled sampling feeds the source's round trip, which has no tags, the KL alone, weight 1
    model = XMixup(Classifier(sharp_encoder(3), 5, "token"), layer=2).eval()  # no dropout: two forwards agree
    batch = word_batch(source_labelled=not fed)
    torch.save({}, tmp_path / "soft-tags.pt")  # word labels need a labeller (flags.resolve checks): its logits are the batch's
    method = make_method("xmixup", make_run(range(5), "word"), "--mixup-alpha", "0.4", "--teacher-cache", str(tmp_path / "soft-tags.pt"))
    loss, parts = method.loss(model, batch)
    assert "kl" not in parts and parts["source"] > 0 and parts["round_trip"] == fed
    assert loss.item() == pytest.approx(authors_word_loss(model, batch, 0.4, sample_gold=not fed).item(), rel=1e-5)
    loss.backward()
    assert all(p.grad is None or p.grad.isfinite().all() for p in model.parameters())


def test_only_untagged_round_trips_drop_the_sources_term():
    """X-Mixup's round trips of tagged sentences have no tags; the bundled corpus's keep theirs
    (Eq. 8 both terms then), and a step that feeds none keeps the gold sources."""
    from data import Encoded
    assert untagged([Encoded([0, 5, 6, 2], [-100] * 4), Encoded([0, 7, 2], [-100] * 3)])
    assert not untagged([Encoded([0, 5, 6, 2], [-100] * 4), Encoded([0, 7, 2], [-100, 3, -100])])
    assert not untagged([])


def test_word_labels_need_a_source_trained_labeller(tmp_path, tiny_model_dir):
    import train
    common = ["--model", str(tiny_model_dir), "--task", "demo-slots", "--target-langs", "de,zh", "--batch-size", "8",
              "--max-steps", "4", "--eval-every", "2", "--no-alignment"]
    train.main(common + ["--method", "zero-shot", "--lr", "5e-3", "--out", str(tmp_path / "labeller")])
    labeller = str(tmp_path / "labeller" / "best")
    with pytest.raises(InputError, match="needs --teacher"):
        train.main(common + ["--method", "xmixup", "--out", str(tmp_path / "x")])
    with pytest.raises(ValueError, match="--mixup-layer 4 is not"):  # the paper's fourth layer by default for tagging
        train.main(common + ["--method", "xmixup", "--teacher", labeller, "--out", str(tmp_path / "x")])
    train.main(common + ["--method", "xmixup", "--teacher", labeller, "--mixup-layer", "2", "--out", str(tmp_path / "x")])
    log = [json.loads(line) for line in open(tmp_path / "x" / "log.jsonl") if '"loss"' in line]
    assert all("mse" in r and "kl" not in r and r["target"] > 0 for r in log)
    results = json.loads((tmp_path / "x" / "results.json").read_text())
    assert {"f1", "word_accuracy"} <= set(results["de"])
    train.main(common + ["--method", "filter", "--out", str(tmp_path / "filter")])
    with pytest.raises(ValueError, match="must be a plain classifier"):
        train.main(common + ["--method", "xmixup", "--teacher", str(tmp_path / "filter" / "best"), "--mixup-layer", "2",
                             "--out", str(tmp_path / "y")])
    import shutil
    other = shutil.copytree(labeller, tmp_path / "other")  # as another task's labeller: other tags
    info = json.loads((other / "task.json").read_text())
    (other / "task.json").write_text(json.dumps(dict(info, task="udpos", labels=info["labels"][:-1])))
    with pytest.raises(InputError, match=rf"--teacher {other}: its head predicts the labels .* \(task.json: task "
                                         r"udpos\), and task demo-slots has .*: give a teacher trained on this task"):
        train.main(common + ["--method", "xmixup", "--teacher", str(other), "--mixup-layer", "2",
                             "--out", str(tmp_path / "y")])


def test_the_ratio_starts_the_same_on_every_process_and_is_clipped_with_the_rest(tiny_model_dir, tmp_path, monkeypatch):
    # the run has reseeded per process (dropout) before the method wraps the model: W and b come from the seed alone
    from conftest import make_method
    from methods import Run
    from minxlt import tasks
    from minxlt.text.tokenizer import Tokenizer
    run = Run(tasks.load_task("demo", targets=["de"]), Tokenizer.from_pretrained(tiny_model_dir), 64, num_layers=3)
    method = make_method("xmixup", run, "--seed", "7")
    starts = []
    for rank in (0, 1):
        torch.manual_seed(7 + rank)
        ratio = method.wrap(Classifier(sharp_encoder(3), 8)).ratio_net.linear
        starts.append((ratio.weight.item(), ratio.bias.item()))
    assert starts[0] == starts[1]
    torch.manual_seed(7)
    fresh = torch.nn.Linear(1, 1)
    assert starts[0] == (fresh.weight.item(), fresh.bias.item())
    # clipping sees every trained parameter, the ratio's among them (not only the built model's)
    import train
    clipped = []
    real = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda parameters, norm: real(clipped.extend(parameters) or clipped, norm))
    train.main(["--model", str(tiny_model_dir), "--method", "xmixup", "--target-langs", "de", "--batch-size", "4", "--max-steps", "1",
                "--eval-every", "1", "--no-alignment", "--no-test", "--out", str(tmp_path / "run")])
    assert any(p.shape == (1, 1) for p in clipped) and any(p.shape == (1,) for p in clipped)
