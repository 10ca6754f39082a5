"""Fine-tune a multilingual encoder on English labels and test it in every language.

    python train.py                                   # the default job: bundled corpus and model, XeroAlign
    python train.py --method zero-shot --task sib200 --data ../shared/data/sib200 --out runs/sib200-zs
    python train.py --method filter --task xquad --data ../shared/data/xquad --out runs/xquad-filter   # QA
    torchrun --nproc_per_node 2 train.py --method xeroalign --out runs/demo-xa

    python train.py --method filter --out runs/filter-teacher                      # FILTER's self-teaching:
    python train.py --method filter --teacher runs/filter-teacher/best --out runs/filter-student
    python train.py --method unicoder --task sib200 --data ../shared/data/sib200 --out runs/unicoder
    python train.py --method zero-shot --model runs/unicoder/best --task sib200 --data ../shared/data/sib200
    python cotrain.py --task sib200 --data ../shared/data/sib200 --out runs/cotrain  # Yu & Joty's co-training

The run reads top to bottom: arguments, distributed setup, data, model, optimizer, the loop (with
evaluation on the source dev set and checkpoints), then the test table from the best model. The
method (registry.py) decides what the loop trains on and what its loss is. Everything a resumed
run needs is in OUT/checkpoint.pt; the best model is OUT/best/, an ordinary checkpoint directory;
losses and evaluations go to OUT/log.jsonl.
"""
import argparse
import errno
import json
import math
import os
import random
import shutil
import signal
import sys
import textwrap
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from tqdm import tqdm

import cli
import data
import distributed
import evaluate
import hub
import tasks
from levels import LEVELS
from methods import TEST_INPUTS, Run
from model import Config, Encoder
from prepare_default import default_model
from registry import METHODS
from tokenizer import Tokenizer
from weights import CheckpointError, check_tokenizer, load_torch_file


def get_args(argv=None):
    methods = "\n".join(textwrap.fill(method.help, 100, initial_indent=f"  {name:<17}", subsequent_indent=" " * 19, break_on_hyphens=False)
                        for name, method in METHODS.items())
    p = argparse.ArgumentParser(description=f"{__doc__}\nMethods:\n{methods}", formatter_class=argparse.RawDescriptionHelpFormatter,
                                allow_abbrev=False)  # a flag is named in full, so that presets know which flags were given
    g = p.add_argument_group("what to train")
    g.add_argument("--method", default="xeroalign", choices=list(METHODS), help="see above (default: xeroalign); co-training: cotrain.py")
    g.add_argument("--task", default="demo", help="demo (the bundled corpus's intents), demo-slots (its BIO slots), sib200, xnli, pawsx, udpos (UPOS tagging on UD PUD), xsid (intent + BIO slots, "
                   "trained on English valid), or xquad (extractive QA, split by article)")
    g.add_argument("--data", type=cli.existing_directory, help="data directory of the task, e.g. ../shared/data/sib200 (not needed for demo)")
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
    g.add_argument("--extra-train", type=cli.existing_file, help="JSONL file of further labelled examples (id, lang, text, label), trained on with the "
                                         "source's: co-training's pseudo-labels, or your own")
    g = p.add_argument_group("optimisation")
    g.add_argument("--max-steps", type=cli.positive_int, default=150, help="optimizer steps (the default finishes in minutes on 2 CPU cores)")
    g.add_argument("--epochs", type=cli.positive_int, help="instead of --max-steps: passes over the source's training examples, "
                                                           "ceil(examples / --batch-size) steps each")
    g.add_argument("--preset", default="minxlt", choices=["minxlt", "paper"], help="paper: the settings the method's paper states "
                   "(head, learning rate, batch size, epochs; see its --help group) for the flags not given; minxlt: this "
                   "script's defaults")
    g.add_argument("--batch-size", type=cli.positive_int, default=32, help="examples per optimizer step, over all processes and micro-steps")
    g.add_argument("--grad-accum", type=cli.positive_int, default=1, help="micro-steps per optimizer step (memory: each holds batch-size / grad-accum / processes)")
    g.add_argument("--lr", type=cli.positive_float, default=5e-5, help="peak learning rate of AdamW")
    g.add_argument("--weight-decay", type=cli.non_negative_float, default=0.01, help="AdamW weight decay (not on biases and LayerNorms)")
    g.add_argument("--warmup", type=cli.number(float, 0, 1, high_open=True), default=0.1, help="fraction of steps of linear warmup, then linear decay to 0")
    g.add_argument("--max-grad-norm", type=cli.non_negative_float, default=1.0, help="gradient clipping (0: off)")
    g.add_argument("--max-length", type=cli.number(int, 8), help="tokens per text (pairs: in total), longest-first truncation; for QA, per window "
                                                  "(default: 128, QA 384)")
    g.add_argument("--dropout", type=cli.number(float, 0, 1, high_open=True), help="override the checkpoint's dropout (0 makes runs comparable across process counts)")
    g.add_argument("--head", default="roberta", choices=["roberta", "linear"], help="sentence classifier: dense-tanh-projection or one linear layer")
    g.add_argument("--pooling", default="cls", choices=["cls", "mean"], help="sentence vector: <s>, or the mean of the tokens (sentence-embedding models)")
    g.add_argument("--freeze-embeddings", action="store_true", help="keep the word embeddings fixed (faster: no update of the 250k x H matrix)")
    g.add_argument("--group-by-length", action=argparse.BooleanOptionalAction, help="batch texts of similar length together "
                   "(less padding; default: on, except where the method's loss compares the texts of a batch with each other: "
                   "contrastive, unicoder)")
    g.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("question answering")
    g.add_argument("--doc-stride", type=cli.non_negative_int, default=128, help="context tokens shared by consecutive windows of a long context")
    g.add_argument("--max-answer-length", type=cli.positive_int, default=30, help="the longest answer predicted, in tokens")
    for method in METHODS.values():
        method.add_arguments(p)
    add_run_arguments(p)
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


