"""The machinery under the papers' files: what a reader of a method can skip, one folder per kind.

    run/          a run's settings (flags.py: train.py's flags and the --method table), the loop's
                  bookkeeping, a teacher's soft labels, the commands' edges (arguments, one-line errors)
    checkpoints/  Hugging Face checkpoints read and written without running code, hub ids, the default model
    text/         tokenizers, and training texts tokenized once into a memory-mapped cache
    tasks/        each benchmark's reader and layout, the generic readers, QA's windows and metrics
    parallel/     process groups, sharded training (FSDP2) and its checkpoints, the memory plan
    experiments/  reproduce.py's: an experiment file read and audited, its runs, its table, its cost
    errors.py     the errors a command shows as one line
"""
