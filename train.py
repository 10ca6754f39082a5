"""Fine-tune a multilingual encoder on English labels and test it in every language.

    python train.py         # the default job: XeroAlign on the bundled corpus
    python train.py --method zero-shot --task sib200 \\
        --data ../shared/data/sib200 --out runs/sib200-zero-shot
    python train.py --method filter --task xquad --data ../shared/data/xquad \\
        --out runs/xquad-filter                  # question answering
    torchrun --nproc_per_node 2 train.py --method xeroalign --out runs/demo-xa
        # the default job on 2 processes: 85.3% on its targets, 5 min on 2 CPUs
    torchrun --nproc_per_node 8 train.py --shard --amp bf16 \\
        --model facebook/xlm-roberta-xl ...        # sharded: shard.py

FILTER's self-teaching, Unicoder's pre-training then fine-tuning, Yu & Joty's co-training:

    python train.py --method filter --out runs/filter-teacher
    python train.py --method filter --teacher runs/filter-teacher/best \\
        --out runs/filter-student
    python train.py --method unicoder --task sib200 \\
        --data ../shared/data/sib200 --out runs/unicoder
    python train.py --method zero-shot --model runs/unicoder/best \\
        --task sib200 --data ../shared/data/sib200 --out runs/unicoder-zero-shot
    python cotrain.py --task sib200 --data ../shared/data/sib200 \\
        --out runs/cotrain

The run reads top to bottom (main): the settings, every flag resolved once and read-only from then
on (minxlt/run/flags.py); the data; the model; the optimizer; the loop; the test table of the best model.
One step is train_step: the batch comes in, the method's loss (flags.METHODS names its class),
backward with the batch's share of the global batch, the update. What the loop does around the
step (the batch plan, log records, stop requests, divergence, checkpoints) is minxlt/run/bookkeeping.py.
Everything a resumed run needs is in OUT/checkpoint.pt (a sharded run's: OUT/checkpoint/); the best
model is OUT/best/, an ordinary checkpoint directory; losses and evaluations go to OUT/log.jsonl.
"""
import json
import random
import sys

import torch

import data
import evaluate
from methods import TEST_INPUTS, Run, counterparts, learning_rate, phase_at
from minxlt import tasks
from minxlt.checkpoints import hub
from minxlt.checkpoints.prepare_default import default_model
from minxlt.checkpoints.weights import check_tokenizer
from minxlt.parallel import distributed, memory, shard
from minxlt.run import bookkeeping, cli, compiled, flags
from minxlt.text.tokenizer import Tokenizer
from model import Config, Encoder


