"""Co-training for cross-lingual adaptation (Yu & Joty 2021, Algorithm 1).

Two classifiers with different views of a text, the multilingual LM being fine-tuned (f_lm, the
<s> vector of --model) and a multilingual sentence-embedding model (f_emb, the mean-pooled states of
--embedding-model; LaBSE in the paper), label the unlabelled target-language texts for each other:

    for s iterations:
        fine-tune f_lm on D_lm and f_emb on D_emb
        each labels its own remaining pool; keep the predictions with confidence > t
        take at most n/3 of them at random (n: the size of the labelled data D)
        f_emb's picks join D_lm, f_lm's join D_emb; each pool loses its picks

Choices the paper leaves open, made here: each fine-tuning starts from the pretrained weights on
the grown labelled set (not from the previous round's model); each model labels its own pool
(U_lm, U_emb), so that a text is given away at most once by each; after the last round both are
fine-tuned once more on their final sets, and those two are tested. The unlabelled pool, each
round's picks and every fine-tuned model are written under OUT/, and --resume replays the rounds
already done.
"""
import json
import random
import shutil
import sys
from pathlib import Path

import evaluate
from data import Example
from model import Classifier


def select(predictions, threshold, cap, rng):
    """{key: (label, confidence)} -> the predictions above `threshold`, at most `cap` of them drawn
    at random (all of them if there are fewer)."""
    qualified = sorted(key for key, (_, confidence) in predictions.items() if confidence > threshold)
    chosen = qualified if len(qualified) <= cap else rng.sample(qualified, cap)
    return {key: predictions[key] for key in sorted(chosen)}


def co_train(fit_lm, fit_emb, labeled, pool, iterations, threshold, rng, history=(), on_round=None):
    """Algorithm 1. `fit_x(labeled examples, round)` returns a predictor, which maps {key: Example}
    to {key: (label, confidence)}; `pool` is {key: unlabelled Example}. Rounds in `history` (their
    picks, as on_round received them) are replayed without fitting. Returns the final (D_lm, D_emb)."""
    cap = len(labeled) // 3
    D_lm, D_emb = list(labeled), list(labeled)
    U_lm, U_emb = dict(pool), dict(pool)

    def exchange(picks_lm, picks_emb):
        for picks, D, U in ((picks_emb, D_lm, U_emb), (picks_lm, D_emb, U_lm)):  # S_emb -> D_lm, S_lm -> D_emb
            D += [Example(id=key, lang=pool[key].lang, text=pool[key].text, label=label) for key, (label, _) in picks.items()]
        for key in picks_lm:
            U_lm.pop(key)
        for key in picks_emb:
            U_emb.pop(key)

    for round_ in range(iterations):
        if round_ < len(history):
            exchange(*history[round_])
            continue
        predict_lm, predict_emb = fit_lm(D_lm, round_), fit_emb(D_emb, round_)
        picks_lm = select(predict_lm(U_lm), threshold, cap, rng)
        picks_emb = select(predict_emb(U_emb), threshold, cap, rng)
        if on_round:
            on_round(round_, picks_lm, picks_emb)
        exchange(picks_lm, picks_emb)
    return D_lm, D_emb


# Options passed on to each fine-tuning run (train.py's own flags).
PASSED_ON = ["task", "data", "source_lang", "target_langs", "max_steps", "batch_size", "grad_accum", "lr", "weight_decay",
             "warmup", "max_grad_norm", "max_length", "dropout", "seed", "eval_every", "eval_batch_size", "device", "amp",
             "train_fraction", "head", "freeze_embeddings", "group_by_length"]