def add_run_arguments(p):
    """The flags of evaluation, checkpoints, test inputs and hardware."""
    g = p.add_argument_group("evaluation and checkpoints")
    g.add_argument("--eval-every", type=cli.positive_int, default=50, help="steps between evaluations on the source dev set (the best "
                   "model goes to OUT/best)")
    g.add_argument("--save-every", type=cli.positive_int, default=500, help="steps between writes of OUT/checkpoint.pt, the "
                   "resume checkpoint with the optimizer (one is kept; a stopped run writes one too; default: 500)")
    g.add_argument("--log-every", type=cli.positive_int, default=10, help="steps between log records (their mean loss); the "
                   "losses stay on the device in between (default: 10)")
    g.add_argument("--dev-langs", default="source", choices=["source", "all"], help="dev languages to log (selection is always on the source)")
    g.add_argument("--eval-batch-size", type=cli.positive_int, default=64)
    g.add_argument("--no-alignment", action="store_true", help="skip CKA and retrieval before and after training")
    g.add_argument("--alignment-pooling", default="mean", choices=["mean", "cls"], help="the sentence vectors CKA and retrieval "
                   "compare: the mean of the final layer's real tokens (default, X-Mixup's Table 7), or <s>")
    g.add_argument("--no-test", action="store_true", help="skip the test table at the end (the best model on dev is still saved)")
    g.add_argument("--test-input", choices=list(TEST_INPUTS), help="what a test prediction sees besides the target text, for "
                   "filter, xmixup and translate-test: translation (--test-translations) or oracle (the task's parallel "
                   "source-language text, an upper bound); xmixup also text (the target alone). Default: translation where "
                   "--test-translations is given, else the method's first")
    g.add_argument("--test-translations", metavar="PATH", help="the test texts' translations into the source language: a path "
                   "with {lang} (e.g. translate-test/test-{lang}-en-translated.tsv, XTREME's) or a folder of <lang>.tsv "
                   "files of id TAB text")
    g.add_argument("--resume", action="store_true", help="continue exactly from OUT/checkpoint.pt")
    g.add_argument("--stop-at", type=cli.positive_int, help="save a checkpoint and exit after this step (continue later with --resume)")
    g = p.add_argument_group("hardware")
    g.add_argument("--device", type=cli.device, help="cpu or cuda (default: cuda when available)")
    g.add_argument("--amp", default="auto", choices=["auto", "none", "bf16", "fp16"],
                   help="autocast: auto is bf16 on GPUs that support it, fp16 with loss scaling on older ones, off on CPU")
    g.add_argument("--workers", type=cli.non_negative_int, help="processes that build the batches ahead of the step, with pinned "
                   "memory on CUDA (default: 2 on CUDA, 0 on CPU, where they would take the cores the step needs)")
    g.add_argument("--compile", action="store_true", help="torch.compile the model (dynamic shapes; the first steps are slow)")
    g.add_argument("--gradient-checkpointing", action="store_true", help="keep each layer's input only and run the layer again in "
                   "backward: a fraction of the activation memory for one more forward pass per step, the same losses")


def given_flags(parser, argv):
    """The destinations of the flags named in argv (what a preset leaves as they are)."""
    named = {token.split("=", 1)[0] for token in argv if token.startswith("--")}
    return {action.dest for action in parser._actions if named & set(action.option_strings)}


def autocast_dtype(amp, device):
    if amp == "auto":
        if not device.startswith("cuda"):
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]


