"""The formats data sets come in: UTF-8 text, TSV (plain or csv-quoted), CoNLL-style sentences, XTREME's
word-tagging files, SQuAD v1.1 JSON, JSON lines, parallel lines. Each stops at a bad row (DataError)."""
import codecs
import csv
import json
import os
import re
import sys
from pathlib import Path

from data import Example
from minxlt.errors import DataError, warn


def read_text(path):
    """The text of a UTF-8 file, without a byte-order mark; one that is not UTF-8 stops at its first bad byte's line."""
    raw = a_file(path).read_bytes().removeprefix(codecs.BOM_UTF8)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(path, raw[:e.start].count(b"\n") + 1,
                        f"not UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start}): save the file as UTF-8") from None


def read_lines(path):
    """The lines of a UTF-8 text file, with any line ending (\\n, \\r\\n, \\r), numbered from 1."""
    lines = read_text(path).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return list(enumerate(lines[:-1] if lines[-1] == "" else lines, start=1))  # split gives one line at least


def each_tsv(path, columns, header=True, noisy=False, quoted=False, optional=0, blank=()):
    """Rows of a tab-separated file as (line number, {column: value}), as read (`quoted`: csv-quoted, as SIB-200's
    and XTREME's are); a bad row stops, or in `noisy` files is skipped and counted (their 'NS' rows too)."""
    csv.field_size_limit(2 ** 31 - 1)  # a long text is a text, not an error (the csv module's default: 128 KB)
    skipped = kept = untranslated = 0
    with open_text(path) as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL if quoted else csv.QUOTE_NONE)
        for row in utf8(path, reader):
            number, values = reader.line_num, [v.strip() for v in row]
            if header and number == 1:
                if values[:len(columns)] != list(columns):
                    raise DataError(path, 1, f"header {row!r} does not start with the expected columns {list(columns)}")
                continue
            problem = None
            if not len(columns) - optional <= len(row) <= len(columns):
                problem = f"{len(row)} columns, expected {len(columns)} ({', '.join(columns)})"
            elif any((not v and c not in blank) or (noisy and v == "NS") for c, v in zip(columns, values)):
                problem = f"empty field in {row!r}"
            if problem:
                if noisy:
                    skipped += 1
                    continue
                raise DataError(path, number, problem)
            kept += 1
            untranslated += "NS" in values
            yield number, dict(zip(columns, values))
    if skipped:
        warn(f"{path}: skipped {skipped} malformed or untranslated rows of {skipped + kept}")
    if untranslated:
        warn(f"{path}: {untranslated} of {kept} rows have a sentence 'NS' (PAWS-X's mark of a sentence left "
             "untranslated), read as text and scored, as XTREME's pawsx_preprocess keeps them")


def open_text(path):
    """A UTF-8 file opened to be read a line at a time, without a byte-order mark, lines keeping their endings."""
    return open(a_file(path), encoding="utf-8-sig", newline="")


def a_file(path):
    """`path` as a Path, refused where it is not a file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, 0, "not a file" if path.exists() else "file not found")
    return path


def utf8(path, lines):
    """`lines` (read from `path`), stopped at the line of the file's first byte that is not UTF-8."""
    try:
        yield from lines
    except UnicodeDecodeError:
        read_text(path)  # names the line
        raise


class UniqueIds:
    """unique_ids for rows checked one at a time: `check(line, id)`."""

    def __init__(self, path, what="id"):
        self.path, self.what, self.first = path, what, {}

    def check(self, line, id):
        if id in self.first:
            raise DataError(self.path, line, f"{self.what} {id!r} is used twice in the file, on lines {self.first[id]} "
                                             f"and {line}: give each example its own (translations are paired and "
                                             "predictions keyed by it)")
        self.first[id] = line


def unique_ids(path, rows, what="id"):
    """Refuse an id used twice in one file (pairs and predictions are keyed by it). `rows`: (line, id)."""
    unique = UniqueIds(path, what)
    for line, id in rows:
        unique.check(line, id)


