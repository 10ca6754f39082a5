"""--model as a Hugging Face hub id: read from the local cache as transformers lays it out, and
downloaded into it, here from a local server that answers as the hub does."""
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

from conftest import ROOT
from minxlt import tasks
from minxlt.checkpoints import hub

SHA = "0123456789abcdef0123456789abcdef01234567"


def cache_with(tmp_path, model_dir, repo="org/tiny"):
    """A Hugging Face cache (HF_HOME/hub) holding `model_dir` as the snapshot of `repo`'s main."""
    folder = tmp_path / "hf" / "hub" / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(SHA)
    shutil.copytree(model_dir, folder / "snapshots" / SHA)
    return tmp_path / "hf"


def test_a_hub_id_from_the_local_cache(tmp_path, tiny_model_dir, monkeypatch):
    home = cache_with(tmp_path, tiny_model_dir)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    assert hub.resolve("org/tiny") == home / "hub" / "models--org--tiny" / "snapshots" / SHA
    assert hub.resolve(str(tiny_model_dir)) == tiny_model_dir  # a folder is itself
    with pytest.raises(tasks.InputError, match="org/missing: no such folder, and not in the Hugging Face cache at .*HF_HUB_OFFLINE is set"):
        hub.resolve("org/missing")
    with pytest.raises(tasks.InputError, match="not a checkpoint folder, nor a Hugging Face hub id"):
        hub.resolve("no/such/folder")
    snapshot = home / "hub" / "models--org--tiny" / "snapshots" / SHA
    (tmp_path / "xdg").mkdir()
    (tmp_path / "xdg" / "huggingface").symlink_to(home)
    for variable, value in ("XDG_CACHE_HOME", tmp_path / "xdg"), ("HUGGINGFACE_HUB_CACHE", home / "hub"):  # the hub's
        with monkeypatch.context() as m:
            m.delenv("HF_HOME")
            m.setenv(variable, str(value))
            assert hub.resolve("org/tiny").resolve() == snapshot
    (snapshot / "model.safetensors").rename(tmp_path / "weights")  # a download cut short: the snapshot is not used
    with monkeypatch.context() as m:
        m.delenv("HF_HUB_OFFLINE")
        m.setenv("TRANSFORMERS_OFFLINE", "1")
        with pytest.raises(tasks.InputError, match="org/tiny: no such folder, .*TRANSFORMERS_OFFLINE is set"):
            hub.resolve("org/tiny")
    (tmp_path / "weights").rename(snapshot / "model.safetensors")
    import train
    train.main(["--model", "org/tiny", "--target-langs", "de", "--batch-size", "8", "--max-steps", "1", "--no-alignment",
                "--out", str(tmp_path / "run")])
    assert json.loads((tmp_path / "run" / "results.json").read_text())["settings"]["model"] == "org/tiny"


class Hub(http.server.BaseHTTPRequestHandler):
    """What huggingface_hub asks a hub for: a repository's revision and file tree, and its files."""
    files = {}

    def answer(self, body):
        repo = "/api/models/org/tiny/"
        if self.path.startswith(repo + "revision/"):
            data = json.dumps({"id": "org/tiny", "sha": SHA, "siblings": [{"rfilename": f} for f in self.files]}).encode()
        elif self.path.startswith(repo + "tree/"):
            data = json.dumps([{"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()} for f, b in self.files.items()]).encode()
        elif self.path.startswith(f"/org/tiny/resolve/{SHA}/") and self.path.rsplit("/", 1)[1] in self.files:
            data = self.files[self.path.rsplit("/", 1)[1]]
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("X-Repo-Commit", SHA)
        self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_GET(self):
        self.answer(True)

    def do_HEAD(self):
        self.answer(False)

    def log_message(self, *args):
        pass


def test_a_hub_id_is_downloaded_into_the_cache(tmp_path, tiny_model_dir):
    pytest.importorskip("huggingface_hub", reason="downloads go through the optional huggingface_hub")
    Hub.files = {p.name: p.read_bytes() for p in tiny_model_dir.iterdir() if p.is_file()}
    Hub.files["pytorch_model.bin"] = b"the same weights, never fetched where the safetensors are"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ, HF_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}", HF_HOME=str(tmp_path / "hf"),
               HF_HUB_DISABLE_TELEMETRY="1")
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("HF_HUB_CACHE", None)
    interrupted = tmp_path / "hf" / "hub" / "models--org--tiny" / "snapshots" / SHA  # a download cut short
    interrupted.mkdir(parents=True)
    (interrupted / "config.json").write_bytes(Hub.files["config.json"])
    (interrupted.parent.parent / "refs").mkdir()
    (interrupted.parent.parent / "refs" / "main").write_text(SHA)
    argv = [sys.executable, str(ROOT / "train.py"), "--model", "org/tiny", "--target-langs", "de", "--batch-size", "8", "--max-steps", "1",
            "--no-alignment"]
    done = subprocess.run(argv + ["--out", str(tmp_path / "run")], capture_output=True, text=True, env=env, timeout=300)
    server.shutdown()
    assert done.returncode == 0, done.stderr
    snapshot = tmp_path / "hf" / "hub" / "models--org--tiny" / "snapshots" / SHA
    assert (snapshot / "config.json").read_bytes() == (tiny_model_dir / "config.json").read_bytes()
    assert (snapshot / "model.safetensors").is_file() and not (snapshot / "pytorch_model.bin").exists()
    # offline now, the same id is read from the cache
    done = subprocess.run(argv + ["--out", str(tmp_path / "again")], capture_output=True, text=True, timeout=300,
                          env=dict(env, HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9"))
    assert done.returncode == 0, done.stderr


def test_a_sharded_snapshot_missing_a_shard_is_not_cached(tmp_path, tiny_model_dir, monkeypatch):
    # an interrupted download of sharded weights: the index is there and a shard is not, so it is fetched again
    home = cache_with(tmp_path, tiny_model_dir)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    snapshot = home / "hub" / "models--org--tiny" / "snapshots" / SHA
    (snapshot / "model.safetensors").rename(snapshot / "model-00001-of-00002.safetensors")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (snapshot / "model.safetensors.index.json").write_text(json.dumps(index))
    assert hub.cached("org/tiny") is None
    (snapshot / "model-00002-of-00002.safetensors").write_bytes(b"")
    assert hub.cached("org/tiny") == snapshot
