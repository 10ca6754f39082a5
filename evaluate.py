"""Evaluation: per-language scores, the average over target languages, the transfer gap, and how
aligned the languages are (linear CKA, translation retrieval).

    python evaluate.py --checkpoint runs/demo/best                    # test table of a trained model
    python evaluate.py --checkpoint runs/demo/best --alignment        # plus CKA and retrieval
    python evaluate.py --model DIR --task sib200 --data ../shared/data/sib200 --alignment-only
    python evaluate.py --checkpoint runs/demo/best --tatoeba ../shared/data/tatoeba   # retrieval on Tatoeba

Work is split across ranks and the counts summed with all_reduce, so 1 and N processes give the
same numbers (torchrun --nproc_per_node N evaluate.py ...).
"""
import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm import tqdm

import data
import qa
from fusion import Filter, pad_pairs
from mixup import XMixup
from model import Classifier, Encoder, Tokenizer, default_model, mean_pool
from weights import CheckpointError


def all_reduce(tensor):
    if dist.is_initialized():
        dist.all_reduce(tensor)
    return tensor


def my_batches(lengths, batch_size, rank, world_size):
    """This rank's batches of indices into `lengths`, texts of similar length together (little
    padding). Whole batches are dealt out, so every example is computed in the same batch whatever
    the number of processes, and the results are identical."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
    return batches[rank::world_size]


@torch.no_grad()
def sentence_representations(encoder, tokenizer, texts, batch_size, device, layer=-1, rank=0, world_size=1):
    """Mean-pooled hidden states (N, H) of `layer` for every text, computed across ranks."""
    H = encoder.config.hidden_size
    out = torch.zeros(len(texts), H, device=device)
    for index in my_batches([len(t) for t in texts], batch_size, rank, world_size):
        ids, mask = tokenizer.batch([texts[i] for i in index])
        ids, mask = ids.to(device), mask.to(device)
        out[index] = mean_pool(encoder.hidden_states(ids, mask)[layer], mask)
    return all_reduce(out)


def forward_logits(model, tokenizer, items, device, pair_model=None, partners=None):
    """The model's outputs for a batch of encoded items. A `pair_model` (FILTER, X-Mixup) pairs each
    item with its source-language counterpart, `partners[id]`: the papers' inference, where a test
    text comes with its translation into the source language."""
    if pair_model is None:
        ids, mask, _ = data.collate(items, tokenizer)
        return model(ids.to(device), mask.to(device))[0]
    tensors = pad_pairs(tokenizer, [partners[it.id].ids for it in items], [it.ids for it in items])
    return pair_model.predict(*(t.to(device) for t in tensors))


def pair_model_for(classifier, task_info):
    """The FILTER or X-Mixup wrapper a checkpoint's task.json asks for at inference, else None."""
    if task_info.get("method") == "filter":
        return Filter(classifier, task_info["filter_m"], task_info["filter_k"])
    mixup = task_info.get("mixup")
    if task_info.get("method") == "xmixup" and mixup["inference"]:
        model = XMixup(classifier, mixup["layer"], mixup["lambda0"], mixup["fixed_ratio"])
        with torch.no_grad():
            model.ratio.linear.weight.fill_(mixup["ratio_weight"])
            model.ratio.linear.bias.fill_(mixup["ratio_bias"])
        return model.to(next(classifier.parameters()).device)
    return None


@torch.no_grad()
def predict_probabilities(model, tokenizer, texts, batch_size, max_length, device, rank=0, world_size=1):
    """Class probabilities (N, C) of a classifier for every text, computed across ranks."""
    model.eval()
    out = None
    for index in my_batches([len(t) for t in texts], batch_size, rank, world_size):
        ids, mask = tokenizer.pad(tokenizer.encode_batch([texts[i] for i in index], max_length=max_length))
        probabilities = model(ids.to(device), mask.to(device))[0].float().softmax(-1)
        if out is None:
            out = torch.zeros(len(texts), probabilities.shape[-1], device=device)
        out[index] = probabilities
    if out is None:  # this rank had no batch
        out = torch.zeros(len(texts), model.head.out_proj.out_features, device=device)
    return all_reduce(out).cpu()


