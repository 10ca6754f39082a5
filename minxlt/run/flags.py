"""train.py's flags and a run's read-only Settings: the flag given, else the method's default (its Settings dataclass)
or the task level's (--max-length), else the flag's own; then every check, before the model loads. METHODS maps
--method to its class: a new method is a file with a subclass of methods.Method and a line here."""
import argparse
import re
import sys
import textwrap
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import torch

from contrastive import Contrastive
from fusion import FilterMethod
from levels import LEVELS
from methods import TEST_INPUTS, TranslateTest, TranslateTrain, ZeroShot, own_flags
from minxlt import tasks
from minxlt.errors import InputError
from minxlt.run import cli, compiled, teacher
from mixup import XMixupMethod
from unicoder import UnicoderMethod
from xeroalign import XeroAlign

METHODS = {
    "zero-shot": ZeroShot,
    "translate-train": TranslateTrain,
    "translate-test": TranslateTest,
    "xeroalign": XeroAlign,
    "filter": FilterMethod,
    "xmixup": XMixupMethod,
    "contrastive": Contrastive,
    "unicoder": UnicoderMethod,
}


class Settings:
    """Read-only settings, read as attributes (settings.lr); assigning one raises an error."""

    def __init__(self, values):
        for name, value in values.items():
            object.__setattr__(self, name, tuple(value) if isinstance(value, list) else value)

    def __getattr__(self, name):  # one it does not hold
        raise AttributeError(f"no setting {name!r}")

    def __setattr__(self, name, value=None):
        raise FrozenInstanceError(f"cannot assign to settings.{name}: settings are read-only once resolved")

    __delattr__ = __setattr__

    def get(self, name, default=None):
        """A setting that only some methods have (FILTER's --missing-translations), or `default`."""
        return vars(self).get(name, default)

    def as_dict(self):
        """The settings as a plain dict (results.json, checkpoints)."""
        return {name: list(value) if isinstance(value, tuple) else value for name, value in vars(self).items()}


def parse(argv=None, description="", strict=True):
    """train.py's flags, with those of the --method given; a flag not given takes the method's default, else its
    own. `strict` False leaves out the flags of other methods (a benchmark gives one command line to several)."""
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--method", default="xeroalign")
    method = first.parse_known_args(argv)[0].method
    p = parser(description, method if method in METHODS else None)
    args, unknown = p.parse_known_args(argv)
    theirs = {}
    for name, m in METHODS.items():
        for f in own_flags(m):
            theirs.setdefault(f"--{f.name.replace('_', '-')}", []).append(f"--method {name}")
    foreign = [flag.split("=", 1)[0] for flag in unknown if flag.split("=", 1)[0] in theirs]
    if strict and foreign:
        p.error(f"{foreign[0]} is a flag of {' and '.join(theirs[foreign[0]])}; --method {method} does not read it")
    if unknown and (strict or len(foreign) < len([flag for flag in unknown if flag.startswith("--")])):
        p.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.epochs and args.max_steps:
        p.error("give --max-steps or --epochs, not both")
    if args.resume and args.overwrite:
        p.error("--resume continues the run in --out and --overwrite replaces it: give one of them")
    own = {f.name: f.default for f in own_flags(METHODS.get(method))}
    for name, default in {**DEFAULTS, **own}.items():  # a flag not given: the method's default, or the flag's own
        if getattr(args, name, None) is None:
            setattr(args, name, default)
    if args.epochs:
        args.max_steps = None  # counted from the data: the method's phases
    if sharding := sharding_problem(args.shard, args.amp, args.offload, args.shard_embeddings):  # --dry-run's too
        raise InputError(sharding)
    if args.batch_size % args.grad_accum:  # a --grad-accum above --batch-size too
        p.error(f"--batch-size {args.batch_size} must be a multiple of --grad-accum {args.grad_accum} (each micro-step "
                "takes an equal share of the batch)")
    return args


