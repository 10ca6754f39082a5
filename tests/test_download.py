"""download.py against a local HTTP server that serves the official URLs' paths (--mirror): files
land in the layout their task reads, checked against pinned or recorded SHA-256, and nothing is
half-written when a check or the network fails."""
import functools
import hashlib
import http.server
import io
import json
import random
import sys
import tarfile
import threading
import zipfile

import pytest

import download
from conftest import SHARED_DATA
from minxlt import tasks
from minxlt.errors import InputError
from test_xtreme import conll, xtreme_udpos_preprocess


@pytest.fixture
def mirror(tmp_path):
    """(folder, URL): a server of the folder, where <folder>/<host>/<path> answers URL/<host>/<path>."""
    folder = tmp_path / "mirror"
    folder.mkdir()
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}", requests
    server.shutdown()


def put(folder, url, content):
    """Serve `content` at the mirror's path for an official URL (a query string is not part of the path)."""
    path = folder / url.split("://", 1)[1].split("?")[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


@pytest.mark.skipif(not (SHARED_DATA / "sib200").exists(), reason="needs ../shared/data/sib200 (not in a fresh clone)")
def test_sib200_languages_come_from_the_release_and_checksums_are_pinned(tmp_path, mirror):
    folder, url, requests = mirror
    listing = [{"name": "eng_Latn", "type": "dir"}, {"name": "wol_Latn", "type": "dir"}, {"name": "README.md", "type": "file"}]
    put(folder, "https://api.github.com/repos/dadelani/sib-200/contents/data/annotated?ref=main", json.dumps(listing))
    for lang in ("eng_Latn", "wol_Latn"):
        for split in ("train", "dev", "test"):
            put(folder, f"{download.SIB200}/{lang}/{split}.tsv", (SHARED_DATA / "sib200" / lang / f"{split}.tsv").read_bytes())
    download.main(["sib200", "--to", str(tmp_path / "sib"), "--mirror", url])
    task = tasks.load_task("sib200", tmp_path / "sib")
    assert (task.source, task.targets) == ("eng_Latn", ["wol_Latn"]) and len(task.train["wol_Latn"]) == 701
    assert not (tmp_path / "sib" / "SHA256SUMS").exists()  # every file had a pinned checksum
    fetched = len(requests)
    download.main(["sib200", "--to", str(tmp_path / "sib"), "--mirror", url])
    assert len(requests) == fetched + 1  # the listing only: every file is there with its checksum

    put(folder, f"{download.SIB200}/wol_Latn/test.tsv", "index_id\tcategory\ttext\n1\ttravel\tchanged upstream\n")
    (tmp_path / "sib" / "wol_Latn" / "test.tsv").unlink()
    with pytest.raises(InputError, match=r"wol_Latn/test.tsv: SHA-256 \w+, expected \w+ \(pinned in checksums.sha256\).*nothing was written"):
        download.main(["sib200", "--to", str(tmp_path / "sib"), "--mirror", url, "--langs", "wol_Latn"])
    assert not list((tmp_path / "sib" / "wol_Latn").glob("test.tsv*"))


def test_a_checksum_is_recorded_on_first_download_and_checked_after(tmp_path, mirror):
    folder, url, _ = mirror
    conllu = "# sent_id = n01001011\n# text = Hi.\n1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\tSpaceAfter=No\n2\t.\t.\tPUNCT\t_\t_\t1\tpunct\t_\t_\n\n"
    source = "https://raw.githubusercontent.com/UniversalDependencies/UD_Icelandic-PUD/master/is_pud-ud-test.conllu"
    put(folder, source, conllu)
    download.download("udpos", tmp_path / "ud", ["is"], url)
    recorded = (tmp_path / "ud" / "SHA256SUMS").read_text()
    assert recorded == f"{hashlib.sha256(conllu.encode()).hexdigest()}  {source}\n"
    put(folder, source, conllu.replace("Hi", "Ho"))
    (tmp_path / "ud" / "is_pud-ud-test.conllu").unlink()
    with pytest.raises(InputError, match=r"expected \w+ \(recorded in .*SHA256SUMS\)"):
        download.download("udpos", tmp_path / "ud", ["is"], url)
    with pytest.raises(InputError, match="UD PUD has no treebank for xx"):
        download.download("udpos", tmp_path / "ud", ["xx"], url)


def test_missing_files_and_unreachable_servers_say_so(tmp_path, mirror):
    _, url, _ = mirror
    with pytest.raises(InputError, match=r"/raw.githubusercontent.com/google-deepmind/xquad/master/xquad.en.json: HTTP 404"):
        download.download("xquad", tmp_path / "xq", ["en"], url)
    with pytest.raises(InputError, match="cannot reach it .*check the network"):
        download.download("xquad", tmp_path / "xq", ["en"], "http://127.0.0.1:9")
    assert not (tmp_path / "xq").exists() or not list((tmp_path / "xq").rglob("*.json*"))


@pytest.mark.parametrize("cut", ["short", "chunked"])
def test_a_transfer_the_server_cuts_short_is_refused_and_nothing_is_written_or_recorded(tmp_path, cut):
    """A body shorter than its Content-Length (read(n) returns short, without raising) or a chunked body that stops:
    one line naming the URL, no file and no recorded checksum left behind, so the next run fetches it again."""
    class Cut(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header(*(("Content-Length", "100") if cut == "short" else ("Transfer-Encoding", "chunked")))
            self.end_headers()
            self.wfile.write(b"x" * 40 if cut == "short" else b"28\r\n" + b"x" * 40 + b"\r\n")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Cut)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    message = "the connection closed after 40 of 100 bytes" if cut == "short" else r"the transfer broke off \(IncompleteRead"
    try:
        with pytest.raises(InputError, match=rf"is_pud-ud-test.conllu: {message}.*; run the command again"):
            download.download("udpos", tmp_path / "ud", ["is"], f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(InputError, match=rf"contents/data/annotated\?ref=main: {message}"):  # a listing
            download.download("sib200", tmp_path / "sib", None, f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []


def archive(members, kind="zip"):
    """The bytes of a .zip or .tar.gz of {name: text}."""
    buffer = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buffer, "w") as z:
            for name, text in members.items():
                z.writestr(name, text)
    else:
        with tarfile.open(fileobj=buffer, mode="w:gz") as t:
            for name, text in members.items():
                data = text if isinstance(text, bytes) else text.encode()
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def unpinned(monkeypatch, tmp_path):
    """Synthetic archives stand in for the official ones, whose pinned checksums they cannot have."""
    monkeypatch.setattr(download, "PINNED", tmp_path / "no-pins")


def test_xnli_archives_unpack_into_the_released_layout(tmp_path, mirror, unpinned):
    folder, url, requests = mirror
    header = "language\tgold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tpromptID\tpairID\n"
    rows = "".join(f"{lang}\tneutral\t_\t_\t_\t_\tA {lang} {i}.\tB {lang}.\t1\t{i}\n" for lang in ("en", "de") for i in range(2))
    put(folder, "https://dl.fbaipublicfiles.com/XNLI/XNLI-1.0.zip",
        archive({"XNLI-1.0/xnli.dev.tsv": header + rows, "XNLI-1.0/xnli.test.tsv": header + rows}))
    train = "premise\thypo\tlabel\nA cat.\tAn animal.\tentailment\nA dog.\tNo dog.\tcontradictory\n"
    put(folder, "https://dl.fbaipublicfiles.com/XNLI/XNLI-MT-1.0.zip",
        archive({"XNLI-MT-1.0/multinli/multinli.train.en.tsv": train, "XNLI-MT-1.0/multinli/multinli.train.de.tsv": train}))
    download.main(["xnli", "--to", str(tmp_path / "xnli"), "--mirror", url])
    task = tasks.load_task("xnli", tmp_path / "xnli")
    assert task.targets == ["de"] and [e.label for e in task.train["de"]] == ["entailment", "contradiction"]
    assert sorted(p.name for p in (tmp_path / "xnli" / ".download").iterdir()) == ["XNLI-1.0.zip.done", "XNLI-MT-1.0.zip.done"]
    fetched = len(requests)
    download.main(["xnli", "--to", str(tmp_path / "xnli"), "--mirror", url])
    assert len(requests) == fetched  # unpacked before: nothing fetched again
    assert task.test_translations is None
    # XTREME's translations of the test sets into English: text, second text, label, line i for the language's i-th test row
    put(folder, f"{download.TRANSLATIONS}/XNLI/translate-test/test-de-en-translated.tsv", "".join(f"A de {i} in English.\tB.\tneutral\n"
                                                                                                 for i in range(2)))
    put(folder, f"{download.TRANSLATIONS}/SQuAD/translate-train/squad.translate.train.en-de.json", "{}")
    download.main(["translations", "--to", str(tmp_path), "--langs", "de", "--mirror", url])  # TyDiQA-GoldP has no German: none asked for
    task = tasks.load_task("xnli", tmp_path / "xnli")
    assert task.test_translations == str(tmp_path / "xnli" / "translate-test" / "test-{lang}-en-translated.tsv")
    read = tasks.read_translations(task.test_translations, "de", "en", task.test["de"])
    assert [(e.id, e.text, e.pair) for e in read] == [("0", "A de 0 in English.", "B."), ("1", "A de 1 in English.", "B.")]
    with pytest.raises(InputError, match="XTREME has no translations of xx"):
        download.main(["translations", "--to", str(tmp_path), "--langs", "xx", "--mirror", url])


def test_pawsx_and_tydiqa_archives(tmp_path, mirror, unpinned):
    folder, url, _ = mirror
    rows = "id\tsentence1\tsentence2\tlabel\n1\tA b.\tB a.\t1\n2\tC d.\tD c.\t0\n"
    files = {f"x-final/{lang}/{name}": rows for lang in ("en", "de")
             for name in (["train.tsv"] if lang == "en" else ["translated_train.tsv"]) + ["dev_2k.tsv", "test_2k.tsv"]}
    put(folder, "https://storage.googleapis.com/paws/pawsx/x-final.tar.gz", archive(files, "tar"))
    download.download("pawsx", tmp_path / "pawsx", mirror=url)
    task = tasks.load_task("pawsx", tmp_path / "pawsx")
    assert task.targets == ["de"] and len(task.train["de"]) == 2 and not (tmp_path / "pawsx" / "x-final").exists()

    def squad(questions):
        return json.dumps({"version": "TyDiQA-GoldP-1.1", "data": [{"paragraphs": [
            {"context": f"Kiko {i} ni mji.", "qas": [{"id": q, "question": "Nini?", "answers": [{"text": f"Kiko {i}", "answer_start": 0}]}]}
            for i, q in enumerate(questions)]}]})
    put(folder, f"{download.TYDIQA}/tydiqa-goldp-v1.1-train.json",
        squad([f"english-{i}-{i}" for i in range(10)] + ["swahili-77-1"]))
    put(folder, f"{download.TYDIQA}/tydiqa-goldp-v1.1-dev.tgz", archive(
        {f"tydiqa-goldp-v1.1-dev/tydiqa-goldp-dev-{language}.json": squad([f"{language}-5-5"]) for language in ("english", "swahili")}, "tar"))
    download.main(["tydiqa", "--to", str(tmp_path / "tydiqa"), "--mirror", url])
    task = tasks.load_task("tydiqa", tmp_path / "tydiqa")
    assert task.targets == ["sw"] and len(task.train["en"]) + len(task.dev["en"]) == 10
    assert [e.id for e in task.test["sw"]] == ["swahili-5-5"] and task.test["sw"][0].answers == [("Kiko 0", 0)]  # gold kept
    assert json.loads((tmp_path / "tydiqa" / "tydiqa-goldp-v1.1-train" / "tydiqa.goldp.sw.train.json").read_text())[
        "data"][0]["paragraphs"][0]["qas"][0]["id"] == "1"  # XTREME's ids: the question id's last part


def test_mtop_mtod_and_xeroalign_s_translations_land_in_the_layouts_their_tasks_read(tmp_path, mirror, unpinned):
    from test_dialogue import MTOP_DE, MTOP_EN, mtop_row, write_mtod
    folder, url, _ = mirror
    files = {f"mtop/{lang}/{split}.txt": "".join(mtop_row(*row) + "\n" for row in rows)
             for lang, rows in (("en", MTOP_EN), ("de", MTOP_DE)) for split in ("train", "eval", "test")}
    put(folder, download.MTOP, archive({**files, "mtop/README.txt": "MTOP"}))
    download.main(["mtop", "--to", str(tmp_path / "mtop"), "--mirror", url])
    assert tasks.load_task("mtop", tmp_path / "mtop").targets == ["de"] and not (tmp_path / "mtop" / "mtop").exists()
    released = write_mtod(tmp_path / "released", translations=False)
    put(folder, download.MTOD, archive({p.relative_to(released).as_posix(): p.read_text(encoding="utf-8")
                                        for p in released.rglob("*.conllu")}))
    download.main(["mtod", "--to", str(tmp_path / "data" / "mtod"), "--mirror", url])
    copied = write_mtod(tmp_path / "copied")  # the authors' copy: their translations beside the data set
    put(folder, f"{download.XEROALIGN_DATA}/mtod.zip", archive({f"mtod/{p.relative_to(copied).as_posix()}": p.read_text(encoding="utf-8")
                                                               for p in copied.rglob("*") if p.is_file()}))
    put(folder, f"{download.XEROALIGN_DATA}/m_atis.zip", archive({"m_atis/en/train.tsv": "a\n", "m_atis/de/train.tsv": "b\n",
                                                                 "m_atis/de/train.txt": "not this"}))
    download.main(["xeroalign-translations", "--to", str(tmp_path / "data"), "--mirror", url])
    assert sorted(p.relative_to(tmp_path / "data").as_posix() for p in (tmp_path / "data" / "multiatis").rglob("*")
                  if p.is_file()) == ["multiatis/de/train.tsv", "multiatis/en/train.tsv"]
    task = tasks.load_task("mtod", tmp_path / "data" / "mtod")
    assert [e.id for e in task.train["th"]] == ["1", "3"]


def test_panx_from_the_archive_saved_by_hand(tmp_path):
    split = "en:Angela\tB-PER\nen:Merkel\tI-PER\n\nen:Paris\tB-LOC\n\n"
    inner = {lang: archive({name: split.replace("en:", f"{lang}:") for name in ("train", "dev", "test")}, "tar") for lang in ("en", "sw")}
    (tmp_path / "AmazonPhotos.zip").write_bytes(archive({f"{lang}.tar.gz": data for lang, data in inner.items()}))
    download.main(["panx", "--to", str(tmp_path / "panx"), "--archive", str(tmp_path / "AmazonPhotos.zip")])
    assert (tmp_path / "panx" / "test-sw.tsv").read_text() == "Angela\tB-PER\nMerkel\tI-PER\n\nParis\tB-LOC\n"
    task = tasks.load_task("panx", tmp_path / "panx")
    assert task.targets == ["sw"] and [e.tags for e in task.test["sw"]] == [["B-PER", "I-PER"], ["B-LOC"]]


def test_panx_from_the_archive_as_xtremes_panx_preprocess_writes_it(tmp_path):
    """utils_preprocess.py:103-120: the token after the first colon, stripped; a line of two fields
    without a colon writes nothing; a line of other than two fields a blank line; a last blank line dropped."""
    split = ("en:Angela\tB-PER\nen: Merkel \tI-PER\nMerkels\tI-PER\n\nen:Paris\tB-LOC\nen:a:b\tO\n"
             "en:x\ty\tz\nen:c\tO\n\n")
    inner = archive({name: split for name in ("train", "dev", "test")}, "tar")
    (tmp_path / "AmazonPhotos.zip").write_bytes(archive({"en.tar.gz": inner, "de.tar.gz": inner}))
    download.main(["panx", "--to", str(tmp_path / "panx"), "--archive", str(tmp_path / "AmazonPhotos.zip")])
    written = (tmp_path / "panx" / "train-de.tsv").read_text()
    assert written == "Angela\tB-PER\nMerkel\tI-PER\n\nParis\tB-LOC\na:b\tO\n\nc\tO\n"
    task = tasks.load_task("panx", tmp_path / "panx")
    assert [e.words for e in task.test["de"]] == [["Angela", "Merkel"], ["Paris", "a:b"], ["c"]]


def test_an_archive_member_outside_the_folder_is_refused(tmp_path):
    (tmp_path / "evil.zip").write_bytes(archive({"../outside.txt": "x"}))
    with pytest.raises(InputError, match="member '../outside.txt' would be written outside"):
        download.unpack(tmp_path / "evil.zip", tmp_path / "in")
    assert not (tmp_path / "outside.txt").exists()


def test_a_damaged_download_is_named_with_its_member_removed_and_fetched_again(tmp_path, mirror, unpinned):
    folder, url, _ = mirror
    rows = "id\tsentence1\tsentence2\tlabel\n1\tA b.\tB a.\t1\n2\tC d.\tD c.\t0\n"
    files = {f"x-final/{lang}/{name}": rows for lang, first in (("en", "train.tsv"), ("de", "translated_train.tsv"))
             for name in (first, "dev_2k.tsv", "test_2k.tsv")}
    whole = archive({**files, "x-final/readme.bin": random.Random(0).randbytes(100_000)}, "tar")  # incompressible
    source = "https://storage.googleapis.com/paws/pawsx/x-final.tar.gz"
    put(folder, source, whole[:-2000])  # cut short in its last member: the checksum recorded is the cut file's
    with pytest.raises(InputError) as damaged:
        download.download("pawsx", tmp_path / "pawsx", mirror=url)
    saved = tmp_path / "pawsx" / ".download" / "x-final.tar.gz"
    assert str(damaged.value).startswith(f"{saved}, member x-final/readme.bin: damaged (")
    assert str(damaged.value).endswith("): it is removed, and the same command downloads it again")
    written = sorted(p.name for p in (tmp_path / "pawsx").rglob("*") if p.is_file())
    assert written == ["SHA256SUMS"] and source not in (tmp_path / "pawsx" / "SHA256SUMS").read_text()  # nothing of it
    put(folder, source, whole)
    download.download("pawsx", tmp_path / "pawsx", mirror=url)
    assert tasks.load_task("pawsx", tmp_path / "pawsx").targets == ["de"]


def test_damaged_archives_name_the_archive_and_member_and_leave_nothing_half_written(tmp_path):
    (tmp_path / "cut.zip").write_bytes(archive({"a/b.txt": "x" * 1000})[:-100])
    cut = tmp_path / "cut.zip"
    with pytest.raises(InputError, match=rf"^{cut}: damaged \(File is not a zip file\): download it again$"):
        download.unpack(cut, tmp_path / "in")
    text = "".join(f"line {i}\n" for i in range(2000))
    flipped = archive({"a/first.txt": "first", "a/b.txt": text}).replace(b"line 1999", b"line 1998")  # another CRC
    (tmp_path / "flipped.zip").write_bytes(flipped)
    with pytest.raises(InputError, match=r"flipped.zip, member a/b.txt: damaged \(Bad CRC-32 for file 'a/b.txt'\)"):
        download.unpack(tmp_path / "flipped.zip", tmp_path / "in")
    assert not any(p.is_file() for p in (tmp_path / "in").rglob("*"))  # not even the whole first member
    inner = archive({name: "en:Angela\tB-PER\n\n" for name in ("train", "dev", "test")}, "tar")
    (tmp_path / "AmazonPhotos.zip").write_bytes(archive({"en.tar.gz": inner, "sw.tar.gz": inner[:len(inner) // 2]}))
    with pytest.raises(InputError, match=r"AmazonPhotos.zip, member sw.tar.gz: damaged \(.*\): download it again$"):
        download.main(["panx", "--to", str(tmp_path / "panx"), "--archive", str(tmp_path / "AmazonPhotos.zip")])
    assert sorted(p.name for p in (tmp_path / "panx").iterdir()) == ["dev-en.tsv", "test-en.tsv", "train-en.tsv"]


def test_pinned_checksums_are_well_formed():
    pinned = download.read_sums(download.PINNED)
    assert len(pinned) > 100 and all(len(h) == 64 and int(h, 16) >= 0 for h in pinned.values())
    if (SHARED_DATA / "xquad").exists():  # the project's copies of the public files are unmodified
        for path in (SHARED_DATA / "xquad").glob("xquad.*.json"):
            assert pinned[f"{download.XQUAD}/{path.name}"] == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.skipif(not (SHARED_DATA / "xquad").exists(), reason="needs ../shared/data/xquad (not in a fresh clone)")
def test_xquad_as_released_is_split_by_xquad_and_tested_whole_by_xquad_squad(tmp_path, mirror, capsys):
    folder, url, _ = mirror
    for lang in ("en", "de", "ro"):  # the release's own files, whose checksums are pinned
        put(folder, f"{download.XQUAD}/xquad.{lang}.json", (SHARED_DATA / "xquad" / f"xquad.{lang}.json").read_bytes())
    download.main(["xquad", "--to", str(tmp_path / "xquad"), "--mirror", url, "--langs", "en,de,ro"])
    said = capsys.readouterr().out
    assert f"--task xquad-squad, with SQuAD v1.1 from python download.py squad --to {tmp_path / 'squad'}" in said
    with pytest.raises(InputError, match=r"squad/dev-v1.1.json: not found: .*python download.py squad --to"):
        tasks.load_task("xquad-squad", tmp_path / "xquad")
    (tmp_path / "squad").mkdir()
    for name in ("train-v1.1.json", "dev-v1.1.json"):  # SQuAD's shape; XQuAD's English, a part of SQuAD's dev set, stands in
        (tmp_path / "squad" / name).write_bytes((SHARED_DATA / "xquad" / "xquad.en.json").read_bytes())
    whole, split = tasks.load_task("xquad-squad", tmp_path / "xquad"), tasks.load_task("xquad", tmp_path / "xquad")
    assert whole.targets == ["de", "ro"] and {lang: len(e) for lang, e in whole.test.items()} == {"en": 1190, "de": 1190, "ro": 1190}
    assert all(e.labelled for examples in whole.test.values() for e in examples) and len(whole.dev["en"]) == 1190
    assert [e.id for e in whole.test["de"]] == [e.id for e in whole.test["en"]]  # parallel by id: FILTER's oracle pairs them
    assert len(split.test["de"]) == 202 and {e.id for e in split.test["de"]} < {e.id for e in whole.test["de"]}


def conllu(*sentences):
    """CoNLL-U text of sentences, each [(ID, FORM, UPOS, HEAD, DEPS)] after a comment line, a blank line after each."""
    return "".join(f"# sent_id = s{n}\n" + "".join(f"{i}\t{form}\t_\t{upos}\t_\t_\t{head}\t_\t{deps}\t_\n" for i, form, upos, head, deps in s)
                   + "\n" for n, s in enumerate(sentences))


EWT_TRAIN = conllu(
    [(1, "I", "PRON", 4, "4:nsubj"), ("2-3", "cannot", "_", "_", "_"), (2, "can", "AUX", 4, "4:aux"), (3, "not", "PART", 4, "4:advmod"),
     (4, "go", "VERB", 0, "0:root"), (5, ".", "PUNCT", 4, "4:punct")],  # can and not hang from go alike: AUX comes first in the list
    [(1, "They", "PRON", 2, "2:nsubj|4.1:nsubj"), (2, "left", "VERB", 0, "0:root"), (3, "and", "CCONJ", 4, "4:cc"),
     (4, "we", "PRON", 2, "2:conj"), ("4.1", "left", "VERB", "_", "2:conj")],  # an empty node: not a word
    [(1, "New York", "PROPN", 0, "_"), (2, "a\u200cb", "X", 1, "_")],  # a space and a zero-width non-joiner, taken out
    [(1, "_", "X", 0, "_"), (2, "b", "X", 1, "_"), (3, "c", "X", 1, "_")],  # one "_" of three: kept
    [("1-2", "xy", "_", "_", "_"), (1, "x", "DET", 3, "3:det"), (2, "y", "ADP", 3, "3:case|1:dep"), (3, "z", "NOUN", 0, "0:root")])
# the enhanced head 1 puts y below x: x is nearest the root, and "xy" is tagged DET (the list alone would say ADP)
UD_RELEASE = {
    "ud-treebanks-v2.5/UD_English-EWT/en_ewt-ud-train.conllu": EWT_TRAIN,
    "ud-treebanks-v2.5/UD_English-EWT/en_ewt-ud-dev.conllu": conllu([(1, "Hello", "INTJ", 0, "_")]),
    "ud-treebanks-v2.5/UD_English-EWT/en_ewt-ud-test.conllu": conllu([(1, "Bye", "INTJ", 0, "_")]),
    "ud-treebanks-v2.5/UD_English-GUM/en_gum-ud-train.conllu": conllu([(1, "Hi", "INTJ", 0, "_")], [(1, "Lost", "NOUN", 0, "_")])[:-1],
    "ud-treebanks-v2.5/UD_English-ESL/en_esl-ud-train.conllu": conllu([(1, "_", "PRON", 2, "_"), (2, "_", "VERB", 0, "_")],
                                                                      [(1, "_", "X", 0, "_"), (2, "b", "X", 1, "_")]),
    "ud-treebanks-v2.5/UD_German-GSD/de_gsd-ud-test.conllu": conllu(
        [("1-2", "zum", "_", "_", "_"), (1, "zu", "ADP", 3, "_"), (2, "dem", "DET", 3, "_"), (3, "Haus", "NOUN", 0, "_")]),
    "ud-treebanks-v2.5/UD_German-HDT/de_hdt-ud-train.conllu": "# sent_id = 1\n1\tJa\t_\tINTJ\t_\t_\t0\t_\t_\n\n",  # nine columns
    "ud-treebanks-v2.5/UD_Spanish-AnCora/es_ancora-ud-test.conllu": conllu(
        [("1-2", "del", "_", "_", "_"), (1, "de", "ADP", 3, "_"), (2, "el", "DET", 3, "_"), (3, "casa", "NOUN", 0, "_")]),
    "ud-treebanks-v2.5/UD_Spanish-GSD/es_gsd-ud-test.conllu": conllu(  # two NOUNs, equally near the root: not in Spanish's list
        [("1-2", "ab", "_", "_", "_"), (1, "a", "NOUN", 3, "_"), (2, "b", "NOUN", 3, "_"), (3, "c", "VERB", 0, "_")]),
    "ud-treebanks-v2.5/UD_Czech-PDT/cs_pdt-ud-test.conllu": conllu([(1, "Ano", "INTJ", 0, "_")]),  # not an XTREME language
    "ud-treebanks-v2.5/README.txt": "The UD release.\n"}


def test_udpos_xtreme_is_made_from_the_ud_releases_as_xtreme_makes_it(tmp_path, mirror, monkeypatch, capsys):
    folder, url, requests = mirror
    v25, v27 = (download.UD_XTREME[version][0] for version in ("2.5", "2.7"))
    put(folder, v25, archive(UD_RELEASE, "tar"))
    put(folder, v27, archive({"ud-treebanks-v2.7/UD_Polish-PDB/pl_pdb-ud-test.conllu": conllu([(1, "Tak", "PART", 0, "_")]),
                              "ud-treebanks-v2.7/UD_English-EWT/en_ewt-ud-test.conllu": conllu([(1, "No", "INTJ", 0, "_")])}, "tar"))
    with pytest.raises(InputError, match=r"ud-treebanks-v2.5.tgz: SHA-256 \w+, expected \w+ \(pinned in checksums.sha256\)"):
        download.main(["udpos-xtreme", "--to", str(tmp_path / "ud"), "--mirror", url])  # these archives are not the releases
    assert not list((tmp_path / "ud").rglob("*.tsv")) and not list((tmp_path / "ud").rglob("*.part"))
    monkeypatch.setattr(download, "PINNED", tmp_path / "no-pins")
    download.main(["udpos-xtreme", "--to", str(tmp_path / "ud"), "--mirror", url])
    out = tmp_path / "ud"
    assert sorted(p.name for p in out.glob("*.tsv")) == ["dev-en.tsv", "test-de.tsv", "test-en.tsv", "test-es.tsv", "test-pl.tsv",
                                                         "train-en.tsv"]  # Czech is not XTREME's; HDT and Spanish GSD left out
    assert (out / "train-en.tsv").read_text() == ("I\tPRON\ncannot\tAUX\ngo\tVERB\n.\tPUNCT\n\nThey\tPRON\nleft\tVERB\nand\tCCONJ\nwe\tPRON\n\n"
                                                  "NewYork\tPROPN\nab\tX\n\n_\tX\nb\tX\nc\tX\n\nxy\tDET\nz\tNOUN\n\nHi\tINTJ\n")
    assert (out / "test-de.tsv").read_text() == "zum\tADP\nHaus\tNOUN\n" and (out / "test-es.tsv").read_text() == "del\tADP\ncasa\tNOUN\n"
    assert (out / "test-en.tsv").read_text() == "Bye\tINTJ\n"  # English from v2.5 only; the test tags kept
    err = capsys.readouterr().err
    assert "de_hdt-ud-train.conllu:2: 9 columns, expected 10: XTREME's converter (conllu_to_conll.py) stops on this file" in err
    assert "es_gsd-ud-test.conllu:2: multi-word token 1-2: its words 1, 2 are equally near the root" in err
    task = tasks.load_task("udpos", out)
    assert (task.targets, task.parallel) == (["de", "es", "pl"], False) and task.test["de"][0].tags == ["ADP", "NOUN"]

    # what conllu_to_conll.py writes of these files, read by XTREME's own preprocessing (transcribed), gives the same files
    converted = {"en_ewt-ud-train.conll": [[("I", "PRON"), ("cannot", "AUX"), ("go", "VERB"), (".", "PUNCT")],
                                           [("They", "PRON"), ("left", "VERB"), ("and", "CCONJ"), ("we", "PRON")],
                                           [("New York", "PROPN"), ("a\u200cb", "X")], [("_", "X"), ("b", "X"), ("c", "X")],
                                           [("xy", "DET"), ("z", "NOUN")]],
                 "en_ewt-ud-dev.conll": [[("Hello", "INTJ")]], "en_gum-ud-train.conll": [[("Hi", "INTJ")]],
                 "en_esl-ud-train.conll": [[("_", "PRON"), ("_", "VERB")], [("_", "X"), ("b", "X")]]}
    for name, sentences in converted.items():
        (tmp_path / "conll" / "en").mkdir(parents=True, exist_ok=True)
        (tmp_path / "conll" / "en" / name).write_text(conll(sentences), encoding="utf-8")
    (tmp_path / "xtreme").mkdir()
    xtreme_udpos_preprocess(tmp_path / "conll", tmp_path / "xtreme")
    for name in ("train-en.tsv", "dev-en.tsv"):
        assert (tmp_path / "xtreme" / name).read_text() == (out / name).read_text()

    fetched = len(requests)
    download.main(["udpos-xtreme", "--to", str(tmp_path / "some"), "--mirror", url, "--langs", "en,de"])
    assert len(requests) == fetched + 1 and (tmp_path / "some" / ".download" / "ud-treebanks-v2.5.tgz").is_file()  # kept for other --langs
    assert sorted(p.name for p in (tmp_path / "some").glob("*.tsv")) == ["dev-en.tsv", "test-de.tsv", "test-en.tsv", "train-en.tsv"]
    with pytest.raises(InputError, match="XTREME's UD-POS has no xx; it has af, ar"):
        download.main(["udpos-xtreme", "--to", str(tmp_path / "some"), "--langs", "en,xx"])


def test_udpos_xtreme_keeps_the_sentences_the_converter_wrote_before_it_stopped(tmp_path, capsys):
    """conll.py's write_conll stops at a sentence without words (max() of none), its file holding the
    sentences before it, which download_data.sh leaves and udpos_preprocess reads; a file the
    converter cannot read stops it before it writes, whatever comes before."""
    first, second, third = ([(1, "Wir", "PRON", 2, "_"), (2, "gehen", "VERB", 0, "_")], [(1, "Ja", "INTJ", 0, "_")],
                            [(1, "Nein", "INTJ", 0, "_")])
    release = {"ud-treebanks-v2.5/UD_German-GSD/de_gsd-ud-test.conllu":
               conllu(first, second) + "# sent_id = empty\n\n" + conllu(third),
               "ud-treebanks-v2.5/UD_German-HDT/de_hdt-ud-test.conllu":
               conllu(first) + "\n" + conllu(second)[:-2] + "\tx\n\n",  # eleven columns after the stop: no file
               "ud-treebanks-v2.5/UD_German-LIT/de_lit-ud-test.conllu": conllu(third) + "\n"}  # stops at the end
    (tmp_path / "ud-treebanks-v2.5.tgz").write_bytes(archive(release, "tar"))
    download.udpos_xtreme_layout([tmp_path / "ud-treebanks-v2.5.tgz"], tmp_path / "ud", ["de"])
    assert (tmp_path / "ud" / "test-de.tsv").read_text() == "Wir\tPRON\ngehen\tVERB\n\nJa\tINTJ\n\nNein\tINTJ\n"
    err = capsys.readouterr().err
    assert ("de_gsd-ud-test.conllu:9: a sentence without words: XTREME's converter (conllu_to_conll.py) stops writing "
            "this file there, so XTREME's UD-POS keeps the sentences before it (2) and no others") in err
    assert ("de_hdt-ud-test.conllu:7: 11 columns, expected 10: XTREME's converter (conllu_to_conll.py) stops on this "
            "file before writing it") in err
    # what the converter writes of GSD before it stops, read by XTREME's own preprocessing (transcribed), is that file
    (tmp_path / "conll" / "de").mkdir(parents=True)
    partial = conll([[("Wir", "PRON"), ("gehen", "VERB")], [("Ja", "INTJ")]])
    (tmp_path / "conll" / "de" / "de_gsd-ud-test.conll").write_text(partial)
    (tmp_path / "xtreme").mkdir()
    xtreme_udpos_preprocess(tmp_path / "conll", tmp_path / "xtreme")
    assert (tmp_path / "xtreme" / "test-de.tsv").read_text() == "Wir\ngehen\n\nJa\n"  # XTREME's test files: no tags


def hub_parquet(rows, names=None):
    """A parquet file as the Hugging Face hub serves PAN-X (google/xtreme, PAN-X.<lang>): columns tokens,
    ner_tags (ids) and langs, one row per sentence; with the datasets library's metadata naming the
    tags where `names` is given. `rows`: [(tokens, ids)]."""
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    rows = list(rows)
    table = pa.table({"tokens": [tokens for tokens, _ in rows], "ner_tags": [ids for _, ids in rows],
                      "langs": [["xx"] * len(tokens) for tokens, _ in rows]})
    if names:
        sequence = lambda feature: {"feature": feature, "_type": "Sequence"}
        features = {"tokens": sequence({"dtype": "string", "_type": "Value"}), "ner_tags": sequence({"names": names, "_type": "ClassLabel"}),
                    "langs": sequence({"dtype": "string", "_type": "Value"})}
        table = table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": features}})})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def test_panx_from_the_hubs_parquet_files(tmp_path, mirror, monkeypatch, unpinned):
    folder, url, requests = mirror
    tokens = [["Angela", " Merkel ", "visited", "Paris"], ["The", "UN"]]
    files = {"en": hub_parquet(zip(tokens, [[1, 2, 0, 5], [0, 3]])),  # ids in the order of the dataset card
             "sw": hub_parquet(zip(tokens, [[3, 4, 0, 1], [0, 5]]), names=["O", "B-LOC", "I-LOC", "B-PER", "I-PER", "B-ORG", "I-ORG"])}
    for lang, content in files.items():
        for split in ("train", "validation", "test"):
            put(folder, f"{download.HUB_XTREME}/PAN-X.{lang}/{split}-00000-of-00001.parquet", content)
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "pyarrow.parquet", None)
        with pytest.raises(InputError, match="with pyarrow, which is not installed: pip install pyarrow"):
            download.main(["panx", "--to", str(tmp_path / "panx"), "--mirror", url, "--langs", "en,sw"])
    assert not requests  # said before anything was fetched
    download.main(["panx", "--to", str(tmp_path / "panx"), "--mirror", url, "--langs", "en,sw"])
    expected = "Angela\tB-PER\nMerkel\tI-PER\nvisited\tO\nParis\tB-LOC\n\nThe\tO\nUN\tB-ORG\n"
    assert {p.name: p.read_text() for p in (tmp_path / "panx").glob("*.tsv")} == {
        f"{split}-{lang}.tsv": expected for lang in ("en", "sw") for split in ("train", "dev", "test")}  # validation is dev
    task = tasks.load_task("panx", tmp_path / "panx")
    assert task.targets == ["sw"] and [e.tags for e in task.test["sw"]] == [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG"]]
    assert len((tmp_path / "panx" / "SHA256SUMS").read_text().splitlines()) == 6  # not pinned (these are not the hub's): recorded
    fetched = len(requests)
    download.main(["panx", "--to", str(tmp_path / "panx"), "--mirror", url, "--langs", "en,sw"])
    assert len(requests) == fetched  # every file done

    put(folder, f"{download.HUB_XTREME}/PAN-X.sw/test-00000-of-00001.parquet", hub_parquet(zip(tokens, [[0, 0, 0, 0], [0, 0]])))
    (tmp_path / "panx" / ".download" / "panx-sw-test.parquet.done").unlink()
    (tmp_path / "panx" / "test-sw.tsv").unlink()
    with pytest.raises(InputError, match=r"PAN-X.sw/test-00000-of-00001.parquet: SHA-256 \w+, expected \w+ \(recorded in .*SHA256SUMS\)"):
        download.main(["panx", "--to", str(tmp_path / "panx"), "--mirror", url, "--langs", "sw"])
    assert not (tmp_path / "panx" / "test-sw.tsv").exists() and not list((tmp_path / "panx").rglob("*.part"))

    for split in ("train", "validation", "test"):
        put(folder, f"{download.HUB_XTREME}/PAN-X.de/{split}-00000-of-00001.parquet", "<html>Not found</html>")
    with pytest.raises(InputError, match=r"panx-de-train.parquet: not a parquet file that pyarrow reads"):
        download.main(["panx", "--to", str(tmp_path / "de"), "--mirror", url, "--langs", "de"])
    with pytest.raises(InputError, match="the hub's PAN-X has no xx"):
        download.main(["panx", "--to", str(tmp_path / "de"), "--langs", "xx"])
