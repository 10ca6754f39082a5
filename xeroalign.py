"""XeroAlign (Gritta & Iacobacci 2021, Sec. 3, Algorithm 1): the task loss on the source plus the
MSE between the sentence embeddings of a source text and of its translation, trained jointly.

As the paper says and unlike the authors' code: the final layer's <s> vector (not the pooler), with
the attention mask, the pairs the task batch's own, both sides in one forward pass. --pooling mean
aligns the tokens' mean instead (a variant for tagging, whose head reads every token).
"""
from dataclasses import dataclass

from losses import xeroalign_loss
from methods import Method, Phase, flag, steps


class XeroAlign(Method):
    """XeroAlign: the task loss plus the MSE between the <s> vectors of a text and its translation (Algorithm 1)."""
    draws = "pairs"

    @dataclass
    class Settings:
        align_weight: float = flag(1.0, "weight of the alignment loss (the paper sums the two: 1)", "[0, inf)")
        target_labels: bool = flag(False, "also train the task on the translations' labels")
        self_pairs: bool = False  # no source text is paired with itself (the pair methods' default: on)
        alignment_pooling: str = None  # CKA and retrieval compare what XeroAlign aligns: <s>, or the mean

        def for_task(self, level, num_layers, common):
            return {"alignment_pooling": common["pooling"]}

    def phases(self, items):
        """One epoch counts the source's examples, as the authors' train.py iterates over them."""
        source = len(self.run.training_texts([self.run.task.source]))
        return [Phase("xeroalign", items, steps(self.settings, source), self.make_batch, self.loss)]

    def make_batch(self, items, weights, step):
        """The sources, then their translations, as one batch of 2B texts."""
        sources, targets = zip(*items)
        return super().make_batch(sources + targets, weights, step)

    def loss(self, model, batch):
        """Algorithm 1: L = L_task(source) + L_align(<s> of source, <s> of translation)."""
        logits, cls = model(batch["input_ids"], batch["attention_mask"])  # (2B, C) or (2B, T, C); (2B, H)
        w, labels, mask, level = batch["weights"], batch["labels"], batch["attention_mask"], self.run.level
        B = len(w)
        task = level.loss(logits[:B], labels[:B], w, mask[:B])
        align = xeroalign_loss(cls[:B], cls[B:], w)
        loss = task + self.settings.align_weight * align
        if self.settings.target_labels:
            loss = loss + level.loss(logits[B:], labels[B:], w, mask[B:])
        return loss, {"task": task.detach(), "align": align.detach()}