def rng_state():
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state):
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


class StopRequest:
    """Ctrl-C (SIGINT), or SIGTERM as schedulers such as SLURM send before a kill, asks the run to
    stop at its next log record and save a checkpoint; a second one aborts at once."""
    signals = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.requested = False
        self.previous = {s: signal.signal(s, self.handle) for s in self.signals}

    def handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print(f"\n{signal.Signals(signum).name}: stopping after this step (several processes: at the next log record, "
              "--log-every) to save a checkpoint (once more to abort)", file=sys.stderr)

    def close(self):
        for s, handler in self.previous.items():
            signal.signal(s, handler)


class Divergence:
    """A run diverges when its logged loss is not finite, or when its mean over the last `window`
    log records of a phase (about 20 steps: train() makes it ceil(20 / --log-every)) stays above
    `factor` times (and 1 above) the phase's first logged loss."""

    def __init__(self, factor=5.0, window=20):
        self.factor, self.window = factor, window
        self.phase, self.start, self.recent = None, None, []

    def check(self, phase, loss):
        """What is wrong with the loss of this step, or None."""
        if not math.isfinite(loss):
            return f"the loss is {loss}"
        if phase != self.phase:
            self.phase, self.start, self.recent = phase, loss, []
        self.recent = (self.recent + [loss])[-self.window:]
        mean = sum(self.recent) / len(self.recent)
        if len(self.recent) == self.window and mean > self.factor * self.start and mean > self.start + 1:
            return f"the loss has averaged {mean:.4g} over the last {self.window} steps, against {self.start:.4g} at the start"
        return None


def load_task(args):
    """The task as --task, --data and the language flags name it, with the QA flags; --max-length
    defaults to the task level's."""
    task = tasks.load_task(args.task, args.data, args.source_lang, args.target_langs)
    task.doc_stride, task.max_answer_length = args.doc_stride, args.max_answer_length
    args.max_length = args.max_length or LEVELS[task.level].max_length
    return task


def load_run(args, model_dir, device, rank, world_size):
    """The task (Yu & Joty's few-shot sample of it where asked) and the tokenizer, checked against
    the model's config.json."""
    config, tokenizer = Config.from_directory(model_dir), Tokenizer.from_pretrained(model_dir)
    check_tokenizer(config, tokenizer, model_dir)
    task = load_task(args)
    if args.train_fraction < 1 or args.translated is not None:
        task = tasks.few_shot(task, args.train_fraction, args.translated, args.seed)
    return Run(task, tokenizer, args.max_length, args.eval_batch_size, device, rank, world_size, config.num_layers,
               config.max_positions - config.position_offset)


def padding_report(args, method, phases):
    """One line on the share of a batch's tokens that are padding, in each phase's first epoch,
    with the batches that --group-by-length makes and without them."""
    shares = []
    for phase in phases:
        lengths = method.lengths(phase.items)
        share = lambda group: data.padding_share(lengths, data.epoch_batches(lengths, args.batch_size, 0, args.seed, group_by_length=group))
        shares.append(f"{phase.name} {100 * share(args.group_by_length):.0f}% (with{'out' if args.group_by_length else ''} "
                      f"--group-by-length: {100 * share(not args.group_by_length):.0f}%)")
    return "padding: " + "; ".join(shares) + " of the batches' tokens"


def training_data(args, method):
    """The method's training items (from the task and --extra-train) and its phases over them,
    once the method has checked that it can train on them."""
    extra = tasks.read_jsonl_examples(args.extra_train, method.run.task.labels) if args.extra_train else []
    method.check(extra)
    if args.max_length > method.run.max_positions:
        raise tasks.InputError(f"--max-length {args.max_length} does not fit the model's {method.run.max_positions} positions: lower it")
    items = method.training_items(extra)
    if not items:
        raise tasks.InputError(f"no training examples for --method {args.method} on {args.task}")
    if args.group_by_length is None:
        args.group_by_length = method.groups_by_length
    if not method.run.task.parallel and not args.no_alignment:
        args.no_alignment = True  # CKA and retrieval compare translations of the same sentences
        if method.run.rank == 0:
            print(f"note: --task {args.task}'s test languages are not parallel: no CKA or retrieval", file=sys.stderr)
    return items, method.phases(items)


def build_model(args, method, model_dir, device, rank):
    """The encoder and a fresh head, identical on every rank before DDP wraps them."""
    dropout = {} if args.dropout is None else {"dropout": args.dropout, "attention_dropout": args.dropout}
    encoder = Encoder.from_pretrained(model_dir, **dropout)
    encoder.segment_id = method.run.tokenizer.segment_id  # BERT's tokenizers put a pair's second text in segment 1
    torch.manual_seed(args.seed)
    model = method.build(encoder).to(device)
    torch.manual_seed(args.seed + rank)  # dropout differs across ranks; the weights start identical
    if args.freeze_embeddings:
        model.encoder.embeddings.word.weight.requires_grad_(False)
    model.encoder.checkpoint_layers(args.gradient_checkpointing)
    return model


