"""What train.py's loop does around the training step, and what a reader of the step can skip:

  - the batch plan: each step's micro-batches, which follow from the seed and the step alone, built
    ahead by loader processes (StepBatches, batch_loader);
  - the log: the losses of the steps since the last record, summed on the device and read once per
    record by every process at once (Window), written to OUT/log.jsonl and TensorBoard (Book.log);
  - stop requests (Ctrl-C, SIGTERM) agreed across processes, and divergence;
  - the resume checkpoint, OUT/checkpoint.pt or a sharded run's OUT/checkpoint/ (Book.save_checkpoint,
    Book.start), and OUT/best.
"""
import errno
import glob
import io
import json
import math
import os
import random
import shutil
import signal
import sys
import time
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

import data
from methods import phase_index
from minxlt.checkpoints.weights import CheckpointError, check_finite, load_torch_file
from minxlt.parallel import distributed, shard
from minxlt.run import cli, flags
from minxlt.text.token_cache import file_digest


def lengths(items):
    """Every item's tokens (a pair: its longer side; Unicoder's pre-training pair: both sides), from the
    token cache's arrays where it holds the items."""
    if hasattr(items, "lengths"):
        return items.lengths()
    return [max(len(x.ids) for x in it) if isinstance(it, tuple) else len(it.ids) if hasattr(it, "ids") else len(it)
            for it in items]