def sharding_problem(shard, amp, offload, shard_embeddings):
    """What --shard's settings cannot do together (an --amp auto that is fp16 shows once resolved), or None."""
    if shard and amp == "fp16":
        return "--shard computes in bf16 or float32: give --amp bf16 (or none)"
    if offload and not shard:
        return "--offload moves a sharded run's parts to host memory: add --shard"
    if shard_embeddings and not shard:
        return "--shard-embeddings makes the embeddings a unit of a sharded model: add --shard"


def parser(description="", method=None):
    """The parser of train.py's common flags, and of `method`'s own (its Settings) where one is given."""
    first_sentence = lambda text: re.split(r"(?<=\.)\s+(?=[A-Z])", " ".join(text.split()))[0]  # on one line
    methods = "\n".join(f"  {name:<17}{first_sentence(cls.__doc__)}" for name, cls in METHODS.items())
    about = (f"{description.split(chr(10) * 2)[0]}\n\nMethods (--method NAME --help adds its own flags):\n{methods}\n\n"
             "Examples: the top of train.py; the manual: docs/training.md.")
    p = cli.ArgumentParser(description=about, formatter_class=HelpFormatter, allow_abbrev=False,
                           usage="%(prog)s [--method METHOD] [options]")
    groups, own = dict(COMMON), {f.name: f.default for f in own_flags(METHODS.get(method))}
    if method is not None:  # its Settings' fields (methods.flag); one without help sets a common flag's default
        groups[f"--method {method}"] = mine = []
        for f in [f for f in own_flags(METHODS[method]) if f.metadata]:
            values, metavar = f.metadata["values"], {int: "N", float: "X"}.get(f.type, "PATH")
            if f.type is bool:
                options = BOOL
            elif values == "append":
                options = {"action": "append"}
            elif values == "directory":
                options = {"type": cli.existing_directory, "metavar": "DIR"}
            elif isinstance(values, tuple):
                options = {"choices": values}
            elif not values:
                options = {"type": f.type, "metavar": metavar}
            else:  # an interval: "[0, 1]", "(0, inf)"
                low, high = (part.strip(" [()]") for part in values.split(","))
                options = {"type": cli.number(f.type, None if low == "-inf" else f.type(low),
                                              None if high == "inf" else f.type(high), values.startswith("("),
                                              values.endswith(")")), "metavar": metavar}
            mine.append((f"--{f.name.replace('_', '-')}", f.default, f.metadata["help"], options))
    for name, flags in groups.items():
        g = p.add_argument_group(name)
        for flag, default, help, options in flags:
            default = own.get(flag[2:].replace("-", "_"), default)  # as the method sets it
            said = "" if default is None or default is False else f" (default: {default})"
            g.add_argument(flag, default=None, help=(help + said).replace("%", "%%"), **options)  # not given: None
    return p


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """--help for a terminal of any width: a paragraph of the description filled as one text, a line
    "  term  its description" (a method) hanging under its description, an indented line as written."""
    WIDEST = 100  # prose is filled to the terminal, but no wider than this

    def _fill_text(self, text, width, indent):
        width, out, paragraph = min(width, self.WIDEST), [], []
        for line in text.splitlines() + [""]:
            if line.strip() and not line[:1].isspace():
                paragraph.append(line.strip())
                continue
            if paragraph:
                out.append(textwrap.fill(" ".join(paragraph), width, initial_indent=indent, subsequent_indent=indent,
                                         break_on_hyphens=False))
                paragraph = []
            term = re.match(r"  \S+ {2,}", line)
            out.append(textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent + " " * term.end(),
                                     break_on_hyphens=False) if term else indent + line)
        return "\n".join(out[:-1])

    def _split_lines(self, text, width):  # a flag's help: never split inside --a-flag or a hyphenated word
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


BOOL, SWITCH = {"action": "store_true"}, {"action": argparse.BooleanOptionalAction}
N, X = {"type": cli.positive_int, "metavar": "N"}, {"type": cli.non_negative_float, "metavar": "X"}


def one_of(*choices, metavar="WHAT"):
    return {"choices": list(choices), "metavar": metavar}


