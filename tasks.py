"""Tasks: readers for the formats people have on disk, and each task's layout (its languages,
labels, level and files), which `load_task` reads into a Task of examples per split and language.
The training split is read when a language is first asked for (TrainSplit): evaluation never
reads it, and a run whose token cache holds it (token_cache.py) does not either.

Every reader checks what it reads and stops at the first problem with the file and line
(DataError); known-noisy machine-translated files are the exception, where bad rows are skipped
and counted. Translations of a source example share its id; `pair_by_id` checks that they do.
"""
import codecs
import csv
import io
import json
import math
import os
import random
import re
import sys
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import demo_corpus
from data import Example


class InputError(ValueError):
    """Something given to a command (a flag, a file, a directory) that it cannot use; the message
    says what to change, and train.py and evaluate.py print it without a traceback."""


class DataError(InputError):
    """A data file that cannot be read as it is; the message names the file and line."""

    def __init__(self, path, line, problem):
        super().__init__(f"{path}:{line}: {problem}" if line else f"{path}: {problem}")


def read_text(path):
    """The text of a UTF-8 file, without a byte-order mark; a file that is not UTF-8 stops at the
    line of its first bad byte."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, 0, "not a file" if path.exists() else "file not found")
    raw = path.read_bytes()
    raw = raw[len(codecs.BOM_UTF8):] if raw.startswith(codecs.BOM_UTF8) else raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(path, raw[:e.start].count(b"\n") + 1, f"not UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start}): "
                                                              "save the file as UTF-8") from None


def read_lines(path):
    """The lines of a UTF-8 text file, with any line ending (\\n, \\r\\n, \\r), numbered from 1."""
    text = read_text(path).replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    return list(enumerate(lines[:-1] if lines and lines[-1] == "" else lines, start=1))


def read_tsv(path, columns, header=True, noisy=False, quoted=False, optional=0):
    """Rows of a tab-separated file as (line number, {column: value}), read as the file is written:
    `quoted` for csv-quoted files (a field in quotes, its quotes doubled; SIB-200's and XTREME's, as
    pandas and Python's csv write them), else every character as it is. The last `optional`
    columns may be absent (XTREME's test files have no labels). Rows with the wrong number of
    columns or an empty field stop the run, or, for known-noisy machine-translated files
    (`noisy=True`), are skipped and counted, with one line saying how many."""
    text = read_text(path)
    csv.field_size_limit(2 ** 31 - 1)  # a long text is a text, not an error (the csv module's default stops at 128 KB)
    skipped, rows = 0, []
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_MINIMAL if quoted else csv.QUOTE_NONE)
    for row in reader:
        number = reader.line_num
        if header and number == 1:
            if [c.strip() for c in row[:len(columns)]] != list(columns):
                raise DataError(path, 1, f"header {row!r} does not start with the expected columns {list(columns)}")
            continue
        problem = None
        if not len(columns) - optional <= len(row) <= len(columns):
            problem = f"{len(row)} columns, expected {len(columns)} ({', '.join(columns)})"
        elif any(not v.strip() or v.strip() == "NS" for v in row):
            problem = f"empty or 'NS' (failed translation) field in {row!r}"
        if problem:
            if noisy:
                skipped += 1
                continue
            raise DataError(path, number, problem)
        rows.append((number, dict(zip(columns, (v.strip() for v in row)))))
    if skipped:
        print(f"{path}: skipped {skipped} malformed or untranslated rows of {skipped + len(rows)}", file=sys.stderr)
    return rows


def unique_ids(path, rows, what="id"):
    """Refuse an id used twice in one file: examples are paired across languages and predictions
    keyed by their ids, so a second use would silently replace the first. `rows`: (line, id)."""
    first = {}
    for line, id in rows:
        if id in first:
            raise DataError(path, line, f"{what} {id!r} is used twice in the file, on lines {first[id]} and {line}: give each "
                                        "example its own (translations are paired and predictions keyed by it)")
        first[id] = line


def check_label(path, line, label, labels):
    if label not in labels:
        raise DataError(path, line, f"unknown label {label!r} (expected one of {', '.join(sorted(labels))})")
    return label


SIB200_LABELS = ("science/technology", "travel", "politics", "sports", "health", "entertainment", "geography")


def read_sib200(directory, lang, split):
    """SIB-200: <directory>/<lang>/<split>.tsv with index_id, category, text, csv-quoted; parallel by index_id."""
    path = Path(directory) / lang / f"{split}.tsv"
    rows = read_tsv(path, ("index_id", "category", "text"), quoted=True)
    unique_ids(path, [(n, r["index_id"]) for n, r in rows], "index_id")
    return [Example(id=r["index_id"], lang=lang, text=r["text"], label=check_label(path, n, r["category"], SIB200_LABELS),
                    where=f"{path}:{n}") for n, r in rows]


XNLI_LABELS = ("entailment", "neutral", "contradiction")


def read_xnli(path, lang):
    """XNLI-1.0 xnli.{dev,test}.tsv: all languages in one file, parallel by pairID."""
    lines = read_lines(path)
    columns = lines[0][1].split("\t") if lines else []
    needed = {"language", "gold_label", "sentence1", "sentence2", "pairID"}
    if not needed <= set(columns):
        raise DataError(path, 1, f"header lacks {', '.join(sorted(needed - set(columns)))}")
    rows = [(n, r) for n, r in read_tsv(path, columns) if r["language"] == lang]
    unique_ids(path, [(n, r["pairID"]) for n, r in rows], f"{lang} pairID")
    return [Example(id=r["pairID"], lang=lang, text=r["sentence1"], pair=r["sentence2"],
                    label=check_label(path, n, r["gold_label"], XNLI_LABELS), where=f"{path}:{n}") for n, r in rows]


def read_xnli_mt(path, lang):
    """XNLI-MT multinli.train.<lang>.tsv (premise, hypo, label): machine translations of MultiNLI,
    parallel by line, so the id is the line number. Known to be noisy: bad rows are skipped."""
    out = []
    for n, r in read_tsv(path, ("premise", "hypo", "label"), noisy=lang != "en"):
        label = "contradiction" if r["label"] == "contradictory" else r["label"]  # the files say "contradictory"
        out.append(Example(id=str(n), lang=lang, text=r["premise"], pair=r["hypo"], label=check_label(path, n, label, XNLI_LABELS),
                           where=f"{path}:{n}"))
    return out


def read_pawsx(path, lang, noisy=None):
    """PAWS-X <lang>/{train,dev,test}.tsv or translated_train.tsv: id, sentence1, sentence2, label.
    Machine-translated training files have blank and 'NS' rows, which are skipped and counted."""
    path = Path(path)
    noisy = path.name.startswith("translated") if noisy is None else noisy
    rows = read_tsv(path, ("id", "sentence1", "sentence2", "label"), noisy=noisy)
    unique_ids(path, [(n, r["id"]) for n, r in rows])
    return [Example(id=r["id"], lang=lang, text=r["sentence1"], pair=r["sentence2"], label=check_label(path, n, r["label"], ("0", "1")),
                    where=f"{path}:{n}") for n, r in rows]


def read_squad(path, lang, blank=False, noisy=False, unique=True):
    """SQuAD v1.1 JSON (XQuAD, MLQA, TyDiQA-GoldP): one Example per question, with text = the
    question, pair = its context, answers = [(text, first character)] and group = the article's
    title. Translations of a question share its id. With `blank`, a test file whose answers XTREME
    has blanked ({"answer_start": 0, "text": ""}) gives questions without answers (answers None).
    Machine-translated files (`noisy`) lose the questions whose answers are not in their context,
    counted on one line. A question id is unique in its file (predictions are keyed by it): a
    second use is refused, naming both places, unless `unique` is off (Tydiqa's training file)."""
    try:
        articles = json.loads(read_text(path))["data"]
        if not isinstance(articles, list):
            raise TypeError(f"'data' is a {type(articles).__name__}")
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise DataError(path, 0, f"not SQuAD v1.1 JSON, an object with a 'data' list of articles ({e!r})") from None
    examples, skipped, seen = [], 0, {}
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(article.get("paragraphs", []) if isinstance(article, dict) else [None]):
            where = f"article {a} ({article.get('title') if isinstance(article, dict) else None!r}), paragraph {p}"
            try:
                context = paragraph["context"]
                for q, qa in enumerate(paragraph["qas"]):
                    here = f"{where}, question {qa.get('id', q)}"
                    if unique and qa.get("id") in seen:
                        raise DataError(path, 0, f"question id {qa['id']!r} is used twice, in {seen[qa['id']]} and in {here} "
                                                 f"(data[{a}].paragraphs[{p}].qas[{q}]): predictions are keyed by it; give each "
                                                 "question its own id")
                    seen.setdefault(qa.get("id"), here)
                    try:
                        examples.append(squad_question(path, here, qa, context, lang, article.get("title", f"article {a}"), blank))
                    except DataError:
                        if not noisy:
                            raise
                        skipped += 1
            except (KeyError, TypeError, AttributeError) as e:
                raise DataError(path, 0, f"{where} (data[{a}].paragraphs[{p}]): missing or malformed field {e} (expected "
                                         "context, qas with id, question and answers of text and answer_start)") from None
    if skipped:
        print(f"{path}: skipped {skipped} questions of {skipped + len(examples)} whose answer is not in their context", file=sys.stderr)
    return examples


def squad_question(path, where, qa, context, lang, title, blank=False):
    """One SQuAD question as an Example, every field checked: its answers must lie in the context."""
    if not isinstance(context, str) or not isinstance(qa["question"], str) or not isinstance(qa["id"], (str, int)):
        raise DataError(path, 0, f"{where}: context, question and id must be text")
    answers = [(x["text"], x["answer_start"]) for x in qa["answers"]]
    if blank and answers == [("", 0)]:  # XTREME's blanked test answer
        return Example(id=str(qa["id"]), lang=lang, text=qa["question"], pair=context, group=str(title))
    if not answers:
        raise DataError(path, 0, f"{where}: no answer (SQuAD v1.1 questions have one or more)")
    for text, start in answers:
        if not isinstance(text, str) or not text:
            raise DataError(path, 0, f"{where}: an answer's text is empty (XTREME blanks the answers of its test files; "
                                     "scores need the gold answers)")
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise DataError(path, 0, f"{where}: answer_start {start!r} is not a character position (an integer from 0)")
        if context[start:start + len(text)] != text:
            raise DataError(path, 0, f"{where}: answer {text!r} is not at character {start} "
                                     f"of the context (found {context[start:start + len(text)]!r})")
    return Example(id=str(qa["id"]), lang=lang, text=qa["question"], pair=context, answers=answers, group=str(title))


def read_xtreme_pairs(path, lang, labels):
    """XTREME's XNLI and PAWS-X files, {train,dev,test}-<lang>.tsv: text, second text, label (test
    files: none), csv-quoted, no header; parallel across languages by row, so the id is the row's
    number."""
    out = []
    for i, (n, r) in enumerate(read_tsv(path, ("text", "pair", "label"), header=False, quoted=True, optional=1), start=1):
        label = r.get("label")
        out.append(Example(id=str(i), lang=lang, text=r["text"], pair=r["pair"], label=label and check_label(path, n, label, labels),
                           where=f"{path}:{n}"))
    return out


def read_xtreme_translations(path, lang, labels, sources):
    """XTREME's translate-train files, translate-train/en-<lang>-translated.tsv, as they came from
    the translation system: not csv-quoted, and noisy (bad rows are skipped and counted). A row is
    English text, English second text, their translations and the label, and is paired with the
    source example of the same English texts; a row of three columns (text, second text, label)
    is the translation of the source example of its row number."""
    rows = read_lines(path)
    wide = bool(rows) and Counter(line.count("\t") for _, line in rows[:1000]).most_common(1)[0][0] == 4  # most rows' columns
    columns = ("en_text", "en_pair", "text", "pair", "label") if wide else ("text", "pair", "label")
    key = lambda text, pair: (" ".join(text.split()), " ".join(pair.split()))
    by_text = {key(e.text, e.pair): e.id for e in sources}
    out, unpaired = [], 0
    for i, (n, r) in enumerate(read_tsv(path, columns, header=False, noisy=True), start=1):
        id = by_text.get(key(r["en_text"], r["en_pair"])) if wide else str(i)
        if id is None:
            unpaired += 1
            continue
        label = "contradiction" if r["label"] == "contradictory" else r["label"]  # XNLI's translations say "contradictory"
        out.append(Example(id=id, lang=lang, text=r["text"], pair=r["pair"], label=check_label(path, n, label, labels), where=f"{path}:{n}"))
    if unpaired:
        print(f"{path}: skipped {unpaired} rows whose English texts are not in the training file", file=sys.stderr)
    if rows and not out:
        raise DataError(path, 0, "no row pairs with an example of the training file (train-en.tsv)")
    return out


def conlleval_tags(tagged, starts):
    """A sentence's BIO tags, [(line, tag)], read as conlleval reads them: an I-x that starts a
    span (after O, after a tag of another type, or first in the sentence) counts as B-x. Each
    such tag is added to `starts` as (line, tag, the tag before it)."""
    out, before = [], "O"
    for line, tag in tagged:
        if tag.startswith("I-") and before[2:] != tag[2:]:
            starts.append((line, tag, before if out else "the sentence's start"))
            tag = "B-" + tag[2:]
        out.append(tag)
        before = tag
    return out


def warn_of_span_starts(path, starts):
    """One line for a file whose BIO tags start spans with I- (conlleval_tags)."""
    if starts and os.environ.get("RANK", "0") == "0":
        line, tag, before = starts[0]
        print(f"warning: {path}:{line}: {tag} follows {before}: read as the start of a span (B-{tag[2:]}), as conlleval reads it; "
              f"{len(starts)} such tag{'s' * (len(starts) > 1)} in the file, on lines {', '.join(str(n) for n, _, _ in starts[:10])}"
              f"{' ...' if len(starts) > 10 else ''}", file=sys.stderr)


def read_panx(path, lang, labels):
    """PAN-X (WikiANN) as XTREME writes it, {train,dev,test}-<lang>.tsv: a token and its BIO tag per
    line (test files: the token alone), a blank line after each sentence; the id is the sentence's number."""
    examples, rows, starts = [], [], []
    for number, line in read_lines(path) + [(None, "")]:
        if line.strip():
            rows.append((number, line.split("\t")))
            continue
        if not rows:
            continue
        if len({len(cells) for _, cells in rows}) > 1 or len(rows[0][1]) > 2:
            raise DataError(path, rows[0][0], "every line of a sentence is a token and its tag, or the token alone (a test file)")
        words = [cells[0] for _, cells in rows]
        tags = [check_label(path, n, cells[1].strip(), labels) for n, cells in rows] if len(rows[0][1]) == 2 else None
        examples.append(Example(id=str(len(examples) + 1), lang=lang, text=" ".join(words), words=words,
                                tags=tags and conlleval_tags(zip([n for n, _ in rows], tags), starts), where=f"{path}:{rows[0][0]}"))
        rows = []
    warn_of_span_starts(path, starts)
    return examples


def conll_sentences(path, columns):
    """The sentences of a CoNLL-style file (comment lines, then one tab-separated row per word, a
    blank line after each sentence) as (first line number, {comment key: value}, [(line number,
    cells)]). A row with other than `columns` cells stops with the file and line, and so does a
    sentence that runs into the next (a comment among its words, or its word numbers starting
    again): the blank line between them is missing."""
    start, meta, rows, last = 0, {}, [], 0
    for number, line in read_lines(path):
        if not line.strip():
            if rows:
                yield start, meta, rows
            start, meta, rows, last = 0, {}, [], 0
            continue
        start = start or number
        if line.startswith("#"):
            if rows:
                raise DataError(path, number, "a comment line among a sentence's words: add the blank line that ends the sentence before it")
            key, _, value = line[1:].partition("=" if "=" in line else ":")  # "# text = ..." or xSID's "# intent: ..."
            meta[key.strip()] = value.strip()
            continue
        cells = line.split("\t")
        if len(cells) != columns:
            raise DataError(path, number, f"{len(cells)} columns, expected {columns}")
        if cells[0].isdigit():
            if int(cells[0]) <= last:
                raise DataError(path, number, f"word {cells[0]} after word {last}: add the blank line that ends the sentence before it")
            last = int(cells[0])
        rows.append((number, cells))
    if rows:
        yield start, meta, rows


def read_xsid(path, lang, intents=None, slots=None):
    """xSID CoNLL: '# id' (targets), '# text', '# text-en' (targets), '# intent' comments, then rows
    of index, word, intent, BIO slot. Targets follow the English file's order, so the id is the
    sentence number ('# id' where given) and '# text-en' is kept to check the pairing. Where
    `intents` and `slots` are given, every label must be one of them."""
    examples, starts = [], []
    for start, meta, rows in conll_sentences(path, 4):
        if "intent" not in meta:
            raise DataError(path, start, "sentence without a '# intent' line")
        if intents is not None:
            check_label(path, start, meta["intent"], intents)
        for number, cells in rows:
            if not cells[3].startswith(("B-", "I-")) and cells[3] != "O":
                raise DataError(path, number, f"slot label {cells[3]!r} is not O, B-... or I-...")
            if slots is not None:
                check_label(path, number, cells[3], slots)
        words, tags = [c[1] for _, c in rows], conlleval_tags([(n, c[3]) for n, c in rows], starts)
        examples.append(Example(id=meta.get("id", str(len(examples) + 1)), lang=lang, text=meta.get("text", " ".join(words)),
                                label=meta["intent"], words=words, tags=tags, source_text=meta.get("text-en"), where=f"{path}:{start}"))
    warn_of_span_starts(path, starts)
    return examples


# xSID 0.7's 16 intents and 35 slot types (the SNIPS and Facebook task-oriented parsing sets it joins).
XSID_INTENTS = ("AddToPlaylist", "BookRestaurant", "PlayMusic", "RateBook", "SearchCreativeWork", "SearchScreeningEvent",
                "alarm/cancel_alarm", "alarm/modify_alarm", "alarm/set_alarm", "alarm/show_alarms", "alarm/snooze_alarm",
                "alarm/time_left_on_alarm", "reminder/cancel_reminder", "reminder/set_reminder", "reminder/show_reminders",
                "weather/find")
XSID_SLOT_TYPES = ("album", "artist", "best_rating", "condition_description", "condition_temperature", "cuisine", "datetime",
                   "entity_name", "facility", "genre", "location", "movie_name", "movie_type", "music_item", "object_location_type",
                   "object_name", "object_part_of_series_type", "object_select", "object_type", "party_size_description",
                   "party_size_number", "playlist", "rating_unit", "rating_value", "recurring_datetime", "reference",
                   "reference-part", "reminder/todo", "restaurant_name", "restaurant_type", "served_dish", "service", "sort",
                   "track", "weather/attribute")
XSID_SLOTS = ("O",) + tuple(f"{prefix}-{kind}" for kind in XSID_SLOT_TYPES for prefix in "BI")


def match_source_text(sources, targets, path):
    """Give each xSID translation the id of its English sentence: its own '# id' where the English
    sentence of that id is its '# text-en' and no sentence before it kept that id, else (Lithuanian's
    ids are shuffled, and one is used twice) the first English sentence with that text not already
    taken. Returns the targets with corrected ids."""
    by_id = {e.id: e for e in sources}
    by_text = {}
    for e in sources:
        by_text.setdefault(e.text, []).append(e.id)
    taken, own = set(), []
    for t in targets:  # a sentence keeps its '# id' where it names its English sentence, the first time only (Lithuanian repeats one)
        own.append(t.id in by_id and by_id[t.id].text == t.source_text and t.id not in taken)
        taken.update([t.id] if own[-1] else [])
    out = []
    for t, keeps in zip(targets, own):
        if not keeps:
            free = [i for i in by_text.get(t.source_text, []) if i not in taken]
            if not free:
                raise DataError(path, int(t.where.rpartition(":")[2]) if t.where else 0, f"sentence '# id = {t.id}': its '# text-en' "
                                f"{t.source_text!r} is no English sentence left unpaired")
            taken.add(free[0])
            t = replace(t, id=free[0])
        out.append(t)
    return out


UPOS_LABELS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
               "SCONJ", "SYM", "VERB", "X")


def read_conllu(path, lang):
    """CoNLL-U (Universal Dependencies): one Example per sentence, its words and their UPOS tags.
    The words are the syntactic words, the units that are tagged (German "zur" is read as "zu
    dem"): multi-word token ranges ("5-6") and empty nodes ("7.1") are skipped. The id is the
    sentence's `# parallel_id` without its corpus prefix ("pud/n01001011" -> "n01001011"), or its
    `# sent_id` where there is none (PUD Russian), so that translations of a sentence share an id."""
    examples, ids = [], []
    for start, meta, rows in conll_sentences(path, 10):
        words, tags = [], []
        for number, cells in rows:
            if "-" in cells[0] or "." in cells[0]:
                continue
            if not cells[0].isdigit():
                raise DataError(path, number, f"word index {cells[0]!r} is not a number, a range or a decimal")
            if cells[3] not in UPOS_LABELS:
                raise DataError(path, number, f"UPOS tag {cells[3]!r} is not one of {', '.join(UPOS_LABELS)}")
            words.append(cells[1])
            tags.append(cells[3])
        id = meta.get("parallel_id", "").rpartition("/")[2] or meta.get("sent_id")
        if not id:
            raise DataError(path, start, "sentence without '# sent_id' or '# parallel_id'")
        if not words:
            raise DataError(path, start, "sentence without words")
        examples.append(Example(id=id, lang=lang, text=meta.get("text", " ".join(words)), words=words, tags=tags,
                                source_text=meta.get("english_text"), where=f"{path}:{start}"))
        ids.append((start, id))
    unique_ids(path, ids, "sentence id")
    return examples


def read_parallel_lines(source_path, target_path, source_lang, target_lang):
    """Line-aligned parallel files (line i of each translates the other), such as Tatoeba's
    tatoeba.<xxx>-eng.{xxx,eng}: two lists of Examples whose ids are line numbers."""
    sides = []
    for path, lang in ((source_path, source_lang), (target_path, target_lang)):
        lines = read_lines(path)
        empty = [n for n, line in lines if not line.strip()]
        if empty:
            raise DataError(path, empty[0], "empty line in a line-aligned parallel file")
        if not lines:
            raise DataError(path, 0, "empty file")
        sides.append([Example(id=str(n), lang=lang, text=line.strip()) for n, line in lines])
    if len(sides[0]) != len(sides[1]):
        raise DataError(target_path, 0, f"{len(sides[1])} lines against {len(sides[0])} in {source_path}: not line-aligned")
    return sides


def read_tatoeba(directory, lang):
    """Tatoeba test pairs for a three-letter language code: (English examples, target examples)."""
    d = Path(directory)
    return read_parallel_lines(d / f"tatoeba.{lang}-eng.eng", d / f"tatoeba.{lang}-eng.{lang}", "eng", lang)


def read_jsonl_examples(path, labels):
    """Extra labelled examples, one JSON object per line with id, lang, text and label (co-training's
    pseudo-labels are written this way). An empty file has no examples."""
    out = []
    for number, line in read_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            example = Example(id=str(row["id"]), lang=row["lang"], text=row["text"], label=row["label"], where=f"{path}:{number}")
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise DataError(path, number, f"not an object with id, lang, text and label ({e})") from None
        if not isinstance(example.text, str) or not example.text.strip():
            raise DataError(path, number, "empty text: give every example its text")
        if not isinstance(example.lang, str) or not example.lang.strip():
            raise DataError(path, number, "empty lang: give every example its language code")
        check_label(path, number, example.label, labels)
        out.append(example)
    unique_ids(path, [(int(e.where.rpartition(":")[2]), (e.lang, e.id)) for e in out], "(lang, id)")
    return out


def read_translations(spec, lang, source, examples):
    """The test `examples` of `lang`, each as its translation into the `source` language, from
    --test-translations: a path with {lang} in it, or a folder of <lang>.tsv files. XTREME's
    translate-test files (test-<lang>-en-translated.tsv: text, second text, label, line i for the
    test file's i-th example) are read by line; any other file as id TAB text (TAB second text)."""
    path = Path(spec.replace("{lang}", lang)) if "{lang}" in spec else Path(spec) / f"{lang}.tsv"
    lines = read_lines(path)
    if path.name.startswith("test-") and path.name.endswith("-translated.tsv"):
        if len(lines) != len(examples):
            raise DataError(path, 0, f"{len(lines)} lines for the {len(examples)} test examples of {lang}: XTREME's translate-test "
                                     "files are line-aligned with the test file")
        rows = {e.id: (n, line.split("\t")) for e, (n, line) in zip(examples, lines)}
    else:
        rows = {line.split("\t", 1)[0]: (n, line.split("\t")[1:]) for n, line in lines if line.strip()}
    missing = [e.id for e in examples if e.id not in rows]
    if missing:
        raise DataError(path, 0, f"no translation of {len(missing)} test examples of {lang}, first ids {missing[:5]} "
                                 "(lines are id TAB text, or XTREME's test-<lang>-en-translated.tsv)")
    out = []
    for e in examples:
        n, cells = rows[e.id]
        if not cells or not cells[0].strip() or (e.pair is not None and (len(cells) < 2 or not cells[1].strip())):
            raise DataError(path, n, f"the translation of {e.id} lacks its text{' or its second text' if e.pair is not None else ''}")
        text, pair = cells[0].strip(), cells[1].strip() if e.pair is not None else None
        out.append(Example(id=e.id, lang=source, text=text, pair=pair, words=text.split() if e.words is not None else None))
    return out


def pair_by_id(sources, targets, path, strict=False):
    """{id: (source, [its translations])}: a target language's training examples (read from
    `path`) paired with the source's by id. A translation labelled otherwise than its source is
    refused, naming both lines. Translations without a source and sources without a translation
    are said once per file, with their count and first ids; they are refused where `strict` is
    set, or where most of the file's examples have no source."""
    by_id = {e.id: (e, []) for e in sources}
    orphans = []
    for t in targets:
        if t.id not in by_id:
            orphans.append(t.id)
            continue
        source = by_id[t.id][0]
        if source.label is not None and t.label is not None and source.label != t.label:
            raise InputError(f"{t.where or path}: the translation of {t.id!r} is labelled {t.label!r}, and its source "
                             f"({source.where or source.lang}) {source.label!r}: a translation keeps its source's label")
        by_id[t.id][1].append(t)
    if not targets:  # the layout has no translations into this language (PAN-X), or the file none at all
        return by_id
    untranslated = [id for id, (_, translations) in by_id.items() if not translations]
    problems = ([f"{len(orphans)} of its {len(targets)} examples have no source example of the same id (first: "
                 f"{', '.join(map(repr, orphans[:5]))}): they are left out"] if orphans else []) + \
               ([f"{len(untranslated)} of the {len(sources)} source examples have no translation in it (first: "
                 f"{', '.join(map(repr, untranslated[:5]))})"] if untranslated else [])
    if problems and (strict or len(orphans) > len(targets) / 2):
        raise InputError(f"{path} does not pair with the source's training examples by id: {'; '.join(problems)}"
                         + ("" if strict else "; most of it does not pair, so it is refused") + ": check that it is this task's translation")
    if problems and path not in WARNED:
        WARNED.add(path)
        if os.environ.get("RANK", "0") == "0":
            print(f"warning: {path}: {'; '.join(problems)} (--strict-data refuses this)", file=sys.stderr)
    return by_id


WARNED = set()  # the files pair_by_id has warned of, once per process


class TrainSplit(Mapping):
    """A task's training examples, {lang: [Example]}, read from the files when a language is first
    asked for: evaluation never reads them, and neither does a run whose token cache holds them
    (token_cache.py). A language is checked as it is read, as `check_split` checks the other
    splits, and a target's examples against the source's (`pair_by_id`)."""

    def __init__(self, name, layout, source, langs, strict=False):
        self.name, self.layout, self.source, self.langs, self.strict = name, layout, source, list(langs), strict
        self.examples = {}

    @classmethod
    def given(cls, examples):
        """A training split of examples already in memory (a few-shot sample of one, a test's)."""
        split = cls(name=None, layout=None, source=None, langs=examples)
        split.examples = dict(examples)
        return split

    def __contains__(self, lang):
        return lang in self.langs

    def __getitem__(self, lang):
        if lang not in self.examples:
            if lang not in self.langs:
                raise KeyError(lang)
            self.examples[lang] = self.read(lang)
        return self.examples[lang]

    def __iter__(self):
        return iter(self.langs)

    def __len__(self):
        return len(self.langs)

    def read(self, lang):
        """A language's examples, checked, without keeping them (the token cache builds an entry from them)."""
        examples = self.layout.read(lang, "train")
        check_split(self.name, "train", lang, examples, self.source, self.layout.split_file(lang, "train"))
        if lang != self.source:
            paired = pair_by_id(self[self.source], examples, self.layout.split_file(lang, "train"), self.strict)
            examples = [e for e in examples if e.id in paired]  # a translation without a source is not trained on
        return examples

    def file(self, lang):
        """The file a language's training examples are read from, for messages (None for a split given in memory)."""
        return self.layout.split_file(lang, "train") if self.layout is not None else None

    def release(self):
        """Let go of the examples read so far (the token cache holds them now); they are read again if asked for."""
        if self.layout is not None:
            self.examples.clear()
            self.layout.parsed.clear()

    def files(self, lang):
        """The files whose bytes decide a language's training examples: its own, and for a target
        the source's, which its examples are checked against; None where the layout does not name
        them (then only reading the examples tells what they are)."""
        own = self.layout and self.layout.train_files(lang)
        if own is None:
            return None
        files = own + ([] if lang == self.source else self.layout.train_files(self.source))
        return files if all(f.is_file() for f in files) else None

    def reader(self):
        """What turns the files into examples, for the token cache's key: the layout's name, the
        source language, and whether translations that do not pair are refused (--strict-data)."""
        return [type(self.layout).__name__, self.source] + (["strict"] if self.strict else [])


@dataclass
class Task:
    """Labels, a source language, target languages, and per-split examples by language."""
    name: str
    labels: list
    source: str
    targets: list
    train: TrainSplit  # {lang: [Example]}, read when asked for; target languages hold the translations of the source's examples
    dev: dict
    test: dict
    level: str = "sentence"  # or "word": a label per word (BIO slots, POS); or "span": extractive QA (levels.LEVELS)
    round_trip: dict = field(default_factory=dict)  # {id: Example}: round-trip translations of source training examples
    intents: list | None = None  # a joint task's sentence labels (xSID): the intent, with BIO slots as `labels`
    doc_stride: int = 128  # QA: context tokens shared by consecutive windows
    max_answer_length: int = 30  # QA: the longest answer predicted, in tokens
    parallel: bool = True  # dev and test parallel across languages by id (CKA, retrieval and the oracle need it)
    translations: str = "the target languages' training files"  # where training translations come from, for messages
    test_translations: str | None = None  # the test texts' translations as the data folder has them (--test-translations)

    def __post_init__(self):
        if not isinstance(self.train, TrainSplit):
            self.train = TrainSplit.given(self.train)


SIB200_LANGS = ["eng_Latn", "deu_Latn", "fra_Latn", "spa_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "hin_Deva", "swh_Latn",
                "tha_Thai", "tur_Latn", "urd_Arab", "vie_Latn", "ell_Grek", "bul_Cyrl", "jpn_Jpan", "kor_Hang", "ind_Latn",
                "yor_Latn", "amh_Ethi", "quy_Latn", "wol_Latn"]
XNLI_LANGS = ["en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur"]
PAWSX_LANGS = ["en", "de", "es", "fr", "ja", "ko", "zh"]
UDPOS_LANGS = ["en", "de", "fr", "ru", "zh", "hi"]
XSID_LANGS = ["en", "ar", "da", "de", "id", "it", "ja", "kk", "lt", "nl", "sr", "tr", "zh"]
XQUAD_LANGS = ["en", "ar", "de", "el", "es", "hi", "ro", "ru", "th", "tr", "vi", "zh"]

def xsid_split(id):
    """xSID has no English training file: its English `valid` sentences are split by id (the
    sentence number), 80% to train on and 20% for model selection; the target languages' `valid`
    sentences with the same ids are their translations."""
    return "dev" if zlib.crc32(id.encode()) % 5 == 0 else "train"


def ud_split(id):
    """The split of a UD PUD sentence, from its id alone, so that it is the same in every language
    and no test sentence is seen in any language during training: 70% train, 10% dev, 20% test."""
    bucket = zlib.crc32(id.encode()) % 10
    return "test" if bucket < 2 else "dev" if bucket == 2 else "train"


def xquad_split(title):
    """XQuAD has only a test set: its 48 articles are split by title, the same in every language,
    so that no test paragraph is seen in any language during training. 35 articles (897
    questions) train, 4 (91) are the dev set, 9 (202) the test set."""
    bucket = zlib.crc32(title.encode()) % 10
    return "test" if bucket < 3 else "dev" if bucket == 3 else "train"


def first_existing(directory, names):
    for name in names:
        if (Path(directory) / name).exists():
            return Path(directory) / name
    raise DataError(directory, 0, f"none of {', '.join(names)} found")


class Layout:
    """Where a task's files are and how each language's split is read: `read(lang, split)` gives
    its examples. A task's languages are the ones whose files are in its folder (`found`);
    `langs` lists the released data set's, which are read in that order, the others after them."""
    langs: list
    pattern: str    # a language's files, for messages
    labels: list
    source: str = "en"
    level: str = "sentence"
    intents: list | None = None
    needs_data = True
    parallel = True        # whether dev and test are parallel across languages, by example id (CKA, retrieval, the oracle)
    translations = "the target languages' training files"  # where translations of the training set come from, for messages

    @classmethod
    def for_folder(cls, directory):
        """The layout of a data folder: this one, or a variant for how the folder is written (XTREME's)."""
        return cls

    def __init__(self, directory, source):
        self.directory, self.source = Path(directory) if directory else None, source
        self.parsed = {}  # files that several splits or languages read, read once

    def languages(self):
        """The languages of the data folder, in the order of `langs`, then the others by name."""
        found = self.found()
        return [lang for lang in self.langs if lang in found] + sorted(found - set(self.langs))

    def found(self):
        """The language codes whose files are in the data folder."""
        return set(self.langs)

    def split_file(self, lang, split):
        """The file a language's split is read from, for messages: `pattern` with the language and,
        where it offers the split by name ({train,dev,test}), the split."""
        name = re.sub(r"\{([^}]*)\}", lambda m: split if split in m.group(1).split(",") else m.group(0), self.pattern)
        return self.directory / name.replace("<lang>", lang) if self.directory else name

    def files_like(self, pattern):
        """The part that stands for {lang} in the names of the folder's files of `pattern` ('x.{lang}.json')."""
        head, _, tail = pattern.partition("{lang}")
        names = (p.relative_to(self.directory).as_posix() for p in self.directory.glob(pattern.replace("{lang}", "*")))
        return {name[len(head):len(name) - len(tail)] for name in names}

    def once(self, key, read):
        if key not in self.parsed:
            self.parsed[key] = read()
        return self.parsed[key]

    def train_files(self, lang):
        """The files a language's training examples are read from, where the token cache may name
        an entry by their bytes (sentence-level layouts); None: only reading tells."""
        return None

    def round_trip(self):
        """{id: Example}: round-trip translations of the source's training examples, where the task has them."""
        return {}

    def test_translations(self):
        """The test texts' translations into the source language as the data folder has them
        (--test-translations' default): XTREME's translate-test/test-<lang>-en-translated.tsv, as
        XTREME's layout has them and download.py translations adds them to XNLI's; else None."""
        folder = self.directory / "translate-test" if self.directory else None
        return str(folder / "test-{lang}-en-translated.tsv") if folder and any(folder.glob("test-*-en-translated.tsv")) else None


class Demo(Layout):
    """The bundled corpus's intents (demo_corpus.py); no files."""
    langs, labels, needs_data, pattern = demo_corpus.LANGS, demo_corpus.INTENTS, False, "the bundled corpus"

    def read(self, lang, split):
        return self.once(split, lambda: demo_corpus.build(split))[lang]

    def round_trip(self):
        return {e.id: e for e in demo_corpus.build("train", round_trip=True)["en"]} if self.source == "en" else {}


class DemoSlots(Demo):
    """The bundled corpus's BIO slots."""
    labels, level = demo_corpus.SLOT_LABELS, "word"


class Sib200(Layout):
    """<data>/<lang>/{train,dev,test}.tsv."""
    langs, labels, source, pattern = SIB200_LANGS, list(SIB200_LABELS), "eng_Latn", "<lang>/{train,dev,test}.tsv"

    def found(self):
        return {p.name for p in self.directory.iterdir() if (p / "test.tsv").is_file()}

    def read(self, lang, split):
        return read_sib200(self.directory, lang, split)

    def train_files(self, lang):
        return [self.directory / lang / "train.tsv"]


class Xnli(Layout):
    """<data>/XNLI-1.0/xnli.{dev,test}.tsv and <data>/XNLI-MT-1.0/multinli/multinli.train.<lang>.tsv,
    as released; a folder with train-en.tsv is XTREME's (XtremePairs)."""
    langs, labels, pattern = XNLI_LANGS, list(XNLI_LABELS), "XNLI-MT-1.0/multinli/multinli.train.<lang>.tsv"

    @classmethod
    def for_folder(cls, directory):
        return XtremeXnli if directory and (Path(directory) / "train-en.tsv").is_file() else cls

    def found(self):
        return self.files_like("XNLI-MT-1.0/multinli/multinli.train.{lang}.tsv")

    def read(self, lang, split):
        if split == "train":
            return read_xnli_mt(self.train_files(lang)[0], lang)
        return read_xnli(self.directory / "XNLI-1.0" / f"xnli.{split}.tsv", lang)

    def train_files(self, lang):
        return [self.directory / "XNLI-MT-1.0" / "multinli" / f"multinli.train.{lang}.tsv"]

    def split_file(self, lang, split):
        return self.train_files(lang)[0] if split == "train" else self.directory / "XNLI-1.0" / f"xnli.{split}.tsv"


class Pawsx(Layout):
    """<data>/<lang>/{train|translated_train,dev|dev_2k,test|test_2k}.tsv, as released; a folder
    with train-en.tsv is XTREME's (XtremePairs)."""
    langs, labels, pattern = PAWSX_LANGS, ["0", "1"], "<lang>/{train,translated_train,dev,test}.tsv"

    @classmethod
    def for_folder(cls, directory):
        return XtremePawsx if directory and (Path(directory) / "train-en.tsv").is_file() else cls

    def found(self):
        return {p.name for p in self.directory.iterdir() if (p / "test.tsv").is_file() or (p / "test_2k.tsv").is_file()}

    def read(self, lang, split):
        return read_pawsx(first_existing(self.directory / lang, self.names(lang, split)), lang)

    def names(self, lang, split):
        return {"train": ["train.tsv"] if lang == self.source else ["translated_train.tsv"],
                "dev": ["dev.tsv", "dev_2k.tsv"], "test": ["test.tsv", "test_2k.tsv"]}[split]

    def split_file(self, lang, split):
        paths = [self.directory / lang / name for name in self.names(lang, split)]
        return next((path for path in paths if path.is_file()), paths[0])

    def train_files(self, lang):
        return [self.directory / lang / ("train.tsv" if lang == self.source else "translated_train.tsv")]


class Udpos(Layout):
    """UD PUD's <data>/<lang>_pud-ud-test.conllu, split by sentence id (`ud_split`)."""
    langs, labels, level, pattern = UDPOS_LANGS, list(UPOS_LABELS), "word", "<lang>_pud-ud-test.conllu"

    def found(self):
        return self.files_like("{lang}_pud-ud-test.conllu")

    def read(self, lang, split):
        examples = read_conllu(self.directory / f"{lang}_pud-ud-test.conllu", lang)
        return [e for e in examples if ud_split(e.id) == split]


class Xquad(Layout):
    """<data>/xquad.<lang>.json, split by article (`xquad_split`); a folder whose answers XTREME
    has blanked is a test set only, with SQuAD to train on (XtremeXquad)."""
    langs, labels, level, pattern = XQUAD_LANGS, ["start", "end"], "span", "xquad.<lang>.json"

    @classmethod
    def for_folder(cls, directory):
        english = Path(directory or ".") / "xquad.en.json"
        return XtremeXquad if english.is_file() and squad_blanked(english) else cls

    def found(self):
        return self.files_like("xquad.{lang}.json")

    def read(self, lang, split):
        examples = self.once(lang, lambda: read_squad(self.directory / f"xquad.{lang}.json", lang))
        return [e for e in examples if xquad_split(e.group) == split]


class Xsid(Layout):
    """<data>/<lang>.{valid,test}.conll: train and dev from `valid` (`xsid_split`), test from
    `test`; every language is paired with English through its '# text-en' lines."""
    langs, labels, level, intents, pattern = XSID_LANGS, list(XSID_SLOTS), "word", list(XSID_INTENTS), "<lang>.{valid,test}.conll"

    def found(self):
        return self.files_like("{lang}.valid.conll") & self.files_like("{lang}.test.conll")

    def file(self, lang, name):
        def read():
            path = self.directory / f"{lang}.{name}.conll"
            examples = read_xsid(path, lang, self.intents, self.labels)
            examples = examples if lang == "en" else match_source_text(self.file("en", name), examples, path)
            unique_ids(path, [(int(e.where.rpartition(":")[2]), e.id) for e in examples], "sentence id")  # as paired
            return examples
        return self.once((lang, name), read)

    def split_file(self, lang, split):
        return self.directory / f"{lang}.{'test' if split == 'test' else 'valid'}.conll"

    def read(self, lang, split):
        examples = self.file(lang, "test" if split == "test" else "valid")
        return examples if split == "test" else [e for e in examples if xsid_split(e.id) == split]


class XtremePairs(Layout):
    """XNLI and PAWS-X as XTREME writes them: <data>/{train-en,dev-<lang>,test-<lang>}.tsv, the
    translations of train-en in translate-train/en-<lang>-translated.tsv and those of the test
    files into English in translate-test/test-<lang>-en-translated.tsv."""
    pattern = "{dev,test}-<lang>.tsv"
    translations = "translate-train/en-<lang>-translated.tsv"

    def found(self):
        return self.files_like("test-{lang}.tsv")

    def read(self, lang, split):
        if split == "train" and lang != self.source:
            path = self.train_files(lang)[0]
            return read_xtreme_translations(path, lang, self.labels, self.read(self.source, "train")) if path.is_file() else []
        path = self.train_files(lang)[0] if split == "train" else self.directory / f"{split}-{lang}.tsv"
        return self.once((lang, split), lambda: read_xtreme_pairs(path, lang, self.labels))

    def train_files(self, lang):
        return [self.directory / (f"train-{lang}.tsv" if lang == self.source else f"translate-train/en-{lang}-translated.tsv")]

    def split_file(self, lang, split):
        return self.train_files(lang)[0] if split == "train" else self.directory / f"{split}-{lang}.tsv"


class XtremeXnli(XtremePairs, Xnli):
    """XNLI in XTREME's layout."""


class XtremePawsx(XtremePairs, Pawsx):
    """PAWS-X in XTREME's layout."""


PANX_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
PANX_LANGS = ("en af ar bg bn de el es et eu fa fi fr he hi hu id it ja jv ka kk ko ml mr ms my nl pt ru sw ta te th tl tr ur vi "
              "yo zh").split()


class Panx(Layout):
    """PAN-X (WikiANN) as XTREME writes it: <data>/{train,dev,test}-<lang>.tsv. The target
    languages' own training files are not translations, and zero-shot transfer does not train on
    them, so the targets have no training examples; XTREME has no translations of PAN-X."""
    langs, labels, level, pattern = PANX_LANGS, list(PANX_LABELS), "word", "{train,dev,test}-<lang>.tsv"
    parallel, translations = False, "none: XTREME has no translations of PAN-X"

    def found(self):
        return self.files_like("test-{lang}.tsv")

    def read(self, lang, split):
        if split == "train" and lang != self.source:
            return []
        return read_panx(self.directory / f"{split}-{lang}.tsv", lang, self.labels)


class SquadTrained(Layout):
    """A QA test set that trains on SQuAD v1.1 in the sibling folder squad/ (<data>/../squad/
    train-v1.1.json, as XTREME's download writes it), with its translations where XTREME's
    translate-train files are there (squad/translate-train/squad.translate.train.en-<lang>.json)."""
    labels, level, name = ["start", "end"], "span", "a QA test set"
    translations = "../squad/translate-train/squad.translate.train.en-<lang>.json"

    def squad(self, name):
        path = self.directory.parent / "squad" / name
        if not path.is_file():
            raise DataError(path, 0, f"not found: {self.name} trains on SQuAD v1.1, which XTREME's download "
                                     f"puts in squad/ beside {self.directory.name}/")
        return path

    def split_file(self, lang, split):
        if split == "train":
            return self.directory.parent / "squad" / ("train-v1.1.json" if lang == self.source else
                                                      f"translate-train/squad.translate.train.en-{lang}.json")
        return super().split_file(lang, split)

    def train(self, lang):
        if lang == self.source:
            return self.once("squad", lambda: read_squad(self.squad("train-v1.1.json"), lang))
        path = self.directory.parent / "squad" / "translate-train" / f"squad.translate.train.en-{lang}.json"
        return read_squad(path, lang, noisy=True) if path.is_file() else []


class XtremeXquad(SquadTrained, Xquad):
    """XQuAD as XTREME writes it, its answers blanked: <data>/xquad.<lang>.json is the test set;
    English SQuAD v1.1 trains (train-v1.1.json) and selects (dev-v1.1.json)."""
    name = "xquad"

    def split_file(self, lang, split):
        return self.directory.parent / "squad" / "dev-v1.1.json" if split == "dev" else super().split_file(lang, split)

    def read(self, lang, split):
        if split == "train":
            return self.train(lang)
        if split == "dev":
            return read_squad(self.squad("dev-v1.1.json"), lang) if lang == self.source else []
        return read_squad(self.directory / f"xquad.{lang}.json", lang, blank=True)


MLQA_LANGS = ["en", "ar", "de", "es", "hi", "vi", "zh"]


class Mlqa(SquadTrained):
    """MLQA as XTREME writes it: <data>/MLQA_V1/{dev,test}/{dev,test}-context-<lang>-question-<lang>.json
    (the question in the context's language; the test answers blanked), trained on SQuAD v1.1."""
    langs, pattern, name = MLQA_LANGS, "MLQA_V1/{dev,test}/{dev,test}-context-<lang>-question-<lang>.json", "mlqa"

    def found(self):
        names = (p.name.split("-") for p in (self.directory / "MLQA_V1" / "test").glob("test-context-*-question-*.json"))
        return {parts[2] for parts in names if len(parts) == 5 and parts[2] == parts[4][:-len(".json")]}

    def read(self, lang, split):
        if split == "train":
            return self.train(lang)
        path = self.directory / "MLQA_V1" / split / f"{split}-context-{lang}-question-{lang}.json"
        return read_squad(path, lang, blank=split == "test")


TYDIQA_LANGS = ["en", "ar", "bn", "fi", "id", "ko", "ru", "sw", "te"]


def tydiqa_split(question, context):
    """TyDiQA-GoldP has no English dev set beside its test (XTREME tests on the released dev
    files): its English training questions are split by a hash of the question and its context,
    90% to train on and 10% to select. Not by id: XTREME's utils_preprocess.py keeps only the last
    part of each training question's id (english-5967113449718591924-1 becomes 1), so on its files
    almost every id is 0 or 1."""
    return "dev" if zlib.crc32(f"{question}\n{context}".encode()) % 10 == 0 else "train"


def numbered_questions(examples):
    """The English training questions of TyDiQA-GoldP, the one training file read with repeated
    ids (see tydiqa_split), since XTREME writes it so: where ids repeat, each is prefixed with
    the question's place in the file, so that the dev questions drawn from it are predicted and
    scored by unique ids. Translations pair with them by id only where the ids were unique."""
    ids = [e.id for e in examples]
    return examples if len(set(ids)) == len(ids) else [replace(e, id=f"{n}-{e.id}") for n, e in enumerate(examples)]


class Tydiqa(Layout):
    """TyDiQA-GoldP as XTREME writes it: English trains from tydiqa-goldp-v1.1-train/
    tydiqa.goldp.en.train.json (split by `tydiqa_split`), each language tests on
    tydiqa-goldp-v1.1-dev/tydiqa.goldp.<lang>.dev.json (answers blanked). The other languages'
    training files are not translations and are not used; XTREME's translations of the English
    training set are, where they are in translate-train/tydiqa.translate.train.en-<lang>.json."""
    langs, labels, level, pattern = TYDIQA_LANGS, ["start", "end"], "span", "tydiqa-goldp-v1.1-dev/tydiqa.goldp.<lang>.dev.json"
    parallel, translations = False, "translate-train/tydiqa.translate.train.en-<lang>.json"

    def found(self):
        return self.files_like("tydiqa-goldp-v1.1-dev/tydiqa.goldp.{lang}.dev.json")

    def split_file(self, lang, split):
        if split == "test":
            return self.directory / "tydiqa-goldp-v1.1-dev" / f"tydiqa.goldp.{lang}.dev.json"
        if lang != self.source:
            return self.directory / "translate-train" / f"tydiqa.translate.train.en-{lang}.json"
        return self.directory / "tydiqa-goldp-v1.1-train" / f"tydiqa.goldp.{lang}.train.json"

    def read(self, lang, split):
        if split == "test":
            return read_squad(self.directory / "tydiqa-goldp-v1.1-dev" / f"tydiqa.goldp.{lang}.dev.json", lang, blank=True)
        if lang != self.source:
            path = self.directory / "translate-train" / f"tydiqa.translate.train.en-{lang}.json"
            return read_squad(path, lang, noisy=True) if split == "train" and path.is_file() else []
        path = self.directory / "tydiqa-goldp-v1.1-train" / f"tydiqa.goldp.{lang}.train.json"
        questions = self.once("train", lambda: numbered_questions(read_squad(path, lang, unique=False)))
        return [e for e in questions if tydiqa_split(e.text, e.pair) == split]


def squad_blanked(path):
    """Whether a SQuAD file is one that XTREME's script blanked: every answer {"answer_start": 0,
    "text": ""}, every question an article of its own, without a title."""
    try:
        articles = json.loads(read_text(path))["data"]
        questions = [qa for article in articles for p in article["paragraphs"] for qa in p["qas"]]
        return (bool(questions) and not any("title" in article for article in articles)
                and all(qa["answers"] == [{"answer_start": 0, "text": ""}] for qa in questions))
    except (json.JSONDecodeError, KeyError, IndexError, TypeError):
        return False  # read_squad says what is wrong with it


LAYOUTS = {"demo": Demo, "demo-slots": DemoSlots, "sib200": Sib200, "xnli": Xnli, "pawsx": Pawsx, "udpos": Udpos,
           "xsid": Xsid, "xquad": Xquad, "panx": Panx, "mlqa": Mlqa, "tydiqa": Tydiqa}



def load_task(name, data_dir=None, source=None, targets=None, strict=False):
    """The task's examples, read as its Layout says (the task names are LAYOUTS'). The source
    needs labelled train, dev and test examples; a target needs test examples, and has training
    examples where the task has translations. Test files without labels (XTREME's) are read
    for predictions, and are not scored. Dev and test are read and checked here; the training
    files when a language's examples are first asked for (TrainSplit), and with `strict` a
    translation file that does not pair with the source's is refused, not only warned of."""
    if name not in LAYOUTS:
        raise InputError(f"unknown task {name!r}: choose {', '.join(LAYOUTS)}")
    layout = LAYOUTS[name].for_folder(data_dir)(data_dir, source or LAYOUTS[name].source)
    if layout.needs_data and not data_dir:
        raise InputError(f"task {name} needs --data DIR (see tasks.LAYOUTS for the layout)")
    if layout.needs_data and not layout.directory.is_dir():
        raise InputError(f"--data {data_dir}: no such folder")
    langs, source = layout.languages(), layout.source
    targets = [t for t in (targets or langs) if t != source]
    unknown = [l for l in [source, *targets] if l not in langs]
    if unknown:
        where = f" in {data_dir} (a language's files: {layout.pattern})" if layout.needs_data else ""
        raise InputError(f"task {name} has no language(s) {', '.join(unknown)}{where}; it has {', '.join(langs) or 'none'}")
    evaluation = {split: {lang: layout.read(lang, split) for lang in [source, *targets]} for split in ("dev", "test")}
    for split, by_lang in evaluation.items():
        for lang, examples in by_lang.items():
            check_split(name, split, lang, examples, source, layout.split_file(lang, split))
    return Task(name, list(layout.labels), source, targets, TrainSplit(name, layout, source, [source, *targets], strict), **evaluation,
                level=layout.level, round_trip=layout.round_trip(), intents=layout.intents, parallel=layout.parallel,
                translations=layout.translations, test_translations=layout.test_translations())


def check_split(name, split, lang, examples, source, file):
    """Refuse what would be scored as nothing: an empty split of the source, or a target without
    test examples (a score of no examples would be a silent 0); training and dev examples
    without labels; a split of a language that is partly labelled. `file`: where the split is read."""
    where = f"(read from {file})"
    if not examples and (lang == source or split == "test"):
        raise InputError(f"task {name}: no {split} examples in {lang} {where}; check the file, or leave the language out "
                         "of --source-lang/--target-langs")
    unlabelled = sum(not e.labelled for e in examples)
    if unlabelled and (split != "test" or unlabelled < len(examples)):
        first = next(e.id for e in examples if not e.labelled)
        raise InputError(f"task {name}: {unlabelled} of the {len(examples)} {split} examples in {lang} have no label, "
                         f"first {first!r} {where}; " + ("only test files may be unlabelled (XTREME's are)" if split != "test"
                                                         else "a test file is labelled throughout or not at all"))


def few_shot(task, fraction=1.0, translated=None, seed=0):
    """Yu & Joty's few-shot settings: a sample of the source's training examples (`fraction`, drawn
    per label so that every label keeps at least one; the paper's 1.2% is 0.012), of which only
    `translated` keep their translations (the paper's 200). Dev and test are untouched."""
    rng = random.Random(f"{seed}/few-shot")
    by_label = {}
    for e in task.train[task.source]:
        by_label.setdefault(e.label, []).append(e)
    kept = sorted((e for examples in by_label.values() for e in rng.sample(examples, max(1, math.ceil(fraction * len(examples))))),
                  key=lambda e: e.id)
    ids = [e.id for e in kept]
    with_translation = set(ids if translated is None else rng.sample(ids, min(translated, len(ids))))
    train = {task.source: kept}
    train.update({lang: [e for e in task.train[lang] if e.id in with_translation] for lang in task.targets})
    return replace(task, train=train, round_trip={i: e for i, e in task.round_trip.items() if i in with_translation})
