"""Data: what an example is (Example, as read; Encoded, as tokenized); how encoded items become batches: padded
to the longest, epochs of global batches, exact shards of them across DDP processes; and a task (Task): its examples
by split and language, its training split streamed with each translation paired with its source text by id
(TrainSplit). Each benchmark's Layout (minxlt/tasks/) says where its files are and how they read.
"""
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from minxlt.errors import InputError, warn


@dataclass(slots=True)  # no per-example dict: a training set holds millions
class Example:
    """One text (or text pair) in one language, as a reader gives it (minxlt/tasks/)."""
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


# A task: read by its Layout (minxlt/tasks/), its training split streamed and paired as it is asked for.


class TrainSplit(Mapping):
    """{lang: [Example]} read from the files when first asked for (evaluation, and a run whose token
    cache holds them, never read them), checked as they stream, a target against the source."""

    def __init__(self, name, layout, source, langs, strict=False):
        self.name, self.layout, self.source, self.langs, self.strict = name, layout, source, list(langs), strict
        self.examples = {}
        self.table = None  # source_labels, once read
        self.labelled_translations = layout is None or layout.labelled_translations

    def __contains__(self, lang):
        return lang in self.langs

    def __getitem__(self, lang):
        if lang not in self.examples:
            if lang not in self.langs:
                raise KeyError(lang)
            if lang != self.source:
                self[self.source]  # a target's source is read first, and kept
            self.examples[lang] = list(self.stream(lang))
        return self.examples[lang]

    def __iter__(self):
        return iter(self.langs)

    def __len__(self):
        return len(self.langs)

    def stream(self, lang):
        """A language's examples one at a time (for the token cache), counted and checked; a target's paired with the
        source's by id as they come: a label that differs is refused, orphans said once per file (or refused)."""
        file = self.layout.split_file(lang, "train")
        sources = self.source_labels() if lang != self.source and self.layout.paired_train else None
        checked = lang == self.source or self.layout.labelled_translations  # untagged translations are not "unlabelled"
        examples, unlabelled, orphans, translated = 0, [], [], set()
        for e in self.layout.stream(lang):
            examples += 1
            if checked and not e.labelled:
                unlabelled.append(e.id)
            if sources is not None:
                if e.id not in sources:
                    orphans.append(e.id)
                    continue
                label, where = sources[e.id]
                if label is not None and e.label is not None and label != e.label:
                    raise InputError(f"{e.where or file}: the translation of {e.id!r} is labelled {e.label!r}, and its "
                                     f"source ({where}) {label!r}: a translation keeps its source's label")
                translated.add(e.id)
            yield e
        if checked:
            check_split(self.name, "train", lang, self.source, file, examples, unlabelled)
        if sources is None or not examples:  # no translations into this language (PAN-X), or the file none at all
            return
        untranslated = [id for id in sources if id not in translated]
        problems = ([f"{len(orphans)} of its {examples} examples have no source example of the same id (first: "
                     f"{', '.join(map(repr, orphans[:5]))}): they are left out"] if orphans else []) + \
                   ([f"{len(untranslated)} of the {len(sources)} source examples have no translation in it "
                     f"(first: {', '.join(map(repr, untranslated[:5]))})"] if untranslated else [])
        if problems and (self.strict or len(orphans) > examples / 2):
            raise InputError(f"{file} does not pair with the source's training examples by id: {'; '.join(problems)}"
                             + ("" if self.strict else "; most of it does not pair, so it is refused")
                             + ": check that it is this task's translation")
        if problems and file not in WARNED:
            WARNED.add(file)
            warn(f"{file}: {'; '.join(problems)} (--strict-data refuses this)")

    def source_labels(self):
        """{id: (label, where it was read)} of the source's examples, read once, to check a target's against."""
        if self.table is None:
            self.table = {e.id: (e.label, e.where or e.lang) for e in self.examples.get(self.source)
                          or self.stream(self.source)}
        return self.table

    def release(self):
        """Let go of the examples read so far (the token cache holds them now); they are read again if asked for."""
        if self.layout is not None:
            self.examples.clear()
            self.layout.parsed.clear()
            self.table = None

    def files(self, lang):
        """The files whose bytes decide a language's training examples (a target's: the source's too), or None."""
        own = self.layout and self.layout.train_files(lang)
        if own is None:
            return None
        files = own + ([] if lang == self.source else self.layout.train_files(self.source))
        return files if all(f.is_file() for f in files) else None

    def reader(self):
        """What turns the files into examples, for the token cache's key: layout, source, --strict-data."""
        return [type(self.layout).__name__, self.source] + (["strict"] if self.strict else [])


