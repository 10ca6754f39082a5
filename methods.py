"""What every training method implements (Method), with zero-shot as its example, and the two
baselines that differ from it only in what they train on or predict from: translate-train and
translate-test. flags.METHODS maps `--method` to a method; docs/methods.md says how to add one.

A method draws its training items (`draws`), makes a batch of them and computes its loss
(`make_batch`, `loss`, in `phases`), builds the model it trains around the encoder (`build`,
`wrap`) and predicts (`predictor`, `evaluate`). Its own flags are the fields of its `Settings`
dataclass; `self.settings` holds them with every other setting, read-only. What differs between
sentence labels, word labels and answer spans it asks of `self.run.level` (levels.py).
"""
import math
import sys
from dataclasses import dataclass, field, fields
from typing import Callable

import torch

import data
from levels import LEVELS
from minxlt.errors import InputError
from minxlt.parallel import distributed, shard
from minxlt.run import teacher
from minxlt.tasks import read_extra_train, read_translations, translation_file
from minxlt.text import token_cache
from model import Classifier


def flag(default, help, values=None):
    """A field of a method's Settings, one of its flags: its default, its line of --help, and the values it
    may take: an interval of numbers, "[0, 1]" or "(0, inf)", or a tuple of choices."""
    return field(default=default, metadata={"help": help, "values": values})


def own_flags(method):
    """The fields of a method's Settings dataclass: its own flags."""
    return fields(method.Settings) if hasattr(method, "Settings") else ()


@dataclass
class Run:
    """What methods and task levels are given: the task, its tokenizer, and where the run runs."""
    task: object            # data.Task
    tokenizer: object       # tokenizer.Tokenizer
    max_length: int         # tokens per text (per window for QA)
    batch_size: int = 64    # evaluation batch size
    device: str = "cpu"
    rank: int = 0
    world_size: int = 1
    num_layers: int = 12    # the encoder's depth (some papers' settings scale with it)
    max_positions: int = 512  # the longest input the encoder's positions hold
    lockstep: bool = False  # every process runs as many evaluation batches (a sharded model gathers its layers in each)
    cache: dict = field(default_factory=dict, repr=False)  # {lang: the token cache's texts of its training examples}
    encoded: dict = field(default_factory=dict, repr=False)  # {langs: their training examples, where not token-cached}
    translated: dict = field(default_factory=dict, repr=False)  # {(split, file): {lang: translations}} (counterparts)

    @property
    def level(self):
        return LEVELS[self.task.level]

    def encode(self, examples):
        """Encoded items of examples, as the task level encodes them."""
        return self.level.encode(examples, self.tokenizer, self.task, self.max_length)

    @property
    def token_cached(self):
        """Whether training texts go through the token cache (minxlt/text/token_cache.py): sentence-level
        ones read from a data folder; a corpus in memory (the bundled one, a few-shot sample) is encoded as it is."""
        layout = getattr(self.task.train, "layout", None)
        return self.level.caches_tokens and layout is not None and layout.needs_data

    def training_texts(self, langs, extra=()):
        """The training examples of `langs`, in order, then `extra` (--extra-train), encoded: read through the token
        cache where token_cached, else encoded as the task level encodes them, once a run."""
        if self.token_cached:
            parts = list(self.cached_texts(langs).values())
            if extra:
                parts.append(token_cache.encode(list(extra), self.tokenizer, self.task.labels, self.max_length,
                                                self.rank))
            return token_cache.join(parts)
        key = (tuple(langs), tuple(e.id for e in extra))
        if key not in self.encoded:
            examples = [e for lang in langs for e in self.task.train[lang]] + list(extra)
            self.encoded[key] = self.level.encode(examples, self.tokenizer, self.task, self.max_length)
        return self.encoded[key]

    def round_trips(self, pattern=None):
        """Round trips of the source's training texts, `get(id, lang, default)`: --round-trip's files (a path with
        {lang}; QA's: Span.round_trips), else the task's own, the same through every language (the bundled corpus)."""
        if pattern is None:
            return Everywhere({it.id: it for it in self.encode(list(self.task.round_trip.values()))})
        trips = data.RoundTrips(self.task.train, pattern)
        if not trips.langs:
            raise InputError(f"--round-trip {pattern}: no such file for any of {', '.join(self.task.train.langs)}")
        if not self.level.caches_tokens:  # read once a run, by X-Mixup's training_items
            return self.level.round_trips(self.training_texts([self.task.source]),
                                          {lang: self.encode(trips[lang]) for lang in trips.langs})
        texts = token_cache.training_texts(trips, trips.langs, self.tokenizer, self.task.labels, self.max_length,
                                           self.rank)
        return token_cache.ById(texts, self.cached_texts([self.task.source])[self.task.source].distinct_ids())

    def cached_texts(self, langs):
        """{lang: the token cache's texts of its training examples}, read once per run."""
        wanted = [lang for lang in langs if lang not in self.cache]
        if wanted:
            self.cache.update(token_cache.training_texts(self.task.train, wanted, self.tokenizer, self.task.labels,
                                                         self.max_length, self.rank))
        return {lang: self.cache[lang] for lang in langs}

    # Every process's tensor, concatenated in process order (a global batch's), without gradient, or with it
    # flowing back into this process's own part.
    all_gather = staticmethod(distributed.all_gather)
    all_gather_with_grad = staticmethod(distributed.all_gather_with_grad)

    def teacher(self, settings, items, build):
        """The teacher --teacher and --teacher-cache (or --soft-labels) ask for, or None (minxlt/run/teacher.py):
        a saved model made a predictor of pairs by `build(classifier, task.json)`, its soft labels of `items`."""
        return teacher.load(settings, self, items, build)

    # A block that calls a part of a sharded model (its encoder alone) runs inside gathered(model), or
    # evaluated(model) to compute in float32 as DDP's evaluation does (minxlt/parallel/shard.py).
    gathered = staticmethod(shard.gathered)
    evaluated = staticmethod(shard.evaluated)