def evaluation_interval(settings, steps):
    """Steps between evaluations on dev: --eval-every, or with "epoch" an epoch's of the run's `steps`."""
    return max(1, steps // settings.epochs) if settings.eval_every == "epoch" else settings.eval_every


def units(run, item):
    """What a loss averages over in one item: examples, or for word labels the source's scored tokens."""
    item = item[0] if isinstance(item, tuple) else item
    return run.level.units(item) if hasattr(item, "label") else 1


def start_report(settings, run, phases, out, steps, eval_every):
    """What the run will do, said before its first step: its steps and what they draw from, which
    model it tests, what it writes and where, how to stop it and go on; and where --no-group-by-length
    pads a batch much more than grouping would, by how much."""
    task = run.task
    plan = "; ".join(f"{'' if len(phases) == 1 else phase.name + ', '}{phase.steps} step{'s' * (phase.steps != 1)} "
                     f"of {settings.batch_size} from {len(phase.items):,} training items" for phase in phases)
    dev = f"{task.source} dev" if settings.select_on == "source" else "the mean of every language's dev"
    chosen = ("the model after the last step" if settings.select_on == "last" else
              f"the model after the last step, scored on {dev}" if eval_every >= steps else
              f"the best on {dev}, scored every {eval_every} steps")
    lines = [f"{settings.method} on {settings.task}: {plan}; the model {'kept' if settings.no_test else 'tested'} is {chosen}",
             f"writing {out}: log.jsonl, best/ (that model){'' if settings.no_test else ', results.md (its test table)'}; "
             "Ctrl-C stops the run with a checkpoint, and the same command with --resume continues it"]
    if not settings.group_by_length and flags.default_of(settings.method, "group_by_length"):  # off where the loss allows it
        sizes = lengths(phases[0].items)
        share = lambda group: data.padding_share(sizes, data.epoch_batches(sizes, settings.batch_size, 0, settings.seed, group_by_length=group))
        if share(False) - share(True) > 0.1:
            lines.append(f"padding: {100 * share(False):.0f}% of the batches' tokens; --group-by-length would make it {100 * share(True):.0f}%")
    return "\n".join(lines)


def step_batches(settings, method, phases, step, plans):
    """This process's micro-batches of a step, on the CPU, each with its share of the global batch:
    [(batch, share)]. They follow from the step alone (its phase, the epoch's batch order from the
    seed), so a resumed run picks up where it stopped. `plans` keeps the phase's item lengths and
    the epoch's batch order."""
    run = method.run
    index, start = phase_index(phases, step)
    phase = phases[index]
    epoch, position = divmod(step - start, math.ceil(len(phase.items) / settings.batch_size))
    if (phase.name, epoch) not in plans:
        sizes = plans.get(phase.name) or lengths(phase.items)  # once per phase, not per epoch
        plans.clear()
        plans[phase.name] = sizes
        plans[(phase.name, epoch)] = data.epoch_batches(sizes, settings.batch_size, epoch, settings.seed, group_by_length=settings.group_by_length)
    global_batch = plans[(phase.name, epoch)][position]
    items = {i: phase.items[i] for i in global_batch}  # read once (from the token cache, each read builds the item)
    units_of = {i: units(run, item) for i, item in items.items()}
    micro_size, out = settings.batch_size // settings.grad_accum, []
    filled = math.ceil(micro_size / run.world_size) if settings.bucket else None  # static shapes: every batch full (weight 0)
    for micro in range(settings.grad_accum):
        chunk = global_batch[micro * micro_size:(micro + 1) * micro_size]
        index, weights = data.shard(chunk or global_batch[:1], run.rank, run.world_size, filled)
        weights = weights if chunk else [0.0] * len(weights)
        # Each micro-batch's mean loss is weighted by its share of the global batch (in the loss's
        # units: examples, or scored tokens), so that the step's gradient is that of the mean loss
        # over the whole global batch, whatever the process count.
        share = sum(w * units_of[i] for i, w in zip(index, weights)) / sum(units_of[i] for i in global_batch)
        out.append((phase.make_batch([items[i] for i in index], weights, step), share))
    return out


class StepBatches(torch.utils.data.IterableDataset):
    """This process's micro-batches of every step from `start` on, each [(batch, share)] (step_batches).
    A loader worker k of n builds steps start + k, start + k + n, ..., and the loader takes them in
    turn, so the steps come in order however many workers build them."""

    def __init__(self, settings, method, phases, start):
        self.settings, self.method, self.phases, self.start = settings, method, phases, start

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        k, n = (worker.id, worker.num_workers) if worker else (0, 1)
        plans = {}
        for step in range(self.start + k, sum(phase.steps for phase in self.phases), n):
            yield step_batches(self.settings, self.method, self.phases, step, plans)


def batch_loader(settings, method, phases, start):
    """An iterator over the steps' micro-batches from step `start` on, built by --workers processes
    ahead of the step and pinned in page-locked memory on CUDA, so that the copies to the device do
    not wait."""
    cuda = method.run.device.startswith("cuda")
    workers = loader_workers(settings.workers, cuda, batches_run_a_model(method), settings.shard)
    loader = torch.utils.data.DataLoader(StepBatches(settings, method, phases, start), batch_size=None, num_workers=workers,
                                         pin_memory=cuda, prefetch_factor=4 if workers else None, worker_init_fn=ignore_ctrl_c,
                                         generator=torch.Generator())  # its own: drawing from the global one would change dropout
    return iter(loader)


def ignore_ctrl_c(worker):
    """A loader process leaves Ctrl-C to the training process, which stops at the step it agrees on
    with the others (StopRequest) and needs the batches up to it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def batches_run_a_model(method):
    """Whether making a batch runs a model: a teacher (FILTER's, X-Mixup's) whose logits are not all cached."""
    teacher = getattr(method, "teacher", None)
    return teacher is not None and teacher.model is not None and not teacher.complete


def loader_workers(asked, cuda, batches_run_a_model, sharded=False):
    """--workers, or by default 2 on CUDA and none on the CPU, whose cores the step needs. None
    where making a batch runs a model (a teacher) on CUDA, which a forked worker cannot use, or
    sharded, whose layers gather with the other training processes."""
    if batches_run_a_model and (cuda or sharded):
        if asked:
            where = "sharded (its layers gather with every training process)" if sharded else "on CUDA"
            print(f"note: --workers {asked} ignored: making a batch runs the teacher {where}, which loader processes cannot do",
                  file=sys.stderr)
        return 0
    return asked if asked is not None else 2 if cuda else 0


def selection_score(select_on, dev, source):
    """The dev score that --select-on selects by: the source's, or the mean of every language's
    (X-Mixup Sec. 5.1: "the averaged performance of all languages on the dev set"); with "last",
    the source's, logged, while the last model is kept whatever it scores."""
    return sum(dev.values()) / len(dev) if select_on == "all" else dev[source]


class StopRequest:
    """Ctrl-C (SIGINT), or SIGTERM as schedulers such as SLURM send before a kill, asks the run to
    stop at its next log record and save a checkpoint; a second one aborts at once. The handlers
    are the run's while the `with` block lasts, however it ends. Where another process of the run
    stops (killed), the collective that waits for it fails: the run stops with one line that says
    so and names the last checkpoint of `book`."""
    signals = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, book):
        self.book = book

    def __enter__(self):
        self.requested = False
        self.previous = {s: signal.signal(s, self.handle) for s in self.signals}
        return self

    def handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print(f"\n{signal.Signals(signum).name}: stopping after this step (several processes: at the next log record, "
              "--log-every) to save a checkpoint (once more to abort)", file=sys.stderr)

    def __exit__(self, kind, error, trace):
        for s, handler in self.previous.items():
            signal.signal(s, handler)
        gone = distributed.lost_process(error)
        if gone:
            raise ConnectionError(errno.ECONNRESET, f"step {self.book.step}: another process of the run stopped "
                                  f"({gone}), and this one cannot go on without it; {self.book.last_checkpoint()}"
                                  ) from None


