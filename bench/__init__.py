"""Benchmarks measured side by side in one run (docs/training.md, "Benchmarks"): encoder.py, train_step.py,
data.py, load.py, shard.py; gpu.sh runs RESULTS.md's GPU figures in one go."""
