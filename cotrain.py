"""Co-training for cross-lingual adaptation (Yu & Joty 2021, Algorithm 1): a driver of train.py runs.

    python cotrain.py --task sib200 --data ../shared/data/sib200 --out runs/cotrain
    torchrun --nproc_per_node 2 cotrain.py --task sib200 --data ../shared/data/sib200 --out runs/cotrain

Every flag besides the ones below goes to each fine-tuning run (python train.py --help): --task,
--data, --max-steps, --train-fraction and so on.

Two classifiers with different views of a text, the multilingual LM being fine-tuned (f_lm, the <s>
vector of --model) and a sentence-embedding model (f_emb, --embedding-model read as
--embedding-pooling says; LaBSE's pooled output in the paper), label the target-language texts for
each other:

    for s iterations:
        fine-tune f_lm on D_lm and f_emb on D_emb
        each labels its own remaining pool; keep the predictions with confidence > t
        take at most n/3 of them at random (n: the size of the labelled data D)
        f_emb's picks join D_lm, f_lm's join D_emb; each pool loses its picks

Choices the paper leaves open: each fine-tuning starts from the pretrained weights on the grown
labelled set; each model labels its own pool (U_lm, U_emb), so that each gives a text away at most
once; after the last round both are fine-tuned once more on their final sets, and tested (OUT/ and
--resume: docs/methods.md).

Table 3's other rows: --self-training, its baseline (Dong and de Melo 2019), f_lm labelling for
itself; --lm-method contrastive, "lang. adaptation & co-training", f_lm fine-tuned with Sec. 3.2's
language adaptation (contrastive.py) on D, D_bi (--translated) and its pseudo-labels.
"""
import argparse
import json
import random
import shutil
import sys
from pathlib import Path

import data
import evaluate
import train
from data import Example
from levels import LEVELS
from methods import own_flags
from minxlt import tasks
from minxlt.parallel import distributed
from minxlt.run import bookkeeping, cli, flags
from model import Classifier


def select(predictions, threshold, cap, rng):
    """{key: (label, confidence)} -> the predictions above `threshold`, at most `cap` of them drawn at random."""
    qualified = sorted(key for key, (_, confidence) in predictions.items() if confidence > threshold)
    chosen = qualified if len(qualified) <= cap else rng.sample(qualified, cap)
    return {key: predictions[key] for key in sorted(chosen)}


def paired(example):
    """A sentence-pair task's second text, as the JSON lines of the pool and the pseudo-labels carry it."""
    return {} if example.pair is None else {"pair": example.pair}


def co_train(fit_lm, fit_emb, labeled, pool, iterations, threshold, seed, history=(), on_round=None):
    """Algorithm 1 -> the final (D_lm, D_emb): `fit_x(labeled, round)` gives a predictor, {key: Example} ->
    {key: (label, confidence)}; `history`'s rounds are replayed; `fit_emb` None: self-training."""
    cap = len(labeled) // 3
    D_lm, D_emb = list(labeled), list(labeled)
    U_lm, U_emb = dict(pool), dict(pool)
    pseudo = lambda picks: [Example(id=key, lang=pool[key].lang, text=pool[key].text, pair=pool[key].pair, label=label)
                            for key, (label, _) in picks.items()]
    for round_ in range(iterations):
        if round_ < len(history):
            picks_lm, picks_emb = history[round_]
        else:
            predict_lm, predict_emb = fit_lm(D_lm, round_), fit_emb and fit_emb(D_emb, round_)
            rng = random.Random(f"{seed}/cotrain/{round_}")  # a round's own: a resumed run picks as one not stopped
            picks_lm = select(predict_lm(U_lm), threshold, cap, rng)
            picks_emb = select(predict_emb(U_emb), threshold, cap, rng) if predict_emb else {}
            if on_round:
                on_round(round_, picks_lm, picks_emb)
        D_lm.extend(pseudo(picks_lm if fit_emb is None else picks_emb))  # S_emb -> D_lm (self-training: its own S_lm)
        if fit_emb is not None:
            D_emb.extend(pseudo(picks_lm))  # S_lm -> D_emb
        for unlabelled, picks in ((U_lm, picks_lm), (U_emb, picks_emb)):
            for key in picks:
                unlabelled.pop(key)
    return D_lm, D_emb


