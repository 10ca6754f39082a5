"""The encoder: XLM-R (RoBERTa layout) and BERT-layout multilingual encoders as one module,
its task heads, and Hugging Face checkpoint loading and saving (the tokenizer is tokenizer.py).

Shapes: B batch, T tokens (S for a second sequence), H hidden, N heads, D = H / N, V vocabulary.
"""
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from tokenizer import Tokenizer
from weights import CheckpointError, load_checkpoint_weights, load_safetensors, save_safetensors


def choose_attention(device):
    """Choose the attention kernels (F.scaled_dot_product_attention's backends) for a device, and
    return the names of those enabled. On CUDA: FlashAttention and memory-efficient attention (the
    kernel for padding masks), and not cuDNN's, which PyTorch picks first when there is a mask and
    which builds a new execution plan for every new padded shape (about 25 ms each; with dynamic
    padding nearly every batch has a new shape). Elsewhere PyTorch's own choice stands."""
    backends = torch.backends.cuda
    if str(device).startswith("cuda"):
        backends.enable_cudnn_sdp(False)
        backends.enable_flash_sdp(True)
        backends.enable_mem_efficient_sdp(True)
        backends.enable_math_sdp(True)  # the fallback for what the others cannot do (e.g. fp32 with dropout on old GPUs)
    return [name for name, enabled in (("flash", backends.flash_sdp_enabled()), ("efficient", backends.mem_efficient_sdp_enabled()),
                                       ("cudnn", backends.cudnn_sdp_enabled()), ("math", backends.math_sdp_enabled())) if enabled]


@dataclass
class Config:
    vocab_size: int = 250002
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    ffn_size: int = 3072
    max_positions: int = 514
    type_vocab_size: int = 1      # BERT: 2 (sentence A/B)
    position_offset: int = 2      # RoBERTa counts positions from pad_id+1 over non-pad tokens; BERT: 0, from the start
    layer_norm_eps: float = 1e-5  # BERT: 1e-12
    pad_id: int = 1
    dropout: float = 0.1
    attention_dropout: float = 0.1
    model_type: str = "xlm-roberta"  # xlm-roberta, roberta or bert: the layout written back to config.json

    @property
    def is_bert(self):
        return self.model_type == "bert"

    @classmethod
    def from_hf(cls, hf, source="config.json"):
        """From a Hugging Face config.json dict; refuses what this encoder does not implement, and
        fields of the wrong type or range."""
        if not isinstance(hf, dict):
            raise CheckpointError(f"{source}: not a JSON object of settings")
        check_fields(hf, source)
        model_type = hf.get("model_type")
        if model_type not in ("xlm-roberta", "roberta", "bert"):
            raise CheckpointError(f"{source}: model_type {model_type!r} is not supported (xlm-roberta, roberta or bert)")
        if hf.get("hidden_act", "gelu") != "gelu":
            raise CheckpointError(f"{source}: hidden_act {hf['hidden_act']!r}: only exact GELU ('gelu') is implemented")
        if hf.get("position_embedding_type", "absolute") != "absolute":
            raise CheckpointError(f"{source}: position_embedding_type {hf['position_embedding_type']!r}: only 'absolute' is implemented")
        bert = model_type == "bert"
        try:
            return cls(
                vocab_size=hf["vocab_size"], hidden_size=hf["hidden_size"], num_layers=hf["num_hidden_layers"],
                num_heads=hf["num_attention_heads"], ffn_size=hf["intermediate_size"],
                max_positions=hf["max_position_embeddings"], type_vocab_size=hf.get("type_vocab_size", 2 if bert else 1),
                position_offset=0 if bert else hf.get("pad_token_id", 1) + 1,
                layer_norm_eps=hf.get("layer_norm_eps", 1e-12 if bert else 1e-5), pad_id=hf.get("pad_token_id", 1),
                dropout=hf.get("hidden_dropout_prob", 0.1), attention_dropout=hf.get("attention_probs_dropout_prob", 0.1),
                model_type=model_type)
        except KeyError as e:
            raise CheckpointError(f"{source}: missing field {e.args[0]!r}") from None

    @classmethod
    def from_directory(cls, directory):
        """The config.json of a Hugging Face checkpoint directory."""
        path = Path(directory) / "config.json"
        if not path.exists():
            raise CheckpointError(f"{directory}: no config.json (is this a Hugging Face checkpoint directory?)")
        try:
            return cls.from_hf(json.loads(path.read_text(encoding="utf-8")), source=str(path))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{path}: not valid JSON ({e})") from None

    def to_hf(self):
        return {
            "model_type": self.model_type, "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers, "num_attention_heads": self.num_heads,
            "intermediate_size": self.ffn_size, "max_position_embeddings": self.max_positions,
            "type_vocab_size": self.type_vocab_size, "layer_norm_eps": self.layer_norm_eps,
            "pad_token_id": self.pad_id, "hidden_dropout_prob": self.dropout,
            "attention_probs_dropout_prob": self.attention_dropout, "hidden_act": "gelu",
            "position_embedding_type": "absolute", "bos_token_id": 0, "eos_token_id": 2,
        }