class Divergence:
    """A run diverges when its logged loss is not finite, or when its mean over the last `window`
    log records of a phase (about 20 steps: Book makes it ceil(20 / --log-every)) stays above
    `factor` times (and 1 above) the phase's first logged loss."""

    def __init__(self, factor=5.0, window=20, log_every=1):
        self.factor, self.window, self.log_every = factor, window, log_every
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
            return (f"the loss has averaged {mean:.4g} over the last {self.window * self.log_every} steps, against {self.start:.4g} "
                    "at the start")
        return None

    def ended(self):
        """At the end of a run, however short: what is wrong where its last logged loss is `factor`
        times (and 1 above) its phase's first, else None."""
        if self.start is None or not self.recent:
            return None
        last = self.recent[-1]
        if last > self.factor * self.start and last > self.start + 1:
            return f"the loss ended at {last:.4g}, against {self.start:.4g} at the start of {self.phase}"
        return None


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


@dataclass
class State:
    """Where the loop is: what the checkpoint saves besides the model, optimizer and RNG."""
    step: int = 0
    best: float = -1.0         # the best dev score so far
    best_step: int = -1
    alignment_before: dict | None = None  # CKA and retrieval of the pretrained encoder
    saved_step: int | None = None         # the step of the last checkpoint written
    stale: int = 0                        # evaluations on dev since the best (--patience)
    metric: str | None = None             # the dev score selected on


FAILED_WRITE = (OSError, RuntimeError)  # a full disk, a folder that cannot be written
# Sharded, every process takes part in a write: whatever fails on one is told to all (distributed.first_error), none left waiting.
FAILED_WRITE_SHARDED = (Exception, shard.CheckpointException)


