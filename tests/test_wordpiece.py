"""BERT's WordPiece tokenizer (mBERT, LaBSE) against transformers' AutoTokenizer (the tokenizers
library's BertNormalizer, BertPreTokenizer and WordPiece), with a vocabulary trained here on
multilingual text, under each of BERT's rules: lower-casing, accents, CJK ideographs."""
import json

import pytest
import torch
from test_tokenizer import CORPUS, HARD

from conftest import SHARED_DATA
from minxlt.checkpoints.weights import CheckpointError
from minxlt.text.tokenizer import Tokenizer, WordPieceTokenizer

tokenizers = pytest.importorskip("tokenizers", reason="the reference WordPiece tokenizer comes with transformers (tokenizers)")
transformers = pytest.importorskip("transformers", reason="tokenizer parity needs transformers")

# what the legacy Python BertTokenizer gets wrong: Arabic vowel marks, Hindi nukta, Greek final sigma
EDGES = ["كَتَبَ الوَلَدُ الدَّرْسَ", "क़िला और ज़मीन", "ΟΔΟΣ ΣΟΦΙΑΣ ΚΑΙ ΣΑΣ", "Straße İstanbul ǅemal", "Ａｌｐｈａ ｆｕｌｌ", "tab\tx\x00y\ufffdz",
         "zero\u200bwidth\u00adsoft", "a—b…c «d» ‘e’ ¿f? ¡g!", "𠀀𪜀 rare ideographs 丽", "x" * 120, "naïve café résumé"]


def texts():
    real = []
    if (SHARED_DATA / "sib200").exists():  # real multilingual sentences, where the data is at hand
        from minxlt import tasks
        for lang in ("deu_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "hin_Deva", "tha_Thai", "jpn_Jpan", "kor_Hang", "ell_Grek", "amh_Ethi"):
            real += [e.text for e in list(tasks.each_sib200(SHARED_DATA / "sib200", lang, "test"))[:15]]
    return CORPUS.splitlines() + HARD + EDGES + real


@pytest.fixture(scope="module")
def vocab_dir(tmp_path_factory):
    """A cased WordPiece vocabulary of 3,000 pieces trained on the texts, saved as vocab.txt."""
    directory = tmp_path_factory.mktemp("wordpiece")
    model = tokenizers.Tokenizer(tokenizers.models.WordPiece(unk_token="[UNK]"))
    model.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=False)
    model.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    trainer = tokenizers.trainers.WordPieceTrainer(vocab_size=3000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    model.train_from_iterator(texts() * 2, trainer)
    model.model.save(str(directory))
    return directory


RULES = [{"do_lower_case": False}, {"do_lower_case": True}, {"do_lower_case": True, "strip_accents": False},
         {"do_lower_case": False, "strip_accents": True}, {"do_lower_case": False, "tokenize_chinese_chars": False}]


@pytest.mark.parametrize("rules", RULES, ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()))
def test_ids_and_offsets_match_autotokenizer(vocab_dir, rules, tmp_path):
    directory = tmp_path / "tok"
    directory.mkdir()
    (directory / "vocab.txt").write_bytes((vocab_dir / "vocab.txt").read_bytes())
    (directory / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", **rules}))
    ours = Tokenizer.from_pretrained(directory)
    theirs = transformers.AutoTokenizer.from_pretrained(str(directory))
    assert isinstance(ours, WordPieceTokenizer) and theirs.is_fast
    for text in texts():
        expected = theirs(text, return_offsets_mapping=True)
        assert ours.encode(text) == expected["input_ids"], text
        ids, offsets = ours.tokenize_with_offsets(text)
        assert offsets == [tuple(o) for o in expected["offset_mapping"][1:-1]], text
    for a, b in zip(texts(), texts()[7:]):
        if not b:  # transformers reads an empty second text as "no pair"
            continue
        assert ours.encode(a, b, max_length=40) == theirs(a, b, truncation="longest_first", max_length=40)["input_ids"], (a, b)
    words = "Das Museum öffnet morgen, um neun Uhr.".split()
    ids, word_ids = ours.encode_words(words)
    expected = theirs(words, is_split_into_words=True)
    assert ids == expected["input_ids"] and word_ids == expected.word_ids()


def reference(vocab_dir, directory, **rules):
    """transformers' AutoTokenizer over the vocabulary, with BERT's rules in tokenizer_config.json."""
    directory.mkdir(exist_ok=True)
    (directory / "vocab.txt").write_bytes((vocab_dir / "vocab.txt").read_bytes())
    (directory / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", **rules}))
    return transformers.AutoTokenizer.from_pretrained(str(directory))


def test_a_tokenizer_json_with_a_wordpiece_model(vocab_dir, tmp_path):
    theirs = reference(vocab_dir, tmp_path / "vocab", do_lower_case=True)
    theirs.save_pretrained(str(tmp_path / "saved"))  # transformers 5 writes tokenizer.json
    (tmp_path / "saved" / "vocab.txt").unlink(missing_ok=True)
    ours = Tokenizer.from_pretrained(tmp_path / "saved")
    assert isinstance(ours, WordPieceTokenizer) and ours.lowercase
    assert ours.fingerprint() == WordPieceTokenizer.from_vocab(tmp_path / "vocab").fingerprint()
    for text in texts():
        assert ours.encode(text) == theirs(text)["input_ids"], text
    # no normalizer: read as the file's own tokenizer reads it; another normalizer or pre-tokenizer: refused
    spec = json.loads((tmp_path / "saved" / "tokenizer.json").read_text())
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "tokenizer.json").write_text(json.dumps(dict(spec, normalizer=None)))
    ours, own = Tokenizer.from_pretrained(plain), tokenizers.Tokenizer.from_file(str(plain / "tokenizer.json"))
    for text in texts():
        assert ours.encode(text) == own.encode(text).ids, text
    steps = {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}, {"type": "StripAccents"}]}
    for changed in (dict(spec, normalizer=steps), dict(spec, pre_tokenizer={"type": "Whitespace"})):
        (plain / "tokenizer.json").write_text(json.dumps(changed))
        with pytest.raises(CheckpointError, match=r"tokenizer.json: a WordPiece model with normalizer (Sequence|Bert"
                                                  r"Normalizer) and pre_tokenizer (BertPreTokenizer|Whitespace); minxlt reads BERT's "
                                                  r"\(BertNormalizer or none, BertPreTokenizer\), as mBERT's and LaBSE's: a "
                                                  r"model tokenized otherwise is not one it implements"):
            Tokenizer.from_pretrained(plain)


