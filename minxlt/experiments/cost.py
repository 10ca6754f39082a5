"""What an experiment costs before it runs: each run's optimizer steps and the texts it passes through the
encoder in training and evaluation, from the file's "sizes", and GPU-hours (docs/experiments.md, "The cost")."""
import math
from dataclasses import astuple, dataclass

from minxlt.run import flags

# A pair's two texts; any other training item counts one (Unicoder's five tasks average one sequence a step).
TEXTS_PER_ITEM = {"xeroalign": 2, "filter": 2, "xmixup": 2}
# bench.train_step's step on one NVIDIA H200 for each shape (RESULTS.md, "Step times by model shape"): translate-train,
# bf16, eager, SIB-200 texts of 47 tokens on average, at the fastest batch: (seconds a training text, how measured).
MEASURED = {"xlm-roberta-base": (0.0554 / 256, "batch 256, 0.0554 s a step"),
            "xlm-roberta-large": (0.0866 / 128, "batch 128, 0.0866 s a step"),
            "xlm-roberta-xl": (0.2075 / 32, "batch 32 with gradient checkpointing, 0.2075 s a step")}
FASTEST_STEP = {"xlm-roberta-base": 0.0342, "xlm-roberta-large": 0.0816, "xlm-roberta-xl": 0.2075}  # at any batch
PAIRED_AT_TEST = ("oracle", "translation")  # a pair method then reads two texts a prediction
MEASURED_TOKENS = 47  # the mean length of the texts the step times above were measured on
TOKENS_ASSUMED = (f"every text counted at its run's --max-length (a QA window of 384 mostly fills it; a sentence "
                  "task's random batches pad to their longest text, short of the maximum), at the time a token of the "
                  f"{MEASURED_TOKENS}-token texts measured took, and each training step at least as long as the "
                  "fastest step measured at the shape (a small batch costs its steps, not its tokens)")


@dataclass
class Cost:
    steps: int = 0       # optimizer steps of training
    training: int = 0    # texts through the encoder in training (forward passes)
    evaluation: int = 0  # texts through the encoder in the dev evaluations and the test
    uncounted: int = 0   # runs whose cost is not counted (a file without sizes)
    training_tokens: int = 0    # the training texts' tokens, each text at its run's --max-length
    evaluation_tokens: int = 0  # the evaluation texts', likewise

    def __add__(self, other):
        return Cost(*(a + b for a, b in zip(astuple(self), astuple(other))))


def training_items(method, values, sizes, level="sentence"):
    """(a training epoch's items as the method counts them at the task's `level`, the source's examples with
    translations: Yu & Joty's anchors); --extra-train's examples are the source's, without translations."""
    n, targets = math.ceil(sizes["train"] * values.get("train_fraction", 1)), sizes["languages"] - 1
    extra = sizes.get("extra_train", 0) if values.get("extra_train") else 0
    translated = n if values.get("translated") is None else min(n, values["translated"])
    if method == "xeroalign" or (method == "filter" and level == "word"):  # the source's examples, one counterpart each
        return n, translated
    self_pairs = bool(values.get("self_pairs"))
    items = {"texts": n + extra, "translated": n + translated * targets + extra, "parallel": translated * targets,
             "pairs": translated * (targets + self_pairs) + extra * self_pairs}
    return items.get(flags.METHODS[method].draws, n), translated


