"""A run around the method: its settings resolved once (flags.py), what the loop does around the
step (bookkeeping.py), a teacher's soft labels (teacher.py), the commands' edges (cli.py)."""
