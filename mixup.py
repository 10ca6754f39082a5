"""X-Mixup (Yang et al. 2022): cross-lingual manifold mixup. A target text and its source-language
counterpart run the encoder side by side; at one layer l the target's hidden states are mixed with
what they attend to in the source, by a ratio that grows with how well the two align.

The mixup layer as the paper writes it (--mixup-variant paper), LN_a layer l's attention LayerNorm
and MHA its multi-head attention (projections included, Appendix A.1, Eq. 9-11):

    h'_S = LN_a(h_S + MHA(h_S, h_S, h_S))                Eq. 2
    h'_T = LN_a(h_T + MHA(h_T, h_T, h_T))                Eq. 2
    h_T|S = MHA(h'_T, h'_S, h'_S)                        Eq. 3
    A_ij = softmax_j(h'_Ti h'_Sj / sqrt(n))              Eq. 5
    H(A) = -1/I sum_i sum_j A_ij log A_ij                Eq. 5 (its summand: A_ji)
    lambda = lambda0 sigmoid((H(A) + H(A^T)) W + b)      the sentence after Eq. 5
    h~_T = LN_a(lambda h_T|S + (1 - lambda) h'_T)        Eq. 4

Choices the paper leaves open, one per line:
  - Eq. 2's MultiHead is layer l's whole attention sub-layer, residual and LayerNorm included: its
    h^{l+1} are hidden states, and it omits only the feed-forward "for simplification".
  - Eq. 4's LN is layer l's own attention LayerNorm: as Eq. 3 shares the attention's parameters,
    X-Mixup adds no parameters but the ratio's W and b.
  - The omitted feed-forward follows as in every layer: h~_T and h'_S each through LN_f(h + FFN(h)).
  - H(A): A_ij is over target tokens i and source tokens j (softmax over j, unstated), but H(A)'s
    summand A_ji fits A only where I = J; here H(A) is the mean over target tokens of each row's entropy.
  - H(A^T), named but not defined: A's columns are not distributions; H(A^T) is the mean entropy of
    A's columns, each normalised to sum to 1 over the target tokens.
  - n is the hidden size; h_T|S has dropout as the layer's own attention output has.
  - At lambda = 0 this is not the plain layer: h~_T = LN_a(LN_a(h_T + MHA(h_T))), the attention
    LayerNorm twice, as in the authors' code (docs/methods.md).

In a pre-LN layer (XLM-R XL and XXL: x + MHA(LN_a(x)), then x + FFN(LN_f(x))), one line per choice:
  - Eq. 2 is the attention sub-layer with its residual, LayerNorm before: h'_S = h_S + MHA(LN_a(h_S)).
  - Eq. 3 is a sub-layer too, with its residual, its attention reading LN_a of its inputs:
    h_T|S = h'_T + MHA(LN_a(h'_T), LN_a(h'_S), LN_a(h'_S)); Eq. 5's A compares those same states.
  - Eq. 4 mixes two hidden states of one scale, no LayerNorm after it (the feed-forward's LN_f
    normalises its input): h~_T = lambda h_T|S + (1 - lambda) h'_T = h'_T + lambda MHA(...). The
    residual stream, which every later layer reads, is not rescaled; lambda = 0 is the plain layer.
  - The in-attention ablation mixes the two attentions of LN_a(h_T) inside the residual:
    h~_T = h_T + lambda MHA(LN_a(h_T), LN_a(h_S)) + (1 - lambda) MHA(LN_a(h_T)); lambda = 0: plain.

The ablation --mixup-variant in-attention mixes inside layer l's attention sub-layer, before its
LayerNorm, the ratio from the heads' attention entropies both ways; lambda = 0 is the plain forward:

    h~_T = LN_a(h_T + lambda MHA(h_T, h_S, h_S) + (1 - lambda) MHA(h_T, h_T, h_T))

Shapes: B pairs, T tokens (both texts padded to one length), H hidden, N heads.
"""
import math
import random
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn

