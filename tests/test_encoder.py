"""The encoder against Hugging Face transformers on tiny random checkpoints with odd, distinct sizes
(hidden 36, 3 heads, ffn 37, 3 layers, vocab 101), so a transposed or misplaced weight fails loudly."""
import json

import pytest
import torch

from conftest import padded_batch, random_layer_norms
from minxlt.checkpoints.weights import CheckpointError
from model import ClassificationHead, Classifier, Config, Encoder

transformers = pytest.importorskip("transformers", reason="parity checks need transformers (requirements-test.txt)")

SIZES = dict(vocab_size=101, hidden_size=36, num_hidden_layers=3, num_attention_heads=3,
             intermediate_size=37, max_position_embeddings=40, initializer_range=0.2)  # sharp attention
LENGTHS = [23, 3, 17, 9, 1 + 1, 11, 5]  # heavy padding: most rows are far shorter than the longest


def hf_model(kind):
    if kind.startswith("xlmr"):
        config = transformers.XLMRobertaConfig(**SIZES, type_vocab_size=1, pad_token_id=1)
        cls = transformers.XLMRobertaForMaskedLM if kind == "xlmr-mlm" else transformers.XLMRobertaModel
    else:
        config = transformers.BertConfig(**SIZES, type_vocab_size=2, pad_token_id=1)
        cls = transformers.BertForMaskedLM if kind == "bert-mlm" else transformers.BertModel
    torch.manual_seed(1)
    model = cls(config).eval()
    with torch.no_grad():  # transformers initialises LayerNorms to 1/0 and biases to 0: randomise them
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model


def hf_outputs(model, ids, mask, token_type_ids=None):
    out = model(input_ids=ids, attention_mask=mask, token_type_ids=token_type_ids, output_hidden_states=True)
    return list(out.hidden_states), getattr(out, "logits", None)


def assert_close(ours, theirs, mask):
    real = mask.bool()
    assert ours.shape == theirs.shape
    assert (ours - theirs)[real].abs().max() <= 1e-5


@pytest.mark.parametrize("kind", ["xlmr", "xlmr-mlm", "bert", "bert-mlm"])
@pytest.mark.parametrize("file_format", ["safetensors", "bin"])
def test_every_layer_matches_transformers(tmp_path, kind, file_format):
    theirs = hf_model(kind)
    theirs.save_pretrained(tmp_path)
    if file_format == "bin":  # the older layout: a pickle of tensors
        (tmp_path / "model.safetensors").unlink()
        torch.save(theirs.state_dict(), tmp_path / "pytorch_model.bin")
    ours = Encoder.from_pretrained(tmp_path).eval()
    assert (ours.lm_head is not None) == kind.endswith("mlm")
    ids, mask = padded_batch(101, LENGTHS)
    types = None
    if kind.startswith("bert"):  # sentence-B token types for the second half of each row
        types = (torch.arange(ids.shape[1]) >= ids.shape[1] // 2).long().expand_as(ids) * mask
    with torch.no_grad():
        expected, logits = hf_outputs(theirs, ids, mask, types)
        states = ours(ids, mask, token_type_ids=types, every_layer=True)
        assert len(states) == len(expected) == 4
        for a, b in zip(states, expected):
            assert_close(a, b, mask)
        assert torch.equal(ours(ids, mask, token_type_ids=types), states[-1])
        if logits is not None:
            assert_close(ours.mlm_logits(states[-1]), logits, mask)


def test_pairs_match_transformers(tmp_path):
    theirs = hf_model("xlmr")
    theirs.save_pretrained(tmp_path)
    ours = Encoder.from_pretrained(tmp_path).eval()
    a, _ = padded_batch(101, [6, 9, 4])
    b, _ = padded_batch(101, [8, 3, 10])
    rows = [torch.cat([x[x.ne(1)], y[y.ne(1)]]) for x, y in zip(a, b)]  # <s> A </s></s> B </s>
    ids = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=1)
    mask = ids.ne(1).long()
    with torch.no_grad():
        assert_close(ours(ids, mask), theirs(input_ids=ids, attention_mask=mask).last_hidden_state, mask)


