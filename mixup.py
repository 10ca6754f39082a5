"""X-Mixup (Yang et al. 2022): cross-lingual manifold mixup. A target text and its source-language
counterpart run the encoder side by side; at one layer l the target's hidden states are mixed with
what they attend to in the source, by a ratio that grows with how well the two align.

The mixup layer as the paper writes it (the default, --mixup-variant paper), with LN_a layer l's
attention LayerNorm and MHA its multi-head attention (projections included, Appendix A.1, Eq. 9-11):

    h'_S = LN_a(h_S + MHA(h_S, h_S, h_S))                Eq. 2
    h'_T = LN_a(h_T + MHA(h_T, h_T, h_T))                Eq. 2
    h_T|S = MHA(h'_T, h'_S, h'_S)                        Eq. 3
    A_ij = softmax_j(h'_Ti h'_Sj / sqrt(n))              Eq. 5
    H(A) = -1/I sum_i sum_j A_ij log A_ij                Eq. 5 (its summand: A_ji)
    lambda = lambda0 sigmoid((H(A) + H(A^T)) W + b)      the sentence after Eq. 5
    h~_T = LN_a(lambda h_T|S + (1 - lambda) h'_T)        Eq. 4

Choices the paper leaves open, one per line:
  - Eq. 2's MultiHead is layer l's whole attention sub-layer, residual and LayerNorm included: the
    paper's h^{l+1} are hidden states, and it omits only the feed-forward "for simplification".
  - Eq. 4's LN is layer l's own attention LayerNorm: as Eq. 3 shares the attention's parameters,
    X-Mixup then adds no parameters but the ratio's W and b.
  - The feed-forward the paper omits follows as in every layer: h~_T and h'_S each go through
    layer l's feed-forward sub-layer, LN_f(h + FFN(h)).
  - H(A): the paper defines A_ij over target tokens i and source tokens j (softmax axis unstated:
    here j), but writes H(A)'s summand A_ji, which fits A only where I = J; here H(A) is the mean
    over A's rows (target tokens i) of each row's entropy over the source tokens j.
  - H(A^T), which the paper names but does not define: A's columns are not distributions; H(A^T)
    is the mean entropy of A's columns, each normalised to sum to 1 (over the target tokens).
  - n is the hidden size; h_T|S has dropout as the layer's own attention output has.
  - At lambda = 0 this is not the plain layer: h~_T = LN_a(h'_T) = LN_a(LN_a(h_T + MHA(h_T))), the
    attention LayerNorm twice. The authors' code does the same (xmixup/models/bert.py, BertSelfOutput:
    LayerNorm(ratio * cross + (1 - ratio) * input_tensor), input_tensor already normalised).

In a pre-LN layer (XLM-R XL and XXL: x + MHA(LN_a(x)), then x + FFN(LN_f(x))), one line per choice:
  - Eq. 2 is the attention sub-layer with its residual, its LayerNorm before it:
    h'_S = h_S + MHA(LN_a(h_S)), and h'_T alike.
  - Eq. 3 is a sub-layer too, with the residual every pre-LN sub-layer has, its attention reading
    LN_a of its inputs: h_T|S = h'_T + MHA(LN_a(h'_T), LN_a(h'_S), LN_a(h'_S)); Eq. 5's A compares
    those same normalised states.
  - Eq. 4 then mixes two hidden states of one scale, with no LayerNorm after it (none follows a
    pre-LN sub-layer; the feed-forward's LN_f normalises its input): h~_T = lambda h_T|S +
    (1 - lambda) h'_T = h'_T + lambda MHA(...). The residual stream is not rescaled by 1 - lambda,
    which every later layer would read, and lambda = 0 is the plain pre-LN layer.
  - The in-attention ablation mixes the two attentions of LN_a(h_T) inside the residual:
    h~_T = h_T + lambda MHA(LN_a(h_T), LN_a(h_S)) + (1 - lambda) MHA(LN_a(h_T)); lambda = 0 is the
    plain layer here too.

The ablation --mixup-variant in-attention mixes inside layer l's attention sub-layer, before its
LayerNorm, with the entropies of the heads' attention probabilities both ways:

    h~_T = LN_a(h_T + lambda MHA(h_T, h_S, h_S) + (1 - lambda) MHA(h_T, h_T, h_T))

so that lambda = 0 is exactly the plain forward.

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
    """Scheduled sampling's p* (Eq. 6), by the inverse sigmoid decay the sentence after Eq. 6 names
    (Bengio et al. 2015): p* = k / (k + exp(step / k)), the probability that the mixup is fed the
    gold source rather than its round-trip translation."""
    return k / (k + math.exp(min(step / k, 700.0)))  # exp(700) is near float's largest: p* is 0 from there on


def attention_entropy(probs, query_mask, key_mask):
    """The in-attention ablation's H(A) per example, in nats: the entropy of each real query's
    attention over the real keys, averaged over heads and real queries. probs (B, N, Tq, Tk);
    masks (B, Tq), (B, Tk). Attention on padded keys is dropped and the rest renormalised."""
    p = probs * key_mask[:, None, None, :]
    p = p / p.sum(-1, keepdim=True).clamp(min=1e-12)
    entropy = -(p * p.clamp(min=1e-12).log()).sum(-1).mean(1)        # (B, Tq); 0 log 0 = 0 with a finite gradient
    q = query_mask.to(entropy.dtype)
    return (entropy * q).sum(1) / q.sum(1).clamp(min=1)              # (B,)


def alignment_entropies(source, source_mask, target, target_mask):
    """Eq. 5's H(A) and H(A^T) per example, in nats, from the hidden states themselves:
    A_ij = softmax_j(h_Ti . h_Sj / sqrt(n)) over the real source tokens j. H(A) averages the
    entropy of A's rows over the real target tokens; H(A^T) that of A's columns, each normalised
    to sum to 1 over the real target tokens, over the real source tokens. source (B, Ts, H),
    target (B, Tt, H); masks (B, Ts), (B, Tt)."""
    t, s = target.float(), source.float()
    scores = t @ s.transpose(1, 2) / math.sqrt(t.shape[-1])                     # (B, Tt, Ts)
    A = scores.masked_fill(source_mask[:, None, :] == 0, float("-inf")).softmax(-1)
    A = A * target_mask[:, :, None]                                             # padded target rows out
    columns = A / A.sum(1, keepdim=True).clamp(min=1e-12)                      # A^T's rows, as distributions
    entropy = lambda p, dim: -(p * p.clamp(min=1e-12).log()).sum(dim)          # 0 log 0 = 0 with a finite gradient
    mean = lambda values, mask: (values * mask).sum(1) / mask.sum(1).clamp(min=1)
    return mean(entropy(A, 2), target_mask.float()), mean(entropy(columns, 1), source_mask.float())   # (B,), (B,)


class MixupRatio(nn.Module):
    """The ratio after Eq. 5: lambda = lambda0 * sigmoid((H(A) + H(A^T)) W + b), per example, W and b trained."""

    def __init__(self, lambda0=0.5):
        super().__init__()
        self.lambda0 = lambda0
        self.linear = nn.Linear(1, 1)

    def forward(self, entropy, entropy_transposed):
        x = (entropy + entropy_transposed)[:, None].to(self.linear.weight.dtype)  # W, b in bf16 where a sharded run gathers them so
        return self.lambda0 * torch.sigmoid(self.linear(x))[:, 0]  # (B,)


def mixup_layer(layer, ratio_net, source, source_mask, target, target_mask, fixed_ratio=None):
    """Eq. 2-5 at layer l, as the module's docstring writes them: (source output, target output,
    lambda (B,)). `fixed_ratio`, an ablation, replaces the ratio with a constant."""
    if layer.pre_norm:
        return mixup_layer_pre_norm(layer, ratio_net, source, source_mask, target, target_mask, fixed_ratio)
    h_s = layer.attn_norm(source + layer.dropout(layer.attention(source, source_mask)))   # Eq. 2: h_S^{l+1}
    h_t = layer.attn_norm(target + layer.dropout(layer.attention(target, target_mask)))   # Eq. 2: h_T^{l+1}
    h_ts = layer.attention(h_t, target_mask, context=h_s, context_mask=source_mask)       # Eq. 3, the same parameters
    lam = mix_ratio(ratio_net, fixed_ratio, h_s, source_mask, h_t, target_mask)             # Eq. 5 and the ratio after it
    lam_ = lam.to(h_t.dtype)[:, None, None]                                                 # (B, 1, 1)
    mixed = layer.attn_norm(lam_ * layer.dropout(h_ts) + (1 - lam_) * h_t)                  # Eq. 4
    return layer.feed_forward(h_s), layer.feed_forward(mixed), lam


def mixup_layer_pre_norm(layer, ratio_net, source, source_mask, target, target_mask, fixed_ratio=None):
    """Eq. 2-5 at a pre-LN layer l, placed as the module's docstring says."""
    h_s = source + layer.dropout(layer.attention(layer.attn_norm(source), source_mask))   # Eq. 2: h_S^{l+1}
    h_t = target + layer.dropout(layer.attention(layer.attn_norm(target), target_mask))   # Eq. 2: h_T^{l+1}
    n_s, n_t = layer.attn_norm(h_s), layer.attn_norm(h_t)                                 # what the attention reads
    h_ts = h_t + layer.dropout(layer.attention(n_t, target_mask, context=n_s, context_mask=source_mask))  # Eq. 3, a sub-layer
    lam = mix_ratio(ratio_net, fixed_ratio, n_s, source_mask, n_t, target_mask)             # Eq. 5 and the ratio after it
    lam_ = lam.to(h_t.dtype)[:, None, None]                                                 # (B, 1, 1)
    mixed = lam_ * h_ts + (1 - lam_) * h_t                                                  # Eq. 4; its LN is LN_f's, next
    return layer.feed_forward(h_s), layer.feed_forward(mixed), lam


