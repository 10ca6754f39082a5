"""What each training method does with a batch: make_batch builds its tensors from the items the
loop hands it, compute_loss turns the model's outputs into the method's loss. train.py holds the
loop around them; the equations live in losses.py, fusion.py and mixup.py.
"""
import random

import torch

import data
import unicoder
from fusion import pad_pairs
from losses import (label_alignment_loss, position_logits, prediction_consistency_loss, representation_consistency_loss,
                    self_teaching_loss, semantic_alignment_loss, span_loss, task_loss, xeroalign_loss)
from mixup import inverse_sigmoid_decay


def task_defaults(level, num_layers, filter_m=1):
    """The papers' settings for a kind of task (level: "sentence" labels, "word" labels, QA "span"s),
    used where a flag is not given. QA's layer numbers are XLM-R large's (of 24), scaled to the
    encoder's depth: FILTER fuses 20 layers, X-Mixup mixes at the 16th."""
    span = level == "span"
    return {"max_length": 384 if span else 128,
            "filter_k": min(round(20 / 24 * num_layers), num_layers - filter_m) if span else 1,
            "mixup_layer": {"sentence": 1, "word": 4, "span": round(16 / 24 * num_layers)}[level],  # 1-based
            "mixup_alpha": {"sentence": 0.4, "word": 0.8, "span": 0.2}[level],
            "ss_k": 2000 if span else 1000}


def head_style(task, sentence_head="roberta"):
    """The Classifier head a task needs: joint (xSID), token, span (QA), or the sentence head."""
    return "joint" if task.intents else {"word": "token", "span": "span"}.get(task.level, sentence_head)


def make_batch(method, items, weights, step, seed, tokenizer, level, teacher=None, round_trip=None, ss_k=1000, groups=None):
    """The tensors of one micro-batch, by name (on the CPU). For xeroalign, filter and xmixup the
    items are (source, translation) pairs. XeroAlign encodes the sources and then their translations
    as one batch. FILTER and X-Mixup pad both sides to one length; for X-Mixup the source is, with
    probability 1 - p*(step), its round-trip translation (scheduled sampling, Eq. 6), drawn once per
    step from a generator seeded by the step, so that a resumed run draws the same. contrastive-sa:
    items are anchors, each expanded into its group for semantic alignment (Eq. 4): the anchor, b of
    its translations and b anchors of other labels (with repetition where there are fewer than b)."""
    if method == "unicoder":  # one of the five tasks per step, in turn; the draws follow from step and rows
        generator = torch.Generator().manual_seed(random.Random(f"{seed}/{step}/{items[0].id}").getrandbits(62))
        task = unicoder.TASKS[step % len(unicoder.TASKS)]
        return unicoder.make_batch(task, items, weights, generator, tokenizer)
    batch = {"weights": torch.tensor(weights)}
    if method == "contrastive-sa":
        translations, anchors, b = groups
        rows = []
        for anchor in items:  # drawn per anchor: the same groups however the batch is split (micro-steps, processes)
            rng = random.Random(f"{seed}/{step}/{anchor.id}/groups")
            mine = list(translations[anchor.id].values())
            others = [a for a in anchors if a.label != anchor.label]
            draw = lambda pool: rng.sample(pool, b) if len(pool) >= b else [rng.choice(pool) for _ in range(b)]
            rows += [anchor] + draw(mine) + draw(others)
        batch["input_ids"], batch["attention_mask"], batch["labels"] = data.collate(rows, tokenizer)
        return batch
    if method == "xeroalign":
        sources, targets = zip(*items)
        batch["input_ids"], batch["attention_mask"], batch["labels"] = data.collate(sources + targets, tokenizer)
        return batch
    if method in ("filter", "xmixup"):
        sources, targets = zip(*items)
        if method == "xmixup" and round_trip and random.Random(f"{seed}/{step}/ss").random() > inverse_sigmoid_decay(step, ss_k):
            sources = [round_trip.get(s.id, s) for s in sources]
        source_ids, source_mask, target_ids, target_mask = pad_pairs(tokenizer, [s.ids for s in sources], [t.ids for t in targets])
        T = source_ids.shape[1]
        batch.update(source_ids=source_ids, source_mask=source_mask, target_ids=target_ids, target_mask=target_mask,
                     source_labels=data.label_tensor(sources, T), target_labels=data.label_tensor(targets, T))
        if level == "word":
            # Word labels do not carry over to a translation; a joint task's intent (on <s>) does.
            batch["target_labels"][:, 1:] = -100
            # The target words' first sub-tokens, where the teacher's soft labels apply.
            batch["target_scored"] = torch.zeros(len(targets), T)
            for b, t in enumerate(targets):
                batch["target_scored"][b, [token for _, token in t.extra["scored"]]] = 1.0
        if method == "xmixup":
            batch["round_trip"] = torch.tensor(float(sources[0] is not items[0][0]))
        if teacher is not None:
            batch["teacher_logits"] = teacher.logits(source_ids, source_mask, target_ids, target_mask, [(t.id, t.lang) for t in targets])
        return batch
    batch["input_ids"], batch["attention_mask"], batch["labels"] = data.collate(items, tokenizer)
    return batch


