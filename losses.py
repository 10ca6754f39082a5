"""The papers' losses, one function per equation, each a plain function of tensors.

`weights` (N,), where a loss takes it, marks the examples that count (1) and the padding that
keeps DDP ranks in step (0); the result is the mean over the examples that count.
"""
import torch
import torch.nn.functional as F


def weighted_mean(values, weights=None):
    if weights is None:
        return values.mean()
    weights = weights.float()
    return (values * weights).sum() / weights.sum().clamp(min=1)


def task_loss(logits, labels, weights=None):
    """The task loss of every paper (XeroAlign's tasks A and B, FILTER Eq. 4's L, X-Mixup Eq. 8's
    L_task, Yu & Joty Eq. 1's L_CE): cross-entropy, (N, C) logits against (N,) label indices, or per token,
    (N, T, C) against (N, T) with -100 where a token is not scored (the mean is over scored tokens).
    A joint task (xSID) labels the <s> token, position 0, with the sentence's intent
    (model.JointHead): the intent's loss, a mean over sentences, and the slots' loss, a mean over
    the words' tokens, are summed. Both are computed and one chosen on the device (torch.where, not
    `if`), so that the host never waits for the labels and a compiled step has no branch."""
    if logits.dim() == 2:
        return weighted_mean(F.cross_entropy(logits.float(), labels, reduction="none"), weights)
    joint = token_loss(logits[:, :1], labels[:, :1], weights) + token_loss(logits[:, 1:], labels[:, 1:], weights)
    return torch.where((labels[:, 0] != -100).any(), joint, token_loss(logits, labels, weights))


def token_loss(logits, labels, weights=None):
    """Cross-entropy per token, (N, T, C) against (N, T), averaged over the tokens that are not -100."""
    per_token = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), reduction="none", ignore_index=-100)
    scored = (labels.flatten() != -100).float()
    if weights is not None:
        scored = scored * weights.repeat_interleave(labels.shape[1])
    return (per_token * scored).sum() / scored.sum().clamp(min=1)


def position_logits(logits, mask=None):
    """Extractive QA: (N, T, 2) start and end logits -> (N, 2, T), rows to softmax over a window's
    positions, with padding (`mask` (N, T) of 0) at -1e4 so that it is never a candidate."""
    logits = logits.float().transpose(1, 2)
    return logits if mask is None else logits.masked_fill(mask[:, None, :] == 0, -1e4)


def span_loss(logits, labels, weights=None, mask=None):
    """The task loss of extractive QA (BERT's SQuAD fine-tuning; X-Mixup Appendix A.2): the
    cross-entropy of the answer's start token and of its end token, each a softmax over the
    window's positions, averaged: (N, T, 2) logits against (N, 2) token indices."""
    per_position = F.cross_entropy(position_logits(logits, mask).flatten(0, 1), labels.flatten(), reduction="none")
    return weighted_mean(per_position.view(-1, 2).mean(1), weights)


def mean_squared_error(x, y, weights=None):
    """The squared distance of each pair of vectors (N, H), averaged over H, then over the pairs
    that count: the MSE of XeroAlign and of X-Mixup's Eq. 7."""
    per_pair = (x.float() - y.float()).pow(2).mean(dim=-1)  # (N,)
    return weighted_mean(per_pair, weights)


def kl_divergence(p_logits, q_logits, weights=None):
    """KL(p || q) between the distributions of two sets of logits (..., C), one per row, averaged
    with `weights` of the rows' shape: FILTER's self-teaching and X-Mixup's Eq. 7."""
    p = p_logits.float().log_softmax(-1)
    q = q_logits.float().log_softmax(-1)
    return weighted_mean((p.exp() * (p - q)).sum(-1), weights)


def xeroalign_loss(source_embeddings, target_embeddings, weights=None):
    """XeroAlign (Gritta & Iacobacci 2021, Sec. 3, Algorithm 1): mean squared error between the <s>
    embeddings (N, H) of source sentences and of their translations, trained jointly with the task.
    Both sides receive gradients."""
    return mean_squared_error(source_embeddings, target_embeddings, weights)