@pytest.mark.parametrize("kind", ["xlmr-mlm", "bert", "bert-mlm"])
def test_save_pretrained_loads_back_in_transformers(tmp_path, kind):
    theirs = hf_model(kind)
    theirs.save_pretrained(tmp_path / "original")
    Encoder.from_pretrained(tmp_path / "original").save_pretrained(tmp_path / "ours")
    back = type(theirs).from_pretrained(tmp_path / "ours").eval()
    ids, mask = padded_batch(101, LENGTHS)
    with torch.no_grad():
        for a, b in zip(hf_outputs(back, ids, mask)[0], hf_outputs(theirs, ids, mask)[0]):
            assert torch.equal(a, b)
        if kind.endswith("mlm"):
            assert torch.equal(hf_outputs(back, ids, mask)[1], hf_outputs(theirs, ids, mask)[1])
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["model_type"] == kind.split("-")[0].replace("xlmr", "xlm-roberta")


def test_sharded_checkpoint(tmp_path):
    theirs = hf_model("xlmr")
    theirs.save_pretrained(tmp_path, max_shard_size="40KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    ours = Encoder.from_pretrained(tmp_path).eval()
    ids, mask = padded_batch(101, LENGTHS)
    with torch.no_grad():
        assert_close(ours(ids, mask), theirs(input_ids=ids, attention_mask=mask).last_hidden_state, mask)
    # an older sharded .bin beside a newer single model.safetensors (transformers' save leaves the .bin): the
    # safetensors are read, as transformers reads them
    older = tmp_path / "older"
    weights = {k: v + 0.5 if v.is_floating_point() else v for k, v in theirs.state_dict().items()}  # other weights
    older.mkdir()
    shards = {key: f"pytorch_model-0000{1 + i % 2}-of-00002.bin" for i, key in enumerate(weights)}
    for name in set(shards.values()):
        torch.save({key: weights[key] for key, shard in shards.items() if shard == name}, older / name)
    (older / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {}, "weight_map": shards}))
    theirs.save_pretrained(older)
    assert (older / "model.safetensors").exists() and (older / "pytorch_model.bin.index.json").exists()
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=mask).last_hidden_state
        assert_close(Encoder.from_pretrained(older).eval()(ids, mask), expected, mask)
        (older / "model.safetensors").unlink()  # the .bin alone: the older weights, read too
        assert not torch.allclose(Encoder.from_pretrained(older).eval()(ids, mask), expected, atol=1e-3)


def test_classification_head_matches_roberta_head():
    config = transformers.XLMRobertaConfig(**SIZES, num_labels=5)
    theirs = transformers.models.xlm_roberta.modeling_xlm_roberta.XLMRobertaClassificationHead(config).eval()
    ours = ClassificationHead(36, 5).eval()
    ours.load_state_dict(theirs.state_dict())  # same names: dense, out_proj
    hidden = torch.randn(4, 7, 36)
    with torch.no_grad():
        assert torch.allclose(ours(hidden), theirs(hidden), atol=1e-6)


def test_filter_s_relu_head_and_the_pooler_s_sentence_vector_written_out():
    # FILTER's classifier (its modeling_xlm_roberta.py): dropout, dense, ReLU, dropout, dense over <s>
    head = ClassificationHead(36, 5, style="relu").eval()
    hidden = torch.randn(4, 7, 36)
    expected = torch.relu(hidden[:, 0] @ head.dense.weight.T + head.dense.bias) @ head.out_proj.weight.T + head.out_proj.bias
    assert torch.allclose(head(hidden), expected, atol=1e-5) and not torch.allclose(ClassificationHead(36, 5).eval()(hidden), expected)
    # --pooling pooler: <s> through the checkpoint's pooler, dense + tanh (BERT's pooled output, LaBSE's sentence embedding)
    encoder = Encoder(Config(vocab_size=101, hidden_size=36, num_layers=2, num_heads=3, ffn_size=37, max_positions=40), pooler=True)
    classifier = Classifier(random_layer_norms(encoder), 3, "linear", "pooler").eval()
    ids, mask = padded_batch(101, [7, 4, 2])
    logits, sentence = classifier(ids, mask)
    first = encoder(ids, mask)[:, 0]
    pooled = torch.tanh(first @ encoder.pooler["dense"].weight.T + encoder.pooler["dense"].bias)
    assert torch.allclose(sentence, pooled, atol=1e-6) and torch.allclose(logits, classifier.head.out_proj(pooled), atol=1e-6)
    with pytest.raises(CheckpointError, match="--pooling pooler reads the checkpoint's pooler"):
        Classifier(tiny_encoder(), 3, "linear", "pooler")


