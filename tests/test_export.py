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
    assert_same_ids(transformers.AutoTokenizer.from_pretrained(str(best)), tokenizer, texts)
    ids, mask = tokenizer.batch(texts)
    with torch.no_grad():
        mine = ours.eval()(ids, mask)[0]
        output = theirs(input_ids=ids, attention_mask=mask)
    return mine, output, info, theirs.config


def assert_same_ids(auto_tokenizer, tokenizer, texts):
    """AutoTokenizer gives the run's ids, for single texts and for pairs."""
    for text in texts:
        assert auto_tokenizer(text)["input_ids"] == tokenizer.encode(text), text
    for a, b in zip(texts, texts[1:]):
        assert auto_tokenizer(a, b)["input_ids"] == tokenizer.encode(a, b), (a, b)


TEXTS = ["wie wird das Wetter morgen in Berlin ?", "set an alarm for 7 am", "spiele Jazz"]
# what sentencepiece's normaliser changes: extra, leading and trailing spaces, full-width and composed characters
HARD = TEXTS + ["  zwei  Leerzeichen  ", "Ünïcödé ｆｕｌｌｗｉｄｔｈ ①", "東京の天気は？", "tab\there", "x"]


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


def test_an_xlm_r_export_has_a_tokenizer_json_that_autotokenizer_builds(tmp_path, xl_model_dir):
    """transformers 5 builds XLM-R XL's tokenizer from tokenizer.json alone: the export writes one
    from the sentencepiece model where the checkpoint had none, and minxlt reads it back the same."""
    from minxlt.text.tokenizer import Tokenizer
    assert not (xl_model_dir / "tokenizer.json").exists()
    train.main(["--model", str(xl_model_dir), *COMMON, "--method", "zero-shot", "--out", str(tmp_path / "run")])
    best = tmp_path / "run" / "best"
    ours = Tokenizer.from_pretrained(best)
    theirs = transformers.AutoTokenizer.from_pretrained(str(best))
    assert theirs.is_fast and (best / "tokenizer.json").is_file()
    assert_same_ids(theirs, ours, HARD)
    expected = [ours.encode(text) for text in HARD]
    (best / "sentencepiece.bpe.model").unlink()
    assert [Tokenizer.from_pretrained(best).encode(text) for text in HARD] == expected


@pytest.fixture(scope="module")
def wordpiece_model_dir(tmp_path_factory):
    """A BERT-layout encoder with a WordPiece tokenizer given only as tokenizer.json (as multilingual-e5
    and LaBSE are on the hub), its vocabulary trained on the bundled corpus."""
    import tokenizers

    from minxlt.tasks import demo
    from minxlt.text.tokenizer import Tokenizer
    directory = tmp_path_factory.mktemp("wordpiece-model")
    texts = [e.text for split in ("train", "dev", "test") for examples in demo.build(split).values() for e in examples]
    model = tokenizers.Tokenizer(tokenizers.models.WordPiece(unk_token="[UNK]"))
    model.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    model.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    model.train_from_iterator(texts, tokenizers.trainers.WordPieceTrainer(vocab_size=800, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    model.post_processor = tokenizers.processors.BertProcessing(("[SEP]", model.token_to_id("[SEP]")), ("[CLS]", model.token_to_id("[CLS]")))
    model.save(str(directory / "tokenizer.json"))
    tokenizer = Tokenizer.from_pretrained(directory)
    torch.manual_seed(2)
    config = Config(vocab_size=tokenizer.vocab_size, hidden_size=24, num_layers=2, num_heads=2, ffn_size=29, max_positions=130,
                    model_type="bert", position_offset=0, type_vocab_size=2, pad_id=tokenizer.pad_id, layer_norm_eps=1e-12)
    random_layer_norms(Encoder(config)).save_pretrained(directory)
    return directory


@pytest.mark.parametrize("given", ["tokenizer.json", "vocab.txt"])
def test_a_wordpiece_export_loads_with_autotokenizer(tmp_path, wordpiece_model_dir, given):
    """The checkpoint's own tokenizer.json travels to OUT/best unchanged; from a vocab.txt alone,
    AutoTokenizer builds BERT's tokenizer from it and the config's rules."""
    import shutil

    from minxlt.text.tokenizer import Tokenizer
    model_dir = tmp_path / "model"
    shutil.copytree(wordpiece_model_dir, model_dir)
    if given == "vocab.txt":
        Tokenizer.from_pretrained(model_dir).write(model_dir)
        (model_dir / "tokenizer.json").unlink()
    train.main(["--model", str(model_dir), *COMMON, "--method", "zero-shot", "--out", str(tmp_path / "run")])
    best = tmp_path / "run" / "best"
    if given == "tokenizer.json":
        assert (best / "tokenizer.json").read_bytes() == (model_dir / "tokenizer.json").read_bytes()
    mine, output, _, _ = round_trip(best, "AutoModelForSequenceClassification", HARD)
    assert torch.allclose(mine, output.logits, atol=1e-5)