def run_cost(method, values, sizes, test_input, trained=True, level="sentence", tested=True):
    """Cost of one run of `method` (settings `values`, flags.planned's) on data of `sizes`; `tested`: with its test."""
    if not sizes:
        return Cost(uncounted=1)
    draws = flags.METHODS[method].draws
    per_prediction = 2 if test_input in PAIRED_AT_TEST and draws == "pairs" else 1
    pretrains = draws == "parallel"  # Unicoder: no test; its evaluations score every target's dev pairs
    test = sizes["test"] * sizes["languages"] * per_prediction if tested and not pretrains else 0
    if not trained:
        return with_tokens(Cost(0, 0, test), values)
    batch, (items, anchors) = values["batch_size"], training_items(method, values, sizes, level)
    steps = values.get("max_steps") or math.ceil(items / batch) * values["epochs"]
    training = steps * batch * TEXTS_PER_ITEM.get(method, 1) * (2 if values.get("teacher") else 1)  # and a teacher's
    if method == "contrastive" and values.get("sa_epochs"):  # semantic alignment's passes, 2b + 1 texts an anchor
        phase2 = math.ceil(anchors / batch) * values["sa_epochs"]
        steps, training = steps + phase2, training + phase2 * batch * (2 * values["sa_group"] + 1)
    every = values["eval_every"]
    evaluations = (1 if values["select_on"] == "last" else
                   steps // every + (steps % every > 0) if isinstance(every, int) else values["epochs"])
    every_lang = "all" in (values["select_on"], values.get("dev_langs"))
    dev_langs = sizes.get("dev_languages", sizes["languages"]) if every_lang else 1
    dev_langs = sizes["languages"] - 1 if pretrains else dev_langs
    dev = min(sizes["dev"], values.get("dev_limit") or sizes["dev"])  # --dev-limit: the first N of each language
    return with_tokens(Cost(steps, training, evaluations * dev * dev_langs * per_prediction + test), values)


def with_tokens(cost, values):
    """The cost with its texts' tokens, each text at the run's --max-length (TOKENS_ASSUMED)."""
    return Cost(*astuple(cost)[:4], cost.training * values["max_length"], cost.evaluation * values["max_length"])


def cotrain_cost(values, sizes, test_input, level="sentence"):
    """Cost of a cotrain.py run at its most: round r fine-tunes each view on n + r * n/3 examples, untested,
    and labels its pool; then each view once more on n + s * n/3, tested (f_emb at f_lm's size)."""
    if not sizes:
        return Cost(uncounted=1)
    n = math.ceil(sizes["train"] * values.get("train_fraction", 1))
    pool = (values.get("pool_per_lang") or sizes["train"]) * (sizes["languages"] - 1)
    views, rounds, cost = 1 if values.get("self_training") else 2, values["cotrain_iterations"], Cost()
    for r in range(rounds + 1):
        fit = run_cost(values["lm_method"], dict(values, extra_train="pseudo-labels"),
                       dict(sizes, extra_train=r * (n // 3)), test_input, level=level, tested=r == rounds)
        labelling = with_tokens(Cost(evaluation=pool if r < rounds else 0), values)
        cost += Cost(*(views * value for value in astuple(fit + labelling)))
    return cost


def say(cost):
    """A cost as words: steps, training and evaluation texts, and the runs not counted."""
    ratio = f", {cost.evaluation / cost.training:.2f} of training's" if cost.training else ""
    counted = (f"{cost.steps:,} steps; {cost.training:,} texts through the encoder in training (each also backward), "
               f"{cost.evaluation:,} in evaluation{ratio}")
    if not cost.uncounted:
        return counted
    uncounted = f"{cost.uncounted} run{'s' * (cost.uncounted > 1)} not counted (no sizes in the file)"
    return uncounted if not (cost.steps or cost.evaluation) else f"{counted}; {uncounted}"


def gpu_hours(cost, model):
    """(GPU-hours, how they were estimated) of one run's cost on one NVIDIA H200, or None where the model's shape
    was not measured (the bundled model, XXL)."""
    shape = (model or "").rsplit("/", 1)[-1]
    if shape not in MEASURED:
        return None
    seconds, how = MEASURED[shape]
    training = max(cost.training_tokens * seconds / MEASURED_TOKENS, cost.steps * FASTEST_STEP[shape])
    hours = (training + cost.evaluation_tokens / 3 * seconds / MEASURED_TOKENS) / 3600
    return hours, (f"an estimate on one NVIDIA H200 from bench.train_step's step at {shape}'s shape ({how}, bf16, "
                   f"eager; RESULTS.md), {TOKENS_ASSUMED}; an evaluation text a third of a training one; the compiled "
                   "step is faster")
