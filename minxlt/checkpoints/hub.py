"""Where a --model comes from: a checkpoint folder, or a hub id (org/name) found in the Hugging Face cache as
transformers finds it, else downloaded into it with huggingface_hub (unless HF_HUB_OFFLINE=1)."""
import json
import os
import re
from pathlib import Path

from minxlt.errors import InputError

TRUE = ("1", "TRUE", "YES", "ON")  # huggingface_hub's true values of its variables
HUB_ID = re.compile(r"[\w.-]+(/[\w.-]+)?")
# What a checkpoint directory needs: its config, weights (single or sharded; PyTorch's pickles where a repository
# has no safetensors) and tokenizer.
SAFETENSORS = ["model.safetensors", "model.safetensors.index.json", "model-*.safetensors"]
PICKLES = ["pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin"]
TOKENIZER = ["sentencepiece.bpe.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
             "vocab.txt"]


def cache_dir():
    """huggingface_hub's cache: $HF_HUB_CACHE (or the older $HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub, where
    HF_HOME is by default $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface."""
    home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or Path(home) / "hub"
    return Path(os.path.expanduser(os.path.expandvars(hub)))


def cached(repo_id):
    """The cached snapshot folder of a hub id (models--org--name/snapshots/<refs/main>), or None: also where
    it lacks weights or a tokenizer (a download cut short, or another program's files)."""
    folder = cache_dir() / f"models--{repo_id.replace('/', '--')}"
    ref = folder / "refs" / "main"
    snapshot = folder / "snapshots" / (ref.read_text().strip() if ref.is_file() else "main")
    needs = [["config.json"], SAFETENSORS[:2] + PICKLES[:2], ["sentencepiece.bpe.model", "tokenizer.json", "vocab.txt"]]
    return snapshot if all(any(whole(snapshot / f) for f in names) for names in needs) else None


def whole(path):
    """Whether a snapshot's file is there, and of a shard index (*.index.json), every shard it names."""
    if not path.is_file() or not path.name.endswith(".index.json"):
        return path.is_file()
    try:
        shards = set(json.loads(path.read_text())["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    return all((path.parent / shard).is_file() for shard in shards)


def resolve(name, config_only=False):
    """The checkpoint folder `name` stands for: itself, or a hub id's cached or downloaded snapshot;
    `config_only`: an uncached hub id's config.json alone, in a folder outside the cache (--dry-run)."""
    path = Path(name)
    run = path.is_dir() and (path / "best").is_dir() and (path / "log.jsonl").is_file()
    if run and not (path / "config.json").is_file():
        raise InputError(f"--model {name}: a run's folder, not a model: give --model {path / 'best'}, the model it "
                         "kept")
    if path.is_dir():
        return path
    if path.exists() or not HUB_ID.fullmatch(name):
        raise InputError(f"--model {name}: not a checkpoint folder, nor a Hugging Face hub id (org/name)")
    if (found := cached(name)) is not None:
        return found
    where = f"--model {name}: no such folder, and not in the Hugging Face cache at {cache_dir()}"
    offline = [v for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE") if os.environ.get(v, "").upper() in TRUE]
    if offline:
        raise InputError(f"{where}; {offline[0]} is set, so it is not downloaded")
    try:
        import huggingface_hub
    except ImportError:
        raise InputError(f"{where}; pip install huggingface_hub to download it, or give a checkpoint folder") from None
    try:
        if config_only:
            import tempfile
            folder = tempfile.mkdtemp(prefix="minxlt-config-")
            return Path(huggingface_hub.hf_hub_download(name, "config.json", local_dir=folder)).parent
        folder = Path(huggingface_hub.snapshot_download(name, allow_patterns=["config.json", *SAFETENSORS, *TOKENIZER],
                                                         cache_dir=cache_dir()))
        if any(folder.glob("model*.safetensors*")):
            return folder
        return Path(huggingface_hub.snapshot_download(name, allow_patterns=["config.json", *PICKLES, *TOKENIZER],
                                                      cache_dir=cache_dir()))
    except Exception as e:  # noqa: BLE001 - the network, the hub, a private repository: all one message
        detail = str(e).splitlines()[0] if str(e) else ""
        raise InputError(f"{where}, and the download failed ({type(e).__name__}: {detail})") from None
