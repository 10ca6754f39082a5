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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

import data
from levels import LEVELS
from model import Classifier
from tasks import InputError


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

    @property
    def level(self):
        return LEVELS[self.task.level]

    def encode(self, examples):
        return self.level.encode(examples, self.tokenizer, self.task, self.max_length)


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

    def __init__(self, args, run):
        """Keeps the flags and the run; fills in the method's defaults for the flags left unset."""
        self.args, self.run = args, run
        for name, value in self.defaults(run.task.level, run.num_layers).items():
            if getattr(args, name) is None:
                setattr(args, name, value)

    @staticmethod
    def add_arguments(parser):
        """The method's own flags, as an argument group of train.py's parser."""

    def defaults(self, level, num_layers):
        """{flag: value}: the papers' settings for a task level, used where a flag is not given."""
        return {}

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
        if (args.teacher or args.teacher_cache) and not self.uses_teacher():
            raise InputError("--teacher and --teacher-cache are for --method filter (self-teaching) and for --method xmixup "
                             "on word labels (soft labels of the translations)")
        if args.teacher_cache and not Path(args.teacher_cache).exists() and not args.teacher:
            raise InputError(f"--teacher-cache {args.teacher_cache} does not exist yet: give --teacher CKPT to compute it")

    def uses_teacher(self):
        """Whether --teacher (a trained model's soft labels) applies."""
        return False

    def training_items(self, extra=()):
        """The encoded training items: the source's texts (and `extra` labelled texts), with their
        translations for translate-train; for pair methods, every (source, translation) pair."""
        task, encode = self.run.task, self.run.encode
        if self.draws == "pairs":
            sources = encode(task.train[task.source] + list(extra))
            return self.run.level.pair(sources, encode([e for lang in task.targets for e in task.train[lang]]))
        langs = [task.source, *task.targets] if self.translations else [task.source]
        return encode([e for lang in langs for e in task.train[lang]] + list(extra))

    def phases(self, items):
        """The training phases, in order; most methods have one, over --max-steps."""
        return [Phase(self.name, items, self.args.max_steps, self.make_batch, self.loss)]

    def length(self, item):
        """An item's tokens, for grouping batches by length (a pair: its longer side)."""
        return max(len(x.ids) for x in (item if isinstance(item, tuple) else [item]))

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
        """The loss of a batch, averaged over the examples that count, and its parts for the log."""
        logits, _ = model(batch["input_ids"], batch["attention_mask"])  # (N, C) or (N, T, C)
        return self.run.level.loss(logits, batch["labels"], batch["weights"], batch["attention_mask"]), {}

    def metric(self):
        """The dev score that selects the best model."""
        return self.run.level.metric(self.run.task)

    def predictor(self, model):
        """(predict, test_input) of the trained module: levels.predict_batch's function of (ids,
        mask), or of (source ids, source mask, target ids, target mask) where test_input is "pair"."""
        return (lambda ids, mask: model(ids, mask)[0]), "text"

    @classmethod
    def load_predictor(cls, classifier, info):
        """(predict, test_input) of a saved model (OUT/best): its Classifier and task.json."""
        return (lambda ids, mask: classifier(ids, mask)[0]), "text"

    def saved_info(self, model):
        """What task.json needs beyond the task to rebuild the predictor (load_predictor)."""
        return {}

    def evaluate(self, model, split, langs):
        """{lang: scores} of the trained module on a split ("dev" or "test") of the task."""
        model.eval()
        return score_split(self.run, *self.predictor(model), split, langs)

    def test(self, best, model, trained):
        """({lang: test scores}, encoder) of the best model on dev, saved in `best` (OUT/best), or,
        where none was saved, of the model as trained (`model` built, `trained` wrapped); the
        encoder is for CKA and retrieval."""
        if not Path(best).exists():
            return self.evaluate(trained, "test", list(self.run.task.test)), model.encoder
        classifier, _, info = Classifier.load(best)
        classifier.to(self.run.device).eval()
        return score_split(self.run, *type(self).load_predictor(classifier, info), "test"), classifier.encoder


def score_split(run, predict, test_input, split, langs=None):
    """{lang: scores} of a predictor on a split of the task ("dev" or "test"; `langs`: all of its
    languages unless given). A "pair" predictor sees each text with the task's source-language
    text of the same id."""
    examples = getattr(run.task, split)
    partners = examples[run.task.source] if test_input == "pair" else None
    return run.level.score(predict, {lang: examples[lang] for lang in langs or examples}, run, partners)


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


class PairMethod(Method):
    """What FILTER and X-Mixup share: every (source, translation) pair is a training example, the
    two texts padded to one length and run side by side; a teacher's soft labels of the
    translations where one is given; at test time each text is paired with its counterpart."""
    draws = "pairs"
    teacher = None  # fusion.Teacher, set by wrap()

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

    def predictor(self, model):
        return model.predict, "pair"