def self_teaching_loss(student_logits, teacher_logits, mask=None, temperature=1.0, per_class=False):
    """FILTER self-teaching (Eq. 5): KL(p_teacher || p_student) between the label distributions, (N, C)
    or per token (N, T, C), averaged over the positions where `mask` (N,) or (N, T) is non-zero (its
    values weight them). The teacher is a constant: no gradient reaches it. With a `temperature` T
    both are softmax(logits / T) and the KL is scaled by T^2 (Hinton et al. 2015), as FILTER's code
    computes it at T = 0.1; `per_class` averages it over the C classes too (1/C of it), as that
    code's nn.KLDivLoss() does for sentence labels."""
    T = temperature
    kl = kl_divergence(teacher_logits.detach() / T, student_logits / T, mask) * T ** 2
    return kl / student_logits.shape[-1] if per_class else kl


def representation_consistency_loss(source_representation, target_representation, weights=None):
    """X-Mixup Eq. 7, first consistency term: MSE between the sequence representations (B, H), the
    mean-pooled final hidden states of the real tokens, of a text and its translation."""
    return mean_squared_error(source_representation, target_representation, weights)


def prediction_consistency_loss(source_logits, target_logits, weights=None):
    """X-Mixup Eq. 7, second consistency term (classification only): KL(p_S || p_T) between the two
    predicted distributions (B, C). The paper writes KL(p_S, p_T); both sides receive gradients."""
    return kl_divergence(source_logits, target_logits, weights)


def label_alignment_loss(embeddings, labels, tau=0.1, weights=None):
    """Yu & Joty Eq. 2, label alignment (supervised contrastive, Gunel et al. 2020): over the
    L2-normalised vectors (N, H) of a batch, each anchor i is pulled towards the other examples of
    its label j and away from all others k != i: -log exp(h_i.h_j / tau) / sum_k exp(h_i.h_k / tau),
    averaged over its positives and then over the anchors that have at least one (an example alone
    with its label contributes nothing; the paper sums over the anchors, which only scales the
    loss). `weights` marks examples that take part (padding: 0). Over several processes, each
    keeps its own anchors' part of it (contrastive.share_of_label_alignment)."""
    per_anchor, anchors = label_alignment_terms(embeddings, labels, tau, weights)
    return (per_anchor * anchors).sum() / anchors.sum().clamp(min=1)


def label_alignment_terms(embeddings, labels, tau=0.1, weights=None):
    """Eq. 2's term of each example as an anchor, (N,), and which examples are anchors, (N,) bool:
    label_alignment_loss before its mean, for a process that sums the terms of its own anchors."""
    h = F.normalize(embeddings.float(), dim=-1)
    N = len(h)
    valid = torch.ones(N, dtype=torch.bool, device=h.device) if weights is None else weights > 0
    others = ~torch.eye(N, dtype=torch.bool, device=h.device) & valid[None, :]   # k != i, and k real
    logits = (h @ h.T / tau).masked_fill(~others, float("-inf"))
    log_prob = logits - logits.logsumexp(dim=1, keepdim=True)                    # (N, N)
    positive = others & (labels[:, None] == labels[None, :])
    anchors = valid & positive.any(1)
    per_anchor = -(log_prob.masked_fill(~positive, 0.0)).sum(1) / positive.sum(1).clamp(min=1)
    return per_anchor, anchors


def semantic_alignment_loss(anchors, positives, negatives, tau=0.1, weights=None):
    """Yu & Joty Eq. 4, semantic alignment: each source anchor (A, H) against its translations
    (A, P, H), the positives, and source texts of other labels (A, M, H), the negatives:
    -sum_t log exp(h_i.h_i^t / tau) / sum_k exp(h_i.h_k / tau) over the 2b texts of its group, with
    L2-normalised vectors; summed over positives as in the paper, averaged over anchors."""
    a = F.normalize(anchors.float(), dim=-1)
    group = F.normalize(torch.cat([positives, negatives], dim=1).float(), dim=-1)  # (A, P + M, H)
    logits = torch.einsum("ah,akh->ak", a, group) / tau
    log_prob = logits - logits.logsumexp(dim=1, keepdim=True)
    return weighted_mean(-log_prob[:, :positives.shape[1]].sum(1), weights)