class Everywhere(dict):
    """{id: item} looked up as token_cache.ById is, the same item through every language."""

    def get(self, example_id, lang=None, default=None):
        return super().get(example_id, default)


def check_translations(run, settings, cached=True):
    """Refuse a target language without translations of the training set (unless --missing-translations self), and
    word labels where a method trains on each translation's; `cached`: counted in the token cache, else the examples."""
    task, name = run.task, settings.method
    if not task.train.labelled_translations and (name == "translate-train" or settings.get("target_labels")):
        raise InputError(f"--method {name} trains on each translation's labels, and --task {settings.task}'s "
                         f"translations ({task.translations}) have none: word labels do not carry over to a "
                         "translation; --method filter trains on them (lambda = 0 in its Eq. 6), with its "
                         "self-teaching's soft labels")
    if cached and run.token_cached:
        sizes = {lang: len(texts) for lang, texts in run.cached_texts(task.targets).items()}
    else:
        sizes = {lang: len(task.train[lang]) for lang in task.targets}
    missing = [lang for lang, size in sizes.items() if not size]
    layout = task.train.layout  # None: a split in memory, no file
    files = ", ".join(f"{lang} ({layout.split_file(lang, 'train')})" if layout else lang for lang in missing)
    if missing and settings.get("missing_translations") == "self" and len(missing) < len(sizes):
        if run.rank == 0:
            print(f"note: no translations of the training set into {files}: --missing-translations self trains on "
                  "the other languages' alone", file=sys.stderr)
    elif missing:
        source = f"--soft-labels {settings.soft_labels}" if settings.get("soft_labels") else task.translations
        sample = [f"--{name.replace('_', '-')} {value}" for name, value in (("train_fraction", settings.train_fraction),
                  ("translated", settings.translated)) if value not in (None, 1.0)]  # a few-shot sample's flags
        source += f"; a few-shot sample ({', '.join(sample)}) keeps those of its examples alone" if sample else ""
        raise InputError(f"--method {name} trains on translations of the source's training examples, and --task "
                         f"{settings.task} has none in {files} (they come from: {source}); leave those "
                         "languages out of --target-langs, or use --method zero-shot"
                         + ("; or, as FILTER's code does, train on the others' alone (--missing-translations self)"
                            if name == "filter" and len(missing) < len(sizes) else ""))


