"""The errors a command shows as one line, without a traceback (minxlt.run.cli.run): what the user
gave cannot be used as it is, and the message says what to change."""


class InputError(ValueError):
    """Something given to a command (a flag, a file, a directory) that it cannot use; the message
    says what to change, and train.py and evaluate.py print it without a traceback."""

class DataError(InputError):
    """A data file that cannot be read as it is; the message names the file and line."""

    def __init__(self, path, line, problem):
        super().__init__(f"{path}:{line}: {problem}" if line else f"{path}: {problem}")


class CheckpointError(ValueError):
    """A weight file or checkpoint directory that cannot be used as it is."""
