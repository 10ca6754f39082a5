"""Benchmarks, each printing ratios measured side by side in one run (python -m bench.<name> --help):
encoder.py (against transformers), train_step.py (each method's step), data.py (a data set before
the first step), load.py (loading a sharded checkpoint), shard.py (what each process holds); gpu.sh
runs RESULTS.md's GPU figures (XL's training step, DDP and sharded, and the encoder) in one go."""
