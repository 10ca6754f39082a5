"""train.py's flags, and a run's settings: the flags and everything that follows from them,
resolved once, before the run starts, and read-only from then on (Settings). results.json and
the checkpoint record them as resolved.

Each setting is the first of:
  1. the flag, where the command line gives it;
  2. with --preset paper, what the method's paper states (Method.paper, Method.paper_preset);
  3. for a flag whose own default is unset (None), the method's default for the task level, the
     papers' per-task values (Method.defaults), after --epochs has become --max-steps;
  4. the flag's own default (train.py --help), or, left unset there, the task level's (--max-length)
     or the method's (--group-by-length, the test input); --device and --amp auto as the device has them.
Then every check runs: the flags against the task and the model here, and the method's own flags
in its Method.check.
"""
import argparse
import functools
import re
import sys
import textwrap
from dataclasses import FrozenInstanceError, replace
from pathlib import Path
from types import MappingProxyType

import torch

from contrastive import Contrastive
from fusion import FilterMethod
from levels import LEVELS
from methods import TEST_INPUTS, TranslateTest, TranslateTrain, ZeroShot
from minxlt import tasks
from minxlt.errors import InputError
from minxlt.run import cli, compiled, teacher
from mixup import XMixupMethod
from unicoder import UnicoderMethod
from xeroalign import XeroAlign

# --method -> its class (methods.Method). A new method is a file with a subclass of methods.Method
# (methods.TranslateTrain is the smallest) and a line here. Yu & Joty's co-training is not a method
# of one run but a driver of several: cotrain.py.
METHODS = {method.name: method for method in (
    ZeroShot,
    TranslateTrain,
    TranslateTest,
    XeroAlign,
    FilterMethod,
    XMixupMethod,
    Contrastive,
    UnicoderMethod,
)}


class Settings:
    """Read-only settings, read as attributes (settings.lr). Assigning one raises an error: what a
    run does follows from the command line and this module alone."""
    __slots__ = ("_values",)

    def __init__(self, values):
        frozen = {name: tuple(value) if isinstance(value, list) else value for name, value in values.items()}
        object.__setattr__(self, "_values", MappingProxyType(frozen))

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no setting {name!r}") from None

    def __setattr__(self, name, value=None):
        raise FrozenInstanceError(f"cannot assign to settings.{name}: settings are read-only once resolved (flags.resolve)")

    __delattr__ = __setattr__

    def __reduce__(self):  # loader processes that spawn receive the settings pickled
        return Settings, (dict(self._values),)

    def as_dict(self):
        """The settings as a plain dict (results.json, checkpoints)."""
        return {name: list(value) if isinstance(value, tuple) else value for name, value in self._values.items()}


def parse(argv=None, description=""):
    """train.py's flags as given, with `given`: the flags the command line names."""
    p = parser(description)
    args = p.parse_args(argv)
    args.given = sorted(given_flags(p, sys.argv[1:] if argv is None else argv))
    if args.epochs and "max_steps" in args.given:
        p.error("give --max-steps or --epochs, not both")
    if args.grad_accum > args.batch_size or args.batch_size % args.grad_accum:
        p.error(f"--batch-size {args.batch_size} must be a multiple of --grad-accum {args.grad_accum} (each micro-step takes "
                "an equal share of the batch)")
    if args.resume and args.overwrite:
        p.error("--resume continues the run in --out and --overwrite replaces it: give one of them")
    return args


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """--help for a terminal of any width: a paragraph of the description filled as one text, a line
    "  term  its description" (a method) hanging under its description, an indented line (a
    usage example) as written; and after each flag's help, its default where it has one that its
    help does not give."""
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

    def _get_help_string(self, action):
        help, default = action.help or "", action.default
        unset = default is None or default is False or default is argparse.SUPPRESS
        if not action.option_strings or unset or re.search(r"\(default|default:", help):
            return help
        shown = re.sub(r"e([+-])0(\d)", r"e\1\2", f"{default:g}") if isinstance(default, float) else str(default)
        return f"{help} (default: {shown.replace('%', '%%')})"


