"""FILTER (Fang et al. 2021): a text and its translation run the encoder's first m layers apart,
k fusion layers together, and the remaining L - m - k "domain" layers apart again. The layers are
the encoder's own, shared by both texts, so FILTER adds no parameters.

    source -> embed -> layers[:m] --.                                     .--> layers[m+k:] -> source states
                                     >-- concat -> layers[m:m+k] -> split
    target -> embed -> layers[:m] --'                                     '--> layers[m+k:] -> target states

m = L, k = 0 is translate-train (each text alone); m = 0, k = L is the plain concatenation.

Self-teaching (Algorithm 1, Eq. 5-6) is two runs: the teacher, trained on Eq. 4 alone, then a student
trained again from the pretrained weights, with the teacher's OUT/best (docs/methods.md). The fixed
teacher's logits of each translation come with the batch (minxlt/run/teacher.py, or --teacher-cache),
and FilterMethod.loss adds Eq. 5, KL(p_teacher || p_student) on the translation.

Shapes: B pairs, T tokens (both texts padded to one length), H hidden.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn

from methods import Method, Phase, TeacherSettings, flag, pair_batch, steps
from minxlt.errors import InputError
from model import attention_bias, embed_pair


def filter_encode(encoder, source_ids, source_mask, target_ids, target_mask, m, k):
    """FILTER Eq. 1-3 -> (H_d^s, H_d^t), each (B, T, H): stacked along the batch for the local and domain layers
    (as each alone), joined along the sequence for the fusion layers (each attends to both)."""
    L = len(encoder.layers)
    if m < 0 or k < 0 or m + k > L:
        raise ValueError(f"FILTER needs 0 <= m, 0 <= k, m + k <= {L} (the encoder's layers); got m={m}, k={k}")
    B, T = source_ids.shape
    h, mask = embed_pair(encoder, source_ids, source_mask, target_ids, target_mask)  # (2B, T, H), own positions each
    bias = attention_bias(mask, h)                                 # built once for the local and domain layers
    for layer in encoder.layers[:m]:                               # local layers
        h = layer(h, bias)
    if k:
        fused = torch.cat([h[:B], h[B:]], dim=1)                   # (B, 2T, H): [H_l^s; H_l^t], Eq. 1
        fused_bias = attention_bias(torch.cat([source_mask, target_mask], dim=1), fused)  # both padding masks
        for layer in encoder.layers[m:m + k]:                      # fusion layers
            fused = layer(fused, fused_bias)
        h = torch.cat([fused[:, :T], fused[:, T:]])                # (2B, T, H): [H_f^s; H_f^t] split back
    for layer in encoder.layers[m + k:]:                           # domain layers, Eq. 2-3
        h = layer(h, bias)
    h = encoder.norm(h)                                            # a pre-LN encoder's final LayerNorm
    return h[:B], h[B:]


class Filter(nn.Module):
    """A Classifier (encoder + head) run as FILTER on (source, target) pairs."""

    def __init__(self, classifier, m, k):
        super().__init__()
        self.classifier, self.m, self.k = classifier, m, k

    def forward(self, source_ids, source_mask, target_ids, target_mask):
        """Eq. 4's p^s and p^t as logits: the shared head over each text's own states."""
        source, target = filter_encode(self.classifier.encoder, source_ids, source_mask, target_ids, target_mask,
                                       self.m, self.k)
        classify = self.classifier.classify
        return classify(source, source_mask)[0], classify(target, target_mask)[0]

    def predict(self, source_ids, source_mask, target_ids, target_mask):
        """Inference: the target side's logits (the paper uses them for every task)."""
        return self(source_ids, source_mask, target_ids, target_mask)[1]