from losses import prediction_consistency_loss, representation_consistency_loss
from methods import TEST_INPUTS, Method, TeacherSettings, flag, pair_batch
from minxlt.errors import InputError
from model import attention_bias, embed_pair, mean_pool


def inverse_sigmoid_decay(step, k):
    """Scheduled sampling's p* (Eq. 6, inverse sigmoid decay, Bengio et al. 2015): k / (k + exp(step / k)),
    the chance that the mixup is fed the gold source rather than its round trip."""
    return k / (k + math.exp(min(step / k, 700.0)))  # exp(700) is near float's largest: p* is 0 from there on


def attention_entropy(probs, query_mask, key_mask):
    """The in-attention ablation's H(A) (B,): each real query's entropy over the real keys (renormalised),
    averaged over heads and queries; probs (B, N, Tq, Tk), masks (B, Tq), (B, Tk)."""
    p = probs * key_mask[:, None, None, :]
    p = p / p.sum(-1, keepdim=True).clamp(min=1e-12)
    entropy = -(p * p.clamp(min=1e-12).log()).sum(-1).mean(1)        # (B, Tq); 0 log 0 = 0 with a finite gradient
    q = query_mask.to(entropy.dtype)
    return (entropy * q).sum(1) / q.sum(1).clamp(min=1)              # (B,)


def alignment_entropies(source, source_mask, target, target_mask):
    """Eq. 5's H(A) and H(A^T) (B,), A_ij = softmax_j(h_Ti . h_Sj / sqrt(n)) over real tokens: the mean entropy
    of A's rows, and of its columns normalised; source (B, Ts, H), target (B, Tt, H), masks (B, Ts), (B, Tt)."""
    t, s = target.float(), source.float()
    scores = t @ s.transpose(1, 2) / math.sqrt(t.shape[-1])                     # (B, Tt, Ts)
    A = scores.masked_fill(source_mask[:, None, :] == 0, float("-inf")).softmax(-1)
    A = A * target_mask[:, :, None]                                             # padded target rows out
    columns = A / A.sum(1, keepdim=True).clamp(min=1e-12)                      # A^T's rows, as distributions
    entropy = lambda p, dim: -(p * p.clamp(min=1e-12).log()).sum(dim)          # 0 log 0 = 0 with a finite gradient
    mean = lambda values, mask: (values * mask).sum(1) / mask.sum(1).clamp(min=1)
    return mean(entropy(A, 2), target_mask.float()), mean(entropy(columns, 1), source_mask.float())


class MixupRatio(nn.Module):
    """The ratio after Eq. 5: lambda = lambda0 * sigmoid((H(A) + H(A^T)) W + b) per example, W and b trained."""

    def __init__(self, lambda0=0.5):
        super().__init__()
        self.lambda0 = lambda0
        self.linear = nn.Linear(1, 1)

    def forward(self, entropy, entropy_transposed):
        x = (entropy + entropy_transposed)[:, None].to(self.linear.weight.dtype)  # bf16 where sharded so
        return self.lambda0 * torch.sigmoid(self.linear(x))[:, 0]  # (B,)


def mixup_layer(layer, ratio_net, source, source_mask, target, target_mask, fixed_ratio=None):
    """Eq. 2-5 at layer l, as the module's docstring writes them: (source output, target output, lambda (B,));
    `fixed_ratio`, an ablation, a constant ratio."""
    if layer.pre_norm:
        return mixup_layer_pre_norm(layer, ratio_net, source, source_mask, target, target_mask, fixed_ratio)
    h_s = layer.attn_norm(source + layer.dropout(layer.attention(source, source_mask)))  # Eq. 2: h_S^{l+1}
    h_t = layer.attn_norm(target + layer.dropout(layer.attention(target, target_mask)))  # Eq. 2: h_T^{l+1}
    h_ts = layer.attention(h_t, target_mask, context=h_s, context_mask=source_mask)      # Eq. 3, the same parameters
    lam = mix_ratio(ratio_net, fixed_ratio, h_s, source_mask, h_t, target_mask)          # Eq. 5, the ratio after it
    lam_ = lam.to(h_t.dtype)[:, None, None]                                              # (B, 1, 1)
    mixed = layer.attn_norm(lam_ * layer.dropout(h_ts) + (1 - lam_) * h_t)               # Eq. 4
    return layer.feed_forward(h_s), layer.feed_forward(mixed), lam


