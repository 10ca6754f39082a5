"""What the commands share at their edges: argument types, files written so that a crash leaves the old or the
new one whole, the output folder's checks (one run at a time in it), and bad input said in one line."""
import argparse
import atexit
import errno
import os
import shutil
import socket
import sys
import time
from contextlib import suppress
from pathlib import Path

import torch

from minxlt.checkpoints.weights import CheckpointError
from minxlt.errors import InputError
from minxlt.parallel import distributed


class ArgumentParser(argparse.ArgumentParser):
    """argparse, whose mistakes show the error and where the flags are listed, not the usage block."""

    def error(self, message):
        let_the_first_speak()
        self.exit(2, f"{self.prog}: error: {message}; python {self.prog} --help lists the flags\n")


def let_the_first_speak():
    """Under torchrun, a process other than its node's first waits: the first's message shows, torchrun stops it."""
    if int(os.environ.get("LOCAL_RANK", "0")) > 0:
        time.sleep(5)


def number(kind, low=None, high=None, low_open=False, high_open=False):
    """An argparse type: a number of `kind` within [low, high] (or open at either end)."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        too_low = low is not None and (value <= low if low_open else value < low)
        too_high = high is not None and (value >= high if high_open else value > high)
        if too_low or too_high:
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            bounds = f"in {left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
            raise argparse.ArgumentTypeError(f"{text} is not {bounds}")
        return value
    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


positive_int = number(int, 1)


def steps_or_epoch(text):
    """An argparse type: a positive number of steps, or "epoch" (an epoch's steps)."""
    return text if text == "epoch" else positive_int(text)


steps_or_epoch.__name__ = "steps"
non_negative_int = number(int, 0)
positive_float = number(float, 0, low_open=True)
non_negative_float = number(float, 0)
fraction = number(float, 0, 1)                 # [0, 1]
share = number(float, 0, 1, low_open=True)     # (0, 1]


def languages(text):
    """A comma-separated list of language codes (--target-langs de,fr,zh)."""
    codes = [code.strip() for code in text.split(",") if code.strip()]
    if not codes:
        raise argparse.ArgumentTypeError(f"{text!r} names no language")
    repeated = sorted({code for code in codes if codes.count(code) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"{text!r} names {', '.join(repeated)} more than once")
    return codes


def device(text):
    """--device: cpu, or cuda (cuda:N) where a CUDA device is available."""
    if text == "cpu":
        return text
    if text == "cuda" or (text.startswith("cuda:") and text[5:].isdigit()):
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text}: no CUDA device is available here; use cpu")
        if text != "cuda" and int(text[5:]) >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(f"{text}: there are {torch.cuda.device_count()} CUDA devices")
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: give cpu, cuda or cuda:N")


def existing_directory(text, kind="directory"):
    path = Path(text)
    if not (path.is_dir() if kind == "directory" else path.is_file()):
        raise argparse.ArgumentTypeError(f"{text}: {'not a' if path.exists() else 'no such'} {kind}")
    return text


def existing_file(text):
    return existing_directory(text, "file")


def write_text(path, text):
    """Write a file atomically: a crash leaves the old content or the new, never half of it."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def replace_dir(tmp, target):
    """Swap a finished directory into place, so a crash leaves the old or the new one whole."""
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


# what makes a folder a run's, and what else a run writes (or leaves half written), which --overwrite removes too
RUN_FILES = ("checkpoint.pt", "checkpoint", "checkpoint.old", "log.jsonl", "results.json", "results.md", "best")
LEFTOVERS = ("checkpoint.tmp", "checkpoint.pt.tmp", "best.tmp", "best.old", "predictions", "tensorboard")


def latest_checkpoint(out):
    """OUT's resume checkpoint, the newer of checkpoint.pt and a sharded run's checkpoint/state.pt (or
    checkpoint.old/'s, after a kill between replace_dir's renames), or None."""
    out = Path(out)
    sharded = [f for f in (out / "checkpoint" / "state.pt", out / "checkpoint.old" / "state.pt") if f.is_file()][:1]
    found = [f for f in sharded + [out / "checkpoint.pt"] if f.is_file()]
    return max(found, key=lambda f: f.stat().st_mtime, default=None)


LOCK = ".lock"  # in OUT, while a run writes there: "<host> <process id>"


def output_folder(out, resume=False, overwrite=False, rank=0):
    """OUT, checked on every process before any training: a folder process 0 can write to and every process sees, held
    by this run (OUT/.lock, until release), holding no run unless --resume continues it or --overwrite replaces it."""
    out, here, problem = Path(out), socket.gethostname(), None
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: a file, not a folder; choose another --out")
    token = distributed.gather(os.urandom(8).hex())[0]  # process 0's
    probe, lock = out / f".shared-{token}", out / LOCK
    if rank == 0:
        try:
            out.mkdir(parents=True, exist_ok=True)
            probe.write_text(token)
        except OSError as e:
            problem = f"--out {out}: cannot be written to ({e.strerror or e}); choose another --out"
    problem = distributed.first_error(problem)  # every process stops with process 0's; the probe is written
    if problem:
        raise InputError(problem)
    seen = distributed.gather((probe.is_file() and probe.read_text() == token, here))  # each process's look
    if rank == 0:
        probe.unlink(missing_ok=True)
    blind = [f"{r} (on {host})" for r, (ok, host) in enumerate(seen) if not ok]
    if blind:
        raise InputError(f"--out {out} is not on storage every process sees: process {', '.join(blind)} cannot read "
                         f"what process 0 (on {seen[0][1]}) wrote there; put it on a file system that every node "
                         "shares")
    if rank == 0:  # the lock: a dead process's is taken over; one released meanwhile, tried again
        for _ in range(3):
            try:
                with open(lock, "x") as f:
                    f.write(f"{here} {os.getpid()}")
                atexit.register(release, out)
                break
            except FileExistsError:
                try:
                    holder = lock.read_text().split()
                except FileNotFoundError:
                    continue
            host, pid = holder if len(holder) == 2 and holder[1].isdigit() else (None, None)
            if host == here and int(pid) == os.getpid():
                break  # this process's: a run before in the same process (co-training's)
            if host == here:
                try:
                    os.kill(int(pid), 0)
                except ProcessLookupError:
                    lock.unlink(missing_ok=True)  # its run was killed
                    continue
                except PermissionError:  # another user's
                    pass
            who = f"process {pid} on {host}" if host else "a run starting there now"
            problem = (f"--out {out} is in use by another run ({who}; {lock}): wait for it to end, or choose another "
                       "--out" + (f"; if that process no longer runs, delete {lock}" if host and host != here else ""))
            break
        else:
            problem = f"--out {out}: {lock} keeps changing: is another run starting there?"
    problem = distributed.first_error(problem)
    if problem:
        raise InputError(problem)
    held = [name for name in RUN_FILES if (out / name).exists()]
    replace = "replace it with --overwrite, or choose another --out"
    if resume and not latest_checkpoint(out):
        raise InputError(f"--resume: {out / 'checkpoint.pt'} not found, nor a sharded run's checkpoint/"
                         + (f"; {out} holds a run without one ({', '.join(held)}): {replace}" if held
                            else "; drop --resume to start afresh"))
    if held and not resume and not overwrite:
        raise InputError(f"--out {out} holds a run ({', '.join(held)}): "
                         + (f"continue it with --resume, {replace}" if latest_checkpoint(out) else replace))
    return out


def release(out):
    """Give up OUT (output_folder's lock), where this process holds it."""
    lock = Path(out) / LOCK
    with suppress(OSError):
        if lock.read_text().split() == [socket.gethostname(), str(os.getpid())]:
            lock.unlink()


def run(main):
    """Run a command's main(): bad input or an environment's problem (a full disk) is one line on stderr and exit
    status 1, said once under torchrun; any other error is the project's bug and shows its traceback."""
    try:
        try:
            main()
        except (InputError, CheckpointError) as e:
            sys.exit(f"error: {e}")
        except FileNotFoundError as e:
            sys.exit(f"error: {e.filename or e}: not found")
        except OSError as e:
            if e.errno == errno.ENOSPC:
                where = f" writing {e.filename}" if e.filename else ""
                sys.exit(f"error: no space left on the device{where}: free some space and continue with --resume "
                         "(the last checkpoint is whole)")
            sys.exit(f"error: {e.filename + ': ' if e.filename else ''}{e.strerror or e}")
        except KeyboardInterrupt:
            sys.exit("interrupted")
    except SystemExit as stop:
        if isinstance(stop.code, str):  # a message, which the process prints as it ends
            let_the_first_speak()
        raise
