"""Yu & Joty (2021), contrastive language adaptation: fine-tuning in two phases, on the source's
labelled texts and their translations (D and D_bi).

    phase 1, label alignment:    CE + lambda_LA * L_LA  on D u D_bi           Eq. 2-3
    phase 2, semantic alignment: CE + lambda_SA * L_SA  on groups from D_bi   Eq. 4-5
                                 then, at a smaller learning rate             Sec. 3.2, after Eq. 5

With --epochs each phase has its own passes: --epochs over D u D_bi, then --sa-epochs over D_bi's
source texts, one group each (the paper gives no length for phase 2; by default as many as phase 1);
with --max-steps, phase 2 is its last --sa-steps. A semantic-alignment group is a source text (the
anchor), b of its translations (positives) and b source texts of other labels (negatives). The
losses are in losses.py; co-training, the paper's other method, drives train.py: cotrain.py.
"""
import math
import random
import sys
from dataclasses import dataclass

from losses import label_alignment_loss, label_alignment_terms, semantic_alignment_loss, task_loss
from methods import Method, Phase, flag, steps
from minxlt.errors import InputError


def share_of_label_alignment(per_anchor, anchors, weights, mine):
    """One process's part of Eq. 2 over a global batch (its examples: `mine`): its anchors' terms over all anchors,
    divided by its share of `weights`, so that the parts, weighted by their shares, add up to Eq. 2's mean."""
    scale = weights.sum() / weights[mine].sum().clamp(min=1)  # 1 / its share of the examples that count
    return (per_anchor[mine] * anchors[mine]).sum() / anchors.sum().clamp(min=1) * scale