def parser(description=""):
    methods = "\n".join(f"  {name:<17}{method.help}; one epoch: {method.epoch}" for name, method in METHODS.items())  # filled by HelpFormatter
    p = cli.ArgumentParser(description=f"{description}\nMethods:\n{methods}", formatter_class=HelpFormatter,
                                allow_abbrev=False)  # a flag is named in full, so that presets know which flags were given
    g = p.add_argument_group("what to train")
    g.add_argument("--method", default="xeroalign", choices=list(METHODS), metavar="METHOD", help="one of the methods above "
                   "(default: xeroalign); co-training: cotrain.py")
    g.add_argument("--task", default="demo", help="demo (the bundled corpus's intents), demo-slots (its BIO slots), sib200, xnli, pawsx, udpos (UPOS tagging on UD PUD), xsid (intent + BIO slots, "
                   "trained on English valid), xquad (extractive QA, split by article), xquad-squad (all of XQuAD tested, trained on "
                   "SQuAD v1.1 in squad/ beside it, as XTREME tests it), or mlqa, tydiqa, panx, mtop, multiatis, mtod, marc, "
                   "marc-stars (docs/data.md)")
    g.add_argument("--data", help="data directory of the task, e.g. ../shared/data/sib200 (not needed for demo)")
    g.add_argument("--model", help="the checkpoint to start from: a folder, or a Hugging Face hub id (org/name) from the local cache "
                                   "or downloaded (default: the bundled multilingual-e5-small)")
    g.add_argument("--source-lang", help="language with training labels (default: the task's English)")
    g.add_argument("--target-langs", type=cli.languages, help="comma-separated languages to transfer to (default: all of the task's)")
    g.add_argument("--out", default="runs/default", help="output directory: checkpoint, best model, log, results (a folder that holds "
                                                       "a run needs --resume or --overwrite)")
    g.add_argument("--overwrite", action="store_true", help="replace the run in --out, if there is one")
    g.add_argument("--train-fraction", type=cli.share, default=1.0,
                   help="train on this share of the source's training examples, drawn per label (Yu & Joty's 1.2%%: 0.012)")
    g.add_argument("--translated", type=cli.non_negative_int, help="keep the translations of only this many of them (Yu & Joty's few-shot: 200)")
    g.add_argument("--strict-data", action="store_true", help="refuse a translation file that does not pair fully with the "
                   "source's training examples by id (default: say so once per file; refuse where most of it does not pair)")
    g.add_argument("--extra-train", metavar="PATH", help="JSONL file of further labelled examples (id, lang, text, label), trained on with the "
                                         "source's: co-training's pseudo-labels, or your own; for a QA task, a SQuAD v1.1 file "
                                         "of further source-language questions (FILTER's TyDiQA-GoldP runs add SQuAD's), which "
                                         "pair methods pair with themselves (--self-pairs)")
    g.add_argument("--self-pairs", action=argparse.BooleanOptionalAction, help="pair methods: also pair each source text with itself "
                   "(default: on for filter and xmixup, as both authors' code does, off for xeroalign)")
    add_optimisation_arguments(p)
    add_run_arguments(p)
    teacher.add_arguments(p)
    for method in METHODS.values():
        method.add_arguments(p)
    return p


