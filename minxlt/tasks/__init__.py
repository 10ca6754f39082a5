"""Tasks: each benchmark's module holds its constants, reader and layout (a data.Layout); `load_task` reads a
task by its name (LAYOUTS) into a Task of examples per split and language (readers.py: the formats)."""
from pathlib import Path

from data import Task, TrainSplit, check_split
from minxlt.errors import DataError, InputError
from minxlt.tasks import demo
from minxlt.tasks.filter_tags import xtreme_segments
from minxlt.tasks.marc import Marc, MarcStars
from minxlt.tasks.mlqa import Mlqa
from minxlt.tasks.mtod import Mtod
from minxlt.tasks.mtop import Mtop, mtop_tags, read_mtop
from minxlt.tasks.multiatis import MultiAtis
from minxlt.tasks.panx import PANX_LABELS, PANX_LANGS, Panx
from minxlt.tasks.pawsx import PAWSX_LANGS, Pawsx, each_pawsx
from minxlt.tasks.readers import (read_extra_train, read_jsonl_examples, read_lines, read_parallel_lines, read_squad,
                                  read_tatoeba, read_text)
from minxlt.tasks.sib200 import SIB200_LABELS, Sib200, each_sib200
from minxlt.tasks.translated import read_translations, translation_file
from minxlt.tasks.tydiqa import Tydiqa, tydiqa_split
from minxlt.tasks.udpos import (UDPOS_LANGS, UPOS_LABELS, XTREME_UDPOS_LANGS, ConverterStops, Udpos, read_conllu,
                                xtreme_sentences)
from minxlt.tasks.xnli import XNLI_LABELS, XNLI_LANGS, Xnli, each_xnli_mt, read_xnli
from minxlt.tasks.xquad import XQUAD_LANGS, Xquad, XquadSquad, xquad_split
from minxlt.tasks.xsid import XSID_INTENTS, XSID_LANGS, XSID_SLOTS, Xsid, match_source_text, read_xsid

__all__ = [  # what other modules read of tasks (the layouts are read through LAYOUTS)
    'DataError', 'InputError', 'demo', 'PANX_LABELS', 'PANX_LANGS', 'PAWSX_LANGS', 'each_pawsx', 'read_extra_train',
    'read_jsonl_examples', 'read_lines', 'read_parallel_lines', 'read_squad', 'read_tatoeba', 'read_text',
    'read_translations', 'translation_file', 'SIB200_LABELS', 'each_sib200', 'tydiqa_split', 'UDPOS_LANGS',
    'UPOS_LABELS', 'XTREME_UDPOS_LANGS', 'ConverterStops',
    'read_conllu', 'xtreme_sentences', 'XNLI_LABELS', 'XNLI_LANGS', 'read_xnli', 'each_xnli_mt', 'XQUAD_LANGS',
    'xquad_split', 'XSID_INTENTS', 'XSID_LANGS', 'XSID_SLOTS', 'match_source_text', 'read_xsid', 'LAYOUTS',
    'mtop_tags', 'read_mtop', 'xtreme_segments', 'made_by', 'check_labels', 'check_folder', 'load_task']

LAYOUTS = {"demo": demo.Demo, "demo-slots": demo.DemoSlots, "sib200": Sib200, "xnli": Xnli, "pawsx": Pawsx,
           "udpos": Udpos, "xsid": Xsid, "xquad": Xquad, "xquad-squad": XquadSquad, "panx": Panx, "mlqa": Mlqa,
           "tydiqa": Tydiqa, "mtop": Mtop, "multiatis": MultiAtis, "mtod": Mtod, "marc": Marc, "marc-stars": MarcStars}

# download.py's arguments that make a task's data folder ({to}), where it fetches one; for the rest, docs/data.md
DOWNLOADS = {"sib200": "sib200 --to {to}", "xnli": "xnli --to {to}", "pawsx": "pawsx --to {to}",
             "udpos": "udpos --to {to} (UD PUD; udpos-xtreme: XTREME's UD-POS)", "xquad": "xquad --to {to}",
             "xquad-squad": "xquad --to {to} and python download.py squad --to {squad}", "panx": "panx --to {to}",
             "mlqa": "mlqa --to {to}", "tydiqa": "tydiqa --to {to}", "mtop": "mtop --to {to}", "mtod": "mtod --to {to}"}


