"""reproduce.py's machinery: an experiment file read and checked (spec.py), its cost (cost.py), its jobs run
(jobs.py), its table (report.py)."""
