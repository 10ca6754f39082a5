"""The interface every training method implements, and its two smallest examples: zero-shot and
translate-train. flags.METHODS maps `--method` names to methods; train.py's loop, evaluate.py and
the benchmarks call only what is defined here.

A method says
  - which training items it draws from a task: the source's labelled texts, with their
    translations or not, (source, translation) pairs, or pre-training pairs (`draws`, `training_items`);
  - how it builds and wraps the model (`build`, `wrap`: FILTER and X-Mixup run the classifier on
    pairs, X-Mixup adds its ratio's W and b);
  - how a batch is made and what its loss is, with named components for the log (`make_batch`,
    `loss`), in one or more phases (`phases`: Yu & Joty have two);
  - how it predicts at test time and which input that needs (`predictor`, `load_predictor`:
    the text alone, or "pair": with its source-language counterpart), and what selects the best
    model (`metric`, `evaluate`);
  - its own flags (`add_arguments`), its papers' settings (`paper`, per task level `defaults`)
    and what its flags cannot do (`check`): minxlt/run/flags.py reads these once, before the run, and
    gives the method the resulting settings, read-only (`self.settings`).

What differs between task levels (sentence labels, word labels, answer spans) a method asks of
`self.run.level` (levels.py), so that its loss is written once for all three. Its task loss,
`self.run.level.loss`, is cross-entropy: over the texts' labels or the words' tags
(losses.task_loss), or over a window's positions for an answer's start and end (losses.span_loss).
"""
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

import data
from levels import LEVELS
from minxlt.parallel import distributed, shard
from minxlt.run import teacher

# What a method's file is given besides the encoder, the losses and this interface, so that it imports
# no machinery itself: the types of its own flags (add_arguments), and Unicoder's reader of --parallel files.
from minxlt.run.cli import fraction, non_negative_float, non_negative_int, positive_float, positive_int  # noqa: E402,F401,I001
from minxlt.errors import InputError
from minxlt.tasks import (
    RoundTrips,
    read_extra_train,
    read_parallel_lines,  # noqa: E402,F401
    read_translations,
    translation_file,
)
from minxlt.text import token_cache
from model import Classifier, Encoder


