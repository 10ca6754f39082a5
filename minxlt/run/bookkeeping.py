"""What train.py's loop does around the step, which its reader can skip: the batch plan (StepBatches, built ahead by
loader processes), the log, stop requests, divergence, the resume checkpoint (OUT/checkpoint.pt, or a sharded run's
OUT/checkpoint/) and OUT/best."""
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
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
from tqdm import tqdm

import data
from methods import own_flags, phase_index
from minxlt.checkpoints.weights import CheckpointError, check_finite, load_torch_file
from minxlt.parallel import distributed, shard
from minxlt.run import cli, flags
from minxlt.text.token_cache import file_digest


def lengths(items):
    """Every item's tokens (a pair: its longer side), from the token cache's arrays where it holds the items."""
    if hasattr(items, "lengths"):
        return items.lengths()
    return [max(len(x.ids) for x in it) if isinstance(it, tuple) else len(it.ids) if hasattr(it, "ids") else len(it)
            for it in items]


@dataclass
class StepBatches(torch.utils.data.IterableDataset):
    """Every step's micro-batches from step `start` on: this process's [(batch, share of the global batch)]."""
    settings: object  # the run's (flags.Settings)
    method: object  # its run: the task's level, this process's rank among how many
    phases: list
    start: int = 0

    def __iter__(self):
        """Worker k of n builds steps start + k, start + k + n, ..., each from the step alone (its phase, the epoch's
        order from the seed), so that a resume picks up where it stopped."""
        worker = torch.utils.data.get_worker_info()
        k, n = (worker.id, worker.num_workers) if worker else (0, 1)
        settings, run, phases, plans = self.settings, self.method.run, self.phases, {}
        for step in range(self.start + k, sum(phase.steps for phase in phases), n):
            index, start = phase_index(phases, step)
            phase = phases[index]
            epoch, position = divmod(step - start, math.ceil(len(phase.items) / settings.batch_size))
            if (phase.name, epoch) not in plans:  # the phase's lengths, once; its epoch's order of batches
                sizes = plans.get(phase.name) or lengths(phase.items)
                order = data.epoch_batches(sizes, settings.batch_size, epoch, settings.seed,
                                           group_by_length=settings.group_by_length)
                plans = {phase.name: sizes, (phase.name, epoch): order}
            global_batch = plans[(phase.name, epoch)][position]
            items = {i: phase.items[i] for i in global_batch}  # read once (from the token cache, each read builds it)
            firsts = {i: item[0] if isinstance(item, tuple) else item for i, item in items.items()}
            units_of = {i: run.level.units(x) if hasattr(x, "label") else 1 for i, x in firsts.items()}  # or tokens
            micro_size, out = settings.batch_size // settings.grad_accum, []
            filled = math.ceil(micro_size / run.world_size) if settings.bucket else None  # static shapes: weight 0
            for micro in range(settings.grad_accum):
                chunk = global_batch[micro * micro_size:(micro + 1) * micro_size]
                index, weights = data.shard(chunk or global_batch[:1], run.rank, run.world_size, filled)
                weights = weights if chunk else [0.0] * len(weights)
                # weighted by its share of the global batch in the loss's units, the step's gradient is that of the
                # global batch's mean loss, whatever the process count
                share = sum(w * units_of[i] for i, w in zip(index, weights)) / sum(units_of[i] for i in global_batch)
                out.append((phase.make_batch([items[i] for i in index], weights, step), share))
            yield out