def add_optimisation_arguments(p):
    g = p.add_argument_group("optimisation")
    g.add_argument("--max-steps", type=cli.positive_int, default=50, help="optimizer steps")
    g.add_argument("--epochs", type=cli.positive_int, help="instead of --max-steps: passes over the method's training items, "
                   "ceil(items / --batch-size) steps each, the items counted as the method's paper or its authors' code counts them "
                   "(each method's 'one epoch' above)")
    g.add_argument("--preset", default="minxlt", choices=["minxlt", "paper"], help="paper: the settings the method's paper states "
                   "(head, learning rate, batch size, epochs; see its --help group) for the flags not given; minxlt: this "
                   "script's defaults")
    g.add_argument("--batch-size", type=cli.positive_int, default=32, help="examples per optimizer step, over all processes and micro-steps")
    g.add_argument("--grad-accum", type=cli.positive_int, default=1, help="micro-steps per optimizer step (memory: each holds batch-size / grad-accum / processes)")
    g.add_argument("--lr", type=cli.positive_float, default=5e-5, help="peak learning rate of AdamW")
    g.add_argument("--weight-decay", type=cli.non_negative_float, default=0.01, help="AdamW weight decay (not on biases and LayerNorms)")
    g.add_argument("--warmup", type=cli.number(float, 0, 1, high_open=True), default=0.1, help="fraction of steps of linear warmup, then linear decay to 0")
    g.add_argument("--max-grad-norm", type=cli.non_negative_float, default=1.0, help="gradient clipping: the global norm of "
                   "the gradients at most this (0: off)")
    g.add_argument("--clip-value", type=cli.non_negative_float, default=0.0, help="clip each gradient element to [-V, V] "
                   "(X-Mixup's trainer.py clips so, with --max-grad-norm's value 1; 0: off), before --max-grad-norm")
    g.add_argument("--max-length", type=cli.number(int, 8), help="tokens per text (pairs: in total), longest-first truncation; for QA, per window "
                                                  "(default: 128, QA 384)")
    g.add_argument("--dropout", type=cli.number(float, 0, 1, high_open=True), help="override the checkpoint's dropout (0 makes runs comparable across process counts)")
    g.add_argument("--head", default="roberta", choices=["roberta", "linear", "relu"], help="sentence classifier: "
                   "dense-tanh-projection (RoBERTa's), one linear layer, or dense-ReLU-projection (FILTER's code)")
    g.add_argument("--pooling", default="cls", choices=["cls", "mean", "pooler"], help="sentence vector: <s>, the mean of the "
                   "tokens (sentence-embedding models), or <s> through the checkpoint's pooler, dense + tanh (BERT's pooled "
                   "output: LaBSE's sentence embedding; the pooled output XeroAlign's code classifies and aligns)")
    g.add_argument("--freeze-embeddings", action="store_true", help="keep the word embeddings fixed (faster: no update of the 250k x H matrix)")
    g.add_argument("--group-by-length", action=argparse.BooleanOptionalAction, help="batch texts of similar length together "
                   "(less padding; default: on, except where the method's loss compares the texts of a batch with each other: "
                   "contrastive, unicoder)")
    g.add_argument("--seed", type=int, default=0, help="the random seed: the batches' order, dropout, the new head's weights")
    g = p.add_argument_group("question answering")
    g.add_argument("--doc-stride", type=cli.non_negative_int, default=128, help="context tokens shared by consecutive windows of a long context")
    g.add_argument("--max-answer-length", type=cli.positive_int, default=30, help="the longest answer predicted, in tokens")


