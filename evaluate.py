"""Evaluation: per-language scores, the average over target languages, the transfer gap, and how
aligned the languages are (linear CKA, translation retrieval). How each task level scores its
predictions is in levels.py; this file holds what every level shares.

The test table of a trained model (OUT/best of train.py: here the default job's), then with CKA
and retrieval; CKA and retrieval of an encoder, untrained; retrieval on Tatoeba; runs' test
scores drawn side by side:

    python evaluate.py --checkpoint runs/default/best
    python evaluate.py --checkpoint runs/default/best --alignment
    python evaluate.py --model DIR --task sib200 --data ../shared/data/sib200 \\
        --alignment-only
    python evaluate.py --checkpoint runs/default/best \\
        --tatoeba ../shared/data/tatoeba
    python evaluate.py --plot runs/default runs/other

Work is split across ranks and the counts summed with all_reduce, so 1 and N processes give the
same numbers (torchrun --nproc_per_node N evaluate.py ...).
"""
import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F

import data
from methods import TEST_INPUTS, Run, prediction_inputs, restore
from minxlt import tasks
from minxlt.checkpoints import hub
from minxlt.checkpoints.prepare_default import default_model
from minxlt.parallel import distributed
from minxlt.run import cli, flags
from minxlt.text.tokenizer import Tokenizer
from model import Classifier, Encoder, mean_pool


@torch.no_grad()
def sentence_representations(encoder, tokenizer, texts, batch_size, device, rank=0, world_size=1, pooling="mean"):
    """Sentence vectors (N, H) of the final layer, across ranks: the real tokens' mean, or <s>'s ("cls")."""
    H, positions = encoder.config.hidden_size, encoder.config.max_positions - encoder.config.position_offset
    out = torch.zeros(len(texts), H, device=device)
    for index in data.evaluation_batches([len(t) for t in texts], batch_size, rank, world_size):
        ids, mask = tokenizer.batch([texts[i] for i in index], max_length=min(512, positions))
        ids, mask = ids.to(device), mask.to(device)
        hidden = encoder(ids, mask)
        out[index] = (mean_pool(hidden, mask) if pooling == "mean" else hidden[:, 0]).float()  # bf16 when sharded
    return distributed.all_reduce(out) if world_size > 1 else out


@torch.no_grad()
def predict_probabilities(model, tokenizer, texts, pairs, batch_size, max_length, device, rank=0, world_size=1):
    """Class probabilities (N, C) of a classifier for every text (with its pair, of a pair task), across ranks."""
    model.eval()
    out = torch.zeros(len(texts), model.head.out_proj.out_features, device=device)
    pairs = pairs if pairs is not None and None not in pairs else None
    lengths = [len(t) + len(pairs[i] if pairs else "") for i, t in enumerate(texts)]
    for index in data.evaluation_batches(lengths, batch_size, rank, world_size):
        ids, mask = tokenizer.batch([texts[i] for i in index], pairs and [pairs[i] for i in index], max_length)
        out[index] = model(ids.to(device), mask.to(device))[0].float().softmax(-1)
    return distributed.all_reduce(out).cpu()


def unscored(split):
    """The languages of a split ({lang: [Example]}) whose files have no gold labels (XTREME's test files)."""
    return [lang for lang, examples in split.items() if examples and not all(e.labelled for e in examples)]


def unscored_note(langs, folder):
    """A line under a results table for the languages that have predictions and no scores."""
    return (f"\n\nNo score for {', '.join(langs)}: the test files have no gold labels (XTREME blanks them); "
            f"the predictions are in {folder}/.") if langs else ""


def summarise(per_lang, source):
    """Per-language scores plus, for each metric, the target average and the transfer gap (source minus average)."""
    targets = [lang for lang in per_lang if lang != source]
    results = dict(per_lang)
    if targets:
        metrics = [k for k in next(iter(per_lang.values())) if k != "n"]
        results["average"] = {m: sum(per_lang[l][m] for l in targets) / len(targets) for m in metrics}
        if source in per_lang:
            results["transfer_gap"] = {m: per_lang[source][m] - results["average"][m] for m in metrics}
    return results