def tiny_encoder(**overrides):
    config = Config(vocab_size=101, hidden_size=36, num_layers=3, num_heads=3, ffn_size=37, max_positions=40, **overrides)
    return random_layer_norms(Encoder(config)).eval()


def test_pieces_compose_to_the_forward():
    encoder = tiny_encoder()
    ids, mask = padded_batch(101, LENGTHS)
    with torch.no_grad():
        h = encoder.embed(ids)
        for layer in encoder.layers:
            h = layer(h, mask)
        assert torch.equal(h, encoder(ids, mask))


def test_attention_over_itself_as_context_and_written_out():
    layer = tiny_encoder().layers[0]
    x = torch.randn(5, 9, 36)
    _, mask = padded_batch(101, [9, 4, 7, 2, 5])
    with torch.no_grad():
        self_attention = layer.attention(x, mask)
        as_context = layer.attention(x, mask, context=x, context_mask=mask)
        written_out, probs = layer.attention(x, mask, return_probs=True)
    assert torch.allclose(self_attention, as_context, atol=1e-6)
    assert torch.allclose(self_attention, written_out, atol=1e-5)
    assert probs.shape == (5, 3, 9, 9)
    assert torch.allclose(probs.sum(-1), torch.ones(5, 3, 9))
    assert (probs * (1 - mask[:, None, None, :])).abs().max() == 0  # padded keys get no attention


def test_cross_attention_to_a_longer_context():
    layer = tiny_encoder().layers[1]
    x, context = torch.randn(2, 4, 36), torch.randn(2, 11, 36)
    context_mask = torch.tensor([[1] * 11, [1] * 6 + [0] * 5])
    with torch.no_grad():
        out, probs = layer.attention(x, None, context=context, context_mask=context_mask, return_probs=True)
        # padding in the context changes nothing for real keys
        context[1, 6:] = torch.randn(5, 36)
        again = layer.attention(x, None, context=context, context_mask=context_mask)
    assert out.shape == (2, 4, 36) and probs.shape == (2, 3, 4, 11)
    assert torch.allclose(out, again, atol=1e-6)


@pytest.mark.parametrize("cross", [False, True])
def test_the_stacked_projections_give_the_three_products(cross):
    """q, k, v from one product over the stacked weights (over a context, q and one product for k and v): attention's
    values and the same gradients for each weight and bias as from the three nn.Linear products, from fewer products."""
    layer = tiny_encoder().layers[2]
    x = torch.randn(3, 7, 36)
    context = torch.randn(3, 10, 36) if cross else x

    def heads(t):
        return t.view(3, -1, 3, 12).transpose(1, 2)  # (B, N, T, D)

    def three_products():  # the attention written out over layer.query, layer.key and layer.value
        out = torch.nn.functional.scaled_dot_product_attention(heads(layer.query(x)), heads(layer.key(context)),
                                                               heads(layer.value(context)))
        return layer.attn_out(out.transpose(1, 2).reshape(3, 7, 36))

    results = []
    for attention in (three_products, lambda: layer.attention(x, None, context=context if cross else None)):
        layer.zero_grad()
        with CountedLinear() as products:
            out = attention()
        (out * 1.5).sin().sum().backward()
        grads = {name: p.grad.clone() for name, p in layer.named_parameters() if p.grad is not None}
        results.append((out, grads, products.count))
    (three, grads_three, count_three), (one, grads_one, count_one) = results
    assert (count_three, count_one) == (4, 3 if cross else 2)  # attn_out's product in each
    assert three.shape == one.shape and torch.allclose(three, one, atol=1e-6)
    names = {f"{p}.{w}" for p in ("query", "key", "value", "attn_out") for w in ("weight", "bias")}
    assert grads_three.keys() == grads_one.keys() == names
    assert all(torch.allclose(grads_one[name], grad, rtol=1e-5, atol=1e-5) for name, grad in grads_three.items())