def add_run_arguments(p):
    """The flags of evaluation, checkpoints, test inputs and hardware."""
    g = p.add_argument_group("evaluation and checkpoints")
    g.add_argument("--eval-every", type=cli.steps_or_epoch, default=50, help="steps between evaluations on the dev set, or 'epoch' "
                   "with --epochs: an epoch's steps (the best model goes to OUT/best; see --select-on)")
    g.add_argument("--save-every", type=cli.positive_int, default=500, help="steps between writes of OUT/checkpoint.pt, the "
                   "resume checkpoint with the optimizer (one is kept; a stopped run writes one too; default: 500)")
    g.add_argument("--log-every", type=cli.positive_int, default=10, help="steps between log records (their mean loss); the "
                   "losses stay on the device in between (default: 10)")
    g.add_argument("--dev-langs", default="source", choices=["source", "all"], help="dev languages to log (--select-on all logs them all)")
    g.add_argument("--select-on", default="source", choices=["source", "all", "last"], help="which model is OUT/best, tested at the "
                   "end: the best on the source's dev set (source; XTREME's), the best on the mean of every language's dev score "
                   "(all; X-Mixup's, Unicoder's code), or the model after the last step (last; FILTER's and XeroAlign's code)")
    g.add_argument("--patience", type=cli.positive_int, help="stop early after this many evaluations on dev without a better "
                   "--select-on score (the best model is then tested); default: train for every step")
    g.add_argument("--dev-translations", metavar="PATH", help="pair methods (filter, xmixup): select the best model on dev texts "
                   "each paired with its machine translation into the source language, as the test pairs them, rather than "
                   "with the task's source-language original: a path with {lang}, or one file of every language where the "
                   "task's layout has one (X-Mixup's translate-dev: XNLI's translate-dev/xnli.dev.tsv, PAWS-X's "
                   "translate-dev/dev_2k.{lang}.tsv)")
    g.add_argument("--dev-limit", type=cli.positive_int, help="score the first N dev examples of each language at each evaluation, "
                   "as X-Mixup's code keeps a tagging task's first 1,000 dev sentences (ner.py:104-107); default: all")
    g.add_argument("--eval-batch-size", type=cli.positive_int, default=64, help="texts per batch of the evaluations (dev, test, CKA and retrieval)")
    g.add_argument("--no-alignment", action="store_true", help="skip CKA and retrieval before and after training")
    g.add_argument("--alignment-pooling", choices=["mean", "cls"], help="the sentence vectors CKA and retrieval compare: the mean "
                   "of the final layer's real tokens (as X-Mixup's Figure 1 pools), or <s> (default: what the method aligns, "
                   "XeroAlign's --pooling; else mean)")
    g.add_argument("--no-test", action="store_true", help="skip the test table at the end (the best model on dev is still saved)")
    g.add_argument("--test-input", choices=list(TEST_INPUTS), help="what a test prediction sees besides the target text, for "
                   "filter, xmixup and translate-test: translation (--test-translations) or oracle (the task's parallel "
                   "source-language text, an upper bound); xmixup also text (the target alone). Default: translation where "
                   "--test-translations is given, else the method's first")
    g.add_argument("--test-translations", metavar="PATH", help="the test texts' translations into the source language: a path "
                   "with {lang} (e.g. translate-test/test-{lang}-en-translated.tsv, XTREME's; a QA test set's in SQuAD JSON, "
                   "each question under the id of the one it translates: translate-test/mlqa.translate.test.{lang}-en.json, "
                   "X-Mixup's) or a folder of <lang>.tsv files of id TAB text")
    g.add_argument("--save-dtype", default="float32", choices=["float32", "bf16"], help="the weights of OUT/best: bf16 halves "
                   "them, rounded (the default model's OUT/best: 244 MiB, against 468), and the test at the end reads them so, as "
                   "evaluate.py does")
    g.add_argument("--keep-checkpoint", action=argparse.BooleanOptionalAction, default=True, help="keep OUT/checkpoint.pt (a "
                   "sharded run's OUT/checkpoint/: the model and AdamW's moments, three times the model) once the run has "
                   "finished; --no-keep-checkpoint removes it after the test (a stopped run keeps it, to --resume)")
    g.add_argument("--resume", action="store_true", help="continue exactly from OUT/checkpoint.pt (a sharded run's: OUT/checkpoint/)")
    g.add_argument("--resume-changed", action="store_true", help="with --resume: go on though the data files changed")
    g.add_argument("--stop-at", type=cli.positive_int, help="save a checkpoint and exit after this step (continue later with --resume)")
    g = p.add_argument_group("hardware")
    g.add_argument("--device", type=cli.device, help="cpu or cuda (default: cuda when available)")
    g.add_argument("--amp", default="auto", choices=["auto", "none", "bf16", "fp16"],
                   help="autocast: auto is bf16 on GPUs that support it, fp16 with loss scaling on older ones, off on CPU")
    g.add_argument("--workers", type=cli.non_negative_int, help="processes that build the batches ahead of the step, with pinned "
                   "memory on CUDA (default: 2 on CUDA, 0 on CPU, where they would take the cores the step needs)")
    compiled.add_arguments(g)
    g.add_argument("--shard", action="store_true", help="fully sharded data parallel (FSDP2, shard.py): each of N processes holds "
                   "1/N of the weights, gradients and AdamW's moments, for models that do not fit one device under DDP "
                   "(the default); its checkpoint is OUT/checkpoint/, which any number of processes can resume")
    g.add_argument("--offload", action="store_true", help="with --shard: keep each process's part of the weights, gradients and "
                   "AdamW's moments in host memory (FSDP2's CPUOffloadPolicy), the device holding only the layers gathered "
                   "whole and the activations; AdamW then steps on the CPU")
    g.add_argument("--shard-embeddings", action="store_true", help="with --shard: the embeddings an FSDP unit of their own, "
                   "gathered for their forward and again for their backward rather than for the whole step, so that they are "
                   "not held while the layers run (1.0 GB in bf16 for XLM-R XL, 2.1 GB for XXL), for one more all-gather of "
                   "them a step (bench/shard.py --embeddings measures both); not with --method unicoder, which reads the word "
                   "embeddings outside their forward")
    g.add_argument("--eval-float32", action="store_true", help="evaluate (dev, the test, CKA and retrieval) in float32 rather "
                   "than under the run's --amp: outside autocast, and a sharded bf16 run on a float32 "
                   "copy of each process's weights (4 bytes a parameter over N processes), gathering in float32 (default: "
                   "as the run computes, which costs half the time and memory)")
    g.add_argument("--async-checkpoint", action="store_true", help="with --shard: write OUT/checkpoint/ in the background "
                   "while training goes on, from a copy of each process's shards in host memory (its parameters and AdamW's "
                   "moments: 12 bytes a parameter over N processes); it is put in place when the next checkpoint starts and "
                   "at the end of the run, the previous one kept until then (torch 2.9 or later)")
    g.add_argument("--dry-run", action="store_true", help="print what each process would hold in memory (parameters, "
                   "gradients, AdamW's moments; under DDP and sharded) for --model, from its config.json alone, and exit")
    g.add_argument("--processes", type=cli.positive_int, help="with --dry-run: plan for this many processes (default: torchrun's, else 1)")
    g.add_argument("--json", action="store_true", help="with --dry-run: print the plan as one JSON object (bytes per process: "
                   "its parts under DDP and sharded, and each phase's: loading, the step, the test, writing OUT/best)")
    g.add_argument("--device-memory", type=cli.positive_float, metavar="GB", help="with --dry-run: the memory of one device "
                   "(default: the CUDA device's, else 80)")
    g.add_argument("--gradient-checkpointing", action="store_true", help="keep each layer's input only and run the layer again in "
                   "backward: a fraction of the activation memory for one more forward pass per step, the same losses")


