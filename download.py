"""Fetch a task's data from its official source into the folder that `--task TASK --data DIR` reads,
every file checked against its SHA-256 (docs/data.md: each release, and how it is laid out):

    python download.py sib200 --to data/sib200       # all 205 languages (or --langs eng_Latn,wol_Latn)
    python download.py mlqa --to data/mlqa           # MLQA_V1, and SQuAD v1.1 in data/squad to train on
    python download.py udpos-xtreme --to data/udpos  # XTREME's UD-POS (--task udpos), made from UD v2.5 and v2.7
    python download.py panx --to data/panx           # from the hub (pip install pyarrow), or --archive AmazonPhotos.zip
    python download.py translations --to data        # XTREME's (filter-, xeroalign-translations) into data/<task>/

MultiATIS++ (the LDC's, LDC2021T04) and MARC (no longer distributed) are laid out by hand. A file is
checked against checksums.sha256, else against the SHA-256 its first download recorded in
DIR/SHA256SUMS, and renamed into place once right; a second run fetches only what is missing (an
archive, once unpacked, leaves DIR/.download/<name>.done). --mirror URL fetches the same paths
from another server (URL/<host>/<path>).
"""
import argparse
import collections
import hashlib
import http.client
import io
import json
import re
import shutil
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from minxlt import tasks
from minxlt.errors import InputError
from minxlt.run import cli

PINNED = Path(__file__).with_name("checksums.sha256")
Source = collections.namedtuple("Source", "url path")  # a file of a data set: its official URL, its path under --to

# Where each data set is released. A task's languages are whatever the release holds: listed by
# GitHub's API where the release is a folder of per-language files, else the archive's.
SIB200 = "https://raw.githubusercontent.com/dadelani/sib-200/main/data/annotated"
XQUAD = "https://raw.githubusercontent.com/google-deepmind/xquad/master"
SQUAD = "https://rajpurkar.github.io/SQuAD-explorer/dataset"
TATOEBA = "https://raw.githubusercontent.com/facebookresearch/LASER/main/data/tatoeba/v1"
UD_PUD = {"ar": "Arabic", "cs": "Czech", "de": "German", "en": "English", "es": "Spanish", "fi": "Finnish",
          "fr": "French", "hi": "Hindi", "id": "Indonesian", "is": "Icelandic", "it": "Italian", "ja": "Japanese",
          "ko": "Korean", "pl": "Polish", "pt": "Portuguese", "ru": "Russian", "sv": "Swedish", "th": "Thai",
          "tr": "Turkish", "zh": "Chinese"}
TYDIQA = "https://storage.googleapis.com/tydiqa/v1.1"
TRANSLATIONS = "https://storage.googleapis.com/xtreme_translations"
SQUAD_TRANSLATIONS = ["ar", "de", "el", "es", "hi", "ru", "th", "tr", "vi", "zh"]
TYDIQA_TRANSLATIONS = ["ar", "bn", "fi", "id", "ko", "ru", "sw", "te"]
XNLI_TRANSLATIONS = [lang for lang in tasks.XNLI_LANGS if lang != "en"]
FILTER_TRANSLATIONS = "https://convaisharables.blob.core.windows.net/filter/data/translations"  # its download_data.sh
# The members of FILTER's <task>.zip that are its translations, by the names its scripts read (docs/data.md):
# each pattern's named group is the file's language.
MSFT = (re.compile(r"xtreme\.msft\.(?P<lang>[a-z_]+)-en\.(dev|test)"),
        "xtreme.msft.<lang>-en.dev or .test file (which its run_xcls.py reads)")
TAGGING = (re.compile(r"train-en-(?P<train>[a-z_]+)\.tsv|(dev|test)-(?P<split>[a-z_]+)-en\.tsv"),
           "train-en-<lang>.tsv, dev-<lang>-en.tsv or test-<lang>-en.tsv file (which its run_xtag.py reads)")