def markdown_table(results, source, extra):
    """A Markdown table: a row per language (percent), the target average, the transfer gap, `extra`'s columns."""
    metrics = [k for k in results.get("average", next(iter(results.values()))) if k != "n"]
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
            cells = [f"{100 * results[key][m]:.1f}" for m in metrics] + [""] * len(columns)
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
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
    """Linear CKA (Kornblith et al. 2019) of N parallel sentences' (N, H) vectors, centred: ||Y^T X||_F^2 /
    (||X^T X||_F ||Y^T Y||_F), 1 for identical ones (X-Mixup's Eq. 1 prints squared norms below, no centring)."""
    x = x.double() - x.double().mean(0)
    y = y.double() - y.double().mean(0)
    return ((y.T @ x).norm() ** 2 / ((x.T @ x).norm() * (y.T @ y).norm())).item()


def retrieval_accuracy(x, y):
    """As on Tatoeba: the share of sentences whose nearest neighbour (cosine) is their translation, both ways."""
    similarity = F.normalize(x.double(), dim=-1) @ F.normalize(y.double(), dim=-1).T
    gold = torch.arange(len(x), device=x.device)
    return sum((similarity.argmax(side) == gold).double().mean().item() for side in (1, 0)) / 2


def alignment(encoder, tokenizer, parallel, source, batch_size, device, rank=0, world_size=1, pooling="mean"):
    """{target: {"cka": ..., "retrieval": ...}} on parallel sentences ({lang: [Example]}, paired by id), of the final
    layer's vectors: mean-pooled (as X-Mixup's Figure 1 and footnote 4 pool) or <s> (`pooling` "cls")."""
    encoder.eval()
    sources = parallel[source]
    row = {e.id: i for i, e in enumerate(sources)}
    encode = lambda texts: sentence_representations(encoder, tokenizer, texts, batch_size, device, rank=rank,
                                                    world_size=world_size, pooling=pooling)
    source_states = encode([e.text for e in sources])  # once for all targets
    out = {}
    for lang, examples in parallel.items():
        paired = [e for e in examples if e.id in row]
        if lang == source or len(paired) < 2:  # CKA of one pair is undefined
            continue
        x, y = source_states[[row[e.id] for e in paired]], encode([e.text for e in paired])
        out[lang] = {"cka": linear_cka(x, y), "retrieval": retrieval_accuracy(x, y)}
    return out


POOLINGS = {"mean": "the mean of the final layer's real tokens", "cls": "the final layer's <s> vectors"}


def saw(seen, pooling=None):
    """A table title's end: what each prediction saw (`seen`) and what CKA and retrieval compare (`pooling`)."""
    said = f"; --test-input {seen}: each prediction saw {TEST_INPUTS[seen]}" if seen else ""
    return said + (f"; CKA and retrieval compare {POOLINGS[pooling]}" if pooling else "")


def run_report(results, task, before, after, pooling, predictions):
    """(the test table, results.json's scores) of a training run, with CKA and retrieval `before` and `after` it."""
    unscored_langs = unscored(task.test)
    aligned = {lang: {**{f"{k}_before": v for k, v in (before or {}).get(lang, {}).items()}, **values}
               for lang, values in (after or {}).items()}
    if results or aligned:
        table = markdown_table(results or {lang: {} for lang in aligned}, task.source, aligned)
    elif unscored_langs:
        table = "(no test scores)"
    else:  # Unicoder with --no-alignment: an encoder has no test scores of its own
        table = "(no test scores: an encoder; CKA and retrieval were skipped by --no-alignment)"
    table += unscored_note(unscored_langs, predictions)
    return table, {**results, "unscored": unscored_langs, "alignment": aligned, "alignment_pooling": pooling}


