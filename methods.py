"""The interface every training method implements, and its two smallest examples: zero-shot and
translate-train. registry.py maps `--method` names to methods; train.py's loop, evaluate.py and
the benchmarks call only what is defined here.

A method says
  - which training items it draws from a task: single labelled texts, (source, translation)
    pairs, or pre-training pairs (`draws`, `training_items`);
  - how it builds and wraps the model (`build`, `wrap`: FILTER and X-Mixup run the classifier on
    pairs, X-Mixup adds its ratio's W and b);
  - how a batch is made and what its loss is, with named components for the log (`make_batch`,
    `loss`), in one or more phases (`phases`: Yu & Joty have two);
  - how it predicts at test time and which input that needs (`predictor`, `load_predictor`:
    the text alone, or "pair": with its source-language counterpart), and what selects the best
    model (`metric`, `evaluate`);
  - its papers' settings per task level (`defaults`), and its own flags (`add_arguments`).

What differs between task levels (sentence labels, word labels, answer spans) a method asks of
`self.run.level` (levels.py), so that its loss is written once for all three.
"""
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

import data
import token_cache
from levels import LEVELS
from model import Classifier
from tasks import InputError, read_translations


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
    cache: dict = field(default_factory=dict, repr=False)  # {lang: the token cache's EncodedTexts of its training examples}

    @property
    def level(self):
        return LEVELS[self.task.level]

    def encode(self, examples):
        """Encoded items of examples, as the task level encodes them."""
        return self.level.encode(examples, self.tokenizer, self.task, self.max_length)

    def training_texts(self, langs, extra=()):
        """The training examples of `langs`, in order, then `extra` (--extra-train), encoded: from the
        token cache (token_cache.py) where the task level's items fit it, else in memory."""
        if not self.level.caches_tokens:
            return self.encode([e for lang in langs for e in self.task.train[lang]] + list(extra))
        parts = list(self.cached_texts(langs).values())
        if extra:
            parts.append(token_cache.encode(list(extra), self.tokenizer, self.task.labels, self.max_length, self.rank))
        return token_cache.join(parts)

    def cached_texts(self, langs):
        """{lang: the token cache's EncodedTexts of its training examples}, read once per run."""
        wanted = [lang for lang in langs if lang not in self.cache]
        if wanted:
            self.cache.update(token_cache.training_texts(self.task.train, wanted, self.tokenizer, self.task.labels, self.max_length,
                                                         self.rank, self.world_size))
        return {lang: self.cache[lang] for lang in langs}


@dataclass
class Phase:
    """A stretch of training with its own items, batches, loss and peak learning rate."""
    name: str
    items: list             # what the batches are drawn from
    steps: int
    make_batch: Callable    # (items, weights, step) -> {name: tensor}; weight 0 marks DDP padding
    loss: Callable          # (model, batch) -> (loss, {component: value}), means over the examples that count
    lr_scale: float = 1.0   # its peak learning rate relative to --lr


def first(item):
    """The source of a (source, translation) pair, or the item itself."""
    return item[0] if isinstance(item, tuple) else item