FILTER_MEMBERS = {"xnli": MSFT, "pawsx": MSFT, "udpos": TAGGING, "panx": TAGGING,
                  "tydiqa": (re.compile(r"tydiqa\.translate\.test\.(?P<lang>[a-z]+)-en\.json"),
                             "tydiqa.translate.test.<lang>-en.json file (which its run_xqa.py reads)")}
MTOP = "https://dl.fbaipublicfiles.com/mtop/mtop.zip"  # fb.me/mtop_dataset
# fb.me/multilingual_task_oriented_data
MTOD = "https://download.pytorch.org/data/multilingual_task_oriented_dialog_slotfilling.zip"
XEROALIGN_DATA = "https://raw.githubusercontent.com/milangritta/Datasets/HEAD"  # named by XeroAlign's README
TOP_FOLDERS = {"pawsx": "x-final", "mtop": "mtop", "mtod": "multilingual_task_oriented_dialog_slotfilling"}  # lifted
XEROALIGN_TRANSLATIONS = {"mtod": "mtod", "m_atis": "multiatis"}  # their archive's folder -> this repository's task
LINDAT = "https://lindat.mff.cuni.cz/repository/xmlui/bitstream/handle/11234"
UD_XTREME = {  # XTREME's download_data.sh (download_treebank): XTREME's languages from UD v2.5, XTREME-R's from v2.7
    "2.5": (f"{LINDAT}/1-3105/ud-treebanks-v2.5.tgz", "af ar bg de el en es et eu fa fi fr he hi hu id it ja kk ko "
            "mr nl pt ru ta te th tl tr ur vi yo zh".split()),
    "2.7": (f"{LINDAT}/1-3424/ud-treebanks-v2.7.tgz", "lt pl uk wo ro".split())}
# PAN-X on the Hugging Face hub (google/xtreme, config PAN-X.<lang>) at a fixed revision:
# PAN-X.<lang>/{train,validation,test}-00000-of-00001.parquet, of columns tokens, ner_tags (ids) and langs
HUB_XTREME = "https://huggingface.co/datasets/google/xtreme/resolve/b6419ab883183e08a85be8eef7cc71562f946684"
TYDIQA_LANGS = {"arabic": "ar", "bengali": "bn", "english": "en", "finnish": "fi", "indonesian": "id", "korean": "ko",
                "russian": "ru", "swahili": "sw", "telugu": "te"}
FAIR = "https://dl.fbaipublicfiles.com"
ARCHIVES = {"xnli": [f"{FAIR}/XNLI/XNLI-1.0.zip", f"{FAIR}/XNLI/XNLI-MT-1.0.zip"],
            "pawsx": ["https://storage.googleapis.com/paws/pawsx/x-final.tar.gz"],
            "mlqa": [f"{FAIR}/MLQA/MLQA_V1.zip"], "mtop": [MTOP], "mtod": [MTOD],
            "tydiqa": [f"{TYDIQA}/tydiqa-goldp-v1.1-train.json", f"{TYDIQA}/tydiqa-goldp-v1.1-dev.tgz"]}
SPLITS = ("train", "dev", "test")
TASKS = ("sib200", "xnli", "pawsx", "udpos", "udpos-xtreme", "xquad", "squad", "mlqa", "tydiqa", "tatoeba", "panx",
         "mtop", "mtod", "translations", "filter-translations", "xeroalign-translations")
ARCHIVE_ERRORS = (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error)  # zipfile's, tarfile's, gzip's "damaged"


def known(langs, available, lacks):
    """`langs`, or all that `available` has; a language it lacks stops, naming what it has."""
    unknown = sorted(set(langs or ()) - set(available))
    if unknown:
        raise InputError(f"--langs: {lacks} {', '.join(unknown)}; it has {', '.join(available)}")
    return langs or available


