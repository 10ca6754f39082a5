"""Extractive QA: a question and its context become windows `<s> question </s></s> piece of the context </s>`
(BERT's `[CLS] question [SEP] piece [SEP]`) starting `stride` tokens apart, as BERT's and XTREME's doc_stride;
the answer is a window's best span; exact match and F1 as SQuAD's and MLQA's scripts."""
import re
import string
import unicodedata
from collections import Counter

from data import Encoded
from minxlt.errors import InputError

MAX_QUESTION_TOKENS = 64  # longer questions are cut (BERT's max_query_length)


def token_spans(context, offsets):
    """Each context token's (start, end) characters, without the whitespace its "▁" covers (a bare "▁": empty)."""
    return [(a + len(context[a:b]) - len(context[a:b].lstrip()), b) for a, b in offsets]


def answer_tokens(spans, start, end):
    """(first, last) token holding the context's characters [start, end), or None (an answer of only whitespace)."""
    covering = [i for i, (a, b) in enumerate(spans) if a < b and a < end and b > start]
    return (covering[0], covering[-1]) if covering else None


def encode_windows(examples, tokenizer, max_length, stride):
    """QA examples -> Encoded windows "<question id>/<n>", labelled (start, end) of an answer held whole, else (0, 0)
    (<s>, as BERT's SQuAD fine-tuning); `extra`: question, context start, token spans, the window's centre."""
    out = []
    for e in examples:
        question = tokenizer.tokenize(e.text)[:MAX_QUESTION_TOKENS]
        ids, offsets = tokenizer.tokenize_with_offsets(e.pair)
        spans = token_spans(e.pair, offsets)
        context_start = len(question) + 2 + len(tokenizer.separator)  # the first context token's place in a window
        budget = max_length - context_start - 1
        if budget < stride:
            raise InputError(f"--max-length {max_length} leaves {budget} context tokens per window after the "
                             f"question ({e.lang} {e.id}), fewer than --doc-stride {stride} (the run's): raise "
                             "--max-length, or train with a lower --doc-stride")
        answer = answer_tokens(spans, e.answers[0][1], e.answers[0][1] + len(e.answers[0][0])) if e.answers else None
        last = max(len(ids) - budget, 0)  # the last window starts at the first multiple of stride from here on
        for number, first in enumerate(range(0, last + stride, stride)):
            piece = slice(first, min(first + budget, len(ids)))
            label = (0, 0)
            if answer and piece.start <= answer[0] and answer[1] < piece.stop:
                label = (answer[0] - first + context_start, answer[1] - first + context_start)
            out.append(Encoded(tokenizer.add_special_tokens(question, ids[piece]), label, e.lang, f"{e.id}/{number}",
                               {"question": e.id, "context_start": context_start, "spans": spans[piece],
                                "centre": (piece.start + piece.stop) / 2 / max(len(ids), 1)}))
    return out


def matching_window(target, windows):
    """The window of `windows` whose centre in the context is nearest `target`'s (translations differ in length)."""
    return min(windows, key=lambda w: abs(w.extra["centre"] - target.extra["centre"]))


class RoundTripWindows:
    """`get(window id, lang)`: the matching window of the question's round trip through `lang` (X-Mixup)."""

    def __init__(self, sources, trips):
        self.table = {}
        for lang, windows in trips.items():
            by_question = {}
            for w in windows:
                by_question.setdefault(w.extra["question"], []).append(w)
            for s in sources:
                if s.extra["question"] in by_question:
                    self.table[s.id, lang] = matching_window(s, by_question[s.extra["question"]])

    def __bool__(self):
        return bool(self.table)

    def get(self, window_id, lang, default=None):
        return self.table.get((window_id, lang), default)


def keep_best(best, question, candidate):
    """Put a window's candidate (score, ...) in `best` ({question: candidate}) if it beats the question's best."""
    if candidate is not None and (question not in best or candidate[0] > best[question][0]):
        best[question] = candidate


def merge_best(parts):
    """One {question: candidate} from several (each process's), keeping each question's best."""
    best = {}
    for part in parts:
        for question, candidate in part.items():
            keep_best(best, question, candidate)
    return best


def best_span(start_logits, end_logits, window, max_answer_tokens=30, n_best=20):
    """A window's best answer (score, first character, end character), or None: of the n_best top start and end
    tokens, the pair with start <= end, at most max_answer_tokens long, of the highest start + end logit."""
    c, spans = window.extra["context_start"], window.extra["spans"]
    start, end = start_logits[c:c + len(spans)].tolist(), end_logits[c:c + len(spans)].tolist()
    top = lambda scores: sorted(range(len(scores)), key=lambda i: -scores[i])[:n_best]
    candidates = ((start[i] + end[j], spans[i][0], spans[j][1]) for i in top(start) for j in top(end)
                  if i <= j < i + max_answer_tokens and spans[i][0] < spans[j][1])
    return max(candidates, key=lambda candidate: candidate[0], default=None)  # ties: the first pair found wins


# SQuAD v1.1's official normalisation: lower case, ASCII punctuation and English articles removed.
ASCII_PUNCTUATION = frozenset(string.punctuation)


def squad_normalise(text):
    text = "".join(ch for ch in text.lower() if ch not in ASCII_PUNCTUATION)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


# MLQA's normalisation (evaluate_mlqa.py, docs/evaluation.md): Unicode punctuation and the language's articles
# removed, Chinese characters one token each; a language the script does not name is read as it reads Hindi.
ARTICLES = {"en": r"\b(a|an|the)\b", "es": r"\b(un|una|unos|unas|el|la|los|las)\b",
            "de": r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b",
            "vi": r"\b(của|là|cái|chiếc|những)\b", "ar": r"\sال^|ال"}
CHINESE = re.compile(r"([\u4e00-\u9fa5])")  # mixed_segmentation's characters


def mlqa_tokens(text, lang):
    punctuation = lambda ch: ch in ASCII_PUNCTUATION or unicodedata.category(ch).startswith("P")
    text = "".join(ch for ch in text.lower() if not punctuation(ch))
    if lang in ARTICLES:
        text = re.sub(ARTICLES[lang], " ", text)
    return (CHINESE.sub(r" \1 ", text) if lang == "zh" else text).split()


def exact_and_f1(prediction, golds, tokens):
    """Exact match and F1 (over token multisets) of a prediction, each the best over the gold answers."""
    exact = f1 = 0.0
    for gold in golds:
        p, g = tokens(prediction), tokens(gold)
        exact = max(exact, float(p == g))
        common = sum((Counter(p) & Counter(g)).values())
        if common:
            precision, recall = common / len(p), common / len(g)
            f1 = max(f1, 2 * precision * recall / (precision + recall))
    return exact, f1


def answer_scores(predictions, examples, lang):
    """{exact_match, f1, mlqa_exact_match, mlqa_f1, n} of predicted answers ({question id: text}), as fractions."""
    code = lang.split("_")[0]
    totals = [0.0] * 4
    for e in examples:
        golds = [text for text, _ in e.answers]
        prediction = predictions.get(e.id, "")
        squad = exact_and_f1(prediction, golds, lambda t: squad_normalise(t).split())
        mlqa = exact_and_f1(prediction, golds, lambda t: mlqa_tokens(t, code))
        totals = [a + b for a, b in zip(totals, squad + mlqa)]
    n = max(len(examples), 1)
    return {"exact_match": totals[0] / n, "f1": totals[1] / n, "mlqa_exact_match": totals[2] / n,
            "mlqa_f1": totals[3] / n, "n": len(examples)}