class Method:
    """The interface; as it stands, a method that trains the task on the source's texts alone."""
    name = None              # its --method
    help = ""                # one line for --help
    draws = "texts"          # "texts": labelled texts; "pairs": (source, translation); "parallel": pre-training pairs
    translations = False     # for "texts": the source's translations too (translate-train)
    levels = ("sentence", "word", "span")  # the task levels it trains on
    levels_note = "trains on whole texts"   # why it trains on no other levels, for the message that refuses them
    unused_parameters = False  # whether a step may leave trainable parameters without gradient (DDP must know)
    test_inputs = ("text",)  # what its test predictions can see besides the target text (TEST_INPUTS), the default first
    groups_by_length = True  # whether batches group texts of similar length by default (not where a loss compares a batch's texts)
    paper = {}               # --preset paper: the settings its paper states (paper_preset)

    def __init__(self, args, run):
        """Keeps the flags and the run. With --preset paper, the paper's settings replace those of
        the flags not given; --epochs becomes --max-steps; then the method's defaults fill in the
        flags left unset."""
        self.args, self.run = args, run
        given = getattr(args, "given", set())
        if getattr(args, "preset", "minxlt") == "paper":
            for name, value in self.paper_preset(run.task.level).items():
                if name not in given:
                    setattr(args, name, value)
            if args.batch_size % args.grad_accum:
                raise InputError(f"the paper's batch of {args.batch_size} is not a multiple of --grad-accum {args.grad_accum}")
        if getattr(args, "epochs", None):
            if "max_steps" in given:
                raise InputError("give --max-steps or --epochs, not both (--preset paper sets --epochs where the paper gives them)")
            args.max_steps = math.ceil(self.train_sizes([run.task.source])[run.task.source] / args.batch_size) * args.epochs
        for name, value in self.defaults(run.task.level, run.num_layers).items():
            if getattr(args, name) is None:
                setattr(args, name, value)

    @staticmethod
    def add_arguments(parser):
        """The method's own flags, as an argument group of train.py's parser."""

    def defaults(self, level, num_layers):
        """{flag: value}: the papers' settings for a task level, used where a flag is not given."""
        return {}

    def paper_preset(self, level):
        """{flag: value}: what the method's paper states of its head, learning rate, batch size and
        epochs for a task level (--preset paper); what it does not state keeps this script's default."""
        return dict(self.paper)

    def check(self, extra):
        """Refuse, before the model loads, what the method cannot do with this task and these flags
        (`extra`: the --extra-train examples)."""
        args, task = self.args, self.run.task
        if task.level not in self.levels:
            raise InputError(f"--method {self.name} {self.levels_note}; --task {args.task} {self.run.level.description}: "
                             f"use a method for {task.level} labels")
        if args.parallel and self.draws != "parallel":
            raise InputError("--parallel adds pre-training text for --method unicoder; fine-tuning methods learn from the task's data")
        if extra and not self.run.level.labels_texts:
            raise InputError(f"--extra-train adds labelled sentences; --task {args.task} {self.run.level.description}")
        if extra and self.draws != "texts":
            raise InputError(f"--extra-train adds single labelled texts, which --method {self.name} (trained on pairs) cannot use")
        sizes = self.train_sizes(task.targets) if self.uses_translations() else {}
        missing = [lang for lang, size in sizes.items() if not size]
        if missing:
            raise InputError(f"--method {self.name} trains on translations of the source's training examples, and --task {args.task} "
                             f"has none in {', '.join(missing)} (they come from: {task.translations}); leave those languages out "
                             "of --target-langs, or use --method zero-shot")
        if args.test_input == "translation" and not args.test_translations:
            args.test_translations = task.test_translations  # XTREME's translate-test files, where the data folder has them
        args.test_input = self.choose_test_input(args.test_input, args.test_translations, task.parallel)
        if (args.teacher or args.teacher_cache) and not self.uses_teacher():
            raise InputError("--teacher and --teacher-cache are for --method filter (self-teaching) and for --method xmixup "
                             "on word labels (soft labels of the translations)")
        if args.teacher_cache and not Path(args.teacher_cache).exists() and not args.teacher:
            raise InputError(f"--teacher-cache {args.teacher_cache} does not exist yet: give --teacher CKPT to compute it")

    def train_sizes(self, langs):
        """{lang: how many training examples it has}: from the token cache where the method trains on
        it (texts and pairs, where the task level's items fit it), else from the examples."""
        if self.draws in ("texts", "pairs") and self.run.level.caches_tokens:
            return {lang: len(texts) for lang, texts in self.run.cached_texts(langs).items()}
        return {lang: len(self.run.task.train[lang]) for lang in langs}

    def uses_translations(self):
        """Whether training needs the translations of the source's training examples."""
        return self.translations or self.draws != "texts"

    def uses_teacher(self):
        """Whether --teacher (a trained model's soft labels) applies."""
        return False

    def batches_run_a_model(self):
        """Whether making a batch runs a model (a teacher's forward pass): then the batches are
        made in the training process, where the model's device is (train.loader_workers)."""
        return False

    def training_items(self, extra=()):
        """The encoded training items: the source's texts (and `extra` labelled texts), with their
        translations for translate-train; for pair methods, every (source, translation) pair."""
        run, task = self.run, self.run.task
        if self.draws == "pairs":
            return run.level.pair(run.training_texts([task.source], extra), run.training_texts(task.targets))
        return run.training_texts([task.source, *task.targets] if self.translations else [task.source], extra)

    def phases(self, items):
        """The training phases, in order; most methods have one, over --max-steps."""
        return [Phase(self.name, items, self.args.max_steps, self.make_batch, self.loss)]

    def length(self, item):
        """An item's tokens, for grouping batches by length (a pair: its longer side)."""
        return max(len(x.ids) for x in (item if isinstance(item, tuple) else [item]))

    def lengths(self, items):
        """Every item's length: from the token cache's arrays where it holds the items."""
        return items.lengths() if hasattr(items, "lengths") else [self.length(it) for it in items]

    def units(self, item):
        """What the loss averages over in one item (examples; scored tokens of the source for word labels)."""
        return self.run.level.units(first(item))

    def build(self, encoder):
        """The model whose weights OUT/best holds: the encoder with the task level's head. Parts that
        no step trains are frozen, since DDP waits for a gradient of every trainable parameter."""
        args, task = self.args, self.run.task
        model = Classifier(encoder, len(task.labels), self.run.level.head(task, args.head), args.pooling, len(task.intents or ()))
        for unused in (encoder.pooler, encoder.lm_head):
            if unused is not None:
                unused.requires_grad_(False)
        return model

    def wrap(self, model, items):
        """The module the loop trains and checkpoints, around the built model; `items` are the
        training items (a teacher labels them, Unicoder mines negatives among them)."""
        return model

    def make_batch(self, items, weights, step):
        """The tensors of one micro-batch (on the CPU), by name."""
        batch = {"weights": torch.tensor(weights)}
        batch["input_ids"], batch["attention_mask"], batch["labels"] = data.collate(items, self.run.tokenizer)
        return batch

    def loss(self, model, batch):
        """The loss of a batch, averaged over the examples that count, and its parts for the log.
        A loss over the whole global batch, which every process computes alike (Yu & Joty's label
        alignment), comes as a third element: the loop neither weights nor scales it."""
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

    @classmethod
    def load_predictor(cls, classifier, info, test_input):
        """(predict, kind) of a saved model (OUT/best): its Classifier and task.json."""
        return (lambda ids, mask: classifier(ids, mask)[0]), "text"

    @classmethod
    def choose_test_input(cls, given=None, translations=None, parallel=True):
        """The test input: the one given (--test-input), else a translation where there are
        translations (--test-translations), else the method's first that the task has (the oracle
        needs a test set parallel across languages)."""
        offered = [i for i in cls.test_inputs if parallel or i != "oracle"] or list(cls.test_inputs)
        test_input = given or ("translation" if translations and "translation" in cls.test_inputs else offered[0])
        if test_input == "oracle" and not parallel:
            raise InputError("the task's test languages are not parallel, so there is no source-language original to see (the "
                             f"oracle): choose --test-input {' or '.join(i for i in cls.test_inputs if i != 'oracle')}"
                             + (" (translation with --test-translations)" if "translation" in cls.test_inputs else ""))
        if test_input not in cls.test_inputs:
            raise InputError(f"--method {cls.name} predicts from {' or '.join(TEST_INPUTS[i] for i in cls.test_inputs)}, "
                             f"not from {TEST_INPUTS[test_input]}")
        if test_input == "translation" and not translations:
            raise InputError("--test-input translation needs --test-translations: the test texts' translations into the source language")
        if translations and test_input != "translation":
            raise InputError(f"--test-translations: --method {cls.name} tested on {TEST_INPUTS[test_input]} reads no translations")
        return test_input

    def saved_info(self, model):
        """What task.json needs beyond the task to rebuild the predictor (load_predictor)."""
        return {}

    def evaluate(self, model, split, langs):
        """{lang: scores} of the trained module on a split ("dev" or "test") of the task, a text
        seen with the task's own source-language text of the same id where the method needs a
        counterpart (model selection is on the source, whose counterpart is itself)."""
        model.eval()
        test_input = "oracle" if "oracle" in self.test_inputs else "text"
        if test_input == "oracle" and not self.run.task.parallel:  # no counterpart but the source's own
            langs = [self.run.task.source]
        return score_split(self.run, *self.predictor(model, test_input), split, langs, counterparts(self.run, split, test_input))

    def test(self, best, model, trained, test_input="text", translations=None, predictions=None):
        """({lang: test scores}, encoder) of the best model on dev, saved in `best` (OUT/best), or,
        where none was saved, of the model as trained (`model` built, `trained` wrapped); the
        encoder is for CKA and retrieval. `predictions` receives the predictions (Level.score)."""
        partners = counterparts(self.run, "test", test_input, translations)
        if not Path(best).exists():
            trained.eval()
            predictor, encoder = self.predictor(trained, test_input), model.encoder
        else:
            classifier, _, info = Classifier.load(best)
            classifier.to(self.run.device).eval()
            predictor, encoder = type(self).load_predictor(classifier, info, test_input), classifier.encoder
        return score_split(self.run, *predictor, "test", None, partners, predictions), encoder