class Contrastive(Method):
    """Yu & Joty's contrastive adaptation: the task loss plus label alignment (Eq. 2-3) on the source and its
    translations, then at a smaller learning rate plus semantic alignment (Eq. 4-5) on groups."""
    draws = "translated"
    levels = ("sentence",)  # it contrasts and pseudo-labels whole sentences

    @dataclass
    class Settings:
        tau: float = flag(0.1, "temperature of the contrastive losses (the paper gives none)", "(0, inf)")
        la_weight: float = flag(1.0, "lambda_LA of Eq. 3", "[0, inf)")
        sa_weight: float = flag(1.0, "lambda_SA of Eq. 5", "[0, inf)")
        sa_steps: int = flag(None, "steps of the second phase, semantic alignment (default: with --epochs, "
                                   "--sa-epochs passes over the translated source texts; else the last quarter of "
                                   "--max-steps)", "[0, inf)")
        sa_epochs: int = flag(None, "with --epochs: semantic alignment's own passes over the translated source "
                                    "texts (default: as many as --epochs; the paper gives none)", "[1, inf)")
        sa_lr: float = flag(None, "its peak learning rate, 'smaller' in the paper (default: --lr / 5)", "(0, inf)")
        sa_group: int = flag(4, "b: translations and other-label texts per anchor (a group: 2b + 1 texts)", "[1, inf)")
        group_by_length: bool = False  # label alignment contrasts every pair of a batch's texts: drawn at random

        def for_task(self, level, num_layers, common):
            """Phase 2 at a fifth of the learning rate; with --epochs, as many passes as phase 1's."""
            return {"sa_lr": common["lr"] / 5, "sa_epochs": common["epochs"] if self.sa_steps is None else None}

    def __init__(self, settings, run):
        super().__init__(settings, run)
        if settings.grad_accum > 1 and settings.la_weight > 0:
            raise InputError("--method contrastive takes --grad-accum 1: label alignment (Eq. 2) contrasts every pair "
                             "of texts in a step's batch, which micro-steps would split into smaller batches, and the "
                             "loss with them; to fit memory, run more processes (torchrun) or give a smaller "
                             "--batch-size")
        if settings.sa_epochs and not settings.epochs:
            raise InputError("--sa-epochs counts passes with --epochs; with --max-steps, give semantic alignment's "
                             "--sa-steps")
        if settings.max_steps and settings.sa_steps and settings.sa_steps > settings.max_steps:
            raise InputError(f"--sa-steps {settings.sa_steps} is more than --max-steps {settings.max_steps}: semantic "
                             "alignment is the last part of the run")

    def phases(self, items):
        """Sec. 3.2, after Eq. 5: "we first train it with Eq. 3 on D u D_bi. Then, we train it on D_bi using Eq. 5
        with a smaller learning rate": the anchors are the translated source texts, their warmup peaking at --sa-lr."""
        settings, source = self.settings, self.run.task.source
        sources = {it.id: it for it in items if it.lang == source}
        self.translations_of = {}
        for it in items:
            if it.lang != source and it.id in sources:
                self.translations_of.setdefault(it.id, {})[it.lang] = it
        self.anchors = [sources[i] for i in sorted(self.translations_of)]
        if settings.max_steps:
            sa_steps = settings.max_steps // 4 if settings.sa_steps is None else settings.sa_steps
            la_steps = settings.max_steps - sa_steps
            if not sa_steps and settings.sa_steps is None and self.run.rank == 0:
                print(f"note: --max-steps {settings.max_steps} leaves no step to semantic alignment (a quarter of them "
                      "rounds to 0): give --sa-steps for one", file=sys.stderr)
        else:
            la_steps = steps(settings, len(items))
            sa_steps = settings.sa_steps
            if sa_steps is None:  # --sa-epochs passes (default: as many as --epochs) over the anchors
                sa_steps = math.ceil(len(self.anchors) / settings.batch_size) * (settings.sa_epochs or settings.epochs)
        first = Phase("label alignment", items, la_steps, self.make_batch, self.loss)
        if not sa_steps:
            return [first]
        if len({a.label for a in self.anchors}) < 2:
            raise InputError("semantic alignment needs translated source examples of at least two labels (see "
                             "--translated)")
        return [first, Phase("semantic alignment", self.anchors, sa_steps, self.group_batch, self.group_loss,
                             settings.sa_lr / settings.lr)]

    def loss(self, model, batch):
        """Eq. 3: CE + lambda_LA * L_LA, Eq. 2 over the global batch: over several processes each gathers its vectors
        (its own with their gradient) and keeps its own anchors' part (share_of_label_alignment)."""
        logits, cls = model(batch["input_ids"], batch["attention_mask"])
        w, labels, run = batch["weights"], batch["labels"], self.run
        task = task_loss(logits, labels, w)
        if run.world_size == 1:
            la = label_alignment_loss(cls, labels, self.settings.tau, w)
        else:
            weights = run.all_gather(w)
            per_anchor, anchors = label_alignment_terms(run.all_gather_with_grad(cls), run.all_gather(labels),
                                                        self.settings.tau, weights)
            mine = slice(run.rank * len(w), (run.rank + 1) * len(w))
            la = share_of_label_alignment(per_anchor, anchors, weights, mine)
        return task + self.settings.la_weight * la, {"task": task.detach(), "la": la.detach()}

    def group_batch(self, anchors, weights, step):
        """Each anchor and b of its translations and b anchors of other labels (repeated where fewer), drawn per
        anchor: the same groups however the batch is split into micro-steps or processes."""
        b, rows = self.settings.sa_group, []
        for anchor in anchors:
            rng = random.Random(f"{self.settings.seed}/{step}/{anchor.id}/groups")
            mine = list(self.translations_of[anchor.id].values())
            others = [a for a in self.anchors if a.label != anchor.label]
            draw = lambda pool: rng.sample(pool, b) if len(pool) >= b else [rng.choice(pool) for _ in range(b)]
            rows += [anchor] + draw(mine) + draw(others)
        return super().make_batch(rows, weights, step)

    def group_loss(self, model, batch):
        """Eq. 5: CE + lambda_SA * L_SA over each group (anchor, b positives, b negatives), the anchor's own: its
        mean over a step's anchors is the same however the step is split."""
        logits, cls = model(batch["input_ids"], batch["attention_mask"])
        w, b = batch["weights"], self.settings.sa_group
        size = 2 * b + 1
        task = task_loss(logits, batch["labels"], w.repeat_interleave(size))
        groups = cls.view(len(w), size, -1)
        sa = semantic_alignment_loss(groups[:, 0], groups[:, 1:b + 1], groups[:, b + 1:], self.settings.tau, w)
        return task + self.settings.sa_weight * sa, {"task": task.detach(), "sa": sa.detach()}
