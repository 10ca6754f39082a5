"""OUT/best as transformers loads it: the task model with its trained head and id2label, and
AutoTokenizer giving minxlt's ids; the same predictions both ways."""
import json

import pytest
import torch

import train
from conftest import random_layer_norms
from model import Classifier, Config, Encoder

transformers = pytest.importorskip("transformers", reason="the round trip needs transformers")

COMMON = ["--target-langs", "de", "--batch-size", "8", "--max-steps", "2", "--eval-every", "2", "--no-alignment", "--lr", "3e-3"]


@pytest.fixture(scope="module")
def bert_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model in BERT's layout (positions from 0, two token types), as multilingual-e5 is."""
    directory = tmp_path_factory.mktemp("tiny-bert")
    (directory / "sentencepiece.bpe.model").write_bytes((tiny_model_dir / "sentencepiece.bpe.model").read_bytes())
    config = Config.from_directory(tiny_model_dir)
    torch.manual_seed(1)
    random_layer_norms(Encoder(Config(**{**config.__dict__, "model_type": "bert", "position_offset": 0, "type_vocab_size": 2,
                                         "layer_norm_eps": 1e-12}))).save_pretrained(directory)
    return directory


def round_trip(best, auto_class, texts):
    """(ours, theirs): the logits of minxlt's Classifier and of transformers' task model on `texts`."""
    ours, tokenizer, info = Classifier.load(best)
    theirs = getattr(transformers, auto_class).from_pretrained(str(best)).eval()
    # transformers 5 gives xlm-roberta-xl's AutoTokenizer a tokenizer.json backend only; its class reads our files
    pre_ln = json.loads((best / "config.json").read_text())["model_type"] == "xlm-roberta-xl"
    auto_tokenizer = (transformers.XLMRobertaTokenizer if pre_ln else transformers.AutoTokenizer).from_pretrained(str(best))
    for text in texts:
        assert auto_tokenizer(text)["input_ids"] == tokenizer.encode(text), text
    ids, mask = tokenizer.batch(texts)
    with torch.no_grad():
        mine = ours.eval()(ids, mask)[0]
        output = theirs(input_ids=ids, attention_mask=mask)
    return mine, output, info, theirs.config


TEXTS = ["wie wird das Wetter morgen in Berlin ?", "set an alarm for 7 am", "spiele Jazz"]


@pytest.mark.parametrize("layout", ["xlm-roberta", "bert", "xlm-roberta-xl"])
def test_sentence_labels(tmp_path, tiny_model_dir, bert_model_dir, xl_model_dir, layout):
    model_dir = {"xlm-roberta": tiny_model_dir, "bert": bert_model_dir, "xlm-roberta-xl": xl_model_dir}[layout]
    train.main(["--model", str(model_dir), *COMMON, "--method", "zero-shot", "--out", str(tmp_path / "run")])
    mine, output, info, config = round_trip(tmp_path / "run" / "best", "AutoModelForSequenceClassification", TEXTS)
    assert torch.allclose(mine, output.logits, atol=1e-5) and config.model_type == layout
    assert [config.id2label[i] for i in range(len(info["labels"]))] == info["labels"] and info["transformers"] == "ForSequenceClassification"


@pytest.mark.parametrize("layout", ["xlm-roberta", "xlm-roberta-xl"])
def test_word_labels(tmp_path, tiny_model_dir, xl_model_dir, layout):
    model_dir = tiny_model_dir if layout == "xlm-roberta" else xl_model_dir
    train.main(["--model", str(model_dir), *COMMON, "--task", "demo-slots", "--method", "translate-train", "--out", str(tmp_path / "run")])
    mine, output, info, config = round_trip(tmp_path / "run" / "best", "AutoModelForTokenClassification", TEXTS)
    assert torch.allclose(mine, output.logits, atol=1e-5) and config.id2label[1] == info["labels"][1]


@pytest.mark.parametrize("layout", ["xlm-roberta", "xlm-roberta-xl"])
def test_answer_spans(tmp_path, tiny_model_dir, xl_model_dir, layout):
    from test_qa import PEOPLE, write_squad
    articles = [("Article 0", PEOPLE * 2), ("Article 1", PEOPLE), ("Article 6", PEOPLE[1:3]), ("Article 7", PEOPLE)]
    for lang in ("en", "de"):
        write_squad(tmp_path, lang, articles)
    train.main(["--model", str(tiny_model_dir if layout == "xlm-roberta" else xl_model_dir), *COMMON, "--task", "xquad", "--data", str(tmp_path), "--max-length", "40",
                "--doc-stride", "6", "--method", "zero-shot", "--out", str(tmp_path / "run")])
    mine, output, _, _ = round_trip(tmp_path / "run" / "best", "AutoModelForQuestionAnswering", TEXTS)
    assert torch.allclose(mine[..., 0], output.start_logits, atol=1e-5) and torch.allclose(mine[..., 1], output.end_logits, atol=1e-5)


def test_a_head_transformers_has_no_class_for_keeps_the_encoder(tmp_path, tiny_model_dir):
    train.main(["--model", str(tiny_model_dir), *COMMON, "--method", "zero-shot", "--head", "linear", "--out", str(tmp_path / "run")])
    best = tmp_path / "run" / "best"
    assert json.loads((best / "task.json").read_text())["transformers"] is None
    ours, tokenizer, _ = Classifier.load(best)
    ids, mask = tokenizer.batch(TEXTS)
    with torch.no_grad():
        states = transformers.AutoModel.from_pretrained(str(best)).eval()(input_ids=ids, attention_mask=mask).last_hidden_state
        assert torch.allclose(states, ours.encoder.eval()(ids, mask), atol=1e-5)