class CountedLinear(torch.overrides.TorchFunctionMode):
    """Counts the matrix products of torch.nn.functional.linear made inside it."""
    count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.nn.functional.linear
        return func(*args, **(kwargs or {}))


def test_roberta_positions_skip_padding():
    ids = torch.tensor([[0, 5, 6, 2, 1, 1], [1, 1, 0, 7, 8, 2]])  # right and left padding
    roberta, bert = tiny_encoder(), tiny_encoder(position_offset=0, model_type="bert", type_vocab_size=2)
    for encoder, positions in ((roberta, [[2, 3, 4, 5, 1, 1], [1, 1, 2, 3, 4, 5]]), (bert, [list(range(6))] * 2)):
        with torch.no_grad():  # embed's positions: these, and no others, give its embeddings
            assert torch.equal(encoder.embed(ids), encoder.embeddings(ids, torch.tensor(positions)))
            assert not torch.equal(encoder.embed(ids), encoder.embeddings(ids, torch.tensor(positions).roll(1, 1)))


def test_too_long_input_says_what_to_change():
    encoder = tiny_encoder()
    with pytest.raises(ValueError, match="max-length"):
        encoder(torch.zeros(1, 39, dtype=torch.long))


def test_lm_head_can_be_added_and_is_tied():
    encoder = tiny_encoder()
    with pytest.raises(ValueError, match="add_lm_head"):
        encoder.mlm_logits(torch.zeros(1, 2, 36))
    encoder.add_lm_head()
    logits = encoder.mlm_logits(torch.randn(1, 2, 36))
    logits.sum().backward()
    assert logits.shape == (1, 2, 101)
    assert encoder.embeddings.word.weight.grad is not None  # the projection is the embedding matrix


def test_attention_kernels_chosen_per_device(monkeypatch):
    """On CUDA, cuDNN attention (a new plan for every padded shape) is off and FlashAttention and
    memory-efficient attention on; on the CPU PyTorch's choice stands. The switches are global
    flags, set here without a GPU."""
    from minxlt.parallel import distributed
    monkeypatch.delenv("RANK", raising=False)  # one process: setup chooses the kernels alone
    backends = torch.backends.cuda
    enabled = lambda: (backends.flash_sdp_enabled(), backends.mem_efficient_sdp_enabled(), backends.cudnn_sdp_enabled(),
                       backends.math_sdp_enabled())
    before = enabled()
    try:
        backends.enable_cudnn_sdp(True)
        assert distributed.setup("cpu") == (0, 1, "cpu") and backends.cudnn_sdp_enabled()  # left as it was
        assert distributed.setup("cuda:0") == (0, 1, "cuda:0") and enabled() == (True, True, False, True)
    finally:
        for enable, on in zip((backends.enable_flash_sdp, backends.enable_mem_efficient_sdp, backends.enable_cudnn_sdp,
                               backends.enable_math_sdp), before):
            enable(on)


# --- XLM-R XL and XXL: the pre-LN layout --------------------------------------------------------

def hf_xl(masked_lm=False, **config):
    config = transformers.XLMRobertaXLConfig(**SIZES, type_vocab_size=1, pad_token_id=1, **config)
    torch.manual_seed(2)
    model = (transformers.XLMRobertaXLForMaskedLM if masked_lm else transformers.XLMRobertaXLModel)(config).eval()
    with torch.no_grad():  # LayerNorms and biases randomised, as hf_model does
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model


