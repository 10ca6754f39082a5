"""download.py against a local HTTP server that serves the official URLs' paths (--mirror): files
land in the layout their task reads, checked against pinned or recorded SHA-256, and nothing is
half-written when a check or the network fails."""
import functools
import hashlib
import http.server
import io
import json
import tarfile
import threading
import zipfile

import pytest

import download
from conftest import SHARED_DATA
from minxlt import tasks
from minxlt.errors import InputError


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
    put(folder, download.github_listing("dadelani/sib-200", "data/annotated", "main"), json.dumps(listing))
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
    with pytest.raises(InputError, match="PAN-X .* cannot be downloaded by a script: save AmazonPhotos.zip"):
        download.main(["panx", "--to", str(tmp_path / "panx")])
    split = "en:Angela\tB-PER\nen:Merkel\tI-PER\n\nen:Paris\tB-LOC\n\n"
    inner = {lang: archive({name: split.replace("en:", f"{lang}:") for name in ("train", "dev", "test")}, "tar") for lang in ("en", "sw")}
    (tmp_path / "AmazonPhotos.zip").write_bytes(archive({f"{lang}.tar.gz": data for lang, data in inner.items()}))
    download.main(["panx", "--to", str(tmp_path / "panx"), "--archive", str(tmp_path / "AmazonPhotos.zip")])
    assert (tmp_path / "panx" / "test-sw.tsv").read_text() == "Angela\tB-PER\nMerkel\tI-PER\n\nParis\tB-LOC\n"
    task = tasks.load_task("panx", tmp_path / "panx")
    assert task.targets == ["sw"] and [e.tags for e in task.test["sw"]] == [["B-PER", "I-PER"], ["B-LOC"]]


def test_an_archive_member_outside_the_folder_is_refused(tmp_path):
    (tmp_path / "evil.zip").write_bytes(archive({"../outside.txt": "x"}))
    with pytest.raises(InputError, match="member '../outside.txt' would be written outside"):
        download.unpack(tmp_path / "evil.zip", tmp_path / "in")
    assert not (tmp_path / "outside.txt").exists()


def test_pinned_checksums_are_well_formed():
    pinned = download.read_sums(download.PINNED)
    assert len(pinned) > 100 and all(len(h) == 64 and int(h, 16) >= 0 for h in pinned.values())
    if (SHARED_DATA / "xquad").exists():  # the project's copies of the public files are unmodified
        for path in (SHARED_DATA / "xquad").glob("xquad.*.json"):
            assert pinned[f"{download.XQUAD}/{path.name}"] == hashlib.sha256(path.read_bytes()).hexdigest()
