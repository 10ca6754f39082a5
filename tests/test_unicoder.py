"""Unicoder's five pre-training tasks: each batch builder on small examples, the word-recovery
attention against Eq. 1-2 written out, and each task's loss falling when one batch is overfitted."""
import json

import pytest
import torch

import unicoder
from conftest import free_port, join_process_group_env
from minxlt import tasks
from minxlt.text.tokenizer import Tokenizer
from model import Encoder


@pytest.fixture
def tiny(tiny_model_dir):
    torch.manual_seed(0)
    return Encoder.from_pretrained(tiny_model_dir, dropout=0.0, attention_dropout=0.0), Tokenizer.from_pretrained(tiny_model_dir)


def demo_pairs(tokenizer, lang="de", n=8):
    """Parallel sentences of the bundled corpus, as the method sees them."""
    task = tasks.load_task("demo", targets=[lang])
    return unicoder.parallel_pairs(task, "train", tokenizer, 64)[:n]


def test_masking_rate_positions_and_replacements(tiny):
    _, tokenizer = tiny
    rows = [[0] + list(range(10, 10 + n)) + [2] for n in torch.randint(5, 60, (400,)).tolist()]
    generator = torch.Generator().manual_seed(0)
    inputs, mask, labels = unicoder.mask_tokens(rows, tokenizer, generator)
    ids, _ = tokenizer.pad(rows)
    content = (mask == 1) & (ids != 0) & (ids != 2)
    chosen = labels != -100
    assert not (chosen & ~content).any()                        # never <s>, </s> or padding
    assert torch.equal(labels[chosen], ids[chosen])              # labels are the original tokens
    assert torch.equal(inputs[~chosen], ids[~chosen])            # the rest is untouched
    assert chosen.sum() / content.sum() == pytest.approx(0.15, abs=0.01)
    masked = (inputs[chosen] == tokenizer.mask_id).float().mean()
    kept = (inputs[chosen] == ids[chosen]).float().mean()
    assert masked == pytest.approx(0.8, abs=0.03) and kept == pytest.approx(0.1, abs=0.03)
    assert chosen.any(1).all()                                   # every row has a loss
    again = unicoder.mask_tokens(rows, tokenizer, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(again, (inputs, mask, labels)))  # the same seed, the same masks


def test_word_recovery_attention_is_eq_2_and_mixes_target_embeddings(tiny):
    encoder, tokenizer = tiny
    model = unicoder.Unicoder(encoder)
    with torch.no_grad():
        model.recovery.weight.normal_()
    batch = unicoder.make_batch("word_recovery", demo_pairs(tokenizer, n=4), [1.0] * 4, torch.Generator().manual_seed(1),
                                tokenizer)
    x, y = encoder.embeddings.word(batch["x_ids"]), encoder.embeddings.word(batch["y_ids"])
    B, Tx, H = x.shape
    Ty = y.shape[1]
    # Eq. 2 as written: W applied to the concatenation [x_i; y_j; x_i * y_j].
    concatenated = torch.cat([x[:, :, None].expand(B, Tx, Ty, H), y[:, None].expand(B, Tx, Ty, H),
                              x[:, :, None] * y[:, None]], dim=-1)
    expected = model.recovery(concatenated).squeeze(-1)
    assert torch.allclose(model.attention_scores(x, y), expected, atol=1e-5)
    recovered = model.recovered_inputs(batch["x_ids"], batch["x_content"], batch["y_ids"], batch["y_content"])
    assert recovered.shape == (B, Tx, H)
    # Eq. 1: each content token of X is a convex combination of Y's content-token embeddings.
    weights = expected.masked_fill(~batch["y_content"][:, None], float("-inf")).softmax(-1)
    assert torch.all(weights[~batch["y_content"][:, None].expand(B, Tx, Ty)] == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(B, Tx))
    content = batch["x_content"]
    assert torch.allclose(recovered[content], (weights @ y)[content], atol=1e-5)
    assert torch.equal(recovered[~content], x[~content])        # <s>, </s>, padding keep their embeddings
    # All of X is recovered at once: every content token is a label.
    assert torch.equal(batch["labels"] != -100, content) and torch.equal(batch["labels"][content], batch["x_ids"][content])


