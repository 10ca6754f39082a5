"""Fine-tune a multilingual encoder on English labels and test it in every language.

    python train.py                                   # the default job: bundled corpus and model, XeroAlign
    python train.py --method zero-shot --task sib200 --data ../shared/data/sib200 --out runs/sib200-zs
    python train.py --method filter --task xquad --data ../shared/data/xquad --out runs/xquad-filter   # QA (qa.py)
    torchrun --nproc_per_node 2 train.py --method xeroalign --out runs/demo-xa

Methods:
  zero-shot        the task loss on source-language examples only
  translate-train  the task loss on the source and all its translations (Unicoder's multi-language
                   fine-tuning, "translate-train-all")
  xeroalign        the task loss on the source plus the XeroAlign loss (Gritta & Iacobacci 2021)
                   between the <s> vectors of a source example and its translation, both encoded
                   in the same forward pass; target labels unused (--target-labels)
  filter           FILTER (Fang et al. 2021): each source example and its translation go through
                   the encoder together (fusion.py), with the task loss on both sides (Eq. 4).
                   Self-teaching is a second run from the pretrained weights with --teacher:

    python train.py --method filter --out runs/filter-teacher
    python train.py --method filter --teacher runs/filter-teacher/best --out runs/filter-student

  xmixup           X-Mixup (Yang et al. 2022): each source example and its translation run side by
                   side, the translation mixed with the source at one layer (mixup.py); task losses
                   on both sides (Eq. 8) plus consistency losses (Eq. 7); scheduled sampling feeds
                   round-trip translations of the source where the task has them
  contrastive      Yu & Joty (2021) language adaptation: first the task loss plus label alignment
                   (Eq. 2-3) on the source and its translations, then, for the last --sa-steps with
                   a smaller learning rate, the task loss plus semantic alignment (Eq. 4-5) on
                   groups of a source text, b of its translations and b source texts of other labels
  cotrain          Yu & Joty (2021) co-training (Algorithm 1, cotrain.py): this model and a sentence-
                   embedding model (--embedding-model) label the target languages' unlabelled
                   training texts for each other, for --cotrain-iterations rounds
  unicoder         Unicoder (Huang et al. 2019): continued pre-training on the task's parallel
                   training text (and --parallel files) with its five tasks in turn (unicoder.py);
                   OUT/best is an encoder checkpoint for --model of any other method, selected on
                   masked-token accuracy of held-out dev pairs

    python train.py --method unicoder --task sib200 --data ../shared/data/sib200 --out runs/unicoder
    python train.py --method zero-shot --model runs/unicoder/best --task sib200 --data ../shared/data/sib200

The run reads top to bottom: arguments, distributed setup, data, model, optimizer, the loop
(with evaluation on the source dev set and checkpoints), then the test table from the best model.
Everything a resumed run needs is in OUT/checkpoint.pt; the best model is OUT/best/, an ordinary
checkpoint directory; losses and evaluations go to OUT/log.jsonl.
"""
import argparse
import json
import math
import os
import random
import shutil
import signal
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

import data
import evaluate
import unicoder
from evaluate import cleanup_distributed, setup_distributed
from fusion import Filter, Teacher
from methods import compute_loss, head_style, make_batch, task_defaults
from mixup import XMixup
from model import Classifier, Config, Encoder, Tokenizer, default_model
from weights import CheckpointError

METHODS = ["zero-shot", "translate-train", "xeroalign", "filter", "xmixup", "contrastive", "cotrain", "unicoder"]