# What a test prediction sees besides the target text (Method.test_inputs).
TEST_INPUTS = {
    "text": "the target text alone",
    "translation": "the target's machine translation into the source language (--test-translations)",
    "oracle": "the task's parallel source-language text, the human original (an oracle: an upper bound)",
}


def counterparts(run, split, test_input, translations=None):
    """{lang: [Example]}: what a prediction sees besides each text of a split, by example id: the
    task's source-language texts (the oracle), or translations read from --test-translations (the
    source language is its own). None for the text alone."""
    if test_input == "text":
        return None
    examples = getattr(run.task, split)
    if test_input == "oracle":
        return {lang: examples[run.task.source] for lang in examples}
    return {lang: texts if lang == run.task.source else read_translations(translations, lang, run.task.source, texts)
            for lang, texts in examples.items()}


def score_split(run, predict, kind, split, langs=None, partners=None, predictions=None):
    """{lang: scores} of a predictor (Method.predictor) on a split of the task ("dev" or "test";
    `langs`: all of its languages unless given), with the counterparts it sees (counterparts())."""
    examples = getattr(run.task, split)
    langs = [lang for lang in langs or examples if examples[lang]]  # a target may have no dev set (XTREME's QA tasks)
    return run.level.score(predict, kind, {lang: examples[lang] for lang in langs}, run, partners, predictions)


class ZeroShot(Method):
    """Zero-shot transfer: the task loss on source-language examples only."""
    name = "zero-shot"
    help = "the task loss on source-language examples only"


class TranslateTrain(Method):
    """Translate-train-all (Unicoder's multi-language fine-tuning): the task loss on the source and
    all its translations, each a labelled text."""
    name = "translate-train"
    help = 'the task loss on the source and all its translations ("translate-train-all")'
    translations = True
    paper = {"lr": 1e-5, "batch_size": 32}  # Unicoder Sec. 4.1, fine-tuning details


class PairMethod(Method):
    """What FILTER and X-Mixup share: every (source, translation) pair is a training example, the
    two texts padded to one length and run side by side; a teacher's soft labels of the
    translations where one is given; at test time each text is paired with its counterpart."""
    draws = "pairs"
    test_inputs = ("oracle", "translation", "text")  # "text": the plain classifier on the target alone, an ablation
    teacher = None  # fusion.Teacher, set by wrap()

    def batches_run_a_model(self):
        return self.teacher is not None and self.teacher.model is not None and not self.teacher.complete

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
            batch["teacher_logits"] = self.teacher.logits(source_ids, source_mask, target_ids, target_mask, [(t.id, t.lang) for t in targets])
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