def get_args(argv=None):
    """(co-training's own flags, the rest: train.py's, the fine-tuning runs' flags as train.py parses them)."""
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                           allow_abbrev=False)
    g = p.add_argument_group("co-training (Yu & Joty, Algorithm 1)")
    g.add_argument("--model", help="f_lm, the multilingual LM fine-tuned (default: the bundled model)")
    g.add_argument("--embedding-model", help="f_emb, the second view: a sentence-embedding checkpoint (default: the "
                   "bundled model)")
    g.add_argument("--embedding-pooling", default="mean", choices=["mean", "cls", "pooler"], help="f_emb's sentence "
                   "embedding, which its classifier reads: the mean of its tokens (the bundled model's, "
                   "multilingual-e5's), <s>, or <s> through its pooler (LaBSE's, its pooled output; default: mean)")
    g.add_argument("--cotrain-iterations", type=cli.positive_int, default=3, help="s, the rounds of Algorithm 1")
    g.add_argument("--threshold", type=cli.fraction, default=0.9, help="t, the confidence a pseudo-label needs")
    g.add_argument("--pool-per-lang", type=cli.positive_int, help="unlabelled texts per target language, drawn at "
                   "random (default: all of its training texts)")
    g.add_argument("--self-training", action="store_true", help="the paper's baseline instead (Dong and de Melo "
                   "2019): f_lm labels the pool for itself, no second view")
    g.add_argument("--lm-method", default="zero-shot", choices=["zero-shot", "contrastive"], help="how f_lm is "
                   "fine-tuned: on its labelled set (zero-shot), or with language adaptation on it and the translated "
                   "examples, --translated ('lang. adaptation & co-training', Sec. 3.2; contrastive.py)")
    g.add_argument("--out", default="runs/cotrain", help="output directory: the pool, each round's picks and models, "
                   "the final results")
    g.add_argument("--resume", action="store_true", help="replay the rounds already done in OUT and go on")
    g.add_argument("--overwrite", action="store_true", help="replace the co-training run in OUT, if there is one")
    own, rest = p.parse_known_args(argv)
    if own.resume and own.overwrite:
        p.error("--resume continues the co-training in --out and --overwrite replaces it: give one of them")
    if own.self_training and own.embedding_model:
        p.error("--self-training has no second view: drop --embedding-model")
    for flag, why in (("--method", "f_lm's is --lm-method, f_emb's zero-shot"), ("--extra-train", "its pseudo-labels"),
                      ("--no-test", "the final models are tested")):
        if any(arg == flag or arg.startswith(flag + "=") for arg in rest):
            p.error(f"{flag}: co-training sets it for each fine-tuning run ({why}): drop it")
    if not own.self_training:  # f_emb's flags checked now too, not after f_lm's first fine-tuning
        flags.parse(common(rest, own.lm_method) + ["--method", "zero-shot", "--out", own.out])
    return own, rest, flags.parse(rest + ["--method", own.lm_method, "--out", own.out])


def common(argv, method):
    """train.py's arguments less `method`'s own flags (contrastive's --tau, ...), which only f_lm's runs read."""
    takes = {f"--{f.name.replace('_', '-')}": f.type is not bool  # a flag -> whether a value follows it
             for f in own_flags(flags.METHODS[method]) if f.metadata}
    kept, i = [], 0
    while i < len(argv):
        flag = argv[i].split("=", 1)[0]
        n = 2 if takes.get(flag) and "=" not in argv[i] else 1
        kept += [] if flag in takes else argv[i:i + n]
        i += n
    return kept