def mixup_layer_pre_norm(layer, ratio_net, source, source_mask, target, target_mask, fixed_ratio=None):
    """Eq. 2-5 at a pre-LN layer l, placed as the module's docstring says."""
    h_s = source + layer.dropout(layer.attention(layer.attn_norm(source), source_mask))  # Eq. 2: h_S^{l+1}
    h_t = target + layer.dropout(layer.attention(layer.attn_norm(target), target_mask))  # Eq. 2: h_T^{l+1}
    n_s, n_t = layer.attn_norm(h_s), layer.attn_norm(h_t)                                # what the attention reads
    cross = layer.attention(n_t, target_mask, context=n_s, context_mask=source_mask)
    h_ts = h_t + layer.dropout(cross)                                                    # Eq. 3, a sub-layer
    lam = mix_ratio(ratio_net, fixed_ratio, n_s, source_mask, n_t, target_mask)          # Eq. 5, the ratio after it
    lam_ = lam.to(h_t.dtype)[:, None, None]                                              # (B, 1, 1)
    mixed = lam_ * h_ts + (1 - lam_) * h_t                                               # Eq. 4; its LN: LN_f's, next
    return layer.feed_forward(h_s), layer.feed_forward(mixed), lam


def mix_ratio(ratio_net, fixed_ratio, h_s, source_mask, h_t, target_mask):
    """lambda (B,): Eq. 5's entropies through the ratio's W and b, or an ablation's constant `fixed_ratio`."""
    if fixed_ratio is None:
        return ratio_net(*alignment_entropies(h_s, source_mask, h_t, target_mask))
    return torch.full((len(h_t),), float(fixed_ratio), device=h_t.device)


def mixup_layer_in_attention(layer, ratio_net, source, source_mask, target, target_mask, fixed_ratio=None):
    """The ablation --mixup-variant in-attention: self- and cross-attention mixed before the LayerNorm, the ratio
    from the heads' attention entropies both ways. (source output, target output, lambda)."""
    source_output = layer.forward(source, source_mask)  # not layer(...): under Layer.run a sharded call releases it
    q, kv = (layer.attn_norm(target), layer.attn_norm(source)) if layer.pre_norm else (target, source)  # MHA reads
    self_attention = layer.attention(q, target_mask)
    cross, A = layer.attention(q, target_mask, context=kv, context_mask=source_mask, return_probs=True)
    if fixed_ratio is None:
        _, A_t = layer.attention(kv, source_mask, context=q, context_mask=target_mask, return_probs=True)
        lam = ratio_net(attention_entropy(A, target_mask, source_mask),
                        attention_entropy(A_t, source_mask, target_mask))
    else:  # an ablation: a constant ratio
        lam = torch.full((len(target),), float(fixed_ratio), device=target.device)
    lam_ = lam.to(cross.dtype)[:, None, None]  # (B, 1, 1)
    mixed = lam_ * cross + (1 - lam_) * self_attention
    h = target + layer.dropout(mixed)
    return source_output, layer.feed_forward(h if layer.pre_norm else layer.attn_norm(h)), lam_[:, 0, 0]


VARIANTS = {"paper": mixup_layer, "in-attention": mixup_layer_in_attention}