@dataclass
class Run:
    """What methods and task levels are given: the task, its tokenizer, and where the run runs."""
    task: object            # tasks.Task
    tokenizer: object       # tokenizer.Tokenizer
    max_length: int         # tokens per text (per window for QA)
    batch_size: int = 64    # evaluation batch size
    device: str = "cpu"
    rank: int = 0
    world_size: int = 1
    num_layers: int = 12    # the encoder's depth (some papers' settings scale with it)
    max_positions: int = 512  # the longest input the encoder's positions hold
    lockstep: bool = False  # every process runs as many evaluation batches (a sharded model gathers its layers in each)
    cache: dict = field(default_factory=dict, repr=False)  # {lang: the token cache's EncodedTexts of its training examples}
    encoded: dict = field(default_factory=dict, repr=False)  # {langs: their training examples encoded, where not in the token cache}
    translated: dict = field(default_factory=dict, repr=False)  # {(split, file): {lang: translations}} (counterparts)

    @property
    def level(self):
        return LEVELS[self.task.level]

    def encode(self, examples):
        """Encoded items of examples, as the task level encodes them."""
        return self.level.encode(examples, self.tokenizer, self.task, self.max_length)

    def training_texts(self, langs, extra=()):
        """The training examples of `langs`, in order, then `extra` (--extra-train), encoded: from the
        token cache (minxlt/text/token_cache.py) where the task level's items fit it, else in memory."""
        if not self.level.caches_tokens:
            key = (tuple(langs), tuple(e.id for e in extra))  # encoded once, whether --epochs counted them first or not
            if key not in self.encoded:
                self.encoded[key] = self.encode([e for lang in langs for e in self.task.train[lang]] + list(extra))
            return self.encoded[key]
        parts = list(self.cached_texts(langs).values())
        if extra:
            parts.append(token_cache.encode(list(extra), self.tokenizer, self.task.labels, self.max_length, self.rank))
        return token_cache.join(parts)

    def all_gather(self, tensor):
        """Every process's `tensor`, concatenated in process order (a global batch's), without gradient."""
        return distributed.all_gather(tensor)

    def all_gather_with_grad(self, tensor):
        """all_gather, the gradient flowing back into this process's own part."""
        return distributed.all_gather_with_grad(tensor)

    def round_trips(self, pattern=None):
        """The round-trip translations of the source's training texts, `get(id, lang, default)`:
        read from --round-trip's files (a path with {lang}: through each target language), token-cached
        (QA's windows: the task level's lookup, Level.round_trips); else the task's own, the same
        through every language (the bundled corpus's); else none."""
        if pattern is None:
            return Everywhere({it.id: it for it in self.encode(list(self.task.round_trip.values()))})
        trips = RoundTrips(self.task.train, pattern)
        if not trips.langs:
            raise InputError(f"--round-trip {pattern}: no such file for any of {', '.join(self.task.train.langs)}")
        if not self.level.caches_tokens:  # QA's windows: encoded in memory, once a run (--epochs counts the items first)
            key = ("round trips", pattern)
            if key not in self.encoded:
                self.encoded[key] = self.level.round_trips(self.training_texts([self.task.source]),
                                                           {lang: self.encode(trips[lang]) for lang in trips.langs})
            return self.encoded[key]
        texts = token_cache.training_texts(trips, trips.langs, self.tokenizer, self.task.labels, self.max_length, self.rank)
        return token_cache.ById(texts, self.cached_texts([self.task.source])[self.task.source].distinct_ids())

    def cached_texts(self, langs):
        """{lang: the token cache's EncodedTexts of its training examples}, read once per run."""
        wanted = [lang for lang in langs if lang not in self.cache]
        if wanted:
            self.cache.update(token_cache.training_texts(self.task.train, wanted, self.tokenizer, self.task.labels, self.max_length,
                                                         self.rank))
        return {lang: self.cache[lang] for lang in langs}


class Everywhere(dict):
    """{id: item} looked up as token_cache.ById is, the same item through every language."""

    def get(self, example_id, lang=None, default=None):
        return super().get(example_id, default)


@dataclass
class Phase:
    """A stretch of training with its own items, batches, loss and peak learning rate: most methods
    have one; Yu & Joty's language adaptation has two, the second at a smaller learning rate
    (contrastive.py). Each phase warms up and decays on its own (learning_rate)."""
    name: str
    items: list             # what the batches are drawn from
    steps: int
    make_batch: Callable    # (items, weights, step) -> {name: tensor}; weight 0 marks DDP padding
    loss: Callable          # (model, batch) -> (loss, {component: value}), means over the examples that count
    lr_scale: float = 1.0   # its peak learning rate relative to --lr


def phase_index(phases, step):
    """(the index of the phase a step belongs to, the phase's first step); past the end, the last phase."""
    start = 0
    for i, phase in enumerate(phases[:-1]):
        if step < start + phase.steps:
            return i, start
        start += phase.steps
    return len(phases) - 1, start


def phase_at(phases, step):
    """The phase a step belongs to; past the end, the last phase."""
    return phases[phase_index(phases, step)[0]]


def learning_rate(phases, warmup, step):
    """The learning rate of a step relative to --lr: within its phase, a linear warmup over the
    first `warmup` share of the phase's steps, then a linear decay to 0, from the phase's own peak."""
    index, start = phase_index(phases, step)
    phase, s = phases[index], step - start
    rise = int(warmup * phase.steps)
    return phase.lr_scale * min((s + 1) / max(rise, 1), max(0.0, (phase.steps - s) / max(phase.steps - rise, 1)))


def first(item):
    """The source of a (source, translation) pair, or the item itself."""
    return item[0] if isinstance(item, tuple) else item


