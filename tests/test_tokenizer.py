"""The tokenizer against transformers' XLMRobertaTokenizer over a sentencepiece model trained here."""
import io
import unicodedata

import pytest
import sentencepiece
import torch

from minxlt.text.tokenizer import Tokenizer

CORPUS = """The weather was cold, so we stayed inside and read books all afternoon.
Please book a table for four people at seven o'clock tonight.
Das Museum öffnet morgen um neun Uhr, der Eintritt ist frei.
Wir haben gestern im Park Fußball gespielt und danach Eis gegessen.
Le train pour Lyon part à quinze heures depuis le quai numéro trois.
J'aimerais réserver une chambre avec vue sur la mer pour deux nuits.
El mercado central vende frutas frescas todas las mañanas.
¿Dónde está la estación de autobuses más cercana?
Завтра будет солнечно, температура поднимется до двадцати градусов.
Мы встретились на вокзале и поехали в центр города.
明天上午九点我们在图书馆门口见面。
这家餐厅的饺子非常好吃，价格也很便宜。
東京駅から新幹線で大阪まで約二時間半かかります。
私は毎朝コーヒーを飲みながら新聞を読みます。
سافرنا إلى القاهرة في الصيف وزرنا الأهرامات.
هل يمكنك أن تساعدني في حمل هذه الحقيبة؟
कल सुबह हम बाज़ार जाएंगे और ताज़ी सब्ज़ियां खरीदेंगे।
यह किताब बहुत रोचक है और मैंने इसे दो दिन में पढ़ लिया।
เราจะไปเที่ยวทะเลในวันหยุดสุดสัปดาห์นี้
ร้านกาแฟนี้เปิดตั้งแต่เจ็ดโมงเช้า
내일 아침에 공원에서 같이 산책할까요?
이 도시는 밤에도 매우 안전하고 조용합니다.
Το πλοίο για τη Σαντορίνη φεύγει κάθε πρωί από τον Πειραιά.
Yarın sabah erkenden yola çıkmamız gerekiyor.
Chúng tôi đã ăn phở ở một quán nhỏ gần chợ.
ነገ ጠዋት ወደ ገበያ እንሄዳለን።
הרכבת לירושלים יוצאת בעוד עשר דקות.
Numbers like 3.14, 2,500 and 1/2 appear in text; so do e-mails like a.b@example.org."""

HARD = [
    "", " ", "   runs   of    spaces   ", "tab\tand\nnewline", "中文没有空格的句子", "日本語とEnglishの混在",
    "مرحبا بالعالم", "नमस्ते दुनिया", "สวัสดีชาวโลก", "😀 emoji 🎉🎉", "ﬁne ＡＢＣ ① ㍿", "zero\u200bwidth",
    "Tiê\u0301ng Viê\u0323t", "x" * 300, "...!!!???", "Ελληνικά και русский",
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("spm")
    buffer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS.splitlines() * 3), model_writer=buffer, model_type="unigram",
        vocab_size=900, character_coverage=1.0, hard_vocab_limit=False, minloglevel=2)
    (directory / "sentencepiece.bpe.model").write_bytes(buffer.getvalue())
    return directory


@pytest.fixture(scope="module")
def ours(model_dir):
    return Tokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def theirs(model_dir):
    transformers = pytest.importorskip("transformers", reason="tokenizer parity needs transformers")
    pytest.importorskip("google.protobuf", reason="transformers reads sentencepiece models with protobuf")
    return transformers.XLMRobertaTokenizer.from_pretrained(model_dir)


TEXTS = CORPUS.splitlines() + HARD


@pytest.mark.parametrize("text", TEXTS)
def test_single_texts(ours, theirs, text):
    assert ours.encode(text) == theirs(text)["input_ids"]


def test_pairs(ours, theirs):
    for a, b in zip(TEXTS, reversed(TEXTS)):
        if b:  # transformers reads an empty second text as "no pair"; see test_empty_second_text
            assert ours.encode(a, b) == theirs(a, b)["input_ids"], (a, b)


