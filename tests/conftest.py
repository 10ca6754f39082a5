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


def padded_batch(vocab_size, lengths, pad_id=1, bos_id=0, eos_id=2, low=4):
    """Random ids (B, T) shaped like real encoder input: <s> ... </s>, then padding."""
    T = max(lengths)
    ids = torch.full((len(lengths), T), pad_id, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(low, vocab_size, (n,))
        ids[i, 0], ids[i, n - 1] = bos_id, eos_id
    return ids, ids.ne(pad_id).long()
