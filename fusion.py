"""FILTER (Fang et al. 2021): a text and its translation run the encoder's first m layers apart,
k fusion layers together, and the remaining L - m - k "domain" layers apart again. The layers are
the encoder's own, shared by both texts, so FILTER adds no parameters.

    source -> embed -> layers[:m] --.                                     .--> layers[m+k:] -> source states
                                     >-- concat -> layers[m:m+k] -> split
    target -> embed -> layers[:m] --'                                     '--> layers[m+k:] -> target states

m = L, k = 0 is translate-train (each text alone); m = 0, k = L is the plain concatenation.
Shapes: B pairs, T tokens (both texts padded to one length), H hidden.
"""
import json
import os
from pathlib import Path

import torch
import torch.nn as nn

import cli
import data
import distributed
from methods import PairMethod
from model import Classifier, embed_pair
from tasks import InputError
from weights import CheckpointError, load_torch_file


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
    for layer in encoder.layers[:m]:                               # local layers
        h = layer(h, mask)
    if k:
        fused = torch.cat([h[:B], h[B:]], dim=1)                   # (B, 2T, H): [H_l^s; H_l^t], Eq. 1
        fused_mask = torch.cat([source_mask, target_mask], dim=1)  # (B, 2T)
        for layer in encoder.layers[m:m + k]:                      # fusion layers
            fused = layer(fused, fused_mask)
        h = torch.cat([fused[:, :T], fused[:, T:]])                # (2B, T, H): [H_f^s; H_f^t] split back
    for layer in encoder.layers[m + k:]:                           # domain layers, Eq. 2-3
        h = layer(h, mask)
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


def check_teacher(checkpoint, kind):
    """A --teacher must be a FILTER model for FILTER's self-teaching, and a plain classifier for
    X-Mixup's soft word labels: refused otherwise, from its task.json, before any model loads."""
    path = Path(checkpoint) / "task.json"
    try:
        method = json.loads(path.read_text(encoding="utf-8")).get("method")
    except (OSError, ValueError, AttributeError) as e:
        raise CheckpointError(f"--teacher {checkpoint}: no readable task.json, so not an OUT/best of train.py ({e})") from None
    if kind == "filter" and method != "filter":
        raise InputError(f"{checkpoint} was trained with --method {method}; the teacher must be a FILTER model")
    if kind != "filter" and method in ("filter", "xmixup"):
        raise InputError(f"{checkpoint} was trained with --method {method}; the labeller must be a plain "
                         "classifier trained on the source (--method zero-shot)")


class Teacher:
    """A fixed model whose probabilities on the translated side of the training pairs become soft
    labels: FILTER's teacher for self-teaching (Algorithm 1, Eq. 5), a FILTER model trained by
    train.py with its own m and k; or, for X-Mixup on word labels (Sec. 4.2), a source-trained
    plain classifier that tags the translation alone. The logits for a pair are computed on the
    fly, or looked up in a cache of all of them, keyed by (id, language)."""

    def __init__(self, checkpoint=None, cache=None, device="cpu", kind="filter"):
        self.model, self.cache, self.device, self.complete = None, None, device, False  # complete: the cache has every pair
        if cache is not None:
            self.cache = load_torch_file(cache, "teacher cache")
            if not isinstance(self.cache, dict):
                raise CheckpointError(f"{cache}: not a teacher cache written by train.py (--teacher-cache)")
        if checkpoint is not None:
            check_teacher(checkpoint, kind)
            classifier, _, task = Classifier.load(checkpoint)
            classifier.to(device).eval()
            if kind == "filter":
                self.model = Filter(classifier, task["filter_m"], task["filter_k"]).to(device).eval()
            else:  # the translation alone; same outputs as a pair model, (source logits, target logits)
                self.model = lambda source_ids, source_mask, target_ids, target_mask: (None, classifier(target_ids, target_mask)[0])

    @torch.no_grad()
    def logits(self, source_ids, source_mask, target_ids, target_mask, keys):
        """(B, C) or (B, T, C) teacher logits on the targets, from the cache where it has them all."""
        if self.cache is not None and all(f"{i}\t{lang}" in self.cache for i, lang in keys):
            rows = [self.cache[f"{i}\t{lang}"] for i, lang in keys]
            if rows[0].dim() == 1:
                return torch.stack(rows).to(target_ids.device)
            out = torch.zeros(len(rows), target_ids.shape[1], rows[0].shape[-1], device=target_ids.device)
            for b, row in enumerate(rows):
                out[b, :len(row)] = row
            return out
        if self.model is None:
            raise ValueError("the teacher cache lacks some training pairs and no --teacher checkpoint was given to compute them")
        inputs = (x.to(self.device) for x in (source_ids, source_mask, target_ids, target_mask))
        return self.model(*inputs)[1].float().to(target_ids.device)  # on the batch's device (the CPU, until the step copies it)

    @torch.no_grad()
    def build_cache(self, tokenizer, pairs, batch_size, device, rank=0, world_size=1):
        """Compute the teacher's logits for every (source, target) pair of encoded items; the
        processes split the work and every one gets the whole cache."""
        mine = {}
        for start in range(rank * batch_size, len(pairs), batch_size * world_size):
            batch = pairs[start:start + batch_size]
            tensors = [t.to(device) for t in data.pad_pairs(tokenizer, [s.ids for s, _ in batch], [t.ids for _, t in batch])]
            logits = self.model(*tensors)[1].float().cpu()
            for b, (_, target) in enumerate(batch):
                mine[f"{target.id}\t{target.lang}"] = logits[b] if logits.dim() == 2 else logits[b, :len(target.ids)].clone()
        self.cache = {k: v for part in distributed.gather(mine) for k, v in part.items()}
        self.complete = True
        return self.cache