# config.json's fields this encoder reads: (type, smallest value, value must be below)
CONFIG_FIELDS = {
    "vocab_size": (int, 1, None), "hidden_size": (int, 1, None), "num_hidden_layers": (int, 1, None),
    "num_attention_heads": (int, 1, None), "intermediate_size": (int, 1, None), "max_position_embeddings": (int, 1, None),
    "type_vocab_size": (int, 1, None), "pad_token_id": (int, 0, None), "layer_norm_eps": (float, 0, None),
    "hidden_dropout_prob": (float, 0, 1), "attention_probs_dropout_prob": (float, 0, 1),
}


def check_fields(hf, source):
    """Every field the encoder reads has the type and range it needs (JSON's "768" is not 768)."""
    for name, (kind, low, below) in CONFIG_FIELDS.items():
        if name not in hf:
            continue
        value = hf[name]
        right_type = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
        if not right_type or value < low or (below is not None and value >= below):
            wanted = "an integer" if kind is int else "a number"
            bounds = f" from {low}" + (f" below {below}" if below is not None else "")
            raise CheckpointError(f"{source}: {name} is {value!r}; it must be {wanted}{bounds}")
    heads, hidden = hf.get("num_attention_heads"), hf.get("hidden_size")
    if heads and hidden and hidden % heads:
        raise CheckpointError(f"{source}: hidden_size {hidden} is not divisible by num_attention_heads {heads}")
    if hf.get("pad_token_id", 0) >= hf.get("vocab_size", float("inf")):
        raise CheckpointError(f"{source}: pad_token_id {hf['pad_token_id']} is not below vocab_size {hf['vocab_size']}")


def check_tokenizer(config, tokenizer, directory):
    """The tokenizer's ids must all have rows in the embeddings (a tokenizer of another model would not)."""
    if tokenizer.vocab_size > config.vocab_size:
        raise CheckpointError(f"{directory}: the tokenizer has {tokenizer.vocab_size} ids but config.json's vocab_size is "
                              f"{config.vocab_size}: the tokenizer and the weights are not of the same model")


class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word = nn.Embedding(c.vocab_size, c.hidden_size)
        self.position = nn.Embedding(c.max_positions, c.hidden_size)
        self.token_type = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, input_ids, position_ids, token_type_ids=None, words=None):
        """`words` (B, T, H), where given, replace the word embeddings of `input_ids` (Unicoder's
        word recovery feeds mixtures of another sentence's word embeddings)."""
        h = (self.word(input_ids) if words is None else words) + self.position(position_ids)  # (B, T, H)
        if token_type_ids is None:
            h = h + self.token_type.weight[0]
        else:
            h = h + self.token_type(token_type_ids)
        return self.dropout(self.norm(h))


