import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join_process_group_env(rank, world_size, port):
    """The environment torchrun would give process `rank` (for torch.multiprocessing.spawn workers)."""
    import os
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)


def padded_batch(vocab_size, lengths, pad_id=1, bos_id=0, eos_id=2, low=4):
    """Random ids (B, T) shaped like real encoder input: <s> ... </s>, then padding."""
    T = max(lengths)
    ids = torch.full((len(lengths), T), pad_id, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(low, vocab_size, (n,))
        ids[i, 0], ids[i, n - 1] = bos_id, eos_id
    return ids, ids.ne(pad_id).long()


def random_layer_norms(model, seed=0):
    """Every LayerNorm's weight and bias drawn at random (about 1 and 0): at weight 1 and bias 0 a
    LayerNorm applied twice, or in the wrong place, is nearly invisible. Returns the model."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.copy_(1 + 0.5 * torch.randn(module.weight.shape, generator=generator))
                module.bias.copy_(0.5 * torch.randn(module.bias.shape, generator=generator))
    return model


def sharp_encoder(num_layers=4, model_type="xlm-roberta"):
    """A tiny random encoder (odd sizes, random LayerNorms) with weights scaled up, so that attention
    is sharp and a wrong mask or position changes the outputs visibly."""
    from model import Config, Encoder
    bert = model_type == "bert"
    config = Config(vocab_size=101, hidden_size=36, num_layers=num_layers, num_heads=3, ffn_size=37, max_positions=60,
                    model_type=model_type, position_offset=0 if bert else 2, type_vocab_size=2 if bert else 1)
    torch.manual_seed(0)
    model = Encoder(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.mul_(8)
    return random_layer_norms(model)


def padded_pairs():
    """Source and target batches padded to one length, with heavy and uneven padding."""
    source, source_mask = padded_batch(101, [9, 3, 6, 2])
    target, target_mask = padded_batch(101, [4, 9, 2, 7])
    return source, source_mask, target, target_mask


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random encoder with a sentencepiece model trained on the bundled corpus: small enough
    that a training run takes seconds, real enough that the whole pipeline runs on it."""
    import io

    import sentencepiece

    from minxlt.tasks import demo as demo_corpus
    from minxlt.text.tokenizer import Tokenizer
    from model import Config, Encoder
    directory = tmp_path_factory.mktemp("tiny-model")
    texts = [e.text for split in ("train", "dev", "test") for examples in demo_corpus.build(split).values() for e in examples]
    buffer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=buffer, model_type="unigram",
                                             vocab_size=1000, character_coverage=1.0, hard_vocab_limit=False, minloglevel=2)
    (directory / "sentencepiece.bpe.model").write_bytes(buffer.getvalue())
    tokenizer = Tokenizer.from_pretrained(directory)
    torch.manual_seed(0)
    config = Config(vocab_size=tokenizer.vocab_size, hidden_size=32, num_layers=2, num_heads=2, ffn_size=37, max_positions=130)
    random_layer_norms(Encoder(config)).save_pretrained(directory)
    return directory


def make_run(labels, level="sentence", tokenizer=None, intents=None, max_length=64, **task_fields):
    """A methods.Run over a task with no examples of its own: what a method or a task level needs
    to make batches, compute losses and score predictions given to it directly."""
    from methods import Run
    from data import Task
    task = Task("test", list(labels), "en", [], {}, {}, {}, level=level, intents=intents, **task_fields)
    return Run(task, tokenizer, max_length, batch_size=4)


def make_method(name, run, *given):
    """The method `name` with train.py's flags (its defaults, then `given`), resolved over `run`."""
    from minxlt.run import flags
    from minxlt.run.flags import METHODS
    settings, run = flags.resolve(flags.parse(["--method", name, "--max-length", str(run.max_length), *given]), run)
    return METHODS[name](settings, run)


def variant_of(model_dir, directory, seed, **config):
    """A model folder like `model_dir`'s (its tokenizer, its config but `config`), with random
    weights and LayerNorms drawn from `seed`."""
    from model import Config, Encoder
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sentencepiece.bpe.model").write_bytes((model_dir / "sentencepiece.bpe.model").read_bytes())
    torch.manual_seed(seed)
    random_layer_norms(Encoder(Config(**{**Config.from_directory(model_dir).__dict__, **config})), seed).save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def xl_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model in XLM-R XL's pre-LN layout (random weights, the same tokenizer)."""
    return variant_of(tiny_model_dir, tmp_path_factory.mktemp("tiny-xl"), seed=1, model_type="xlm-roberta-xl")