def typed(kind, metavar):
    return {"type": kind, "metavar": metavar}


BELOW_ONE = typed(cli.number(float, 0, 1, high_open=True), "X")  # [0, 1)


COMMON = {  # train.py's flags but the methods' own: group -> [(flag, default, help, argparse's options)]
    "what to train": [
        ("--method", "xeroalign", "a method above", {"choices": METHODS, "metavar": "NAME"}),
        ("--task", "demo", f"{', '.join(tasks.LAYOUTS)} (docs/data.md)", {"metavar": "NAME"}),
        ("--data", None, "the task's folder (download.py makes it)", {"metavar": "DIR"}),
        ("--model", None, "a checkpoint, or a hub id (default: multilingual-e5-small)", {"metavar": "DIR"}),
        ("--source-lang", None, "the labelled language (default: the task's English)", {"metavar": "LANG"}),
        ("--target-langs", None, "languages to test on, de,fr,... (default: all)", typed(cli.languages, "LANGS")),
        ("--out", "runs/default", "the run's folder", {"metavar": "DIR"}),
        ("--overwrite", False, "replace the run in --out", BOOL),
        ("--train-fraction", 1.0, "train on this share of the source, per label", typed(cli.share, "X")),
        ("--translated", None, "keep this many of its translations (Yu & Joty)", typed(cli.non_negative_int, "N")),
        ("--strict-data", False, "refuse translations that do not pair by id", BOOL),
        ("--extra-train", None, "more labelled examples (JSONL; QA: SQuAD)", {"metavar": "PATH"}),
        ("--self-pairs", None, "pair each source text with itself too", SWITCH)],
    "optimisation": [
        ("--max-steps", 50, "optimizer steps", N),
        ("--epochs", None, "passes over the training items, not --max-steps", N),
        ("--batch-size", 32, "examples a step, over every process", N),
        ("--grad-accum", 1, "micro-steps a step", N),
        ("--lr", 5e-5, "AdamW's peak learning rate", typed(cli.positive_float, "X")),
        ("--weight-decay", 0.01, "AdamW's, not on biases and norms", X),
        ("--warmup", 0.1, "warmup's share of a phase, then decay", BELOW_ONE),
        ("--max-grad-norm", 1.0, "clip the gradients' norm (0: off)", X),
        ("--clip-value", 0.0, "clip each gradient to [-X, X] (0: off)", X),
        ("--max-length", None, "tokens a text (default: 128; QA's windows 384)", typed(cli.number(int, 8), "N")),
        ("--dropout", None, "the checkpoint's dropout, replaced in this run only", BELOW_ONE),
        ("--head", "roberta", "roberta, linear, relu (FILTER's)", one_of("roberta", "linear", "relu", metavar="HEAD")),
        ("--pooling", "cls", "the sentence vector: cls, mean or pooler", one_of("cls", "mean", "pooler")),
        ("--freeze-embeddings", False, "keep the word embeddings fixed", BOOL),
        ("--group-by-length", True, "batch texts of similar length", SWITCH),
        ("--seed", 0, "batch order, dropout, the head's weights", typed(int, "N")),
        ("--doc-stride", 128, "QA: tokens from a window's start to the next's (BERT's doc_stride)", N),
        ("--max-answer-length", 30, "QA: the longest answer, in tokens", N)],
    "evaluation and checkpoints": [
        ("--eval-every", 50, "steps between evaluations, or 'epoch'", typed(cli.steps_or_epoch, "N")),
        ("--select-on", "source", "OUT/best: the best on source, all, or last (dev scored at the end alone)",
         one_of("source", "all", "last")),
        ("--dev-langs", "source", "dev languages logged: source or all", one_of("source", "all", metavar="WHICH")),
        ("--patience", None, "stop after N evaluations without a better one", N),
        ("--dev-translations", None, "select on dev texts seen with translations", {"metavar": "PATH"}),
        ("--dev-limit", None, "score the first N dev examples a language", N),
        ("--eval-batch-size", 64, "texts a batch of evaluation", N),
        ("--test-input", None, "what a prediction sees: text, translation, oracle", one_of(*TEST_INPUTS)),
        ("--test-translations", None, "the test texts' translations, {lang} in it", {"metavar": "PATH"}),
        ("--alignment-pooling", None, "CKA and retrieval compare: mean or cls", one_of("mean", "cls")),
        ("--no-alignment", False, "skip CKA and retrieval", BOOL),
        ("--no-test", False, "skip the test table", BOOL),
        ("--log-every", 10, "steps between log records", N),
        ("--save-every", 500, "steps between resume checkpoints", N),
        ("--save-dtype", "float32", "OUT/best's weights: float32 or bf16", one_of("float32", "bf16", metavar="TYPE")),
        ("--keep-checkpoint", True, "keep it once the run ends", SWITCH),
        ("--resume", False, "continue from the run's checkpoint", BOOL),
        ("--resume-changed", False, "resume though the data files changed", BOOL),
        ("--stop-at", None, "checkpoint and exit after step N", N)],
    "hardware (docs/training.md)": [
        ("--device", None, "cpu, cuda or cuda:N (default: cuda if any)", typed(cli.device, "WHERE")),
        ("--amp", "auto", "autocast: auto, none, bf16 or fp16", one_of("auto", "none", "bf16", "fp16", metavar="TYPE")),
        ("--workers", None, "batch builders (default: CUDA 2, CPU 0)", typed(cli.non_negative_int, "N")),
        ("--gradient-checkpointing", False, "less memory, the same losses", BOOL),
        ("--compile", False, "compile each step (minxlt/run/compiled.py)", SWITCH),
        ("--compile-mode", None, "torch.compile's (one CUDA process: reduce-overhead)", one_of(*compiled.MODES,
                                                                                             metavar="MODE")),
        ("--bucket", None, "lengths a multiple of N (compiled: 16)", typed(cli.non_negative_int, "N")),
        ("--shard", False, "FSDP2: each process 1/N of the model", BOOL),
        ("--offload", False, "with --shard: its part in host memory", BOOL),
        ("--shard-embeddings", False, "with --shard: the embeddings a unit", BOOL),
        ("--async-checkpoint", False, "with --shard: checkpoint in the background", BOOL),
        ("--eval-float32", False, "evaluate in float32, not under --amp", BOOL),
        ("--dry-run", False, "print each process's memory, and exit", BOOL),
        ("--processes", None, "with --dry-run: plan for N processes", N),
        ("--json", False, "with --dry-run: the plan as JSON", BOOL),
        ("--device-memory", None, "with --dry-run: a device's (default: CUDA's, else 80)", typed(cli.positive_float,
                                                                                                   "GB"))],
}
DEFAULTS = {flag[2:].replace("-", "_"): default for group in COMMON.values() for flag, default, _, _ in group}


