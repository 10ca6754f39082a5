"""Task levels: what differs between sentence labels (SIB-200, XNLI, PAWS-X, the bundled intents),
word labels (UPOS tags, BIO slots; xSID's intent and slots together) and answer spans (XQuAD).

A level says how its examples are tokenized, how a translation pairs with its source, what a loss
averages over, which head it needs, what a translation's labels are, and how its predictions are
scored: methods and the training loop ask the task's level (LEVELS[task.level]), never which it is.
"""
from dataclasses import replace

import torch
from tqdm import tqdm

import data
from losses import position_logits, self_teaching_loss, span_loss, task_loss
from minxlt.parallel import distributed
from minxlt.tasks import qa


def predict_batch(predict, kind, tokenizer, items, device, partners=None):
    """Logits of encoded items: "text" each alone, "pair" each with its counterpart in `partners` ({id: item})
    (FILTER, X-Mixup), "counterpart" the counterpart alone (translate-test)."""
    if not items:  # no batch left while a sharded model's other processes run (Run.lockstep): a placeholder
        ids = torch.tensor([[tokenizer.bos_id, tokenizer.eos_id]], device=device)
        mask = torch.ones_like(ids)
        return (predict(ids, mask, ids, mask) if kind == "pair" else predict(ids, mask))[:0]
    if kind == "pair":
        tensors = data.pad_pairs(tokenizer, [partners[it.id].ids for it in items], [it.ids for it in items])
        return predict(*(t.to(device) for t in tensors))
    ids, mask = tokenizer.pad([(partners[it.id] if kind == "counterpart" else it).ids for it in items])
    return predict(ids.to(device), mask.to(device))


def batches(items, run):
    """This process's evaluation batches of encoded items (data.evaluation_batches)."""
    lengths = [len(it.ids) for it in items]
    return data.evaluation_batches(lengths, run.batch_size, run.rank, run.world_size, run.lockstep)


class Level:
    """The interface, as sentence labels implement it (a label per text, from its vector); Word and Span differ."""
    name = "sentence"
    description = "labels whole texts"
    max_length = 128  # tokens per text (Yu & Joty's, Sec. 4.2; the others give none for fine-tuning)
    translations_keep_labels = True  # a translation has its source's label (word labels do not carry over)
    labels_texts = True  # a prediction is one distribution per text (X-Mixup's KL of Eq. 7 compares two)
    caches_tokens = True  # training sets go through the token cache (minxlt/text/token_cache.py)

    def encode(self, examples, tokenizer, task, max_length):
        return data.encode_examples(examples, tokenizer, task.labels, max_length)

    def pair(self, sources, translations):
        """data.translation_pairs, on the token cache's arrays where it holds the texts (tested equal)."""
        pair_with = getattr(sources, "pair_with", None)
        return pair_with(translations) if pair_with else data.translation_pairs(sources, translations)

    def units(self, item):
        """What a loss averages over, counted in one encoded item: here an example."""
        return 1

    def loss(self, logits, labels, weights=None, mask=None):
        """The task's own loss (cross-entropy), over the examples that count."""
        return task_loss(logits, labels, weights)

    def head(self, task, sentence_head="roberta"):
        """The Classifier head the task needs (model.Classifier's head_style)."""
        return sentence_head

    def metric(self, task):
        """The score reported first and used for model selection."""
        return "accuracy"

    def translated(self, batch, targets):
        """Adjust a pair batch (data.pad_pairs plus labels) for what a translation's labels are."""

    def soft_label_loss(self, student_logits, teacher_logits, batch, **form):
        """KL(teacher || student) on a pair batch's translations (FILTER Eq. 5; X-Mixup's soft word labels);
        `form`: losses.self_teaching_loss's temperature and per_class."""
        return self_teaching_loss(student_logits, teacher_logits, batch["weights"], **form)

    @torch.no_grad()
    def score(self, predict, kind, examples_by_lang, run, partners=None, predictions=None):
        """{lang: scores} of a predictor (predict_batch) across processes, `partners` {lang: [Example]} its
        counterparts; `predictions` gets [{"id", "prediction"}] per language (unlabelled: predictions alone)."""
        out, encoded = {}, {}
        for lang, examples in examples_by_lang.items():
            scored = all(e.labelled for e in examples)
            if not scored and predictions is None:
                continue
            mine = None
            if kind != "text":  # encoded once where languages share them (the source's)
                key = id(partners[lang])
                mine = encoded[key] = encoded.get(key) or run.encode(partners[lang])
            scores, found = self.score_language(predict, kind, lang, examples, run, mine, scored,
                                               predictions is not None)
            if scored:
                out[lang] = scores
            if predictions is not None:
                predictions[lang] = found
        return out

    def score_language(self, predict, kind, lang, examples, run, partners, scored, listed):
        """(scores where `scored`, [{"id", "prediction"}] where `listed`) of one language's examples, `partners` their
        counterparts encoded: here a confusion matrix of (gold, predicted) label counts, summed over processes."""
        guesses, items = [], run.encode(examples)
        mine = None if partners is None else {it.id: it for it in partners}
        counts = torch.zeros(len(run.task.labels), len(run.task.labels), dtype=torch.long, device=run.device)
        for index in batches(items, run):
            batch = [items[i] for i in index]
            guessed = predict_batch(predict, kind, run.tokenizer, batch, run.device, mine).argmax(-1)
            if scored:
                gold = torch.tensor([it.label for it in batch], dtype=torch.long, device=run.device)
                counts.index_put_((gold, guessed.to(run.device)), torch.ones_like(gold), accumulate=True)
            if listed:  # a label's name per example
                guesses += zip(index, [run.task.labels[i] for i in guessed.tolist()])
        scores = accuracy_and_f1(distributed.all_reduce(counts).cpu()) if scored else None
        # in the examples' order, from every process's (index, prediction)
        merged = dict(pair for part in distributed.gather(guesses) for pair in part) if listed else {}
        return scores, [{"id": e.id, "prediction": merged[i]} for i, e in enumerate(examples) if i in merged]