@dataclass
class Phase:
    """A stretch of training with its own items, batches, loss and peak learning rate: most methods
    have one; Yu & Joty's have two, the second at a smaller learning rate (contrastive.py)."""
    name: str
    items: list             # what the batches are drawn from
    steps: int
    make_batch: Callable    # (items, weights, step) -> {name: tensor}; weight 0 marks DDP padding
    loss: Callable          # (model, batch) -> (loss, {component: value}), means over the examples that count
    lr_scale: float = 1.0   # its peak learning rate relative to --lr


def steps(settings, items):
    """--max-steps, or --epochs passes over `items` training items, --batch-size a step."""
    return settings.max_steps or math.ceil(items / settings.batch_size) * settings.epochs


def phase_index(phases, step):
    """(the index of the phase a step belongs to, the phase's first step); past the end, the last phase."""
    start = 0
    for i, phase in enumerate(phases[:-1]):
        if step < start + phase.steps:
            return i, start
        start += phase.steps
    return len(phases) - 1, start


def learning_rate(phases, warmup, step):
    """The learning rate of a step relative to --lr: within its phase, a linear warmup over the
    first `warmup` share of the phase's steps, then a linear decay to 0, from the phase's own peak."""
    index, start = phase_index(phases, step)
    phase, s = phases[index], step - start
    rise = int(warmup * phase.steps)
    return phase.lr_scale * min((s + 1) / max(rise, 1), max(0.0, (phase.steps - s) / max(phase.steps - rise, 1)))


