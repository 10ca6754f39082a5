"""The errors a command shows as one line, without a traceback (minxlt.run.cli.run): what the user
gave cannot be used as it is, and the message says what to change; and the warnings about data
that is read all the same (warn)."""
import os
import sys


class InputError(ValueError):
    """Something given to a command (a flag, a file, a directory) that it cannot use; the message
    says what to change, and train.py and evaluate.py print it without a traceback."""

class DataError(InputError):
    """A data file that cannot be read as it is; the message names the file and line."""

    def __init__(self, path, line, problem):
        super().__init__(f"{path}:{line}: {problem}" if line else f"{path}: {problem}")


class CheckpointError(ValueError):
    """A weight file or checkpoint directory that cannot be used as it is."""


SAID = []  # every warning about data this process has given, in order (a token cache entry keeps those its build gave)


def warn(message):
    """Say what is wrong with data that is read all the same ("warning: ..." on stderr, from process
    0: every process reads the same files), and keep it in SAID."""
    SAID.append(message)
    if os.environ.get("RANK", "0") == "0":
        print(f"warning: {message}", file=sys.stderr)
