"""The papers' losses, one function per equation, each a plain function of tensors.

`weights` (N,), where a loss takes it, marks the examples that count (1) and the padding that
keeps DDP ranks in step (0); the result is the mean over the examples that count.
"""
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


def self_teaching_loss(student_logits, teacher_logits, mask=None):
    """FILTER self-teaching (Eq. 5): KL(p_teacher || p_student) between the label distributions, (N, C)
    or per token (N, T, C), averaged over the positions where `mask` (N,) or (N, T) is non-zero (its
    values weight them). The teacher is a constant: no gradient reaches it."""
    teacher = teacher_logits.detach().float().log_softmax(-1)
    student = student_logits.float().log_softmax(-1)
    kl = (teacher.exp() * (teacher - student)).sum(-1)  # (N,) or (N, T)
    if mask is None:
        return kl.mean()
    mask = mask.float()
    return (kl * mask).sum() / mask.sum().clamp(min=1)


def representation_consistency_loss(source_representation, target_representation, weights=None):
    """X-Mixup Eq. 7, first consistency term: MSE between the sequence representations (B, H), the
    mean-pooled final hidden states of the real tokens, of a text and its translation."""
    per_pair = (source_representation.float() - target_representation.float()).pow(2).mean(-1)  # (B,)
    return weighted_mean(per_pair, weights)


def prediction_consistency_loss(source_logits, target_logits, weights=None):
    """X-Mixup Eq. 7, second consistency term (classification only): KL(p_S || p_T) between the two
    predicted distributions (B, C). The paper writes KL(p_S, p_T); both sides receive gradients."""
    p = source_logits.float().log_softmax(-1)
    q = target_logits.float().log_softmax(-1)
    return weighted_mean((p.exp() * (p - q)).sum(-1), weights)
