"""Weight files that must be refused with a clear message, and our safetensors reader/writer
checked against the reference `safetensors` package."""
import json
import os
import struct

import pytest
import torch

from minxlt.checkpoints.weights import CheckpointError, load_safetensors, save_safetensors
from model import Config, Encoder

TINY = Config(vocab_size=101, hidden_size=36, num_layers=2, num_heads=3, ffn_size=37, max_positions=40)


@pytest.fixture
def checkpoint(tmp_path):
    Encoder(TINY).save_pretrained(tmp_path)
    return tmp_path


def rewrite(directory, edit):
    """Load model.safetensors, let `edit` change the dict, write it back."""
    state = {k: v.clone() for k, v in load_safetensors(directory / "model.safetensors").items()}
    edit(state)
    save_safetensors(state, directory / "model.safetensors")


def test_missing_key_is_named(checkpoint):
    rewrite(checkpoint, lambda s: s.pop("encoder.layer.1.attention.self.value.bias"))
    with pytest.raises(CheckpointError, match=r"missing \(1\): encoder\.layer\.1\.attention\.self\.value\.bias"):
        Encoder.from_pretrained(checkpoint)


def test_unexpected_key_is_named(checkpoint):
    rewrite(checkpoint, lambda s: s.update({"encoder.layer.2.output.dense.weight": torch.zeros(36, 37)}))
    with pytest.raises(CheckpointError, match=r"unexpected \(1\): encoder\.layer\.2\.output\.dense\.weight"):
        Encoder.from_pretrained(checkpoint)


def test_wrong_shape_is_named(checkpoint):
    config = json.loads((checkpoint / "config.json").read_text())
    (checkpoint / "config.json").write_text(json.dumps(dict(config, intermediate_size=38)))
    with pytest.raises(CheckpointError, match=r"encoder\.layer\.0\.intermediate\.dense\.weight: file \(37, 36\), config expects \(38, 36\)"):
        Encoder.from_pretrained(checkpoint)


def test_known_extras_are_ignored(checkpoint):
    before = Encoder.from_pretrained(checkpoint).eval()

    def add_extras(s):
        s["embeddings.position_ids"] = torch.arange(40)[None]   # a buffer older files carry
        s["cls.seq_relationship.weight"] = torch.zeros(2, 36)  # BERT's next-sentence head
        s["classifier.out_proj.weight"] = torch.zeros(3, 36)   # a fine-tuned task head
    rewrite(checkpoint, add_extras)
    after = Encoder.from_pretrained(checkpoint).eval()
    ids = torch.tensor([[0, 5, 9, 2]])
    assert torch.equal(before(ids), after(ids))


def test_pooler_is_loaded_when_present(checkpoint):
    weight = torch.randn(36, 36)
    rewrite(checkpoint, lambda s: s.update({"roberta.pooler.dense.weight": weight}))
    with pytest.raises(CheckpointError, match=r"missing \(1\): pooler\.dense\.bias"):
        Encoder.from_pretrained(checkpoint)
    rewrite(checkpoint, lambda s: s.update({"roberta.pooler.dense.bias": torch.zeros(36)}))
    assert torch.equal(Encoder.from_pretrained(checkpoint).pooler.dense.weight, weight)


def test_unsupported_configs_are_refused(checkpoint):
    config = json.loads((checkpoint / "config.json").read_text())
    for change, message in [({"model_type": "t5"}, "model_type 't5' is not supported"),
                            ({"hidden_act": "gelu_new"}, "only exact GELU"),
                            ({"position_embedding_type": "relative_key"}, "only 'absolute'")]:
        (checkpoint / "config.json").write_text(json.dumps(dict(config, **change)))
        with pytest.raises(CheckpointError, match=message):
            Encoder.from_pretrained(checkpoint)
    (checkpoint / "config.json").unlink()
    with pytest.raises(CheckpointError, match="no config.json"):
        Encoder.from_pretrained(checkpoint)


def test_directory_without_weights(tmp_path):
    Encoder(TINY).save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no weights found"):
        Encoder.from_pretrained(tmp_path)


def write_raw(path, header, data=b""):
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


