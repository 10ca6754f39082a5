"""The papers' losses, one function per equation, each a plain function of tensors. `weights` (N,)
marks the examples that count (1) and the padding that keeps DDP ranks in step (0): a loss is the
mean over the examples that count.
"""
import torch
import torch.nn.functional as F


def weighted_mean(values, weights=None):
    if weights is None:
        return values.mean()
    weights = weights.float()
    return (values * weights).sum() / weights.sum().clamp(min=1)


def task_loss(logits, labels, weights=None):
    """Every paper's task loss (FILTER Eq. 4's L, X-Mixup Eq. 8's L_task, Yu & Joty Eq. 1's L_CE): cross-entropy
    per text (N, C) or per token (N, T, C), -100 unscored; a joint task's intent (on <s>) and slots summed."""
    if logits.dim() == 2:
        return weighted_mean(F.cross_entropy(logits.float(), labels, reduction="none"), weights)
    joint = token_loss(logits[:, :1], labels[:, :1], weights) + token_loss(logits[:, 1:], labels[:, 1:], weights)
    # chosen on the device, not by `if`: the host never waits for the labels, a compiled step has no branch
    return torch.where((labels[:, 0] != -100).any(), joint, token_loss(logits, labels, weights))


def token_loss(logits, labels, weights=None):
    """Cross-entropy per token, (N, T, C) against (N, T), averaged over the tokens that are not -100."""
    per_token = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), reduction="none", ignore_index=-100)
    scored = (labels.flatten() != -100).float()
    if weights is not None:
        scored = scored * weights.repeat_interleave(labels.shape[1])
    return (per_token * scored).sum() / scored.sum().clamp(min=1)


def position_logits(logits, mask=None):
    """Extractive QA: (N, T, 2) start and end logits -> (N, 2, T), padding (`mask` 0) at -1e4, never a candidate."""
    logits = logits.float().transpose(1, 2)
    return logits if mask is None else logits.masked_fill(mask[:, None, :] == 0, -1e4)


def span_loss(logits, labels, weights=None, mask=None):
    """Extractive QA's task loss (BERT's SQuAD recipe; X-Mixup Appendix A.2): the mean cross-entropy of the
    answer's start and end over a window's positions, (N, T, 2) logits against (N, 2) token indices."""
    per_position = F.cross_entropy(position_logits(logits, mask).flatten(0, 1), labels.flatten(), reduction="none")
    return weighted_mean(per_position.view(-1, 2).mean(1), weights)


def mean_squared_error(x, y, weights=None):
    """The MSE of XeroAlign and of X-Mixup's Eq. 7: over H for each pair of vectors (N, H), then over the pairs."""
    per_pair = (x.float() - y.float()).pow(2).mean(dim=-1)  # (N,)
    return weighted_mean(per_pair, weights)


def kl_divergence(p_logits, q_logits, weights=None):
    """KL(p || q) of two sets of logits (..., C), per row, averaged with `weights`: FILTER Eq. 5, X-Mixup Eq. 7."""
    p = p_logits.float().log_softmax(-1)
    q = q_logits.float().log_softmax(-1)
    return weighted_mean((p.exp() * (p - q)).sum(-1), weights)


def xeroalign_loss(source_embeddings, target_embeddings, weights=None):
    """XeroAlign (Sec. 3, Algorithm 1): the MSE of sources' and translations' <s> embeddings (N, H), both trained."""
    return mean_squared_error(source_embeddings, target_embeddings, weights)


def self_teaching_loss(student_logits, teacher_logits, mask=None, temperature=1.0, per_class=False):
    """FILTER Eq. 5: KL(p_teacher || p_student), (N, C) or (N, T, C), weighted by `mask`, the teacher constant;
    softmax(logits / T) and T^2 times the KL (Hinton et al. 2015); `per_class`: 1/C of it (FILTER's code)."""
    T = temperature
    # in float32: fp16 logits masked at -1e4 (a joint task's head) divided by 0.1 would overflow to -inf (NaN KL)
    kl = kl_divergence(teacher_logits.detach().float() / T, student_logits.float() / T, mask) * T ** 2
    return kl / student_logits.shape[-1] if per_class else kl


def representation_consistency_loss(source_representation, target_representation, weights=None):
    """X-Mixup Eq. 7's first term: the MSE of a text's and its translation's mean-pooled final states (B, H)."""
    return mean_squared_error(source_representation, target_representation, weights)


def prediction_consistency_loss(source_logits, target_logits, weights=None):
    """X-Mixup Eq. 7's second term (sentence labels): KL(p_S || p_T) of the predictions (B, C), both trained."""
    return kl_divergence(source_logits, target_logits, weights)


def label_alignment_loss(embeddings, labels, tau=0.1, weights=None):
    """Yu & Joty Eq. 2 (supervised contrastive, Gunel et al. 2020), normalised h (N, H): -log exp(h_i.h_j / tau)
    / sum_{k != i} exp(h_i.h_k / tau), over i's positives j, then over anchors with one (the paper sums)."""
    per_anchor, anchors = label_alignment_terms(embeddings, labels, tau, weights)
    return (per_anchor * anchors).sum() / anchors.sum().clamp(min=1)


def label_alignment_terms(embeddings, labels, tau=0.1, weights=None):
    """Eq. 2's term of each example as an anchor (N,), and which are anchors (N,): the loss before its mean."""
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
    """Yu & Joty Eq. 4: anchors (A, H), positives (A, P, H), negatives (A, M, H), normalised:
    -sum_t log exp(h_i.h_i^t / tau) / sum_k exp(h_i.h_k / tau), summed over positives, averaged over anchors."""
    a = F.normalize(anchors.float(), dim=-1)
    group = F.normalize(torch.cat([positives, negatives], dim=1).float(), dim=-1)  # (A, P + M, H)
    logits = torch.einsum("ah,akh->ak", a, group) / tau
    log_prob = logits - logits.logsumexp(dim=1, keepdim=True)
    return weighted_mean(-log_prob[:, :positives.shape[1]].sum(1), weights)