def main(argv=None):
    """One run; returns the built model as it is after the last step."""
    args = flags.parse(argv, __doc__)
    if args.dry_run:  # the memory plan, from config.json alone (minxlt/parallel/memory.py)
        return memory.dry_run(args, hub.resolve(args.model, config_only=True) if args.model else default_model())
    tasks.check_folder(args.task, args.data)  # before a model is fetched: a missing folder names its download command
    owns_process_group = not distributed.initialized()  # co-training trains inside an outer run
    rank, world_size, device = distributed.setup(args.device)
    distributed.choose_attention(device)
    cli.check_shared({"--out": args.out}, rank)  # several nodes: storage all see (the token cache may be each node's own)
    out = cli.output_folder(args.out, args.resume, args.overwrite, rank)
    random.seed(args.seed + rank)
    torch.manual_seed(args.seed + rank)  # dropout differs across ranks; the weights start identical (loaded)

    # Settings and data: every flag resolved once, read-only from here on (minxlt/run/flags.py); every example
    # tokenized once, translations of a source sharing its id.
    model_dir = hub.resolve(args.model) if args.model else default_model()
    settings, run = flags.resolve(args, load_run(args, model_dir, device, rank, world_size))
    method = flags.METHODS[settings.method](settings, run)
    items = method.training_items()
    if not items:
        raise tasks.InputError(f"no training examples for --method {settings.method} on {settings.task}")
    for split, translations in (("dev", settings.dev_translations), ("test", None if settings.no_test else settings.test_translations)):
        if translations:  # read now (and kept): a missing or unreadable translation stops the run before its first step
            counterparts(run, split, "translation", translations, settings.missing_translations)
    phases = method.phases(items)
    if rank == 0:
        print(bookkeeping.start_report(settings, method, phases, out), file=sys.stderr)
    book = bookkeeping.Book(out, settings, run, model_dir, owns_process_group)

    # Model: the method's view of it (FILTER and X-Mixup run it on pairs) is what trains and is
    # checkpointed; OUT/best holds the built model alone, plus task.json.
    raw = build_model(settings, method, model_dir, device, rank)
    core = method.wrap(raw, items)
    if settings.shard:  # each process holds 1/N of the weights, gradients and AdamW's moments (minxlt/parallel/shard.py)
        model = shard.wrap(core, raw.encoder, settings.amp, settings.offload, device, evaluate_in_bf16=not settings.eval_float32,
                           embeddings_unit=settings.shard_embeddings)
        shard.load_pretrained(core, raw.encoder, model_dir, device, settings.offload)  # each process reads its own rows
    else:  # each process holds them all (DDP)
        model = distributed.wrap(core, device, method.unused_parameters)
    method.start(core, items)  # before any update: Unicoder's hard negatives; a teacher, loaded after the student (sharded with it)
    alignment_before = None if settings.no_alignment or settings.resume else alignment_before_training(settings, run, core, raw)
    optimizer, scheduler = make_optimizer(settings, core, phases)
    dtype = AUTOCAST[settings.amp]
    scaler = torch.amp.GradScaler(enabled=dtype == torch.float16)
    book.start(core, optimizer, scheduler, scaler, alignment_before)

    # The loop: a step per global batch, then its bookkeeping: a log record every --log-every steps, an evaluation on
    # the source dev set every --eval-every (the best model goes to OUT/best), a checkpoint every --save-every.
    phases = compiled.compiled_phases(settings, phases, raw.encoder, world_size)  # --compile: each phase's loss, backward with it
    model.train()
    stopped = False
    with bookkeeping.StopRequest(book) as stop:  # Ctrl-C, SIGTERM, and a process of the run that dies
        # each step's micro-batches, [(phase.make_batch(its items), its share of the global batch)], built ahead
        batches = bookkeeping.batch_loader(settings, method, phases, book.step)
        while book.step < settings.max_steps and not stopped and not book.out_of_patience():  # --patience: the best model is tested
            phase = phase_at(phases, book.step)
            losses = train_step(settings, run, phase, model, next(batches), optimizer, scheduler, scaler, dtype)
            stopping = book.record(phases, losses, scheduler.get_last_lr()[0], stop.requested)
            if book.evaluates():
                evaluate_and_save(settings, method, raw, core, book)
                model.train()
            stopped = stopping or book.step == settings.stop_at  # to be continued with --resume
            if book.step % settings.save_every == 0 or stopped:
                book.save_checkpoint(core, optimizer, scheduler, scaler)
    book.finish_checkpoint()  # one still being written (--async-checkpoint) put in place
    book.check_end()  # the progress bar closed; a loss that ended far above its start: a warning, however short the run
    del optimizer, scheduler, scaler, batches  # AdamW's moments freed before the test, which may need the room (XXL, sharded)
    distributed.release_memory(device)
    distributed.barrier()
    if stopped and rank == 0:
        print(f"stopped at step {book.step}; continue with the same command and --resume", file=sys.stderr)
    elif not stopped and not settings.no_test:
        test(settings, method, raw, core, book)
    book.discard_checkpoint(stopped)  # --no-keep-checkpoint, where the run has finished
    cli.release(out)  # another run may write to OUT now (a run that fails gives it up when its process ends)
    if owns_process_group:
        del model  # DDP's, which holds the process group: gone before the group (distributed.cleanup)
        distributed.cleanup()
    return raw


