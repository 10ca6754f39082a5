"""A dev or test split's texts as their machine translations into the source language, which
translate-test, FILTER and X-Mixup read beside each text (--test-translations, --dev-translations),
each file read as its release writes it, told apart by its name:

    test-<lang>-en-translated.tsv      XTREME's translate-test: text, second text, label; line i is
                                       the split's i-th example
    xtreme.msft.<lang>-en.{dev,test}   FILTER's Microsoft Translator files (its download_data.sh): XNLI's
                                       as XTREME's translate-test, by line; PAWS-X's under a header
                                       (id, sentence1, sentence2, label), by id
    xnli.{dev,test}.tsv                X-Mixup's translate-dev of XNLI: XNLI-1.0's layout, every language
                                       in one file, by pairID
    dev_2k.<lang>.tsv                  X-Mixup's translate-dev of PAWS-X: PAWS-X's layout, by id
    {dev,test}-<lang>-en.tsv           FILTER's of UD-POS and PAN-X (word labels): a translated segment a line, line i
                                       the i-th of the segments XTREME's preprocessing cuts the split's sentences
                                       into, counted with the run's tokenizer (filter_tags.py)
    translate-{test,dev}-token/<lang>.txt
                                       X-Mixup's of UD-POS and PAN-X: a word (and a second column) a line, a
                                       blank line after each sentence, sentence i the split's i-th (xmixup_tags.py)
    <task>.translate.test.<lang>-en.json
                                       a QA test set's translation, as FILTER's (TyDiQA-GoldP) and X-Mixup's
                                       (MLQA, XQuAD, TyDiQA-GoldP) code reads it: SQuAD v1.1 JSON, each
                                       question and its context under the id of the question they translate
                                       (any other .json file is read so too)
    any other                          id TAB text (TAB second text)
"""
from pathlib import Path

from data import Example
from minxlt.errors import DataError
from minxlt.tasks.filter_tags import read_test_translations
from minxlt.tasks.pawsx import read_pawsx
from minxlt.tasks.readers import read_lines, squad_texts
from minxlt.tasks.xmixup_tags import is_token_file, read_token_translations
from minxlt.tasks.xnli import read_xnli


def translation_file(spec, lang):
    """The file of `lang`'s translations: `spec` with {lang} filled in, a folder's <lang>.tsv, or `spec` itself (one file of every language)."""
    if "{lang}" in spec:
        return Path(spec.replace("{lang}", lang))
    return Path(spec) / f"{lang}.tsv" if Path(spec).is_dir() else Path(spec)


def read_translations(spec, lang, source, examples, tokenizer=None):
    """The `examples` of `lang`, each as its translation into the `source` language (same id), from
    the file of `spec` (translation_file), read by the layout its name gives (the module's table).
    An example without a translation, or one without its text, stops with the file and line.
    `tokenizer`: the run's, which counts the segments of FILTER's tagging translations."""
    path, name = translation_file(spec, lang), translation_file(spec, lang).name
    if name in (f"dev-{lang}-{source}.tsv", f"test-{lang}-{source}.tsv") and all(e.words is not None for e in examples):
        if tokenizer is None:
            raise DataError(path, 0, "FILTER's translations of a tagging task are aligned with XTREME's segments of the split, "
                                     "which a tokenizer counts: read them with the run's (read_translations(..., tokenizer=))")
        return read_test_translations(path, source, examples, tokenizer)  # a sentence's segments: <id>, <id>#1, ...
    if is_token_file(path, lang) and all(e.words is not None for e in examples):
        return read_token_translations(path, source, examples, tokenizer)  # X-Mixup's: <id> (<id>#1, ... by segment)
    lines = read_lines(path) if not name.endswith(".json") else []
    if name.endswith(".json"):  # a QA test set's translation (FILTER's run_xqa.py:85-117 and X-Mixup's data/tasks/qa.py:488-499 pair by id)
        rows = squad_texts(path)
    elif name.startswith("xnli.") and name.endswith(".tsv"):  # X-Mixup's translate-dev: XNLI-1.0's layout
        rows = {e.id: (e.where.rpartition(":")[2], [e.text, e.pair]) for e in read_xnli(path, lang)}
    elif name.startswith("dev_2k.") or (name.startswith("xtreme.msft.") and lines[:1] and lines[0][1].startswith("id\t")):
        rows = {e.id: (e.where.rpartition(":")[2], [e.text, e.pair]) for e in read_pawsx(path, lang, noisy=False)}  # by id
    elif name.startswith("xtreme.msft.") or (name.startswith("test-") and name.endswith("-translated.tsv")):  # by line
        if len(lines) != len(examples):
            raise DataError(path, 0, f"{len(lines)} lines for the {len(examples)} examples of {lang}: {path.name} is line-aligned "
                                     "with the split it translates")
        rows = {e.id: (n, line.split("\t")) for e, (n, line) in zip(examples, lines)}
    else:
        rows = {line.split("\t", 1)[0]: (n, line.split("\t")[1:]) for n, line in lines if line.strip()}
    missing = [e.id for e in examples if e.id not in rows]
    if missing:
        raise DataError(path, 0, f"no translation of {len(missing)} of the {len(examples)} examples of {lang}, first ids {missing[:5]} "
                                 "(lines are id TAB text, or one of the released layouts named in minxlt/tasks/translated.py; "
                                 "a QA translation's question has the id of the question it translates)")
    out = []
    for e in examples:
        n, cells = rows[e.id]
        if not cells or not cells[0].strip() or (e.pair is not None and (len(cells) < 2 or not cells[1].strip())):
            raise DataError(path, n, f"the translation of {e.id} lacks its text{' or its second text' if e.pair is not None else ''}")
        text, pair = cells[0].strip(), cells[1].strip() if e.pair is not None else None
        out.append(Example(id=e.id, lang=source, text=text, pair=pair, words=text.split() if e.words is not None else None))
    return out