class ByIdAndLang(dict):
    """{(id, lang): item}, looked up as token_cache.ById is: `get(id, lang, default)`."""

    def get(self, example_id, lang=None, default=None):
        return super().get((example_id, lang), default)


def accuracy_and_f1(counts):
    """Accuracy and macro-F1 (over the labels that occur as gold or prediction) from a confusion matrix."""
    counts = counts.double()
    tp, gold, predicted, total = counts.diagonal(), counts.sum(1), counts.sum(0), counts.sum()
    f1 = 2 * tp / (gold + predicted).clamp(min=1)
    return {"accuracy": (tp.sum() / total.clamp(min=1)).item(), "macro_f1": f1[gold + predicted > 0].mean().item(),
            "n": int(total)}


class Word(Level):
    """Word labels, each on its word's first sub-token (data.encode_tagged); a joint task's intent on <s>."""
    name = "word"
    description = "labels words"
    translations_keep_labels = False
    labels_texts = False
    caches_tokens = False  # an item's word positions live in Python objects

    def encode(self, examples, tokenizer, task, max_length):
        return data.encode_tagged(examples, tokenizer, task.labels, max_length, task.intents)

    def round_trips(self, sources, trips):
        """Each source sentence's round trip through each language, by id: X-Mixup's, without tags, whose
        steps train on the target's soft labels alone (mixup.task_losses)."""
        return ByIdAndLang({(it.id, lang): it for lang, items in trips.items() for it in items})

    def units(self, item):
        """Scored tokens: a word-level loss is a mean over words, so shares of a batch count them."""
        return sum(label != -100 for label in item.label)

    def head(self, task, sentence_head="roberta"):
        return "joint" if task.intents else "token"

    def metric(self, task):
        """A joint task's exact match; span F1 for BIO tags; for POS the task's word accuracy or seqeval F1."""
        return "exact_match" if task.intents else "f1" if bio(task.labels) else task.pos_metric

    def translated(self, batch, targets):
        """A translation keeps a joint task's intent, not word labels; `target_scored` marks its words (soft labels)."""
        batch["target_labels"][:, 1:] = -100
        batch["target_scored"] = torch.zeros(len(targets), batch["target_ids"].shape[1])
        for b, t in enumerate(targets):
            batch["target_scored"][b, [token for _, token in t.extra["scored"]]] = 1.0

    def soft_label_loss(self, student_logits, teacher_logits, batch, **form):
        """Over the translation's scored tokens; a token of NaN teacher logits has no soft labels (X-Mixup's
        released ones that sum to at most 0.5, xmixup_tags.teacher_rows) and is left out."""
        known = teacher_logits.isfinite().all(-1)
        mask = batch["target_scored"].to(known.device) * known * batch["weights"][:, None]
        return self_teaching_loss(student_logits, teacher_logits.nan_to_num(0.0), mask, **form)

    def score_language(self, predict, kind, lang, examples, run, partners, scored, listed):
        """Level's, each sentence whole: a long one in windows of words (data.word_windows), their tags put
        back together; a "pair" predictor sees each window with its counterpart (own_segments)."""
        task, mine = run.task, None
        windows = data.word_windows(examples, run.tokenizer, run.max_length)  # [(example, first word, Example)]
        items = run.encode([window for _, _, window in windows])
        if partners is not None:
            mine = {it.id: it for it in partners}
            items = own_segments(items, windows, mine)
        found = {}
        for index in batches(items, run):
            logits = predict_batch(predict, kind, run.tokenizer, [items[i] for i in index], run.device, mine)
            for row, i in zip(logits.argmax(-1).cpu(), index):
                window_tags = ["O"] * items[i].extra["words"]  # a word whose tokens were truncated away: "O"
                for w, t in items[i].extra["scored"]:  # else its first sub-token's prediction
                    window_tags[w] = task.labels[row[t]]
                intent = task.intents[row[0] - len(task.labels)] if task.intents else None
                found[i] = (window_tags, intent)
        found = {i: guess for part in distributed.gather(found) for i, guess in part.items()}  # every process's
        tags, intents = [["O"] * len(e.words) for e in examples], [None] * len(examples)
        for i, (example, first, _) in enumerate(windows):
            window_tags, intent = found[i]
            tags[example][first:first + len(window_tags)] = window_tags
            intents[example] = intents[example] if first else intent  # a joint task's: the first window's
        scores = None
        if scored:
            counts = sum((self.count_tags(e, t, intent, task) for e, t, intent in zip(examples, tags, intents)),
                         torch.zeros(8, dtype=torch.long))
            if not bio(task.labels):  # POS: seqeval's chunks of the language's sentences, joined as it joins them
                counts[:3] = torch.tensor(chunk_counts([e.tags for e in examples], tags))
            scores = tagging_scores(counts, spans=bio(task.labels), joint=bool(task.intents), first=self.metric(task))
        return scores, [{"id": e.id, "prediction": {"intent": intent, "tags": t} if task.intents else t}
                        for e, t, intent in zip(examples, tags, intents)]

    def count_tags(self, example, tags, intent, task):
        """A sentence's counts from its predicted tags (and intent): entities found, predicted, gold; words right,
        words; intents right, sentences all right, sentences."""
        gold, guess = entities(example.tags), entities(tags)
        right = sum(a == b for a, b in zip(example.tags, tags))
        intent_right = bool(task.intents) and intent == example.label
        return torch.tensor([len(gold & guess), len(guess), len(gold), right, len(tags), intent_right,
                             intent_right and right == len(tags), 1])