@pytest.mark.parametrize("header,data,message", [
    ({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, b"\0" * 8, "outside the 8-byte data region"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "needs 12 bytes but data_offsets span 8"),
    ({"a": {"dtype": "F99", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, "unknown dtype 'F99'"),
    ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8, "not a list of non-negative integers"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12, "overlapping or gapped"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8, "cover 4 bytes of a 8-byte data region"),
    ({"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4, "exactly dtype, shape and data_offsets"),
    (["not", "an", "object"], b"", "must be a JSON object"),
])
def test_lying_safetensors_headers(tmp_path, header, data, message):
    path = tmp_path / "model.safetensors"
    write_raw(path, header, data)
    with pytest.raises(CheckpointError, match=message):
        load_safetensors(path)


def test_truncated_safetensors(checkpoint):
    path = checkpoint / "model.safetensors"
    raw = path.read_bytes()
    path.write_bytes(raw[:len(raw) // 2])
    with pytest.raises(CheckpointError, match="outside the .*data region"):
        Encoder.from_pretrained(checkpoint)
    path.write_bytes(raw[:100])  # cut inside the header
    with pytest.raises(CheckpointError, match="truncated or not safetensors"):
        load_safetensors(path)
    path.write_bytes(raw[:5])
    with pytest.raises(CheckpointError, match="too short"):
        load_safetensors(path)
    path.write_bytes(struct.pack("<Q", 5) + b"{oops")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_safetensors(path)


class Exploit:
    """Unpickling this would create a file: the loader must refuse before that can happen."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_pickle_that_would_run_code_is_refused(checkpoint):
    marker = checkpoint / "pwned"
    (checkpoint / "model.safetensors").unlink()
    torch.save({"embeddings.word_embeddings.weight": torch.zeros(2), "x": Exploit(str(marker))},
               checkpoint / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"refused to load: the pickle holds more than tensors \("
                                              r"[Uu]nsupported (global: )?GLOBAL io.open\).*no code from the file can run"):
        Encoder.from_pretrained(checkpoint)
    assert not marker.exists()


def test_garbage_bin_is_refused(checkpoint):
    (checkpoint / "model.safetensors").unlink()
    (checkpoint / "pytorch_model.bin").write_bytes(os.urandom(300))
    with pytest.raises(CheckpointError, match="pytorch_model.bin"):
        Encoder.from_pretrained(checkpoint)
    (checkpoint / "pytorch_model.bin").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 9\n")
    with pytest.raises(CheckpointError, match=r"bin: not a PyTorch weight file, nor any pickle \(Unsupported operand "
                                              r"118\): a git-lfs pointer.*Download it again$"):
        Encoder.from_pretrained(checkpoint)
    torch.save({"state_dict": {"embeddings.word_embeddings.weight": torch.zeros(2)}}, checkpoint / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="its entry 'state_dict' is a dict .a training checkpoint"):
        Encoder.from_pretrained(checkpoint)
    (checkpoint / "model.safetensors.index.json").write_bytes(b'{"weight_map": {"\xff": "x"}}')
    with pytest.raises(CheckpointError, match="model.safetensors.index.json: not a valid shard index .UnicodeDecode"):
        Encoder.from_pretrained(checkpoint)


def test_shard_index_naming_a_missing_shard(checkpoint):
    (checkpoint / "model.safetensors").unlink()  # the index alone (beside the single file, the file is read)
    (checkpoint / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "../elsewhere.safetensors"}}))
    with pytest.raises(CheckpointError, match="shard '../elsewhere.safetensors' is not a file"):
        Encoder.from_pretrained(checkpoint)


TENSORS = {
    "f32": torch.randn(3, 5), "f16": torch.randn(7).half(), "bf16": torch.randn(2, 2, 3).bfloat16(),
    "i64": torch.arange(-4, 5), "u8": torch.arange(9, dtype=torch.uint8), "flag": torch.tensor([True, False]),
    "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 4),
}


def test_reader_agrees_with_the_safetensors_package(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    safetensors_torch.save_file(TENSORS, tmp_path / "theirs.safetensors")
    ours = load_safetensors(tmp_path / "theirs.safetensors")
    assert set(ours) == set(TENSORS)
    for name, tensor in TENSORS.items():
        assert ours[name].dtype == tensor.dtype and torch.equal(ours[name], tensor), name


def test_writer_agrees_with_the_safetensors_package(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    save_safetensors({**TENSORS, "view": torch.randn(4, 6)[:, ::2]}, tmp_path / "ours.safetensors")
    theirs = safetensors_torch.load_file(tmp_path / "ours.safetensors")
    assert set(theirs) == set(TENSORS) | {"view"}
    for name, tensor in TENSORS.items():
        assert theirs[name].dtype == tensor.dtype and torch.equal(theirs[name], tensor), name


def test_a_decoder_that_differs_from_the_word_embeddings_is_said(tmp_path):
    # minxlt ties the masked-LM decoder to the word embeddings; a checkpoint whose decoder differs is loaded with a warning
    import warnings

    from minxlt.checkpoints.weights import load_safetensors, save_safetensors
    from model import Config, Encoder
    Encoder(Config(vocab_size=100, hidden_size=16, num_layers=1, num_heads=2, ffn_size=20, max_positions=40), lm_head=True).save_pretrained(tmp_path)
    tensors = dict(load_safetensors(tmp_path / "model.safetensors"))
    word = tensors["roberta.embeddings.word_embeddings.weight"].clone()
    for decoder, expected in ((word, False), (word + 1, True)):
        save_safetensors(dict(tensors, **{"lm_head.decoder.weight": decoder}), tmp_path / "model.safetensors")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            Encoder.from_pretrained(tmp_path)
        assert any("differs from the word embeddings" in str(w.message) for w in caught) == expected