def load_teacher(args, run, pairs, kind):
    """The Teacher that --teacher and --teacher-cache ask for, or None; a --teacher-cache that does
    not exist yet is computed from --teacher over the training pairs and written."""
    if not (args.teacher or args.teacher_cache):
        return None
    cached = args.teacher_cache and Path(args.teacher_cache).exists()
    teacher = Teacher(args.teacher, args.teacher_cache if cached else None, run.device, kind=kind)
    if args.teacher_cache and not cached:
        teacher.build_cache(run.tokenizer, pairs, run.batch_size, run.device, run.rank, run.world_size)
        if run.rank == 0:  # written aside, then moved into place: never a half-written cache
            tmp = Path(f"{args.teacher_cache}.tmp")
            torch.save(teacher.cache, tmp)
            os.replace(tmp, args.teacher_cache)
    return teacher


class FilterMethod(PairMethod):
    """--method filter: Eq. 4 (the task loss on both sides of each pair, through Filter), and with
    --teacher Eq. 6, self-teaching from a FILTER model trained first (Algorithm 1)."""
    name = "filter"
    help = ("FILTER (Fang et al. 2021): each source example and its translation go through the encoder together "
            "(fusion.py), with the task loss on both sides (Eq. 4); self-teaching is a second run from the pretrained "
            "weights with --teacher OUT/best of the first (Eq. 5-6)")

    @staticmethod
    def add_arguments(parser):
        g = parser.add_argument_group("FILTER")
        g.add_argument("--filter-m", type=cli.non_negative_int, default=1, help="local layers, each text alone (the paper's default: 1)")
        g.add_argument("--filter-k", type=cli.non_negative_int, help="fusion layers over the joined pair (default: the paper's 1 for classification and "
                                                    "tagging; for QA its 20 of 24 layers, scaled to the encoder's depth)")
        g.add_argument("--teacher", type=cli.existing_directory, help="self-teaching: a FILTER model trained by this script (its OUT/best); its probabilities on the "
                                         "translations become soft labels (Eq. 5-6), computed on the fly. For --method xmixup on word "
                                         "labels: a --method zero-shot model, whose tags of the translations are the soft labels")
        g.add_argument("--teacher-cache", help="file of the teacher's probabilities on every training pair: read if it exists, "
                                               "else computed once from --teacher and written")
        g.add_argument("--kl-weight", type=cli.fraction, help="1 - lambda in Eq. 6: the self-teaching loss weight (default: the paper's 0.5 "
                                                       "for sentence labels, 0.1 for QA, 1.0 for word labels, whose lambda is 0)")

    def defaults(self, level, num_layers):
        """QA's k is XLM-R large's 20 of 24 layers, scaled to the encoder's depth."""
        span = level == "span"
        return {"filter_k": min(round(20 / 24 * num_layers), num_layers - self.args.filter_m) if span else 1,
                "kl_weight": {"sentence": 0.5, "span": 0.1, "word": 1.0}[level]}

    paper = {"batch_size": 64}  # "Implementation Details": batch size 64 for all tasks

    def uses_teacher(self):
        return True

    def check(self, extra):
        super().check(extra)
        m, k, L = self.args.filter_m, self.args.filter_k, self.run.num_layers
        if m + k > L:
            raise InputError(f"--filter-m {m} and --filter-k {k}: FILTER needs m + k <= {L}, the encoder's layers")
        if self.args.teacher:
            check_teacher(self.args.teacher, "filter")

    def wrap(self, model, items):
        core = Filter(model, self.args.filter_m, self.args.filter_k)
        self.teacher = load_teacher(self.args, self.run, items, "filter")
        return core

    def loss(self, model, batch):
        """Eq. 4, L_s + L_t; with a teacher Eq. 6, L_s + lambda L_t + (1 - lambda) L_kl."""
        level, w = self.run.level, batch["weights"]
        source_logits, target_logits = model(batch["source_ids"], batch["source_mask"], batch["target_ids"], batch["target_mask"])
        source = level.loss(source_logits, batch["source_labels"], w, batch["source_mask"])
        # Sentence labels and a translation's own answer span carry over; word labels do not (lambda = 0
        # in Eq. 6), so for word tasks this is 0, or a joint task's intent alone (levels.Word.translated).
        target = level.loss(target_logits, batch["target_labels"], w, batch["target_mask"])
        if "teacher_logits" not in batch:  # the teacher's own training, Eq. 4
            return source + target, {"source": source.detach()}
        kl = level.soft_label_loss(target_logits, batch["teacher_logits"], batch)  # Eq. 5
        kl_weight = self.args.kl_weight
        # Eq. 6. For word tasks the KL covers the words; the intent of a joint task keeps its full weight.
        loss = source + kl_weight * kl + ((1 - kl_weight) * target if level.translations_keep_labels else target)
        return loss, {"source": source.detach(), "kl": kl.detach()}

    @classmethod
    def load_predictor(cls, classifier, info, test_input):
        if test_input == "text":
            return super().load_predictor(classifier, info, test_input)
        return Filter(classifier, info["filter_m"], info["filter_k"]).predict, "pair"

    def saved_info(self, model):
        return {"filter_m": self.args.filter_m, "filter_k": self.args.filter_k}