@torch.no_grad()
def confusion_matrices(model, tokenizer, examples_by_lang, labels, batch_size, max_length, device, rank=0, world_size=1,
                       pair_model=None, partners=None):
    """{lang: (C, C) counts of (gold, predicted)}, the batches dealt out across ranks."""
    model.eval()
    out = {}
    for lang, examples in examples_by_lang.items():
        counts = torch.zeros(len(labels), len(labels), dtype=torch.long, device=device)
        items = data.encode_examples(examples, tokenizer, labels, max_length)
        for index in my_batches([len(it.ids) for it in items], batch_size, rank, world_size):
            batch = [items[i] for i in index]
            gold = torch.tensor([it.label for it in batch], device=device)
            logits = forward_logits(model, tokenizer, batch, device, pair_model, partners)
            counts.index_put_((gold, logits.argmax(-1)), torch.ones_like(gold), accumulate=True)
        out[lang] = all_reduce(counts).cpu()
    return out


def entities(tags):
    """The entities of a BIO sequence as conlleval reads them, {(type, start, end)}: an entity starts
    at B-, or at an I- that follows O or another type, and ends before O or the next start."""
    found, kind, start = set(), None, 0
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, label = tag.partition("-")
        begins = prefix == "B" or (prefix == "I" and label != kind)
        if kind is not None and (tag == "O" or begins):
            found.add((kind, start, i))
            kind = None
        if begins:
            kind, start = label, i
    return found


@torch.no_grad()
def tagging_counts(model, tokenizer, examples_by_lang, labels, batch_size, max_length, device, rank=0, world_size=1,
                   pair_model=None, partners=None, intents=None):
    """{lang: tensor([entities found, entities predicted, entities gold, words right, words,
    intents right, sentences with the intent and every tag right, sentences])}; a word whose tokens
    were truncated away is predicted "O". With `intents` (a joint task), the intent is read from
    the <s> token's row of the logits (model.JointHead); without, the intent counts stay 0."""
    model.eval()
    out = {}
    for lang, examples in examples_by_lang.items():
        counts = torch.zeros(8, dtype=torch.long)
        items = data.encode_tagged(examples, tokenizer, labels, max_length, intents)
        for index in my_batches([len(it.ids) for it in items], batch_size, rank, world_size):
            predicted = forward_logits(model, tokenizer, [items[i] for i in index], device, pair_model, partners).argmax(-1).cpu()  # (B, T)
            for row, i in enumerate(index):
                tags = ["O"] * items[i].extra["words"]
                for w, t in items[i].extra["scored"]:
                    tags[w] = labels[predicted[row, t]]
                gold, guess = entities(examples[i].tags), entities(tags)
                right = sum(a == b for a, b in zip(examples[i].tags, tags))
                intent = bool(intents) and intents[predicted[row, 0] - len(labels)] == examples[i].label
                counts += torch.tensor([len(gold & guess), len(guess), len(gold), right, len(tags),
                                        intent, intent and right == len(tags), 1])
        out[lang] = all_reduce(counts.to(device)).cpu()
    return out


def tagging_scores(counts, spans=True, joint=False):
    """BIO tags (`spans`): span precision, recall and F1 (an entity counts only with its exact type
    and boundaries) and word accuracy. Other tags (POS): word accuracy. A joint task (xSID): intent
    accuracy, slot F1 and the exact-match rate (intent and every slot right), then the rest."""
    found, predicted, gold, right, words, intents_right, exact, sentences = counts.tolist()
    if not spans:
        return {"accuracy": right / max(words, 1), "n": words}
    precision, recall = found / max(predicted, 1), found / max(gold, 1)
    f1 = 2 * precision * recall / max(precision + recall, 1e-12)
    if joint:
        return {"intent_accuracy": intents_right / max(sentences, 1), "slot_f1": f1, "exact_match": exact / max(sentences, 1),
                "slot_precision": precision, "slot_recall": recall, "word_accuracy": right / max(words, 1), "n": sentences}
    return {"f1": f1, "precision": precision, "recall": recall, "word_accuracy": right / max(words, 1), "n": words}


