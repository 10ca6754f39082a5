"""A dev or test split's texts as machine translations into the source language (--test-translations), each file
read as its release writes it, told apart by its name (docs/data.md's table)."""
from pathlib import Path

from data import Example
from minxlt.errors import DataError
from minxlt.tasks.filter_tags import read_test_translations
from minxlt.tasks.pawsx import each_pawsx
from minxlt.tasks.readers import read_lines, squad_texts
from minxlt.tasks.xmixup_tags import DEV, TEST, untagged_sentences
from minxlt.tasks.xnli import read_xnli


def translation_file(spec, lang):
    """The file of `lang`'s translations: `spec` with {lang} filled in, a folder's <lang>.tsv, or `spec` itself."""
    if "{lang}" in spec:
        return Path(spec.replace("{lang}", lang))
    return Path(spec) / f"{lang}.tsv" if Path(spec).is_dir() else Path(spec)


def read_translations(spec, lang, source, examples, tokenizer=None):
    """The `examples` of `lang` as their translations into `source` (same ids), from `spec`'s file, read as its name
    says; a missing translation stops with its file and line. `tokenizer`: counts FILTER's tagging segments."""
    path = translation_file(spec, lang)
    name = path.name
    if name in (f"dev-{lang}-{source}.tsv", f"test-{lang}-{source}.tsv") and all(e.words is not None for e in examples):
        return read_test_translations(path, source, examples, tokenizer)  # a sentence's segments: <id>, <id>#1, ...
    if name == f"{lang}.txt" and path.parent.name in (TEST, DEV) and all(e.words is not None for e in examples):
        what = f"{examples[0].lang if examples else ''}'s split"  # X-Mixup's translate-{test,dev}-token/<lang>.txt
        return untagged_sentences(path, examples, source, what, tokenizer, joined=False)  # <id> (<id>#1, ...: segments)
    lines = read_lines(path) if not name.endswith(".json") else []
    if name.endswith(".json"):  # a QA test set's translation, paired by id as FILTER's and X-Mixup's code pair it
        rows = squad_texts(path)
    elif name.startswith("xnli.") and name.endswith(".tsv"):  # X-Mixup's translate-dev: XNLI-1.0's layout
        rows = {e.id: (e.where.rpartition(":")[2], [e.text, e.pair]) for e in read_xnli(path, lang)}
    elif name.startswith("dev_2k.") or (name.startswith("xtreme.msft.") and lines[:1]
                                        and lines[0][1].startswith("id\t")):  # by id
        rows = {e.id: (e.where.rpartition(":")[2], [e.text, e.pair]) for e in each_pawsx(path, lang, noisy=False)}
    elif name.startswith("xtreme.msft.") or (name.startswith("test-") and name.endswith("-translated.tsv")):  # by line
        if len(lines) != len(examples):
            raise DataError(path, 0, f"{len(lines)} lines for the {len(examples)} examples of {lang}: {name} is "
                                     "line-aligned with the split it translates")
        rows = {e.id: (n, line.split("\t")) for e, (n, line) in zip(examples, lines)}
    else:
        rows = {line.split("\t", 1)[0]: (n, line.split("\t")[1:]) for n, line in lines if line.strip()}
    missing = [e.id for e in examples if e.id not in rows]
    if missing:
        raise DataError(path, 0, f"no translation of {len(missing)} of the {len(examples)} examples of {lang}, first "
                                 f"ids {missing[:5]} (lines are id TAB text, or one of the released layouts named in "
                                 "docs/data.md; a QA translation's question has the id of the question it translates)")
    out = []
    for e in examples:
        n, cells = rows[e.id]
        if not cells or not cells[0].strip() or (e.pair is not None and (len(cells) < 2 or not cells[1].strip())):
            raise DataError(path, n, f"the translation of {e.id} lacks its text"
                                     f"{' or its second text' if e.pair is not None else ''}")
        text, pair = cells[0].strip(), cells[1].strip() if e.pair is not None else None
        out.append(Example(id=e.id, lang=source, text=text, pair=pair,
                           words=text.split() if e.words is not None else None))
    return out