def own_segments(items, windows, partners):
    """Window k > 0 renamed "<id>#<k>" where counterparts come a segment at a time (FILTER's UD-POS and PAN-X,
    minxlt/tasks/filter_tags.py), paired with its own segment's (past the last, the last's); else as it was."""
    out, k = [], 0
    for i, (item, (example, _, _)) in enumerate(zip(items, windows)):
        k = k + 1 if i and windows[i - 1][0] == example else 0
        segment = next((j for j in range(k, 0, -1) if f"{item.id}#{j}" in partners), 0)
        out.append(replace(item, id=f"{item.id}#{segment}") if segment else item)
    return out


def entities(tags):
    """A BIO sequence's entities as conlleval reads them, {(type, start, end)}: one starts at B- or at an I-
    after O or another type, and ends before O or the next start."""
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


def bio(labels):
    """Whether a task's tags are BIO spans (B-PER, I-PER, O), not tags of single words (POS)."""
    return any(label.startswith("B-") for label in labels)


def chunk_counts(gold, guessed):
    """(chunks found, predicted, gold) as seqeval 1.x's f1_score counts POS tags (docs/evaluation.md): sentences
    joined, each followed by "O"; a tag's first character its prefix, the rest after its first "-" its type."""
    def chunks(sentences):
        found, prev_tag, prev_type, begin = set(), "O", "", 0
        for i, tag in enumerate([t for tags in sentences for t in [*tags, "O"]] + ["O"]):
            prefix, kind = tag[0], tag[1:].split("-", 1)[-1] or "_"
            if (prev_tag in "ES" or (prev_tag in "BI" and prefix in "BSO")
                    or (prev_tag not in "O." and prev_type != kind)):  # seqeval's end_of_chunk
                found.add((prev_type, begin, i - 1))
            if (prefix in "BS" or (prev_tag in "ESO" and prefix in "EI")
                    or (prefix not in "O." and prev_type != kind)):  # seqeval's start_of_chunk
                begin = i
            prev_tag, prev_type = prefix, kind
        return found
    a, b = chunks(gold), chunks(guessed)
    return len(a & b), len(b), len(a)


