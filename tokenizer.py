"""XLM-R's tokenizer: a sentencepiece model with fairseq's ids, special tokens, longest-first
truncation of pairs, word-level encoding (for tagging) and character offsets (for QA).
"""
import shutil
from pathlib import Path

import sentencepiece
import torch

from weights import CheckpointError


class Tokenizer:
    """XLM-R's tokenizer over a sentencepiece model, with fairseq's ids:
    <s>=0 <pad>=1 </s>=2 <unk>=3, sentencepiece piece i -> i+1, <mask> last."""

    bos_id, pad_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, model_file):
        self.model_file = Path(model_file)
        try:
            self.sp = sentencepiece.SentencePieceProcessor(model_file=str(model_file))
        except (RuntimeError, OSError) as e:
            raise CheckpointError(f"{model_file}: not a sentencepiece model ({str(e).strip().splitlines()[0]})") from None
        if self.sp.get_piece_size() < 1 or self.sp.id_to_piece(0) != "<unk>" or not self.sp.is_unknown(0):
            raise CheckpointError(f"{model_file}: piece 0 must be <unk> as in XLM-R's sentencepiece model")
        self.mask_id = self.sp.get_piece_size() + 1
        self.vocab_size = self.mask_id + 1

    @classmethod
    def from_pretrained(cls, directory):
        path = Path(directory) / "sentencepiece.bpe.model"
        if not path.exists():
            raise CheckpointError(f"{path} not found: minxlt tokenizes with XLM-R's sentencepiece model, "
                                  "which a checkpoint directory carries as sentencepiece.bpe.model")
        return cls(path)

    def save_pretrained(self, directory):
        Path(directory).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.model_file, Path(directory) / "sentencepiece.bpe.model")

    def _fairseq(self, spm_ids):
        return [i + 1 if i else self.unk_id for i in spm_ids]  # sentencepiece's <unk> is its piece 0

    def tokenize(self, text):
        """Content ids of one text (no special tokens)."""
        return self._fairseq(self.sp.encode(text))

    def tokenize_with_offsets(self, text):
        """Content ids and (start, end) character spans into `text`, for mapping answers back."""
        out = self.sp.encode(text, out_type="offset_mapping")
        return self._fairseq(out["ids"]), [tuple(o) for o in out["offsets"]]

    def encode(self, text, pair=None, max_length=None):
        """<s> A </s>, or <s> A </s></s> B </s>, truncated longest-first to max_length tokens."""
        return self.add_special_tokens(self.tokenize(text), None if pair is None else self.tokenize(pair), max_length)

    def add_special_tokens(self, a, b=None, max_length=None):
        """Wrap content ids in special tokens, truncating (longest first for pairs) to max_length."""
        if max_length is not None:
            a, b = truncate(a, b, max_length - (2 if b is None else 4))
        if b is None:
            return [self.bos_id, *a, self.eos_id]
        return [self.bos_id, *a, self.eos_id, self.eos_id, *b, self.eos_id]

    def encode_words(self, words, max_length=None):
        """Pre-split words -> (ids with specials, word index per token, None for specials).
        A word that normalises to nothing (e.g. a lone zero-width space) gets no token."""
        pieces = self.sp.encode(list(words)) if words else []
        ids, word_ids = [self.bos_id], [None]
        for w, spm_ids in enumerate(pieces):
            ids += self._fairseq(spm_ids)
            word_ids += [w] * len(spm_ids)
        if max_length is not None and len(ids) + 1 > max_length:
            ids, word_ids = ids[:max_length - 1], word_ids[:max_length - 1]
        return ids + [self.eos_id], word_ids + [None]

    def encode_batch(self, texts, pairs=None, max_length=None):
        """encode() over a list of texts (and pairs), in one sentencepiece call each."""
        a = [self._fairseq(x) for x in self.sp.encode(list(texts))]
        b = [None] * len(a) if pairs is None else [self._fairseq(x) for x in self.sp.encode(list(pairs))]
        return [self.add_special_tokens(x, y, max_length) for x, y in zip(a, b)]

    def batch(self, texts, pairs=None, max_length=512):
        """Encode and pad a list of texts (or text pairs): (input_ids, attention_mask), each (B, T)."""
        return self.pad(self.encode_batch(texts, pairs, max_length))

    def pad(self, sequences):
        """Pad id lists to the longest: (input_ids, attention_mask) LongTensors of (B, T)."""
        T = max(len(s) for s in sequences)
        input_ids = torch.full((len(sequences), T), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(sequences), T), dtype=torch.long)
        for i, s in enumerate(sequences):
            input_ids[i, :len(s)] = torch.tensor(s, dtype=torch.long)
            attention_mask[i, :len(s)] = 1
        return input_ids, attention_mask

    def decode(self, ids):
        special = (self.bos_id, self.pad_id, self.eos_id, self.mask_id)
        return self.sp.decode([i - 1 if i != self.unk_id else 0 for i in ids if i not in special])


def truncate(a, b, budget):
    """Fit content ids into `budget` tokens. Pairs follow Hugging Face's longest-first rule: the longer
    is cut to what the shorter leaves; if both must give way they split the budget, the longer
    keeping the odd token (the second one when lengths are equal)."""
    budget = max(budget, 0)
    if b is None:
        return a[:budget], None
    if len(a) + len(b) <= budget:
        return a, b
    short = min(len(a), len(b))
    n_short, n_long = short, (short if short > budget else max(short, budget - short))
    if n_short + n_long > budget:
        n_short, n_long = budget // 2, budget // 2 + budget % 2
    return (a[:n_long], b[:n_short]) if len(a) > len(b) else (a[:n_short], b[:n_long])