def get_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("what to train")
    g.add_argument("--method", default="xeroalign", choices=METHODS, help="see above (default: xeroalign)")
    g.add_argument("--task", default="demo", help="demo (the bundled corpus's intents), demo-slots (its BIO slots), sib200, xnli, pawsx, udpos (UPOS tagging on UD PUD), xsid (intent + BIO slots, "
                   "trained on English valid), or xquad (extractive QA, split by article)")
    g.add_argument("--data", help="data directory of the task, e.g. ../shared/data/sib200 (not needed for demo)")
    g.add_argument("--model", help="Hugging Face checkpoint directory to start from (default: the bundled multilingual-e5-small)")
    g.add_argument("--source-lang", help="language with training labels (default: the task's English)")
    g.add_argument("--target-langs", help="comma-separated languages to transfer to (default: all of the task's)")
    g.add_argument("--out", default="runs/default", help="output directory: checkpoint, best model, log, results")
    g.add_argument("--train-fraction", type=float, default=1.0,
                   help="train on this share of the source's training examples, drawn per label (Yu & Joty's 1.2%%: 0.012)")
    g.add_argument("--translated", type=int, help="keep the translations of only this many of them (Yu & Joty's few-shot: 200)")
    g.add_argument("--extra-train", help="JSONL file of further labelled examples (id, lang, text, label), trained on with the "
                                         "source's: co-training's pseudo-labels, or your own")
    g = p.add_argument_group("optimisation")
    g.add_argument("--max-steps", type=int, default=150, help="optimizer steps (the default finishes in minutes on 2 CPU cores)")
    g.add_argument("--batch-size", type=int, default=32, help="examples per optimizer step, over all processes and micro-steps")
    g.add_argument("--grad-accum", type=int, default=1, help="micro-steps per optimizer step (memory: each holds batch-size / grad-accum / processes)")
    g.add_argument("--lr", type=float, default=5e-5, help="peak learning rate of AdamW")
    g.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay (not on biases and LayerNorms)")
    g.add_argument("--warmup", type=float, default=0.1, help="fraction of steps of linear warmup, then linear decay to 0")
    g.add_argument("--max-grad-norm", type=float, default=1.0, help="gradient clipping (0: off)")
    g.add_argument("--max-length", type=int, help="tokens per text (pairs: in total), longest-first truncation; for QA, per window "
                                                  "(default: 128, QA 384)")
    g.add_argument("--dropout", type=float, help="override the checkpoint's dropout (0 makes runs comparable across process counts)")
    g.add_argument("--head", default="roberta", choices=["roberta", "linear"], help="sentence classifier: dense-tanh-projection or one linear layer")
    g.add_argument("--pooling", default="cls", choices=["cls", "mean"], help="sentence vector: <s>, or the mean of the tokens (sentence-embedding models)")
    g.add_argument("--freeze-embeddings", action="store_true", help="keep the word embeddings fixed (faster: no update of the 250k x H matrix)")
    g.add_argument("--group-by-length", action="store_true", help="batch texts of similar length together (less padding)")
    g.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("question answering")
    g.add_argument("--doc-stride", type=int, default=128, help="context tokens shared by consecutive windows of a long context")
    g.add_argument("--max-answer-length", type=int, default=30, help="the longest answer predicted, in tokens")
    g = p.add_argument_group("XeroAlign")
    g.add_argument("--align-weight", type=float, default=1.0, help="weight of the alignment loss (the paper sums the two: 1)")
    g.add_argument("--target-labels", action="store_true", help="also train the task on the translations' labels")
    g = p.add_argument_group("FILTER")
    g.add_argument("--filter-m", type=int, default=1, help="local layers, each text alone (the paper's default: 1)")
    g.add_argument("--filter-k", type=int, help="fusion layers over the joined pair (default: the paper's 1 for classification and "
                                                "tagging; for QA its 20 of 24 layers, scaled to the encoder's depth)")
    g.add_argument("--teacher", help="self-teaching: a FILTER model trained by this script (its OUT/best); its probabilities on the "
                                     "translations become soft labels (Eq. 5-6), computed on the fly. For --method xmixup on word "
                                     "labels: a --method zero-shot model, whose tags of the translations are the soft labels")
    g.add_argument("--teacher-cache", help="file of the teacher's probabilities on every training pair: read if it exists, "
                                           "else computed once from --teacher and written")
    g.add_argument("--kl-weight", type=float, help="1 - lambda in Eq. 6: the self-teaching loss weight (default: the paper's 0.5 "
                                                   "for sentence labels, 0.1 for QA, 1.0 for word labels, whose lambda is 0)")
    g = p.add_argument_group("X-Mixup")
    g.add_argument("--mixup-layer", type=int, help="the layer (1-based) where the translation is mixed (default: the paper's first "
                                                   "for sentence labels, fourth for word labels; for QA its 16th of 24, scaled "
                                                   "to the encoder's depth)")
    g.add_argument("--mixup-alpha", type=float, help="alpha of Eq. 8: the source's share of the task loss (default: the paper's 0.4 for sentence labels, "
                   "0.8 for word labels, 0.2 for QA)")
    g.add_argument("--lambda0", type=float, default=0.5, help="the largest mixup ratio (Eq. 5)")
    g.add_argument("--ss-k", type=float, help="k of the inverse sigmoid decay of scheduled sampling (Eq. 6; default: the paper's 1000, "
                                             "2000 for QA)")
    g.add_argument("--constant-ratio", action="store_true", help="ablation: lambda = lambda0 instead of the entropy-based ratio")
    g.add_argument("--no-consistency", action="store_true", help="ablation: without the consistency losses of Eq. 7")
    g.add_argument("--no-mixup-inference", action="store_true", help="ablation: test the target text alone, not mixed with its translation")
    g = p.add_argument_group("contrastive adaptation and co-training (Yu & Joty)")
    g.add_argument("--tau", type=float, default=0.1, help="temperature of the contrastive losses (the paper gives none; 0.1 here)")
    g.add_argument("--la-weight", type=float, default=1.0, help="lambda_LA of Eq. 3")
    g.add_argument("--sa-weight", type=float, default=1.0, help="lambda_SA of Eq. 5")
    g.add_argument("--sa-steps", type=int, help="steps of the second phase, semantic alignment (default: a quarter of --max-steps)")
    g.add_argument("--sa-lr", type=float, help="its peak learning rate, 'smaller' in the paper (default: --lr / 5)")
    g.add_argument("--sa-group", type=int, default=4, help="b: translations and other-label texts per anchor (a group has 2b + 1 texts)")
    g.add_argument("--embedding-model", help="cotrain: the second view, a sentence-embedding checkpoint (default: the bundled model)")
    g.add_argument("--cotrain-iterations", type=int, default=3, help="cotrain: s, the rounds of Algorithm 1")
    g.add_argument("--threshold", type=float, default=0.9, help="cotrain: t, the confidence a pseudo-label needs")
    g.add_argument("--pool-per-lang", type=int, help="cotrain: unlabelled texts per target language, drawn at random "
                                                     "(default: all of its training texts)")
    g = p.add_argument_group("Unicoder")
    g.add_argument("--parallel", action="append", metavar="XX_FILE,EN_FILE",
                   help="more line-aligned parallel text for --method unicoder (e.g. corpus.de,corpus.en); repeatable")
    g = p.add_argument_group("evaluation and checkpoints")
    g.add_argument("--eval-every", type=int, default=50, help="steps between evaluations on the source dev set (and checkpoints)")
    g.add_argument("--dev-langs", default="source", choices=["source", "all"], help="dev languages to log (selection is always on the source)")
    g.add_argument("--eval-batch-size", type=int, default=64)
    g.add_argument("--no-alignment", action="store_true", help="skip CKA and retrieval before and after training")
    g.add_argument("--no-test", action="store_true", help="skip the test table at the end (the best model on dev is still saved)")
    g.add_argument("--resume", action="store_true", help="continue exactly from OUT/checkpoint.pt")
    g.add_argument("--stop-at", type=int, help="save a checkpoint and exit after this step (continue later with --resume)")
    g = p.add_argument_group("hardware")
    g.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    g.add_argument("--amp", default="auto", choices=["auto", "none", "bf16", "fp16"],
                   help="autocast: auto is bf16 on GPUs that support it, fp16 with loss scaling on older ones, off on CPU")
    args = p.parse_args(argv)
    if args.batch_size % args.grad_accum:
        p.error(f"--batch-size {args.batch_size} must be divisible by --grad-accum {args.grad_accum}")
    return args


