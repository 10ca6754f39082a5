"""FILTER (Fang et al. 2021): a text and its translation run the encoder's first m layers apart,
k fusion layers together, and the remaining L - m - k "domain" layers apart again. The layers are
the encoder's own, shared by both texts, so FILTER adds no parameters.

    source -> embed -> layers[:m] --.                                     .--> layers[m+k:] -> source states
                                     >-- concat -> layers[m:m+k] -> split
    target -> embed -> layers[:m] --'                                     '--> layers[m+k:] -> target states

m = L, k = 0 is translate-train (each text alone); m = 0, k = L is the plain concatenation.

Self-teaching (Algorithm 1, Eq. 5-6) is two runs: a FILTER model trained on Eq. 4 alone, the
teacher; then a student trained again from the pretrained weights, with the teacher's OUT/best:

    python train.py --method filter --out runs/filter-teacher
    python train.py --method filter --teacher runs/filter-teacher/best --out runs/filter-student

The teacher stays fixed. With each pair of a student's batch come the teacher's logits of the
translation, from its FILTER forward pass without gradient (PairMethod.pair_batch in methods.py;
minxlt/run/teacher.py runs the teacher, or reads them from --teacher-cache), and FilterMethod.loss
adds Eq. 5, KL(p_teacher || p_student) on the translation (losses.self_teaching_loss).

Shapes: B pairs, T tokens (both texts padded to one length), H hidden.
"""
import math

import torch
import torch.nn as nn

from methods import PairMethod, fraction, non_negative_int, positive_float
from minxlt.errors import InputError
from model import attention_bias, embed_pair


def filter_encode(encoder, source_ids, source_mask, target_ids, target_mask, m, k):
    """FILTER Eq. 1-3 -> (H_d^s, H_d^t), each (B, T, H). Each text is embedded with positions from
    its own start. The two are stacked along the batch for the local and domain layers (the same
    computation as running each alone) and joined along the sequence for the fusion layers, where
    each attends to both under both padding masks."""
    L = len(encoder.layers)
    if m < 0 or k < 0 or m + k > L:
        raise ValueError(f"FILTER needs 0 <= m, 0 <= k, m + k <= {L} (the encoder's layers); got m={m}, k={k}")
    B, T = source_ids.shape
    h, mask = embed_pair(encoder, source_ids, source_mask, target_ids, target_mask)  # (2B, T, H), (2B, T)
    bias = attention_bias(mask, h)                                 # built once for the local and domain layers
    for layer in encoder.layers[:m]:                               # local layers
        h = layer(h, bias)
    if k:
        fused = torch.cat([h[:B], h[B:]], dim=1)                   # (B, 2T, H): [H_l^s; H_l^t], Eq. 1
        fused_bias = attention_bias(torch.cat([source_mask, target_mask], dim=1), fused)  # (B, 2T) padding masks
        for layer in encoder.layers[m:m + k]:                      # fusion layers
            fused = layer(fused, fused_bias)
        h = torch.cat([fused[:, :T], fused[:, T:]])                # (2B, T, H): [H_f^s; H_f^t] split back
    for layer in encoder.layers[m + k:]:                           # domain layers, Eq. 2-3
        h = layer(h, bias)
    h = encoder.finish(h)                                          # a pre-LN encoder's final LayerNorm
    return h[:B], h[B:]


class Filter(nn.Module):
    """A Classifier (encoder + head) run as FILTER on (source, target) pairs."""

    def __init__(self, classifier, m, k):
        super().__init__()
        self.classifier, self.m, self.k = classifier, m, k

    def forward(self, source_ids, source_mask, target_ids, target_mask):
        """Eq. 4's p^s and p^t as logits: the shared head over each text's own states (its own <s>,
        or with --pooling mean its own tokens' mean, for sentence labels; its tokens for word labels)."""
        source, target = filter_encode(self.classifier.encoder, source_ids, source_mask, target_ids, target_mask, self.m, self.k)
        return self.classifier.classify(source, source_mask)[0], self.classifier.classify(target, target_mask)[0]

    def predict(self, source_ids, source_mask, target_ids, target_mask):
        """Inference: the target side's logits (the paper uses them for every task)."""
        return self(source_ids, source_mask, target_ids, target_mask)[1]


