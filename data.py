"""Data: what an example is (Example, as read; Encoded, as tokenized), and how encoded items
become batches: padding to the longest in the batch, epochs of global batches, and exact shards
of them across DDP processes.
"""
import math
import random
from dataclasses import dataclass, field, replace

import torch


@dataclass(slots=True)  # no per-example dict: a training set holds millions
class Example:
    """One text (or text pair) in one language, as a reader gives it (tasks.py)."""
    id: str
    lang: str
    text: str
    pair: str | None = None    # second text of a pair task (XNLI hypothesis, PAWS-X sentence 2)
    label: str | None = None   # sentence label
    words: list | None = None  # word-level input, for tagging
    tags: list | None = None   # one label per word (BIO slots, POS)
    source_text: str | None = None  # the source-language text this translates, where the file gives it
    answers: list | None = None  # QA: [(answer text, its first character in `pair`, the context)]; `text` is the question
    group: str | None = None  # QA: the article, which a split keeps whole
    where: str | None = field(default=None, compare=False, repr=False)  # file:line it was read from, for messages

    @property
    def labelled(self):
        """Whether it has its gold label, tags or answers (XTREME's test files have none)."""
        return self.label is not None or self.tags is not None or self.answers is not None


@dataclass
class Encoded:
    """One tokenized example: input ids, its label index (or -100), and where it came from."""
    ids: list
    label: int = -100
    lang: str = ""
    id: str = ""
    extra: dict = field(default_factory=dict)


def encode_examples(examples, tokenizer, labels, max_length):
    """Tokenize sentence(-pair) classification examples with their label index."""
    index = {label: i for i, label in enumerate(labels)}
    pairs = None if all(e.pair is None for e in examples) else [e.pair for e in examples]
    ids = tokenizer.encode_batch([e.text for e in examples], pairs, max_length)
    return [Encoded(x, index[e.label] if e.label is not None else -100, e.lang, e.id) for e, x in zip(examples, ids)]


def encode_tagged(examples, tokenizer, labels, max_length, intents=None):
    """Tokenize word-labelled examples. Each word's label sits on its first sub-token, skipping the
    bare "▁" that XLM-R's vocabulary puts before most CJK words; every other token is -100 (not
    scored). `extra["scored"]` lists (word, token) for the scored tokens; a word that gets no token
    (truncated away, or normalised to nothing) is not scored, and evaluation counts it as "O".
    A joint task (`intents`: xSID) also labels the <s> token, with the sentence's intent, numbered
    after the word labels: len(labels) + its index in `intents` (model.JointHead reads it so)."""
    index = {label: i for i, label in enumerate(labels)}
    intent_index = {intent: len(labels) + i for i, intent in enumerate(intents or ())}
    bare_space = tokenizer.bare_space_id
    out = []
    for e in examples:
        ids, word_ids = tokenizer.encode_words(e.words, max_length)
        scored = {}  # word -> its first token, or its second where the first is a bare "▁"
        for t, w in enumerate(word_ids):
            if w is not None and (w not in scored or (ids[scored[w]] == bare_space and ids[t] != bare_space)):
                scored[w] = t
        token_labels = [-100] * len(ids)
        if e.tags is not None:
            for w, t in scored.items():
                if e.tags[w] not in index:
                    raise ValueError(f"{e.where or e.lang} example {e.id}: tag {e.tags[w]!r} is not one of the task's labels")
                token_labels[t] = index[e.tags[w]]
        if intents and e.label is not None:
            if e.label not in intent_index:
                raise ValueError(f"{e.where or e.lang} example {e.id}: intent {e.label!r} is not one of the task's intents")
            token_labels[0] = intent_index[e.label]
        out.append(Encoded(ids, token_labels, e.lang, e.id, {"scored": sorted(scored.items()), "words": len(e.words)}))
    return out


def word_windows(examples, tokenizer, max_length):
    """[(example's index, its first word, Example)]: each example whole where its words' tokens
    fit `max_length` with the special tokens, else its words in consecutive windows, each as many
    as fit, as XTREME's preprocessing splits long sentences (utils_preprocess.py, udpos and panx);
    a word longer than a window on its own is a window (truncated)."""
    specials = len(tokenizer.encode_words([])[0])
    out = []
    for index, e in enumerate(examples):
        lengths = [len(pieces) for pieces in tokenizer.tokenize_words(e.words)] if e.words else []
        if sum(lengths) + specials <= max_length:
            out.append((index, 0, e))
            continue
        first, used = 0, 0
        for w, n in enumerate(lengths + [None]):
            if n is None or (used + n + specials > max_length and w > first):
                out.append((index, first, replace(e, words=e.words[first:w], tags=e.tags[first:w] if e.tags else None)))
                first, used = w, 0
            used += n or 0
    return out