def made_by(name, folder):
    """How a task's data folder is made: the download.py command, or where docs/data.md says to get it."""
    if name not in DOWNLOADS:
        return "docs/data.md says where to get it"
    squad = "DIR/../squad" if folder == "DIR" else Path(folder).parent / "squad"  # beside the data folder
    return f"make it with python download.py {DOWNLOADS[name].format(to=folder, squad=squad)}"


def check_folder(name, data_dir):
    """Refuse a missing data folder of task `name`, naming the command that makes it (and one it would not read)."""
    if data_dir and name in LAYOUTS and not LAYOUTS[name].needs_data:
        raise InputError(f"--data {data_dir}: task {name} reads no data folder (the bundled corpus): drop --data")
    if name not in LAYOUTS or not LAYOUTS[name].needs_data or (data_dir and Path(data_dir).is_dir()):
        return  # an unknown task: load_task names the known ones
    if not data_dir:
        raise InputError(f"task {name} needs --data DIR, its data folder; {made_by(name, 'DIR')}")
    raise InputError(f"--data {data_dir}: no such folder; {made_by(name, data_dir)}")


def check_labels(checkpoint, info, task, advice):
    """Refuse a checkpoint whose head predicts other labels (or intents) than the task's: another task's model."""
    shown = lambda labels: f"[{', '.join(map(str, labels[:12]))}{', ...' if len(labels) > 12 else ''}] ({len(labels)})"
    for name, ours in (("labels", task.labels), ("intents", task.intents)):
        theirs, ours = info.get(name), list(ours or [])
        if theirs is not None and list(theirs) != ours:
            raise InputError(f"{checkpoint}: its head predicts the {name} {shown(list(theirs))} (task.json: task "
                             f"{info.get('task')}), and task {task.name} has {shown(ours)}: {advice}")


def load_task(name, data_dir=None, source=None, targets=None, strict=False, tokenizer=None, soft_labels=None,
              langs_from=None):
    """The task's examples as its Layout reads them (training files when first asked for: TrainSplit); `langs_from`:
    where the languages come from when not from the command line, for messages."""
    if name not in LAYOUTS:
        raise InputError(f"unknown task {name!r}: choose {', '.join(LAYOUTS)}")
    kind = LAYOUTS[name].for_folder(data_dir)
    if soft_labels and not hasattr(kind, "soft_labelled"):
        raise InputError(f"--soft-labels: task {name} has no reader of X-Mixup's soft-labelled translations "
                         "(udpos and panx, XTREME's layout)")
    check_folder(name, data_dir)
    layout = kind(data_dir, source or kind.source)
    layout.tokenizer, layout.soft_labels = tokenizer, soft_labels
    langs, source = layout.languages, layout.source
    targets = [t for t in (targets or langs) if t != source]
    unknown = [l for l in [source, *targets] if l not in langs]
    if unknown:
        where = f" in {data_dir} (a language's files: {layout.pattern})" if layout.needs_data else ""
        chosen = f". The languages are {langs_from}: choose others with --target-langs (and --source-lang)"
        raise InputError(f"task {name} has no language(s) {', '.join(unknown)}{where}; "
                         f"it has {', '.join(langs) or 'none'}" + (chosen if langs_from and langs else ""))
    evaluation = {split: {lang: layout.read(lang, split) for lang in [source, *targets]} for split in ("dev", "test")}
    for split, by_lang in evaluation.items():
        for lang, examples in by_lang.items():
            check_split(name, split, lang, source, layout.split_file(lang, split), len(examples),
                        [e.id for e in examples if not e.labelled])
    return Task(name, list(layout.labels), source, targets,
                TrainSplit(name, layout, source, [source, *targets], strict), **evaluation, level=layout.level,
                round_trip=layout.round_trip(), intents=layout.intents, parallel=layout.parallel,
                translations=layout.translations, test_translations=layout.test_translations,
                pos_metric=layout.pos_metric)
