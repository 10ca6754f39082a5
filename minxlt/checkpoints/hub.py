"""Where a --model comes from: a checkpoint folder, or a hub id (org/name) found in the Hugging Face cache as
transformers finds it, else downloaded into it with huggingface_hub (unless HF_HUB_OFFLINE=1)."""
import os
import re
from pathlib import Path

from minxlt.errors import InputError

HUB_ID = re.compile(r"[\w.-]+(/[\w.-]+)?")
# What a checkpoint directory needs: its config, weights (single or sharded) and tokenizer.
FILES = ["config.json", "model.safetensors", "model.safetensors.index.json", "model-*.safetensors",
         "pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin", "sentencepiece.bpe.model",
         "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]


def cache_dir():
    """$HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    return Path(os.environ.get("HF_HUB_CACHE") or home / "hub")


def cached(repo_id, revision="main"):
    """The cached snapshot folder of a hub id (models--org--name/snapshots/<refs/revision>), or None."""
    folder = cache_dir() / f"models--{repo_id.replace('/', '--')}"
    ref = folder / "refs" / revision
    snapshot = folder / "snapshots" / (ref.read_text().strip() if ref.is_file() else revision)
    return snapshot if (snapshot / "config.json").is_file() else None


def resolve(name, flag="--model", config_only=False):
    """The checkpoint folder `name` stands for: itself, or a hub id's cached or downloaded snapshot;
    `config_only`: an uncached hub id's config.json alone, in a folder outside the cache (--dry-run)."""
    path = Path(name)
    run = path.is_dir() and (path / "best").is_dir() and (path / "log.jsonl").is_file()
    if run and not (path / "config.json").is_file():
        raise InputError(f"{flag} {name}: a run's folder, not a model: give {flag} {path / 'best'}, the model it kept")
    if path.is_dir():
        return path
    if path.exists() or not HUB_ID.fullmatch(name):
        raise InputError(f"{flag} {name}: not a checkpoint folder, nor a Hugging Face hub id (org/name)")
    if (found := cached(name)) is not None:
        return found
    where = f"{flag} {name}: no such folder, and not in the Hugging Face cache at {cache_dir()}"
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise InputError(f"{where}; HF_HUB_OFFLINE is set, so it is not downloaded")
    try:
        import huggingface_hub
    except ImportError:
        raise InputError(f"{where}; pip install huggingface_hub to download it, or give a checkpoint folder") from None
    try:
        if config_only:
            import tempfile
            folder = tempfile.mkdtemp(prefix="minxlt-config-")
            return Path(huggingface_hub.hf_hub_download(name, "config.json", local_dir=folder)).parent
        return Path(huggingface_hub.snapshot_download(name, allow_patterns=FILES, cache_dir=cache_dir()))
    except Exception as e:  # noqa: BLE001 - the network, the hub, a private repository: all one message
        detail = str(e).splitlines()[0] if str(e) else ""
        raise InputError(f"{where}, and the download failed ({type(e).__name__}: {detail})") from None