def check_label(path, line, label, labels):
    if label not in labels:
        raise DataError(path, line, f"unknown label {label!r} (expected one of {', '.join(sorted(labels))})")
    return label


def squad_articles(path):
    """The articles of a SQuAD v1.1 JSON file ({"data": [...], "version": ...}); another file stops with its path."""
    try:
        articles = json.loads(read_text(path))["data"]
        if not isinstance(articles, list):
            raise TypeError(f"'data' is a {type(articles).__name__}")
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise DataError(path, 0, f"not SQuAD v1.1 JSON, an object with a 'data' list of articles ({e!r})") from None
    for a, article in enumerate(articles):
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs", []), list):
            raise DataError(path, 0, f"article {a} (data[{a}]) is not an object with a 'paragraphs' list")
    return articles


def read_squad(path, lang, blank=False, noisy=False, unique=True):
    """SQuAD v1.1 JSON: an Example a question (pair: its context; answers: [(text, start)]; group: the title);
    `blank`: XTREME's blanked answers read as none; `noisy`: misplaced answers skipped; `unique`: ids checked."""
    examples, skipped, seen = [], 0, {}
    for a, article in enumerate(squad_articles(path)):
        for p, paragraph in enumerate(article.get("paragraphs", [])):
            where = f"article {a} ({article.get('title')!r}), paragraph {p}"
            try:
                context = paragraph["context"]
                for q, qa in enumerate(paragraph["qas"]):
                    here = f"{where}, question {qa.get('id', q)}"
                    if unique and qa.get("id") in seen:
                        raise DataError(path, 0, f"question id {qa['id']!r} is used twice, in {seen[qa['id']]} and in "
                                                 f"{here} (data[{a}].paragraphs[{p}].qas[{q}]): predictions are keyed "
                                                 "by it; give each question its own id")
                    seen.setdefault(qa.get("id"), here)
                    try:
                        examples.append(squad_question(path, here, qa, context, lang,
                                                       article.get("title", f"article {a}"), blank))
                    except DataError:
                        if not noisy:
                            raise
                        skipped += 1
            except (KeyError, TypeError, AttributeError) as e:
                raise DataError(path, 0, f"{where} (data[{a}].paragraphs[{p}]): missing or malformed field {e} "
                                         "(expected context, qas with id, question and answers of text and "
                                         "answer_start)") from None
    if skipped:
        print(f"{path}: skipped {skipped} questions of {skipped + len(examples)} whose answer is not in their context",
              file=sys.stderr)
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
            raise DataError(path, 0, f"{where}: an answer's text is empty (XTREME blanks the answers of its test "
                                     "files; scores need the gold answers)")
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise DataError(path, 0, f"{where}: answer_start {start!r} is not a character position (an integer from 0)")
        if context[start:start + len(text)] != text:
            raise DataError(path, 0, f"{where}: answer {text!r} is not at character {start} "
                                     f"of the context (found {context[start:start + len(text)]!r})")
    return Example(id=str(qa["id"]), lang=lang, text=qa["question"], pair=context, answers=answers, group=str(title))


def squad_texts(path):
    """{question id: (where, [question, context])} of a SQuAD file translating a split's questions (answers unread)."""
    texts = {}
    for a, article in enumerate(squad_articles(path)):
        for p, paragraph in enumerate(article.get("paragraphs", [])):
            where = f"article {a}, paragraph {p} (data[{a}].paragraphs[{p}])"
            try:
                context, questions = paragraph["context"], list(enumerate(paragraph["qas"]))
                for q, qa in questions:
                    here, question_id = f"{where}, question {q}", str(qa["id"])
                    if not (isinstance(context, str) and context.strip() and isinstance(qa["question"], str)
                            and qa["question"].strip()):
                        raise DataError(path, 0, f"{here}: the translation of {question_id!r} lacks its question "
                                                 "or its context")
                    if question_id in texts:
                        raise DataError(path, 0, f"question id {question_id!r} is used twice, in "
                                                 f"{texts[question_id][0]} and in {here}: a translation is paired "
                                                 "with its question by id")
                    texts[question_id] = (here, [qa["question"].strip(), context])
            except (KeyError, TypeError, AttributeError) as e:
                raise DataError(path, 0, f"{where}: missing or malformed field {e} (expected context, and qas with "
                                         "id and question)") from None
    return texts