def mixup_encode(encoder, ratio_net, source_ids, source_mask, target_ids, target_mask, layer, fixed_ratio=None,
                 variant="paper"):
    """Both texts through the encoder, the target mixed at `layer` (from 1): (source states, target states, lambda)."""
    B = len(source_ids)
    h, mask = embed_pair(encoder, source_ids, source_mask, target_ids, target_mask)  # (2B, T, H), (2B, T)
    bias, lam = attention_bias(mask, h), None  # the padding mask as attention takes it, built once
    for number, block in enumerate(encoder.layers, start=1):
        if number != layer:
            h = block(h, bias)  # each text on its own
            continue
        source, target, lam = block.run(VARIANTS[variant], ratio_net, h[:B], source_mask, h[B:], target_mask,
                                        fixed_ratio)
        h = torch.cat([source, target])
    h = encoder.norm(h)  # a pre-LN encoder's final LayerNorm (post-LN: the identity)
    return h[:B], h[B:], lam


class XMixup(nn.Module):
    """A Classifier run as X-Mixup on (source, target) pairs, plus the ratio's W and b (ratio_net)."""

    def __init__(self, classifier, layer, lambda0=0.5, fixed_ratio=None, variant="paper"):
        super().__init__()
        L = len(classifier.encoder.layers)
        if not 1 <= layer <= L:
            raise ValueError(f"--mixup-layer {layer} is not one of the encoder's layers 1..{L}")
        self.classifier, self.layer, self.fixed_ratio, self.variant = classifier, layer, fixed_ratio, variant
        self.ratio_net = MixupRatio(lambda0)

    def forward(self, source_ids, source_mask, target_ids, target_mask):
        """Eq. 2-5, then the shared head on each side: (source logits, target logits, r_S, r_T (Eq. 7), lambda)."""
        final_s, final_t, lam = mixup_encode(self.classifier.encoder, self.ratio_net, source_ids, source_mask,
                                             target_ids, target_mask, self.layer, self.fixed_ratio, self.variant)
        classify = self.classifier.classify
        source, target = classify(final_s, source_mask)[0], classify(final_t, target_mask)[0]
        # Eq. 7's sequence representations r: the mean-pooled final states of the real tokens
        return source, target, mean_pool(final_s, source_mask), mean_pool(final_t, target_mask), lam

    def predict(self, source_ids, source_mask, target_ids, target_mask):
        """Mixup inference (Sec. 4.3): sentence labels from the two distributions' mean (log), words the target's."""
        source, target = self(source_ids, source_mask, target_ids, target_mask)[:2]
        return target if target.dim() == 3 else ((source.float().softmax(-1) + target.float().softmax(-1)) / 2).log()


def task_losses(alpha, source, target, gold_source=None):
    """Eq. 8's task terms, alpha L(source) + (1 - alpha) L(target); `gold_source` false (a step feeding untagged
    round trips, as the authors' code): the target's alone. None (their round trips keep labels): Eq. 8."""
    mixed = alpha * source + (1 - alpha) * target
    return mixed if gold_source is None else torch.where(gold_source, mixed, target)  # on the device: no branch


def untagged(trips):
    """Whether a run's round trips are items without a scored label (X-Mixup's word-level ones); none: false."""
    return bool(trips) and all(label == -100 for trip in trips for label in trip.label)


def labeller(classifier, info):
    """A source-trained classifier as a teacher of pairs: its logits of the translation alone."""
    return lambda source_ids, source_mask, target_ids, target_mask: (None, classifier(target_ids, target_mask)[0])


