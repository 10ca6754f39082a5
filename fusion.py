"""FILTER (Fang et al. 2021): a text and its translation run the encoder's first m layers apart,
k fusion layers together, and the remaining L - m - k "domain" layers apart again. The layers are
the encoder's own, shared by both texts, so FILTER adds no parameters.

    source -> embed -> layers[:m] --.                                     .--> layers[m+k:] -> source states
                                     >-- concat -> layers[m:m+k] -> split
    target -> embed -> layers[:m] --'                                     '--> layers[m+k:] -> target states

m = L, k = 0 is translate-train (each text alone); m = 0, k = L is the plain concatenation.
Shapes: B pairs, T tokens (both texts padded to one length), H hidden.
"""
import torch
import torch.nn as nn


def filter_encode(encoder, source_ids, source_mask, target_ids, target_mask, m, k):
    """FILTER Eq. 1-3 -> (H_d^s, H_d^t), each (B, T, H). Each text is embedded with positions from
    its own start. The two are stacked along the batch for the local and domain layers (the same
    computation as running each alone) and joined along the sequence for the fusion layers, where
    each attends to both under both padding masks."""
    L = len(encoder.layers)
    if m < 0 or k < 0 or m + k > L:
        raise ValueError(f"FILTER needs 0 <= m, 0 <= k, m + k <= {L} (the encoder's layers); got m={m}, k={k}")
    B, T = source_ids.shape
    if target_ids.shape != (B, T):
        raise ValueError(f"pad source and target to one length: {tuple(source_ids.shape)} vs {tuple(target_ids.shape)}")
    mask = torch.cat([source_mask, target_mask])                   # (2B, T)
    h = encoder.embed(torch.cat([source_ids, target_ids]))         # (2B, T, H)
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
        """Eq. 4's p^s and p^t as logits: the shared head over each text's own states (its own <s>
        for sentence labels, its tokens for word labels)."""
        source, target = filter_encode(self.classifier.encoder, source_ids, source_mask, target_ids, target_mask, self.m, self.k)
        return self.classifier.head(source), self.classifier.head(target)

    def predict(self, source_ids, source_mask, target_ids, target_mask):
        """Inference: the target side's logits (the paper uses them for every task)."""
        return self(source_ids, source_mask, target_ids, target_mask)[1]


def pad_pairs(tokenizer, sources, targets):
    """Id lists of sources and targets -> (source_ids, source_mask, target_ids, target_mask), all (B, T)."""
    ids, mask = tokenizer.pad(list(sources) + list(targets))
    B = len(sources)
    return ids[:B], mask[:B], ids[B:], mask[B:]


class Teacher:
    """A fixed model whose probabilities on the translated side of the training pairs become soft
    labels: FILTER's teacher for self-teaching (Algorithm 1, Eq. 5), a FILTER model trained by
    train.py with its own m and k; or, for X-Mixup on word labels (Sec. 4.2), a source-trained
    plain classifier that tags the translation alone. The logits for a pair are computed on the
    fly, or looked up in a cache of all of them, keyed by (id, language)."""

    def __init__(self, checkpoint=None, cache=None, device="cpu", kind="filter"):
        from model import Classifier
        self.model, self.cache = None, None
        if cache is not None:
            self.cache = torch.load(cache, map_location="cpu", weights_only=True)
        if checkpoint is not None:
            classifier, _, task = Classifier.load(checkpoint)
            classifier.to(device).eval()
            if kind == "filter":
                if task.get("method") != "filter":
                    raise ValueError(f"{checkpoint} was trained with --method {task.get('method')}; the teacher must be a FILTER model")
                self.model = Filter(classifier, task["filter_m"], task["filter_k"]).to(device).eval()
            elif task.get("method") in ("filter", "xmixup"):
                raise ValueError(f"{checkpoint} was trained with --method {task.get('method')}; the labeller must be a plain "
                                 "classifier trained on the source (--method zero-shot)")
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
        return self.model(source_ids, source_mask, target_ids, target_mask)[1].float()

    def build_cache(self, tokenizer, pairs, batch_size, device, rank=0, world_size=1):
        """Compute the teacher's logits for every (source, target) pair of encoded items; the
        processes split the work and every one gets the whole cache."""
        import torch.distributed as dist
        mine = {}
        for start in range(rank * batch_size, len(pairs), batch_size * world_size):
            batch = pairs[start:start + batch_size]
            tensors = [t.to(device) for t in pad_pairs(tokenizer, [s.ids for s, _ in batch], [t.ids for _, t in batch])]
            logits = self.model(*tensors)[1].float().cpu()
            for b, (_, target) in enumerate(batch):
                mine[f"{target.id}\t{target.lang}"] = logits[b] if logits.dim() == 2 else logits[b, :len(target.ids)].clone()
        parts = [mine]
        if dist.is_initialized():
            parts = [None] * world_size
            dist.all_gather_object(parts, mine)
        self.cache = {k: v for part in parts for k, v in part.items()}
        return self.cache