def make_optimizer(args, model, phases):
    """AdamW, no decay on biases and LayerNorms; per phase, linear warmup then linear decay to 0,
    from its own peak (Yu & Joty's second phase has a smaller one)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    # fused: one pass over each tensor; on CPU it halves the step, most of which is updating the 250k-row embedding
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, fused=True)

    def ramp(s, n):
        warmup = int(args.warmup * n)
        return min((s + 1) / max(warmup, 1), max(0.0, (n - s) / max(n - warmup, 1)))

    def schedule(step):
        phase, start = phase_at(phases, step)
        return phase.lr_scale * ramp(step - start, phase.steps)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def phase_at(phases, step):
    """(the phase a step belongs to, its first step); past the end, the last phase."""
    start = 0
    for phase in phases[:-1]:
        if step < start + phase.steps:
            return phase, start
        start += phase.steps
    return phases[-1], start


def train(args):
    """Train, evaluate, write OUT/; returns the model as it is after the last step."""
    owns_process_group = not distributed.initialized()  # co-training trains inside an outer run
    rank, world_size, device = distributed.setup(args.device)
    distributed.choose_attention(device)
    out = cli.output_folder(args.out, args.resume, args.overwrite, rank)
    random.seed(args.seed + rank)
    torch.manual_seed(args.seed + rank)  # dropout differs across ranks; the weights start identical (loaded)

    # Data: every example tokenized once; translations of a source share its id.
    model_dir = hub.resolve(args.model) if args.model else default_model()
    run = load_run(args, model_dir, device, rank, world_size)
    method = METHODS[args.method](args, run)
    items, phases = training_data(args, method)
    if rank == 0:
        print(padding_report(args, method, phases), file=sys.stderr)
    identity = run_identity(args, run, model_dir)
    saved = load_checkpoint(out, identity) if args.resume else None
    if args.overwrite and rank == 0:
        cli.clear_run(out)

    # Model: the method's view of it (FILTER and X-Mixup run it on pairs) is what trains and is
    # checkpointed; OUT/best holds the built model alone, plus task.json.
    raw = build_model(args, method, model_dir, device, rank)
    alignment_before = None if args.no_alignment or args.resume else alignment(raw.encoder, run, args.alignment_pooling)
    core = method.wrap(raw, items)
    model = distributed.wrap(core, device, method.unused_parameters)
    optimizer, scheduler = make_optimizer(args, core, phases)
    dtype = autocast_dtype(args.amp, device)
    scaler = torch.amp.GradScaler(enabled=dtype == torch.float16)
    state = {"step": 0, "best": -1.0, "best_step": -1, "alignment_before": alignment_before, "saved_step": None}
    if saved is not None:
        state = resume(out, saved, core, optimizer, scheduler, scaler, rank, world_size)
    checkpoint = lambda window: save_checkpoint(out, args, identity, core, optimizer, scheduler, scaler, state, window, rank)

    # The loop: one optimizer step per global batch, its micro-batches built ahead (StepBatches);
    # a log record every --log-every steps, an evaluation every --eval-every, a checkpoint every --save-every.
    progress = tqdm(total=args.max_steps, initial=state["step"], disable=rank != 0, desc=f"{args.method} on {args.task}", dynamic_ncols=True)
    stop, divergence, started, stopped = StopRequest(), Divergence(window=math.ceil(20 / args.log_every)), time.time(), False
    window = Window(state.pop("window", None), rank, device)  # a resumed run's steps since the last record count in the next
    batches = batch_loader(args, method, phases, state["step"])
    if args.compile:
        model = torch.compile(model, dynamic=True)
    model.train()
    try:  # the signal handlers are the run's until it ends, however it ends
        while state["step"] < args.max_steps:
            phase, phase_start = phase_at(phases, state["step"])
            window.add(train_step(args, run, phase, model, next(batches), dtype, scaler))
            update(args, raw, optimizer, scheduler, scaler)
            state["step"] += 1
            progress.update(1)
            evaluating = state["step"] % args.eval_every == 0 or state["step"] == args.max_steps
            if evaluating or logs_at(args, phases, state["step"], phase, phase_start):
                stats, stopping = window.read(stop.requested, device)  # the one wait for the device, all processes at once
                diverged(args, out, state, divergence.check(phase.name, stats["loss"]), progress, owns_process_group)
                log(out, {"step": state["step"], "loss": stats.pop("loss"), "lr": scheduler.get_last_lr()[0],
                          "seconds": round(time.time() - started, 3), **stats}, rank)
                progress.set_postfix(loss=f"{window.last:.4f}")
            else:  # alone, a process stops at once; several agree on it at the next log record
                stopping = stop.requested and world_size == 1
            if evaluating:
                evaluate_and_save(args, out, method, raw, core, state, window.last, progress, rank)
                model.train()
            if state["step"] % args.save_every == 0 or stopping or state["step"] == args.stop_at:
                checkpoint(window)
            if stopping or state["step"] == args.stop_at:  # saved, to be continued with --resume
                stopped = True
                break
    finally:
        stop.close()
    progress.close()
    finish(args, out, method, raw, core, state, stopped, owns_process_group)
    return raw


def update(args, raw, optimizer, scheduler, scaler):
    """The optimizer step, after clipping the gradient's norm (of the built model's parameters)."""
    if args.max_grad_norm > 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(raw.parameters(), args.max_grad_norm)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


def logs_at(args, phases, step, phase, phase_start):
    """Whether the step ending at `step` writes a log record: every --log-every steps, and at a
    phase's first and last steps (its first loss is what Divergence compares with)."""
    return step % args.log_every == 0 or step == phase_start + 1 or phase_at(phases, step)[0] is not phase