def load_run(args, model_dir, device, rank, world_size):
    """What the methods are given: the task (Yu & Joty's few-shot sample of it where asked) and
    the tokenizer, checked against the model's config.json; --max-length is resolved with the rest."""
    config, tokenizer = Config.from_directory(model_dir), Tokenizer.from_pretrained(model_dir)
    check_tokenizer(config, tokenizer, model_dir)
    task = tasks.load_task(args.task, args.data, args.source_lang, args.target_langs, args.strict_data, tokenizer, args.soft_labels)
    task.doc_stride, task.max_answer_length = args.doc_stride, args.max_answer_length
    if args.train_fraction < 1 or args.translated is not None:
        task = tasks.few_shot(task, args.train_fraction, args.translated, args.seed)
    return Run(task, tokenizer, None, args.eval_batch_size, device, rank, world_size, config.num_layers,
               config.max_positions - config.position_offset)


def build_model(settings, method, model_dir, device, rank):
    """The encoder and a fresh head, identical on every rank before DDP wraps them. Under --shard
    the encoder is built on the meta device, its weights read once it is sharded (shard.load_pretrained),
    and the head stays on the host until it is."""
    dropout = {} if settings.dropout is None else {"dropout": settings.dropout, "attention_dropout": settings.dropout}
    encoder = Encoder.from_pretrained(model_dir, device="meta" if settings.shard else device, **dropout)
    encoder.segment_id = method.run.tokenizer.segment_id  # BERT's tokenizers put a pair's second text in segment 1
    torch.manual_seed(settings.seed)
    model = method.build(encoder)
    model = model if settings.shard else model.to(device)
    torch.manual_seed(settings.seed + rank)  # dropout differs across ranks; the weights start identical
    if settings.freeze_embeddings:
        model.encoder.embeddings.word.weight.requires_grad_(False)
    model.encoder.checkpoint_layers(settings.gradient_checkpointing)
    return model