class Method:
    """Zero-shot transfer, and the interface every method implements: the task loss on the source's labelled texts."""
    draws = "texts"  # its training items (training_items): "texts", "translated", "pairs" or "parallel"
    levels = ("sentence", "word", "span")  # the task levels it trains on (levels.py)
    test_inputs = ("text",)  # what a test prediction may see besides the target text (TEST_INPUTS), the default first

    def __init__(self, settings, run):
        """The run's settings (flags.Settings, read-only) and what it runs on (Run)."""
        self.settings, self.run = settings, run

    def training_items(self):
        """Its batches' encoded items: the source's texts (and --extra-train's), with their translations ("translated"),
        or each translation with its id's source text ("pairs", Level.pair; --self-pairs: each source text too)."""
        run, settings, task = self.run, self.settings, self.run.task
        extra = read_extra_train(settings.extra_train, task) if settings.extra_train else []
        if self.draws != "texts":
            check_translations(run, settings)
        if self.draws == "pairs":
            langs, own = ([task.source, *task.targets], extra) if settings.self_pairs else (task.targets, ())
            return run.level.pair(run.training_texts([task.source], extra), run.training_texts(langs, own))
        return run.training_texts([task.source, *task.targets] if self.draws == "translated" else [task.source], extra)

    def phases(self, items):
        """The training phases, in order: one over `items` for --max-steps (or --epochs passes)."""
        return [Phase(self.settings.method, items, steps(self.settings, len(items)), self.make_batch, self.loss)]

    def build(self, encoder):
        """The model OUT/best saves: the encoder with the task level's head. Parts no step trains are
        frozen, since DDP waits for a gradient of every trainable parameter."""
        settings, task = self.settings, self.run.task
        model = Classifier(encoder, len(task.labels), self.run.level.head(task, settings.head), settings.pooling,
                           len(task.intents or ()))
        for unused in (encoder.pooler if settings.pooling != "pooler" else None, encoder.lm_head):
            if unused is not None:
                unused.requires_grad_(False)
        return model

    def wrap(self, model):
        """The module that trains and predicts around the built (or a saved) model: here the model itself."""
        return model

    def start(self, model, items):
        """What the method needs before the first update, once the weights are in `model` (the wrapped one)."""

    def make_batch(self, items, weights, step):
        """A micro-batch on the CPU: input_ids and attention_mask (B, T) padded, labels, weights (0: DDP padding)."""
        ids, mask = self.run.tokenizer.pad([it.ids for it in items])
        return {"weights": torch.tensor(weights), "input_ids": ids, "attention_mask": mask,
                "labels": data.label_tensor(items, ids.shape[1])}

    def loss(self, model, batch):
        """(loss, {part: value} for the log): the task level's cross-entropy over the examples that count."""
        logits, _ = model(batch["input_ids"], batch["attention_mask"])  # (N, C) or (N, T, C)
        return self.run.level.loss(logits, batch["labels"], batch["weights"], batch["attention_mask"]), {}

    def predictor(self, model, test_input):
        """(predict, kind) of the wrapped model for a test input: what it sees, "text" alone, "pair"
        (the counterpart and the text) or "counterpart" alone (levels.predict_batch)."""
        return (lambda ids, mask: model(ids, mask)[0]), "text"

    def evaluate(self, model, split, langs=None, test_input=None, translations=None, predictions=None):
        """{lang: scores} of the wrapped model on a split, each text seen with `test_input`'s counterpart (none given:
        prediction_inputs' rule); `predictions` receives them."""
        model.eval()
        settings = self.settings
        chosen = test_input is None
        test_input, translations = prediction_inputs(self, split, test_input, translations)
        if chosen and test_input == "oracle" and not self.run.task.parallel:  # no counterpart but the source's own
            langs = [self.run.task.source]
        missing = settings.get("missing_translations", "refuse")
        partners = counterparts(self.run, split, test_input, translations, missing)
        examples, limit = getattr(self.run.task, split), settings.dev_limit if split == "dev" else None
        langs = [lang for lang in langs or examples if examples[lang]]  # a target may have no dev set (XTREME's QA)
        scored = {lang: examples[lang][:limit] for lang in langs}
        return self.run.level.score(*self.predictor(model, test_input), scored, self.run, partners, predictions)


def own_parameters(wrapped):
    """{name: values} of the trained parameters of a method's module beyond the built model it wraps as
    `classifier` (X-Mixup's ratio): task.json keeps them, and `restore` puts them back."""
    if not hasattr(wrapped, "classifier"):
        return {}
    return {name: p.detach().float().cpu().tolist() for name, p in wrapped.named_parameters()
            if not name.startswith("classifier.")}


def restore(wrapped, info):
    """A method's module made again around a saved model, with the parameters task.json keeps (own_parameters)."""
    saved = info.get("parameters") or {}
    if missing := sorted(set(own_parameters(wrapped)) - set(saved)):
        raise InputError(f"the checkpoint has no trained {', '.join(missing)}, which its method's predictions read: "
                         f"its run trained --method {info.get('method')}; evaluate it with that --method")
    with torch.no_grad():
        for name, values in saved.items():
            wrapped.get_parameter(name).copy_(torch.tensor(values))
    return wrapped


# What a test prediction sees besides the target text (Method.test_inputs).
TEST_INPUTS = {
    "text": "the target text alone",
    "translation": "the target's machine translation into the source language (--test-translations)",
    "oracle": "the task's parallel source-language text, the human original (an oracle: an upper bound)",
}


def prediction_inputs(method, split, test_input=None, translations=None):
    """(test input, translations) a split is predicted with: those given, else on dev its --dev-translations, and
    then the translations where given, else the oracle where the method reads one, else the text alone."""
    translations = translations or (method.settings.dev_translations if split == "dev" and not test_input else None)
    if test_input is None:
        test_input = "translation" if translations else "oracle" if "oracle" in method.test_inputs else "text"
    return test_input, translations