def mix_ratio(ratio_net, fixed_ratio, h_s, source_mask, h_t, target_mask):
    """lambda (B,): from the entropies of Eq. 5 through the ratio's W and b, or an ablation's constant `fixed_ratio`."""
    if fixed_ratio is None:
        return ratio_net(*alignment_entropies(h_s, source_mask, h_t, target_mask))
    return torch.full((len(h_t),), float(fixed_ratio), device=h_t.device)


def mixup_layer_in_attention(layer, ratio_net, source, source_mask, target, target_mask, fixed_ratio=None):
    """The ablation --mixup-variant in-attention: the target's attention mixed with its
    cross-attention over the source inside the attention sub-layer, before its LayerNorm, the
    ratio from the heads' attention entropies both ways. (source output, target output, lambda)."""
    source_output = layer.forward(source, source_mask)  # not layer(...): under Layer.run a sharded layer's call would release it
    q, kv = (layer.attn_norm(target), layer.attn_norm(source)) if layer.pre_norm else (target, source)  # what attention reads
    self_attention = layer.attention(q, target_mask)
    cross, A = layer.attention(q, target_mask, context=kv, context_mask=source_mask, return_probs=True)
    if fixed_ratio is None:
        _, A_t = layer.attention(kv, source_mask, context=q, context_mask=target_mask, return_probs=True)
        lam = ratio_net(attention_entropy(A, target_mask, source_mask), attention_entropy(A_t, source_mask, target_mask))
    else:  # an ablation: a constant ratio
        lam = torch.full((len(target),), float(fixed_ratio), device=target.device)
    lam_ = lam.to(cross.dtype)[:, None, None]                                               # (B, 1, 1)
    mixed = lam_ * cross + (1 - lam_) * self_attention
    h = target + layer.dropout(mixed)
    return source_output, layer.feed_forward(h if layer.pre_norm else layer.attn_norm(h)), lam_[:, 0, 0]