def default_of(method, name):
    """A common flag's default for a method: its Settings' where it sets one, else the flag's own."""
    return {f.name: f.default for f in own_flags(METHODS[method])}.get(name, DEFAULTS.get(name))


def autocast(amp, device):
    """--amp auto: bf16 on GPUs that support it, fp16 (with loss scaling) on older ones, none on the CPU."""
    if amp != "auto":
        return amp
    if not device.startswith("cuda"):
        return "none"
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


def settled(args, method, level, num_layers, task=None):
    """The settings as a dict: parse()'s flags, and the defaults of the task's level (--max-length, for_task's)."""
    values = dict(vars(args))
    if level not in method.levels:
        raise InputError(f"--method {args.method} trains on {' and '.join(method.levels)} labels; --task "
                         f"{task or args.task} {LEVELS[level].description}: use a method for {level} labels")
    values["max_length"] = values["max_length"] or LEVELS[level].max_length
    if hasattr(getattr(method, "Settings", None), "for_task"):
        mine = method.Settings(**{f.name: values[f.name] for f in own_flags(method)})
        values.update({name: value for name, value in mine.for_task(level, num_layers, values).items()
                       if values.get(name) is None})
    values["alignment_pooling"] = values["alignment_pooling"] or "mean"
    return values


def planned(argv, task_name, num_layers):
    """The settings a train.py command line resolves to before any data is read (reproduce.py's plan)."""
    args = parse(argv)
    return settled(args, METHODS[args.method], tasks.LAYOUTS[task_name].level, num_layers)