class Lines:
    """The progress bar's stream where stderr is not a terminal (a file, a pipe): each refresh a line
    of its own and no blank ones, so that a record said between two (tqdm.write) starts a line too."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        line = text.replace("\r", "").rstrip()
        if line:
            self.stream.write(line + "\n")

    def flush(self):
        self.stream.flush()


class Book:
    """The run's bookkeeping in OUT: the log, the loop's state, the resume checkpoint and OUT/best.
    Made before the model loads, it refuses a --resume whose checkpoint belongs to another run."""

    def __init__(self, out, settings, run, model_dir, phases, owns_process_group=True):
        self.out, self.settings, self.run, self.owns_process_group = out, settings, run, owns_process_group
        self.steps = sum(phase.steps for phase in phases)  # --max-steps, or what --epochs counts
        self.eval_every = evaluation_interval(settings, self.steps)
        if run.rank == 0:
            print(start_report(settings, run, phases, out, self.steps, self.eval_every), file=sys.stderr)
        self.writing, self.checkpoint_group = None, None  # a sharded checkpoint being written (finish_checkpoint)
        self.identity = run_identity(settings, run, model_dir)
        self.files = distributed.gather(data_files(settings) if run.rank == 0 else None)[0]  # read by process 0 alone
        if settings.resume:
            self.saved = load_checkpoint(out, self.identity, self.files, settings.resume_changed, run.rank)
        else:
            self.saved = None
        if settings.overwrite and run.rank == 0:
            cli.clear_run(out)

    @property
    def step(self):
        return self.state.step

    def start(self, core, optimizer, scheduler, scaler, alignment_before):
        """The loop's state: fresh, or as the resume checkpoint left it (--resume), loaded into the
        model, optimizer, scheduler and scaler. Then the progress bar and the log window."""
        saved, window = self.saved, None
        self.state = State(alignment_before=alignment_before)
        if saved is not None:
            resume(self.out, saved, core, optimizer, scheduler, scaler, self.run.rank, self.run.world_size)
            self.state = State(**{key: saved.get(key) for key in ("step", "best", "best_step", "alignment_before", "metric")},
                               saved_step=saved["step"],
                               stale=saved.get("stale", 0))
            window = saved.get("window")  # a resumed run's steps since the last record count in the next
        self.saved = None
        settings = self.settings
        self.window = Window(window, self.run.rank, self.run.device)
        self.divergence = Divergence(window=math.ceil(20 / settings.log_every), log_every=settings.log_every)
        terminal = sys.stderr.isatty()  # else a file or a pipe: the bar a line at a time, a minute apart
        self.progress = tqdm(total=self.steps, initial=self.step, disable=self.run.rank != 0,
                             desc=f"{settings.method} on {settings.task}", mininterval=0.1 if terminal else 60,
                             file=sys.stderr if terminal else Lines(sys.stderr), dynamic_ncols=True)
        self.started = time.time()

    def evaluates(self):
        """Whether the step just done is followed by an evaluation on dev: every --eval-every steps
        (with --select-on last, none before the end), and after the last."""
        return self.step == self.steps or (self.step % self.eval_every == 0 and self.settings.select_on != "last")

    def record(self, phases, losses, lr, stop_requested):
        """Count a step done, with its losses ({name: tensor on the device}); every --log-every
        steps, at a phase's first and last steps and before an evaluation, read them (every
        process at once: the one wait for the device), stop a diverging run, and write a log
        record. Returns whether the run stops here (a stop request, agreed at a record)."""
        self.window.add(losses)
        self.state.step += 1
        self.progress.update(1)
        index, start = phase_index(phases, self.step - 1)  # the phase of the step just done
        at_phase_edge = self.step == start + 1 or phase_index(phases, self.step)[0] != index
        if not (self.evaluates() or self.step % self.settings.log_every == 0 or at_phase_edge):
            return stop_requested and self.run.world_size == 1  # alone, a process stops at once
        stats, stopping = self.window.read(stop_requested, self.run.device)
        self.diverged(self.divergence.check(phases[index].name, stats["loss"]))
        self.log({"step": self.step, "loss": stats.pop("loss"), "lr": lr, "seconds": round(time.time() - self.started, 3), **stats})
        self.progress.set_postfix(loss=f"{self.window.last:.4f}", refresh=False)  # shown at the next refresh
        return stopping

    def record_dev(self, metric, dev, source):
        """Log dev scores ({lang: score} of `metric`) and say them on the console; whether the
        model is the best so far, as --select-on scores it (it becomes the state's best)."""
        dev = distributed.gather(dev)[0]  # process 0's scores: every process must agree on the best (a sharded save is collective)
        score = selection_score(self.settings.select_on, dev, source)
        state, best = self.state, score > self.state.best or self.settings.select_on == "last"
        self.log({"step": state.step, f"dev_{metric}": dev})
        state.metric = metric
        if best:
            state.best, state.best_step = score, state.step
        state.stale = 0 if best else state.stale + 1
        if self.run.rank == 0:
            scores = ", ".join(f"{lang} {100 * value:.1f}" for lang, value in dev.items())
            self.progress.write(f"step {state.step}: loss {self.window.last:.4f}, dev {metric} {scores} "
                                f"(best {100 * state.best:.1f} at step {state.best_step})", file=sys.stderr)
        return best

    def finish(self, stopped):
        """After the loop: a checkpoint still being written (--async-checkpoint) put in place, the progress
        bar closed; a run that went wrong says so, however short (Divergence needs about 20 steps of log
        to stop one): a warning naming the learning rate, kept for results.json (`self.warning`)."""
        self.finish_checkpoint()
        self.progress.close()
        if stopped and self.run.rank == 0:
            print(f"stopped at step {self.step}; continue with the same command and --resume", file=sys.stderr)
        problem = self.divergence.ended()
        self.warning = problem and (f"{problem}: the run went wrong; try a lower --lr (now {self.settings.lr})"
                                    + (", --amp bf16 or none instead of fp16" if self.settings.amp == "fp16" else ""))
        if self.warning and self.run.rank == 0:
            print(f"warning: {self.warning}", file=sys.stderr)

    def out_of_patience(self):
        """Whether --patience evaluations on dev have passed without a better score: the run stops
        early, as XTREME's and XLM-R's fine-tuning recipes stop, and its best model is tested."""
        patience = self.settings.patience
        if not patience or self.state.stale < patience:
            return False
        if self.run.rank == 0:
            self.progress.write(f"step {self.step}: no better dev score in {patience} evaluations (--patience {patience}): "
                                f"stopping early; the best, of step {self.state.best_step}, is tested", file=sys.stderr)
        return True

    def log(self, record):
        """A record ({"step": ..., name: number or {lang: number}}) on a line of OUT/log.jsonl, and
        as TensorBoard scalars."""
        if self.run.rank == 0:
            with open(self.out / "log.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")
            tensorboard(self.out, record)

    def diverged(self, problem):
        """Stop a diverging run (Divergence) with advice, naming the last checkpoint if there is one."""
        if problem is None:
            return
        self.progress.close()
        try:
            self.finish_checkpoint()  # one still being written in the background (--async-checkpoint), before the group goes
        except OSError:
            pass  # the previous one stays, as the message below says
        settings, state = self.settings, self.state
        if self.run.rank == 0:
            print(f"error: step {state.step}: {problem}: the run is diverging; try a lower --lr (now {settings.lr}), --amp bf16 or "
                  f"none instead of fp16, or --max-grad-norm 1.0; {self.last_checkpoint()}", file=sys.stderr)
        if self.owns_process_group:
            distributed.cleanup()
        sys.exit(1)

    def last_checkpoint(self):
        """Where a run that stops now goes on from: its last checkpoint and step, or none yet."""
        if self.state.saved_step is None:
            return f"no checkpoint was written yet (the first comes at step {self.settings.save_every})"
        path = self.out / ("checkpoint" if self.settings.shard else "checkpoint.pt")
        return (f"the last checkpoint is {path}, of step {self.state.saved_step}: the same command with --resume "
                "continues from it")

    def save_checkpoint(self, core, optimizer, scheduler, scaler):
        """OUT/checkpoint.pt: everything a resumed run needs, every process's RNG state and losses
        since the last log record included; written by rank 0 to a new file that then replaces the
        old, so that the old one survives a failed write (a full disk). A sharded run's is the folder
        OUT/checkpoint/ (shard.py): each process writes its shards, rank 0 the rest as state.pt, put
        in place by finish_checkpoint, at once or (--async-checkpoint) when the next one starts."""
        self.finish_checkpoint()  # the previous one, if it is still being written
        states, windows = distributed.gather(rng_state()), distributed.gather(self.window.state())
        state, rank = self.state, self.run.rank
        rest = {"scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), **{k: v for k, v in asdict(state).items() if k != "saved_step"},
                "rng": states, "settings": self.settings.as_dict(), "identity": self.identity, "files": self.files,
                "window": windows}
        if shard.sharded(core):
            if self.settings.async_checkpoint and self.checkpoint_group is None:  # made once, by every process at once
                self.checkpoint_group = torch.distributed.new_group(backend="gloo")
            written, staging_failed = Future(), False
            try:
                written = shard.save(self.out / "checkpoint.tmp", core, optimizer, rank, self.checkpoint_group)
            except FAILED_WRITE_SHARDED as e:
                written.set_exception(e)
                staging_failed = isinstance(e, shard.StagingFailed)  # raised on every process at once: stop now
            rest_bytes = io.BytesIO()
            torch.save(rest, rest_bytes)  # as it is now: the write may end steps later
            self.writing = (written, rest_bytes.getvalue(), state.step)
            if not self.settings.async_checkpoint or staging_failed:
                self.finish_checkpoint()
            return
        path = self.out / "checkpoint.pt"
        tmp = path.with_name(path.name + ".tmp")
        try:
            if rank == 0:
                torch.save(dict(rest, model=core.state_dict(), optimizer=optimizer.state_dict()), tmp)
                os.replace(tmp, path)
        except FAILED_WRITE as e:
            tmp.unlink(missing_ok=True)
            self.failed_checkpoint(path, shard.reason(e))
        self.checkpoint_written(sharded=False)

    def finish_checkpoint(self):
        """Put a sharded run's checkpoint (save_checkpoint) in place once every process has written
        its shards: rank 0 adds state.pt and swaps OUT/checkpoint.tmp for OUT/checkpoint. Every
        process calls this at once; where a write failed on any, every one stops with its reason."""
        if self.writing is None:
            return
        (written, rest, step), self.writing, problem = self.writing, None, None
        path, tmp = self.out / "checkpoint", self.out / "checkpoint.tmp"
        try:
            written.result()
            if self.run.rank == 0:
                (tmp / "state.pt").write_bytes(rest)
                cli.replace_dir(tmp, path)
        except FAILED_WRITE_SHARDED as e:
            problem = shard.reason(e)
            if self.run.rank == 0:
                shutil.rmtree(tmp, ignore_errors=True)
        problem = distributed.first_error(problem)  # every process stops with rank 0's failure
        if problem:
            self.failed_checkpoint(path, problem)
        self.checkpoint_written(sharded=True, step=step)

    def failed_checkpoint(self, path, problem):
        """Stop with a failed write's reason, naming the checkpoint that is still whole."""
        saved_step = self.state.saved_step
        kept = f"the checkpoint of step {saved_step} is whole" if saved_step is not None else "no checkpoint is kept"
        raise OSError(errno.EIO, f"writing the checkpoint failed ({problem}); {kept}. Is the disk full? "
                                 "Free some space and continue with --resume", str(path))

    def checkpoint_written(self, sharded, step=None):
        """A checkpoint of `step` (default: this one) is in place: the state says so."""
        if self.run.rank == 0:  # the other kind, from a run of the same folder with(out) --shard, is now older
            stale = self.out / ("checkpoint.pt" if sharded else "checkpoint")
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)
        self.state.saved_step = self.state.step if step is None else step

    def save_best(self, model, tokenizer, info):
        """OUT/best: the model alone, with task.json (`info`, and the best step and score), written by
        rank 0 aside and swapped into place, so that a failed write leaves the previous best."""
        sharded = shard.sharded(model)
        if self.run.rank != 0 and not sharded:
            return
        info = dict(info, step=self.state.best_step, **{f"dev_{self.state.metric}": self.state.best})
        tmp, problem, caught = self.out / "best.tmp", None, FAILED_WRITE_SHARDED if sharded else FAILED_WRITE
        if self.run.rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        cast = SAVED_DTYPES[self.settings.save_dtype]  # --save-dtype bf16: each file's tensors as they are written
        try:
            if sharded:  # each file's tensors gathered in turn to process 0's host memory (shard.on_first_host), which writes them
                whole = shard.on_first_host if cast is None else lambda tensor: cast(shard.on_first_host(tensor))
                model.save(tmp, tokenizer, info, whole=whole, write=self.run.rank == 0)
            else:
                model.save(tmp, tokenizer, info, whole=cast)
            if self.run.rank == 0:
                cli.replace_dir(tmp, self.out / "best")
        except caught as e:
            problem = shard.reason(e)
            if self.run.rank == 0:
                shutil.rmtree(tmp, ignore_errors=True)
        problem = distributed.first_error(problem) if sharded else problem  # every process stops with rank 0's failure
        if problem:
            raise OSError(errno.EIO, f"writing the best model failed ({problem}); the previous one is whole. "
                                     "Is the disk full? Free some space and continue with --resume", str(self.out / "best"))


    def close(self, stopped):
        """--no-keep-checkpoint: OUT/checkpoint.pt (or OUT/checkpoint/) removed, unless the run `stopped`
        before its end (it is what --resume continues); then OUT is given up to other runs."""
        if not (self.settings.keep_checkpoint or stopped or self.run.rank != 0):
            for name in ("checkpoint.pt", "checkpoint", "checkpoint.old"):
                path = self.out / name
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        cli.release(self.out)  # a run that fails gives it up when its process ends