class Method:
    """The interface; as it stands, a method that trains the task on the source's texts alone."""
    name = None              # its --method
    help = ""                # one line for --help
    # its training items: "texts", the source's labelled texts; "translated", those and their translations, each a
    # labelled text (translate-train); "pairs", (source, translation); "parallel", pre-training pairs
    draws = "texts"
    levels = ("sentence", "word", "span")  # the task levels it trains on
    levels_note = "trains on whole texts"   # why it trains on no other levels, for the message that refuses them
    unused_parameters = False  # whether a step may leave trainable parameters without gradient (DDP must know)
    test_inputs = ("text",)  # what its test predictions can see besides the target text (TEST_INPUTS), the default first
    groups_by_length = True  # whether batches group texts of similar length by default (not where a loss compares a batch's texts)
    teacher_kind = None      # the --teacher it takes (minxlt/run/teacher.py): "filter" (FILTER's self-teaching) or "labeller"
    paper = {}               # --preset paper: the settings its paper states (paper_preset)
    self_pairs = False       # pairs: whether each source text is also paired with itself (--self-pairs' default)
    # what one --epochs is: a pass over the training items, counted as the paper's (or its authors') code counts them
    epoch = "a pass over the source's training examples (XTREME's run_classify.py counts them so)"
    fixed = {}  # {setting: value}: what it does that no flag changes, which an experiment file may state (reproduce.py's audit)

    def __init__(self, settings, run):
        """The run's settings (flags.Settings, read-only) and what it runs on (Run)."""
        self.settings, self.run = settings, run

    @staticmethod
    def add_arguments(parser):
        """The method's own flags, as an argument group of train.py's parser."""

    @classmethod
    def paper_preset(cls, task):
        """{flag: value}: what the method's paper states of its head, learning rate, batch size and
        epochs for a task (tasks.Task; --preset paper); what it does not state keeps this script's default."""
        return dict(cls.paper)

    @classmethod
    def defaults(cls, level, num_layers, settings):
        """{flag: value}: the papers' settings for a task level, for the flags left unset (None);
        `settings` are the flags as resolved so far, a dict (flags.resolve)."""
        return {}

    @classmethod
    def check(cls, settings, run):
        """Refuse, before the model loads, what the method's own flags cannot do with this task and
        model (flags.check has checked the rest)."""

    @classmethod
    def uses_translations(cls, settings):
        """Whether training needs the translations of the source's training examples."""
        return cls.draws != "texts"

    def batches_run_a_model(self):
        """Whether making a batch runs a model (a teacher's forward pass): then the batches are
        made in the training process, where the model's device is (bookkeeping.loader_workers)."""
        return False

    def training_items(self):
        """The encoded training items: the source's texts (and --extra-train's labelled texts), with
        their translations for translate-train; for pair methods, every (source, translation) pair:
        each translation with the source text of its id, in the sources' order, a source without a
        translation left out (data.translation_pairs; Level.pair, which for sentences computes the
        same on the token cache's arrays). --extra-train's texts, which have no translations, are
        paired with themselves (--self-pairs), as FILTER pairs SQuAD's questions (run_xqa.py:1140)."""
        run, task = self.run, self.run.task
        extra = read_extra_train(self.settings.extra_train, task) if self.settings.extra_train else []
        if self.draws == "pairs":  # --self-pairs: the source's texts among their own counterparts, each paired with itself
            langs, own = ([task.source, *task.targets], extra) if self.settings.self_pairs else (task.targets, ())
            return run.level.pair(run.training_texts([task.source], extra), run.training_texts(langs, own))
        return run.training_texts([task.source, *task.targets] if self.draws == "translated" else [task.source], extra)

    @classmethod
    def epoch_steps(cls, run, settings):
        """{setting: value} that --epochs resolves: --max-steps, --epochs passes over the items that
        one epoch counts (`epoch`), --batch-size a step; `settings` are those resolved so far."""
        items = cls(settings, run).training_items()  # encoded once: the run's training_items() reads them again
        return {"max_steps": math.ceil(len(items) / settings.batch_size) * settings.epochs}

    def phases(self, items):
        """The training phases, in order; most methods have one, over --max-steps."""
        return [Phase(self.name, items, self.settings.max_steps, self.make_batch, self.loss)]

    def length(self, item):
        """An item's tokens, for grouping batches by length (a pair: its longer side)."""
        return max(len(x.ids) for x in (item if isinstance(item, tuple) else [item]))

    def units(self, item):
        """What the loss averages over in one item (examples; scored tokens of the source for word labels)."""
        return self.run.level.units(first(item))

    def build(self, encoder):
        """The model whose weights OUT/best holds: the encoder with the task level's head. Parts that
        no step trains are frozen, since DDP waits for a gradient of every trainable parameter."""
        settings, task = self.settings, self.run.task
        model = Classifier(encoder, len(task.labels), self.run.level.head(task, settings.head), settings.pooling, len(task.intents or ()))
        for unused in (encoder.pooler if settings.pooling != "pooler" else None, encoder.lm_head):
            if unused is not None:
                unused.requires_grad_(False)
        return model

    def wrap(self, model, items):
        """The module the loop trains and checkpoints, around the built model; `items` are the
        training items. A sharded run's encoder has no weights yet."""
        return model

    def start(self, model, items):
        """What the method needs once the weights are in `model` (the wrapped one, sharded where the
        run is), before any update: Unicoder mines its hard negatives among the items, a teacher
        (FILTER's, X-Mixup's) loads and labels them."""

    def make_batch(self, items, weights, step):
        """One micro-batch, on the CPU: "input_ids" and "attention_mask" (B, T), the items padded to
        the longest; "labels" (data.label_tensor); "weights" (B,), 0 for DDP padding."""
        batch = {"weights": torch.tensor(weights)}
        batch["input_ids"], batch["attention_mask"], batch["labels"] = data.collate(items, self.run.tokenizer)
        return batch

    def loss(self, model, batch):
        """(loss, {part: value} for the log): the batch's loss, here the task level's cross-entropy,
        averaged over the examples that count (over its scored units: Level.units), which the loop
        weights by the batch's share of the global batch."""
        logits, _ = model(batch["input_ids"], batch["attention_mask"])  # (N, C) or (N, T, C)
        return self.run.level.loss(logits, batch["labels"], batch["weights"], batch["attention_mask"]), {}

    def metric(self):
        """The dev score that selects the best model."""
        return self.run.level.metric(self.run.task)

    def predictor(self, model, test_input):
        """(predict, kind) of the trained module for a test input (TEST_INPUTS): levels.predict_batch's
        function, and what it sees, the "text" alone, the "pair" of counterpart and text, or the
        "counterpart" alone."""
        return (lambda ids, mask: model(ids, mask)[0]), "text"

    def load_saved(self, directory, encoder_only=False):
        """(Classifier, tokenizer, task.json), or the Encoder alone, saved by train.py (OUT/best):
        whole on each process, or, in a sharded run, sharded as it loads (each process its own rows)."""
        if not self.settings.shard:
            return Encoder.from_pretrained(directory, device=self.run.device) if encoder_only else Classifier.load(directory, self.run.device)
        return (shard.load_encoder if encoder_only else shard.load_classifier)(directory, self.run.device, self.settings.offload)

    # A block that calls a part of a sharded model (its encoder alone, its LM head) runs inside
    # gathered(the wrapped model): its embeddings and heads whole meanwhile (its layers gather themselves).
    gathered = staticmethod(shard.gathered)
    # The same, where the block evaluates it: in float32, as DDP's evaluation, where a sharded run computes in bf16.
    evaluated = staticmethod(shard.evaluated)

    @classmethod
    def load_predictor(cls, classifier, info, test_input):
        """(predict, kind) of a saved model (OUT/best): its Classifier and task.json."""
        return (lambda ids, mask: classifier(ids, mask)[0]), "text"

    def saved_info(self, model):
        """What task.json needs beyond the task to rebuild the predictor (load_predictor)."""
        return {}

    def evaluate(self, model, split, langs):
        """{lang: scores} of the trained module on a split ("dev" or "test") of the task, a text
        seen with the task's own source-language text of the same id where the method needs a
        counterpart (model selection is on the source, whose counterpart is itself), or with its
        translation where --dev-translations gives them (X-Mixup's translate-dev)."""
        model.eval()
        translations = self.settings.dev_translations if split == "dev" else None
        test_input = "translation" if translations else "oracle" if "oracle" in self.test_inputs else "text"
        if test_input == "oracle" and not self.run.task.parallel:  # no counterpart but the source's own
            langs = [self.run.task.source]
        partners = counterparts(self.run, split, test_input, translations, self.settings.missing_translations)
        limit = self.settings.dev_limit if split == "dev" else None
        return score_split(self.run, *self.predictor(model, test_input), split, langs, partners, limit=limit)

    def test(self, best, model, trained, test_input="text", translations=None, predictions=None, measure=None):
        """({lang: test scores}, measure(encoder)) of the best model on dev, saved in `best`
        (OUT/best), or, where none was saved, of the model as trained (`model` built, `trained`
        wrapped); `measure` (CKA and retrieval) takes its encoder. `predictions` receives the
        predictions (Level.score). A sharded run loads OUT/best sharded, each process its own rows."""
        partners = counterparts(self.run, "test", test_input, translations, self.settings.missing_translations)
        if not Path(best).exists():
            trained.eval()
            predictor, tested, root = self.predictor(trained, test_input), model, trained
        else:
            classifier, _, info = self.load_saved(best)
            classifier.eval()
            predictor, tested, root = type(self).load_predictor(classifier, info, test_input), classifier, classifier
        with self.gathered(root):  # a sharded model's embeddings and head, whole while it is tested
            scores = score_split(self.run, *predictor, "test", None, partners, predictions)
            return scores, measure(tested.encoder) if measure else None