def squad_blanked(path):
    """Whether XTREME's script blanked a SQuAD file: every answer {"answer_start": 0, "text": ""}, no titles."""
    try:
        articles = json.loads(read_text(path))["data"]
        questions = [qa for article in articles for p in article["paragraphs"] for qa in p["qas"]]
        return (bool(questions) and not any("title" in article for article in articles)
                and all(qa["answers"] == [{"answer_start": 0, "text": ""}] for qa in questions))
    except (json.JSONDecodeError, KeyError, IndexError, TypeError):
        return False  # read_squad says what is wrong with it


def conlleval_tags(tagged, starts):
    """A sentence's BIO tags, [(line, tag)], as conlleval reads them: an I-x starting a span is B-x (in `starts`)."""
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
        print(f"warning: {path}:{line}: {tag} follows {before}: read as the start of a span (B-{tag[2:]}), as "
              f"conlleval reads it; {len(starts)} such tag{'s' * (len(starts) > 1)} in the file, on lines "
              f"{', '.join(str(n) for n, _, _ in starts[:10])}{' ...' if len(starts) > 10 else ''}", file=sys.stderr)


COMMENT = re.compile(r"#\s*([\w.-]+)\s*[=:]\s*(.*)")  # a comment's key and value, the value free to hold = and :


def read_tagged_words(path, lang, labels, bio=False):
    """XTREME's word-tagging files (PAN-X, UD-POS): a word TAB its tag a line (test: may be untagged); id: number."""
    examples, rows, starts = [], [], []
    for number, line in read_lines(path) + [(None, "")]:
        if line.strip():
            rows.append((number, line.split("\t")))
            continue
        if not rows:
            continue
        first = len(rows[0][1])
        bad = next(((n, len(cells)) for n, cells in rows if len(cells) > 2 or len(cells) != first), None)
        if bad:
            against = "" if bad[1] > 2 else f", the sentence's first line {first}"
            raise DataError(path, bad[0], f"{bad[1]} tab-separated fields{against}: a line is a word and its tag, "
                                          "or (a test file) the word alone, the same throughout a sentence")
        words = [cells[0] for _, cells in rows]
        tags = [(n, check_label(path, n, cells[1].strip(), labels)) for n, cells in rows] if first == 2 else None
        tags = tags and (conlleval_tags(tags, starts) if bio else [tag for _, tag in tags])
        examples.append(Example(id=str(len(examples) + 1), lang=lang, text=" ".join(words), words=words, tags=tags,
                                where=f"{path}:{rows[0][0]}"))
        rows = []
    warn_of_span_starts(path, starts)
    return examples


def conll_sentences(path, columns):
    """A CoNLL-style file's sentences as (first line, {comment key: value}, [(line, cells)])."""
    start, meta, rows, last = 0, {}, [], 0
    for number, line in read_lines(path) + [(None, "")]:  # a blank line after the last sentence ends it
        if not line.strip():
            if rows:
                yield start, meta, rows
            start, meta, rows, last = 0, {}, [], 0
            continue
        start = start or number
        if line.startswith("#"):
            if rows:
                raise DataError(path, number, "a comment line among a sentence's words: add the blank line that ends "
                                              "the sentence before it")
            named = COMMENT.match(line)  # "# text = ...", xSID's and MTOD's "# intent: ...": the first = or : after it
            key, _, value = ((named.group(1), "", named.group(2)) if named
                             else line[1:].partition("=" if "=" in line else ":"))
            meta[key.strip()] = value.strip()
            continue
        cells = line.split("\t")
        if len(cells) != columns:
            raise DataError(path, number, f"{len(cells)} columns, expected {columns}")
        if cells[0].isdigit():
            if int(cells[0]) <= last:
                raise DataError(path, number, f"word {cells[0]} after word {last}: add the blank line that ends the "
                                              "sentence before it")
            last = int(cells[0])
        rows.append((number, cells))