def as_bf16(tensor):
    """A floating-point tensor in bf16 (None, on the processes that write nothing, stays None)."""
    return tensor.to(torch.bfloat16) if tensor is not None and tensor.is_floating_point() else tensor


SAVED_DTYPES = {"float32": None, "bf16": as_bf16}  # --save-dtype: what each tensor of OUT/best goes through
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


def run_identity(settings, run, model_dir):
    """What a checkpoint must share with the command that resumes it: the method, the task and
    its languages, the model and its tokenizer."""
    return {"method": settings.method, "task": settings.task, "data": str(Path(settings.data).resolve()) if settings.data else None,
            "languages": [run.task.source, *run.task.targets], "model": str(Path(model_dir).resolve()),
            "tokenizer": run.tokenizer.fingerprint()}


DATA_FLAGS = ("extra_train", "dev_translations", "test_translations", "round_trip", "soft_labels", "parallel")  # files


def data_files(settings):
    """{file: [bytes, SHA-256]} of the files a run reads its examples from, which its checkpoint
    keeps: every file in --data (hidden ones aside: download.py's archives; the run's own --out), and those the flags
    of DATA_FLAGS name ({lang} in a path: every language's; --parallel: XX_FILE,EN_FILE)."""
    given, paths, out = settings.as_dict(), [], Path(settings.out).resolve()
    if given.get("data"):  # the run's own folder left out, where it is in --data
        data = Path(given["data"])
        paths = [p for p in data.rglob("*") if not any(part.startswith(".") for part in p.relative_to(data).parts)
                 and not p.resolve().is_relative_to(out)]
    for flag in DATA_FLAGS:
        values = given.get(flag) or []
        for value in values if isinstance(values, list) else [values]:
            paths += [Path(p) for part in str(value).split(",") for p in glob.glob(part.replace("{lang}", "*"))]
    return {str(p.resolve()): [p.stat().st_size, file_digest(p)] for p in sorted(set(paths)) if p.is_file()}