def finish(args, out, method, raw, core, state, stopped, owns_process_group):
    """The end of a run: the test table of the best model on dev, in every language (test), or,
    for a run stopped to be resumed, how to continue it."""
    distributed.barrier()
    if stopped and method.run.rank == 0:
        print(f"stopped at step {state['step']}; continue with the same command and --resume", file=sys.stderr)
    elif not stopped and not args.no_test:
        test(args, out, method, raw, core, state)
    if owns_process_group:
        distributed.cleanup()


class StepBatches(torch.utils.data.IterableDataset):
    """This process's micro-batches of every step from `start` on, each [(batch, share)] (step_batches).
    A loader worker k of n builds steps start + k, start + k + n, ..., and the loader takes them in
    turn, so the steps come in order however many workers build them."""

    def __init__(self, args, method, phases, start):
        self.args, self.method, self.phases, self.start = args, method, phases, start

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        k, n = (worker.id, worker.num_workers) if worker else (0, 1)
        plans = {}
        for step in range(self.start + k, self.args.max_steps, n):
            yield step_batches(self.args, self.method, self.phases, step, plans)


def batch_loader(args, method, phases, start):
    """An iterator over the steps' micro-batches, built by --workers processes ahead of the step and
    pinned in page-locked memory on CUDA, so that the copies to the device do not wait (train_step)."""
    cuda = method.run.device.startswith("cuda")
    workers = loader_workers(args.workers, cuda, method.batches_run_a_model())
    loader = torch.utils.data.DataLoader(StepBatches(args, method, phases, start), batch_size=None, num_workers=workers,
                                         pin_memory=cuda, prefetch_factor=4 if workers else None,
                                         generator=torch.Generator())  # its own: drawing from the global one would change dropout
    return iter(loader)


def loader_workers(asked, cuda, batches_run_a_model):
    """--workers, or by default 2 on CUDA and none on the CPU, whose cores the step needs. None
    where making a batch runs a model on CUDA (a teacher), which a forked worker cannot use."""
    if batches_run_a_model and cuda:
        if asked:
            print(f"note: --workers {asked} ignored: making a batch runs the teacher on CUDA, which loader processes cannot use",
                  file=sys.stderr)
        return 0
    return asked if asked is not None else 2 if cuda else 0


def step_batches(args, method, phases, step, plans):
    """This process's micro-batches of a step, on the CPU, each with its share of the global batch:
    [(batch, share)]. They follow from the step alone (its phase, the epoch's batch order from the
    seed), so a resumed run picks up where it stopped. `plans` keeps the phase's item lengths and
    the epoch's batch order."""
    run = method.run
    phase, start = phase_at(phases, step)
    epoch, position = divmod(step - start, math.ceil(len(phase.items) / args.batch_size))
    if (phase.name, epoch) not in plans:
        lengths = plans.get(phase.name) or method.lengths(phase.items)  # once per phase, not per epoch
        plans.clear()
        plans[phase.name] = lengths
        plans[(phase.name, epoch)] = data.epoch_batches(lengths, args.batch_size, epoch, args.seed, group_by_length=args.group_by_length)
    global_batch = plans[(phase.name, epoch)][position]
    items = {i: phase.items[i] for i in global_batch}  # read once (from the token cache, each read builds the item)
    units = {i: method.units(item) for i, item in items.items()}
    micro_size, out = args.batch_size // args.grad_accum, []
    for micro in range(args.grad_accum):
        chunk = global_batch[micro * micro_size:(micro + 1) * micro_size]
        index, weights = data.shard(chunk or global_batch[:1], run.rank, run.world_size)
        weights = weights if chunk else [0.0] * len(weights)
        # Each micro-batch's mean loss is weighted by its share of the global batch (in the loss's
        # units: examples, or scored tokens), so that the step's gradient is that of the mean loss
        # over the whole global batch, whatever the process count.
        share = sum(w * units[i] for i, w in zip(index, weights)) / sum(units[i] for i in global_batch)
        out.append((phase.make_batch([items[i] for i in index], weights, step), share))
    return out