VARIANTS = {"paper": mixup_layer, "in-attention": mixup_layer_in_attention}


def mixup_encode(encoder, ratio_net, source_ids, source_mask, target_ids, target_mask, layer, fixed_ratio=None, variant="paper"):
    """Both texts through the encoder, stacked along the batch, the target mixed at `layer` (counted
    from 1, as --mixup-layer is). Returns (source's final states, target's final states, lambda),
    each state (B, T, H)."""
    B = len(source_ids)
    h, mask = embed_pair(encoder, source_ids, source_mask, target_ids, target_mask)  # (2B, T, H), (2B, T)
    bias, lam = attention_bias(mask, h), None                        # the padding mask as attention takes it, built once
    for number, block in enumerate(encoder.layers, start=1):
        if number != layer:
            h = block(h, bias)                                       # each text on its own
            continue
        source, target, lam = block.run(VARIANTS[variant], ratio_net, h[:B], source_mask, h[B:], target_mask, fixed_ratio)
        h = torch.cat([source, target])
    h = encoder.finish(h)
    return h[:B], h[B:], lam


class XMixup(nn.Module):
    """A Classifier run as X-Mixup on (source, target) pairs, plus the ratio's W and b (ratio_net)."""

    def __init__(self, classifier, layer, lambda0=0.5, fixed_ratio=None, variant="paper"):
        super().__init__()
        if not 1 <= layer <= len(classifier.encoder.layers):
            raise ValueError(f"--mixup-layer {layer} is not one of the encoder's layers 1..{len(classifier.encoder.layers)}")
        self.classifier, self.layer, self.fixed_ratio, self.variant = classifier, layer, fixed_ratio, variant
        self.ratio_net = MixupRatio(lambda0)

    def forward(self, source_ids, source_mask, target_ids, target_mask):
        """Eq. 2-5 at the mixup layer (mixup_encode), then the shared head on each side: (source
        logits, target logits, source representation r_S, target representation r_T (Eq. 7), lambda)."""
        final_s, final_t, lam = mixup_encode(self.classifier.encoder, self.ratio_net, source_ids, source_mask, target_ids, target_mask,
                                             self.layer, self.fixed_ratio, self.variant)
        source, target = self.classifier.classify(final_s, source_mask)[0], self.classifier.classify(final_t, target_mask)[0]
        # Eq. 7's sequence representations r: the mean-pooled final states of the real tokens
        return source, target, mean_pool(final_s, source_mask), mean_pool(final_t, target_mask), lam

    def predict(self, source_ids, source_mask, target_ids, target_mask):
        """Mixup inference (Sec. 4.3): a sentence label from the mean of the two predicted
        distributions (returned as log-probabilities), word labels from the target alone."""
        source, target = self(source_ids, source_mask, target_ids, target_mask)[:2]
        if target.dim() == 3:
            return target
        return ((source.float().softmax(-1) + target.float().softmax(-1)) / 2).log()