def write_predictions(folder, predictions):
    """<folder>/<lang>.jsonl: one {"id", "prediction"} per line, in each language's example order."""
    for lang, rows in predictions.items():
        cli.write_text(folder / f"{lang}.jsonl", "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def arguments():
    """evaluate.py's flags."""
    parser = cli.ArgumentParser(description=__doc__, formatter_class=flags.HelpFormatter)
    add = parser.add_argument
    add("--checkpoint", type=cli.existing_directory, help="a directory written by train.py (OUT/best); its task.json "
        "says what to test on")
    add("--model", help="without --checkpoint: an encoder to measure alignment on, a folder or a Hugging Face hub id "
        "(default: the bundled model)")
    add("--task", help="override the task of the checkpoint (demo, sib200, ...)")
    add("--data", help="data directory of the task (not needed for demo)")
    add("--source-lang", help="source language (default: the task's)")
    add("--target-langs", type=cli.languages, help="comma-separated target languages (default: all of the task's)")
    add("--split", default="test", choices=["dev", "test"], help="the split of the task to score")
    add("--method", choices=list(flags.METHODS), metavar="METHOD", help="predict as this method does rather than as "
        f"the checkpoint's: {', '.join(flags.METHODS)} (translate-test on a zero-shot checkpoint: the same training)")
    add("--test-input", choices=list(TEST_INPUTS), help="what a prediction sees besides the target text (see train.py "
        "--help; default: what the run was tested on)")
    add("--test-translations", metavar="PATH", help="the test texts' translations into the source language (as "
        "train.py's)")
    add("--plain-inference", action="store_true", help="for a FILTER or X-Mixup model: test each text alone, without "
        "a counterpart (--test-input text; X-Mixup's ablation 'without mixup inference')")
    add("--alignment", action="store_true", help="also compute CKA and retrieval accuracy between source and targets")
    add("--alignment-only", action="store_true", help="only CKA and retrieval, for an untrained encoder (--model)")
    add("--alignment-pooling", choices=["mean", "cls"], help="the sentence vectors CKA and retrieval compare: the mean "
        "of the final layer's real tokens (as X-Mixup's Figure 1 pools), or <s>; default: what train.py compared for "
        "the checkpoint's run, and for an encoder what its default run compares (XeroAlign's <s>)")
    add("--tatoeba", type=cli.existing_directory, help="measure alignment on Tatoeba pairs in this directory "
        "(tatoeba.<xxx>-eng.*) instead of the task's test set")
    add("--tatoeba-langs", type=cli.languages, help="comma-separated three-letter codes (default: every pair in "
        "--tatoeba)")
    add("--amp", choices=["auto", "none", "bf16", "fp16"], help="autocast, as train.py's --amp: auto is bf16 on GPUs "
        "that support it, fp16 on older ones, off on the CPU (none: float32, as train.py's --eval-float32 tests); "
        "default: what the checkpoint's run evaluated under (task.json), else auto")
    add("--batch-size", type=cli.positive_int, default=64, help="texts per batch (memory: each holds this many)")
    add("--max-length", type=cli.number(int, 8), help="tokens per text or QA window (default: the checkpoint's, "
        "else 256)")
    add("--out", help="directory for the .json and .md results (default: the checkpoint's parent; without "
        "--checkpoint, none)")
    add("--plot", nargs="+", metavar="RUN", help="draw the test scores of one or more runs (OUT folders of train.py, "
        "or results JSON files) per language, with the transfer gap, one bar per run (needs matplotlib)")
    add("--plot-file", default="scores.png", type=plot_file, help="where --plot draws: a .png, .pdf or .svg file")
    return parser


def plot_file(text):
    """An argparse type: a file name whose suffix names a format matplotlib draws."""
    if Path(text).suffix.lower() not in (".png", ".pdf", ".svg"):
        raise argparse.ArgumentTypeError(f"{text!r} does not end in .png, .pdf or .svg")
    return text


def alignment_pooling(args, info, num_layers):
    """What CKA and retrieval compare: --alignment-pooling, else the checkpoint's run's, else the default's."""
    if pooling := args.alignment_pooling or info.get("alignment_pooling"):
        return pooling
    method = info.get("method")
    argv = ["--method", method, "--pooling", info.get("pooling", "cls")] if method in flags.METHODS else []
    return flags.planned(argv, info.get("task", "demo"), num_layers)["alignment_pooling"]


def tatoeba_alignment(encoder, tokenizer, args, pooling, device, rank, world_size):
    """CKA and retrieval on Tatoeba's pairs, a language at a time (each has its own English side)."""
    pairs = Path(args.tatoeba).glob("tatoeba.*-eng.eng")
    langs = args.tatoeba_langs or sorted({p.name.split(".")[1][:3] for p in pairs})
    if not langs:
        raise tasks.InputError(f"--tatoeba {args.tatoeba}: no pair of files tatoeba.<xxx>-eng.<xxx> and "
                               "tatoeba.<xxx>-eng.eng there (as XTREME's download script writes them)")
    out = {}
    for lang in langs:
        parallel = dict(zip(("eng", lang), tasks.read_tatoeba(args.tatoeba, lang)))
        scores = alignment(encoder, tokenizer, parallel, "eng", args.batch_size, device, rank, world_size, pooling)
        if lang not in scores:
            raise tasks.InputError(f"--tatoeba {args.tatoeba}: tatoeba.{lang}-eng.* hold {len(parallel['eng'])} pair: "
                                   "CKA and retrieval compare two or more")
        out[lang] = scores[lang]
    return out


def test_input_of(args, info):
    """(--test-input, --test-translations): as given (--plain-inference: the text), else the run's; on dev, none
    given: (None, None), the dev rule train.py scores dev with (prediction_inputs)."""
    if args.plain_inference:
        return "text", args.test_translations
    if args.test_input or args.test_translations:
        return args.test_input, args.test_translations
    if args.split == "dev":
        return None, None
    legacy_plain = "mixup" in info and not info["mixup"].get("inference", True)  # older X-Mixup task.json
    return info.get("test_input") or ("text" if legacy_plain else None), None


def test_checkpoint(model, encoder, tokenizer, info, args, pooling, device, rank, world_size, predictions):
    """(results, alignment, source, test input) of the checkpoint on its task's split, as its method predicts."""
    saved = info if args.task in (None, info.get("task")) else {}  # another --task: none of the run's folder, languages
    from_run = not args.target_langs and saved.get("target_langs")
    where = Path(args.checkpoint) / "task.json" if args.checkpoint else Path(args.model or ".") / "unicoder.json"
    if not args.data and saved.get("data") and not Path(saved["data"]).is_dir():
        raise tasks.InputError(f"{where}: its run's data folder {saved['data']} is not there: give --data, the folder")
    task = tasks.load_task(args.task or info.get("task", "demo"), args.data or saved.get("data"),
                           args.source_lang or saved.get("source_lang"), args.target_langs or saved.get("target_langs"),
                           langs_from=f"the run's, from its {where.name}" if from_run else None)
    if (args.alignment or args.alignment_only) and not task.parallel:
        raise tasks.InputError(f"--alignment: task {task.name}'s languages are not parallel, so there are no "
                               "translations to compare")
    task.doc_stride = info.get("doc_stride", task.doc_stride)
    task.max_answer_length = info.get("max_answer_length", task.max_answer_length)
    results, extra, seen = {}, {}, None
    if model is not None and not args.alignment_only:
        tasks.check_labels(args.checkpoint, info, task, "evaluate it on the task it was trained on")
        length = args.max_length or info.get("max_length", 256)
        flags.check_max_length(length, encoder.config.max_positions - encoder.config.position_offset)
        run = Run(task, tokenizer, length, args.batch_size, device, rank, world_size)
        name = args.method or info.get("method")
        name = name if name in flags.METHODS else "zero-shot"
        test_input, translations = test_input_of(args, info if name == info.get("method") else {})
        default = saved.get(f"{args.split}_translations") or (task.test_translations if args.split == "test" else None)
        translations = translations or (default if test_input == "translation" else None)  # the run's, else the data's
        if test_input is not None:  # else dev's rule
            test_input = flags.choose_test_input(name, test_input, translations, task.parallel)
        settings, info = flags.saved(dict(info, task=task.name, dev_translations=saved.get("dev_translations")), name,
                                     task.level, encoder.config.num_layers)
        method = flags.METHODS[name](settings, run)
        scores = method.evaluate(restore(method.wrap(model.eval()), info), args.split, None, test_input, translations,
                                 predictions)
        results = summarise(scores, task.source)
        results["unscored"] = unscored(getattr(task, args.split))
        test_input, translations = prediction_inputs(method, args.split, test_input, translations)  # what they saw
        seen = {"input": test_input, "what": TEST_INPUTS[test_input], "translations": translations}
    if args.alignment or args.alignment_only:
        extra = alignment(encoder, tokenizer, getattr(task, args.split), task.source, args.batch_size, device, rank,
                          world_size, pooling)
    return results, extra, task.source, seen


def plot_data(runs):
    """(metric, languages, {run: [score per language]}, {run: {target: gap}}) of results files, in percent."""
    loaded = []
    for run in map(Path, runs):
        path = run / "results.json" if run.is_dir() else run
        try:
            loaded.append((run, json.loads(path.read_text())))
        except (OSError, json.JSONDecodeError) as e:
            raise tasks.InputError(f"--plot {run}: no results JSON to read ({e})") from None
    scored = [[k for k, v in results.items() if isinstance(v, dict) and "n" in v] for _, results in loaded]
    if not all(scored):
        raise tasks.InputError(f"--plot: {loaded[scored.index([])][0]} has no test scores")
    metric = next(k for k in loaded[0][1][scored[0][0]] if k != "n")
    langs = list(dict.fromkeys(lang for names in scored for lang in names))
    settings = [results.get("settings") or results.get("args") or {} for _, results in loaded]  # older runs: "args"
    methods = [s.get("method") or (run if run.is_dir() else run.parent).name for s, (run, _) in zip(settings, loaded)]
    labels = [m if methods.count(m) == 1 else f"{m} ({run.name})" for m, (run, _) in zip(methods, loaded)]
    labels = [label if labels.count(label) == 1 else f"{m} ({run})"  # the paths as given, where folder names repeat
              for label, m, (run, _) in zip(labels, methods, loaded)]
    scores, gaps = {}, {}
    for label, names, (run, results), given in zip(labels, scored, loaded, settings):
        if metric not in results[names[0]]:
            raise tasks.InputError(f"--plot: {run} has no {metric} (the first run's score): plot runs of one task "
                                   "together")
        source = given.get("source_lang") or langs[0]
        score = lambda lang: 100 * results[lang][metric] if metric in results.get(lang, ()) else float("nan")
        scores[label] = [score(lang) for lang in langs]
        gaps[label] = {lang: score(source) - score(lang) for lang in langs if lang != source}
    return metric, langs, scores, gaps


def plot(runs, path):
    """A bar chart of the runs' test scores per language, and below it each target's transfer gap."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise tasks.InputError("--plot needs matplotlib: pip install matplotlib") from None
    metric, langs, scores, gaps = plot_data(runs)
    targets = list(dict.fromkeys(lang for gap in gaps.values() for lang in gap))  # each run's own source left out
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(max(6, 0.6 * len(langs) * max(1, len(scores) / 2)), 7),
                                         gridspec_kw={"height_ratios": [3, 2]})
    width = 0.8 / len(scores)
    for i, label in enumerate(scores):
        top.bar([x + i * width for x in range(len(langs))], scores[label], width, label=label)
        bottom.bar([x + i * width for x in range(len(targets))], [gaps[label].get(t, float("nan")) for t in targets],
                   width, label=label)
    for axes, names, title in ((top, langs, f"test {metric} (%)"),
                               (bottom, targets, "transfer gap: source minus language (points)")):
        axes.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names, rotation=45 if len(names) > 12 else 0)
        axes.set_ylabel(title)
    top.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"drew {len(scores)} run(s) over {len(langs)} languages in {path}")


def main(argv=None):
    parser = arguments()
    args = parser.parse_args(argv)
    if not args.checkpoint and not (args.alignment_only or args.tatoeba or args.plot):
        parser.error("give --checkpoint (a model trained by train.py), --alignment-only / --tatoeba for an encoder "
                     "(--model), or --plot RUN...")
    if args.checkpoint and args.model:
        parser.error("--model is the encoder measured without --checkpoint (a checkpoint holds its own): give one")
    if args.plot:
        return plot(args.plot, args.plot_file)
    rank, world_size, device = distributed.setup()
    model, info = None, {}
    if args.checkpoint:
        model, tokenizer, info = Classifier.load(args.checkpoint, device)
        encoder = model.encoder
    else:
        path = hub.resolve(args.model) if args.model else default_model()
        encoder, tokenizer = Encoder.from_pretrained(path).to(device), Tokenizer.from_pretrained(path)
        if (Path(path) / "unicoder.json").is_file():  # a Unicoder run's OUT/best: its run's task and alignment pooling
            info = json.loads((Path(path) / "unicoder.json").read_text())
        encoder.segment_id = tokenizer.segment_id
    predictions, pooling = {}, alignment_pooling(args, info, encoder.config.num_layers)
    amp = flags.autocast(args.amp or info.get("eval_amp") or "auto", device)  # the run's, as train.py evaluated
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    with torch.autocast(device.split(":")[0], dtype=dtype, enabled=dtype is not None):  # as train.py evaluates
        if args.tatoeba:
            extra = tatoeba_alignment(encoder, tokenizer, args, pooling, device, rank, world_size)
            results, source, seen = {}, "eng", None
        else:
            results, extra, source, seen = test_checkpoint(model, encoder, tokenizer, info, args, pooling, device, rank,
                                                           world_size, predictions)
    if rank == 0:
        report(args, results, extra, source, seen, predictions, pooling, info, amp)
    distributed.cleanup()


def report(args, results, extra, source, seen, predictions, pooling, info, amp):
    """Print the table under its title (`amp`: the autocast it was computed under); write it, results_<split>.json
    and the predictions beside the checkpoint."""
    out = Path(args.out) if args.out else Path(args.checkpoint).parent if args.checkpoint else None
    stem = "tatoeba" if args.tatoeba else "alignment" if args.alignment_only else f"results_{args.split}"
    stem += "_plain" if args.plain_inference else ""
    folder = out / stem.replace("results", "predictions") if out else None  # predictions_test/<lang>.jsonl
    unscored_langs = results.pop("unscored", [])
    table = markdown_table(results, source, extra) if results else alignment_table(extra) if extra else "(no scores)"
    table += unscored_note(unscored_langs, folder) if folder else ""
    model = f"{args.method or info.get('method')} checkpoint {args.checkpoint}" if args.checkpoint else args.model
    data = f"{args.task or info.get('task', 'demo')}, {args.split} split"
    data = f"Tatoeba ({args.tatoeba})" if args.tatoeba else data
    title = f"{model or 'the bundled model'} on {data}" + saw(seen and seen["input"], pooling if extra else None)
    title += f"; computed under {amp} autocast" if amp != "none" else ""
    table = f"{title}\n\n{table}"
    print(table)
    if out:
        summary = {**results, "unscored": unscored_langs, "test_input": seen, "alignment": extra,
                   "alignment_pooling": pooling, "amp": amp, "checkpoint": args.checkpoint, "split": args.split,
                   "args": vars(args)}
        cli.write_text(out / f"{stem}.json", json.dumps(summary, indent=2) + "\n")
        cli.write_text(out / f"{stem}.md", table + "\n")
        write_predictions(folder, predictions)
        print(f"written to {out}/{stem}.json and {stem}.md" + (f", predictions in {folder}/" if predictions else ""))


if __name__ == "__main__":
    cli.run(main)