def main(argv=None):
    """Algorithm 1 with fine-tuning runs of train.py as the two learners."""
    own, rest, args = get_args(argv)
    rank, world_size, device = distributed.setup(args.device)
    out = Path(own.out)
    cli.output_folder(out, rank=rank, overwrite=True)  # made and held; the co-training run it holds is checked below
    held = sorted(p for p in out.glob("*") if p.name in ("cotrain.json", "pool.jsonl", "results.json", "results.md",
                                                         "final") or p.name.startswith("round"))
    if held and not own.resume and not own.overwrite:
        raise tasks.InputError(f"--out {out} holds a co-training run ({', '.join(p.name for p in held)}): continue it "
                               "with --resume, replace it with --overwrite, or choose another --out")
    full = tasks.load_task(args.task, args.data, args.source_lang, args.target_langs, args.strict_data)
    if not LEVELS[full.level].labels_texts:
        raise tasks.InputError(f"co-training pseudo-labels whole sentences (Yu & Joty classify them); --task "
                               f"{args.task} {LEVELS[full.level].description}")
    if own.overwrite and rank == 0:
        for path in held:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    check_settings(out, own, args, rank)
    unlabelled = {lang: full.train[lang] for lang in full.targets}  # every target-language text, its label unused
    if own.pool_per_lang is not None:  # or a random sample of each language's
        unlabelled = {lang: random.Random(f"{args.seed}/pool/{lang}").sample(texts, min(own.pool_per_lang, len(texts)))
                      for lang, texts in unlabelled.items()}
    few = args.train_fraction < 1 or args.translated is not None
    task = data.few_shot(full, args.train_fraction, args.translated, args.seed) if few else full
    labeled = task.train[task.source]
    pool = {f"{lang}:{e.id}": Example(id=e.id, lang=lang, text=e.text, pair=e.pair)
            for lang, examples in unlabelled.items() for e in examples}
    history = []
    while own.resume and (path := out / f"round{len(history)}" / "picks.json").exists():
        history.append(tuple({key: tuple(value) for key, value in json.loads(path.read_text())[view].items()}
                             for view in ("lm", "emb")))
        if unknown := [key for picks in history[-1] for key in picks if key not in pool]:
            raise tasks.InputError(f"{path}: picks {', '.join(unknown[:3])} are not in this command's pool: resume "
                                   "with the flags that made it (--target-langs, --pool-per-lang, --seed, --data)")
    if rank == 0:  # the unlabelled texts (their gold labels are not used)
        cli.write_text(out / "pool.jsonl", "".join(json.dumps({"key": key, "lang": e.lang, "text": e.text, **paired(e)},
                                                              ensure_ascii=False) + "\n" for key, e in pool.items()))
    fine_tune = FineTuning(own, rest, args, task, len(labeled), device, rank, world_size)
    try:  # a Ctrl-C outside train.py's loop (a model loading, the pool being labelled) says how to go on too
        D_lm, D_emb = co_train(fine_tune.fitter("lm"), None if own.self_training else fine_tune.fitter("emb"), labeled,
                               pool, own.cotrain_iterations, own.threshold, args.seed, history, fine_tune.record)
        # Both views (self-training: f_lm) once more on their final sets, tested in every language.
        for view, examples in (("lm", D_lm),) + ((("emb", D_emb),) if not own.self_training else ()):
            fine_tune.run(view, out / "final" / view, examples, f"the final fine-tuning of f_{view}")
    except KeyboardInterrupt:
        raise SystemExit(stopped(fine_tune.where)) from None
    if rank == 0:
        summarise(out, own, args, len(D_lm) - len(labeled), len(D_emb) - len(labeled))
    cli.release(out)
    distributed.cleanup()


def stopped(where, why=""):
    """What co-training says where it stops before its end: its recorded rounds and finished fine-tunings are kept."""
    return f"co-training stopped in {where}{why}: continue with the same command and --resume"


def check_settings(out, own, args, rank):
    """OUT/cotrain.json: the settings of the co-training run in OUT, written by its first command; a --resume with
    others is refused (naming them), as train.py --resume refuses another run's checkpoint."""
    given = dict(vars(args), **vars(own))
    names = ("model", "embedding_model", "embedding_pooling", "cotrain_iterations", "threshold", "pool_per_lang",
             "self_training", "lm_method", "task", "data", "source_lang", "target_langs", *bookkeeping.SHAPING,
             *(f.name for f in own_flags(flags.METHODS[own.lm_method]) if f.metadata))
    folders = ("model", "embedding_model", "data", "extra_train")  # kept as absolute paths, to resume from anywhere
    path_of = lambda name, value: str(Path(value).resolve()) if name in folders and value and Path(value).exists() \
        else value
    here = json.loads(json.dumps({name: path_of(name, given.get(name)) for name in names}))
    path = out / "cotrain.json"
    there = json.loads(path.read_text()) if own.resume and path.is_file() else here  # none: a run before the record
    if different := [f"{name} {there.get(name)!r} there, {value!r} here" for name, value in here.items()
                     if there.get(name) != value]:
        raise tasks.InputError(f"--out {out} belongs to another co-training run ({'; '.join(different)}): resume "
                               "with that run's settings, or start afresh with --overwrite or another --out")
    if rank == 0:
        cli.write_text(path, json.dumps(here, indent=1) + "\n")


def summarise(out, own, args, given_lm, given_emb):
    """OUT/results.json and .md: f_lm's final test, titled as co-training's, with f_emb's results and settings."""
    lm, emb = (out / "final" / "lm" / "results.json"), out / "final" / "emb" / "results.json"
    summary = {**json.loads(lm.read_text()), "embedding_model": json.loads(emb.read_text()) if emb.exists() else None,
               "pseudo_labels": {"lm": given_lm, "emb": given_emb}, "args": dict(vars(args), **vars(own))}
    cli.write_text(out / "results.json", json.dumps(summary, indent=2) + "\n")
    name = "self-training" if own.self_training else "co-training"
    rounds = f"{own.cotrain_iterations} round" + "s" * (own.cotrain_iterations > 1)
    lm_title, _, table = (out / "final" / "lm" / "results.md").read_text().partition("\n\n")  # "zero-shot on ..."
    tested = lm_title.removeprefix(f"{own.lm_method} on {args.task}, ")  # "test split, best dev step ..."
    cli.write_text(out / "results.md", f"{name} on {args.task} (f_lm {own.lm_method}, {rounds}, {given_lm} pseudo-"
                                       f"labels): f_lm's final model, {tested}\n\n{table}")
    print(f"{name} done: f_lm trained on {given_lm} pseudo-labels beside its labelled examples; results in "
          f"{out}/results.json, the model in {out}/final/lm/best")


