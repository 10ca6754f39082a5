"""XeroAlign (Gritta & Iacobacci 2021, Sec. 3, Algorithm 1): the task loss on the source plus the
MSE between the sentence embeddings of a source text and of its translation, trained jointly.

As the paper says and unlike the authors' code: the <s> vector of the final layer (not the
pooler), with the attention mask; the pairs are the task batch's own, and both sides are encoded
in one forward pass. --pooling mean aligns the means of the real tokens' final states instead (a
variant for tagging, whose head reads every token rather than <s>).
"""
import math

from losses import xeroalign_loss
from methods import Method, non_negative_float


class XeroAlign(Method):
    name = "xeroalign"
    help = ("the task loss on the source plus the XeroAlign loss between the <s> vectors of a source example and its "
            "translation, both encoded in the same forward pass; target labels unused (--target-labels)")
    draws = "pairs"
    paper = {"head": "linear", "epochs": 10}  # Sec. 3: a linear classifier on the [CLS] embedding; Sec. 3.1: 10 epochs
    epoch = ("a pass's worth of the source's training examples, each with one of its translations (the authors' train.py "
             "iterates over the English examples and draws the alignment pairs beside them)")

    @classmethod
    def defaults(cls, level, num_layers, settings):
        """CKA and retrieval compare what XeroAlign aligns: <s> (with --pooling pooler, the pooler's input), or with
        --pooling mean the tokens' mean."""
        return {"alignment_pooling": "mean" if settings["pooling"] == "mean" else "cls"}

    @classmethod
    def epoch_steps(cls, run, settings):
        return {"max_steps": math.ceil(len(run.training_texts([run.task.source])) / settings.batch_size) * settings.epochs}

    @staticmethod
    def add_arguments(parser):
        g = parser.add_argument_group("XeroAlign", "--preset paper: a linear head on <s> (Sec. 3) and 10 epochs (Sec. 3.1); not "
                                      "the paper's Adam with a OneCycleLR schedule, nor a learning rate or batch size, which it does not give")
        g.add_argument("--align-weight", type=non_negative_float, default=1.0, help="weight of the alignment loss (the paper sums the two: 1)")
        g.add_argument("--target-labels", action="store_true", help="also train the task on the translations' labels")

    def make_batch(self, items, weights, step):
        """The sources, then their translations, as one batch of 2B texts."""
        sources, targets = zip(*items)
        return super().make_batch(sources + targets, weights, step)

    def loss(self, model, batch):
        """Algorithm 1: L = L_task(source) + L_align(<s> of source, <s> of translation), L_task the
        task level's cross-entropy (level.loss: losses.task_loss, or span_loss for answers)."""
        logits, cls = model(batch["input_ids"], batch["attention_mask"])  # (2B, C) or (2B, T, C); (2B, H)
        w, labels, mask, level = batch["weights"], batch["labels"], batch["attention_mask"], self.run.level
        B = len(w)
        task = level.loss(logits[:B], labels[:B], w, mask[:B])
        align = xeroalign_loss(cls[:B], cls[B:], w)
        loss = task + self.settings.align_weight * align
        if self.settings.target_labels:
            loss = loss + level.loss(logits[B:], labels[B:], w, mask[B:])
        return loss, {"task": task.detach(), "align": align.detach()}