class RoundTrips:
    """X-Mixup's round trips of the source's training texts, from `pattern` ({lang}), shaped as a TrainSplit."""

    def __init__(self, train, pattern):
        self.train, self.pattern, self.layout, self.source = train, pattern, train.layout, train.source
        if self.layout is None:
            raise InputError("--round-trip reads a task's files: it does not go with a few-shot sample "
                             "(--train-fraction, --translated)")
        self.langs = [lang for lang in train.langs if self.path(lang).is_file()]

    def path(self, lang):
        return Path(self.pattern.replace("{lang}", lang))

    def __getitem__(self, lang):
        return list(self.stream(lang))

    def stream(self, lang):
        sources, kept = self.train.source_labels(), 0
        for e in self.layout.each_round_trip(self.path(lang), lang):
            if e.id in sources:
                kept += 1
                yield replace(e, label=sources[e.id][0])
        if not kept:
            raise InputError(f"{self.path(lang)}: none of its rows is the round trip of a training example of "
                             f"{self.source} (rows are paired with the source's by line or id): check that it "
                             "translates this task's training file")

    def files(self, lang):
        own = self.train.files(self.source)  # the labels come from the source's files
        return None if own is None else [self.path(lang)] + own

    def reader(self):
        return ["round trip", *self.train.reader()]

    def release(self):
        self.train.release()


WARNED = set()  # the training files whose pairing has been warned of, once per process


@dataclass
class Task:
    """Labels, a source language, target languages, and per-split examples by language."""
    name: str
    labels: list
    source: str
    targets: list
    train: TrainSplit  # {lang: [Example]}, read when asked for; a target's translate the source's examples
    dev: dict
    test: dict
    level: str = "sentence"  # or "word": a label per word (BIO slots, POS); or "span": extractive QA (levels.LEVELS)
    round_trip: dict = field(default_factory=dict)  # {id: Example}: round-trip translations of source training examples
    intents: list | None = None  # a joint task's sentence labels (xSID): the intent, with BIO slots as `labels`
    doc_stride: int = 128  # QA: context tokens from a window's start to the next's
    max_answer_length: int = 30  # QA: the longest answer predicted, in tokens
    parallel: bool = True  # dev and test parallel across languages by id (CKA, retrieval and the oracle need it)
    translations: str = "the target languages' training files"  # where training translations come from, for messages
    test_translations: str | None = None  # the test texts' translations as the data folder has them
    pos_metric: str = "accuracy"  # POS tags: selected and reported by word accuracy, or "f1" (levels.chunk_counts)

    def __post_init__(self):
        if not isinstance(self.train, TrainSplit):  # examples already in memory (a few-shot sample, a test's)
            given = dict(self.train)
            self.train = TrainSplit(name=None, layout=None, source=None, langs=given)
            self.train.examples = given