def test_paraphrase_batch_is_balanced_and_negatives_are_not_translations(tiny):
    encoder, tokenizer = tiny
    pairs = demo_pairs(tokenizer, n=12)
    unicoder.mine_hard_negatives(pairs, lambda rows: torch.stack([torch.bincount(torch.tensor(r), minlength=tokenizer.vocab_size)
                                                                  for r in rows]).float())
    assert all(p.negative is not None and p.negative != p.target for p in pairs)
    batch = unicoder.make_batch("paraphrase", pairs, [1.0] * 12, torch.Generator(), tokenizer)
    assert batch["labels"].tolist() == [1, 0] * 12
    for p, positive, negative in zip(pairs, batch["input_ids"][0::2], batch["input_ids"][1::2]):
        translation = tokenizer.add_special_tokens(p.source[1:-1], p.target[1:-1])
        assert positive[:len(translation)].tolist() == translation
        assert negative[:len(translation)].tolist() != translation
    padded = unicoder.make_batch("paraphrase", pairs[:2], [1.0, 0.0], torch.Generator(), tokenizer)
    assert padded["labels"].tolist() == [1, 0, -100, -100]       # a DDP padding row counts in neither class


def test_paraphrase_negative_without_a_mined_one_stays_in_the_language(tiny):
    _, tokenizer = tiny
    pair = lambda i, lang: unicoder.Pair(f"{lang}:{i}", lang, [0, 10 + i, 2], [0, 100 + i + (50 if lang == "zh" else 0), 2])
    pairs = [pair(0, "de"), pair(1, "zh"), pair(2, "de")]        # no mined negatives
    batch = unicoder.make_batch("paraphrase", pairs, [1.0] * 3, torch.Generator(), tokenizer)
    rows = [row[row != tokenizer.pad_id].tolist() for row in batch["input_ids"]]
    negatives = [row[-2] for row, label in zip(rows, batch["labels"].tolist()) if label == 0]
    assert negatives == [102, 100]                                # de's negatives are de translations
    assert batch["labels"].tolist() == [1, 0, 1, 1, 0]            # zh has no other zh translation: its positive only


def test_hard_negative_is_the_most_similar_other_translation():
    p = lambda i, target: unicoder.Pair(f"de:{i}", "de", [0, 10 + i, 2], target)
    pairs = [p(0, [0, 50, 2]), p(1, [0, 51, 2]), p(2, [0, 52, 2]), p(3, [0, 50, 2])]  # 3 repeats 0's translation
    vectors = {10: [1, 0], 11: [0, 1], 12: [1, 0.1], 13: [0, 1],   # sources
               50: [1, 0], 51: [0, 1], 52: [0.9, 0.2]}             # translations
    unicoder.mine_hard_negatives(pairs, lambda rows: torch.tensor([vectors[r[1]] for r in rows]))
    # Source 0 is closest to translations 50 (its own, and 3's copy of it) and then 52.
    assert [q.negative for q in pairs] == [[0, 52, 2], [0, 52, 2], [0, 50, 2], [0, 51, 2]]


def test_cross_lingual_document_alternates_and_is_truncated():
    pairs = [unicoder.Pair(str(i), "de", [0, 100 + i, 2], [0, 200 + i, 2]) for i in range(6)]
    # Sentences 1, 3, 5 in the source language, 2, 4, 6 (even-indexed) in their translations.
    assert unicoder.document(pairs, 256) == [0, 100, 201, 102, 203, 104, 205, 2]
    assert unicoder.document(pairs[3:], 256) == [0, 103, 204, 105, 2]
    long = [unicoder.Pair(str(i), "de", [0] + [100 + i] * 100 + [2], [0] + [200 + i] * 100 + [2]) for i in range(5)]
    doc = unicoder.document(long, 256)
    assert len(doc) == 256 and doc[0] == 0 and doc[-1] == 2
    assert doc[1:101] == [100] * 100 and doc[101:201] == [201] * 100 and doc[201:255] == [102] * 54


def test_parallel_pairs_follow_corpus_order_per_language(tiny):
    _, tokenizer = tiny
    task = tasks.load_task("demo", targets=["de", "fr"])
    pairs = unicoder.parallel_pairs(task, "train", tokenizer, 64)
    assert len(pairs) == len(task.train["de"]) + len(task.train["fr"])
    german = [p for p in pairs if p.lang == "de"]
    assert pairs[0].document == unicoder.document(german[:unicoder.DOCUMENT_SENTENCES], 64)  # documents stay in one language pair
    source = {e.id: e.text for e in task.train["en"]}
    german = {e.id: e.text for e in task.train["de"]}
    for p in pairs[:20]:
        id = p.id.partition(":")[2]
        assert p.source == tokenizer.encode(source[id], max_length=32) and p.target == tokenizer.encode(german[id], max_length=32)
        assert len(p.source) + len(p.target) <= 64  # a pair fits max_length