def test_empty_second_text_keeps_the_pair_layout(ours):
    assert ours.encode("a", "") == ours.encode("a")[:-1] + [ours.eos_id, ours.eos_id, ours.eos_id]


@pytest.mark.parametrize("max_length", [5, 8, 13, 24, 40])
def test_truncation(ours, theirs, max_length):
    for a, b in zip(TEXTS, TEXTS[5:] + TEXTS[:5]):
        if not b:
            continue
        assert ours.encode(a, max_length=max_length) == theirs(a, truncation=True, max_length=max_length)["input_ids"]
        expected = theirs(a, b, truncation="longest_first", max_length=max_length)["input_ids"]
        assert ours.encode(a, b, max_length=max_length) == expected, (a, b)


def test_special_ids(ours, theirs):
    assert (ours.bos_id, ours.pad_id, ours.eos_id, ours.unk_id) == (0, 1, 2, 3)
    assert ours.mask_id == theirs.mask_token_id == ours.vocab_size - 1
    assert ours.tokenize("\u0378")[-1] == ours.unk_id  # an unassigned code point


def test_offsets_point_at_the_text(ours):
    for text in CORPUS.splitlines():
        ids, offsets = ours.tokenize_with_offsets(text)
        assert ids == ours.tokenize(text)
        for i, (start, end) in zip(ids, offsets):
            piece = ours.sp.id_to_piece(i - 1).lstrip("\u2581")
            if i != ours.unk_id:
                assert unicodedata.normalize("NFKC", text[start:end]).strip() == piece, (text, piece)
        assert offsets == sorted(offsets)


def test_words_keep_their_tokens(ours):
    words = "Das Museum öffnet morgen um neun Uhr".split()
    ids, word_ids = ours.encode_words(words)
    assert ids == ours.encode(" ".join(words))
    assert word_ids[0] is None and word_ids[-1] is None
    assert sorted(set(word_ids[1:-1])) == list(range(len(words)))
    assert word_ids[1:-1] == sorted(word_ids[1:-1])


def test_a_word_that_normalises_to_nothing_gets_no_token(ours):
    ids, word_ids = ours.encode_words(["a", "\u200b", "b"])
    assert 1 not in word_ids and {0, 2} <= set(word_ids)
    assert len(ids) == len(word_ids)


def test_truncated_words(ours):
    ids, word_ids = ours.encode_words(["Fußball"] * 20, max_length=10)
    assert len(ids) == len(word_ids) == 10 and ids[-1] == ours.eos_id and word_ids[-1] is None


def test_batch_pads_to_the_longest(ours):
    texts = ["short", "a somewhat longer sentence here", ""]
    input_ids, mask = ours.batch(texts)
    assert input_ids.shape == (3, len(ours.encode(texts[1])))
    for row, m, text in zip(input_ids, mask, texts):
        n = int(m.sum())
        assert row[:n].tolist() == ours.encode(text)
        assert torch.all(row[n:] == ours.pad_id) and torch.all(m[n:] == 0)
    pairs, _ = ours.batch(["a", "b"], pairs=["c d", "e"], max_length=6)
    assert pairs[0].tolist() == ours.encode("a", "c d", max_length=6)


def test_decode(ours):
    text = "Le train pour Lyon part à quinze heures."
    assert ours.decode(ours.encode(text)) == text


@pytest.mark.parametrize("lengths,budget,kept", [
    ((3, 3), 6, (3, 3)),   # fits
    ((5, 2), 4, (2, 2)),   # only the longer is cut, to what the shorter leaves
    ((6, 3), 5, (3, 2)),   # both must give way: split the budget, the longer keeps the odd token
    ((3, 6), 5, (2, 3)),
    ((4, 4), 5, (2, 3)),   # equal lengths: the second counts as the longer
    ((10, 1), 1, (1, 0)),
    ((7, 5), 3, (2, 1)),
])
def test_longest_first_rule(ours, lengths, budget, kept):
    ids = ours.add_special_tokens([10] * lengths[0], [20] * lengths[1], budget + 3 + len(ours.separator))
    assert (ids.count(10), ids.count(20)) == kept