@torch.no_grad()
def qa_scores(model, tokenizer, examples_by_lang, batch_size, max_length, stride, max_answer_length, device, rank=0, world_size=1,
              pair_model=None, partners=None):
    """{lang: exact match and F1 (qa.answer_scores)} of extractive QA. Every window of a question
    offers its best span (qa.best_span) and the question's answer is the best of them; the ranks
    split the windows and share their candidates. With a `pair_model`, each window is paired with
    the window of its source-language question (`partners`, examples) that covers the same part
    of the context (qa.matching_window)."""
    model.eval()
    source_windows = {}
    if pair_model is not None:
        for w in qa.encode_windows(partners, tokenizer, max_length, stride):
            source_windows.setdefault(w.extra["question"], []).append(w)
    out = {}
    for lang, examples in examples_by_lang.items():
        items = qa.encode_windows(examples, tokenizer, max_length, stride)
        counterparts = {it.id: qa.matching_window(it, source_windows[it.extra["question"]]) for it in items} if pair_model else None
        best = {}  # question id -> (score, first character, end character)
        batches = my_batches([len(it.ids) for it in items], batch_size, rank, world_size)
        for index in tqdm(batches, desc=f"answering {lang}", disable=rank != 0, leave=False, dynamic_ncols=True):
            batch = [items[i] for i in index]
            logits = forward_logits(model, tokenizer, batch, device, pair_model, counterparts).float().cpu()  # (B, T, 2)
            for row, window in zip(logits, batch):
                qa.keep_best(best, window.extra["question"], qa.best_span(row[:, 0], row[:, 1], window, max_answer_length))
        if dist.is_initialized():  # the best candidate of each question over all ranks' windows
            parts = [None] * world_size
            dist.all_gather_object(parts, best)
            best = {}
            for part in parts:
                for question, candidate in part.items():
                    qa.keep_best(best, question, candidate)
        contexts = {e.id: e.pair for e in examples}
        out[lang] = qa.answer_scores({q: contexts[q][a:b] for q, (_, a, b) in best.items()}, examples, lang)
    return out


def evaluate_split(model, tokenizer, task, examples_by_lang, batch_size, max_length, device, rank=0, world_size=1,
                   pair_model=None, partners=None):
    """{lang: scores} for a sentence task (accuracy, macro-F1), a word task (span F1, ... or POS
    accuracy), a joint one (intent accuracy, slot F1, exact match, ...) or QA (exact match and F1).
    With a `pair_model` (FILTER, X-Mixup), `partners` are the source-language examples of the split."""
    if pair_model is not None:
        pair_model.eval()
    if task.level == "span":
        return qa_scores(model, tokenizer, examples_by_lang, batch_size, max_length, task.doc_stride, task.max_answer_length,
                         device, rank, world_size, pair_model, partners)
    if pair_model is not None:
        partners = {it.id: it for it in data.encode(partners, tokenizer, task, max_length)}
    if task.level == "word":
        counts = tagging_counts(model, tokenizer, examples_by_lang, task.labels, batch_size, max_length, device, rank, world_size,
                                pair_model, partners, task.intents)
        return {lang: tagging_scores(c, spans=task.metric != "accuracy", joint=bool(task.intents)) for lang, c in counts.items()}
    counts = confusion_matrices(model, tokenizer, examples_by_lang, task.labels, batch_size, max_length, device, rank, world_size,
                                pair_model, partners)
    return {lang: scores(c) for lang, c in counts.items()}


def scores(counts):
    """Accuracy and macro-F1 (over the labels that occur as gold or prediction) from a confusion matrix."""
    counts = counts.double()
    tp, gold, predicted = counts.diagonal(), counts.sum(1), counts.sum(0)
    present = (gold + predicted) > 0
    f1 = 2 * tp / (gold + predicted).clamp(min=1)
    return {"accuracy": (tp.sum() / counts.sum().clamp(min=1)).item(), "macro_f1": f1[present].mean().item(), "n": int(counts.sum())}


def summarise(per_lang, source):
    """Per-language scores plus the average over target languages and the transfer gap
    (source score minus target average) for each metric."""
    targets = [lang for lang in per_lang if lang != source]
    metrics = [k for k in next(iter(per_lang.values())) if k != "n"]
    results = dict(per_lang)
    if targets:
        results["average"] = {m: sum(per_lang[l][m] for l in targets) / len(targets) for m in metrics}
        if source in per_lang:
            results["transfer_gap"] = {m: per_lang[source][m] - results["average"][m] for m in metrics}
    return results