def sources(task, langs, fetch):
    """[Source] of a task's release; `fetch(url)` reads a listing where the languages are listed."""
    listed = lambda repo, folder: json.loads(fetch(f"https://api.github.com/repos/{repo}/contents/{folder}?ref=main"))
    if task == "sib200":
        langs = langs or sorted(e["name"] for e in listed("dadelani/sib-200", "data/annotated") if e["type"] == "dir")
        return [Source(f"{SIB200}/{lang}/{split}.tsv", f"{lang}/{split}.tsv") for lang in langs for split in SPLITS]
    if task == "xquad":
        return [Source(f"{XQUAD}/xquad.{lang}.json", f"xquad.{lang}.json") for lang in langs or tasks.XQUAD_LANGS]
    if task == "squad":
        return [Source(f"{SQUAD}/{name}", name) for name in ("train-v1.1.json", "dev-v1.1.json")]
    if task == "udpos":
        ud = "https://raw.githubusercontent.com/UniversalDependencies"
        return [Source(f"{ud}/UD_{UD_PUD[lang]}-PUD/master/{lang}_pud-ud-test.conllu", f"{lang}_pud-ud-test.conllu")
                for lang in known(langs, UD_PUD, "UD PUD has no treebank for")]
    if task == "udpos-xtreme":
        chosen = set(known(langs, tasks.XTREME_UDPOS_LANGS, "XTREME's UD-POS has no"))
        return [Source(url, f".download/{url.rsplit('/', 1)[1]}") for url, release in UD_XTREME.values()
                if chosen & set(release)]
    if task == "panx":
        return [Source(f"{HUB_XTREME}/PAN-X.{lang}/{split}-00000-of-00001.parquet",
                       f".download/panx-{lang}-{split}.parquet")
                for lang in known(langs, tasks.PANX_LANGS, "the hub's PAN-X has no")
                for split in ("train", "validation", "test")]
    if task == "tatoeba":
        names = [e["name"] for e in listed("facebookresearch/LASER", "data/tatoeba/v1")] if not langs else []
        langs = langs or sorted({name.split(".")[1].split("-")[0] for name in names if name.startswith("tatoeba.")})
        return [Source(f"{TATOEBA}/tatoeba.{lang}-eng.{side}", f"tatoeba.{lang}-eng.{side}")
                for lang in langs for side in (lang, "eng")]
    if task == "translations":
        return translations(langs)
    if task == "filter-translations":
        return [Source(f"{FILTER_TRANSLATIONS}/{name}.zip", f".download/filter-{name}.zip") for name in FILTER_MEMBERS]
    if task == "xeroalign-translations":
        return [Source(f"{XEROALIGN_DATA}/{name}.zip", f".download/xeroalign-{name}.zip")
                for name in XEROALIGN_TRANSLATIONS]
    return [Source(url, f".download/{url.rsplit('/', 1)[1]}") for url in ARCHIVES[task]]


def translations(langs=None):
    """XTREME's translations of SQuAD's and TyDiQA-GoldP's training sets, and XNLI's test sets into English."""
    released = {"SQuAD": ("squad", "translate-train/squad.translate.train.en-{}.json", SQUAD_TRANSLATIONS),
                "TyDiQA-GoldP": ("tydiqa", "translate-train/tydiqa.translate.train.en-{}.json", TYDIQA_TRANSLATIONS),
                "XNLI": ("xnli", "translate-test/test-{}-en-translated.tsv", XNLI_TRANSLATIONS)}  # line i: test pair i
    out = [Source(f"{TRANSLATIONS}/{release}/{name.format(lang)}", f"{task}/{name.format(lang)}")
           for release, (task, name, available) in released.items()
           for lang in (available if not langs else [lang for lang in langs if lang in available])]
    if not out:
        raise InputError(f"--langs: XTREME has no translations of {', '.join(langs)}: SQuAD's are into "
                         f"{', '.join(SQUAD_TRANSLATIONS)}; TyDiQA's into {', '.join(TYDIQA_TRANSLATIONS)}; "
                         f"XNLI's from {', '.join(XNLI_TRANSLATIONS)}")
    return out