def run(args, task, unlabelled, rank, world_size):
    """train.py --method cotrain: Algorithm 1 with fine-tuning runs of train.py as the two learners;
    `unlabelled` holds the target-language texts ({lang: [Example]}) whose labels are not used."""
    import train
    out = Path(args.out)
    device = args.device or ("cuda" if evaluate.torch.cuda.is_available() else "cpu")
    labeled = task.train[task.source]
    pool = {f"{lang}:{e.id}": Example(id=e.id, lang=lang, text=e.text) for lang, examples in unlabelled.items() for e in examples}
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "pool.jsonl", "w") as f:  # the unlabelled texts (their gold labels are not used)
            for key, e in pool.items():
                f.write(json.dumps({"key": key, "lang": e.lang, "text": e.text}, ensure_ascii=False) + "\n")
    history = []
    while args.resume and (out / f"round{len(history)}" / "picks.json").exists():
        recorded = json.loads((out / f"round{len(history)}" / "picks.json").read_text())
        history.append(tuple({key: tuple(value) for key, value in recorded[view].items()} for view in ("lm", "emb")))

    def argv_for(view, directory, examples):
        argv = []
        for name in PASSED_ON:
            value = getattr(args, name)
            if value is True:
                argv.append("--" + name.replace("_", "-"))
            elif value not in (None, False):
                argv += ["--" + name.replace("_", "-"), str(value)]
        extra = directory.parent / f"{view}-extra.jsonl"  # the pseudo-labelled texts this view trains on
        if rank == 0:
            directory.parent.mkdir(parents=True, exist_ok=True)
            with open(extra, "w") as f:
                for e in examples[len(labeled):]:
                    f.write(json.dumps({"id": e.id, "lang": e.lang, "text": e.text, "label": e.label}, ensure_ascii=False) + "\n")
        if evaluate.dist.is_initialized():
            evaluate.dist.barrier()
        model = ["--model", args.model] if view == "lm" and args.model else []
        if view == "emb":
            model = (["--model", args.embedding_model] if args.embedding_model else []) + ["--pooling", "mean"]
        return argv + model + ["--method", "zero-shot", "--extra-train", str(extra), "--out", str(directory), "--no-alignment"]

    def fitter(view):
        def fit(examples, round_):
            directory = out / f"round{round_}" / view
            train.main(argv_for(view, directory, examples) + ["--no-test"])
            model, tokenizer, _ = Classifier.load(directory / "best")
            model.to(device)

            def predict(unlabelled):
                keys = sorted(unlabelled)
                probabilities = evaluate.predict_probabilities(model, tokenizer, [unlabelled[k].text for k in keys],
                                                               args.eval_batch_size, args.max_length, device, rank, world_size)
                confidence, label = probabilities.max(-1)
                return {k: (task.labels[l], c) for k, l, c in zip(keys, label.tolist(), confidence.tolist())}
            return predict
        return fit

    def record(round_, picks_lm, picks_emb):
        if rank == 0:
            (out / f"round{round_}").mkdir(parents=True, exist_ok=True)
            (out / f"round{round_}" / "picks.json").write_text(json.dumps({"lm": picks_lm, "emb": picks_emb}, indent=1) + "\n")
            print(f"co-training round {round_}: f_lm picked {len(picks_lm)}, f_emb picked {len(picks_emb)} "
                  f"pseudo-labels above {args.threshold}", flush=True)
            if not picks_lm and not picks_emb:
                print(f"note: no prediction was more confident than --threshold {args.threshold}, so nothing was exchanged "
                      "this round; short fine-tuning gives unconfident models, and a lower --threshold lets co-training work",
                      file=sys.stderr, flush=True)

    rng = random.Random(f"{args.seed}/cotrain")
    D_lm, D_emb = co_train(fitter("lm"), fitter("emb"), labeled, pool, args.cotrain_iterations, args.threshold, rng,
                           history, record)
    # Both views once more on their final sets, tested in every language.
    results = {}
    for view, examples in (("lm", D_lm), ("emb", D_emb)):
        directory = out / "final" / view
        train.main(argv_for(view, directory, examples))
        results[view] = json.loads((directory / "results.json").read_text())
    if rank == 0:
        summary = {**{k: v for k, v in results["lm"].items() if k != "args"}, "embedding_model": results["emb"],
                   "pseudo_labels": {"lm": len(D_lm) - len(labeled), "emb": len(D_emb) - len(labeled)}, "args": vars(args)}
        (out / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
        shutil.copyfile(out / "final" / "lm" / "results.md", out / "results.md")
        print(f"co-training done: f_lm trained on {len(D_lm)} examples ({len(D_lm) - len(labeled)} pseudo-labelled); "
              f"results in {out}/results.json, the model in {out}/final/lm/best")
    return None
