"""The tokenizers of XLM-R (sentencepiece, fairseq's ids) and BERT (WordPiece) behind one interface, read from
whatever a checkpoint holds; pairs truncated longest-first as Hugging Face's, words (tagging) and offsets (QA)."""
import base64
import copy
import hashlib
import json
import shutil
import string
import struct
import unicodedata
from pathlib import Path

import sentencepiece
import torch

from minxlt.checkpoints.weights import CheckpointError


class Tokenizer:
    """Content ids of a text (tokenize), with character offsets, of pre-split words, and special tokens around them."""
    bos_id = eos_id = pad_id = unk_id = mask_id = vocab_size = None
    separator = ()        # the ids between the two texts of a pair, besides the first's eos
    bare_space_id = None  # a token for a word boundary alone (XLM-R's bare "▁"), never a word's label
    segment_id = None     # the id after which a pair's second text is segment 1 (BERT's [SEP]); None: one segment
    pad_multiple, pad_limit = 1, None  # see padded_to
    json_file = None  # the tokenizer.json of the checkpoint it was read from, where there is one

    def content_ids(self):
        """(first, end) of the ordinary pieces' ids, which a masked LM draws random tokens from."""
        return max(self.bos_id, self.eos_id, self.pad_id, self.unk_id, self.mask_id) + 1, self.vocab_size

    @classmethod
    def from_pretrained(cls, directory):
        """The tokenizer of a checkpoint directory: sentencepiece.bpe.model, tokenizer.json, or vocab.txt."""
        directory = Path(directory)
        if (directory / "sentencepiece.bpe.model").is_file():
            tokenizer = SentencePieceTokenizer(directory / "sentencepiece.bpe.model")
        elif (directory / "tokenizer.json").is_file():
            tokenizer = from_tokenizer_json(directory / "tokenizer.json")
        elif (directory / "vocab.txt").is_file():
            tokenizer = WordPieceTokenizer.from_vocab(directory)
        else:
            raise CheckpointError(f"{directory}: no tokenizer; looked for sentencepiece.bpe.model, tokenizer.json "
                                  "(a Unigram or WordPiece model) or vocab.txt")
        tokenizer.json_file = directory / "tokenizer.json" if (directory / "tokenizer.json").is_file() else None
        return tokenizer

    def fingerprint(self):
        """A short hash of what decides the ids (`state`, bytes), to tell two tokenizers apart."""
        return hashlib.sha256(self.state).hexdigest()[:16]

    def tokenize(self, text):
        return self.tokenize_words([text])[0]

    def encode(self, text, pair=None, max_length=None):
        """Special tokens around a text or a pair, truncated longest-first to max_length tokens."""
        return self.add_special_tokens(self.tokenize(text), None if pair is None else self.tokenize(pair), max_length)

    def add_special_tokens(self, a, b=None, max_length=None):
        """Content ids in special tokens, cut to max_length; a pair longest-first as Hugging Face's: both giving way
        split the budget, the longer (the second where equal) keeping the odd token."""
        if b is None:
            return [self.bos_id, *(a if max_length is None else a[:max(max_length - 2, 0)]), self.eos_id]
        budget = None if max_length is None else max(max_length - 3 - len(self.separator), 0)
        if budget is not None and len(a) + len(b) > budget:
            short = min(len(a), len(b))
            n_short = short if 2 * short <= budget else budget // 2  # only the longer gives way, else both
            n_long = budget - n_short
            a, b = (a[:n_long], b[:n_short]) if len(a) > len(b) else (a[:n_short], b[:n_long])
        return [self.bos_id, *a, self.eos_id, *self.separator, *b, self.eos_id]

    def encode_words(self, words, max_length=None):
        """(ids with specials, each token's word index or None) of words; one normalised to nothing gets no token."""
        ids, word_ids = [self.bos_id], [None]
        for w, pieces in enumerate(self.tokenize_words(words) if words else []):
            ids += pieces
            word_ids += [w] * len(pieces)
        if max_length is not None and len(ids) + 1 > max_length:
            ids, word_ids = ids[:max_length - 1], word_ids[:max_length - 1]
        return ids + [self.eos_id], word_ids + [None]

    def encode_batch(self, texts, pairs=None, max_length=None):
        a = self.tokenize_words(list(texts))
        b = [None] * len(a) if pairs is None else self.tokenize_words(list(pairs))
        return [self.add_special_tokens(x, y, max_length) for x, y in zip(a, b)]

    def batch(self, texts, pairs=None, max_length=512):
        """(input_ids, attention_mask), each (B, T), of texts (or text pairs)."""
        return self.pad(self.encode_batch(texts, pairs, max_length))

    def padded_to(self, multiple, limit=None):
        """This tokenizer, padding each batch to a multiple of `multiple` tokens (at most `limit`, never below the
        longest): a few static shapes for a compiled step (minxlt/run/compiled.py)."""
        bucketed = copy.copy(self)
        bucketed.pad_multiple, bucketed.pad_limit = multiple, limit
        return bucketed

    def pad(self, sequences):
        """(input_ids, attention_mask) of id lists padded to the longest (rounded up to a bucket: padded_to)."""
        longest = max(len(s) for s in sequences)
        T = max(longest, min(-(-longest // self.pad_multiple) * self.pad_multiple, self.pad_limit or float("inf")))
        input_ids = torch.tensor([list(s) + [self.pad_id] * (T - len(s)) for s in sequences], dtype=torch.long)
        lengths = torch.tensor([len(s) for s in sequences])
        return input_ids, (torch.arange(T) < lengths[:, None]).long()

    def save_pretrained(self, directory):
        """The tokenizer's files, a tokenizer_config.json for AutoTokenizer, and a tokenizer.json (its fast tokenizer,
        the checkpoint's own or one written here), which transformers 5 builds some models' from."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.write(directory)
        (directory / "tokenizer_config.json").write_text(json.dumps(self.config(), indent=2) + "\n")
        target = directory / "tokenizer.json"
        if self.json_file is not None and self.json_file.resolve() != target.resolve():
            shutil.copyfile(self.json_file, target)
        elif self.json_file is None and (spec := self.tokenizer_json()) is not None:
            target.write_text(json.dumps(spec, ensure_ascii=False) + "\n", encoding="utf-8")

    def tokenizer_json(self):
        return None


class SentencePieceTokenizer(Tokenizer):
    """XLM-R's tokenizer over a sentencepiece model, with fairseq's ids: <s>=0 <pad>=1 </s>=2 <unk>=3, sentencepiece
    piece i -> i+1, <mask> last; <s> A </s></s> B </s>."""
    bos_id, pad_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, model_file=None, proto=None):
        """From a sentencepiece model file or its serialized bytes (`proto`), kept as `state`."""
        where = model_file or "the sentencepiece model"
        try:
            self.sp = (sentencepiece.SentencePieceProcessor(model_file=str(model_file)) if proto is None
                       else sentencepiece.SentencePieceProcessor(model_proto=proto))
        except (RuntimeError, OSError) as e:
            raise CheckpointError(f"{where}: not a sentencepiece model ({str(e).strip().splitlines()[0]})") from None
        self.state = Path(model_file).read_bytes() if proto is None else proto
        if self.sp.get_piece_size() < 1 or self.sp.id_to_piece(0) != "<unk>" or not self.sp.is_unknown(0):
            raise CheckpointError(f"{where}: piece 0 must be <unk> as in XLM-R's sentencepiece model")
        self.mask_id = self.sp.get_piece_size() + 1
        self.vocab_size = self.mask_id + 1
        self.separator = (self.eos_id,)
        bare = self.sp.piece_to_id("\u2581")
        self.bare_space_id = bare + 1 if bare else None

    def write(self, directory):
        (Path(directory) / "sentencepiece.bpe.model").write_bytes(self.state)

    def tokenizer_json(self):
        """XLM-R's tokenizer.json as transformers writes it: the Unigram pieces in fairseq's order, the normaliser
        (the precompiled character map, then sentencepiece's removal of extra spaces), the special tokens."""
        sp, charsmap = self.sp, proto_field(proto_field(self.state, 3), 2)  # ModelProto.normalizer_spec's
        vocab = [["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0]]
        vocab += [[sp.id_to_piece(i), sp.get_score(i)] for i in range(3, sp.get_piece_size())] + [["<mask>", 0.0]]
        token = lambda content: {"SpecialToken": {"id": content, "type_id": 0}}
        text = lambda name: {"Sequence": {"id": name, "type_id": 0}}
        space = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
        added = [{"id": i, "content": c, "single_word": False, "lstrip": c == "<mask>", "rstrip": False,
                  "normalized": False, "special": True}
                 for i, c in [*enumerate(["<s>", "<pad>", "</s>", "<unk>"]), (self.mask_id, "<mask>")]]
        return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                "normalizer": {"type": "Sequence", "normalizers": [
                    {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()},
                    {"type": "Replace", "pattern": {"Regex": "\\A +| +\\z"}, "content": ""},
                    {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
                "pre_tokenizer": space, "decoder": space,
                "post_processor": {"type": "TemplateProcessing",
                                   "single": [token("<s>"), text("A"), token("</s>")],
                                   "pair": [token("<s>"), text("A"), token("</s>"), token("</s>"), text("B"),
                                            token("</s>")],
                                   "special_tokens": {"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]},
                                                      "<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}},
                "model": {"type": "Unigram", "unk_id": self.unk_id, "vocab": vocab, "byte_fallback": False}}

    def config(self):
        return {"tokenizer_class": "XLMRobertaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>",
                "cls_token": "<s>", "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>"}

    def content_ids(self):
        return 4, self.mask_id  # the pieces past <s> <pad> </s> <unk>, before <mask>

    def tokenize_words(self, words):
        """Each text's (or word's) content ids, in one sentencepiece call; its piece i is fairseq's i + 1 (<unk>: 3)."""
        return [[i + 1 if i else self.unk_id for i in ids] for ids in self.sp.encode(list(words))]

    def tokenize_with_offsets(self, text):
        """Content ids and their (start, end) character spans in `text`."""
        out = self.sp.encode(text, out_type="offset_mapping")
        return [i + 1 if i else self.unk_id for i in out["ids"]], [tuple(o) for o in out["offsets"]]

    def decode(self, ids):
        special = (self.bos_id, self.pad_id, self.eos_id, self.mask_id)
        return self.sp.decode([i - 1 if i != self.unk_id else 0 for i in ids if i not in special])


def from_tokenizer_json(path):
    """A tokenizer.json's XLM-R Unigram model (rebuilt as its sentencepiece model) or BERT WordPiece model."""
    try:
        spec = json.loads(Path(path).read_text(encoding="utf-8"))
        model, normalizer = spec["model"], spec.get("normalizer") or {}
        kind = model["type"]
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: not a tokenizer.json of the tokenizers library ({e})") from None
    if kind == "WordPiece":  # BERT's steps, or no normalizer: any other would be read as another tokenizer
        pre = (spec.get("pre_tokenizer") or {}).get("type")
        if normalizer.get("type", "BertNormalizer") != "BertNormalizer" or pre != "BertPreTokenizer":
            raise CheckpointError(f"{path}: a WordPiece model with normalizer {normalizer.get('type')} and "
                                  f"pre_tokenizer {pre}; minxlt reads BERT's (BertNormalizer or none, "
                                  "BertPreTokenizer), as mBERT's and LaBSE's: a model tokenized otherwise is not one "
                                  "it implements (docs/encoder.md lists them)")
        bert = normalizer or {"clean_text": False, "handle_chinese_chars": False}
        return WordPieceTokenizer(model["vocab"], lowercase=bert.get("lowercase", False),
                                  strip_accents=bert.get("strip_accents"), clean=bert.get("clean_text", True),
                                  chinese=bert.get("handle_chinese_chars", True), unk=model.get("unk_token", "[UNK]"),
                                  max_word=model.get("max_input_chars_per_word", 100), source=path)
    if kind != "Unigram":
        raise CheckpointError(f"{path}: a {kind} model; minxlt reads Unigram (XLM-R) and WordPiece (BERT) tokenizers")
    steps = normalizer.get("normalizers", [normalizer]) if normalizer.get("type") == "Sequence" else [normalizer]
    charsmaps = [s["precompiled_charsmap"] for s in steps
                 if s.get("type") == "Precompiled" and s.get("precompiled_charsmap")]
    vocab = model["vocab"]
    if not charsmaps or [p for p, _ in vocab[:4]] != ["<s>", "<pad>", "</s>", "<unk>"] or vocab[-1][0] != "<mask>":
        raise CheckpointError(f"{path}: not XLM-R's Unigram tokenizer (its vocabulary <s> <pad> </s> <unk> ... <mask>, "
                              "a precompiled normaliser)")
    pieces = sentencepiece_pieces([p for p, _ in vocab], [s for _, s in vocab])
    return SentencePieceTokenizer(proto=sentencepiece_model(pieces, base64.b64decode(charsmaps[0])))


# sentencepiece_model.proto written by hand (from_tokenizer_json and prepare_default.py build one): its piece types
NORMAL, UNKNOWN, CONTROL = 1, 2, 3


def _varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number, value):
    """One protobuf field: bytes or str length-delimited, float fixed32, int or bool varint."""
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, (bytes, bytearray)):
        return _varint(number << 3 | 2) + _varint(len(value)) + bytes(value)
    if isinstance(value, float):
        return _varint(number << 3 | 5) + struct.pack("<f", value)
    return _varint(number << 3 | 0) + _varint(int(value))


def proto_field(blob, number):
    """The first length-delimited field `number` of a serialized protobuf message (b"" if absent)."""
    i = 0
    while i < len(blob):
        key, i = _read_varint(blob, i)
        kind = key & 7
        if kind == 0:
            _, i = _read_varint(blob, i)
        elif kind == 1 or kind == 5:
            i += 8 if kind == 1 else 4
        elif kind == 2:
            size, i = _read_varint(blob, i)
            if key >> 3 == number:
                return bytes(blob[i:i + size])
            i += size
        else:
            raise CheckpointError(f"not a protobuf message (wire type {kind})")
    return b""


def _read_varint(blob, i):
    value = shift = 0
    while True:
        byte = blob[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if byte < 0x80:
            return value, i


def sentencepiece_pieces(pieces, scores):
    """XLM-R's vocabulary in fairseq's order (<s> <pad> </s> <unk> ... <mask>) in sentencepiece's (<unk> <s> </s>
    ...), so that fairseq's id is sentencepiece's + 1."""
    assert pieces[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and pieces[-1] == "<mask>"
    specials = [("<unk>", 0.0, UNKNOWN), ("<s>", 0.0, CONTROL), ("</s>", 0.0, CONTROL)]
    return specials + [(p, float(s), NORMAL) for p, s in zip(pieces[4:-1], scores[4:-1])]


def sentencepiece_model(pieces, charsmap):
    """A serialized sentencepiece ModelProto: unigram pieces, XLM-R's normaliser settings."""
    out = bytearray()
    for piece, score, kind in pieces:  # ModelProto.pieces = 1: piece = 1, score = 2, type = 3
        out += _field(1, _field(1, piece) + _field(2, score) + _field(3, kind))
    trainer = _field(3, 1) + _field(4, len(pieces))  # model_type = UNIGRAM, vocab_size
    normalizer = (_field(1, "nmt_nfkc") + _field(2, charsmap) + _field(3, True)  # name, charsmap, add_dummy_prefix
                  + _field(4, True) + _field(5, True))  # remove_extra_whitespaces, escape_whitespaces
    return bytes(out + _field(2, trainer) + _field(3, normalizer))


# The characters that the tokenizers library counts as whitespace (Rust's char::is_whitespace).
WHITE_SPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | set(map(chr, range(0x2000, 0x200b)))
CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
       (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))  # the CJK ideographs BERT splits one by one


class WordPieceTokenizer(Tokenizer):
    """BERT's WordPiece tokenizer (mBERT, LaBSE) as the tokenizers library runs it (BertNormalizer,
    BertPreTokenizer, WordPiece); [CLS] A [SEP] B [SEP], the second text in segment 1."""

    def __init__(self, vocab, lowercase=True, strip_accents=None, chinese=True, clean=True, max_word=100, unk="[UNK]",
                 source="WordPiece"):
        self.vocab = dict(vocab) if not isinstance(vocab, dict) else vocab
        self.lowercase, self.strip_accents = lowercase, lowercase if strip_accents is None else strip_accents
        self.chinese, self.clean, self.max_word, self.unk = chinese, clean, max_word, unk
        if missing := [t for t in (unk, "[CLS]", "[SEP]", "[PAD]", "[MASK]") if t not in self.vocab]:
            raise CheckpointError(f"{source}: the WordPiece vocabulary lacks {', '.join(missing)}")
        self.unk_id, self.bos_id, self.eos_id = self.vocab[unk], self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.pad_id, self.mask_id = self.vocab["[PAD]"], self.vocab["[MASK]"]
        self.vocab_size = max(self.vocab.values()) + 1
        self.segment_id = self.eos_id
        rules = [self.lowercase, self.strip_accents, self.chinese, self.clean, self.max_word]
        rules = json.dumps(rules + ([unk] if unk != "[UNK]" else []))  # BERT's [UNK]: the fingerprint of before
        self.state = (rules + "\n".join(sorted(self.vocab, key=self.vocab.get))).encode()  # what decides the ids

    @classmethod
    def from_vocab(cls, directory):
        """vocab.txt (a piece a line, its id the line's number) with tokenizer_config.json's rules, else BERT's."""
        directory = Path(directory)
        try:
            pieces = (directory / "vocab.txt").read_text(encoding="utf-8").split("\n")
            settings = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8")) \
                if (directory / "tokenizer_config.json").is_file() else {}
        except (UnicodeDecodeError, ValueError) as e:
            raise CheckpointError(f"{directory}: vocab.txt or tokenizer_config.json cannot be read ({e})") from None
        vocab = {piece: i for i, piece in enumerate(pieces[:-1] if pieces[-1] == "" else pieces)}
        return cls(vocab, lowercase=settings.get("do_lower_case", True), strip_accents=settings.get("strip_accents"),
                   chinese=settings.get("tokenize_chinese_chars", True), unk=settings.get("unk_token", "[UNK]"),
                   source=directory / "vocab.txt")

    def write(self, directory):
        pieces = sorted(self.vocab, key=self.vocab.get)
        (Path(directory) / "vocab.txt").write_text("".join(p + "\n" for p in pieces), encoding="utf-8")

    def config(self):
        return {"tokenizer_class": "BertTokenizer", "do_lower_case": self.lowercase,
                "strip_accents": self.strip_accents, "tokenize_chinese_chars": self.chinese, "unk_token": self.unk,
                "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"}

    def normalize(self, text):
        """BertNormalizer (control characters out, CJK spaced, accents and case where asked), with positions."""
        chars = [(c, i) for i, c in enumerate(text)]
        if self.clean:
            chars = [(" " if c in WHITE_SPACE else c, i) for c, i in chars
                     if not (c in "\x00\ufffd" or (c not in "\t\n\r" and unicodedata.category(c).startswith("C")))]
        if self.chinese:
            chars = [part for c, i in chars
                     for part in ([(" ", i), (c, i), (" ", i)] if any(a <= ord(c) <= b for a, b in CJK) else [(c, i)])]
        if self.strip_accents:
            chars = [(d, i) for c, i in chars for d in unicodedata.normalize("NFD", c)
                     if unicodedata.category(d) != "Mn"]
        if self.lowercase:  # character by character, as Rust's char::to_lowercase: Greek capital sigma is always σ
            chars = [(d, i) for c, i in chars for d in c.lower()]
        return chars

    def words(self, text):
        """BertPreTokenizer: the normalised text split at whitespace and around punctuation."""
        words = [[]]
        for c, i in self.normalize(text):
            if c in WHITE_SPACE:
                words.append([])
            elif c in string.punctuation or unicodedata.category(c).startswith("P"):
                words += [[(c, i)], []]
            else:
                words[-1].append((c, i))
        return [word for word in words if word]

    def pieces(self, word):
        """Greedy longest-match-first pieces of a word, [(id, start, end)]; [UNK] where none matches."""
        text = "".join(c for c, _ in word)
        if len(text) > self.max_word:
            return [(self.unk_id, 0, len(text))]
        out, start = [], 0
        while start < len(text):
            end = len(text)
            while end > start and ("##" if start else "") + text[start:end] not in self.vocab:
                end -= 1
            if end == start:
                return [(self.unk_id, 0, len(text))]
            out.append((self.vocab[("##" if start else "") + text[start:end]], start, end))
            start = end
        return out

    def tokenize_with_offsets(self, text):
        found = [(piece, (word[start][1], word[end - 1][1] + 1)) for word in self.words(text)
                 for piece, start, end in self.pieces(word)]
        return [piece for piece, _ in found], [offset for _, offset in found]

    def tokenize_words(self, words):
        return [self.tokenize_with_offsets(word)[0] for word in words]

    def decode(self, ids):
        special = (self.bos_id, self.pad_id, self.eos_id, self.mask_id)
        pieces = {i: p for p, i in self.vocab.items()}
        return " ".join(pieces.get(i, "[UNK]") for i in ids if i not in special).replace(" ##", "")