class Layer(nn.Module):
    """One post-LN transformer layer: x = LN(x + Attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, c):
        super().__init__()
        H = c.hidden_size
        self.num_heads = c.num_heads
        self.query, self.key, self.value = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        self.attn_out = nn.Linear(H, H)
        self.attn_norm = nn.LayerNorm(H, eps=c.layer_norm_eps)
        self.ffn_in = nn.Linear(H, c.ffn_size)
        self.ffn_out = nn.Linear(c.ffn_size, H)
        self.ffn_norm = nn.LayerNorm(H, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.dropout)
        self.attention_dropout = c.attention_dropout
        self.checkpointed = False  # Encoder.checkpoint_layers

    def attention(self, x, mask=None, context=None, context_mask=None, return_probs=False):
        """Multi-head attention of x over itself, or over `context` (keys and values from another
        sequence, as in X-Mixup's cross-attention), with this layer's parameters; output projected,
        before residual and LayerNorm. Masks are (B, T) / (B, S) with 1 for real tokens."""
        if context is None:
            context, context_mask = x, mask
        B, T, H = x.shape
        S, N = context.shape[1], self.num_heads
        q = self.query(x).view(B, T, N, H // N).transpose(1, 2)        # (B, N, T, D)
        k = self.key(context).view(B, S, N, H // N).transpose(1, 2)    # (B, N, S, D)
        v = self.value(context).view(B, S, N, H // N).transpose(1, 2)  # (B, N, S, D)
        keep = None if context_mask is None else context_mask.bool()[:, None, None, :]  # (B, 1, 1, S)
        p = self.attention_dropout if self.training else 0.0
        if return_probs:  # written out, since the fused kernel does not return the probabilities
            scores = q @ k.transpose(-2, -1) / math.sqrt(H // N)      # (B, N, T, S)
            if keep is not None:
                scores = scores.masked_fill(~keep, float("-inf"))
            probs = scores.softmax(dim=-1)
            out = F.dropout(probs, p, self.training) @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)
        out = self.attn_out(out.transpose(1, 2).reshape(B, T, H))       # (B, T, H)
        return (out, probs) if return_probs else out

    def feed_forward(self, x):
        """The second half of the layer: LN(x + FFN(x)), exact GELU."""
        return self.ffn_norm(x + self.dropout(self.ffn_out(F.gelu(self.ffn_in(x)))))

    def forward(self, x, mask=None):
        if self.checkpointed and torch.is_grad_enabled():
            return checkpoint(self.block, x, mask, use_reentrant=False)  # the same dropout draws when recomputed
        return self.block(x, mask)

    def block(self, x, mask=None):
        x = self.attn_norm(x + self.dropout(self.attention(x, mask)))
        return self.feed_forward(x)


class MaskedLMHead(nn.Module):
    """dense -> GELU -> LayerNorm -> projection onto the word embeddings (tied) + bias."""

    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))

    def forward(self, hidden, word_embeddings):
        return F.linear(self.norm(F.gelu(self.dense(hidden))), word_embeddings, self.bias)  # (B, T, V)


class Encoder(nn.Module):
    def __init__(self, config, pooler=False, lm_head=False):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(Layer(config) for _ in range(config.num_layers))
        # The pooler (dense + tanh over <s>) is unused by the methods here; it is kept when a
        # checkpoint has one so that save_pretrained writes back what was loaded.
        self.pooler = nn.ModuleDict({"dense": nn.Linear(config.hidden_size, config.hidden_size)}) if pooler else None
        self.lm_head = MaskedLMHead(config) if lm_head else None
        self.segment_id = None  # with BERT's tokenizers, the [SEP] id after which a pair's second text is segment 1
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)

    def checkpoint_layers(self, on=True):
        """Gradient checkpointing: a layer keeps only its input for the backward pass, where it runs
        again, with the same dropout draws. Training keeps one layer's activations at a time instead
        of all of them (on CPU, attention with dropout keeps its (B, heads, T, T) probabilities), for
        one more forward pass per step; the gradients are the same."""
        for layer in self.layers:
            layer.checkpointed = on

    def add_lm_head(self):
        """Give the encoder a freshly initialised masked-LM head (for checkpoints that have none)."""
        if self.lm_head is None:
            self.lm_head = MaskedLMHead(self.config).to(self.embeddings.word.weight.device)
            nn.init.normal_(self.lm_head.dense.weight, std=0.02)
            nn.init.zeros_(self.lm_head.dense.bias)
        return self.lm_head

    def position_ids(self, input_ids):
        c = self.config
        T = input_ids.shape[1]
        if T + c.position_offset > c.max_positions:
            raise ValueError(f"{T} tokens do not fit the model's {c.max_positions - c.position_offset} positions: lower --max-length")
        if c.position_offset == 0:  # BERT: 0..T-1
            return torch.arange(T, device=input_ids.device).expand_as(input_ids)
        real = input_ids.ne(c.pad_id).long()
        return real.cumsum(dim=1) * real + (c.position_offset - 1)  # pads get pad_id, as in RoBERTa

    def embed(self, input_ids, token_type_ids=None, position_ids=None, words=None):
        """Token ids (B, T) -> embedding-layer output (B, T, H); `words` replace their word embeddings."""
        if position_ids is None:
            position_ids = self.position_ids(input_ids)
        if token_type_ids is None and self.segment_id is not None and self.config.type_vocab_size > 1:
            separators = input_ids.eq(self.segment_id).long()
            token_type_ids = ((separators.cumsum(1) - separators) > 0).long()  # after the first [SEP]: segment 1
        return self.embeddings(input_ids, position_ids, token_type_ids, words)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, words=None):
        """Final hidden states (B, T, H)."""
        return self.hidden_states(input_ids, attention_mask, token_type_ids, position_ids, last_only=True, words=words)

    def hidden_states(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, last_only=False, words=None):
        """Every layer's hidden states: num_layers + 1 tensors of (B, T, H), embeddings first."""
        if attention_mask is None:
            attention_mask = input_ids.ne(self.config.pad_id)
        h = self.embed(input_ids, token_type_ids, position_ids, words)
        states = [h]
        for layer in self.layers:
            h = layer(h, attention_mask)
            states.append(h)
        return h if last_only else states

    def mlm_logits(self, hidden):
        """Masked-LM logits (B, T, V) from hidden states, through the head tied to the word embeddings."""
        if self.lm_head is None:
            raise ValueError("this encoder has no masked-LM head: call add_lm_head() first")
        return self.lm_head(hidden, self.embeddings.word.weight)

    @classmethod
    def from_pretrained(cls, directory, dtype=torch.float32, **overrides):
        """Load a Hugging Face checkpoint directory (xlm-roberta, roberta or bert); `overrides` replace
        config fields that do not change the weights' shapes (dropout, attention_dropout)."""
        directory = Path(directory)
        config = replace(Config.from_directory(directory), **overrides)
        state = normalise_keys(load_checkpoint_weights(directory))
        lm_head_keys = LM_HEAD_KEYS["bert" if config.is_bert else "roberta"]
        model = cls(config, pooler="pooler.dense.weight" in state, lm_head=lm_head_keys["lm_head.dense"] + ".weight" in state)
        model.load_hf_state_dict(state, source=directory)
        return model.to(dtype)

    def load_hf_state_dict(self, state, source="state dict"):
        """Copy Hugging Face-named tensors into this encoder: every key accounted for, every shape checked."""
        state = normalise_keys(state)
        c = self.config
        names = hf_names(self)
        missing = [theirs for theirs in names.values() if theirs not in state]
        unexpected = [k for k in state if k not in names.values() and not IGNORED_KEYS.fullmatch(k)]
        if missing or unexpected:
            raise CheckpointError(
                f"{source}: the weights do not match config.json ({c.model_type}, {c.num_layers} layers)\n"
                f"  missing ({len(missing)}): {', '.join(missing[:20])}{' ...' if len(missing) > 20 else ''}\n"
                f"  unexpected ({len(unexpected)}): {', '.join(unexpected[:20])}{' ...' if len(unexpected) > 20 else ''}")
        params = self.state_dict()
        wrong = [f"{theirs}: file {tuple(state[theirs].shape)}, config expects {tuple(params[ours].shape)}"
                 for ours, theirs in names.items() if state[theirs].shape != params[ours].shape]
        if wrong:
            raise CheckpointError(f"{source}: tensor shapes disagree with config.json:\n  " + "\n  ".join(wrong[:20]))
        with torch.no_grad():
            for ours, theirs in names.items():
                params[ours].copy_(state[theirs])
        word = params["embeddings.word.weight"]
        for decoder in ("lm_head.decoder.weight", "cls.predictions.decoder.weight"):
            if self.lm_head is not None and decoder in state and not torch.equal(state[decoder].to(word), word):
                warnings.warn(f"{source}: {decoder} differs from the word embeddings; minxlt ties the two and uses the embeddings")

    def save_pretrained(self, directory, head=None):
        """Write config.json and model.safetensors in the Hugging Face layout (loadable by transformers).
        `head`, a Classifier's export (Classifier.transformers_head), adds its weights and names its
        class, with the encoder under "roberta." / "bert." as transformers' task models keep it."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        c = self.config
        base = {"bert": "Bert", "roberta": "Roberta", "xlm-roberta": "XLMRoberta"}[c.model_type]
        lm_head = self.lm_head is not None and head is None  # a task model drops the masked-LM head it does not use
        prefix = "bert." if c.is_bert else "roberta."
        prefix = prefix if lm_head or head else ""  # the *ForMaskedLM and *For<Task> layouts keep the encoder under it
        state = self.state_dict()
        tensors = {}
        for ours, theirs in hf_names(self).items():
            if theirs.startswith(("lm_head.", "cls.")):
                if lm_head:
                    tensors[theirs] = state[ours]
                continue
            tensors[prefix + theirs] = state[ours]
        hf = dict(c.to_hf(), architectures=[base + ("ForMaskedLM" if lm_head else "Model")])
        if head:
            tensors.update(head["tensors"])
            hf.update(head["config"], architectures=[base + head["architecture"]])
        (directory / "config.json").write_text(json.dumps(hf, indent=2) + "\n")
        tmp = directory / "model.safetensors.tmp"
        save_safetensors(tensors, tmp)
        os.replace(tmp, directory / "model.safetensors")


# The one key table: our module names -> Hugging Face's (after the "roberta."/"bert." prefix).
# Every entry names a module holding a .weight and a .bias, except where noted.
KEY_TABLE = {
    "embeddings.word": "embeddings.word_embeddings",              # weight only
    "embeddings.position": "embeddings.position_embeddings",      # weight only
    "embeddings.token_type": "embeddings.token_type_embeddings",  # weight only
    "embeddings.norm": "embeddings.LayerNorm",
    "layers.{i}.query": "encoder.layer.{i}.attention.self.query",
    "layers.{i}.key": "encoder.layer.{i}.attention.self.key",
    "layers.{i}.value": "encoder.layer.{i}.attention.self.value",
    "layers.{i}.attn_out": "encoder.layer.{i}.attention.output.dense",
    "layers.{i}.attn_norm": "encoder.layer.{i}.attention.output.LayerNorm",
    "layers.{i}.ffn_in": "encoder.layer.{i}.intermediate.dense",
    "layers.{i}.ffn_out": "encoder.layer.{i}.output.dense",
    "layers.{i}.ffn_norm": "encoder.layer.{i}.output.LayerNorm",
    "pooler.dense": "pooler.dense",
}
LM_HEAD_KEYS = {  # "lm_head.bias" is a bare parameter
    "roberta": {"lm_head.dense": "lm_head.dense", "lm_head.norm": "lm_head.layer_norm", "lm_head.bias": "lm_head.bias"},
    "bert": {"lm_head.dense": "cls.predictions.transform.dense", "lm_head.norm": "cls.predictions.transform.LayerNorm",
             "lm_head.bias": "cls.predictions.bias"},
}
# In checkpoints but not needed: buffers, the decoder tied to the word embeddings, BERT's
# next-sentence head, and task heads of fine-tuned models (minxlt trains its heads itself).
IGNORED_KEYS = re.compile(r"embeddings\.position_ids|(lm_head|cls\.predictions)\.decoder\.(weight|bias)"
                          r"|cls\.seq_relationship\.\w+|(classifier|qa_outputs)\..+")


def hf_names(model):
    """{our state_dict key: Hugging Face key} for every tensor of `model`."""
    table = dict(KEY_TABLE, **LM_HEAD_KEYS["bert" if model.config.is_bert else "roberta"])
    names = {}
    for key in model.state_dict():
        module, _, leaf = key.rpartition(".")
        if key in table:  # a bare parameter
            names[key] = table[key]
            continue
        template = re.sub(r"^layers\.\d+\.", "layers.{i}.", module)
        layer = re.match(r"layers\.(\d+)\.", module)
        names[key] = table[template].format(i=layer.group(1) if layer else "") + "." + leaf
    return names


def normalise_keys(state):
    """Strip the "roberta."/"bert." prefix of *ForMaskedLM-style checkpoints; old BERT files say gamma/beta."""
    out = {}
    for key, value in state.items():
        key = re.sub(r"^(roberta|bert)\.", "", key)
        key = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", key))
        out[key] = value
    return out


class ClassificationHead(nn.Module):
    """Sentence classifier over the <s> vector: RoBERTa's dense-tanh-projection, or one linear layer."""

    def __init__(self, hidden_size, num_labels, dropout=0.1, style="roberta"):
        super().__init__()
        assert style in ("roberta", "linear"), style
        self.dense = nn.Linear(hidden_size, hidden_size) if style == "roberta" else None
        self.out_proj = nn.Linear(hidden_size, num_labels)
        self.dropout = nn.Dropout(dropout)

    def forward(self, hidden):
        """(B, T, H) hidden states, classified by their <s> vector, or an already pooled (B, H)."""
        x = self.dropout(hidden[:, 0] if hidden.dim() == 3 else hidden)
        if self.dense is not None:
            x = self.dropout(torch.tanh(self.dense(x)))
        return self.out_proj(x)         # (B, labels)


class TokenClassificationHead(nn.Module):
    """A label per token (the first sub-token of each word is the one scored)."""

    def __init__(self, hidden_size, num_labels, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(hidden_size, num_labels)

    def forward(self, hidden):
        return self.out_proj(self.dropout(hidden))  # (B, T, labels)


class JointHead(nn.Module):
    """Joint intent classification and slot filling (xSID): the intent from the <s> vector (a
    ClassificationHead), a BIO slot per token (a TokenClassificationHead). Both are returned as one
    (B, T, slots + intents) tensor, the intent in row 0, the <s> token's own, so that every method
    handles a joint task as a tagging task whose <s> token is labelled with the intent
    (data.encode_tagged): the <s> row is -1e4 outside the intents and every other row outside the
    slots, which makes a softmax over the row a softmax over its own label set (exp(-1e4) is 0)."""

    masked = -1e4  # not -inf: KL terms multiply 0 probabilities by these log-probabilities

    def __init__(self, hidden_size, num_slots, num_intents, dropout=0.1, style="roberta"):
        super().__init__()
        self.slots = TokenClassificationHead(hidden_size, num_slots, dropout)
        self.intent = ClassificationHead(hidden_size, num_intents, dropout, style)

    def forward(self, hidden):
        slots = self.slots(hidden)                                   # (B, T, S)
        intent = self.intent(hidden)                                 # (B, I)
        B, T, S = slots.shape
        logits = slots.new_full((B, T, S + intent.shape[-1]), self.masked)
        logits[:, 1:, :S] = slots[:, 1:]
        logits[:, 0, S:] = intent
        return logits


class SpanHead(nn.Module):
    """Extractive QA: a start and an end logit per token, as (B, T, 2) (qa.py reads the answer)."""

    def __init__(self, hidden_size):
        super().__init__()
        self.out_proj = nn.Linear(hidden_size, 2)

    def forward(self, hidden):
        return self.out_proj(hidden)  # (B, T, 2): [..., 0] start, [..., 1] end


def embed_pair(encoder, source_ids, source_mask, target_ids, target_mask):
    """A text and its counterpart per example, padded to one length, embedded side by side as one
    batch of 2B (sources first): (hidden (2B, T, H), mask (2B, T)). FILTER and X-Mixup start so."""
    if target_ids.shape != source_ids.shape:
        raise ValueError(f"pad source and target to one length: {tuple(source_ids.shape)} vs {tuple(target_ids.shape)}")
    return encoder.embed(torch.cat([source_ids, target_ids])), torch.cat([source_mask, target_mask])


def mean_pool(hidden, mask):
    """The mean of the real tokens' states: (B, T, H) and a (B, T) mask -> (B, H)."""
    mask = mask.to(hidden.dtype)[..., None]
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)


HEAD_STYLES = ("roberta", "linear", "token", "joint", "span")


class Classifier(nn.Module):
    """Encoder + a head: over the sentence vector (head_style "roberta" or "linear"), per token
    ("token"), both ("joint": `num_labels` slots per token and `num_intents` intents from <s>), or
    an answer's start and end per token ("span", extractive QA).
    The sentence vector is <s> (pooling "cls") or the mean of the real tokens ("mean", as
    sentence-embedding models are used). Returns (logits, sentence vectors). Saved as an ordinary
    checkpoint directory plus head.safetensors and task.json (labels, head style, pooling)."""

    def __init__(self, encoder, num_labels, head_style="roberta", pooling="cls", num_intents=0):
        super().__init__()
        assert pooling in ("cls", "mean"), pooling
        self.encoder, self.pooling = encoder, pooling
        H, p = encoder.config.hidden_size, encoder.config.dropout
        if head_style == "joint":
            self.head = JointHead(H, num_labels, num_intents, dropout=p)
        elif head_style == "span":
            self.head = SpanHead(H)
        elif head_style == "token":
            self.head = TokenClassificationHead(H, num_labels, dropout=p)
        else:
            self.head = ClassificationHead(H, num_labels, dropout=p, style=head_style)

    def forward(self, input_ids, attention_mask):
        return self.classify(self.encoder(input_ids, attention_mask), attention_mask)

    def classify(self, hidden, attention_mask):
        """(logits, sentence vectors) from final hidden states (B, T, H): the head over the pooled
        sentence vector (sentence labels) or over every token. FILTER and X-Mixup call it on the
        states they compute."""
        if self.pooling == "mean":
            sentence = mean_pool(hidden, attention_mask)  # (B, H)
            return self.head(sentence if isinstance(self.head, ClassificationHead) else hidden), sentence
        return self.head(hidden), hidden[:, 0]

    def save(self, directory, tokenizer, task):
        """An ordinary checkpoint directory that transformers loads with its trained head where it
        has the class for it (transformers_head), plus head.safetensors and task.json for minxlt."""
        directory = Path(directory)
        head = self.transformers_head(task)
        self.encoder.save_pretrained(directory, head)
        tokenizer.save_pretrained(directory)
        save_safetensors(self.head.state_dict(), directory / "head.safetensors")
        (directory / "task.json").write_text(json.dumps(dict(task, transformers=head["architecture"] if head else None), indent=2) + "\n")

    def transformers_head(self, task):
        """The head as transformers' task models hold it: {architecture (after XLMRoberta/Bert),
        config (labels), tensors}. Sentence labels from RoBERTa's dense-tanh head over <s> (BERT's
        pooler and classifier), a label per token, an answer's start and end. A linear or a
        mean-pooled sentence head, and xSID's joint head, have no such class: None."""
        head, bert = self.head, self.encoder.config.is_bert
        labels = task["labels"]
        tensors = lambda module, name: {f"{name}.{k}": v for k, v in module.state_dict().items()}
        if isinstance(head, ClassificationHead) and head.dense is not None and self.pooling == "cls":
            out = tensors(head.dense, "bert.pooler.dense" if bert else "classifier.dense")
            out.update(tensors(head.out_proj, "classifier" if bert else "classifier.out_proj"))
            architecture = "ForSequenceClassification"
        elif isinstance(head, TokenClassificationHead):
            out, architecture = tensors(head.out_proj, "classifier"), "ForTokenClassification"
        elif isinstance(head, SpanHead):
            out, architecture = tensors(head.out_proj, "qa_outputs"), "ForQuestionAnswering"
            labels = None
        else:
            return None
        config = {"id2label": {str(i): label for i, label in enumerate(labels)}, "label2id": {label: i for i, label in enumerate(labels)}} if labels else {}
        return {"architecture": architecture, "config": config, "tensors": out}

    @classmethod
    def load(cls, directory):
        """(model, tokenizer, task dict) from a directory written by save()."""
        directory = Path(directory)
        if not (directory / "task.json").is_file():
            raise CheckpointError(f"{directory}: no task.json, so not a model saved by train.py (give its OUT/best directory)")
        try:
            task = json.loads((directory / "task.json").read_text(encoding="utf-8"))
            labels = task["labels"]
            head_style, pooling = task.get("head_style", "roberta"), task.get("pooling", "cls")
            if not isinstance(labels, list) or not labels or head_style not in HEAD_STYLES or pooling not in ("cls", "mean"):
                raise ValueError("labels, head_style or pooling")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{directory / 'task.json'}: not the task.json that train.py writes ({e})") from None
        encoder, tokenizer = Encoder.from_pretrained(directory), Tokenizer.from_pretrained(directory)
        check_tokenizer(encoder.config, tokenizer, directory)
        encoder.segment_id = tokenizer.segment_id
        model = cls(encoder, len(labels), head_style, pooling, len(task.get("intents") or ()))
        path = directory / "head.safetensors"
        if not path.is_file():
            raise CheckpointError(f"{path}: not found; OUT/best holds the head that train.py trained there")
        try:
            model.head.load_state_dict(load_safetensors(path))
        except RuntimeError as e:
            raise CheckpointError(f"{path}: does not fit task.json's labels and head ({str(e).splitlines()[0]})") from None
        return model, tokenizer, task