def changed_files(saved, files):
    """The files that differ between two data_files: 'file (changed)', '(new)' or '(gone)'."""
    return [f"{name} ({'new' if name not in saved else 'gone' if name not in files else 'changed'})"
            for name in sorted(set(saved) | set(files)) if saved.get(name) != files.get(name)]


def load_checkpoint(out, identity, files=None, changed_ok=False, rank=0):
    """OUT/checkpoint.pt, or a sharded run's OUT/checkpoint/ (its state.pt here; the model and the
    optimizer when they load, in resume), refused unless it was written by this run (the same
    identity), from the same files (data_files), unless `changed_ok` (--resume-changed)."""
    path = cli.latest_checkpoint(out)
    if path is None:
        raise CheckpointError(f"{out / 'checkpoint.pt'}: not found, nor a sharded run's checkpoint/")
    sharded = path.name == "state.pt"
    saved = load_torch_file(path, "checkpoint")
    needed = {"scheduler", "scaler", "step", "rng"} | (set() if sharded else {"model", "optimizer"})
    if not isinstance(saved, dict) or not needed <= set(saved):
        raise CheckpointError(f"{path}: not a checkpoint written by train.py")
    if sharded:
        saved["sharded"] = path.parent
    else:
        check_finite(saved["model"], path)
    theirs = saved.get("identity") or {key: saved.get("args", {}).get(key) for key in ("method", "task")}
    different = [f"{key} {theirs[key]!r} there, {identity[key]!r} here" for key in theirs if theirs[key] != identity.get(key)]
    if different:
        raise CheckpointError(f"{path} belongs to another run ({'; '.join(different)}): resume with that run's settings, or "
                              "start afresh with --overwrite or another --out")
    changed = changed_files(saved["files"], files) if saved.get("files") is not None and files is not None else []
    named = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    if changed and not changed_ok:
        raise CheckpointError(f"{path}: the files the run reads are not those it was trained on: {named}; a resumed "
                              "run would not continue the same run: start afresh with --overwrite, or continue "
                              "knowingly with --resume-changed")
    if changed and rank == 0:
        print(f"note: --resume-changed: continuing over files changed since the checkpoint: {named}", file=sys.stderr)
    return saved