def label_tensor(items, T):
    """Labels of encoded items: (B,) for sentence labels, (B, T) with -100 padding for token labels,
    (B, 2) for answer spans."""
    if not isinstance(items[0].label, list):  # a label, or an answer's (start, end)
        return torch.tensor([it.label for it in items], dtype=torch.long)
    labels = torch.full((len(items), T), -100, dtype=torch.long)
    for i, it in enumerate(items):
        labels[i, :len(it.label)] = torch.tensor(it.label)
    return labels


def collate(items, tokenizer):
    """Pad to the longest in the batch: input_ids, attention_mask (B, T) and labels (label_tensor)."""
    input_ids, attention_mask = tokenizer.pad([it.ids for it in items])
    return input_ids, attention_mask, label_tensor(items, input_ids.shape[1])


def pad_pairs(tokenizer, sources, targets):
    """Id lists of sources and targets -> (source_ids, source_mask, target_ids, target_mask), all
    (B, T): both sides padded to one length, as FILTER and X-Mixup run them side by side."""
    ids, mask = tokenizer.pad(list(sources) + list(targets))
    B = len(sources)
    return ids[:B], mask[:B], ids[B:], mask[B:]


def epoch_batches(lengths, batch_size, epoch, seed, shuffle=True, group_by_length=False):
    """The global batches of one epoch, as index lists: the same on every rank (it depends only on
    seed and epoch), every example exactly once. Length grouping sorts windows of 50 batches by
    length, so that each batch pads little, and then shuffles the batches."""
    order = list(range(len(lengths)))
    rng = random.Random(seed * 100003 + epoch)
    if shuffle:
        rng.shuffle(order)
    if group_by_length:
        window = 50 * batch_size
        order = [i for w in range(0, len(order), window)
                 for i in sorted(order[w:w + window], key=lambda i: -lengths[i])]
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    if shuffle and group_by_length:
        rng.shuffle(batches)
    return batches


def padding_share(lengths, batches):
    """The share of the tokens of padded batches (each as long as its longest) that are padding."""
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    return 1 - sum(lengths[i] for b in batches for i in b) / max(padded, 1)


def shard(batch, rank, world_size, size=None):
    """This rank's part of a global batch, as (indices, weights). Ranks take every world_size-th
    example; where the batch does not divide evenly, the short ranks repeat an example with weight
    0, so every rank runs the same number of steps and every example counts exactly once. `size`:
    the examples each rank gets, a short batch filled so (one shape for a compiled step); by default
    the largest share."""
    mine = batch[rank::world_size]
    size = size or math.ceil(len(batch) / world_size)
    weights = [1.0] * len(mine) + [0.0] * (size - len(mine))
    return mine + [batch[0]] * (size - len(mine)), weights


def evaluation_batches(lengths, batch_size, rank, world_size, lockstep=False):
    """This process's batches of indices into `lengths`, texts of similar length together (little
    padding). Whole batches are dealt out, so every example is computed in the same batch whatever
    the number of processes, and the results are identical. `lockstep`: every process gets as many,
    the last ones empty (a sharded model's forward needs all processes; levels.predict_batch)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
    mine = batches[rank::world_size]
    return mine + [[]] * (math.ceil(len(batches) / world_size) - len(mine)) if lockstep else mine


def translation_pairs(sources, translations):
    """(source, translation) pairs of encoded items, each translation with its source (same id),
    in the order of the sources; sources without a translation are dropped."""
    by_id = {}
    for t in translations:
        by_id.setdefault(t.id, []).append(t)
    return [(s, t) for s in sources for t in by_id.get(s.id, [])]


def to_device(batch, device):
    """A batch's tensors on the device; from pinned memory the copy does not wait for the host. A
    padding mask (a "...mask") without padding goes as a single 1 broadcast to its shape, which the
    encoder takes for no mask at all (model.attention_bias): the host knows that there is no
    padding, and the device need not be asked."""
    return {name: (unpadded(value, device) if name.endswith("mask") and is_unpadded(value) else value.to(device, non_blocking=True))
            if torch.is_tensor(value) else value for name, value in batch.items()}


def is_unpadded(mask):
    """Whether a (B, T) padding mask on the host has no padding."""
    return mask.device.type == "cpu" and mask.dim() == 2 and bool(mask.all())


def unpadded(mask, device):
    """A mask of ones as one value broadcast to its shape, made on the device (nothing to copy)."""
    return torch.ones((), dtype=mask.dtype, device=device).expand(mask.shape)