class Downloader:
    """Fetches URLs (through --mirror where given), checking each file against its checksum."""

    def __init__(self, folder, mirror=None):
        self.folder, self.mirror = Path(folder), mirror
        self.pinned = read_sums(PINNED)
        self.recorded_path = self.folder / "SHA256SUMS"
        self.recorded = read_sums(self.recorded_path)

    def open(self, url):
        where = f"{self.mirror.rstrip('/')}/{url.split('://', 1)[1]}" if self.mirror else url
        try:
            return urllib.request.urlopen(urllib.request.Request(where, headers={"User-Agent": "minxlt"}), timeout=60)
        except urllib.error.HTTPError as e:
            raise InputError(f"{where}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            raise InputError(f"{where}: cannot reach it ({getattr(e, 'reason', e)}); check the network "
                             "(offline machines: copy the files, or give --mirror)") from None

    def fetch(self, url):
        """A small file's bytes (a listing), unchecked."""
        with self.open(url) as response:
            return b"".join(chunks(url, response))

    def get(self, source):
        """Download one file to --to/<path>, unless it is there with the right checksum."""
        target = self.folder / source.path
        expected = self.pinned.get(source.url) or self.recorded.get(source.url)
        if target.is_file() and (expected is None or sha256(target) == expected):
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        part, digest = target.with_name(target.name + ".part"), hashlib.sha256()
        try:
            with self.open(source.url) as response, open(part, "wb") as f:
                size = int(response.headers.get("Content-Length") or 0) or None
                with tqdm(total=size, unit="B", unit_scale=True, desc=source.path, leave=False,
                          dynamic_ncols=True) as bar:
                    for chunk in chunks(source.url, response):
                        f.write(chunk)
                        digest.update(chunk)
                        bar.update(len(chunk))
        except InputError:
            part.unlink(missing_ok=True)
            raise
        got = digest.hexdigest()
        if expected and got != expected:
            part.unlink()
            where = "pinned in checksums.sha256" if source.url in self.pinned else f"recorded in {self.recorded_path}"
            raise InputError(f"{source.url}: SHA-256 {got}, expected {expected} ({where}): the download is corrupt or "
                             "the file changed at its source; nothing was written")
        part.replace(target)
        if not expected:
            self.recorded[source.url] = got
            self.write_recorded()
        return target

    def write_recorded(self):
        cli.write_text(self.recorded_path, "".join(f"{h}  {u}\n" for u, h in sorted(self.recorded.items())))

    def discard(self, path, sources):
        """A damaged file, removed with its recorded checksum: the next run downloads it again."""
        path.unlink(missing_ok=True)
        url = next((s.url for s in sources if self.folder / s.path == path), None)
        if self.recorded.pop(url, None):
            self.write_recorded()


def chunks(url, response):
    """A response's bytes, a MiB at a time; a transfer that breaks off, or ends short of its Content-Length, refused."""
    size, got = int(response.headers.get("Content-Length") or 0) or None, 0
    try:
        while chunk := response.read(1 << 20):
            got += len(chunk)
            yield chunk
    except (http.client.HTTPException, OSError) as e:
        raise InputError(f"{url}: the transfer broke off ({e!r}); run the command again") from None
    if size is not None and got != size:
        raise InputError(f"{url}: the connection closed after {got} of {size} bytes; run the command again")


def read_sums(path):
    """{url: sha256} of a checksum file: lines "<sha256>  <url>" (sha256sum's format), # comments."""
    if not Path(path).is_file():
        return {}
    sums = {}
    for number, line in tasks.read_lines(path):
        if line.strip() and not line.startswith("#"):
            digest, _, url = line.partition("  ")
            if len(digest) != 64 or not url:
                raise tasks.DataError(path, number, "expected '<sha256>  <url>'")
            sums[url.strip()] = digest
    return sums


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class DamagedArchive(InputError):
    """An archive that cannot be read whole (cut short, a bad CRC): `what` names it and the member."""

    def __init__(self, archive, member, error):
        self.archive = archive
        said = " ".join(str(error).split()) or type(error).__name__  # tarfile's may take several lines
        self.what = f"{archive}{f', member {member}' if member else ''}: damaged ({said})"
        super().__init__(f"{self.what}: download it again")