def resume(out, saved, core, optimizer, scheduler, scaler, rank, world_size):
    """Load a checkpoint (load_checkpoint) into the model, optimizer, scheduler and scaler, and
    the RNG states; drop the log's records of later steps, which the resumed run logs again. A
    sharded run's checkpoint loads on any number of processes, sharded or not (shard.load)."""
    path = saved.get("sharded") or out / "checkpoint.pt"
    if shard.sharded(core) and "sharded" not in saved:
        raise CheckpointError(f"{path} was written by a run without --shard: resume it without --shard (a sharded run's "
                              "checkpoint, OUT/checkpoint/, resumes either way)")
    try:
        if "sharded" in saved:
            shard.load(path, core, optimizer)
            problems = [p for p in distributed.gather(shard.non_finite(core)) if p]
            if problems:
                raise CheckpointError(f"{path}: {problems[0]}")
        else:
            core.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        scaler.load_state_dict(saved["scaler"])
    except (RuntimeError, ValueError, KeyError, shard.CheckpointException) as e:
        raise CheckpointError(f"{path}: does not fit this model ({shard.reason(e)}); "
                              "start afresh with --overwrite or another --out") from None
    if len(saved["rng"]) == world_size:
        set_rng_state(saved["rng"][rank])
    elif rank == 0:
        print(f"note: resuming {len(saved['rng'])}-process run on {world_size}: dropout draws will differ", file=sys.stderr)
    if rank == 0:
        cli.keep_log_until(out / "log.jsonl", saved["step"])