def task_losses(alpha, source, target, gold_source=None):
    """Eq. 8's task terms, alpha L(source) + (1 - alpha) L(target). On word labels X-Mixup's round
    trips, which scheduled sampling feeds, have no tags, and its code then drops the source's term
    for the step and counts the target's whole (xmixup/tasks/xlmr/token_classification.py:127-137:
    sample_gold false, task_loss = trg_task_loss): `gold_source`, a bool tensor, false on a step
    that feeds untagged round trips (XMixupMethod.make_batch), picks the target's loss alone on
    the device (torch.where, no `if`, so a compiled step has no branch). A pair whose source has
    no round trip (English paired with itself, a language without a file) keeps its gold source
    on that step, its tags unused, as there every source's are. None (sentence labels, answer
    spans, whose round trips keep their labels) keeps Eq. 8 as written."""
    mixed = alpha * source + (1 - alpha) * target
    return mixed if gold_source is None else torch.where(gold_source, mixed, target)


def untagged(trips):
    """Whether a run's round trips are word-labelled items without a scored label (X-Mixup's
    translate-train-en-token); none: false."""
    return bool(trips) and all(label == -100 for trip in trips for label in trip.label)


def labeller(classifier, info):
    """A source-trained classifier as a teacher of pairs (teacher.Teacher): its logits of the
    translation alone, in the place of a pair model's target logits."""
    return lambda source_ids, source_mask, target_ids, target_mask: (None, classifier(target_ids, target_mask)[0])