def autocast_dtype(amp, device):
    if amp == "auto":
        if not device.startswith("cuda"):
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]


def rng_state():
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state):
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def gather(obj, world_size):
    if world_size == 1:
        return [obj]
    out = [None] * world_size
    dist.all_gather_object(out, obj)
    return out


def replace_dir(tmp, target):
    """Swap a finished directory into place, so a crash leaves the old or the new one whole."""
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


class StopRequest:
    """Ctrl-C asks the run to stop after the current step and save; a second Ctrl-C aborts."""

    def __init__(self):
        self.requested = False
        signal.signal(signal.SIGINT, self.handle)

    def handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\nstopping after this step to save a checkpoint (Ctrl-C again to abort)", file=sys.stderr)


def main(argv=None):
    """Train, evaluate, write OUT/; returns the model as it is after the last step."""
    args = get_args(argv)
    owns_process_group = not dist.is_initialized()  # co-training calls main() again inside a run
    rank, world_size, device = setup_distributed(args.device)
    out = Path(args.out)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
    if not args.resume and rank == 0 and (out / "checkpoint.pt").exists():
        print(f"note: starting afresh in {out}, replacing the run there (use --resume to continue it)", file=sys.stderr)
    if not args.resume and rank == 0:  # a fresh run leaves nothing of an earlier one to be mistaken for its own
        for stale in ("checkpoint.pt", "log.jsonl", "results.json", "results.md"):
            (out / stale).unlink(missing_ok=True)
        shutil.rmtree(out / "best", ignore_errors=True)
    random.seed(args.seed + rank)
    torch.manual_seed(args.seed + rank)  # dropout differs across ranks; the weights start identical (loaded)

    # Data: every example tokenized once; translations of a source share its id.
    model_dir = Path(args.model) if args.model else default_model()
    tokenizer = Tokenizer.from_pretrained(model_dir)
    task = data.load_task(args.task, args.data, args.source_lang, args.target_langs.split(",") if args.target_langs else None)
    task.doc_stride, task.max_answer_length = args.doc_stride, args.max_answer_length
    for name, value in task_defaults(task.level, Config.from_directory(model_dir).num_layers, args.filter_m).items():
        if getattr(args, name) is None:  # the flags left to the task's defaults
            setattr(args, name, value)
    unlabelled = {lang: task.train[lang] for lang in task.targets}  # co-training's pool: every target-language text
    if args.pool_per_lang is not None:  # or a random sample of each language's
        unlabelled = {lang: random.Random(f"{args.seed}/pool/{lang}").sample(texts, min(args.pool_per_lang, len(texts)))
                      for lang, texts in unlabelled.items()}
    if args.train_fraction < 1 or args.translated is not None:
        task = data.few_shot(task, args.train_fraction, args.translated, args.seed)
    if args.parallel and args.method != "unicoder":
        raise SystemExit("--parallel adds pre-training text for --method unicoder; fine-tuning methods learn from the task's data")
    if args.method in ("contrastive", "cotrain") and task.level != "sentence":
        raise SystemExit(f"--method {args.method} contrasts and pseudo-labels whole sentences (Yu & Joty classify them); "
                         f"--task {args.task} labels {'words' if task.level == 'word' else 'answer spans'}: "
                         "use zero-shot, translate-train, xeroalign, filter or xmixup")
    if args.method == "cotrain":
        import cotrain
        return cotrain.run(args, task, unlabelled, rank, world_size)
    extra = data.read_jsonl_examples(args.extra_train, task.labels) if args.extra_train else []
    if extra and task.level == "span":
        raise SystemExit("--extra-train adds labelled sentences; QA examples come from the task's SQuAD files")
    if extra and args.method not in ("zero-shot", "translate-train", "contrastive"):
        raise SystemExit(f"--extra-train adds single labelled texts, which --method {args.method} (trained on pairs) cannot use")
    encode = lambda examples: data.encode(examples, tokenizer, task, args.max_length)
    metric = task.metric  # model selection on the source dev set
    translations, anchors = {}, []
    if args.method == "unicoder":  # parallel text: the task's translations (never its test split), --parallel files
        items = unicoder.parallel_pairs(task, "train", tokenizer, args.max_length, unicoder.read_parallel_files(args.parallel))
        dev_pairs = unicoder.parallel_pairs(task, "dev", tokenizer, args.max_length)
        metric = "masked_accuracy"
    elif args.method in ("translate-train", "contrastive"):  # the source and its translations (D and D_bi)
        items = encode([e for lang in [task.source, *task.targets] for e in task.train[lang]] + extra)
    else:
        items = encode(task.train[task.source] + extra)
        if args.method in ("xeroalign", "filter", "xmixup"):  # every (source, translation) pair is a training example
            items = data.translation_pairs(items, encode([e for lang in task.targets for e in task.train[lang]]))
    round_trip = {}
    if args.method == "xmixup":
        if task.level == "word" and not (args.teacher or args.teacher_cache):
            raise SystemExit("--method xmixup on word labels needs --teacher: a model trained on the source (--method zero-shot), "
                             "whose tags of the translations are their soft labels (X-Mixup Sec. 4.2)")
        round_trip = {it.id: it for it in encode(list(task.round_trip.values()))}
        if rank == 0 and not round_trip:
            print(f"note: {args.task} has no round-trip translations of its {task.source} training texts: "
                  "scheduled sampling is off (the mixup always sees the gold source)", file=sys.stderr)
    sa_steps = (args.sa_steps if args.sa_steps is not None else args.max_steps // 4) if args.method == "contrastive" else 0
    if sa_steps:  # the second phase's anchors: source examples that have translations
        sources = {it.id: it for it in items if it.lang == task.source}
        for it in items:
            if it.lang != task.source and it.id in sources:
                translations.setdefault(it.id, {})[it.lang] = it
        anchors = [sources[i] for i in sorted(translations)]
        if len({a.label for a in anchors}) < 2:
            raise SystemExit("semantic alignment needs translated source examples of at least two labels (see --translated)")
    if not items:
        raise SystemExit(f"no training examples for --method {args.method} on {args.task}")
    phase_one = args.max_steps - sa_steps

    # Model: the encoder and a fresh head, identical on every rank before DDP wraps it.
    dropout = {} if args.dropout is None else {"dropout": args.dropout, "attention_dropout": args.dropout}
    encoder = Encoder.from_pretrained(model_dir, **dropout)
    torch.manual_seed(args.seed)
    head = head_style(task, args.head)
    if args.method == "unicoder":  # the encoder with its LM head, W of Eq. 2 and a paraphrase classifier
        raw = unicoder.Unicoder(encoder).to(device)
    else:
        raw = Classifier(encoder, len(task.labels), head, args.pooling, len(task.intents or ())).to(device)
    torch.manual_seed(args.seed + rank)
    for unused in (encoder.pooler, None if args.method == "unicoder" else encoder.lm_head):  # DDP wants a gradient for every trainable parameter
        if unused is not None:
            unused.requires_grad_(False)
    if args.freeze_embeddings:
        raw.encoder.embeddings.word.weight.requires_grad_(False)
    if args.method == "unicoder":  # hard negatives from the pretrained embeddings, before any update (a resumed run finds the same)
        unicoder.mine_hard_negatives(items, lambda rows: unicoder.mean_word_embeddings(encoder, rows))
    alignment_before = None
    if not args.no_alignment and not args.resume:
        alignment_before = evaluate.alignment(raw.encoder, tokenizer, task.test, task.source, args.eval_batch_size, device, rank, world_size)
    # The method's view of the classifier: FILTER and X-Mixup run it on pairs (X-Mixup adds its ratio's
    # W and b). Checkpoints hold this whole module; OUT/best holds the classifier plus task.json.
    core = raw
    if args.method == "filter":
        core = Filter(raw, args.filter_m, args.filter_k)
    elif args.method == "xmixup":
        core = XMixup(raw, args.mixup_layer - 1, args.lambda0, args.lambda0 if args.constant_ratio else None).to(device)
        if args.constant_ratio:
            core.ratio.requires_grad_(False)  # unused: DDP must not wait for its gradient
    pair_model = core if args.method == "filter" or (args.method == "xmixup" and not args.no_mixup_inference) else None
    model = core
    if world_size > 1:
        # Unicoder's steps each train one task, which leaves the other tasks' heads without gradient.
        model = DistributedDataParallel(core, device_ids=[device] if device.startswith("cuda") else None,
                                        find_unused_parameters=args.method == "unicoder")
    teacher = None
    if args.teacher or args.teacher_cache:
        if args.method not in ("filter", "xmixup") or (args.method == "xmixup" and task.level != "word"):
            raise SystemExit("--teacher and --teacher-cache are for --method filter (self-teaching) and for --method xmixup "
                             "on word labels (soft labels of the translations)")
        cached = args.teacher_cache and Path(args.teacher_cache).exists()
        if not cached and not args.teacher:
            raise SystemExit(f"--teacher-cache {args.teacher_cache} does not exist yet: give --teacher CKPT to compute it")
        teacher = Teacher(args.teacher, args.teacher_cache if cached else None, device, kind=args.method)
        if args.teacher_cache and not cached:
            teacher.build_cache(tokenizer, items, args.eval_batch_size, device, rank, world_size)
            if rank == 0:
                torch.save(teacher.cache, args.teacher_cache)

    # Optimizer: AdamW, no decay on biases and LayerNorms; linear warmup then linear decay.
    decay = [p for p in core.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in core.parameters() if p.requires_grad and p.ndim < 2]
    # fused: one pass over each tensor; on CPU it halves the step, most of which is updating the 250k-row embedding
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, fused=True)
    def ramp(s, n):  # linear warmup over a fraction of n steps, then linear decay to 0
        warmup = int(args.warmup * n)
        return min((s + 1) / max(warmup, 1), max(0.0, (n - s) / max(n - warmup, 1)))

    def schedule(s):  # contrastive's second phase restarts the ramp at a smaller peak
        return ramp(s, phase_one) if s < phase_one else (args.sa_lr or args.lr / 5) / args.lr * ramp(s - phase_one, sa_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    dtype = autocast_dtype(args.amp, device)
    scaler = torch.amp.GradScaler(enabled=dtype == torch.float16)

    step, best, best_step = 0, -1.0, -1
    if args.resume:
        path = out / "checkpoint.pt"
        if not path.exists():
            raise SystemExit(f"--resume: {path} not found")
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        core.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        scaler.load_state_dict(ckpt["scaler"])
        step, best, best_step, alignment_before = ckpt["step"], ckpt["best"], ckpt["best_step"], ckpt.get("alignment_before")
        if len(ckpt["rng"]) == world_size:
            set_rng_state(ckpt["rng"][rank])
        elif rank == 0:
            print(f"note: resuming {len(ckpt['rng'])}-process run on {world_size}: dropout draws will differ", file=sys.stderr)

    def save_checkpoint():
        states = gather(rng_state(), world_size)
        if rank == 0:
            state = {"model": core.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                     "scaler": scaler.state_dict(), "step": step, "best": best, "best_step": best_step,
                     "rng": states, "args": vars(args), "alignment_before": alignment_before}
            torch.save(state, out / "checkpoint.pt.tmp")
            os.replace(out / "checkpoint.pt.tmp", out / "checkpoint.pt")

    def log(record):
        if rank == 0:
            with open(out / "log.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")

    def evaluate_dev():
        if args.method == "unicoder":
            return {task.source: unicoder.masked_accuracy(raw, dev_pairs, tokenizer, args.eval_batch_size, device)}
        langs = [task.source] + (task.targets if args.dev_langs == "all" else [])
        dev = evaluate.evaluate_split(raw, tokenizer, task, {l: task.dev[l] for l in langs}, args.eval_batch_size,
                                      args.max_length, device, rank, world_size, pair_model, task.dev[task.source])
        model.train()
        return {lang: scores[metric] for lang, scores in dev.items()}

    task_info = {"task": args.task, "data": args.data, "labels": task.labels, "intents": task.intents, "source_lang": task.source,
                 "target_langs": task.targets, "head_style": head, "pooling": args.pooling, "max_length": args.max_length,
                 "method": args.method, **({"doc_stride": args.doc_stride, "max_answer_length": args.max_answer_length}
                                           if task.level == "span" else {}),
                 **({"filter_m": args.filter_m, "filter_k": args.filter_k} if args.method == "filter" else {})}

    def saved_task_info():
        """task.json of the best model: X-Mixup's ratio is read when the model is saved."""
        if args.method != "xmixup":
            return task_info
        return dict(task_info, mixup={"layer": core.layer, "lambda0": args.lambda0, "fixed_ratio": core.fixed_ratio,
                                      "ratio_weight": core.ratio.linear.weight.item(), "ratio_bias": core.ratio.linear.bias.item(),
                                      "inference": not args.no_mixup_inference})
    progress = tqdm(total=args.max_steps, initial=step, disable=rank != 0, desc=f"{args.method} on {args.task}", dynamic_ncols=True)
    stop, started = StopRequest(), time.time()
    model.train()
    micro_size = args.batch_size // args.grad_accum
    first = lambda item: item[0] if isinstance(item, tuple) else item  # the source of a pair
    planned = None
    while step < args.max_steps:
        # The phase (contrastive has two) and the epoch's batch order follow from the step alone:
        # a resumed run picks up where it stopped.
        second = step >= phase_one
        current, method, start = (anchors, "contrastive-sa", phase_one) if second else (items, args.method, 0)
        epoch, position = divmod(step - start, math.ceil(len(current) / args.batch_size))
        if planned != (second, epoch):
            lengths = [len(it.source) + len(it.target) if args.method == "unicoder" else
                       max(len(x.ids) for x in (it if isinstance(it, tuple) else [it])) for it in current]
            batches = data.epoch_batches(lengths, args.batch_size, epoch, args.seed, group_by_length=args.group_by_length)
            # What a loss averages over: examples, or scored tokens for word-level tasks (of the
            # source, for pairs). Shares of the global batch are counted in these units, so that N
            # processes compute the same mean as one.
            units = [1 if task.level != "word" or args.method == "unicoder" else sum(l != -100 for l in first(it).label)
                     for it in current]
            planned = (second, epoch)
        global_batch = batches[position]
        total = torch.zeros((), device=device)
        parts = {}
        for micro in range(args.grad_accum):
            chunk = global_batch[micro * micro_size:(micro + 1) * micro_size]
            index, weights = data.shard(chunk or global_batch[:1], rank, world_size)
            weights = weights if chunk else [0.0] * len(weights)
            batch = make_batch(method, [current[i] for i in index], weights, step, args.seed, tokenizer, task.level,
                               teacher, round_trip, args.ss_k, (translations, anchors, args.sa_group))
            batch = {name: value.to(device) if torch.is_tensor(value) else value for name, value in batch.items()}
            # Each micro-batch's mean loss, weighted by its share of the global batch; times the number
            # of processes because DDP averages gradients over them. The step's gradient is then that
            # of the mean loss over the whole global batch, whatever the process count.
            share = sum(w * units[i] for i, w in zip(index, weights)) / sum(units[i] for i in global_batch)
            sync = model.no_sync() if world_size > 1 and micro < args.grad_accum - 1 else nullcontext()
            with sync:
                with torch.autocast(device.split(":")[0], dtype=dtype, enabled=dtype is not None):
                    loss, components = compute_loss(method, model, batch, args, task.level)
                scaler.scale(loss * share * world_size).backward()
            total += loss.detach() * share
            for k, v in components.items():
                parts[k] = parts.get(k, 0.0) + v * share
        if args.max_grad_norm > 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(raw.parameters(), args.max_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1

        # The mean loss over the global batch (for logging), and whether any process was asked to stop:
        # all stop at the same step, so that the checkpoint is consistent.
        stats = torch.stack([total] + [parts[k] for k in sorted(parts)] + [torch.tensor(float(stop.requested), device=device)])
        stats = evaluate.all_reduce(stats)
        loss_value = stats[0].item()
        if not math.isfinite(loss_value):
            if rank == 0:
                print(f"\nloss is {loss_value} at step {step}: try a lower --lr (now {args.lr}), --amp bf16 or none "
                      f"instead of fp16, or --max-grad-norm 1.0; the last good state is {out}/checkpoint.pt", file=sys.stderr)
            cleanup_distributed()
            sys.exit(1)
        record = {"step": step, "loss": loss_value, "lr": scheduler.get_last_lr()[0], "seconds": round(time.time() - started, 3),
                  **{k: stats[i + 1].item() for i, k in enumerate(sorted(parts))}}
        log(record)
        progress.update(1)
        progress.set_postfix(loss=f"{loss_value:.4f}")

        if step % args.eval_every == 0 or step == args.max_steps:
            dev = evaluate_dev()
            log({"step": step, f"dev_{metric}": dev})
            if dev[task.source] > best:
                best, best_step = dev[task.source], step
                if rank == 0:
                    tmp = out / "best.tmp"
                    shutil.rmtree(tmp, ignore_errors=True)
                    raw.save(tmp, tokenizer, dict(saved_task_info(), step=step, **{f"dev_{metric}": best}))
                    replace_dir(tmp, out / "best")
            if rank == 0:
                progress.write(f"step {step}: loss {loss_value:.4f}, dev {metric} "
                               f"{', '.join(f'{l} {100 * a:.1f}' for l, a in dev.items())} (best {100 * best:.1f} at step {best_step})")
            save_checkpoint()
        if stats[-1] > 0 or step == args.stop_at:
            if step % args.eval_every:
                save_checkpoint()
            progress.close()
            if rank == 0:
                print(f"stopped at step {step}; continue with the same command and --resume", file=sys.stderr)
            if owns_process_group:
                cleanup_distributed()
            return raw
    progress.close()

    # Test: the best model on dev, in every language.
    if dist.is_initialized():
        dist.barrier()
    if args.no_test:
        if owns_process_group:
            cleanup_distributed()
        return raw
    if args.method == "unicoder":  # an encoder, not a classifier: only CKA and retrieval before and after
        best_encoder = Encoder.from_pretrained(out / "best").to(device) if (out / "best").exists() else raw.encoder
        results = {}
    else:
        best_model, best_pair_model = raw, pair_model
        if (out / "best").exists():
            best_model, _, best_info = Classifier.load(out / "best")
            best_model.to(device)
            best_pair_model = evaluate.pair_model_for(best_model, best_info)
        results = evaluate.summarise(evaluate.evaluate_split(best_model, tokenizer, task, task.test, args.eval_batch_size, args.max_length,
                                                             device, rank, world_size, best_pair_model, task.test[task.source]), task.source)
        best_encoder = best_model.encoder
    alignment_after = None
    if not args.no_alignment:
        alignment_after = evaluate.alignment(best_encoder, tokenizer, task.test, task.source, args.eval_batch_size, device, rank, world_size)
    if rank == 0:
        aligned = {lang: {**{f"{k}_before": v for k, v in (alignment_before or {}).get(lang, {}).items()}, **after}
                   for lang, after in (alignment_after or {}).items()}
        if results or aligned:
            table = evaluate.markdown_table(results or {lang: {} for lang in aligned}, task.source, aligned)
        else:  # Unicoder with --no-alignment: an encoder has no test scores of its own
            table = "(no test scores: an encoder; CKA and retrieval were skipped by --no-alignment)"
        summary = {**results, "alignment": aligned, "best_step": best_step, f"dev_{metric}": best, "args": vars(args)}
        (out / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
        (out / "results.md").write_text(f"{args.method} on {args.task}, test split, best dev step {best_step}\n\n{table}\n")
        print(f"\n{args.method} on {args.task}: test scores by language (best dev step {best_step})\n\n{table}\n\n"
              f"written to {out}/results.json and results.md")
    if owns_process_group:
        cleanup_distributed()
    return raw


if __name__ == "__main__":
    try:
        main()
    except (data.InputError, CheckpointError, FileNotFoundError) as e:  # something to fix in the command: no traceback
        sys.exit(f"error: {e}")