def compute_loss(method, model, batch, args, level):
    """The method's loss, averaged over the examples that count (weight 1) in this micro-batch,
    and its parts for the log."""
    if method == "unicoder":
        loss = model(batch)
        return loss, {batch["task"]: loss.detach()}
    w = batch["weights"]

    def supervised(logits, labels, weights, mask):  # the task's own loss; QA's is over a window's real tokens
        return span_loss(logits, labels, weights, mask) if level == "span" else task_loss(logits, labels, weights)
    if method == "filter":
        source_logits, target_logits = model(batch["source_ids"], batch["source_mask"], batch["target_ids"], batch["target_mask"])
        source = supervised(source_logits, batch["source_labels"], w, batch["source_mask"])
        # Sentence labels and a translation's own answer span carry over; word labels do not (lambda = 0
        # in Eq. 6), so for word tasks this is 0, or a joint task's intent alone (make_batch).
        target = supervised(target_logits, batch["target_labels"], w, batch["target_mask"])
        if "teacher_logits" not in batch:  # the teacher's own training, Eq. 4
            return source + target, {"source": source.detach()}
        kl_weight = args.kl_weight if args.kl_weight is not None else {"sentence": 0.5, "span": 0.1, "word": 1.0}[level]
        if level == "span":  # Eq. 5 over each window's own positions, for its start and for its end
            mask = batch["target_mask"]
            kl = self_teaching_loss(position_logits(target_logits, mask), position_logits(batch["teacher_logits"], mask),
                                    w[:, None].expand(-1, 2))
        else:
            kl = self_teaching_loss(target_logits, batch["teacher_logits"], batch["target_scored"] * w[:, None] if level == "word" else w)
        # Eq. 6. For word tasks the KL covers the words; the intent of a joint task keeps its full weight.
        loss = source + kl_weight * kl + (target if level == "word" else (1 - kl_weight) * target)
        return loss, {"source": source.detach(), "kl": kl.detach()}
    if method == "xmixup":
        source_logits, target_logits, source_r, target_r, lam = model(batch["source_ids"], batch["source_mask"],
                                                                      batch["target_ids"], batch["target_mask"])
        source = supervised(source_logits, batch["source_labels"], w, batch["source_mask"])
        if level == "word":  # word labels do not carry over: the translation's soft labels come from a source-trained model (Sec. 4.2)
            target = self_teaching_loss(target_logits, batch["teacher_logits"], batch["target_scored"] * w[:, None])
            target = target + task_loss(target_logits, batch["target_labels"], w)  # a joint task's intent (else 0)
        else:  # a sentence label, or the translation's own answer span
            target = supervised(target_logits, batch["target_labels"], w, batch["target_mask"])
        loss = args.mixup_alpha * source + (1 - args.mixup_alpha) * target  # Eq. 8
        parts = {"source": source.detach(), "target": target.detach(), "lambda": (lam * w).sum().detach() / w.sum().clamp(min=1),
                 "round_trip": batch["round_trip"]}
        if not args.no_consistency:  # Eq. 7; the KL between predictions is for sentence labels only
            mse = representation_consistency_loss(source_r, target_r, w)
            loss = loss + mse
            parts.update(mse=mse.detach())
            if level == "sentence":
                kl = prediction_consistency_loss(source_logits, target_logits, w)
                loss = loss + kl
                parts.update(kl=kl.detach())
        return loss, parts
    logits, cls = model(batch["input_ids"], batch["attention_mask"])  # (N, C) or (N, T, C); (N, H)
    if method == "contrastive":  # Eq. 3 on the source and its translations
        task = task_loss(logits, batch["labels"], w)
        la = label_alignment_loss(cls, batch["labels"], args.tau, w)
        return task + args.la_weight * la, {"task": task.detach(), "la": la.detach()}
    if method == "contrastive-sa":  # Eq. 5 on groups: anchor, b translations, b other labels
        size = 2 * args.sa_group + 1
        task = task_loss(logits, batch["labels"], w.repeat_interleave(size))
        groups = cls.view(len(w), size, -1)
        sa = semantic_alignment_loss(groups[:, 0], groups[:, 1:args.sa_group + 1], groups[:, args.sa_group + 1:], args.tau, w)
        return task + args.sa_weight * sa, {"task": task.detach(), "sa": sa.detach()}
    mask = batch["attention_mask"]
    if method != "xeroalign":
        return supervised(logits, batch["labels"], w, mask), {}
    B = len(w)  # sources first, then one translation each
    task = supervised(logits[:B], batch["labels"][:B], w, mask[:B])
    align = xeroalign_loss(cls[:B], cls[B:], w)
    loss = task + args.align_weight * align
    if args.target_labels:
        loss = loss + supervised(logits[B:], batch["labels"][B:], w, mask[B:])
    return loss, {"task": task.detach(), "align": align.detach()}
