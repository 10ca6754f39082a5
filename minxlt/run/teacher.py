"""A teacher: a trained model whose probabilities on the translations of the training pairs are soft labels
(FILTER's self-teaching, Algorithm 1; X-Mixup's word labels, Sec. 4.2), computed on the fly or cached whole."""
import json
import os
from pathlib import Path

import torch

import data
from minxlt.checkpoints.weights import CheckpointError, load_torch_file
from minxlt.errors import InputError
from minxlt.parallel import distributed, shard
from minxlt.tasks import check_labels
from minxlt.tasks.xmixup_tags import teacher_rows
from model import Classifier


def check(settings, kind, task):
    """Refuse teacher flags that do not fit a method whose teacher is of `kind`: a FILTER model for "filter", a plain
    classifier (its task.json says) for X-Mixup's "labeller"; either of `task`'s labels."""
    if settings.get("soft_labels") and (settings.teacher or settings.teacher_cache):
        raise InputError("--soft-labels are the released soft labels of the translations, in the place of a teacher's: "
                         "give --soft-labels or --teacher (and --teacher-cache), not both")
    if settings.teacher_cache and not Path(settings.teacher_cache).exists() and not settings.teacher:
        raise InputError(f"--teacher-cache {settings.teacher_cache} does not exist yet: "
                         "give --teacher CKPT to compute it")
    if not settings.teacher:
        return
    checkpoint, path = settings.teacher, Path(settings.teacher) / "task.json"
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        method = info.get("method")
    except (OSError, ValueError, AttributeError) as e:
        raise CheckpointError(f"--teacher {checkpoint}: no readable task.json, so not an OUT/best of train.py ({e})"
                              ) from None
    if kind == "filter" and method != "filter":
        raise InputError(f"{checkpoint} was trained with --method {method}; the teacher must be a FILTER model")
    if kind != "filter" and method in ("filter", "xmixup"):
        raise InputError(f"{checkpoint} was trained with --method {method}; the labeller must be a plain "
                         "classifier trained on the source (--method zero-shot)")
    check_labels(f"--teacher {checkpoint}", info, task, "give a teacher trained on this task")


def key(item):
    """An encoded translation's key in the cache."""
    return f"{item.id}\t{item.lang}"


class Teacher:
    """The model of `checkpoint` (OUT/best) run on pairs by pair_model(classifier, task_info), which returns
    (_, target logits), and/or a cache of its logits on every pair; sharded (--shard), every process runs it."""

    def __init__(self, checkpoint=None, cache=None, device="cpu", pair_model=None, sharded=False, offload=False):
        self.model, self.cache, self.device, self.classifier, self.sharded = None, None, device, None, sharded
        self.cache_file = cache
        self.complete = False  # the cache has every pair
        if cache is not None:
            self.cache = load_torch_file(cache, "teacher cache")
            if not isinstance(self.cache, dict):
                raise CheckpointError(f"{cache}: not a teacher cache written by train.py (--teacher-cache)")
        if checkpoint is not None:
            classifier, _, task = (shard.load_classifier(checkpoint, device, offload) if sharded
                                   else Classifier.load(checkpoint, device))
            self.classifier, self.model = classifier, pair_model(classifier.eval(), task)

    @torch.no_grad()
    def logits(self, source_ids, source_mask, target_ids, target_mask, targets):
        """(B, C) or (B, T, C) teacher logits on the targets (encoded items), from the cache where it has them all."""
        keys = [key(t) for t in targets]
        cached = self.cache is not None and all(k in self.cache for k in keys)
        if self.sharded and self.model is not None and self.cache is not None and not self.complete:
            # a cache read from a file may lack some pairs: the model runs on every process or on none
            cached = not distributed.all_reduce(torch.tensor([float(not cached)], device=self.device)).item()
        if cached:
            rows = [self.cache[k] for k in keys]
            if rows[0].dim() == 1:
                return torch.stack(rows).to(target_ids.device)
            out = torch.zeros(len(rows), target_ids.shape[1], rows[0].shape[-1], device=target_ids.device)
            for b, (row, target) in enumerate(zip(rows, targets)):
                if len(row) != len(target.ids):  # a cache of other encodings: another --max-length or tokenizer
                    raise InputError(f"{self.cache_file}: the teacher's logits of {target.id!r} ({target.lang}) cover "
                                     f"{len(row)} tokens, its encoding here {len(target.ids)}: the cache was written "
                                     "with another --max-length, tokenizer or data; delete it to compute it again")
                out[b, :len(row)] = row
            return out
        if self.model is None:
            raise InputError("the teacher cache lacks some training pairs and no --teacher checkpoint was given to "
                             "compute them")
        inputs = (x.to(self.device) for x in (source_ids, source_mask, target_ids, target_mask))
        with shard.gathered(self.classifier):
            return self.model(*inputs)[1].float().to(target_ids.device)  # the batch's device (the CPU, until the step)

    @torch.no_grad()
    def build_cache(self, tokenizer, pairs, batch_size, device, rank=0, world_size=1):
        """The teacher's logits on every (source, target) pair of encoded items, split over the processes."""
        mine, stride = {}, batch_size * world_size
        for start in range(rank * batch_size, -(-len(pairs) // stride) * stride, stride):
            batch = pairs[start:start + batch_size]
            if not batch and not self.sharded:
                break
            run_on = batch or pairs[:1]  # sharded: as many batches on every process, an empty share a placeholder
            padded = data.pad_pairs(tokenizer, [s.ids for s, _ in run_on], [t.ids for _, t in run_on])
            tensors = [t.to(device) for t in padded]
            with shard.gathered(self.classifier):
                logits = self.model(*tensors)[1].float().cpu()
            for b, (_, target) in enumerate(batch):
                mine[key(target)] = logits[b] if logits.dim() == 2 else logits[b, :len(target.ids)].clone()
        self.cache = {k: v for part in distributed.gather(mine) for k, v in part.items()}
        self.complete = True
        return self.cache


def load(settings, run, pairs, pair_model):
    """The Teacher that the flags ask for, or None; a missing --teacher-cache is computed from --teacher, written."""
    if settings.get("soft_labels"):  # X-Mixup's released soft labels in the cache; source sentences: their gold tags
        targets, teacher = [t for _, t in pairs], Teacher()
        soft = {k: v for lang in {t.lang for t in targets} - {run.task.source}
                for k, v in run.task.train.layout.soft_labels_of(lang).items()}
        rows = teacher_rows(targets, soft, len(run.task.labels))
        teacher.cache, teacher.complete = {f"{id}\t{lang}": row for (id, lang), row in rows.items()}, True
        return teacher
    if not (settings.teacher or settings.teacher_cache):
        return None
    cached = settings.teacher_cache and Path(settings.teacher_cache).exists()
    teacher = Teacher(settings.teacher, settings.teacher_cache if cached else None, run.device, pair_model,
                      settings.shard, settings.offload)
    if settings.teacher_cache and not cached:
        teacher.build_cache(run.tokenizer, pairs, run.batch_size, run.device, run.rank, run.world_size)
        if run.rank == 0:  # written aside, then moved into place: never a half-written cache
            tmp = Path(f"{settings.teacher_cache}.tmp")
            torch.save(teacher.cache, tmp)
            os.replace(tmp, settings.teacher_cache)
    return teacher
