"""Each loss against a computation written out by hand."""
import math

import torch

from losses import task_loss, xeroalign_loss


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
    logits = torch.tensor([[[2.0, 0.0], [0.0, 0.0], [1.0, 3.0]], [[0.0, 1.0], [4.0, 4.0], [0.0, 0.0]]])
    labels = torch.tensor([[0, -100, 1], [1, 0, -100]])
    per = {(0, 0): math.log(1 + math.exp(-2)), (0, 2): math.log(1 + math.exp(-2)),
           (1, 0): math.log(1 + math.exp(-1)), (1, 1): math.log(2)}
    assert abs(task_loss(logits, labels).item() - sum(per.values()) / 4) < 1e-6
    weighted = task_loss(logits, labels, torch.tensor([0.0, 1.0]))  # only the second example's two tokens
    assert abs(weighted.item() - (per[(1, 0)] + per[(1, 1)]) / 2) < 1e-6