def saved(info, method, level, num_layers):
    """The settings a saved model is tested with: its run's (task.json), the rest as train.py's defaults."""
    if "mixup" in info:  # X-Mixup's task.json as earlier versions wrote it
        old = info["mixup"]
        info = dict(info, mixup_layer=old["mixup_layer"], lambda0=old["lambda0"], mixup_variant=old["variant"],
                    constant_ratio=old["fixed_ratio"] is not None,
                    parameters={"ratio_net.linear.weight": [[old["ratio_weight"]]],
                                "ratio_net.linear.bias": [old["ratio_bias"]]})
    args = parse(["--method", method])
    for name, value in info.items():
        if value is not None and hasattr(args, name) and name not in ("method", "data", "task"):
            setattr(args, name, value)
    return Settings(dict(settled(args, METHODS[method], level, num_layers, info.get("task")), device="cpu")), info


def resolve(args, run):
    """(Settings, the run with the resolved --max-length): every default and check of parse()'s flags, for `run`."""
    method = METHODS[args.method]
    values = settled(args, method, run.task.level, run.num_layers, run.task.name)
    run = replace(run, max_length=values["max_length"], lockstep=values["shard"] and run.world_size > 1)
    values["device"], values["amp"] = run.device, autocast(values["amp"], run.device)
    if values["compile"] or values["bucket"]:
        run = compiled.resolve(values, run)  # --compile, its buckets: the tokenizer pads to them
    values["bucket"] = values["bucket"] or 0
    if not run.task.parallel and not values["no_alignment"]:
        values["no_alignment"] = True  # CKA and retrieval compare translations of the same sentences
        if run.rank == 0:
            print(f"note: --task {args.task}'s test languages are not parallel: no CKA or retrieval", file=sys.stderr)
    if values["test_input"] == "translation" and not values["test_translations"]:
        values["test_translations"] = run.task.test_translations  # XTREME's translate-test files, where the data has
    values["test_input"] = choose_test_input(args.method, values["test_input"], values["test_translations"],
                                             run.task.parallel)
    s, level, name = Settings(values), run.level, args.method
    if s.extra_train and not Path(s.extra_train).is_file():
        what = "not a file" if Path(s.extra_train).exists() else "no such file"
        raise InputError(f"--extra-train {s.extra_train}: {what}")
    plan_only = [f"--{flag.replace('_', '-')}" for flag in ("json", "processes", "device_memory") if values[flag]]
    pairs_span = method.draws == "pairs" and level.name == "span"
    extra = (f"--extra-train adds single labelled texts, which --method {name} (trained on pairs) uses only on answer "
             "spans, each question paired with itself (--self-pairs), as FILTER pairs SQuAD's beside TyDiQA-GoldP's"
             if pairs_span else f"--extra-train adds single labelled texts, which --method {name} (trained on "
             f"{'pairs' if method.draws == 'pairs' else 'parallel sentences'}) cannot use")
    problems = [
        (s.eval_every == "epoch" and not s.epochs, "--eval-every epoch evaluates once an epoch: give --epochs, or "
                                                   "--eval-every in steps"),
        (any("{lang}" not in str(values.get(f) or "{lang}") for f in ("round_trip", "soft_labels")),
         ("--round-trip and --soft-labels name a file a language: give a path with {lang} (one file would be read "
          "as every language's)")),
        (name == "contrastive" and values.get("sa_steps") != 0 and (s.patience or s.eval_every == "epoch"),
         ("--method contrastive trains in two phases of their own epochs, label then semantic alignment (Sec. 3.2): "
          "--patience would end the run before the second, and an epoch is no evaluation point across both; give "
          "--eval-every in steps without --patience, or --sa-steps 0 (label alignment alone)")),
        (sharding := sharding_problem(s.shard, s.amp, s.offload, s.shard_embeddings), sharding),
        (s.shard_embeddings and method is UnicoderMethod, "--shard-embeddings: Unicoder's LM head reads the word "
                                                          "embeddings outside their forward; drop --shard-embeddings"),
        (s.dev_translations and "translation" not in method.test_inputs, f"--dev-translations pairs each dev text with "
         f"its translation, and --method {name} predicts from the text alone: drop it (filter, xmixup and "
         "translate-test read translations)"),
        (s.patience and s.select_on == "last", f"--patience {s.patience} stops when the dev score stops improving, and "
                                               "--select-on last keeps the last model whatever it scores: choose one"),
        (s.async_checkpoint and not s.shard, "--async-checkpoint writes a sharded run's checkpoint: add --shard"),
        (s.self_pairs is not None and method.draws != "pairs", f"--self-pairs pairs the source's texts with "
                                                               f"themselves; --method {name} trains on no pairs"),
        (s.extra_train and not (level.labels_texts or level.name == "span"), f"--extra-train adds labelled sentences, "
         f"or a QA task's questions; --task {s.task} {level.description}"),
        (s.extra_train and method.draws not in ("texts", "translated") and not (pairs_span and s.self_pairs), extra),
        (plan_only, f"{' and '.join(plan_only)} {'shapes' if len(plan_only) == 1 else 'shape'} the memory plan, which "
                    "only --dry-run prints: add --dry-run"),
    ]
    for wrong, message in problems:
        if wrong:
            raise InputError(message)
    check_max_length(s.max_length, run.max_positions)
    if s.compile_mode and compiled.problem(s):  # --compile's settings, where given (compiled.resolve sets the mode)
        raise InputError(compiled.problem(s))
    if s.async_checkpoint and not staging_available():
        raise InputError(f"--async-checkpoint needs torch 2.9 or later (its checkpoint staging), and this is torch "
                         f"{torch.__version__}: upgrade torch, or leave --async-checkpoint out")
    if values.get("teacher") or values.get("teacher_cache") or values.get("soft_labels"):  # a method's own
        teacher.check(s, "filter" if method is FilterMethod else "labeller", run.task)
    return s, run