def batch_loader(settings, method, phases, start):
    """The steps' micro-batches from step `start` on, built ahead by --workers processes (by default 2 on CUDA and
    none on the CPU; pinned on CUDA), or by this one where making a batch runs a teacher on CUDA or sharded."""
    cuda, teacher = method.run.device.startswith("cuda"), getattr(method, "teacher", None)
    workers = settings.workers if settings.workers is not None else 2 if cuda else 0
    # a teacher (FILTER's, X-Mixup's) whose logits are not all cached runs in make_batch: a forked process cannot
    # on CUDA, nor sharded (its layers gather with every training process)
    if teacher is not None and teacher.model is not None and not teacher.complete and (cuda or settings.shard):
        if settings.workers:
            where = "sharded (its layers gather with every training process)" if settings.shard else "on CUDA"
            print(f"note: --workers {settings.workers} ignored: making a batch runs the teacher {where}, which loader "
                  "processes cannot do", file=sys.stderr)
        workers = 0
    # its own generator: drawing from the global one would change dropout
    return iter(torch.utils.data.DataLoader(StepBatches(settings, method, phases, start), batch_size=None,
                                            num_workers=workers, pin_memory=cuda, generator=torch.Generator(),
                                            prefetch_factor=4 if workers else None, worker_init_fn=ignore_stop_signals))


