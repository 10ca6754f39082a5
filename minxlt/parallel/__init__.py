"""Several processes: the process group and its collectives (distributed.py), fully sharded data
parallel training and its checkpoints (shard.py), and what each process would hold (memory.py)."""
