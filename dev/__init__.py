"""What a developer of this repository runs around a change: short_runs.py makes a short run of every
method at every task level, compare_logs.py compares two such folders record by record."""