@pytest.mark.parametrize("task", unicoder.TASKS)
def test_each_task_loss_falls_when_overfitting_one_batch(tiny, task):
    encoder, tokenizer = tiny
    torch.manual_seed(0)
    model = unicoder.Unicoder(encoder)
    pairs = demo_pairs(tokenizer, n=8)
    for i, pair in enumerate(pairs):
        pair.negative = pairs[(i + 3) % len(pairs)].target
    batch = unicoder.make_batch(task, pairs, [1.0] * 8, torch.Generator().manual_seed(0), tokenizer)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        loss = model(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


def pretrain_worker(rank, world_size, port, model_dir, out):
    import train
    join_process_group_env(rank, world_size, port)
    train.main(["--model", str(model_dir), "--method", "unicoder", "--target-langs", "de", "--batch-size", "8",
                "--max-steps", "5", "--eval-every", "5", "--log-every", "1", "--no-alignment", "--out", str(out)])


def test_pretraining_run_gives_a_checkpoint_other_methods_start_from(tmp_path, tiny_model_dir):
    import train
    out = tmp_path / "unicoder"
    train.main(["--model", str(tiny_model_dir), "--method", "unicoder", "--target-langs", "de,zh", "--batch-size", "8",
                "--max-steps", "5", "--eval-every", "5", "--log-every", "1", "--out", str(out)])
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [next(k for k in r if k in unicoder.TASKS) for r in log if "loss" in r] == list(unicoder.TASKS)  # one task per step, in turn
    results = json.loads((out / "results.json").read_text())
    assert set(results["alignment"]) == {"de", "zh"} and "cka_before" in results["alignment"]["de"]
    encoder = Encoder.from_pretrained(out / "best")
    assert encoder.lm_head is not None                           # saved with the LM head it trained
    # Under DDP each step trains one task, and the other tasks' heads get no gradient.
    port = free_port()
    torch.multiprocessing.spawn(pretrain_worker, args=(2, port, tiny_model_dir, tmp_path / "ddp"), nprocs=2)
    assert len((tmp_path / "ddp" / "log.jsonl").read_text().splitlines()) == 5 + 1 and (tmp_path / "ddp" / "best").is_dir()
    train.main(["--model", str(out / "best"), "--method", "zero-shot", "--target-langs", "de", "--batch-size", "8",
                "--max-steps", "2", "--eval-every", "2", "--no-alignment", "--out", str(tmp_path / "fine-tuned")])
    assert "de" in json.loads((tmp_path / "fine-tuned" / "results.json").read_text())


def test_parallel_files(tmp_path):
    (tmp_path / "corpus.de").write_text("Hallo Welt\nGuten Morgen\n")
    (tmp_path / "corpus.en").write_text("Hello world\nGood morning\n")
    [(target, source), _] = unicoder.read_parallel_files([f"{tmp_path}/corpus.de,{tmp_path}/corpus.en"])
    assert (target.lang, target.text, source.lang, source.text) == ("de", "Hallo Welt", "en", "Hello world")
    with pytest.raises(tasks.InputError, match="TARGET,SOURCE"):
        unicoder.read_parallel_files([f"{tmp_path}/corpus.de"])
    (tmp_path / "corpus.en").write_text("Hello world\n")
    with pytest.raises(tasks.DataError, match="not line-aligned"):
        unicoder.read_parallel_files([f"{tmp_path}/corpus.de,{tmp_path}/corpus.en"])


def test_a_parallel_line_of_no_token_is_refused_naming_its_line(tiny, tmp_path):
    _, tokenizer = tiny
    (tmp_path / "corpus.de").write_text("Hallo Welt\n\u200b\n")  # a zero-width space: no token, and no NaN loss
    (tmp_path / "corpus.en").write_text("Hello world\nGood morning\n")
    extra = unicoder.read_parallel_files([f"{tmp_path}/corpus.de,{tmp_path}/corpus.en"])
    with pytest.raises(tasks.InputError, match=r"corpus.de:2: '.u200b' has no token but the special ones"):
        unicoder.parallel_pairs(tasks.load_task("demo", targets=["de"]), "train", tokenizer, 64, extra)


def test_mean_word_embeddings_average_the_content_tokens(tiny):
    encoder, _ = tiny
    E = encoder.embeddings.word.weight
    vectors = unicoder.mean_word_embeddings(encoder, [[0, 5, 9, 2], [0, 7, 2]])
    assert torch.allclose(vectors, torch.stack([(E[5] + E[9]) / 2, E[7]]))  # <s> and </s> left out