# What a test prediction sees besides the target text (Method.test_inputs).
TEST_INPUTS = {
    "text": "the target text alone",
    "translation": "the target's machine translation into the source language (--test-translations)",
    "oracle": "the task's parallel source-language text, the human original (an oracle: an upper bound)",
}


def counterparts(run, split, test_input, translations=None, missing="refuse"):
    """{lang: [Example]}: what a prediction sees besides each text of a split, by example id: the
    task's source-language texts (the oracle), or translations read from --test-translations (the
    source language is its own). None for the text alone. A language whose translation file is
    missing stops the run, or with `missing` "self" (FILTER's --missing-translations) has its texts
    each seen beside itself."""
    if test_input == "text":
        return None
    examples = getattr(run.task, split)
    if test_input == "oracle":
        return {lang: examples[run.task.source] for lang in examples}
    key = (split, translations)  # read once a run: a dev split's are read at every evaluation
    if key not in run.translated:
        run.translated[key] = {lang: texts if lang == run.task.source else translated_texts(run, translations, lang, texts, missing)
                               for lang, texts in examples.items()}
    return run.translated[key]


def translated_texts(run, translations, lang, texts, missing):
    """`texts` of `lang` as their translations (read_translations, segments counted with the run's
    tokenizer), or, where the file is missing and `missing` is "self", the texts themselves, as
    FILTER's run_xtag.py:363-369 pairs a text that has no translation."""
    path = translation_file(translations, lang)
    if missing == "self" and not path.exists():
        if run.rank == 0:
            print(f"note: {path} is missing: each {lang} text is predicted beside itself (--missing-translations self)", file=sys.stderr)
        return texts
    return read_translations(translations, lang, run.task.source, texts, run.tokenizer)


