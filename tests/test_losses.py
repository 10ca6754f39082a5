"""Each loss against a computation written out by hand."""
import math

import pytest
import torch

from losses import label_alignment_loss, semantic_alignment_loss, task_loss, xeroalign_loss


def test_xeroalign_by_hand():
    source = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    target = torch.tensor([[0.0, 2.0], [3.0, 1.0]])
    # pair 1: ((1-0)^2 + 0) / 2 = 0.5; pair 2: (0 + (4-1)^2) / 2 = 4.5; mean 2.5
    assert xeroalign_loss(source, target).item() == 2.5
    assert xeroalign_loss(source, target, torch.tensor([1.0, 0.0])).item() == 0.5  # padding does not count
    assert xeroalign_loss(source, source).item() == 0.0


def test_xeroalign_pulls_both_sides():
    source = torch.randn(3, 5, requires_grad=True)
    target = torch.randn(3, 5, requires_grad=True)
    xeroalign_loss(source, target).backward()
    assert torch.allclose(source.grad, 2 * (source - target).detach() / 15)  # d/ds of mean((s - t)^2)
    assert torch.allclose(target.grad, -source.grad)


def test_task_loss_by_hand():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [5.0, 5.0]])
    labels = torch.tensor([0, 0, 1])
    per = [math.log(1 + math.exp(-2)), math.log(1 + math.exp(1)), math.log(2)]
    assert abs(task_loss(logits, labels).item() - sum(per) / 3) < 1e-6
    assert abs(task_loss(logits, labels, torch.tensor([1.0, 0.0, 1.0])).item() - (per[0] + per[2]) / 2) < 1e-6
    assert task_loss(logits, labels, torch.zeros(3)).item() == 0.0  # a rank whose shard is all padding


def test_token_task_loss_counts_scored_tokens_only():
    # Position 0 is <s>, never scored in a tagging task (a joint task puts its intent there: test_joint.py).
    logits = torch.tensor([[[9.0, 0.0], [2.0, 0.0], [0.0, 0.0], [1.0, 3.0]], [[9.0, 0.0], [0.0, 1.0], [4.0, 4.0], [0.0, 0.0]]])
    labels = torch.tensor([[-100, 0, -100, 1], [-100, 1, 0, -100]])
    per = {(0, 1): math.log(1 + math.exp(-2)), (0, 3): math.log(1 + math.exp(-2)),
           (1, 1): math.log(1 + math.exp(-1)), (1, 2): math.log(2)}
    assert abs(task_loss(logits, labels).item() - sum(per.values()) / 4) < 1e-6
    weighted = task_loss(logits, labels, torch.tensor([0.0, 1.0]))  # only the second example's two tokens
    assert abs(weighted.item() - (per[(1, 1)] + per[(1, 2)]) / 2) < 1e-6


def label_alignment_by_loop(embeddings, labels, tau):
    """Eq. 2 written out anchor by anchor."""
    h = torch.nn.functional.normalize(embeddings.double(), dim=-1)
    terms = []
    for i in range(len(h)):
        positives = [j for j in range(len(h)) if j != i and labels[j] == labels[i]]
        if not positives:
            continue
        denominator = sum(math.exp(float(h[i] @ h[k]) / tau) for k in range(len(h)) if k != i)
        terms.append(sum(-math.log(math.exp(float(h[i] @ h[j]) / tau) / denominator) for j in positives) / len(positives))
    return sum(terms) / len(terms)


@pytest.mark.parametrize("seed", range(4))
def test_label_alignment_against_a_loop(seed):
    torch.manual_seed(seed)
    embeddings = torch.randn(9, 5)
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 3, 1, 4])  # repeated labels, and three that occur once
    ours = label_alignment_loss(embeddings, labels, tau=0.3).item()
    assert ours == pytest.approx(label_alignment_by_loop(embeddings, labels, 0.3), abs=1e-6)
    order = torch.randperm(9)
    assert label_alignment_loss(embeddings[order], labels[order], tau=0.3).item() == pytest.approx(ours, abs=1e-6)
    weights = torch.tensor([1.0] * 7 + [0.0, 0.0])  # the last two do not take part
    assert label_alignment_loss(embeddings, labels, 0.3, weights).item() == \
        pytest.approx(label_alignment_by_loop(embeddings[:7], labels[:7], 0.3), abs=1e-6)


def test_label_alignment_with_all_labels_unique():
    embeddings = torch.randn(4, 3, requires_grad=True)
    loss = label_alignment_loss(embeddings, torch.tensor([0, 1, 2, 3]), tau=0.1)
    loss.backward()
    assert loss.item() == 0.0 and torch.isfinite(embeddings.grad).all()


def test_semantic_alignment_by_hand():
    # one anchor, b = 2 translations (positives) and 2 source texts of other labels (negatives), 2-d
    anchor = torch.tensor([[1.0, 0.0]])
    positives = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    negatives = torch.tensor([[[-1.0, 0.0], [3.0, 4.0]]])  # normalised: (-1, 0), (0.6, 0.8)
    tau = 0.5
    similarities = [1.0, 0.0, -1.0, 0.6]
    denominator = sum(math.exp(s / tau) for s in similarities)
    expected = -(math.log(math.exp(1.0 / tau) / denominator) + math.log(math.exp(0.0 / tau) / denominator))
    assert semantic_alignment_loss(anchor, positives, negatives, tau).item() == pytest.approx(expected, abs=1e-6)
    # two anchors: the mean
    two = semantic_alignment_loss(anchor.repeat(2, 1), positives.repeat(2, 1, 1), negatives.repeat(2, 1, 1), tau)
    assert two.item() == pytest.approx(expected, abs=1e-6)
