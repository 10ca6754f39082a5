"""Data: what an example is (Example, as read; Encoded, as tokenized), and how encoded items become
batches: padded to the longest, epochs of global batches, exact shards of them across DDP processes.
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
    answers: list | None = None  # QA: [(answer text, its first character in `pair`, the context)]; `text`: question
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
    """Each word's label on its first sub-token (not a bare "▁", as XLM-R puts before CJK words), others -100;
    a joint task's (xSID's) intent on <s>, numbered after the word labels (model.JointHead)."""
    index = {label: i for i, label in enumerate(labels)}
    intent_index = {intent: len(labels) + i for i, intent in enumerate(intents or ())}
    bare_space = tokenizer.bare_space_id
    out = []
    for e in examples:
        ids, word_ids = tokenizer.encode_words(e.words, max_length)
        scored = {}  # word -> its first token, or its second where the first is a bare "▁"; a word without one: "O"
        for t, w in enumerate(word_ids):
            if w is not None and (w not in scored or (ids[scored[w]] == bare_space and ids[t] != bare_space)):
                scored[w] = t
        token_labels = [-100] * len(ids)
        if e.tags is not None:
            for w, t in scored.items():
                if e.tags[w] not in index:
                    raise ValueError(f"{e.where or e.lang} example {e.id}: tag {e.tags[w]!r} is not one of the "
                                     "task's labels")
                token_labels[t] = index[e.tags[w]]
        if intents and e.label is not None:
            if e.label not in intent_index:
                raise ValueError(f"{e.where or e.lang} example {e.id}: intent {e.label!r} is not one of the "
                                 "task's intents")
            token_labels[0] = intent_index[e.label]
        out.append(Encoded(ids, token_labels, e.lang, e.id, {"scored": sorted(scored.items()), "words": len(e.words)}))
    return out


def word_windows(examples, tokenizer, max_length):
    """[(example's index, its first word, Example)]: each example whole where it fits `max_length`, else in
    windows of as many words as fit, as XTREME's preprocessing splits long sentences (a long word: one)."""
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
                tags = e.tags[first:w] if e.tags else None
                out.append((index, first, replace(e, words=e.words[first:w], tags=tags)))
                first, used = w, 0
            used += n or 0
    return out


def label_tensor(items, T):
    """Labels of encoded items: (B,) for sentences, (B, T) padded with -100 for tokens, (B, 2) for spans."""
    if not isinstance(items[0].label, list):  # a label, or an answer's (start, end)
        return torch.tensor([it.label for it in items], dtype=torch.long)
    labels = torch.full((len(items), T), -100, dtype=torch.long)
    for i, it in enumerate(items):
        labels[i, :len(it.label)] = torch.tensor(it.label)
    return labels


def pad_pairs(tokenizer, sources, targets):
    """(source_ids, source_mask, target_ids, target_mask), all (B, T): both sides padded to one length."""
    ids, mask = tokenizer.pad(list(sources) + list(targets))
    B = len(sources)
    return ids[:B], mask[:B], ids[B:], mask[B:]


def epoch_batches(lengths, batch_size, epoch, seed, group_by_length=False):
    """One epoch's global batches, alike on every rank; length grouping sorts 50-batch windows, shuffles the batches."""
    order = list(range(len(lengths)))
    rng = random.Random(seed * 100003 + epoch)
    rng.shuffle(order)
    if group_by_length:
        window = 50 * batch_size
        order = [i for w in range(0, len(order), window)
                 for i in sorted(order[w:w + window], key=lambda i: -lengths[i])]
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    if group_by_length:
        rng.shuffle(batches)
    return batches


def padding_share(lengths, batches):
    """The share of the tokens of padded batches (each as long as its longest) that are padding."""
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    return 1 - sum(lengths[i] for b in batches for i in b) / max(padded, 1)


def shard(batch, rank, world_size, size=None):
    """This rank's (indices, weights) of a global batch, every world_size-th example, filled to `size` (default:
    the largest share) with weight-0 repeats, so that every rank steps alike and every example counts once."""
    mine = batch[rank::world_size]
    size = size or math.ceil(len(batch) / world_size)
    weights = [1.0] * len(mine) + [0.0] * (size - len(mine))
    return mine + [batch[0]] * (size - len(mine)), weights


def evaluation_batches(lengths, batch_size, rank, world_size, lockstep=False):
    """This process's whole batches of similar lengths (the same batches for any number of processes);
    `lockstep`: as many on every process, the last ones empty (a sharded model's forward needs all)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
    mine = batches[rank::world_size]
    return mine + [[]] * (math.ceil(len(batches) / world_size) - len(mine)) if lockstep else mine


def translation_pairs(sources, translations):
    """(source, translation) pairs of encoded items by id, in the sources' order (those without one dropped)."""
    by_id = {}
    for t in translations:
        by_id.setdefault(t.id, []).append(t)
    return [(s, t) for s in sources for t in by_id.get(s.id, [])]


def to_device(batch, device):
    """A batch's tensors on the device (non-blocking); a "...mask" without padding goes as a broadcast 1,
    which the encoder takes for no mask (model.attention_bias): the host knows, the device is not asked."""
    out = {}
    for name, value in batch.items():
        if not torch.is_tensor(value):
            out[name] = value
        elif name.endswith("mask") and value.device.type == "cpu" and value.dim() == 2 and bool(value.all()):
            out[name] = torch.ones((), dtype=value.dtype, device=device).expand(value.shape)  # made there: no copy
        else:
            out[name] = value.to(device, non_blocking=True)
    return out
