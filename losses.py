"""The papers' losses, one function per equation, each a plain function of tensors.

`weights` (N,), where a loss takes it, marks the examples that count (1) and the padding that
keeps DDP ranks in step (0); the result is the mean over the examples that count.
"""
import torch
import torch.nn.functional as F


def weighted_mean(values, weights=None):
    if weights is None:
        return values.mean()
    return (values * weights).sum() / weights.sum().clamp(min=1)


def task_loss(logits, labels, weights=None):
    """Cross-entropy of a classifier: (N, C) logits against (N,) label indices, or per token,
    (N, T, C) against (N, T) with -100 where a token is not scored (the mean is over scored tokens)."""
    if logits.dim() == 2:
        return weighted_mean(F.cross_entropy(logits.float(), labels, reduction="none"), weights)
    per_token = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), reduction="none", ignore_index=-100)
    scored = (labels.flatten() != -100).float()
    if weights is not None:
        scored = scored * weights.repeat_interleave(labels.shape[1])
    return (per_token * scored).sum() / scored.sum().clamp(min=1)


def xeroalign_loss(source_embeddings, target_embeddings, weights=None):
    """XeroAlign (Gritta & Iacobacci 2021, Sec. 3, Algorithm 1): mean squared error between the <s>
    embeddings (N, H) of source sentences and of their translations, trained jointly with the task.
    Both sides receive gradients."""
    per_pair = (source_embeddings.float() - target_embeddings.float()).pow(2).mean(dim=-1)  # (N,)
    return weighted_mean(per_pair, weights)