def given_flags(parser, argv):
    """The destinations of the flags named in argv (what a preset leaves as they are)."""
    named = {token.split("=", 1)[0] for token in argv if token.startswith("--")}
    return {action.dest for action in parser._actions if named & set(action.option_strings)}


def autocast(amp, device):
    """--amp auto: bf16 on GPUs that support it, fp16 (with loss scaling) on older ones, none on the CPU."""
    if amp != "auto":
        return amp
    if not device.startswith("cuda"):
        return "none"
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


@functools.cache
def flags_of(adds_arguments):
    """The destinations of the flags that an add_arguments(parser) function adds."""
    probe = argparse.ArgumentParser(add_help=False)
    adds_arguments(probe)
    return {action.dest for action in probe._actions}


def resolve(args, run):
    """(Settings, the run with the resolved --max-length): every preset, default and check of the
    flags parsed by parse(), for `run` (methods.Run: the task, tokenizer and model it trains)."""
    method = METHODS[args.method]
    values = settled(args, method, run.task, run.num_layers, run)
    run = replace(run, max_length=values["max_length"], lockstep=values["shard"] and run.world_size > 1)
    values["device"], values["amp"] = run.device, autocast(values["amp"], run.device)
    run = compiled.resolve(values, run)  # --compile on CUDA, its buckets: the tokenizer pads to them
    if not run.task.parallel and not values["no_alignment"]:
        values["no_alignment"] = True  # CKA and retrieval compare translations of the same sentences
        if run.rank == 0:
            print(f"note: --task {args.task}'s test languages are not parallel: no CKA or retrieval", file=sys.stderr)
    if values["test_input"] == "translation" and not values["test_translations"]:
        values["test_translations"] = run.task.test_translations  # XTREME's translate-test files, where the data folder has them
    values["test_input"] = choose_test_input(method, values["test_input"], values["test_translations"], run.task.parallel)
    settings = Settings(values)
    check(settings, method, run)
    return settings, run


