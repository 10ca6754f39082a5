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

main reads top to bottom: the settings, the data, the model, the optimizer, the loop, the test.
One step is train_step; what the loop does around it (batches built ahead, the log, checkpoints,
stop requests) is minxlt/run/bookkeeping.py, sharding minxlt/parallel/shard.py.
"""
import json
import random
from contextlib import contextmanager
from pathlib import Path

import torch

import data
import evaluate
from methods import (TEST_INPUTS, Run, counterparts, learning_rate, own_parameters, phase_index, prediction_inputs,
                     restore)
from minxlt import tasks
from minxlt.checkpoints import hub
from minxlt.checkpoints.prepare_default import default_model
from minxlt.checkpoints.weights import check_tokenizer
from minxlt.parallel import distributed, memory, shard
from minxlt.run import bookkeeping, cli, compiled, flags
from minxlt.text.tokenizer import Tokenizer
from model import Classifier, Config, Encoder

AUTOCAST = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}  # --amp (flags.autocast resolves auto)


def main(argv=None):
    """One run; returns the built model as it is after the last step, or None where the run stopped before its end
    (Ctrl-C, SIGTERM, --stop-at), to be continued with --resume."""
    # Settings: every flag resolved once, read-only from here on (minxlt/run/flags.py).
    args = flags.parse(argv, __doc__)
    if args.dry_run:  # the memory plan, from config.json alone (minxlt/parallel/memory.py)
        return memory.dry_run(args, hub.resolve(args.model, config_only=True) if args.model else default_model())
    tasks.check_folder(args.task, args.data)  # before a model is fetched: a missing folder names its download command
    owns_process_group = not torch.distributed.is_initialized()  # co-training trains inside an outer run
    rank, world_size, device = distributed.setup(args.device)
    out = cli.output_folder(args.out, args.resume, args.overwrite, rank)  # held by this run while it lasts
    random.seed(args.seed + rank)
    torch.manual_seed(args.seed + rank)  # dropout differs across ranks; the weights start identical (loaded)
    model_dir = hub.resolve(args.model) if args.model else default_model()
    settings, run = flags.resolve(args, load_run(args, model_dir, device, rank, world_size))

    # Data: the method's training items, every text tokenized once, and its phases of training.
    method = flags.METHODS[settings.method](settings, run)
    items = method.training_items()
    if not items:
        raise tasks.InputError(f"no training examples for --method {settings.method} on {settings.task}")
    # The dev and test counterparts, read now (and kept): a missing or unreadable one stops the run before step 1.
    tested = () if settings.no_test else (("test", settings.test_input, settings.test_translations),)
    for split, *given in (("dev",), *tested):
        test_input, translations = prediction_inputs(method, split, *given)
        if test_input != "text":
            counterparts(run, split, test_input, translations, settings.get("missing_translations", "refuse"))
    phases = method.phases(items)
    book = bookkeeping.Book(out, settings, run, model_dir, phases, owns_process_group)

    # Model: the built model (OUT/best) and the method's module around it, which trains and is checkpointed.
    raw = build_model(settings, method, model_dir, device, rank)
    core = method.wrap(raw)
    if settings.shard:  # each process holds 1/N of the weights, gradients and AdamW's moments
        model = shard.wrap(core, raw.encoder, settings.amp, settings.offload, device,
                           evaluate_in_bf16=not settings.eval_float32, embeddings_unit=settings.shard_embeddings)
        shard.load_pretrained(core, raw.encoder, model_dir, device, settings.offload)  # each process reads its own rows
    else:  # each process holds them all (DDP)
        model = distributed.wrap(core, device, getattr(core, "unused_parameters", False))
    method.start(core, items)  # before any update: Unicoder's hard negatives; a teacher, loaded after the student
    optimizer, scheduler = make_optimizer(settings, core, phases)
    dtype = AUTOCAST[settings.amp]
    scaler = torch.amp.GradScaler(device.split(":")[0], enabled=dtype == torch.float16)
    book.start(core, optimizer, scheduler, scaler)

    # The loop: a step a global batch, a log record every --log-every steps, an evaluation on dev every
    # --eval-every (the best model goes to OUT/best), a checkpoint every --save-every.
    if settings.compile:  # each phase's loss, and its backward, compiled (minxlt/run/compiled.py)
        phases = compiled.compiled_phases(settings, phases, raw.encoder, world_size)
    model.train()
    stopped = False
    with book.stop_requests():  # Ctrl-C, SIGTERM, and a process of the run that dies
        batches = bookkeeping.batch_loader(settings, method, phases, book.step)  # each step's batches, built ahead
        while book.step < book.steps and not stopped and not book.out_of_patience():
            phase = phases[phase_index(phases, book.step)[0]]
            losses = train_step(settings, run, phase, model, next(batches), optimizer, scheduler, scaler, dtype)
            stopping = book.record(phases, losses, scheduler.get_last_lr()[0])
            if book.evaluates():
                evaluate_and_save(settings, method, raw, core, book)
                model.train()
                stopping = stopping or book.stop_asked()  # a Ctrl-C while dev was scored (after the last: no test)
            stopped = stopping or book.step == settings.stop_at  # to be continued with --resume
            if book.step % settings.save_every == 0 or stopped:
                book.save_checkpoint(core, optimizer, scheduler, scaler)
    book.finish(stopped)  # a checkpoint still being written put in place; a loss that ended far above its start said
    del optimizer, scheduler, scaler, batches  # AdamW's moments freed before the test, which may need the room
    distributed.release_memory(device)
    distributed.barrier()
    if not stopped and not settings.no_test:
        try:
            test(settings, method, raw, core, book, model_dir)
        except (KeyboardInterrupt, RuntimeError) as e:  # trained, with no checkpoint to resume: the test alone remains
            raise SystemExit(stopped_in_test(e, book.out / "best")) from None
    book.close(stopped)  # --no-keep-checkpoint; OUT given up to other runs
    if owns_process_group:
        del model  # DDP's, which holds the process group: gone before the group (distributed.cleanup)
        distributed.cleanup()
    return None if stopped else raw


def stopped_in_test(error, best):
    """What a Ctrl-C, or another process's end, during the test says: how to test the trained model `best`; any other
    error raised as it is."""
    gone = distributed.lost_process(error)
    if isinstance(error, RuntimeError) and not gone:
        raise error
    why = f"another process of the run stopped ({gone})" if gone else "interrupted"
    if not (best / "task.json").is_file():
        return f"{why} during the test"
    return f"{why} during the test; test the trained model with python evaluate.py --checkpoint {best}"


def load_run(args, model_dir, device, rank, world_size):
    """What the methods are given: the task (Yu & Joty's few-shot sample of it where asked) and the
    tokenizer, checked against the model's config.json; --max-length is resolved with the rest."""
    config, tokenizer = Config.from_directory(model_dir), Tokenizer.from_pretrained(model_dir)
    check_tokenizer(config, tokenizer, model_dir)
    task = tasks.load_task(args.task, args.data, args.source_lang, args.target_langs, args.strict_data, tokenizer,
                           getattr(args, "soft_labels", None))
    task.doc_stride, task.max_answer_length = args.doc_stride or 128, args.max_answer_length or 30
    if (args.train_fraction or 1) < 1 or args.translated is not None:
        task = data.few_shot(task, args.train_fraction or 1, args.translated, args.seed or 0)
    return Run(task, tokenizer, None, args.eval_batch_size or 64, device, rank, world_size, config.num_layers,
               config.max_positions - config.position_offset)


def build_model(settings, method, model_dir, device, rank):
    """The encoder and the method's fresh head, identical on every rank before DDP wraps them. Under
    --shard the encoder is built on the meta device, its weights read once it is sharded."""
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
    """AdamW, no decay on biases and LayerNorms; each phase's rate warmed up and decayed (methods.learning_rate)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=settings.lr, fused=True)  # fused: one pass over each tensor
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: learning_rate(phases, settings.warmup, step))
    return optimizer, schedule


@contextmanager
def evaluating(settings, model, part=None):
    """`model` (or its `part`) in evaluation's precision: the run's autocast, or float32 with --eval-float32;
    sharded, gathered, or a float32 copy where it computes in bf16 (shard.evaluated)."""
    dtype = None if settings.eval_float32 else AUTOCAST[settings.amp]
    with torch.autocast(settings.device.split(":")[0], dtype=dtype, enabled=dtype is not None):
        if not settings.shard:
            yield model if part is None else part
            return
        with shard.evaluated(model, part) as evaluated:
            yield evaluated


def train_step(settings, run, phase, model, micro_batches, optimizer, scheduler, scaler, dtype):
    """One optimizer step over a global batch, in --grad-accum micro-batches of this process's share: its mean loss and
    parts, this process's share of each ({name: tensor on the device}); nothing is read, so the host never waits."""
    device, world_size = run.device, run.world_size
    total, parts = torch.zeros((), device=device), {}
    for micro, (batch, share) in enumerate(micro_batches):
        batch = data.to_device(batch, device)
        if hasattr(model, "require_backward_grad_sync"):  # DDP: averaged over the processes after the last one
            model.require_backward_grad_sync = micro == len(micro_batches) - 1
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
            torch.nn.utils.clip_grad_norm_(model.parameters(), settings.max_grad_norm)  # X-Mixup's ratio too
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": total, **parts}


def evaluate_and_save(settings, method, raw, core, book):
    """Score the dev set; the model of the best score so far, as --select-on scores it, is OUT/best."""
    run = method.run
    langs = [run.task.source] + (run.task.targets if "all" in (settings.dev_langs, settings.select_on) else [])
    with evaluating(settings, core) as evaluated:  # a sharded model's own parameters whole
        scores = method.evaluate(evaluated, "dev", langs)
        info = dict(task_info(settings, run), parameters=own_parameters(evaluated))
    metric = run.level.metric(run.task)  # the task level's, or a method's own (Unicoder's)
    metric = metric if metric in scores[run.task.source] else next(iter(scores[run.task.source]))
    if book.record_dev(metric, {lang: score[metric] for lang, score in scores.items()}, run.task.source):
        book.save_best(raw, run.tokenizer, info)


def task_info(settings, run):
    """task.json of OUT/best: what evaluate.py needs to rebuild the task and the predictor."""
    task = run.task
    own = {f.name: settings.get(f.name) for f in flags.own_flags(flags.METHODS[settings.method])}  # the method's own
    absolute = lambda path: path and str(Path(path).resolve())  # evaluate.py reads them from any folder ({lang} kept)
    info = {"task": settings.task, "data": absolute(settings.data), "labels": task.labels, "intents": task.intents,
            "source_lang": task.source, "target_langs": task.targets, "head_style": run.level.head(task, settings.head),
            "pooling": settings.pooling, "max_length": settings.max_length, "method": settings.method,
            "test_input": settings.test_input, "alignment_pooling": settings.alignment_pooling, "seed": settings.seed,
            "test_translations": absolute(settings.test_translations),
            "dev_translations": absolute(settings.dev_translations),
            "eval_amp": "none" if settings.eval_float32 else settings.amp, **own}  # evaluation's autocast (evaluating)
    if task.level == "span":
        info.update(doc_stride=task.doc_stride, max_answer_length=task.max_answer_length)
    return info


def alignment(encoder, run, settings):
    """{target: {"cka": ..., "retrieval": ...}} of an encoder on the task's parallel test sentences;
    a sharded encoder's layers gather with every process, which then all encode every sentence."""
    rank, world_size = (0, 1) if settings.shard else (run.rank, run.world_size)
    return evaluate.alignment(encoder, run.tokenizer, run.task.test, run.task.source, run.batch_size, run.device, rank,
                              world_size, settings.alignment_pooling)


def test(settings, method, raw, core, book, model_dir):
    """The best model's test table, with CKA and retrieval before and after training: OUT/results.json and .md."""
    run, predictions, out, state = method.run, {}, book.out, book.state
    load_encoder = lambda directory: (shard.load_encoder(directory, run.device, settings.offload) if settings.shard
                                      else Encoder.from_pretrained(directory, device=run.device)).eval()
    before = None  # CKA and retrieval of the pretrained encoder (model_dir's), which the table shows beside the best's
    if not settings.no_alignment:
        pretrained = load_encoder(model_dir)
        with evaluating(settings, pretrained) as encoder:  # sharded: gathered (shard.evaluated)
            before = alignment(encoder, run, settings)
        del pretrained, encoder
    # OUT/best, whole or sharded as it loads: a saved classifier made the method's module again with its task.json,
    # or an encoder alone (Unicoder's); without it, the model as training left it.
    best, tested, saved = out / "best", core, raw
    if (best / "head.safetensors").exists():
        saved, _, info = (shard.load_classifier(best, run.device, settings.offload) if settings.shard
                          else Classifier.load(best, run.device))
        tested = restore(method.wrap(saved.eval()), info)
    elif best.exists():
        tested = saved = load_encoder(best)
    with evaluating(settings, saved):  # a sharded model's embeddings and head, whole
        results = method.evaluate(tested, "test", None, settings.test_input, settings.test_translations, predictions)
        after = None if settings.no_alignment else alignment(getattr(saved, "encoder", saved), run, settings)
    results = evaluate.summarise(results, run.task.source)
    if run.rank != 0:
        return
    seen = {"input": settings.test_input, "what": TEST_INPUTS[settings.test_input],
            "translations": settings.test_translations}
    table, summary = evaluate.run_report(results, run.task, before, after, settings.alignment_pooling,
                                         out / "predictions")
    summary.update(test_input=seen, best_step=state.best_step, **{f"dev_{state.metric}": state.best},
                   settings=dict(settings.as_dict(), max_steps=book.steps),
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