def score_split(run, predict, kind, split, langs=None, partners=None, predictions=None, limit=None):
    """{lang: scores} of a predictor (Method.predictor) on a split of the task ("dev" or "test";
    `langs`: all of its languages unless given; `limit`: the first examples of each, --dev-limit),
    with the counterparts it sees (counterparts(), paired by id, read for the whole split)."""
    examples = getattr(run.task, split)
    langs = [lang for lang in langs or examples if examples[lang]]  # a target may have no dev set (XTREME's QA tasks)
    return run.level.score(predict, kind, {lang: examples[lang][:limit] for lang in langs}, run, partners, predictions)


class ZeroShot(Method):
    """Zero-shot transfer: the task loss on source-language examples only."""
    name = "zero-shot"
    help = "the task loss on source-language examples only"


class TranslateTrain(Method):
    """Translate-train-all (Unicoder Sec. 3.3, multi-language fine-tuning): the task loss on the
    source and all its translations, each a labelled text."""
    name = "translate-train"
    help = 'the task loss on the source and all its translations ("translate-train-all")'
    draws = "translated"
    paper = {"lr": 1e-5, "batch_size": 32}  # Unicoder Sec. 4.2, "Fine-tuning details" (see the --help group)
    epoch = ("a pass over the source's training examples and all their translations, one concatenated set (XTREME's "
             "run_classify.py, Unicoder's run_xglue.py)")

    @staticmethod
    def add_arguments(parser):
        parser.add_argument_group("translate-train", "--preset paper: batch size 32 and learning rate 1e-5 (Unicoder Sec. 4.2, "
                                  "Fine-tuning details); not its Adam with an inverse square-root decay")