def settled(args, method, task, num_layers, run=None):
    """The flags with the paper's presets and the method's defaults filled in (steps 1-4 of this
    module's docstring), as a dict. With `run` (methods.Run), --epochs becomes --max-steps over
    the method's training items; without it (a plan: planned()), --max-steps stays unset."""
    level, values, given = LEVELS[task.level], vars(args).copy(), set(args.given)
    refuse_other_methods_flags(method, given)
    if task.level not in method.levels:
        raise InputError(f"--method {method.name} {method.levels_note}; --task {args.task} {level.description}: "
                         f"use a method for {task.level} labels")
    if values["preset"] == "paper":  # 2. what the paper states, for the flags not given
        values.update({name: value for name, value in method.paper_preset(task).items() if name not in given})
        if values["batch_size"] % values["grad_accum"]:
            raise InputError(f"the paper's batch of {values['batch_size']} is not a multiple of --grad-accum {values['grad_accum']}")
    values["max_length"] = values["max_length"] or level.max_length
    if values["self_pairs"] is None:
        values["self_pairs"] = method.self_pairs
    if values["epochs"] and "max_steps" in given:
        raise InputError("give --max-steps or --epochs, not both (--preset paper sets --epochs where the paper gives them)")
    if values["eval_every"] == "epoch" and not values["epochs"]:
        raise InputError("--eval-every epoch evaluates once an epoch: give --epochs, or --eval-every in steps")
    if run is not None:
        run = replace(run, max_length=values["max_length"])
        check_training_items(method, Settings(values), run)
        if values["epochs"]:  # passes over the method's training items, as its paper's code counts them (Method.epoch)
            values.update(method.epoch_steps(run, Settings(values)))
        if values["eval_every"] == "epoch":
            values["eval_every"] = max(1, values["max_steps"] // values["epochs"])
    elif values["epochs"]:
        values["max_steps"] = None  # counted from the data
    for name, value in method.defaults(task.level, num_layers, values).items():  # 3. the papers' per-task values
        if values[name] is None:
            values[name] = value
    if values["group_by_length"] is None:
        values["group_by_length"] = method.groups_by_length
    values["alignment_pooling"] = values["alignment_pooling"] or "mean"
    return values


def planned(argv, task_name, num_layers):
    """The settings a train.py command line resolves to before any data is read: the flags, the
    paper's presets and the method's defaults, --max-steps unset where --epochs counts the data
    (reproduce.py's plan of an experiment; train.py resolves the rest)."""
    args = parse(argv)
    layout = tasks.LAYOUTS[task_name]
    task = tasks.Task(task_name, list(layout.labels), layout.source, [], {}, {}, {}, level=layout.level)
    return settled(args, METHODS[args.method], task, num_layers)


def refuse_other_methods_flags(method, given):
    """A method-specific flag given with a method that does not read it is refused, not ignored."""
    foreign = foreign_flags(method)
    named = sorted(given & set(foreign))
    if named:
        raise InputError(f"--{named[0].replace('_', '-')} is a flag of {foreign[named[0]]}; --method {method.name} does not read it")


def foreign_flags(method):
    """{flag: whose it is} for the flags of other methods, and a teacher's where `method` has none."""
    out = {}
    if method.teacher_kind is None:
        users = " and ".join(f"--method {name}" for name, m in METHODS.items() if m.teacher_kind is not None)
        out.update(dict.fromkeys(flags_of(teacher.add_arguments), f"{users} (a teacher's soft labels)"))
    mine = flags_of(method.add_arguments)
    for name, other in METHODS.items():
        out.update(dict.fromkeys(flags_of(other.add_arguments) - mine, f"--method {name}"))
    return out


def train_sizes(method, run, langs):
    """{lang: its training examples}: from the token cache where the method trains on it (texts and
    pairs, where the task level's items fit it), else from the examples."""
    if method.draws != "parallel" and run.level.caches_tokens:
        return {lang: len(texts) for lang, texts in run.cached_texts(langs).items()}
    return {lang: len(run.task.train[lang]) for lang in langs}


def check_training_items(method, settings, run):
    """Refuse what the method cannot train on, before its items are built (--epochs counts them):
    --extra-train where it cannot use it, --self-pairs where there are no pairs, a target language
    without translations where the method trains on them."""
    task = run.task
    if settings.extra_train and not Path(settings.extra_train).is_file():
        raise InputError(f"--extra-train {settings.extra_train}: {'not a file' if Path(settings.extra_train).exists() else 'no such file'}")
    if settings.extra_train and not (run.level.labels_texts or run.level.name == "span"):
        raise InputError(f"--extra-train adds labelled sentences, or a QA task's questions; --task {settings.task} {run.level.description}")
    if settings.extra_train and method.draws not in ("texts", "translated") and not (
            method.draws == "pairs" and run.level.name == "span" and settings.self_pairs):
        raise InputError(f"--extra-train adds single labelled texts, which --method {method.name} (trained on pairs) uses only on "
                         "answer spans, each question paired with itself (--self-pairs), as FILTER pairs SQuAD's beside TyDiQA-GoldP's"
                         if run.level.name == "span" and method.draws == "pairs" else
                         f"--extra-train adds single labelled texts, which --method {method.name} (trained on "
                         f"{'pairs' if method.draws == 'pairs' else 'parallel sentences'}) cannot use")
    if "self_pairs" in settings.given and method.draws != "pairs":
        raise InputError(f"--self-pairs pairs the source's texts with themselves; --method {method.name} trains on no pairs")
    if not task.train.labelled_translations and (method.draws == "translated" or settings.target_labels):
        raise InputError(f"--method {method.name} trains on each translation's labels, and --task {settings.task}'s translations "
                         f"({task.translations}) have none: word labels do not carry over to a translation; --method filter "
                         "trains on them (lambda = 0 in its Eq. 6), with its self-teaching's soft labels")
    sizes = train_sizes(method, run, task.targets) if method.uses_translations(settings) else {}
    missing = [lang for lang, size in sizes.items() if not size]
    files = [f"{lang} ({task.train.file(lang)})" if task.train.file(lang) else lang for lang in missing]
    if missing and settings.missing_translations == "self" and len(missing) < len(sizes):
        if run.rank == 0:
            print(f"note: no translations of the training set into {', '.join(files)}: --missing-translations self trains on "
                  "the other languages' alone", file=sys.stderr)
    elif missing:
        raise InputError(f"--method {method.name} trains on translations of the source's training examples, and --task {settings.task} "
                         f"has none in {', '.join(files)} (they come from: {task.translations}); leave those languages out "
                         "of --target-langs, or use --method zero-shot"
                         + ("" if method.name != "filter" or len(missing) == len(sizes) else
                            "; or, as FILTER's code does, train on the others' alone (--missing-translations self)"))


def check(settings, method, run):
    """Refuse, before the model loads, what the method cannot do with this task and these settings
    (check_training_items has checked what it trains on); then the method's checks of its own flags."""
    if settings.shard and settings.amp == "fp16":
        raise InputError("--shard computes in bf16 or float32: give --amp bf16 (or none); fp16's loss scaling is not built for "
                         "sharded gradients here")
    if settings.offload and not settings.shard:
        raise InputError("--offload moves a sharded run's parts to host memory: add --shard")
    if settings.shard_embeddings and not settings.shard:
        raise InputError("--shard-embeddings makes the embeddings a unit of a sharded model: add --shard")
    if settings.shard_embeddings and settings.method == "unicoder":
        raise InputError("--shard-embeddings: Unicoder's LM head and word recovery read the word embeddings outside their forward, "
                         "which a unit of their own holds sharded then; drop --shard-embeddings")
    if settings.dev_translations and "translation" not in method.test_inputs:
        raise InputError(f"--dev-translations pairs each dev text with its translation, and --method {method.name} predicts "
                         "from the text alone: drop it (filter, xmixup and translate-test read translations)")
    if settings.patience and settings.select_on == "last":
        raise InputError(f"--patience {settings.patience} stops when the dev score stops improving, and --select-on last keeps "
                         "the last model whatever it scores: choose --select-on source or all, or drop --patience")
    if settings.async_checkpoint and not settings.shard:
        raise InputError("--async-checkpoint writes a sharded run's checkpoint (OUT/checkpoint/) in the background: add --shard")
    if settings.async_checkpoint and not staging_available():
        raise InputError(f"--async-checkpoint needs torch 2.9 or later (its checkpoint staging), and this is torch {torch.__version__}: "
                         "upgrade torch, or leave --async-checkpoint out")
    planned = [f"--{name.replace('_', '-')}" for name in ("json", "processes", "device_memory") if getattr(settings, name)]
    if planned:
        raise InputError(f"{' and '.join(planned)} {'shapes' if len(planned) == 1 else 'shape'} the memory plan, which only "
                         "--dry-run prints: add --dry-run")
    problem = compiled.problem(settings)
    if problem:
        raise InputError(problem)
    if settings.max_length > run.max_positions:
        raise InputError(f"--max-length {settings.max_length} does not fit the model's {run.max_positions} positions: lower it")
    if method.teacher_kind is not None:
        teacher.check(settings, method.teacher_kind)
    method.check(settings, run)


def staging_available():
    """Whether this torch has the checkpoint staging --async-checkpoint uses (shard.agreed_staging)."""
    try:
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions  # noqa: F401
    except ImportError:
        return False
    return True


def choose_test_input(method, given=None, translations=None, parallel=True):
    """The test input: the one given (--test-input), else a translation where there are
    translations (--test-translations), else the method's first that the task has (the oracle
    needs a test set parallel across languages)."""
    offered = [i for i in method.test_inputs if parallel or i != "oracle"] or list(method.test_inputs)
    test_input = given or ("translation" if translations and "translation" in method.test_inputs else offered[0])
    if test_input == "oracle" and not parallel:
        raise InputError("the task's test languages are not parallel, so there is no source-language original to see (the "
                         f"oracle): choose --test-input {' or '.join(i for i in method.test_inputs if i != 'oracle')}"
                         + (" (translation with --test-translations)" if "translation" in method.test_inputs else ""))
    if test_input not in method.test_inputs:
        raise InputError(f"--method {method.name} predicts from {' or '.join(TEST_INPUTS[i] for i in method.test_inputs)}, "
                         f"not from {TEST_INPUTS[test_input]}")
    if test_input == "translation" and not translations:
        raise InputError("--test-input translation needs --test-translations: the test texts' translations into the source language")
    if translations and test_input != "translation":
        raise InputError(f"--test-translations: --method {method.name} tested on {TEST_INPUTS[test_input]} reads no translations")
    return test_input