def counterparts(run, split, test_input, translations=None, missing="refuse"):
    """{lang: [Example]} a prediction sees beside each text of a split, by id: the source's texts (the oracle), or
    --test-translations' (the source's own); None for the text alone; `missing`: --missing-translations."""
    if test_input == "text":
        return None
    examples = getattr(run.task, split)
    if test_input == "oracle":
        ids, layout = {e.id for e in examples[run.task.source]}, run.task.train.layout
        for lang, texts in examples.items() if run.task.parallel else ():  # else: the source's alone is scored
            if alone := [e.id for e in texts if e.id not in ids]:
                raise InputError(f"{layout.split_file(lang, split) if layout else f'{split} {lang}'}: {len(alone)} "
                                 f"of its texts have no {run.task.source} text of the same id (first: {alone[0]!r}), "
                                 "which the oracle test input reads beside each: remove them, or test the text alone "
                                 "(--test-input text)")
        return {lang: examples[run.task.source] for lang in examples}
    key = (split, translations)  # read once a run: a dev split's are read at every evaluation
    if key not in run.translated:
        translated = dict(examples)  # the source language is its own
        for lang, texts in examples.items():
            path = None if lang == run.task.source else translation_file(translations, lang)
            if path and missing == "self" and not path.exists():  # each text beside itself
                if run.rank == 0:
                    print(f"note: {path} is missing: each {lang} text is predicted beside itself "
                          "(--missing-translations self)", file=sys.stderr)
            elif path:
                translated[lang] = read_translations(translations, lang, run.task.source, texts, run.tokenizer)
        run.translated[key] = translated
    return run.translated[key]


class ZeroShot(Method):
    """The task loss on source-language examples only."""


class TranslateTrain(Method):
    """The task loss on the source and all its translations. Each translation is a labelled text
    (translate-train-all, Unicoder Sec. 3.3)."""
    draws = "translated"


class TranslateTest(Method):
    """Zero-shot's training, tested on each text's translation. At test time the model classifies each text's
    translation into the source language (--test-translations), or the task's parallel source text (an oracle)."""
    levels = ("sentence",)  # a translation's sentence label is the text's; word labels and answers do not carry over
    test_inputs = ("oracle", "translation")

    def predictor(self, model, test_input):
        return (lambda ids, mask: model(ids, mask)[0]), "counterpart"


@dataclass
class TeacherSettings:
    """The flags of a method that learns from a fixed, trained model's soft labels (minxlt/run/teacher.py)."""
    teacher: str = flag(None, "a model trained by train.py (its OUT/best) whose probabilities on the translations "
                              "become soft labels, computed on the fly", "directory")
    teacher_cache: str = flag(None, "a file of the teacher's probabilities on every training pair: read if it exists, "
                                    "else computed once from --teacher and written")


def pair_batch(run, sources, targets, weights, teacher=None):
    """(source, translation) pairs padded to one length as FILTER and X-Mixup run them: source_ids, source_mask,
    target_ids, target_mask (B, T), both sides' labels (the translation's as its level has them), a teacher's logits."""
    source_ids, source_mask, target_ids, target_mask = data.pad_pairs(run.tokenizer, [s.ids for s in sources],
                                                                      [t.ids for t in targets])
    T = source_ids.shape[1]
    batch = dict(weights=torch.tensor(weights), source_ids=source_ids, source_mask=source_mask, target_ids=target_ids,
                 target_mask=target_mask, source_labels=data.label_tensor(sources, T),
                 target_labels=data.label_tensor(targets, T))
    run.level.translated(batch, targets)
    if teacher is not None:
        batch["teacher_logits"] = teacher.logits(source_ids, source_mask, target_ids, target_mask, targets)
    return batch