def check_max_length(max_length, positions):
    """Refuse a --max-length beyond the model's positions (train.py's, evaluate.py's)."""
    if max_length > positions:
        raise InputError(f"--max-length {max_length} does not fit the model's {positions} positions: lower it")


def staging_available():
    """Whether this torch has the checkpoint staging --async-checkpoint uses (shard.agreed_staging)."""
    try:
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions  # noqa: F401
    except ImportError:
        return False
    return True


def choose_test_input(name, given=None, translations=None, parallel=True):
    """The test input: the one given (--test-input), else a translation where there are translations
    (--test-translations), else the method's first that the task has (the oracle needs a parallel test set)."""
    method = METHODS[name]
    offered = [i for i in method.test_inputs if parallel or i != "oracle"] or list(method.test_inputs)
    test_input = given or ("translation" if translations and "translation" in method.test_inputs else offered[0])
    if test_input == "oracle" and not parallel:
        others = " or ".join(i for i in method.test_inputs if i != "oracle")
        raise InputError("the task's test languages are not parallel, so there is no source-language original to see "
                         f"(the oracle): choose --test-input {others}"
                         + (" (translation with --test-translations)" if "translation" in method.test_inputs else ""))
    if test_input not in method.test_inputs:
        raise InputError(f"--method {name} predicts from {' or '.join(TEST_INPUTS[i] for i in method.test_inputs)}, "
                         f"not from {TEST_INPUTS[test_input]}")
    if test_input == "translation" and not translations:
        raise InputError("--test-input translation needs --test-translations: the test texts' translations into the "
                         "source language")
    if translations and test_input != "translation":
        raise InputError(f"--test-translations: --method {name} tested on {TEST_INPUTS[test_input]} reads no "
                         "translations")
    return test_input
