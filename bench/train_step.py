"""A training step of each method, and of transformers' sequence classifier as XTREME's scripts train it, side by
side on the same batches with the same autocast (docs/training.md, "Benchmarks"); other flags are train.py's.

    python -m bench.train_step                                     # CPU: bundled model and corpus, batch 32
    python -m bench.train_step --device cuda --shapes base --task sib200 --data ../shared/data/sib200 --amp bf16
    python -m bench.train_step --device cuda --shapes base --methods translate-train --batch-sizes 32,64,128,256 \\
        --task sib200 --data ../shared/data/sib200 --amp bf16 --max-length 128           # scaling and MFU
    python -m bench.train_step --device cuda --shapes base --batch-sizes 256 --fixed-length --compile ...  # 256 x 128
"""
import argparse
import json
import random
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

import data
import train
from bench.encoder import SHAPES, sync
from minxlt.checkpoints import hub
from minxlt.checkpoints.prepare_default import default_model
from minxlt.parallel import distributed, shard
from minxlt.run import compiled, flags
from minxlt.text.tokenizer import Tokenizer
from model import Config, Encoder

PEAK_TFLOPS = {"H100": 989, "H200": 989, "A100": 312, "L40S": 362, "A10": 125}  # dense bf16, SXM where there are two


def shaped_model(model_dir, shape, folder):
    """A checkpoint folder with XLM-R's `shape`, random weights and the tokenizer of `model_dir`."""
    tokenizer = Tokenizer.from_pretrained(model_dir)
    torch.manual_seed(0)
    config = Config.from_hf({"model_type": "xlm-roberta", **SHAPES[shape], "vocab_size": tokenizer.vocab_size,
                             "max_position_embeddings": 514})
    Encoder(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def fixed_length(item, length, tokenizer):
    """An encoded text made exactly `length` tokens long: <s>, its own tokens repeated, </s>."""
    content = item.ids[1:-1] or [tokenizer.unk_id]
    return replace(item, ids=[item.ids[0], *(content * (length // len(content) + 1))[:length - 2], item.ids[-1]])


def source_batches(run, batch_size, steps, length=None):
    """--batch-size (source, translation) pairs a step, into a target language drawn per step; `length`: each text's."""
    task = run.task
    pairs = run.level.pair(run.training_texts([task.source]), run.training_texts(task.targets))
    by_source = {}
    for source, translation in pairs:
        by_source.setdefault(source.id, {}).setdefault(translation.lang, (source, translation))
    out = []
    for step in range(steps):
        rng = random.Random(step)
        chosen = [by_source[i] for i in rng.sample(sorted(by_source), min(batch_size, len(by_source)))]
        lang = rng.choice(task.targets)
        pairs = [by_lang.get(lang) or next(iter(by_lang.values())) for by_lang in chosen]
        out.append([tuple(fixed_length(t, length, run.tokenizer) for t in pair) if length else pair for pair in pairs])
    return out


class Trainee:
    """One method's model and optimizer, and its step (train.py's, one micro-batch)."""

    def __init__(self, name, settings, run, model_dir, device, compile_model=False):
        self.name, self.settings, self.device = name, settings, device
        self.method = method = flags.METHODS[name](settings, run)
        if method.draws not in ("texts", "translated", "pairs"):
            raise SystemExit(f"--methods: {name} trains on {method.draws} data; this benchmark compares methods on "
                             "texts and pairs")
        raw = train.build_model(settings, method, model_dir, device, 0)
        self.model = method.wrap(raw).train()
        if settings.shard:  # in one process: what sharding costs where the model fits
            shard.wrap(self.model, raw.encoder, settings.amp, device=device)
            shard.load_pretrained(self.model, raw.encoder, model_dir, device)
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=1e-5, fused=True)
        self.encoder = raw.encoder
        self.loss = compiled.compiled_loss(settings, method.loss, raw.encoder)  # as train.py's --compile
        if compile_model:  # as train.py's --compile did before: the model alone, dynamic shapes, no CUDA graphs
            whole = torch.compile(self.model, dynamic=True)
            self.loss = lambda model, batch: method.loss(whole, batch)

    def batch(self, pairs, step):
        items = pairs if self.method.draws == "pairs" else [translation for _, translation in pairs]
        texts = [t for item in items for t in (item if isinstance(item, tuple) else (item,))]
        return self.method.make_batch(items, [1.0] * len(items), step), len(texts), sum(len(t.ids) for t in texts)

    def forward(self, batch, eager):
        return (self.method.loss if eager else self.loss)(self.model, batch)[0]

    def step(self, batch, eager=False):
        dtype = train.AUTOCAST[self.settings.amp]
        with torch.autocast(self.device.split(":")[0], dtype=dtype, enabled=dtype is not None):
            loss = self.forward(data.to_device(batch, self.device), eager)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def flops(self, batch):
        """The model's FLOPs in an eager step, which the counter sees op by op, without recomputation."""
        self.encoder.checkpoint_layers(False)
        with FlopCounterMode(display=False) as counter:
            self.step(batch, eager=True)
        self.encoder.checkpoint_layers(self.settings.gradient_checkpointing)
        return counter.get_total_flops()


class Baseline(Trainee):
    """transformers' sequence classifier on translate-train's texts, padded to --max-length."""

    def __init__(self, settings, run, model_dir, device):
        import transformers
        transformers.logging.set_verbosity_error()  # a fine-tuning run starts from a new head: no warning
        self.name, self.settings, self.device, self.run = "transformers", settings, device, run
        self.model = transformers.AutoModelForSequenceClassification.from_pretrained(
            model_dir, num_labels=len(run.task.labels), attn_implementation="sdpa").to(device).train()
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=1e-5, fused=True)

    def batch(self, pairs, step):
        texts = [translation for _, translation in pairs]
        pad, T = self.run.tokenizer.pad_id, self.settings.max_length
        ids = torch.tensor([t.ids + [pad] * (T - len(t.ids)) for t in texts])
        labels = torch.tensor([t.label for t in texts])
        batch = {"input_ids": ids, "attention_mask": ids.ne(pad).long(), "labels": labels}
        return batch, len(texts), sum(len(t.ids) for t in texts)

    def forward(self, batch, eager):
        return self.model(**batch).loss

    def flops(self, batch):
        with FlopCounterMode(display=False) as counter:
            self.step(batch)
        return counter.get_total_flops()


def measure(trainees, batches, warmup, device, count_flops):
    """{name: (median seconds synced, seconds pipelined, texts, real tokens, step memory, FLOPs, peak bytes)} a step
    (means over the timed steps); FLOPs counted in an extra, untimed step on each timed batch."""
    times, memory, flops, peaks = ({t.name: [] for t in trainees} for _ in range(4))
    made = {t.name: [t.batch(pairs, step) for step, pairs in enumerate(batches)] for t in trainees}
    timed = {name: steps[warmup:] for name, steps in made.items()}  # (batch, texts, real tokens) a timed step
    for t in trainees:  # each timed length met once first, as a run meets its buckets early: compiled, a step
        for batch, _, _ in timed[t.name]:  # records a CUDA graph at each new length (RESULTS.md)
            t.step(batch)
    for step in range(len(batches)):
        for t in trainees:
            batch = made[t.name][step][0]
            sync(device)
            if device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
                held = torch.cuda.memory_allocated()
            start = time.perf_counter()
            t.step(batch)
            sync(device)
            if step < warmup:
                continue
            times[t.name].append(time.perf_counter() - start)
            if device.startswith("cuda"):
                memory[t.name].append(torch.cuda.max_memory_allocated() - held)
                peaks[t.name].append(torch.cuda.max_memory_allocated())
            if count_flops:
                flops[t.name].append(t.flops(batch))
    pipelined = {}
    for t in trainees:
        sync(device)
        start = time.perf_counter()
        for batch, _, _ in timed[t.name]:
            t.step(batch)
        sync(device)
        pipelined[t.name] = (time.perf_counter() - start) / len(timed[t.name])
    mean = lambda values: statistics.mean(values) if values else None
    return {name: (statistics.median(times[name]), pipelined[name], mean([s[1] for s in timed[name]]),
                   mean([s[2] for s in timed[name]]), max(memory[name], default=None), mean(flops[name]),
                   max(peaks[name], default=None)) for name in times}


def loop_ms_per_step(out):
    """The real loop's median ms a step between a run's loss records (log.jsonl), leaving out the first (compiling)
    and any that holds an evaluation; None where there are too few."""
    records = [json.loads(line) for line in (Path(out) / "log.jsonl").read_text().splitlines() if line.strip()]
    losses = [r for r in records if "seconds" in r]
    evaluated = {r["step"] for r in records if "seconds" not in r}
    rates = [1000 * (b["seconds"] - a["seconds"]) / (b["step"] - a["step"])
             for a, b in zip(losses[1:], losses[2:]) if not any(a["step"] <= step < b["step"] for step in evaluated)]
    return statistics.median(rates) if rates else None


def report(results, batch_size, peak, reference):
    """The table of one batch size, and the reference method's throughput against transformers'."""
    print(f"\nbatch {batch_size}")
    print("| method | s/step | s/step pipelined | texts/s | tokens/s | step memory MB | peak GB | MFU "
          f"| time per text vs {reference} |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = results.get(reference)
    for name, (seconds, pipelined, texts, tokens, memory, flops, peak_bytes) in results.items():
        cells = [name, f"{seconds:.4f}", f"{pipelined:.4f}", f"{texts / pipelined:.1f}", f"{tokens / pipelined:.0f}",
                 f"{memory / 2**20:.0f}" if memory is not None else "-",
                 f"{peak_bytes / 1e9:.1f}" if peak_bytes else "-",
                 f"{100 * flops / pipelined / peak:.1f}%" if peak and flops else "-",
                 f"{(pipelined / texts) / (base[1] / base[2]):.2f}" if base and name != "transformers" else ""]
        print("| " + " | ".join(cells) + " |")
    if base and "transformers" in results:
        theirs = results["transformers"]
        print(f"{reference}: {(base[2] / base[1]) / (theirs[2] / theirs[1]):.2f}x the texts/s of transformers' "
              "classifier padded to --max-length (pipelined)")


def parse(argv=None):
    """(the parser, this script's own flags, {method: train.py's flags for it}) from the command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    add = parser.add_argument
    add("--methods", default="translate-train,xeroalign,filter,xmixup", help="comma-separated, on texts or pairs")
    add("--reference", default="translate-train", help="the method the others' time per text is compared with")
    add("--batch-sizes", default="32", help="comma-separated batch sizes, each measured in turn")
    add("--steps", type=int, default=10, help="timed steps per method and batch size")
    add("--warmup", type=int, default=3, help="untimed steps first (FLOPs: counted in a step after each timed one)")
    add("--shapes", choices=["model", *SHAPES], default="model", help="the --model's weights, or XLM-R's shapes")
    add("--no-baseline", action="store_true", help="skip transformers' classifier")
    add("--peak-tflops", type=float, help="the GPU's dense bf16 peak, for MFU (known: " + ", ".join(PEAK_TFLOPS) + ")")
    add("--fixed-length", action="store_true", help="every text --max-length tokens long, no padding (MFU at B x T)")
    add("--compile-model", action="store_true", help="with --no-compile: compile the model alone, with dynamic shapes "
        "and no CUDA graphs, as train.py's --compile did before (the step it gained nothing on)")
    add("--logs", help="comma-separated OUT folders of train.py runs: their loop's ms/step, read from log.jsonl")
    own, rest = parser.parse_known_args(argv)
    return parser, own, {name: flags.parse(rest + ["--method", name], strict=False) for name in own.methods.split(",")}


def main(argv=None):
    parser, own, given = parse(argv)
    first = next(iter(given.values()))
    device = first.device or ("cuda" if torch.cuda.is_available() else "cpu")
    distributed.setup(device)  # SDPA's kernels for the device, as train.py chooses them
    model_dir = hub.resolve(first.model) if first.model else default_model()
    with tempfile.TemporaryDirectory() as folder:
        if own.shapes != "model":
            model_dir = shaped_model(model_dir, own.shapes, folder)
        run = train.load_run(first, model_dir, device, 0, 1)
        # each method's settings from the flags given, less other methods' flags
        resolved = {name: flags.resolve(args, run) for name, args in given.items()}
        settings, run = next(iter(resolved.values()))
        if own.compile_model and settings.compile:
            parser.error("--compile-model compiles the model the old way: give --no-compile with it")
        trainees = [Trainee(name, *resolved[name], model_dir, device, own.compile_model) for name in resolved]
        if not own.no_baseline:
            trainees.append(Baseline(settings, run, model_dir, device))
        print(f"{settings.task}, {own.shapes} {model_dir if own.shapes == 'model' else ''}, device {device}, amp "
              f"{settings.amp}, max length {settings.max_length}, torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads")
        how = (settings.compile_mode if settings.compile else "the model alone, dynamic shapes" if own.compile_model
               else "no")
        buckets = f"multiples of {settings.bucket}" if settings.bucket else "none"
        fixed = "; every text --max-length tokens" if own.fixed_length else ""
        print(f"compiled: {how}; length buckets: {buckets}{fixed}")
        gpu = torch.cuda.get_device_name(device) if device.startswith("cuda") else ""
        tflops = own.peak_tflops or next((t for name, t in PEAK_TFLOPS.items() if name in gpu), None)  # for MFU
        peak = tflops * 1e12 if tflops else None  # given, or the GPU's as PEAK_TFLOPS has it
        for batch_size in map(int, own.batch_sizes.split(",")):
            length = settings.max_length if own.fixed_length else None
            batches = source_batches(run, batch_size, own.warmup + own.steps, length)
            results = measure(trainees, batches, own.warmup, device, count_flops=peak is not None)
            report(results, batch_size, peak, own.reference)
        if settings.compile or own.compile_model:
            print(f"graphs compiled in all: {compiled.compiles()}")
    for out in own.logs.split(",") if own.logs else []:
        ms = loop_ms_per_step(out)
        print(f"train.py loop {out}: {f'{ms:.1f} ms/step' if ms else 'too few log records'} (log.jsonl, evaluations "
              "left out)")


if __name__ == "__main__":
    main()