def test_an_unknown_token_of_another_name_is_saved_with_its_name(vocab_dir, tmp_path):
    vocab = (vocab_dir / "vocab.txt").read_text(encoding="utf-8").replace("[UNK]\n", "<unk>\n")
    (tmp_path / "vocab.txt").write_text(vocab, encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "unk_token": "<unk>"}))
    ours = WordPieceTokenizer.from_vocab(tmp_path)
    ours.save_pretrained(tmp_path / "saved")  # as OUT/best holds it
    again = Tokenizer.from_pretrained(tmp_path / "saved")
    assert again.unk_id == ours.unk_id == vocab.split("\n").index("<unk>") and again.fingerprint() == ours.fingerprint()
    assert again.encode("\u2603 qqqq") == ours.encode("\u2603 qqqq") and ours.unk_id in ours.encode("\u2603")
    # BERT's [UNK] keeps the fingerprint it had before the name was kept (a run's resume checks it): 5cc46cd's
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"])}
    assert WordPieceTokenizer(vocab).fingerprint() == "191484b449223d35"


def test_a_pairs_second_text_is_segment_one_for_bert(vocab_dir, tmp_path):
    from model import Config, Encoder
    tokenizer = WordPieceTokenizer.from_vocab(vocab_dir)
    config = Config(vocab_size=tokenizer.vocab_size, hidden_size=16, num_layers=1, num_heads=2, ffn_size=24, max_positions=64,
                    model_type="bert", position_offset=0, type_vocab_size=2, pad_id=tokenizer.pad_id)
    encoder = Encoder(config).eval()
    expected = reference(vocab_dir, tmp_path, do_lower_case=True)("one text", "and another")
    ids = torch.tensor([tokenizer.encode("one text", "and another")])
    assert ids[0].tolist() == expected["input_ids"] and 1 in expected["token_type_ids"]
    with torch.no_grad():
        reference_states = encoder(ids, token_type_ids=torch.tensor([expected["token_type_ids"]]))
        encoder.segment_id = tokenizer.segment_id
        assert torch.equal(encoder(ids), reference_states)


def test_a_folder_without_a_tokenizer_says_what_was_looked_for(tmp_path):
    from minxlt.checkpoints.weights import CheckpointError
    with pytest.raises(CheckpointError, match="no tokenizer; looked for sentencepiece.bpe.model, tokenizer.json .* or vocab.txt"):
        Tokenizer.from_pretrained(tmp_path)


def test_a_vocabulary_without_berts_special_tokens_is_refused_naming_its_file(tmp_path):
    (tmp_path / "vocab.txt").write_text("hello\nworld\n")
    with pytest.raises(CheckpointError, match=r"/vocab.txt: the WordPiece vocabulary lacks \[UNK\], \[CLS\], \[SEP\]"):
        Tokenizer.from_pretrained(tmp_path)