def make_optimizer(settings, model, phases):
    """AdamW, no decay on biases and LayerNorms; the learning rate of each phase, warmed up and
    decayed on its own from its own peak (methods.learning_rate: Yu & Joty's second phase has a smaller one)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    # fused: one pass over each tensor; on CPU it halves the step, most of which is updating the 250k-row embedding
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=settings.lr, fused=True)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: learning_rate(phases, settings.warmup, step))


AUTOCAST = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}  # --amp (flags.autocast resolves auto)


def evaluating(settings):
    """Evaluation's precision: the run's autocast, or float32 with --eval-float32 (a sharded bf16
    run then evaluates a float32 copy of its weights: shard.evaluated)."""
    dtype = None if settings.eval_float32 else AUTOCAST[settings.amp]
    return torch.autocast(settings.device.split(":")[0], dtype=dtype, enabled=dtype is not None)


def train_step(settings, run, phase, model, micro_batches, optimizer, scheduler, scaler, dtype):
    """One optimizer step: forward and backward of a global batch, in --grad-accum micro-batches
    of this process's share of it, then the update. Returns the mean loss over the global batch
    and its parts, this process's share of each: {name: tensor on the device}. Nothing is read
    here, so that the host never waits for the device."""
    device, world_size = run.device, run.world_size
    total, parts = torch.zeros((), device=device), {}
    for micro, (batch, share) in enumerate(micro_batches):
        batch = data.to_device(batch, device)
        last = micro == len(micro_batches) - 1
        with distributed.gradient_sync(model, last):  # the gradients are averaged over the processes once, after the last
            with torch.autocast(device.split(":")[0], dtype=dtype, enabled=dtype is not None):
                loss, components = phase.loss(model, batch)  # the method's loss: a mean over the micro-batch
            # Weighted by the micro-batch's share of the global batch, so that the gradients add up to
            # that of the mean over the global batch; times the processes, whose gradients are averaged.
            scaler.scale(loss * share * world_size).backward()
        total += loss.detach() * share
        for name, value in components.items():
            parts[name] = parts.get(name, 0.0) + value * share
    if settings.max_grad_norm > 0 or settings.clip_value > 0:
        scaler.unscale_(optimizer)
        if settings.clip_value > 0:  # each element (X-Mixup's trainer.py)
            torch.nn.utils.clip_grad_value_(model.parameters(), settings.clip_value, foreach=False)
        if settings.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), settings.max_grad_norm)  # every trained one, X-Mixup's ratio too
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": total, **parts}


def evaluate_and_save(settings, method, raw, core, book):
    """Score the source dev set (and the targets' with --dev-langs all or --select-on all); the
    model of the best score so far, as --select-on scores it, is OUT/best."""
    run, metric = method.run, method.metric()
    langs = [run.task.source] + (run.task.targets if "all" in (settings.dev_langs, settings.select_on) else [])
    with shard.evaluated(core) as evaluated, evaluating(settings):  # a sharded model's own parameters whole, for predictors that call a
        dev = {lang: scores[metric] for lang, scores in method.evaluate(evaluated, "dev", langs).items()}  # part of it, and task.json
        info = dict(task_info(settings, run), **method.saved_info(evaluated))
    if book.record_dev(metric, dev, run.task.source):  # logged; True where it is the best so far
        book.save_best(raw, run.tokenizer, info)


def task_info(settings, run):
    """task.json of OUT/best: what evaluate.py needs to rebuild the task and the predictor."""
    task = run.task
    info = {"task": settings.task, "data": settings.data, "labels": task.labels, "intents": task.intents, "source_lang": task.source,
            "target_langs": task.targets, "head_style": run.level.head(task, settings.head), "pooling": settings.pooling,
            "max_length": settings.max_length, "method": settings.method, "test_input": settings.test_input,
            "alignment_pooling": settings.alignment_pooling}
    if task.level == "span":
        info.update(doc_stride=task.doc_stride, max_answer_length=task.max_answer_length)
    return info


def alignment_before_training(settings, run, core, raw):
    """CKA and retrieval of the pretrained encoder, which the test table shows beside the trained one's."""
    with shard.evaluated(core) as evaluated, evaluating(settings):  # the encoder alone is called: a sharded one's root gathered
        return alignment(shard.part_of(evaluated, core, raw.encoder), run, settings.alignment_pooling, settings.shard)


def alignment(encoder, run, pooling, sharded=False):
    """{target: {"cka": ..., "retrieval": ...}} of an encoder on the task's parallel test sentences;
    a sharded encoder's layers gather with every process, which then all encode every sentence."""
    rank, world_size = (0, 1) if sharded else (run.rank, run.world_size)
    return evaluate.alignment(encoder, run.tokenizer, run.task.test, run.task.source, run.batch_size, run.device, rank, world_size, pooling)


def test(settings, method, raw, core, book):
    """The test table of the best model on dev, with CKA and retrieval before and after training:
    OUT/results.json (with the settings) and OUT/results.md."""
    run, predictions, out, state = method.run, {}, book.out, book.state
    measure = None if settings.no_alignment else (lambda encoder: alignment(encoder, run, settings.alignment_pooling, settings.shard))
    with evaluating(settings):
        results, after = method.test(out / "best", raw, core, settings.test_input, settings.test_translations, predictions, measure)
    results = evaluate.summarise(results, run.task.source) if results else {}
    if run.rank != 0:
        return
    seen = {"input": settings.test_input, "what": TEST_INPUTS[settings.test_input], "translations": settings.test_translations}
    table, summary = evaluate.run_report(results, run.task, state.alignment_before, after, settings.alignment_pooling, out / "predictions")
    summary.update(test_input=seen, best_step=state.best_step, **{f"dev_{method.metric()}": state.best}, settings=settings.as_dict(),
                   **({"warning": book.warning} if book.warning else {}))
    chosen = {"source": "best dev step", "all": "best mean dev step", "last": "last step"}[settings.select_on]
    title = f"{settings.method} on {settings.task}, test split, {chosen} {state.best_step}" + evaluate.saw(
        results and settings.test_input, summary["alignment"] and settings.alignment_pooling)
    cli.write_text(out / "results.json", json.dumps(summary, indent=2) + "\n")
    cli.write_text(out / "results.md", f"{title}\n\n{table}\n")
    evaluate.write_predictions(out / "predictions", predictions)
    print(f"\n{title}\n\n{table}\n\nwritten to {out}/results.json and results.md")


if __name__ == "__main__":
    cli.run(main)