def tagging_scores(counts, spans=True, joint=False, first="accuracy"):
    """BIO (`spans`): exact-span precision, recall, F1 and word accuracy; POS: word accuracy and chunk F1,
    `first` first; a joint task: intent accuracy, slot F1, exact match (intent and every slot), the rest."""
    found, predicted, gold, right, words, intents_right, exact, sentences = counts.tolist()
    precision, recall, accuracy = found / max(predicted, 1), found / max(gold, 1), right / max(words, 1)
    f1 = 2 * precision * recall / max(precision + recall, 1e-12)
    if not spans:
        scores = {"accuracy": accuracy, "f1": f1, "precision": precision, "recall": recall}
        return {first: scores.pop(first), **scores, "n": words}
    if joint:
        return {"intent_accuracy": intents_right / max(sentences, 1), "slot_f1": f1,
                "exact_match": exact / max(sentences, 1), "slot_precision": precision, "slot_recall": recall,
                "word_accuracy": accuracy, "n": sentences}
    return {"f1": f1, "precision": precision, "recall": recall, "word_accuracy": accuracy, "n": words}


class Span(Level):
    """Answer spans (minxlt/tasks/qa.py): question and context in windows labelled (start, end); 2 logits a token."""
    name = "span"
    description = "labels answer spans"
    max_length = 384  # per window, as in BERT's SQuAD fine-tuning
    labels_texts = False
    caches_tokens = False  # a window's character spans live in Python objects

    def encode(self, examples, tokenizer, task, max_length):
        return qa.encode_windows(examples, tokenizer, max_length, task.doc_stride)

    def pair(self, sources, translations):
        """Each translated window with its source's window over the same context (qa.matching_window)."""
        windows = {}
        for s in sources:
            windows.setdefault(s.extra["question"], []).append(s)
        matched = [(qa.matching_window(t, windows[t.extra["question"]]), t) for t in translations
                   if t.extra["question"] in windows]
        order = {id(s): i for i, s in enumerate(sources)}
        return sorted(matched, key=lambda pair: order[id(pair[0])])

    def round_trips(self, sources, trips):
        """Each source window's round trip over the same context, with its own answer's label (qa.RoundTripWindows):
        Eq. 8 keeps both terms, where the authors' code drops the source's (docs/methods.md)."""
        return qa.RoundTripWindows(sources, trips)

    def loss(self, logits, labels, weights=None, mask=None):
        """Over each window's real tokens."""
        return span_loss(logits, labels, weights, mask)

    def head(self, task, sentence_head="roberta"):
        return "span"

    def metric(self, task):
        return "f1"

    def soft_label_loss(self, student_logits, teacher_logits, batch, **form):
        """Over each window's own positions, for its start and its end (the classes: the positions)."""
        mask, weights = batch["target_mask"], batch["weights"]
        return self_teaching_loss(position_logits(student_logits, mask), position_logits(teacher_logits, mask),
                                  weights[:, None].expand(-1, 2), **form)

    def score_language(self, predict, kind, lang, examples, run, partners, scored, listed):
        """EM and F1, answers as predictions: a question's best span over its windows, the processes' candidates
        shared; a "pair" predictor sees each window with its source's over the same context."""
        items, paired = run.encode(examples), None
        if partners is not None:
            paired = {it.id: source for source, it in self.pair(partners, items)}
        best = {}  # question id -> (score, first character, end character)
        for index in tqdm(batches(items, run), desc=f"answering {lang}", disable=run.rank != 0, leave=False,
                          dynamic_ncols=True):
            batch = [items[i] for i in index]
            logits = predict_batch(predict, kind, run.tokenizer, batch, run.device, paired).float().cpu()
            for row, window in zip(logits, batch):  # row (T, 2): start and end logits
                span = qa.best_span(row[:, 0], row[:, 1], window, run.task.max_answer_length)
                qa.keep_best(best, window.extra["question"], span)
        best = qa.merge_best(distributed.gather(best))  # each question's best over all processes' windows
        contexts = {e.id: e.pair for e in examples}
        answers = {q: contexts[q][a:b] for q, (_, a, b) in best.items()}
        return (qa.answer_scores(answers, examples, lang) if scored else None,
                [{"id": e.id, "prediction": answers.get(e.id, "")} for e in examples])


LEVELS = {level.name: level for level in (Level(), Word(), Span())}