def to_device(batch, device):
    """A batch's tensors on the device; from pinned memory the copy does not wait for the host."""
    return {name: value.to(device, non_blocking=True) if torch.is_tensor(value) else value for name, value in batch.items()}


def train_step(args, run, phase, model, micro_batches, dtype, scaler):
    """Forward and backward of one global batch, in --grad-accum micro-steps of this process's
    share. Returns this process's part of the mean loss over the global batch and of its parts,
    {name: tensor on the device}: read nothing here, so that the host never waits for the device."""
    device, world_size = run.device, run.world_size
    total = torch.zeros((), device=device)
    parts = {}
    for micro, (batch, share) in enumerate(micro_batches):
        batch = to_device(batch, device)
        sync = model.no_sync() if world_size > 1 and micro < len(micro_batches) - 1 else nullcontext()
        with sync:
            with torch.autocast(device.split(":")[0], dtype=dtype, enabled=dtype is not None):
                loss, components, *shared = phase.loss(model, batch)
            # Times the number of processes, because DDP averages gradients over them. A shared
            # part of the loss (Method.loss) is the same on every process, each of which
            # back-propagates it whole: its gradient reaches each process's own examples, and
            # DDP's average over the processes leaves it as it is.
            shared = shared[0] if shared else None
            scaler.scale(loss * share * world_size + (shared if shared is not None else 0)).backward()
        total += (loss.detach() if shared is None else loss.detach() + shared.detach()) * share
        for k, v in components.items():
            parts[k] = parts.get(k, 0.0) + v * share
    return {"loss": total, **parts}


class Window:
    """The losses of the steps since the last log record, summed on the device, read (and summed
    over the processes) once per record: each name's mean over the steps that had it. A resumed
    run starts from every process's sums as the checkpoint saved them (`saved`)."""

    def __init__(self, saved=None, rank=0, device="cpu"):
        self.sums, self.counts, self.last = {}, {}, float("nan")
        if saved:  # one {name: (sum, count)} per process; on another process count, rank 0 takes their total
            mine = saved[rank] if rank < len(saved) and len(saved) == distributed.world_size() else None
            for name, (total, count) in saved[0].items():
                total = mine[name][0] if mine else sum(part[name][0] for part in saved) if rank == 0 else torch.zeros_like(total)
                self.sums[name], self.counts[name] = total.to(device), count

    def state(self):
        return {name: (total.detach().cpu(), self.counts[name]) for name, total in self.sums.items()}

    def add(self, values):
        for name, value in values.items():
            self.sums[name] = self.sums[name] + value if name in self.sums else torch.as_tensor(value)
            self.counts[name] = self.counts.get(name, 0) + 1

    def read(self, stop, device):
        """({"loss": mean loss, part: mean, ...} over the global batches, whether any process was
        asked to stop), the same on every process, so that all stop at the same step."""
        names = ["loss"] + sorted(k for k in self.sums if k != "loss")
        means = torch.stack([(self.sums[k] / self.counts[k]).to(device) for k in names] + [torch.tensor(float(stop), device=device)])
        values = distributed.all_reduce(means).tolist()
        self.sums, self.counts, self.last = {}, {}, values[0]
        return dict(zip(names, values)), values[-1] > 0


def diverged(args, out, state, problem, progress, owns_process_group):
    """Stop a diverging run (Divergence) with advice, naming the last checkpoint if there is one."""
    if problem is None:
        return
    rank0 = not progress.disable  # (close() disables it)
    progress.close()
    if rank0:
        where = (f"the last checkpoint is {out / 'checkpoint.pt'}, of step {state['saved_step']}: --resume continues from it"
                 if state["saved_step"] is not None else f"no checkpoint was written yet (the first comes at step {args.save_every})")
        print(f"error: step {state['step']}: {problem}: the run is diverging; try a lower --lr (now {args.lr}), --amp bf16 or "
              f"none instead of fp16, or --max-grad-norm 1.0; {where}", file=sys.stderr)
    if owns_process_group:
        distributed.cleanup()
    sys.exit(1)