class FineTuning:
    """Algorithm 1's learners as train.py runs, f_lm (--model's <s>) and f_emb (--embedding-model, --embedding-pooling),
    each on the source's examples plus the pseudo-labels it was given (--extra-train)."""

    def __init__(self, own, rest, args, task, n_labeled, device, rank, world_size):
        self.own, self.rest, self.args, self.task, self.n_labeled = own, rest, args, task, n_labeled
        self.device, self.rank, self.world_size = device, rank, world_size
        self.where = "round 0"  # where co-training is: what a Ctrl-C stops

    def run(self, view, directory, examples, where, *more):
        """A view's train.py run into `directory` to its end: skipped where it finished (its `done`), continued from
        its checkpoint under --resume; one stopped before its end (Ctrl-C, --stop-at, its test's) stops co-training."""
        self.where = where
        if (directory / "done").is_file():
            return
        extra = directory.parent / f"{view}-extra.jsonl"  # its pseudo-labelled texts
        if self.rank == 0:
            cli.write_text(extra, "".join(json.dumps({"id": e.id, "lang": e.lang, "text": e.text, **paired(e),
                                                      "label": e.label}, ensure_ascii=False) + "\n"
                                          for e in examples[self.n_labeled:]))
        distributed.barrier()
        name = self.own.model if view == "lm" else self.own.embedding_model
        model = ["--model", name] if name else []
        if view == "emb":
            model += ["--pooling", self.own.embedding_pooling]
        method = self.own.lm_method if view == "lm" else "zero-shot"  # f_lm's method's own flags: its runs' alone
        rest = self.rest if view == "lm" else common(self.rest, self.own.lm_method)
        start = "--resume" if self.own.resume and cli.latest_checkpoint(directory) else "--overwrite"
        argv = rest + model + ["--method", method, "--extra-train", str(extra), "--out", str(directory),
                               "--no-alignment", start, *more]  # co-training's own folders
        try:
            finished = train.main(argv) is not None
        except SystemExit as e:  # train.py's advice on a Ctrl-C in its test (python evaluate.py): co-training's instead
            if not isinstance(e.code, str):
                raise
            raise SystemExit(stopped(where, f" ({e.code.partition(';')[0]})")) from None
        if not finished:
            raise SystemExit(stopped(where))
        if self.rank == 0:
            cli.write_text(directory / "done", "")

    def fitter(self, view):
        """Algorithm 1's fit: fine-tune on the labelled examples -> {key: Example} -> {key: (label, confidence)}."""
        def fit(examples, round_):
            directory = Path(self.own.out) / f"round{round_}" / view
            self.run(view, directory, examples, f"round {round_}", "--no-test")
            model, tokenizer, info = Classifier.load(directory / "best", self.device)

            def predict(unlabelled):
                keys = sorted(unlabelled)
                probabilities = evaluate.predict_probabilities(
                    model, tokenizer, [unlabelled[k].text for k in keys], [unlabelled[k].pair for k in keys],
                    self.args.eval_batch_size, info["max_length"], self.device, self.rank, self.world_size)
                confidence, label = probabilities.max(-1)
                return {k: (self.task.labels[l], c) for k, l, c in zip(keys, label.tolist(), confidence.tolist())}
            return predict
        return fit

    def record(self, round_, picks_lm, picks_emb):
        """Write a round's picks (what --resume replays) and say how many there were."""
        if self.rank != 0:
            return
        out = Path(self.own.out) / f"round{round_}"
        cli.write_text(out / "picks.json", json.dumps({"lm": picks_lm, "emb": picks_emb}, indent=1) + "\n")
        print(f"co-training round {round_}: f_lm picked {len(picks_lm)}, f_emb picked {len(picks_emb)} "
              f"pseudo-labels above {self.own.threshold}", flush=True)
        if not picks_lm and not picks_emb:
            print(f"note: no prediction was more confident than --threshold {self.own.threshold}, so nothing was "
                  "exchanged this round; short fine-tuning gives unconfident models, and a lower --threshold lets "
                  "co-training work", file=sys.stderr, flush=True)


if __name__ == "__main__":
    cli.run(main)