def markdown_table(results, source, extra=None):
    """A Markdown table: one row per language (percentages), then the target average and the
    transfer gap; `extra` adds alignment columns ({lang: {"cka": ..., "cka_before": ...}})."""
    metrics = [k for k in results.get("average", next(iter(results.values()))) if k != "n"]
    extra = extra or {}
    present = {k for row in extra.values() for k in row}
    columns = [k for k in ("cka_before", "cka", "retrieval_before", "retrieval") if k in present]
    lines = ["| language | " + " | ".join(metrics + columns) + " |", "|---" * (1 + len(metrics) + len(columns)) + "|"]
    for lang, row in results.items():
        if lang in ("average", "transfer_gap"):
            continue
        cells = [f"{100 * row[m]:.1f}" for m in metrics]
        cells += [f"{extra[lang][k]:.3f}" if k in extra.get(lang, {}) else "" for k in columns]
        lines.append(f"| {lang}{' (source)' if lang == source else ''} | " + " | ".join(cells) + " |")
    for key, name in (("average", "target average"), ("transfer_gap", "transfer gap")):
        if key in results:
            lines.append(f"| {name} | " + " | ".join([f"{100 * results[key][m]:.1f}" for m in metrics] + [""] * len(columns)) + " |")
    return "\n".join(lines)


def alignment_table(alignment):
    """| language | cka | retrieval | from {lang: {"cka": ..., "retrieval": ...}}."""
    lines = ["| language | cka | retrieval |", "|---|---|---|"]
    lines += [f"| {lang} | {row['cka']:.3f} | {row['retrieval']:.3f} |" for lang, row in alignment.items()]
    if alignment:
        mean = lambda k: sum(row[k] for row in alignment.values()) / len(alignment)
        lines.append(f"| average | {mean('cka'):.3f} | {mean('retrieval'):.3f} |")
    return "\n".join(lines)


def linear_cka(x, y):
    """Linear CKA (Kornblith et al. 2019; X-Mixup Eq. 1) between representations (N, H) of N
    parallel sentences: ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F) on column-centred X and Y."""
    x = x.double() - x.double().mean(0)
    y = y.double() - y.double().mean(0)
    return ((y.T @ x).norm() ** 2 / ((x.T @ x).norm() * (y.T @ y).norm())).item()


def retrieval_accuracy(x, y):
    """Nearest neighbour by cosine, both directions, as on Tatoeba: the fraction of sentences whose
    nearest neighbour on the other side is their translation, averaged over the two directions."""
    similarity = F.normalize(x.double(), dim=-1) @ F.normalize(y.double(), dim=-1).T
    gold = torch.arange(len(x), device=x.device)
    return ((similarity.argmax(1) == gold).double().mean().item() + (similarity.argmax(0) == gold).double().mean().item()) / 2


def alignment(encoder, tokenizer, parallel, source, batch_size, device, rank=0, world_size=1):
    """{target: {"cka": ..., "retrieval": ...}} on parallel test sentences ({lang: [Example]}, paired
    by id). The source side is encoded once for all targets."""
    encoder.eval()
    sources = parallel[source]
    row = {e.id: i for i, e in enumerate(sources)}
    source_states = sentence_representations(encoder, tokenizer, [e.text for e in sources], batch_size, device, rank=rank, world_size=world_size)
    out = {}
    for lang, examples in parallel.items():
        if lang == source:
            continue
        paired = [e for e in examples if e.id in row]
        x = source_states[[row[e.id] for e in paired]]
        y = sentence_representations(encoder, tokenizer, [e.text for e in paired], batch_size, device, rank=rank, world_size=world_size)
        out[lang] = {"cka": linear_cka(x, y), "retrieval": retrieval_accuracy(x, y)}
    return out


def setup_distributed(device=None):
    """(rank, world size, device): torchrun's environment if present (NCCL on CUDA, gloo on CPU), else one process."""
    if "RANK" not in os.environ:
        return 0, 1, device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = torch.cuda.is_available() and device != "cpu"
    if not dist.is_initialized():  # already set up by an outer run (co-training trains inside one)
        dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        return dist.get_rank(), dist.get_world_size(), f"cuda:{os.environ['LOCAL_RANK']}"
    return dist.get_rank(), dist.get_world_size(), "cpu"