class FilterMethod(Method):
    """FILTER: a text and its translation through the encoder together, fused in k layers. Eq. 4 is the task loss
    on both sides; self-teaching (Eq. 5-6) a second run from the pretrained weights, --teacher OUT/best of the first."""
    draws = "pairs"
    test_inputs = ("oracle", "translation", "text")  # "text": the plain classifier on the target alone, an ablation
    teacher = None  # Eq. 5's teacher, where --teacher or --teacher-cache gives one (start)

    @dataclass
    class Settings(TeacherSettings):
        filter_m: int = flag(1, "local layers, each text alone (the paper gives no final m; its k ablation, Figure "
                                "3, holds m = 1)", "[0, inf)")
        filter_k: int = flag(None, "fusion layers over the joined pair (default: 1; for QA 20 of 24 layers, the "
                                   "largest k of the paper's MLQA ablation, scaled to the encoder's depth)", "[0, inf)")
        kl_weight: float = flag(None, "1 - lambda in Eq. 6, the self-teaching loss's weight (default: the paper's 0.5 "
                                      "for sentence labels, 0.1 for QA, 1.0 for word labels, whose lambda is 0)",
                                  "[0, 1]")
        kl_temperature: float = flag(1.0, "T of Eq. 5's KL: softmax(logits / T), the KL times T^2 (the authors' "
                                          "code: 0.1)", "(0, inf)")
        kl_reduction: str = flag("example", "example: each example's KL summed over its classes (Eq. 5); element: "
                                            "averaged over the classes too, as the authors' nn.KLDivLoss()",
                                 ("example", "element"))
        missing_translations: str = flag("refuse", "a target language without translation files: refuse the run, "
                                                   "or, as the authors' run_xtag.py, train on the others' alone and "
                                                   "predict its texts beside themselves", ("refuse", "self"))
        self_pairs: bool = True  # the authors pair every language's text with its English source, English's own too

        def for_task(self, level, num_layers, common):
            """The KL weights of "Implementation Details"; QA's k is 20 of 24 layers, scaled to the encoder."""
            k = min(round(20 / 24 * num_layers), num_layers - (self.filter_m or 0)) if level == "span" else 1
            return {"filter_k": k, "kl_weight": {"sentence": 0.5, "span": 0.1, "word": 1.0}[level]}

    def __init__(self, settings, run):
        super().__init__(settings, run)
        m, k, L = settings.filter_m, settings.filter_k, run.num_layers
        if m + k > L:
            raise InputError(f"--filter-m {m} and --filter-k {k}: FILTER needs m + k <= {L}, the encoder's layers")

    def phases(self, items):
        """Word labels: an epoch is as many pairs as the source has texts (as run_xtag.py); else every pair."""
        if self.run.level.name != "word":
            return super().phases(items)
        texts = len(self.run.training_texts([self.run.task.source]))
        return [Phase("filter", items, steps(self.settings, texts), self.make_batch, self.loss)]

    def wrap(self, model):
        return Filter(model, self.settings.filter_m, self.settings.filter_k)

    def start(self, model, items):
        """Self-teaching's teacher (Algorithm 1), once the student is in place (sharded, where it is)."""
        teacher = lambda trained, info: Filter(trained, info["filter_m"], info["filter_k"]).eval()
        self.teacher = self.run.teacher(self.settings, items, teacher)

    def make_batch(self, items, weights, step):
        sources, targets = zip(*items)
        return pair_batch(self.run, sources, targets, weights, self.teacher)

    def loss(self, model, batch):
        """Eq. 4, L_s + L_t (the level's cross-entropy); with a teacher Eq. 6, L_s + lambda L_t + (1 - lambda) L_kl."""
        level, w = self.run.level, batch["weights"]
        source_logits, target_logits = model(batch["source_ids"], batch["source_mask"], batch["target_ids"],
                                             batch["target_mask"])
        source = level.loss(source_logits, batch["source_labels"], w, batch["source_mask"])
        # word labels do not carry over (lambda = 0 in Eq. 6): 0, or a joint task's intent (levels.Word.translated)
        target = level.loss(target_logits, batch["target_labels"], w, batch["target_mask"])
        parts = {"source": source.detach(), "target": target.detach()}
        if "teacher_logits" not in batch:  # the teacher's own training, Eq. 4: L_s + L_t
            return source + target, parts
        kl = level.soft_label_loss(target_logits, batch["teacher_logits"], batch,
                                   temperature=self.settings.kl_temperature,
                                   per_class=self.settings.kl_reduction == "element")  # Eq. 5
        lam, kl_weight = 1 - self.settings.kl_weight, self.settings.kl_weight  # the paper states 1 - lambda
        if level.translations_keep_labels:
            loss = source + lam * target + kl_weight * kl  # Eq. 6: L_s + lambda L_t + (1 - lambda) L_kl
        else:  # word labels: lambda = 0, the KL over the words; a joint task's intent (in `target`) weighs fully
            loss = source + target + kl_weight * kl
        return loss, dict(parts, kl=kl.detach())

    def predictor(self, model, test_input):
        """The target side's logits (the paper uses them for every task); "text": the classifier alone."""
        if test_input == "text":
            return super().predictor(model.classifier, test_input)
        return model.predict, "pair"