def log(out, record, rank):
    """A record ({"step": ..., name: number or {lang: number}}) on a line of OUT/log.jsonl, and as
    TensorBoard scalars."""
    if rank == 0:
        with open(out / "log.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        tensorboard(out, record)


WRITERS = {}  # OUT -> its TensorBoard writer, or None without TensorBoard


def tensorboard(out, record):
    """The record's numbers as TensorBoard scalars in OUT/tensorboard ("loss", "dev_accuracy/de"),
    where torch.utils.tensorboard can be imported (it needs the tensorboard package)."""
    if out not in WRITERS:
        try:
            from torch.utils.tensorboard import SummaryWriter
            WRITERS[out] = SummaryWriter(str(out / "tensorboard"))
        except ImportError:
            WRITERS[out] = None
    if WRITERS[out] is None:
        return
    for key, value in record.items():
        for name, number in (value.items() if isinstance(value, dict) else [("", value)]):
            if key != "step" and isinstance(number, (int, float)):
                WRITERS[out].add_scalar(f"{key}/{name}" if name else key, number, record["step"])
    WRITERS[out].flush()


def task_info(args, method, run):
    """task.json of OUT/best: what evaluate.py needs to rebuild the task and the predictor."""
    task = run.task
    info = {"task": args.task, "data": args.data, "labels": task.labels, "intents": task.intents, "source_lang": task.source,
            "target_langs": task.targets, "head_style": run.level.head(task, args.head), "pooling": args.pooling,
            "max_length": args.max_length, "method": args.method, "test_input": args.test_input}
    if task.level == "span":
        info.update(doc_stride=task.doc_stride, max_answer_length=task.max_answer_length)
    return info


def evaluate_and_save(args, out, method, raw, core, state, loss, progress, rank):
    """Score the source dev set (and the targets' with --dev-langs all), log it, and save the
    model to OUT/best when it is the best so far."""
    run, metric = method.run, method.metric()
    langs = [run.task.source] + (run.task.targets if args.dev_langs == "all" else [])
    dev = {lang: scores[metric] for lang, scores in method.evaluate(core, "dev", langs).items()}
    log(out, {"step": state["step"], f"dev_{metric}": dev}, rank)
    if dev[run.task.source] > state["best"]:
        state["best"], state["best_step"] = dev[run.task.source], state["step"]
        if rank == 0:
            info = dict(task_info(args, method, run), **method.saved_info(core), step=state["step"], **{f"dev_{metric}": state["best"]})
            save_best(out, raw, run.tokenizer, info)
    if rank == 0:
        progress.write(f"step {state['step']}: loss {loss:.4f}, dev {metric} "
                       f"{', '.join(f'{l} {100 * a:.1f}' for l, a in dev.items())} (best {100 * state['best']:.1f} at step {state['best_step']})")


def run_identity(args, run, model_dir):
    """What a checkpoint must share with the command that resumes it: the method, the task and
    its languages, the model and its tokenizer."""
    return {"method": args.method, "task": args.task, "data": str(Path(args.data).resolve()) if args.data else None,
            "languages": [run.task.source, *run.task.targets], "model": str(Path(model_dir).resolve()),
            "tokenizer": run.tokenizer.fingerprint()}


def load_checkpoint(out, identity):
    """OUT/checkpoint.pt, refused unless it was written by this run (the same identity)."""
    path = out / "checkpoint.pt"
    saved = load_torch_file(path, "checkpoint")
    if not isinstance(saved, dict) or not {"model", "optimizer", "scheduler", "scaler", "step", "rng"} <= set(saved):
        raise CheckpointError(f"{path}: not a checkpoint written by train.py")
    theirs = saved.get("identity") or {key: saved.get("args", {}).get(key) for key in ("method", "task")}
    different = [f"{key} {theirs[key]!r} there, {identity[key]!r} here" for key in theirs if theirs[key] != identity.get(key)]
    if different:
        raise CheckpointError(f"{path} belongs to another run ({'; '.join(different)}): resume with that run's settings, or "
                              "start afresh with --overwrite or another --out")
    return saved


def save_best(out, model, tokenizer, info):
    """OUT/best: the model alone, written aside and swapped into place, so that a failed write leaves the previous best."""
    tmp = out / "best.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save(tmp, tokenizer, info)
        cli.replace_dir(tmp, out / "best")
    except (OSError, RuntimeError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OSError(errno.EIO, f"writing the best model failed ({str(e).splitlines()[0]}); the previous one is whole. "
                                 "Is the disk full? Free some space and continue with --resume", str(out / "best")) from None


def save_checkpoint(out, args, identity, core, optimizer, scheduler, scaler, state, window, rank):
    """OUT/checkpoint.pt: everything a resumed run needs, every process's RNG state and losses
    since the last log record included; written by rank 0 to a new file that then replaces the old,
    so that the old one survives a failed write (a full disk)."""
    states, windows = distributed.gather(rng_state()), distributed.gather(window.state())
    if rank == 0:
        checkpoint = {"model": core.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                      "scaler": scaler.state_dict(), "step": state["step"], "best": state["best"], "best_step": state["best_step"],
                      "rng": states, "args": vars(args), "identity": identity, "alignment_before": state["alignment_before"], "window": windows}
        tmp, path = out / "checkpoint.pt.tmp", out / "checkpoint.pt"
        try:
            torch.save(checkpoint, tmp)
            os.replace(tmp, path)
        except (OSError, RuntimeError) as e:
            tmp.unlink(missing_ok=True)
            kept = f"the checkpoint of step {state['saved_step']} is whole" if state["saved_step"] is not None else "no checkpoint is kept"
            raise OSError(errno.EIO, f"writing the checkpoint failed ({str(e).splitlines()[0]}); {kept}. Is the disk full? "
                                     "Free some space and continue with --resume", str(path)) from None
    state["saved_step"] = state["step"]


def resume(out, saved, core, optimizer, scheduler, scaler, rank, world_size):
    """Load a checkpoint (load_checkpoint) into the model, optimizer, scheduler and scaler; drop the
    log's records of later steps, which the resumed run logs again; return the loop's state."""
    try:
        core.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        scaler.load_state_dict(saved["scaler"])
    except (RuntimeError, ValueError, KeyError) as e:
        raise CheckpointError(f"{out / 'checkpoint.pt'}: does not fit this model ({str(e).splitlines()[0]}); "
                              "start afresh with --overwrite or another --out") from None
    if len(saved["rng"]) == world_size:
        set_rng_state(saved["rng"][rank])
    elif rank == 0:
        print(f"note: resuming {len(saved['rng'])}-process run on {world_size}: dropout draws will differ", file=sys.stderr)
    if rank == 0:
        cli.keep_log_until(out / "log.jsonl", saved["step"])
    state = {key: saved.get(key) for key in ("step", "best", "best_step", "alignment_before", "window")}
    return dict(state, saved_step=saved["step"])


def alignment(encoder, run, pooling):
    """{target: {"cka": ..., "retrieval": ...}} of an encoder on the task's parallel test sentences."""
    return evaluate.alignment(encoder, run.tokenizer, run.task.test, run.task.source, run.batch_size, run.device, run.rank, run.world_size,
                              pooling)


def test(args, out, method, raw, core, state):
    """The test table of the best model on dev, with CKA and retrieval before and after training:
    OUT/results.json and OUT/results.md."""
    run, predictions = method.run, {}
    results, encoder = method.test(out / "best", raw, core, args.test_input, args.test_translations, predictions)
    results = evaluate.summarise(results, run.task.source) if results else {}
    alignment_after = None if args.no_alignment else alignment(encoder, run, args.alignment_pooling)
    if run.rank != 0:
        return
    unscored = evaluate.unscored(run.task.test)
    before = state["alignment_before"] or {}
    aligned = {lang: {**{f"{k}_before": v for k, v in before.get(lang, {}).items()}, **after} for lang, after in (alignment_after or {}).items()}
    if results or aligned:
        table = evaluate.markdown_table(results or {lang: {} for lang in aligned}, run.task.source, aligned)
        table += f"\n\nCKA and retrieval compare {evaluate.POOLINGS[args.alignment_pooling]}." if aligned else ""
    elif unscored:
        table = "(no test scores)"
    else:  # Unicoder with --no-alignment: an encoder has no test scores of its own
        table = "(no test scores: an encoder; CKA and retrieval were skipped by --no-alignment)"
    table += evaluate.unscored_note(unscored, out / "predictions")
    metric = method.metric()
    seen = {"input": args.test_input, "what": TEST_INPUTS[args.test_input], "translations": args.test_translations}
    summary = {**results, "unscored": unscored, "test_input": seen, "alignment": aligned, "alignment_pooling": args.alignment_pooling,
               "best_step": state["best_step"], f"dev_{metric}": state["best"], "args": vars(args)}
    title = f"{args.method} on {args.task}, test split, best dev step {state['best_step']}; each prediction saw {seen['what']}"
    cli.write_text(out / "results.json", json.dumps(summary, indent=2) + "\n")
    cli.write_text(out / "results.md", f"{title}\n\n{table}\n")
    evaluate.write_predictions(out / "predictions", predictions)
    print(f"\n{title}\n\n{table}\n\nwritten to {out}/results.json and results.md")


def main(argv=None):
    return train(get_args(argv))


if __name__ == "__main__":
    cli.run(main)