class XMixupMethod(Method):
    """X-Mixup: a translation mixed with its source at one layer, by a learnt ratio. Task losses on both sides (Eq. 8),
    consistency losses (Eq. 7), scheduled sampling of round trips; word labels: a teacher's soft tags (Sec. 4.2)."""
    draws = "pairs"
    test_inputs = ("oracle", "translation", "text")  # "text": the plain classifier on the target alone, an ablation
    teacher = None  # the soft word labels' labeller (start)
    round_trip = {}  # the source's training texts' round trips: get(id, lang, default) (Run.round_trips)
    untagged_trips = False  # word labels: round trips without tags (X-Mixup's): a step feeding them drops the source's

    @dataclass
    class Settings(TeacherSettings):
        mixup_layer: int = flag(None, "the layer (from 1) where the translation is mixed (default: the paper's first "
                                      "for sentence labels, fourth for word labels; for QA its 16th of 24, scaled to "
                                      "the encoder's depth; Sec. 5.1)", "[1, inf)")
        mixup_alpha: float = flag(None, "alpha of Eq. 8, the source's share of the task loss (default: the paper's 0.4 "
                                        "for sentence labels, 0.8 for word labels, 0.2 for QA)", "[0, 1]")
        lambda0: float = flag(0.5, "the largest mixup ratio (the ratio after Eq. 5)", "[0, 1]")
        ss_k: float = flag(None, "k of scheduled sampling's inverse sigmoid decay after Eq. 6 (default: the paper's "
                                 "1000, 2000 for QA, Table 10)", "(0, inf)")
        round_trip: str = flag(None, "the round-trip translations of the source's training texts through each target "
                                     "language, which scheduled sampling feeds (Eq. 6): a path with {lang} "
                                     "(docs/methods.md names X-Mixup's files); default: the task's own, else none")
        soft_labels: str = flag(None, "word labels: X-Mixup's released translations and their soft labels, a path with "
                                      "{lang} (<data>/translate-train-logits/{lang}.txt), in the teacher's place")
        mixup_variant: str = flag("paper", "paper: Eq. 2-5 as written; in-attention: the ablation that mixes inside "
                                           "the attention sub-layer, before its LayerNorm", tuple(VARIANTS))
        constant_ratio: bool = flag(False, "ablation: lambda = lambda0 instead of the entropy-based ratio")
        no_consistency: bool = flag(False, "ablation: without the consistency losses of Eq. 7")
        no_mixup_inference: bool = flag(False, "ablation: test the target text alone, not mixed with its translation")
        self_pairs: bool = True  # the authors pair every language's text with its English source, English's own too

        def for_task(self, level, num_layers, common):
            """The paper's mixup layer (QA's 16th of 24, scaled), alpha of Eq. 8, k after Eq. 6 (Sec. 5.1, Table 10)."""
            return {"mixup_layer": {"sentence": 1, "word": 4, "span": round(16 / 24 * num_layers)}[level],
                    "mixup_alpha": {"sentence": 0.4, "word": 0.8, "span": 0.2}[level],
                    "ss_k": 2000 if level == "span" else 1000,
                    "test_input": "text" if self.no_mixup_inference else None}

    def training_items(self):
        """The pairs and the round trips scheduled sampling feeds (Eq. 6); word labels need a teacher (Sec. 4.2)."""
        settings, run = self.settings, self.run
        if settings.no_mixup_inference and settings.test_input != "text":  # the ablation: the target text alone
            raise InputError(f"--no-mixup-inference tests the target text alone, not "
                             f"{TEST_INPUTS[settings.test_input]}")
        taught = settings.teacher or settings.teacher_cache or settings.soft_labels
        if not run.level.translations_keep_labels and not taught:
            raise InputError("--method xmixup on word labels needs --teacher: a model trained on the source (--method "
                             "zero-shot), whose tags of the translations are their soft labels (X-Mixup Sec. 4.2); "
                             "or --soft-labels, the authors' released ones")
        if run.level.translations_keep_labels and taught:
            raise InputError(f"--teacher, --teacher-cache and --soft-labels are for --method xmixup on word labels "
                             f"(soft labels of the translations); --task {settings.task}'s translations have their "
                             f"source's labels")
        if not 1 <= settings.mixup_layer <= run.num_layers:
            raise InputError(f"--mixup-layer {settings.mixup_layer} is not one of the encoder's layers "
                             f"1..{run.num_layers}")
        items = super().training_items()
        self.round_trip = run.round_trips(settings.round_trip)
        if not run.level.translations_keep_labels:  # word labels: X-Mixup's round trips have no tags (task_losses)
            self.untagged_trips = untagged(list(self.round_trip.values()))
        if run.rank == 0 and not self.round_trip:
            print(f"note: {run.task.name} has no round-trip translations of its {run.task.source} training texts "
                  "(--round-trip): scheduled sampling is off (the mixup always sees the gold source)", file=sys.stderr)
        return items

    def wrap(self, model):
        settings = self.settings
        with torch.random.fork_rng(devices=[]):  # W and b the same on every process, whatever their shape
            torch.manual_seed(settings.seed)
            fixed = settings.lambda0 if settings.constant_ratio else None
            core = XMixup(model, settings.mixup_layer, settings.lambda0, fixed, settings.mixup_variant)
            core.ratio_net.to(self.run.device)  # beside the classifier (a sharded run's moves when it is sharded)
        if settings.constant_ratio:
            core.ratio_net.requires_grad_(False)  # unused: DDP must not wait for its gradient
        return core

    def start(self, model, items):
        """The soft word labels' teacher (Sec. 4.2), once the model is in place (sharded, where it is)."""
        self.teacher = self.run.teacher(self.settings, items, labeller)

    def make_batch(self, items, weights, step):
        """Scheduled sampling (Eq. 6): with probability 1 - p*(step) the sources are their round trips, drawn
        once per step, seeded by it (a resumed run and every process draw the same)."""
        sources, targets = zip(*items)
        draw = random.Random(f"{self.settings.seed}/{step}/ss").random()
        fed = self.round_trip and draw > inverse_sigmoid_decay(step, self.settings.ss_k)
        if fed:  # each source's round trip through its pair's target language, where it has one
            sources = [self.round_trip.get(s.id, t.lang, s) for s, t in zip(sources, targets)]
        batch = pair_batch(self.run, sources, targets, weights, self.teacher)
        batch["round_trip"] = torch.tensor(float(bool(fed)))
        if not self.run.level.translations_keep_labels:  # whether the step trains on the source's tags (task_losses)
            batch["gold_source"] = torch.tensor(not (fed and self.untagged_trips))
        return batch

    def loss(self, model, batch):
        """Eq. 8, alpha L_task(source) + (1 - alpha) L_task(target) (the level's loss), plus Eq. 7's consistency
        terms; on word labels a fed round trip has no tags: the target's loss alone (task_losses)."""
        settings, level, w = self.settings, self.run.level, batch["weights"]
        source_logits, target_logits, source_r, target_r, lam = model(batch["source_ids"], batch["source_mask"],
                                                                      batch["target_ids"], batch["target_mask"])
        source = level.loss(source_logits, batch["source_labels"], w, batch["source_mask"])
        if level.translations_keep_labels:  # a sentence label, or the translation's own answer span
            target = level.loss(target_logits, batch["target_labels"], w, batch["target_mask"])
        else:  # the labeller's soft tags (Sec. 4.2), plus a joint task's intent (else 0)
            target = level.soft_label_loss(target_logits, batch["teacher_logits"], batch)
            target = target + level.loss(target_logits, batch["target_labels"], w, batch["target_mask"])
        gold = None if level.translations_keep_labels else batch["gold_source"]  # word labels: trips without tags
        loss = task_losses(settings.mixup_alpha, source, target, gold)  # Eq. 8
        parts = {"source": source.detach(), "target": target.detach(),
                 "lambda": (lam * w).sum().detach() / w.sum().clamp(min=1), "round_trip": batch["round_trip"]}
        if not settings.no_consistency:  # Eq. 7; the KL between predictions is for sentence labels only
            mse = representation_consistency_loss(source_r, target_r, w)
            loss = loss + mse
            parts.update(mse=mse.detach())
            if level.labels_texts:
                kl = prediction_consistency_loss(source_logits, target_logits, w)
                loss = loss + kl
                parts.update(kl=kl.detach())
        return loss, parts

    def predictor(self, model, test_input):
        """Mixup inference (Sec. 4.3), the pair's two predictions averaged; "text": the classifier alone."""
        if test_input == "text":
            return super().predictor(model.classifier, test_input)
        return model.predict, "pair"