class FilterMethod(PairMethod):
    """--method filter: Eq. 4 (the task loss on both sides of each pair, through Filter), and with
    --teacher Eq. 6, self-teaching from a FILTER model trained first (Algorithm 1)."""
    name = "filter"
    help = ("FILTER (Fang et al. 2021): each source example and its translation go through the encoder together "
            "(fusion.py), with the task loss on both sides (Eq. 4); self-teaching is a second run from the pretrained "
            "weights with --teacher OUT/best of the first (Eq. 5-6)")

    paper = {"batch_size": 64}  # "Implementation Details": batch size 64 for all tasks
    teacher_kind = "filter"
    # Eq. 4's p^s is read from the source's own states; the authors' sentence classifier reads its "English" logits at
    # position 1 of the joined pair, the target's second token (their modeling_xlm_roberta.py:305)
    fixed = {"source_prediction": "the source text's own states (its <s> for a sentence label)"}
    epoch = ("sentence labels and answers: a pass over every (source, translation) pair of every language and, with "
             "--self-pairs, each source paired with itself; word labels: a pass's worth of the source's texts, as many pairs "
             "(the authors' run_xtag.py pairs each English text once an epoch, with a language drawn at random)")

    @staticmethod
    def add_arguments(parser):
        g = parser.add_argument_group("FILTER", "--preset paper: batch size 64 (Implementation Details); the paper states no "
                                      "learning rate, epochs, m or k")
        g.add_argument("--filter-m", type=non_negative_int, default=1, help="local layers, each text alone (default: 1; the paper "
                       "gives no final m, and its k ablation, Figure 3, holds m = 1)")
        g.add_argument("--filter-k", type=non_negative_int, help="fusion layers over the joined pair (default: 1 for classification "
                       "and tagging; for QA 20 of 24 layers, the largest k of the paper's MLQA ablation, scaled to the encoder's depth)")
        g.add_argument("--kl-weight", type=fraction, help="1 - lambda in Eq. 6: the self-teaching loss weight (default: the paper's 0.5 "
                                                       "for sentence labels, 0.1 for QA, 1.0 for word labels, whose lambda is 0)")
        g.add_argument("--kl-temperature", type=positive_float, default=1.0, help="T of Eq. 5's KL: both distributions softmax(logits "
                       "/ T), the KL times T^2 (default 1: Eq. 5 as the paper writes it; the authors' code: 0.1)")
        g.add_argument("--kl-reduction", default="example", choices=["example", "element"], help="example: each example's KL, "
                       "summed over its classes, averaged over the examples (Eq. 5); element: also averaged over the classes, "
                       "1/C of it, as the authors' nn.KLDivLoss() averages for sentence labels (run_xcls.py, "
                       "modeling_xlm_roberta.py)")
        g.add_argument("--missing-translations", default="refuse", choices=["refuse", "self"], help="a target language without "
                       "translation files: refuse the run (default), or, as the authors' run_xtag.py does, train on the other "
                       "languages' translations alone (lines 956-958) and predict each of its test texts beside itself (363-369)")

    @classmethod
    def epoch_steps(cls, run, settings):
        """Word labels: an epoch is as many pairs as the source has texts, as the authors' run_xtag.py
        counts it (AlignDataset without use_all_samples_per_epoch, lines 558-589 and 960-965: each
        English segment once, beside one language drawn at random); otherwise every pair (PairMethod)."""
        if run.level.name != "word":
            return super().epoch_steps(run, settings)
        return {"max_steps": math.ceil(len(run.training_texts([run.task.source])) / settings.batch_size) * settings.epochs}

    @classmethod
    def defaults(cls, level, num_layers, settings):
        """The KL weights of "Implementation Details"; QA's k is 20 of 24 layers, scaled to the encoder's depth."""
        span = level == "span"
        return {"filter_k": min(round(20 / 24 * num_layers), num_layers - settings["filter_m"]) if span else 1,
                "kl_weight": {"sentence": 0.5, "span": 0.1, "word": 1.0}[level]}

    @classmethod
    def check(cls, settings, run):
        m, k, L = settings.filter_m, settings.filter_k, run.num_layers
        if m + k > L:
            raise InputError(f"--filter-m {m} and --filter-k {k}: FILTER needs m + k <= {L}, the encoder's layers")

    def wrap(self, model, items):
        return Filter(model, self.settings.filter_m, self.settings.filter_k)

    def start(self, model, items):
        """Self-teaching's teacher (Algorithm 1), once the student is in place (sharded, where it is)."""
        self.teacher = self.load_teacher(items, lambda trained, info: Filter(trained, info["filter_m"], info["filter_k"]).eval())

    def loss(self, model, batch):
        """Eq. 4, L_s + L_t, each the task level's cross-entropy (level.loss); with a teacher Eq. 6,
        L_s + lambda L_t + (1 - lambda) L_kl."""
        level, w = self.run.level, batch["weights"]
        source_logits, target_logits = model(batch["source_ids"], batch["source_mask"], batch["target_ids"], batch["target_mask"])
        source = level.loss(source_logits, batch["source_labels"], w, batch["source_mask"])
        # Sentence labels and a translation's own answer span carry over; word labels do not (lambda = 0
        # in Eq. 6), so for word tasks this is 0, or a joint task's intent alone (levels.Word.translated).
        target = level.loss(target_logits, batch["target_labels"], w, batch["target_mask"])
        parts = {"source": source.detach(), "target": target.detach()}
        if "teacher_logits" not in batch:  # the teacher's own training, Eq. 4: L_s + L_t
            return source + target, parts
        kl = level.soft_label_loss(target_logits, batch["teacher_logits"], batch, temperature=self.settings.kl_temperature,
                                   per_class=self.settings.kl_reduction == "element")  # Eq. 5
        # Eq. 6's lambda, and the KL's weight 1 - lambda, which is what the paper states (--kl-weight)
        lam, kl_weight = 1 - self.settings.kl_weight, self.settings.kl_weight
        if level.translations_keep_labels:
            loss = source + lam * target + kl_weight * kl  # Eq. 6: L_s + lambda L_t + (1 - lambda) L_kl
        else:  # word labels: lambda = 0, the KL over the words; a joint task's intent (in `target`) keeps its full weight
            loss = source + target + kl_weight * kl
        return loss, dict(parts, kl=kl.detach())

    @classmethod
    def load_predictor(cls, classifier, info, test_input):
        if test_input == "text":
            return super().load_predictor(classifier, info, test_input)
        return Filter(classifier, info["filter_m"], info["filter_k"]).predict, "pair"

    def saved_info(self, model):
        return {"filter_m": self.settings.filter_m, "filter_k": self.settings.filter_k,
                "missing_translations": self.settings.missing_translations}