class PairMethod(Method):
    """What FILTER and X-Mixup share: every (source, translation) pair is a training example, the
    two texts padded to one length and run side by side; a teacher's soft labels of the
    translations where one is given; at test time each text is paired with its counterpart."""
    draws = "pairs"
    test_inputs = ("oracle", "translation", "text")  # "text": the plain classifier on the target alone, an ablation
    # Both papers are silent; both authors' code pairs every language's line with its English source, English's own
    # included (FILTER's run_xcls.py AlignDataset, X-Mixup's data/datasets/xnli.py): 15 x N pairs an XNLI epoch.
    self_pairs = True
    epoch = "a pass over every (source, translation) pair of every language and, with --self-pairs, each source paired with itself"
    teacher = None  # teacher.Teacher, set by start() where --teacher or --teacher-cache is given

    def batches_run_a_model(self):
        return self.teacher is not None and self.teacher.model is not None and not self.teacher.complete

    def load_teacher(self, items, build):
        """The teacher of --teacher or --teacher-cache (minxlt/run/teacher.py), or None: a saved model
        made into a predictor of pairs by `build(classifier, task.json)`, its soft labels of `items`."""
        return teacher.load(self.settings, self.run, items, build)

    def make_batch(self, items, weights, step):
        sources, targets = zip(*items)
        return self.pair_batch(sources, targets, weights)

    def pair_batch(self, sources, targets, weights):
        """source_ids, source_mask, target_ids, target_mask (B, T), both sides' labels, the
        translation's labels as the task level has them, and the teacher's logits."""
        tokenizer = self.run.tokenizer
        source_ids, source_mask, target_ids, target_mask = data.pad_pairs(tokenizer, [s.ids for s in sources], [t.ids for t in targets])
        T = source_ids.shape[1]
        batch = dict(weights=torch.tensor(weights), source_ids=source_ids, source_mask=source_mask, target_ids=target_ids,
                     target_mask=target_mask, source_labels=data.label_tensor(sources, T), target_labels=data.label_tensor(targets, T))
        self.run.level.translated(batch, targets)
        if self.teacher is not None:
            batch["teacher_logits"] = self.teacher.logits(source_ids, source_mask, target_ids, target_mask, targets)
        return batch

    def predictor(self, model, test_input):
        if test_input == "text":
            return super().predictor(model.classifier, test_input)
        return model.predict, "pair"


class TranslateTest(Method):
    """Translate-test: the model trained on the source alone (as zero-shot) classifies each test
    text's translation into the source language. The baseline that sees what FILTER's and
    X-Mixup's predictions see."""
    name = "translate-test"
    help = ("zero-shot's training; at test time the model classifies each text's translation into the source language "
            "(--test-translations), or the task's parallel source-language text (an oracle)")
    levels = ("sentence",)
    levels_note = "classifies a translation, whose sentence label is the text's (word labels and answers do not carry over)"
    test_inputs = ("oracle", "translation")

    def predictor(self, model, test_input):
        return (lambda ids, mask: model(ids, mask)[0]), "counterpart"

    @classmethod
    def load_predictor(cls, classifier, info, test_input):
        return (lambda ids, mask: classifier(ids, mask)[0]), "counterpart"