def cleanup_distributed():
    if dist.is_initialized():
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", help="a directory written by train.py (OUT/best); its task.json says what to test on")
    parser.add_argument("--model", help="without --checkpoint: an encoder checkpoint directory to measure alignment on (default: the bundled model)")
    parser.add_argument("--task", help="override the task of the checkpoint (demo, sib200, ...)")
    parser.add_argument("--data", help="data directory of the task (not needed for demo)")
    parser.add_argument("--source-lang", help="source language (default: the task's)")
    parser.add_argument("--target-langs", help="comma-separated target languages (default: all of the task's)")
    parser.add_argument("--split", default="test", choices=["dev", "test"])
    parser.add_argument("--plain-inference", action="store_true",
                        help="for a FILTER or X-Mixup model: test each text alone, without its translation (X-Mixup's "
                             "ablation 'without mixup inference')")
    parser.add_argument("--alignment", action="store_true", help="also compute CKA and retrieval accuracy between source and targets")
    parser.add_argument("--alignment-only", action="store_true", help="only CKA and retrieval, for an untrained encoder (--model)")
    parser.add_argument("--tatoeba", help="measure alignment on Tatoeba pairs in this directory (tatoeba.<xxx>-eng.*) instead of the task's test set")
    parser.add_argument("--tatoeba-langs", help="comma-separated three-letter codes (default: every pair in --tatoeba)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, help="tokens per text or QA window (default: the checkpoint's, else 256)")
    parser.add_argument("--out", help="directory for the .json and .md results (default: the checkpoint's parent; without --checkpoint, none)")
    args = parser.parse_args()

    if not args.checkpoint and not (args.alignment_only or args.tatoeba):
        parser.error("give --checkpoint (a model trained by train.py), or --alignment-only / --tatoeba for an encoder (--model)")
    rank, world_size, device = setup_distributed()
    model, task_info = None, {}
    if args.checkpoint:
        model, tokenizer, task_info = Classifier.load(args.checkpoint)
        encoder = model.to(device).encoder
    else:
        path = args.model or default_model()
        encoder, tokenizer = Encoder.from_pretrained(path).to(device), Tokenizer.from_pretrained(path)
    name = args.task or task_info.get("task", "demo")
    if args.tatoeba:
        langs = args.tatoeba_langs.split(",") if args.tatoeba_langs else sorted(
            {p.name.split(".")[1][:3] for p in Path(args.tatoeba).glob("tatoeba.*-eng.eng")})
        # every language has its own English side, so each pair is measured on its own
        extra = {lang: alignment(encoder, tokenizer, dict(zip(("eng", lang), data.read_tatoeba(args.tatoeba, lang))), "eng",
                                 args.batch_size, device, rank, world_size)[lang] for lang in langs}
        results, source = {}, "eng"
    else:
        task = data.load_task(name, args.data or task_info.get("data"), args.source_lang or task_info.get("source_lang"),
                              args.target_langs.split(",") if args.target_langs else task_info.get("target_langs"))
        task.doc_stride = task_info.get("doc_stride", task.doc_stride)
        task.max_answer_length = task_info.get("max_answer_length", task.max_answer_length)
        args.max_length = args.max_length or task_info.get("max_length", 256)
        split, source = getattr(task, args.split), task.source
        results, extra = {}, {}
        if model is not None and not args.alignment_only:
            pair_model = None if args.plain_inference else pair_model_for(model, task_info)
            results = summarise(evaluate_split(model, tokenizer, task, split, args.batch_size, args.max_length, device, rank, world_size,
                                               pair_model, split[source]), source)
        if args.alignment or args.alignment_only:
            extra = alignment(encoder, tokenizer, split, source, args.batch_size, device, rank, world_size)
    if rank == 0:
        table = markdown_table(results, source, extra) if results else alignment_table(extra)
        print(table)
        out = args.out or (Path(args.checkpoint).parent if args.checkpoint else None)
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            stem = "tatoeba" if args.tatoeba else "alignment" if args.alignment_only else f"results_{args.split}"
            stem += "_plain" if args.plain_inference else ""
            (Path(out) / f"{stem}.json").write_text(json.dumps({"results": results, "alignment": extra}, indent=2) + "\n")
            (Path(out) / f"{stem}.md").write_text(table + "\n")
            print(f"written to {out}/{stem}.json and {stem}.md")
    cleanup_distributed()


if __name__ == "__main__":
    try:
        main()
    except (data.InputError, CheckpointError, FileNotFoundError) as e:  # something to fix in the command: no traceback
        sys.exit(f"error: {e}")