def ignore_stop_signals(worker):
    """A loader process leaves Ctrl-C and SIGTERM (sent to the whole process group by `timeout`, `kill -- -PGID`, some
    schedulers) to the training process, which stops at a step it agrees on (stop_requests)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


@dataclass
class State:
    """Where the loop is, besides its step: what the checkpoint saves besides the model, optimizer and RNG."""
    best: float = -1.0         # the best dev score so far
    best_step: int = -1
    saved_step: int | None = None         # the step of the last checkpoint written
    stale: int = 0                        # evaluations on dev since the best (--patience)
    metric: str | None = None             # the dev score selected on


FAILED_WRITE = (OSError, RuntimeError)  # a full disk, a folder that cannot be written
# Sharded, a failure on one process is told to all (distributed.first_error), none left waiting.
FAILED_WRITE_SHARDED = (Exception, shard.CheckpointException)
DATA_FLAGS = ("extra_train", "dev_translations", "test_translations", "round_trip", "soft_labels", "parallel")  # files
WRITERS = {}  # OUT -> its TensorBoard writer, or None without TensorBoard


class Book:
    """The run's bookkeeping in OUT: the log, the loop's state, the resume checkpoint and OUT/best."""

    def __init__(self, out, settings, run, model_dir, phases, owns_process_group=True):
        self.out, self.settings, self.run, self.owns_process_group = out, settings, run, owns_process_group
        self.steps = sum(phase.steps for phase in phases)  # --max-steps, or what --epochs counts
        epoch = settings.eval_every == "epoch"  # evaluations on dev every --eval-every steps, or an epoch's
        self.eval_every = max(1, self.steps // settings.epochs) if epoch else settings.eval_every
        if run.rank == 0:  # what the run will do, said before its first step
            plan = "; ".join(f"{'' if len(phases) == 1 else phase.name + ', '}{phase.steps} step"
                             f"{'s' * (phase.steps != 1)} of {settings.batch_size} from {len(phase.items):,} training "
                             "items" for phase in phases)
            dev = f"{run.task.source} dev" if settings.select_on == "source" else "the mean of every language's dev"
            chosen = ("the model after the last step" if settings.select_on == "last" else
                      f"the model after the last step, scored on {dev}" if self.eval_every >= self.steps else
                      f"the best on {dev}, scored every {self.eval_every} steps")
            kept, table = ("kept", "") if settings.no_test else ("tested", ", results.md (its test table)")
            print(f"{settings.method} on {settings.task}: {plan}; the model {kept} is {chosen}\nwriting {out}: "
                  f"log.jsonl, best/ (that model){table}; Ctrl-C stops the run with a checkpoint, and the same command "
                  "with --resume continues it", file=sys.stderr)
            if not settings.group_by_length and flags.default_of(settings.method, "group_by_length"):  # as it may
                sizes = lengths(phases[0].items)  # how much grouping by length would cut the padding
                plans = [data.epoch_batches(sizes, settings.batch_size, 0, settings.seed, group_by_length=group)
                         for group in (False, True)]
                ungrouped, grouped = (data.padding_share(sizes, plan) for plan in plans)
                if ungrouped - grouped > 0.1:
                    print(f"padding: {100 * ungrouped:.0f}% of the batches' tokens; --group-by-length would make it "
                          f"{100 * grouped:.0f}%", file=sys.stderr)
        self.writing, self.checkpoint_group = None, None  # a sharded checkpoint being written (finish_checkpoint)
        # what a checkpoint must share with the command that resumes it: its inputs, and the settings that shape
        # what it trains (the method's own flags too); the others (--workers, --save-every, ...) may change
        shaping = SHAPING + tuple(f.name for f in own_flags(flags.METHODS[settings.method]) if f.metadata)
        shaping += ("doc_stride",) if run.level.name == "span" else ()  # QA's windows
        given = vars(settings)  # every setting, the method's own too
        self.identity = {"method": settings.method, "task": settings.task,
                         "data": str(Path(settings.data).resolve()) if settings.data else None,
                         "languages": [run.task.source, *run.task.targets], "model": str(Path(model_dir).resolve()),
                         "tokenizer": run.tokenizer.fingerprint(), **{name: given[name] for name in shaping}}
        # {file: [bytes, SHA-256]} of the files the run reads, read by process 0: those of --data (hidden ones and
        # the run's own --out aside), its splits' files outside it (SQuAD beside MLQA's or XQuAD's folder) and those
        # DATA_FLAGS name ({lang}: every language's; --parallel: XX,EN)
        files, paths = None, []
        if run.rank == 0:
            if given.get("data"):
                folder, own, layout = Path(given["data"]), Path(settings.out).resolve(), run.task.train.layout
                hidden = lambda p: any(part.startswith(".") for part in p.relative_to(folder).parts)
                paths = [p for p in folder.rglob("*") if not hidden(p) and not p.resolve().is_relative_to(own)]
                paths += [Path(layout.split_file(lang, split)) for lang in self.identity["languages"]
                          for split in ("train", "dev", "test")] if layout else []
            for flag in DATA_FLAGS:
                values = given.get(flag) or []
                for value in values if isinstance(values, tuple) else [values]:
                    paths += [Path(p) for part in str(value).split(",") for p in glob.glob(part.replace("{lang}", "*"))]
            files = {str(p.resolve()): [p.stat().st_size, file_digest(p)] for p in sorted(set(paths)) if p.is_file()}
        self.files = distributed.gather(files)[0]
        self.saved = (load_checkpoint(out, self.identity, self.files, settings.resume_changed, run.rank)
                      if settings.resume else None)
        if settings.overwrite and run.rank == 0:  # the run OUT holds, and what its writes left half done
            for path in [out / name for name in cli.RUN_FILES + cli.LEFTOVERS]:
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)

    def start(self, core, optimizer, scheduler, scaler):
        """The loop's state, fresh or as --resume's checkpoint left it (loaded into the model...); the progress bar."""
        saved, window, settings, rank = self.saved, None, self.settings, self.run.rank
        self.step, self.state = 0, State()
        if saved is not None:
            resume(self.out, saved, core, optimizer, scheduler, scaler, rank, self.run.world_size, settings.shard)
            self.step = saved["step"]
            self.state = State(**{key: saved.get(key) for key in ("best", "best_step", "metric")},
                               saved_step=saved["step"], stale=saved.get("stale", 0))
            best = self.out / "best" / "task.json"  # the stopped run's best, if it came after the checkpoint: kept
            info = json.loads(best.read_text(encoding="utf-8")) if best.is_file() else {}
            scores = [key[4:] for key, value in info.items() if key.startswith("dev_") and type(value) in (int, float)]
            metric = self.state.metric or next(iter(scores), None)  # dev_<metric>, not dev_translations
            if (info.get("step") or 0) > saved["step"] and f"dev_{metric}" in info:
                self.state.best, self.state.best_step, self.state.metric = info[f"dev_{metric}"], info["step"], metric
                self.state.stale = 0
            window = saved.get("window")  # a resumed run's steps since the last record count in the next
        self.saved, self.sums, self.counts, self.last_loss = None, {}, {}, float("nan")  # losses since the last record
        if window:  # one {name: (sum, count)} per process; on another process count, rank 0 takes their total
            mine = window[rank] if len(window) == self.run.world_size else None
            for name, (total, count) in window[0].items():
                total = (mine[name][0] if mine else sum(part[name][0] for part in window) if rank == 0
                         else torch.zeros_like(total))
                self.sums[name], self.counts[name] = total.to(self.run.device), count
        self.loss_phase, self.first_loss, self.recent_losses = None, None, []  # for Book.divergence
        # on a terminal, the bar; in a file or a pipe, a line a minute, and none blank, so that a record starts one
        terminal = sys.stderr.isatty()
        lines = SimpleNamespace(flush=sys.stderr.flush, write=lambda text: (line := text.replace("\r", "").rstrip())
                                and sys.stderr.write(line + "\n"))
        self.progress = tqdm(total=self.steps, initial=self.step, disable=rank != 0,
                             desc=f"{settings.method} on {settings.task}", mininterval=0.1 if terminal else 60,
                             file=sys.stderr if terminal else lines, dynamic_ncols=True)
        self.started = time.time()

    @contextmanager
    def stop_requests(self):
        """Ctrl-C or SIGTERM (SLURM's warning) stops the run at its next log record with a checkpoint, a second one at
        once; a process of the run that dies stops the others with one line naming the last checkpoint."""
        def request(signum, frame):
            if self.stop_requested:
                raise KeyboardInterrupt
            self.stop_requested = True
            print(f"\n{signal.Signals(signum).name}: stopping after this step (several processes: at the next log "
                  "record, --log-every, within torchrun's --shutdown-timeout) to save a checkpoint (once more to "
                  "abort)", file=sys.stderr)
        self.stop_requested, gone = False, None
        previous = {s: signal.signal(s, request) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        except RuntimeError as error:
            gone = distributed.lost_process(error)
            if gone:
                raise ConnectionError(errno.ECONNRESET, f"step {self.step}: another process of the run stopped "
                                      f"({gone}), and this one cannot go on without it; {self.last_checkpoint()}"
                                      ) from None
            raise
        finally:  # torchrun SIGTERMs the others when one dies: let this one say why
            for s, handler in previous.items():
                signal.signal(s, signal.SIG_IGN if gone and s == signal.SIGTERM else handler)

    def stop_asked(self):
        """Whether a stop was asked of any process (a Ctrl-C while dev was scored): every process agrees, at once."""
        return distributed.all_reduce(torch.tensor(float(self.stop_requested), device=self.run.device)).item() > 0

    def evaluates(self):
        """Whether dev is scored after this step: every --eval-every steps (not with --select-on last), and the last."""
        return self.step == self.steps or (self.step % self.eval_every == 0 and self.settings.select_on != "last")

    def record(self, phases, losses, lr):
        """Count a step done, its losses summed on the device; every --log-every steps, at a phase's edges and before
        an evaluation, read them on every process at once, stop a diverging run, log them. Whether the run stops."""
        for name, value in losses.items():
            self.sums[name] = self.sums[name] + value if name in self.sums else torch.as_tensor(value)
            self.counts[name] = self.counts.get(name, 0) + 1
        self.step += 1
        self.progress.update(1)
        index, start = phase_index(phases, self.step - 1)  # the phase of the step just done
        at_phase_edge = self.step == start + 1 or phase_index(phases, self.step)[0] != index
        if not (self.evaluates() or self.step % self.settings.log_every == 0 or at_phase_edge):
            return self.stop_requested and self.run.world_size == 1  # alone, a process stops at once
        names, device = ["loss"] + sorted(k for k in self.sums if k != "loss"), self.run.device
        means = [(self.sums[k] / self.counts[k]).to(device) for k in names]
        stop = torch.tensor(float(self.stop_requested), device=device)  # any process's: all stop at the same step
        values = distributed.all_reduce(torch.stack(means + [stop])).tolist()
        self.sums, self.counts, self.last_loss = {}, {}, values[0]
        stats, stopping = dict(zip(names, values)), values[-1] > 0
        self.diverged(self.divergence(phases[index].name, stats["loss"]))
        seconds = round(time.time() - self.started, 3)
        self.log({"step": self.step, "loss": stats.pop("loss"), "lr": lr, "seconds": seconds, **stats})
        self.progress.set_postfix(loss=f"{self.last_loss:.4f}", refresh=False)  # shown at the next refresh
        return stopping

    def record_dev(self, metric, dev, source):
        """Log and say dev scores ({lang: score}); whether the model is the best so far, as --select-on scores it
        (the source's, or X-Mixup Sec. 5.1's mean of every language's; with "last", the source's, logged)."""
        dev = distributed.gather(dev)[0]  # process 0's: all must agree on the best (a sharded save is collective)
        score = sum(dev.values()) / len(dev) if self.settings.select_on == "all" else dev[source]
        state, best = self.state, score > self.state.best or self.settings.select_on == "last"
        self.log({"step": self.step, f"dev_{metric}": dev})
        state.metric = metric
        if best:
            state.best, state.best_step = score, self.step
        state.stale = 0 if best else state.stale + (self.step > state.best_step)  # resumed before its best: not stale
        if self.run.rank == 0:
            scores = ", ".join(f"{lang} {100 * value:.1f}" for lang, value in dev.items())
            self.progress.write(f"step {self.step}: loss {self.last_loss:.4f}, dev {metric} {scores} "
                                f"(best {100 * state.best:.1f} at step {state.best_step})", file=sys.stderr)
        return best

    def finish(self, stopped):
        """After the loop: the last checkpoint in place, the bar closed, a loss that ended far too high warned about."""
        self.finish_checkpoint()
        self.progress.close()
        if stopped and self.run.rank == 0:
            print(f"stopped at step {self.step}; continue with the same command and --resume", file=sys.stderr)
        last, first = (self.recent_losses or [None])[-1], self.first_loss
        self.warning = None  # however short the run, a last logged loss far above its phase's first is said
        if last is not None and last > 5 * first and last > first + 1:
            self.warning = (f"the loss ended at {last:.4g}, against {first:.4g} at the start of {self.loss_phase}: "
                            f"the run went wrong; try a lower --lr (now {self.settings.lr})"
                            + (", --amp bf16 or none instead of fp16" if self.settings.amp == "fp16" else ""))
            if self.run.rank == 0:
                print(f"warning: {self.warning}", file=sys.stderr)

    def out_of_patience(self):
        """Whether --patience evaluations on dev have passed without a better score: an early stop, as XTREME's."""
        patience = self.settings.patience
        if not patience or self.state.stale < patience:
            return False
        if self.run.rank == 0:
            self.progress.write(f"step {self.step}: no better dev score in {patience} evaluations (--patience "
                                f"{patience}): stopping early; the best, of step {self.state.best_step}, is tested",
                                file=sys.stderr)
        return True

    def log(self, record):
        """A record on a line of OUT/log.jsonl, and as scalars in OUT/tensorboard where TensorBoard is installed."""
        if self.run.rank != 0:
            return
        with open(self.out / "log.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.out not in WRITERS:
            WRITERS[self.out] = None
            with suppress(ImportError):
                from torch.utils.tensorboard import SummaryWriter
                WRITERS[self.out] = SummaryWriter(str(self.out / "tensorboard"))
        if (writer := WRITERS[self.out]) is None:
            return
        for key, value in record.items():
            for name, number in (value.items() if isinstance(value, dict) else [("", value)]):
                if key != "step" and isinstance(number, (int, float)):
                    writer.add_scalar(f"{key}/{name}" if name else key, number, record["step"])
        writer.flush()

    def divergence(self, phase, loss):
        """What is wrong with a logged loss, or None: it is not finite, or its mean over the last 20 steps' records
        stays above 5 times (and 1 above) the first logged loss of its phase."""
        if not math.isfinite(loss):
            return f"the loss is {loss}"
        if phase != self.loss_phase:  # a new phase: its first logged loss is the reference
            self.loss_phase, self.first_loss, self.recent_losses = phase, loss, []
        window, first = math.ceil(20 / self.settings.log_every), self.first_loss
        self.recent_losses = (self.recent_losses + [loss])[-window:]
        mean = sum(self.recent_losses) / len(self.recent_losses)
        if len(self.recent_losses) == window and mean > 5 * first and mean > first + 1:
            return (f"the loss has averaged {mean:.4g} over the last {window * self.settings.log_every} steps, "
                    f"against {first:.4g} at the start")
        return None

    def diverged(self, problem):
        """Stop a diverging run (Book.divergence) with advice, naming the last checkpoint if there is one."""
        if problem is None:
            return
        self.progress.close()
        with suppress(OSError):  # a failed write leaves the previous checkpoint, as the message below says
            self.finish_checkpoint()  # one still being written (--async-checkpoint), before the group goes
        if self.run.rank == 0:
            print(f"error: step {self.step}: {problem}: the run is diverging; try a lower --lr (now "
                  f"{self.settings.lr}), --amp bf16 or none instead of fp16, or --max-grad-norm 1.0; "
                  f"{self.last_checkpoint()}", file=sys.stderr)
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
        """OUT/checkpoint.pt, written aside by rank 0 and moved into place; sharded, the folder OUT/checkpoint/,
        each process's shards and rank 0's state.pt, put in place by finish_checkpoint (--async-checkpoint: later)."""
        self.finish_checkpoint()  # the previous one, if it is still being written
        rng = {"python": random.getstate(), "torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state()
        window = {name: (total.detach().cpu(), self.counts[name]) for name, total in self.sums.items()}
        states, windows = distributed.gather(rng), distributed.gather(window)
        rest = {"scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "step": self.step,
                **{k: v for k, v in asdict(self.state).items() if k != "saved_step"},
                "rng": states, "settings": self.settings.as_dict(), "identity": self.identity, "files": self.files,
                "files_beside": True, "window": windows}  # files_beside: the record holds a task's files beside --data
        if self.settings.shard:
            if self.settings.async_checkpoint and self.checkpoint_group is None:  # made once, by every process at once
                self.checkpoint_group = torch.distributed.new_group(backend="gloo")
            written, staging_failed = Future(), False
            try:
                written = shard.save(self.out / "checkpoint.tmp", core, optimizer, self.run.rank, self.checkpoint_group)
            except FAILED_WRITE_SHARDED as e:
                written.set_exception(e)
                staging_failed = isinstance(e, shard.StagingFailed)  # raised on every process at once: stop now
            rest_bytes = io.BytesIO()
            torch.save(rest, rest_bytes)  # as it is now: the write may end steps later
            self.writing = (written, rest_bytes.getvalue(), self.step)
            if not self.settings.async_checkpoint or staging_failed:
                self.finish_checkpoint()
            return
        path, tmp, problem = self.out / "checkpoint.pt", self.out / "checkpoint.pt.tmp", None
        try:
            if self.run.rank == 0:
                torch.save(dict(rest, model=core.state_dict(), optimizer=optimizer.state_dict()), tmp)
                os.replace(tmp, path)
                self.state.saved_step = self.step  # whole: named where the others are lost in first_error's gather
        except FAILED_WRITE as e:
            tmp.unlink(missing_ok=True)
            problem = shard.reason(e)
        self.checkpoint_done(path, distributed.first_error(problem), self.step)  # all stop with rank 0's failure

    def finish_checkpoint(self):
        """Put a sharded checkpoint in place once every process has written its shards (rank 0 adds state.pt);
        called by every process at once, which all stop where a write failed on any."""
        if self.writing is None:
            return
        (written, rest, step), self.writing, problem = self.writing, None, None
        path, tmp = self.out / "checkpoint", self.out / "checkpoint.tmp"
        try:
            written.result()
            if self.run.rank == 0:
                (tmp / "state.pt").write_bytes(rest)
                cli.replace_dir(tmp, path)
                self.state.saved_step = step  # whole: named where the others are lost in first_error's gather
        except FAILED_WRITE_SHARDED as e:
            problem = shard.reason(e)
            if self.run.rank == 0:
                shutil.rmtree(tmp, ignore_errors=True)
        self.checkpoint_done(path, distributed.first_error(problem), step)  # every process stops with rank 0's failure

    def checkpoint_done(self, path, problem, step):
        """Stop with a failed write's reason, naming the checkpoint still whole; else the state records `step`'s."""
        if problem:
            saved = self.state.saved_step
            kept = (f"the checkpoint of step {saved} is whole. Is the disk full? Free some space and continue with "
                    "--resume" if saved is not None else "no checkpoint is kept. Is the disk full? Free some space "
                    "and start again with --overwrite")
            raise OSError(errno.EIO, f"writing the checkpoint failed ({problem}); {kept}", str(path))
        if self.run.rank == 0:  # the other kind, from a run of the same folder with(out) --shard, is now older
            stale = self.out / ("checkpoint.pt" if path.name == "checkpoint" else "checkpoint")
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)
        self.state.saved_step = step

    def save_best(self, model, tokenizer, info):
        """OUT/best: the model alone with task.json, written aside and swapped in: a failed write leaves the last."""
        sharded = self.settings.shard
        if self.run.rank != 0 and not sharded:
            return
        info = dict(info, step=self.state.best_step, **{f"dev_{self.state.metric}": self.state.best})
        tmp, problem, caught = self.out / "best.tmp", None, FAILED_WRITE_SHARDED if sharded else FAILED_WRITE
        bf16 = self.settings.save_dtype == "bf16"
        if self.run.rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)

        def whole(t):  # sharded: gathered in turn to process 0's host memory; bf16: cast (None where none is written)
            t = shard.on_first_host(t) if sharded else t
            return t.to(torch.bfloat16) if bf16 and t is not None and t.is_floating_point() else t
        try:  # unsharded: only rank 0 is here
            model.save(tmp, tokenizer, info, whole=whole if sharded or bf16 else None, write=self.run.rank == 0)
            if self.run.rank == 0:
                cli.replace_dir(tmp, self.out / "best")
        except caught as e:
            problem = shard.reason(e)
            if self.run.rank == 0:
                shutil.rmtree(tmp, ignore_errors=True)
        problem = distributed.first_error(problem) if sharded else problem  # all stop with rank 0's failure
        if problem:
            then = ("continue with --resume" if self.state.saved_step is not None else "start again with --overwrite "
                    "(no checkpoint yet)")
            raise OSError(errno.EIO, f"writing the best model failed ({problem}); the previous one, if any, is whole. "
                                     f"Is the disk full? Free some space and {then}", str(self.out / "best"))

    def close(self, stopped):
        """--no-keep-checkpoint: the checkpoint removed, unless the run stopped before its end; then OUT given up."""
        if not (self.settings.keep_checkpoint or stopped or self.run.rank != 0):
            for path in [self.out / name for name in ("checkpoint.pt", "checkpoint", "checkpoint.old")]:
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        cli.release(self.out)  # a run that fails gives it up when its process ends


INPUTS = ("method", "task", "data", "languages", "model", "tokenizer")  # what a run is of; SHAPING: how it trains
SHAPING = ("lr", "weight_decay", "warmup", "batch_size", "grad_accum", "seed", "max_length", "max_steps", "epochs",
           "dropout", "max_grad_norm", "train_fraction", "translated", "group_by_length", "freeze_embeddings", "head",
           "pooling", "self_pairs", "extra_train", "clip_value", "amp")


def load_checkpoint(out, identity, files, changed_ok=False, rank=0):
    """OUT's checkpoint (a sharded run's: its state.pt), refused unless written by this run (the same identity)
    from the same files, unless `changed_ok` (--resume-changed)."""
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
    keys = [key for key in theirs if theirs[key] != identity.get(key)]
    keys = [key for key in keys if key in INPUTS] or keys  # another method's settings differ as a matter of course
    different = [f"{key} {theirs[key]!r} there, {identity.get(key)!r} here" for key in keys]
    if "doc_stride" in identity and "identity" in saved and "doc_stride" not in theirs:  # QA, before 270f634
        different.append("windows that shared --doc-stride tokens there, windows that start --doc-stride apart here")
    if different:
        raise CheckpointError(f"{path} belongs to another run ({'; '.join(different)}): resume with that run's "
                              "settings, or start afresh with --overwrite or another --out")
    if (out / "results.json").is_file():  # its checkpoint is of the last --save-every step, not of its end
        raise CheckpointError(f"{out} holds a run that finished (results.json): --resume continues a stopped one; "
                              f"test it again with python evaluate.py --checkpoint {out / 'best'}, or train it again "
                              "with --overwrite")
    old = saved.get("files", files)  # a checkpoint that predates the record: taken as unchanged
    if "files_beside" not in saved and identity["data"]:  # nor files beside --data then (SQuAD beside MLQA's)
        old = {**{name: files[name] for name in files if not Path(name).is_relative_to(identity["data"])}, **old}
    changed = [f"{name} ({'new' if name not in old else 'gone' if name not in files else 'changed'})"
               for name in sorted(set(old) | set(files)) if old.get(name) != files.get(name)]
    named = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    if changed and not changed_ok:
        raise CheckpointError(f"{path}: the files the run reads are not those it was trained on: {named}; a resumed "
                              "run would not continue the same run: start afresh with --overwrite, or continue "
                              "knowingly with --resume-changed")
    if changed and rank == 0:
        print(f"note: --resume-changed: continuing over files changed since the checkpoint: {named}", file=sys.stderr)
    return saved


def resume(out, saved, core, optimizer, scheduler, scaler, rank, world_size, sharded=False):
    """Load a checkpoint into the model, optimizer, scheduler, scaler and RNGs (a sharded run's on any number of
    processes, sharded or not), and drop the log's records of later steps, which the run logs again."""
    path = saved.get("sharded") or out / "checkpoint.pt"
    if sharded and "sharded" not in saved:
        raise CheckpointError(f"{path} was written by a run without --shard: resume it without --shard (a sharded "
                              "run's checkpoint, OUT/checkpoint/, resumes either way)")
    try:
        if "sharded" in saved:
            shard.load(path, core, optimizer)
            mine = next((f"{name} holds NaN or infinite values" for name, p in core.named_parameters()
                         if not torch.isfinite(shard.local(p)).all()), None)  # this process's first such shard
            problem = distributed.first_error(mine)
            if problem:
                raise CheckpointError(f"{path}: {problem}")
        else:
            core.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        if saved["scaler"] or not scaler.is_enabled():  # none: fp16 on the CPU before its scaler ran there
            scaler.load_state_dict(saved["scaler"])
    except (RuntimeError, ValueError, KeyError, shard.CheckpointException) as e:
        raise CheckpointError(f"{path}: does not fit this model ({shard.reason(e)}); "
                              "start afresh with --overwrite or another --out") from None
    if len(saved["rng"]) == world_size:
        rng = saved["rng"][rank]
        random.setstate(rng["python"])
        torch.set_rng_state(rng["torch"])
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state(rng["cuda"])
    elif rank == 0:
        print(f"note: resuming {len(saved['rng'])}-process run on {world_size}: dropout draws will differ",
              file=sys.stderr)
    log, kept = out / "log.jsonl", []
    if rank == 0 and log.exists():  # the records of later steps, and a line cut short, dropped
        for line in log.read_text(encoding="utf-8").splitlines():
            with suppress(json.JSONDecodeError, AttributeError):
                if json.loads(line).get("step", 0) <= saved["step"]:
                    kept.append(line)
        cli.write_text(log, "".join(line + "\n" for line in kept))