@contextmanager
def reading(archive, member=None):
    """Where an archive is read: a damaged one stops as DamagedArchive, a member outside the folder as InputError."""
    try:
        yield
    except tarfile.FilterError as e:
        raise InputError(f"{archive}: {e}; not unpacked") from None
    except ARCHIVE_ERRORS as e:
        raise DamagedArchive(archive, member, e) from None


def unpack(archive, folder):
    """A .zip or .tar.gz unpacked whole or not at all (a damaged one, or a member outside the folder, stops)."""
    folder = Path(folder).resolve()
    tmp = folder / f".unpacking-{archive.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if archive.suffix == ".zip":
            with reading(archive), zipfile.ZipFile(archive) as z:
                for name in z.namelist():
                    if not (folder / name).resolve().is_relative_to(folder):
                        raise InputError(f"{archive}: member {name!r} would be written outside {folder}; not unpacked")
                for name in z.namelist():
                    with reading(archive, name):
                        z.extract(name, tmp)
        else:
            with reading(archive), tarfile.open(archive) as t:
                for member in t:
                    with reading(archive, member.name):
                        t.extract(member, tmp, filter="data")  # refuses links and paths that leave the folder
        for path in sorted(tmp.rglob("*")):
            if path.is_file():
                (folder / path.relative_to(tmp)).parent.mkdir(parents=True, exist_ok=True)
                path.replace(folder / path.relative_to(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def filter_layout(archive, folder, langs=None):
    """FILTER's translations (FILTER_MEMBERS), wherever they are in its <task>.zip, into <task>/filter-translations/."""
    task = archive.name[len("filter-"):-len(".zip")]
    pattern, what = FILTER_MEMBERS[task]
    with reading(archive), zipfile.ZipFile(archive) as z:
        found = {n: match for n in z.namelist() if (match := pattern.fullmatch(Path(n).name))}
        if not found:
            raise InputError(f"{archive}: no {what}, FILTER's translations, among its {len(z.namelist())} members")
        lang = lambda match: next(lang for lang in match.groupdict().values() if lang)  # the pattern's named group
        members = [n for n, match in found.items() if not langs or lang(match) in langs]
        if not members:
            print(f"note: {archive.name} has no translations of {', '.join(langs)}", file=sys.stderr)
        for name in members:
            cli.write_text(folder / task / "filter-translations" / Path(name).name, z.read(name).decode("utf-8"))


def xeroalign_layout(archive, folder, langs=None):
    """XeroAlign's translations, <name>/<lang>/train.tsv in its authors' <name>.zip, into <task>/<lang>/train.tsv."""
    name = archive.name[len("xeroalign-"):-len(".zip")]
    with reading(archive), zipfile.ZipFile(archive) as z:
        members = [n for n in z.namelist() if re.fullmatch(rf"{name}/[a-z]+/train\.tsv", n)
                   and (not langs or n.split("/")[1] in {*langs, "en"})]
        if not members:
            raise InputError(f"{archive}: no {name}/<lang>/train.tsv (XeroAlign's translations) among its "
                             f"{len(z.namelist())} members")
        for member in members:
            text = z.read(member).decode("utf-8")
            cli.write_text(folder / XEROALIGN_TRANSLATIONS[name] / member.split("/", 1)[1], text)


def tydiqa_layout(folder, train, dev):
    """XTREME's TyDiQA-GoldP layout: tydiqa.goldp.<iso>.{train,dev}.json (unlike XTREME's, the dev answers stay)."""
    data = json.loads(tasks.read_text(train))
    by_lang = {}
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                language = qa["id"].split("-")[0]
                by_lang.setdefault(TYDIQA_LANGS.get(language, language), []).append(
                    {"paragraphs": [{"context": paragraph["context"], "qas": [dict(qa, id=qa["id"].split("-")[-1])]}]})
    for iso, articles in by_lang.items():
        text = json.dumps({"data": articles, "version": data.get("version")})
        cli.write_text(folder / "tydiqa-goldp-v1.1-train" / f"tydiqa.goldp.{iso}.train.json", text)
    unpack(dev, folder)
    for language, iso in TYDIQA_LANGS.items():
        released = folder / "tydiqa-goldp-v1.1-dev" / f"tydiqa-goldp-dev-{language}.json"
        if released.is_file():
            released.replace(released.with_name(f"tydiqa.goldp.{iso}.dev.json"))


def panx_layout(archive, folder, langs=None):
    """XTREME's PAN-X layout from WikiANN's AmazonPhotos.zip, as its panx_preprocess writes it; the test tags stay."""
    with reading(archive), zipfile.ZipFile(archive) as z:
        for name in sorted(n for n in z.namelist() if n.endswith(".tar.gz")):
            lang = Path(name).name[:-len(".tar.gz")]
            if langs and lang not in langs:
                continue
            with reading(archive, name), tarfile.open(fileobj=io.BytesIO(z.read(name))) as t:
                for split in SPLITS:
                    member = next((m for m in t.getmembers() if Path(m.name).name == split), None)
                    if member is None:
                        raise InputError(f"{archive}: {name} has no {split} file")
                    lines = io.TextIOWrapper(t.extractfile(member), encoding="utf-8").readlines()
                    cli.write_text(folder / f"{split}-{lang}.tsv", "".join(row + "\n" for row in panx_rows(lines)))


def panx_rows(lines):
    """panx_preprocess's rows of a WikiANN file's "<lang>:<token> TAB <tag>" lines (docs/data.md)."""
    for line in lines[:-1] if lines and not lines[-1].strip() else lines:
        cells = line.strip().split("\t")
        if len(cells) != 2:
            yield ""
        elif ":" in cells[0]:
            yield f"{cells[0].partition(':')[2].strip()}\t{cells[1].strip()}"


def write_tagged(path, sentences):
    """XTREME's word-tagging file of [(words, tags)]: a word TAB its tag per line, a blank line between sentences."""
    text = "\n\n".join("\n".join(f"{w}\t{t}" for w, t in zip(words, tags)) for words, tags in sentences if words)
    cli.write_text(path, text + "\n")


def udpos_xtreme_layout(archives, folder, langs=None):
    """XTREME's UD-POS from UD's releases, as its scripts make it (docs/data.md); the test tags stay."""
    parts = folder / ".udpos-parts"  # <lang>/<file>.tsv: each .conllu file's sentences, joined once all are read
    shutil.rmtree(parts, ignore_errors=True)
    for archive in archives:
        udpos_xtreme_parts(archive, parts, langs)
    for lang_folder in sorted(parts.iterdir()) if parts.is_dir() else []:
        names = sorted(p.name for p in lang_folder.iterdir())
        for split in SPLITS:
            texts = [(lang_folder / name).read_text(encoding="utf-8").rstrip("\n") for name in names
                     if next((s for s in SPLITS if s in name), None) == split]  # the first split its name holds
            if texts:
                cli.write_text(folder / f"{split}-{lang_folder.name}.tsv", "\n\n".join(texts) + "\n")
    shutil.rmtree(parts, ignore_errors=True)


def udpos_xtreme_parts(archive, parts, langs=None):
    """parts/<lang>/<name>.tsv of each <lang>_*.conllu that XTREME takes from a UD release, as XTREME reads it."""
    version = archive.name[len("ud-treebanks-v"):-len(".tgz")]
    chosen = [lang for lang in UD_XTREME[version][1] if not langs or lang in langs]
    with reading(archive), tarfile.open(archive, "r|gz") as t:
        for member in t:
            path = PurePosixPath(member.name)
            lang = path.name.split("_")[0]
            if not (member.isfile() and path.suffix == ".conllu" and len(path.parts) == 3
                    and path.parts[0] == f"ud-treebanks-v{version}" and lang in chosen):
                continue
            where = f"{archive.name}:{member.name}"
            try:
                with reading(archive, member.name):
                    raw = t.extractfile(member).read()
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise tasks.ConverterStops(where, raw[:e.start].count(b"\n") + 1, "not UTF-8") from None
                sentences, stop = tasks.xtreme_sentences(where, text, lang)
            except tasks.ConverterStops as e:
                print(f"warning: {e}: XTREME's converter (conllu_to_conll.py) stops on this file before writing it, "
                      "so XTREME's UD-POS leaves it out, and so does this", file=sys.stderr)
                continue
            if stop:
                print(f"warning: {stop}: XTREME's converter (conllu_to_conll.py) stops writing this file there, "
                      f"so XTREME's UD-POS keeps the sentences before it ({len(sentences)}) and no others, and so "
                      "does this", file=sys.stderr)
            if sentences:
                write_tagged(parts / lang / path.with_suffix(".tsv").name, sentences)


def parquet():
    """pyarrow.parquet, which reads the hub's parquet files: an optional dependency, for download.py panx only."""
    try:
        import pyarrow.parquet
    except ImportError:
        raise InputError("download.py panx reads the Hugging Face hub's parquet files with pyarrow, which is not "
                         "installed: pip install pyarrow (or give WikiANN's AmazonPhotos.zip, saved by hand, with "
                         "--archive)") from None
    return pyarrow.parquet


def read_hub_panx(path):
    """[(tokens, tags)] of a hub PAN-X parquet file, its tags named by its metadata, else by the dataset card."""
    try:
        table = parquet().read_table(path)
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise tasks.DataError(path, 0, f"not a parquet file that pyarrow reads ({e})") from None
    missing = sorted({"tokens", "ner_tags"} - set(table.column_names))
    if missing:
        raise tasks.DataError(path, 0, f"no column {', '.join(missing)} (it has {', '.join(table.column_names)}): "
                                       "not the hub's PAN-X")
    try:  # ner_tags' names as the datasets library records them in the file's metadata, else the dataset card's
        names = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]["ner_tags"]["feature"]["names"]
    except (TypeError, KeyError, ValueError):
        names = None
    if not (names and isinstance(names, list) and all(isinstance(n, str) for n in names)):
        names = tasks.PANX_LABELS
    sentences = []
    for row, (tokens, ids) in enumerate(zip(table.column("tokens").to_pylist(), table.column("ner_tags").to_pylist())):
        if tokens is None or ids is None or len(tokens) != len(ids):
            raise tasks.DataError(path, 0, f"row {row}: {len(tokens or ())} tokens and {len(ids or ())} tags")
        bad = [i for i in ids if not (isinstance(i, int) and 0 <= i < len(names))]
        if bad:
            raise tasks.DataError(path, 0, f"row {row}: tag id {bad[0]!r} is not one of the {len(names)} labels "
                                           f"({', '.join(names)})")
        sentences.append(([(token or "").strip() for token in tokens], [names[i] for i in ids]))
    return sentences


def download(task, folder, langs=None, mirror=None, archive=None):
    """Fetch `task` into `folder` (and SQuAD beside it for MLQA), in the layout its --task reads."""
    folder = Path(folder)
    if task == "panx" and archive:
        return panx_layout(archive, folder, langs)
    if task == "panx":
        parquet()  # said before anything is fetched
    loader = Downloader(folder, mirror)
    pending = [s for s in sources(task, langs, loader.fetch) if not (folder / f"{s.path}.done").exists()]
    files = [loader.get(s) for s in tqdm(pending, desc=task, unit="file", dynamic_ncols=True)]
    archives = [path for path in files if path.parent.name == ".download"]
    try:
        if task == "tydiqa" and archives:  # unpacked into the layout its --task reads
            tydiqa_layout(folder, *archives)
        elif task == "panx":  # .download/panx-<lang>-<split>.parquet -> {train,dev,test}-<lang>.tsv
            for path in archives:
                lang, split = path.name[len("panx-"):-len(".parquet")].rsplit("-", 1)
                write_tagged(folder / f"{'dev' if split == 'validation' else split}-{lang}.tsv", read_hub_panx(path))
        elif task == "udpos-xtreme":
            udpos_xtreme_layout(archives, folder, langs)
        else:
            layout = {"filter-translations": filter_layout, "xeroalign-translations": xeroalign_layout}.get(task)
            for path in archives:
                layout(path, folder, langs) if layout else unpack(path, folder)
    except DamagedArchive as e:
        loader.discard(e.archive, pending)
        raise InputError(f"{e.what}: it is removed, and the same command downloads it again") from None
    top = folder / TOP_FOLDERS.get(task, "")  # an archive's single top folder replaced by what it holds:
    if archives and task in TOP_FOLDERS and top.is_dir():  # x-final/<lang>/ -> <lang>/, mtop/<lang>/ -> <lang>/
        for path in top.iterdir():
            shutil.rmtree(folder / path.name, ignore_errors=True)
            path.replace(folder / path.name)
        top.rmdir()
    kept = task == "udpos-xtreme" and langs  # a UD release read for some languages stays, to be read again for others
    for path in [] if kept else archives:  # unpacked: the archive goes, a marker stays so that it is not fetched again
        path.with_name(path.name + ".done").touch()
        path.unlink()
    if task == "mlqa":  # MLQA trains on SQuAD v1.1, which XTREME's layout keeps in squad/ beside mlqa/
        download("squad", folder.parent / "squad", mirror=mirror)


def get_args(argv=None):
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", choices=TASKS, help="the data set (udpos: UD PUD; udpos-xtreme: XTREME's UD-POS, made "
                        "from the UD v2.5 and v2.7 releases as XTREME's scripts make it; squad: SQuAD v1.1, which MLQA "
                        "and XQuAD train on; translations: XTREME's machine translations of SQuAD and TyDiQA-GoldP's "
                        "training sets and of XNLI's test sets; filter-translations: FILTER's of XNLI's and PAWS-X's "
                        "dev and test sets, of UD-POS's and PAN-X's training, dev and test sets and of TyDiQA-GoldP's "
                        "test sets; xeroalign-translations: XeroAlign's of MTOD's and MultiATIS++'s English training "
                        "utterances)")
    parser.add_argument("--to", required=True, help="the folder to write (give it as --data to train.py)")
    parser.add_argument("--langs", type=cli.languages, help="only these languages (default: all that the release has)")
    parser.add_argument("--mirror", help="fetch from this server instead: URL/<host>/<path> of each official URL")
    parser.add_argument("--archive", type=cli.existing_file, help="panx: WikiANN's AmazonPhotos.zip, saved by hand, "
                        "instead of the Hugging Face hub's parquet files")
    return parser.parse_args(argv)


def main(argv=None):
    args = get_args(argv)
    download(args.task, args.to, args.langs, args.mirror, args.archive)
    name = "udpos" if args.task == "udpos-xtreme" else args.task
    if name not in tasks.LAYOUTS:
        return print(f"{args.task}: written to {args.to}")
    task = tasks.load_task(name, args.to)  # read back as training will, so that a problem shows now
    xquad = (f" (all of it a test set, as XTREME's: --task xquad-squad, with SQuAD v1.1 from python download.py squad "
             f"--to {Path(args.to).parent / 'squad'})")
    print(f"{args.task}: {len(task.targets) + 1} languages in {args.to}; train with --task {name} --data {args.to}"
          + (xquad if args.task == "xquad" else ""))


if __name__ == "__main__":
    cli.run(main)