class Layout:
    """Where a task's files are, the languages they hold (`found`, `languages`), how a split is read (`read`)."""
    langs: list
    pattern: str    # a language's files, for messages
    listing: str    # found()'s: the folder's files that name its languages ("test-{lang}.tsv")
    labels: list
    source: str = "en"
    level: str = "sentence"
    intents: list | None = None
    needs_data = True      # False: no files, the languages are `langs` (found() reads a data folder's)
    parallel = True        # whether dev and test are parallel across languages, by example id (CKA, retrieval, oracle)
    translations = "the target languages' training files"  # where translations of the training set come from
    paired_train = True    # a target's training examples translate the source's (MARC's are other reviews)
    labelled_translations = True  # a target's training examples carry labels (FILTER's of XTREME's tagging sets: none)
    pos_metric = "accuracy"  # POS tags: the score selected on ("f1": seqeval's, as XTREME scores UD-POS)
    tokenizer = None       # the run's tokenizer, where reading needs one (load_task): tagging translations' segments
    # --test-translations' default: the first of these ({source}: the source language's) the folder has files of
    test_translation_files = ("translate-test/test-{lang}-en-translated.tsv",)  # XTREME's translate-test

    @classmethod
    def for_folder(cls, directory):
        """The layout of a data folder: this one, or a variant for how the folder is written (XTREME's)."""
        return cls

    def __init__(self, directory, source):
        """The folder's languages (`languages`: those of `langs` in its order, then the others by name), and its
        test translations (`test_translations`), where it has them."""
        self.directory, self.source = Path(directory) if directory else None, source
        self.parsed = {}  # files that several splits or languages read, read once
        found = self.found() if self.needs_data else set(self.langs)
        self.languages = [lang for lang in self.langs if lang in found] + sorted(found - set(self.langs))
        patterns = [p.replace("{source}", source) for p in self.test_translation_files] if self.directory else []
        self.test_translations = next((str(self.directory / p) for p in patterns
                                       if any(self.directory.glob(p.replace("{lang}", "*")))), None)

    def split_file(self, lang, split):
        """The file a language's split is read from, for messages: `pattern` with the language and split."""
        name = re.sub(r"\{([^}]*)\}", lambda m: split if split in m.group(1).split(",") else m.group(0), self.pattern)
        return self.directory / name.replace("<lang>", lang) if self.directory else name

    def found(self):
        """The languages of the folder: the part that stands for {lang} in the names of its files of `listing`."""
        head, _, tail = self.listing.partition("{lang}")
        names = [p.relative_to(self.directory).as_posix() for p in self.directory.glob(f"{head}*{tail}")]
        return {name[len(head):len(name) - len(tail)] for name in names}

    def once(self, key, read):
        if key not in self.parsed:
            self.parsed[key] = read()
        return self.parsed[key]

    def source_train(self):
        """The source's training examples, read once: what translations of them are paired with."""
        return self.once((self.source, "train"), lambda: self.read(self.source, "train"))

    def stream(self, lang):
        """A language's training examples, one at a time where the reader can (else its list)."""
        return self.read(lang, "train")

    def train_files(self, lang):
        """The files of a language's training examples, for the token cache's key; None: only reading tells."""
        return None

    def round_trip(self):
        """{id: Example}: round-trip translations of the source's training examples, where the task has them."""
        return {}

    def each_round_trip(self, path, lang):
        """X-Mixup's round trips of the source's training texts through `lang` (--round-trip), with their ids."""
        raise InputError(f"--round-trip: task {type(self).__name__.lower()} has no reader of round-trip translations; "
                         "X-Mixup's are read for XNLI, PAWS-X, XTREME's UD-POS and PAN-X, and the QA tasks trained on "
                         "SQuAD or TyDiQA-GoldP's English (mlqa, XTREME's xquad, tydiqa)")


def check_split(name, split, lang, source, file, examples, unlabelled):
    """Refuse what would be scored as nothing (an empty source split, a target without test examples) and unlabelled
    or partly labelled splits (test files may be wholly unlabelled): `examples` counted, `unlabelled` ids."""
    where = f"(read from {file})"
    if not examples and (lang == source or split == "test"):
        raise InputError(f"task {name}: no {split} examples in {lang} {where}; check the file, or leave the "
                         "language out of --source-lang/--target-langs")
    if unlabelled and (split != "test" or len(unlabelled) < examples):
        raise InputError(f"task {name}: {len(unlabelled)} of the {examples} {split} examples in {lang} have "
                         f"no label, first {unlabelled[0]!r} {where}; "
                         + ("only test files may be unlabelled (XTREME's are)" if split != "test"
                            else "a test file is labelled throughout or not at all"))


def few_shot(task, fraction=1.0, translated=None, seed=0):
    """Yu & Joty's few-shot settings: a per-label sample of the source's training examples (`fraction`, at
    least one a label; the paper's 1.2% is 0.012), only `translated` of them with translations (the paper's 200)."""
    rng = random.Random(f"{seed}/few-shot")
    by_label = {}
    for e in task.train[task.source]:
        by_label.setdefault(e.label, []).append(e)
    kept = sorted((e for examples in by_label.values()
                   for e in rng.sample(examples, max(1, math.ceil(fraction * len(examples))))), key=lambda e: e.id)
    ids = [e.id for e in kept]
    with_translation = set(ids if translated is None else rng.sample(ids, min(translated, len(ids))))
    train = {task.source: kept}
    train.update({lang: [e for e in task.train[lang] if e.id in with_translation] for lang in task.targets})
    sample = replace(task, train=train, round_trip={i: e for i, e in task.round_trip.items() if i in with_translation})
    sample.train.labelled_translations = task.train.labelled_translations  # untagged translations stay untagged
    return sample