def read_parallel_lines(source_path, target_path, source_lang, target_lang):
    """Line-aligned parallel files (Tatoeba's tatoeba.<xxx>-eng.{xxx,eng}): two lists of Examples, ids line numbers."""
    sides = []
    for path, lang in ((source_path, source_lang), (target_path, target_lang)):
        lines = read_lines(path)
        empty = [n for n, line in lines if not line.strip()]
        if empty:
            raise DataError(path, empty[0], "empty line in a line-aligned parallel file")
        if not lines:
            raise DataError(path, 0, "empty file")
        sides.append([Example(id=str(n), lang=lang, text=line.strip(), where=f"{path}:{n}") for n, line in lines])
    if len(sides[0]) != len(sides[1]):
        raise DataError(target_path, 0, f"{len(sides[1])} lines against {len(sides[0])} in {source_path}: "
                                        "not line-aligned")
    return sides


def read_tatoeba(directory, lang):
    """Tatoeba test pairs for a three-letter language code: (English examples, target examples)."""
    d = Path(directory)
    return read_parallel_lines(d / f"tatoeba.{lang}-eng.eng", d / f"tatoeba.{lang}-eng.{lang}", "eng", lang)


def read_jsonl_examples(path, labels, pairs=False):
    """Labelled examples, a JSON object a line with id, lang, text and label (as co-training writes pseudo-labels);
    `pairs`: a sentence-pair task's, each with its second text as "pair"."""
    out = []
    for number, line in read_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            example = Example(id=str(row["id"]), lang=row["lang"], text=row["text"], pair=row.get("pair"),
                              label=row["label"], where=f"{path}:{number}")
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            raise DataError(path, number, f"not an object with id, lang, text and label ({e})") from None
        if not isinstance(example.text, str) or not example.text.strip():
            raise DataError(path, number, "empty text: give every example its text")
        if pairs and not (isinstance(example.pair, str) and example.pair.strip()):
            raise DataError(path, number, 'no "pair": the task\'s examples are sentence pairs; give each its second '
                                          "text")
        if not pairs and example.pair is not None:
            raise DataError(path, number, 'a "pair", but the task\'s examples are single texts')
        if not isinstance(example.lang, str) or not example.lang.strip():
            raise DataError(path, number, "empty lang: give every example its language code")
        check_label(path, number, example.label, labels)
        out.append(example)
    unique_ids(path, [(int(e.where.rpartition(":")[2]), (e.lang, e.id)) for e in out], "(lang, id)")
    return out


def read_extra_train(path, task):
    """--extra-train's examples: JSON lines, or for spans a SQuAD file's (FILTER's TyDiQA-GoldP, its Table 2)."""
    if task.level != "span":
        pairs = any(e.pair is not None for split in (task.dev, task.test) for e in split.get(task.source, ()))
        return read_jsonl_examples(path, task.labels, pairs)
    extra = read_squad(path, task.source)
    own = {e.id for e in task.train[task.source]}
    clash = next((e for e in extra if e.id in own), None)
    if clash is not None:
        raise DataError(path, 0, f"question id {clash.id!r} ({clash.where}) is also one of the task's own training "
                                 "questions: --extra-train adds other questions, under ids of their own")
    return extra


def first_existing(directory, names):
    for name in names:
        if (Path(directory) / name).exists():
            return Path(directory) / name
    raise DataError(directory, 0, f"none of {', '.join(names)} found")