@pytest.mark.parametrize("masked_lm", [False, True], ids=["model", "masked-lm"])
def test_pre_ln_encoder_matches_transformers_xlm_roberta_xl(tmp_path, masked_lm):
    theirs = hf_xl(masked_lm)
    theirs.save_pretrained(tmp_path)
    ours = Encoder.from_pretrained(tmp_path).eval()
    assert ours.config.pre_norm and ours.norm is not None and not list(ours.embeddings.norm.parameters())
    ids, mask = padded_batch(101, LENGTHS)
    with torch.no_grad():
        expected, logits = hf_outputs(theirs, ids, mask)
        states = ours(ids, mask, every_layer=True)
        assert len(states) == len(expected) == 4
        for a, b in zip(states, expected):
            assert_close(a, b, mask)
        assert_close(ours(ids, mask), theirs(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1], mask)
        if masked_lm:
            assert_close(ours.mlm_logits(states[-1]), logits, mask)


def test_xxl_config_that_says_xlm_roberta_is_read_as_xl_sharded(tmp_path):
    """XXL on the hub: "model_type": "xlm-roberta" with "architectures": ["XLMRobertaXLForMaskedLM"], in shards."""
    theirs = hf_xl(masked_lm=True)
    theirs.save_pretrained(tmp_path, max_shard_size="40KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    hf = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(hf, model_type="xlm-roberta", architectures=["XLMRobertaXLForMaskedLM"])))
    ours = Encoder.from_pretrained(tmp_path).eval()
    ids, mask = padded_batch(101, LENGTHS)
    with torch.no_grad():
        assert_close(ours.mlm_logits(ours(ids, mask)), theirs(input_ids=ids, attention_mask=mask).logits, mask)
    (tmp_path / "config.json").write_text(json.dumps(dict(hf, model_type="xlm-roberta", architectures=["XLMRobertaForMaskedLM"])))
    assert Encoder.from_pretrained(tmp_path).config.pre_norm  # the weights' names tell, too


def test_pre_ln_save_pretrained_loads_back_in_transformers(tmp_path):
    theirs = hf_xl(masked_lm=True)
    theirs.save_pretrained(tmp_path / "original")
    Encoder.from_pretrained(tmp_path / "original").save_pretrained(tmp_path / "ours")
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["model_type"] == "xlm-roberta-xl"
    back = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "ours").eval()
    assert type(back).__name__ == "XLMRobertaXLForMaskedLM"
    ids, mask = padded_batch(101, LENGTHS)
    with torch.no_grad():
        assert torch.equal(back(input_ids=ids, attention_mask=mask).logits, theirs(input_ids=ids, attention_mask=mask).logits)


def test_post_ln_config_with_pre_ln_weights_and_the_reverse_are_refused(tmp_path):
    from minxlt.checkpoints.weights import CheckpointError
    hf_model("xlmr").save_pretrained(tmp_path)
    hf = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(hf, model_type="xlm-roberta-xl")))
    with pytest.raises(CheckpointError, match=r"the weights do not match config.json \(xlm-roberta-xl, 3 layers\)"):
        Encoder.from_pretrained(tmp_path)


@pytest.mark.parametrize("kind", ["xl", "xlmr"])
def test_a_large_model_is_written_in_shards_with_an_index_that_transformers_reads(tmp_path, kind):
    theirs = hf_xl(masked_lm=True) if kind == "xl" else hf_model("xlmr-mlm")
    theirs.save_pretrained(tmp_path / "original")
    ours = Encoder.from_pretrained(tmp_path / "original")
    ours.save_pretrained(tmp_path / "ours")  # small: one file
    ours.save_pretrained(tmp_path / "ours", shard_bytes=20_000)  # again, over it, in shards: the single file goes
    index = json.loads((tmp_path / "ours" / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) > 3 and files[0] == f"model-00001-of-{len(files):05d}.safetensors" and not (tmp_path / "ours" / "model.safetensors").exists()
    assert sorted(p.name for p in (tmp_path / "ours").glob("model-*.safetensors")) == files
    back = type(theirs).from_pretrained(tmp_path / "ours").eval()
    again = Encoder.from_pretrained(tmp_path / "ours").eval()
    ids, mask = padded_batch(101, LENGTHS)
    with torch.no_grad():
        assert torch.equal(back(input_ids=ids, attention_mask=mask).logits, theirs(input_ids=ids, attention_mask=mask).logits)
        assert torch.equal(again(ids, mask), ours.eval()(ids, mask))