class XMixupMethod(Method):
    """X-Mixup: a translation mixed with its source at one layer, by a learnt ratio. Task losses on both
    sides (Eq. 8) plus consistency losses (Eq. 7); scheduled sampling feeds round-trip translations of the
    source where the task has them. On word labels the translation's labels are a source-trained model's
    soft tags (Sec. 4.2, --teacher)."""
    draws = "pairs"
    test_inputs = ("oracle", "translation", "text")  # "text": the plain classifier on the target alone, an ablation
    teacher = None  # the soft word labels' labeller (start)
    round_trip = {}  # the round-trip translations of the source's training texts: get(id, lang, default) (Run.round_trips)
    untagged_trips = False  # word labels: whether they have no tags (X-Mixup's), so that a step feeding them drops the source's loss

    @dataclass
    class Settings(TeacherSettings):
        mixup_layer: int = flag(None, "the layer (from 1) where the translation is mixed (default: the paper's first for "
                                      "sentence labels, fourth for word labels; for QA its 16th of 24, scaled to the "
                                      "encoder's depth; Sec. 5.1)", "[1, inf)")
        mixup_alpha: float = flag(None, "alpha of Eq. 8, the source's share of the task loss (default: the paper's 0.4 for "
                                        "sentence labels, 0.8 for word labels, 0.2 for QA)", "[0, 1]")
        lambda0: float = flag(0.5, "the largest mixup ratio (the ratio after Eq. 5)", "[0, 1]")
        ss_k: float = flag(None, "k of scheduled sampling's inverse sigmoid decay after Eq. 6 (default: the paper's 1000, "
                                 "2000 for QA, Table 10)", "(0, inf)")
        round_trip: str = flag(None, "the round-trip translations of the source's training texts through each target "
                                     "language, which scheduled sampling feeds (Eq. 6): a path with {lang} "
                                     "(docs/methods.md names X-Mixup's files); default: the task's own, else none")
        soft_labels: str = flag(None, "word labels: X-Mixup's released translations and their soft labels, a path with "
                                      "{lang} (<data>/translate-train-logits/{lang}.txt), in the teacher's place")
        mixup_variant: str = flag("paper", "paper: Eq. 2-5 as written; in-attention: the ablation that mixes inside the "
                                           "attention sub-layer, before its LayerNorm", tuple(VARIANTS))
        constant_ratio: bool = flag(False, "ablation: lambda = lambda0 instead of the entropy-based ratio")
        no_consistency: bool = flag(False, "ablation: without the consistency losses of Eq. 7")
        no_mixup_inference: bool = flag(False, "ablation: test the target text alone, not mixed with its translation")
        self_pairs: bool = True  # both authors' codes pair every language's text with its English source, English's own too

        def for_task(self, level, num_layers, common):
            """The paper's mixup layer (from 1; QA's is XLM-R large's 16th of 24, scaled to the encoder's
            depth), alpha of Eq. 8 and k of the decay after Eq. 6 (Sec. 5.1, Table 10)."""
            return {"mixup_layer": {"sentence": 1, "word": 4, "span": round(16 / 24 * num_layers)}[level],
                    "mixup_alpha": {"sentence": 0.4, "word": 0.8, "span": 0.2}[level],
                    "ss_k": 2000 if level == "span" else 1000, "test_input": "text" if self.no_mixup_inference else None}

    def training_items(self):
        """The pairs, and the round trips scheduled sampling feeds (Eq. 6); on word labels the translations'
        soft labels need a teacher (Sec. 4.2: word labels do not carry over to a translation)."""
        settings, run = self.settings, self.run
        if settings.no_mixup_inference and settings.test_input != "text":  # the ablation: the target text alone
            raise InputError(f"--no-mixup-inference tests the target text alone, not {TEST_INPUTS[settings.test_input]}")
        taught = settings.teacher or settings.teacher_cache or settings.soft_labels
        if not run.level.translations_keep_labels and not taught:
            raise InputError("--method xmixup on word labels needs --teacher: a model trained on the source (--method "
                             "zero-shot), whose tags of the translations are their soft labels (X-Mixup Sec. 4.2); or "
                             "--soft-labels, the authors' released ones")
        if run.level.translations_keep_labels and taught:
            raise InputError(f"--teacher, --teacher-cache and --soft-labels are for --method xmixup on word labels (soft "
                             f"labels of the translations); --task {settings.task}'s translations have their source's labels")
        if not 1 <= settings.mixup_layer <= run.num_layers:
            raise InputError(f"--mixup-layer {settings.mixup_layer} is not one of the encoder's layers 1..{run.num_layers}")
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
            core = XMixup(model, settings.mixup_layer, settings.lambda0, settings.lambda0 if settings.constant_ratio else None,
                          settings.mixup_variant)
            core.ratio_net.to(self.run.device)  # beside the classifier (a sharded run's moves when it is sharded)
        if settings.constant_ratio:
            core.ratio_net.requires_grad_(False)  # unused: DDP must not wait for its gradient
        return core

    def start(self, model, items):
        """The soft word labels' teacher (Sec. 4.2), once the model is in place (sharded, where it is)."""
        self.teacher = self.run.teacher(self.settings, items, labeller)

    def make_batch(self, items, weights, step):
        """Scheduled sampling (Eq. 6): with probability 1 - p*(step) the source is its round-trip
        translation, drawn once per step from a generator seeded by the step, so that a resumed run
        and every process draw the same. On word labels `gold_source` says whether the step trains
        on the source's tags: not where it feeds round trips and they have none (task_losses)."""
        sources, targets = zip(*items)
        fed = self.round_trip and random.Random(f"{self.settings.seed}/{step}/ss").random() > inverse_sigmoid_decay(step, self.settings.ss_k)
        if fed:  # each source's round trip through its pair's target language, where it has one
            sources = [self.round_trip.get(s.id, t.lang, s) for s, t in zip(sources, targets)]
        batch = pair_batch(self.run, sources, targets, weights, self.teacher)
        batch["round_trip"] = torch.tensor(float(bool(fed)))
        if not self.run.level.translations_keep_labels:
            batch["gold_source"] = torch.tensor(not (fed and self.untagged_trips))
        return batch

    def loss(self, model, batch):
        """Eq. 8, alpha L_task(source) + (1 - alpha) L_task(target), plus Eq. 7's consistency terms;
        L_task is the task level's cross-entropy (level.loss: losses.task_loss, or span_loss for answers).
        On word labels a fed round trip has no tags: the target's loss alone (task_losses)."""
        settings, level, w = self.settings, self.run.level, batch["weights"]
        source_logits, target_logits, source_r, target_r, lam = model(batch["source_ids"], batch["source_mask"],
                                                                      batch["target_ids"], batch["target_mask"])
        source = level.loss(source_logits, batch["source_labels"], w, batch["source_mask"])
        if level.translations_keep_labels:  # a sentence label, or the translation's own answer span
            target = level.loss(target_logits, batch["target_labels"], w, batch["target_mask"])
        else:  # the labeller's soft tags (Sec. 4.2), plus a joint task's intent (else 0)
            target = level.soft_label_loss(target_logits, batch["teacher_logits"], batch)
            target = target + level.loss(target_logits, batch["target_labels"], w, batch["target_mask"])
        gold = None if level.translations_keep_labels else batch["gold_source"]  # word labels: X-Mixup's round trips have no tags
        loss = task_losses(settings.mixup_alpha, source, target, gold)  # Eq. 8
        parts = {"source": source.detach(), "target": target.detach(), "lambda": (lam * w).sum().detach() / w.sum().clamp(min=1),
                 "round_trip": batch["round_trip"]}
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
