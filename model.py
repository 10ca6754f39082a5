"""The encoder: XLM-R (RoBERTa layout), XLM-R XL and XXL (pre-LN) and BERT-layout encoders as one
module, and its task heads. Loading and saving hand the files to minxlt/checkpoints/weights.py (a
reader of the methods can skip them); the tokenizer is minxlt/text/tokenizer.py.

Shapes: B batch, T tokens (S for a second sequence), H hidden, N heads, D = H / N, V vocabulary.
"""
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from minxlt.checkpoints import weights
from minxlt.checkpoints.weights import CheckpointError, load_safetensors, save_safetensors
from minxlt.text.tokenizer import Tokenizer


@dataclass
class Config:
    vocab_size: int = 250002
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    ffn_size: int = 3072
    max_positions: int = 514
    type_vocab_size: int = 1      # BERT: 2 (sentence A/B)
    position_offset: int = 2      # RoBERTa counts positions from pad_id+1 over non-pad tokens; BERT: 0
    layer_norm_eps: float = 1e-5  # BERT: 1e-12
    pad_id: int = 1
    dropout: float = 0.1
    attention_dropout: float = 0.1
    model_type: str = "xlm-roberta"  # xlm-roberta, xlm-roberta-xl, roberta or bert: written back to config.json

    @property
    def is_bert(self):
        return self.model_type == "bert"

    @property
    def pre_norm(self):
        """XLM-R XL and XXL (Goyal et al. 2021): each sub-layer reads LN(h) and adds to h, a final
        LayerNorm follows the last layer, the embeddings have none."""
        return self.model_type == "xlm-roberta-xl"

    @classmethod
    def from_hf(cls, hf, source="config.json"):
        """From a Hugging Face config.json dict, checked."""
        return cls(**weights.config_arguments(hf, source))

    @classmethod
    def from_directory(cls, directory):
        """The config.json of a Hugging Face checkpoint directory."""
        return cls(**weights.read_config(directory))


class Embeddings(nn.Module):
    """Word + position + token type embeddings, normalised (not pre-LN) and dropped out: a module of its own,
    which a sharded run may gather as one unit (--shard-embeddings)."""

    def __init__(self, c):
        super().__init__()
        self.word = nn.Embedding(c.vocab_size, c.hidden_size)
        self.position = nn.Embedding(c.max_positions, c.hidden_size)
        self.token_type = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.norm = nn.Identity() if c.pre_norm else nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, input_ids, position_ids, token_type_ids=None, words=None):
        """`words` (B, T, H), where given, replace the word embeddings (Unicoder's word recovery)."""
        h = (self.word(input_ids) if words is None else words) + self.position(position_ids)  # (B, T, H)
        types = self.token_type.weight[0] if token_type_ids is None else self.token_type(token_type_ids)
        return self.dropout(self.norm(h + types))


class Layer(nn.Module):
    """One transformer layer, its LayerNorms after each sub-layer (post-LN, XLM-R and BERT):
        x = LN_a(x + Attn(x)); x = LN_f(x + FFN(x))
    or before it (pre-LN, XLM-R XL and XXL):
        x = x + Attn(LN_a(x)); x = x + FFN(LN_f(x))."""

    def __init__(self, c):
        super().__init__()
        H = c.hidden_size
        self.num_heads, self.pre_norm = c.num_heads, c.pre_norm
        self.query, self.key, self.value = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        self.attn_out = nn.Linear(H, H)
        self.attn_norm = nn.LayerNorm(H, eps=c.layer_norm_eps)
        self.ffn_in = nn.Linear(H, c.ffn_size)
        self.ffn_out = nn.Linear(c.ffn_size, H)
        self.ffn_norm = nn.LayerNorm(H, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.dropout)
        self.attention_dropout = c.attention_dropout
        self.checkpointed = False  # Encoder.checkpoint_layers

    def run(self, function, *args):
        """function(self, *args): code that calls this layer's parts itself (X-Mixup's Eq. 2-5), run
        as one call of the layer, which a sharded run gathers the layer for, as for forward."""
        return function(self, *args)

    def forward(self, x, mask=None, under_checkpoint=False):
        """The equations above. Checkpointed (Encoder.checkpoint_layers): this same call under torch's checkpoint,
        which keeps x alone and runs the layer again in the backward pass, the same dropout drawn."""
        if self.checkpointed and not under_checkpoint and torch.is_grad_enabled():
            return checkpoint(self.forward, x, mask, True, use_reentrant=False)
        if self.pre_norm:
            x = x + self.dropout(self.attention(self.attn_norm(x), mask))
        else:
            x = self.attn_norm(x + self.dropout(self.attention(x, mask)))
        return self.feed_forward(x)

    def attention(self, x, mask=None, context=None, context_mask=None, return_probs=False):
        """Multi-head attention of x over itself or over `context` (X-Mixup's cross-attention), projected,
        before residual and LayerNorm. Masks: (B, T) / (B, S), 1 for a token, or their attention_bias."""
        if context is None:
            context, context_mask = x, mask
        B, T, H = x.shape
        S, N = context.shape[1], self.num_heads
        # q of x, k and v of the context: one product over the three weights stacked where x attends to itself,
        # two over a context (the checkpoint keeps the three; a float-level rounding apart)
        w = [self.query.weight, self.key.weight, self.value.weight]
        b = [self.query.bias, self.key.bias, self.value.bias]
        if context is x:
            q, k, v = F.linear(x, torch.cat(w), torch.cat(b)).chunk(3, dim=-1)
        else:
            q, (k, v) = self.query(x), F.linear(context, torch.cat(w[1:]), torch.cat(b[1:])).chunk(2, dim=-1)
        q = q.view(B, T, N, H // N).transpose(1, 2)                    # (B, N, T, D)
        k = k.view(B, S, N, H // N).transpose(1, 2)                    # (B, N, S, D)
        v = v.view(B, S, N, H // N).transpose(1, 2)                    # (B, N, S, D)
        bias = attention_bias(context_mask, x)                         # (B, 1, 1, S) or None
        p = self.attention_dropout if self.training else 0.0
        if return_probs:  # written out, since the fused kernel does not return the probabilities
            scores = q @ k.transpose(-2, -1) / math.sqrt(H // N)      # (B, N, T, S)
            probs = (scores if bias is None else scores + bias).softmax(dim=-1)
            out = F.dropout(probs, p, self.training) @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)
        out = self.attn_out(out.transpose(1, 2).reshape(B, T, H))       # (B, T, H)
        return (out, probs) if return_probs else out

    def feed_forward(self, x):
        """The second half of the layer, FFN(x) = W_out GELU(W_in x) (exact GELU): LN_f(x + FFN(x)), or pre-LN
        x + FFN(LN_f(x))."""
        if self.pre_norm:
            return x + self.dropout(self.ffn_out(F.gelu(self.ffn_in(self.ffn_norm(x)))))
        return self.ffn_norm(x + self.dropout(self.ffn_out(F.gelu(self.ffn_in(x)))))


def attention_bias(mask, h):
    """A padding mask (B, S) as SDPA takes it, (B, 1, 1, S) of 0 and -inf in attention's dtype (built once per
    forward; a bias passes as it is). None for no mask or a broadcast of ones: SDPA's fastest kernel."""
    if mask is None or mask.dim() == 4:
        return mask
    if mask.stride() == (0, 0):  # data.to_device's mask of a batch without padding
        return None
    device = h.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else h.dtype  # autocast's, where on
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask == 0, float("-inf"))
    return bias[:, None, None, :]


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
    """Embeddings, num_layers Layers and, pre-LN, a final LayerNorm; a pooler and a masked-LM head where the
    checkpoint has them."""

    def __init__(self, config, pooler=False, lm_head=False):
        super().__init__()
        self.config = self.saved_config = c = config  # saved_config: what save_pretrained writes as config.json
        H = c.hidden_size
        self.embeddings = Embeddings(c)
        self.layers = nn.ModuleList(Layer(c) for _ in range(c.num_layers))
        self.norm = nn.LayerNorm(H, eps=c.layer_norm_eps) if c.pre_norm else nn.Identity()  # after the last layer
        # the pooler (dense + tanh over <s>), unused by the methods, is kept so that save_pretrained writes it back
        self.pooler = nn.ModuleDict({"dense": nn.Linear(H, H)}) if pooler else None
        self.lm_head = MaskedLMHead(c) if lm_head else None
        self.segment_id = None  # with BERT's tokenizers, the [SEP] id after which a pair's second text is segment 1
        for module in self.modules():  # BERT's initialisation, where no checkpoint fills the weights
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)

    def checkpoint_layers(self, on=True):
        """Gradient checkpointing: each layer keeps only its input and runs again (same dropout) in the
        backward pass; one layer's activations held at a time for one more forward, the same gradients."""
        for layer in self.layers:
            layer.checkpointed = on

    def add_lm_head(self):
        """Give the encoder a freshly initialised masked-LM head (for checkpoints that have none)."""
        if self.lm_head is None:
            device = self.embeddings.word.weight.device  # on the meta device (a sharded run's): on the host
            self.lm_head = MaskedLMHead(self.config).to("cpu" if device.type == "meta" else device)
            nn.init.normal_(self.lm_head.dense.weight, std=0.02)
            nn.init.zeros_(self.lm_head.dense.bias)
        return self.lm_head

    def embed(self, input_ids, token_type_ids=None, position_ids=None, words=None):
        """Token ids (B, T) -> embedding-layer output (B, T, H); `words` replace their word embeddings."""
        c, T = self.config, input_ids.shape[1]
        if position_ids is None and T + c.position_offset > c.max_positions:
            raise ValueError(f"{T} tokens do not fit the model's {c.max_positions - c.position_offset} positions: "
                             "lower --max-length")
        if position_ids is None and c.position_offset == 0:  # BERT: 0..T-1
            position_ids = torch.arange(T, device=input_ids.device).expand_as(input_ids)
        elif position_ids is None:  # RoBERTa: from pad_id + 1 over the real tokens, pads at pad_id
            real = input_ids.ne(c.pad_id).long()
            position_ids = real.cumsum(dim=1) * real + (c.position_offset - 1)
        if token_type_ids is None and self.segment_id is not None and c.type_vocab_size > 1:
            separators = input_ids.eq(self.segment_id).long()
            token_type_ids = ((separators.cumsum(1) - separators) > 0).long()  # after the first [SEP]: segment 1
        return self.embeddings(input_ids, position_ids, token_type_ids, words)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, words=None,
                every_layer=False):
        """Final hidden states (B, T, H); every_layer: each layer's, num_layers + 1 tensors, the embeddings first."""
        if attention_mask is None:
            attention_mask = input_ids.ne(self.config.pad_id)
        h = self.embed(input_ids, token_type_ids, position_ids, words)
        bias = attention_bias(attention_mask, h)  # once, for every layer
        states = [h]
        for layer in self.layers:
            h = layer(h, bias)
            states.append(h)
        states[-1] = h = self.norm(h)  # a pre-LN encoder's final LayerNorm (post-LN: the identity)
        return states if every_layer else h

    def mlm_logits(self, hidden):
        """Masked-LM logits (B, T, V) from hidden states, through the head tied to the word embeddings."""
        if self.lm_head is None:
            raise ValueError("this encoder has no masked-LM head: call add_lm_head() first")
        return self.lm_head(hidden, self.embeddings.word.weight)

    @classmethod
    def from_pretrained(cls, directory, dtype=torch.float32, device="cpu", **overrides):
        """A Hugging Face checkpoint directory, built on the meta device and filled file by file (no second
        copy); `overrides`: dropout and the like, this run's (not saved). On device "meta" left unfilled, sharded."""
        directory = Path(directory)
        config = Config.from_directory(directory)
        files, shapes = weights.checkpoint_files(directory)
        pre_norm_keys = ("attention.self_attn_layer_norm.weight", "attention.self_attn_layer_norm.gamma")
        if not config.pre_norm and any(key.endswith(pre_norm_keys) for key in shapes):
            config = replace(config, model_type="xlm-roberta-xl")  # pre-LN weights: XXL's config.json says xlm-roberta
        pooler, lm_head = weights.checkpoint_modules(shapes, config.is_bert)
        with torch.device("meta"):
            model = cls(replace(config, **overrides), pooler=pooler, lm_head=lm_head).to(dtype)
        model.saved_config = config  # a model saved after training reads as the checkpoint did, its dropout kept
        if device != "meta":
            weights.stream_state(model.to_empty(device=device), config, files, shapes, directory)
        return model

    def load_weights(self, directory):
        """Fill this encoder from a checkpoint directory's files, one at a time (a sharded one: its own rows)."""
        files, shapes = weights.checkpoint_files(directory)
        weights.stream_state(self, self.config, files, shapes, directory)

    def load_hf_state_dict(self, state, source="state dict"):
        """Copy Hugging Face-named tensors into this encoder: every key accounted for, every shape checked."""
        weights.load_state(self, self.config, state, source)

    def save_pretrained(self, directory, head=None, shard_bytes=weights.SHARD_BYTES, whole=None, write=True):
        """config.json and model.safetensors in the Hugging Face layout, with `head` (weights.transformers_head)
        where given. A sharded encoder: every process calls this, one writes."""
        weights.save_encoder(directory, self.saved_config, self.state_dict(), head, shard_bytes, whole, write)


class ClassificationHead(nn.Module):
    """Over <s>: dense-tanh-projection ("roberta"), one linear layer ("linear"), dense-ReLU ("relu", FILTER's code)."""

    def __init__(self, hidden_size, num_labels, dropout=0.1, style="roberta"):
        super().__init__()
        assert style in ("roberta", "linear", "relu"), style
        self.dense = nn.Linear(hidden_size, hidden_size) if style != "linear" else None
        self.activation = torch.relu if style == "relu" else torch.tanh
        self.out_proj = nn.Linear(hidden_size, num_labels)
        self.dropout = nn.Dropout(dropout)

    def forward(self, hidden):
        """(B, T, H) hidden states, classified by their <s> vector, or an already pooled (B, H)."""
        x = self.dropout(hidden[:, 0] if hidden.dim() == 3 else hidden)
        if self.dense is not None:
            x = self.dropout(self.activation(self.dense(x)))
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
    """xSID's intent (from <s>) and BIO slots as one (B, T, slots + intents) tensor, the intent in row 0, so that
    a joint task is a tagging task; each row is -1e4 outside its own label set (a softmax ignores them)."""

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
    """Extractive QA: a start and an end logit per token (minxlt/tasks/qa.py reads the answer)."""

    def __init__(self, hidden_size):
        super().__init__()
        self.out_proj = nn.Linear(hidden_size, 2)

    def forward(self, hidden):
        return self.out_proj(hidden)  # (B, T, 2): [..., 0] start, [..., 1] end


def embed_pair(encoder, source_ids, source_mask, target_ids, target_mask):
    """FILTER's and X-Mixup's start: texts and counterparts of one length as a batch of 2B, sources first (h, mask)."""
    if target_ids.shape != source_ids.shape:
        raise ValueError(f"pad source and target to one length: {tuple(source_ids.shape)} vs "
                         f"{tuple(target_ids.shape)}")
    return encoder.embed(torch.cat([source_ids, target_ids])), torch.cat([source_mask, target_mask])


def mean_pool(hidden, mask):
    """The mean of the real tokens' states: (B, T, H) and a (B, T) mask -> (B, H)."""
    mask = mask.to(hidden.dtype)[..., None]
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)


HEAD_STYLES = ("roberta", "linear", "relu", "token", "joint", "span")


class Classifier(nn.Module):
    """Encoder + a head (HEAD_STYLES) over the sentence vector (<s>, the tokens' mean, or the pooler), per token, both
    ("joint") or an answer span: (logits, sentence vectors); saved as a checkpoint plus head.safetensors, task.json."""

    def __init__(self, encoder, num_labels, head_style="roberta", pooling="cls", num_intents=0):
        super().__init__()
        assert pooling in ("cls", "mean", "pooler"), pooling
        if pooling == "pooler" and encoder.pooler is None:
            raise CheckpointError("--pooling pooler reads the checkpoint's pooler (dense + tanh over <s>), and this "
                                  "one has none: choose --pooling cls or mean, or a checkpoint with a pooler (BERT's, "
                                  "LaBSE's)")
        self.encoder, self.head_style, self.pooling = encoder, head_style, pooling
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
        """(logits, sentence vectors) from final states (B, T, H); FILTER and X-Mixup call it on theirs."""
        if self.pooling == "cls":
            return self.head(hidden), hidden[:, 0]
        if self.pooling == "mean":
            sentence = mean_pool(hidden, attention_mask)  # (B, H)
        else:
            sentence = torch.tanh(self.encoder.pooler["dense"](hidden[:, 0]))  # (B, H), the checkpoint's pooled output
        return self.head(sentence if isinstance(self.head, ClassificationHead) else hidden), sentence

    def save(self, directory, tokenizer, task, whole=None, write=True):
        """A checkpoint directory transformers loads (with its head where it has the class), plus
        head.safetensors and task.json. A sharded model: every process calls this, one writes."""
        directory = Path(directory)
        state = self.head.state_dict()
        head = weights.transformers_head(self.head_style, self.pooling, state, task["labels"],
                                         self.encoder.config.is_bert)
        head_state = {key: whole(value) for key, value in state.items()} if whole else state
        # the last collective, where sharded: a write error raised in it leaves no process behind in a gather
        self.encoder.save_pretrained(directory, head, whole=whole, write=write)
        if not write:
            return
        tokenizer.save_pretrained(directory)
        save_safetensors(head_state, directory / "head.safetensors")
        task = dict(task, transformers=head["architecture"] if head else None)
        (directory / "task.json").write_text(json.dumps(task, indent=2) + "\n")

    @classmethod
    def load(cls, directory, device="cpu"):
        """(model, tokenizer, task dict) from save()'s directory; on "meta" the encoder is left unfilled and
        the head on the host, for a sharded run (minxlt/parallel/shard.py)."""
        directory = Path(directory)
        task = weights.read_task_json(directory, HEAD_STYLES)
        encoder, tokenizer = Encoder.from_pretrained(directory, device=device), Tokenizer.from_pretrained(directory)
        weights.check_tokenizer(encoder.config, tokenizer, directory)
        encoder.segment_id = tokenizer.segment_id
        model = cls(encoder, len(task["labels"]), task.get("head_style", "roberta"), task.get("pooling", "cls"),
                    len(task.get("intents") or ()))
        path = directory / "head.safetensors"
        if not path.is_file():
            raise CheckpointError(f"{path}: not found; OUT/best holds the head that train.py trained there")
        try:
            model.head.load_state_dict(weights.check_finite(load_safetensors(path), path))
        except RuntimeError as e:
            first = str(e).splitlines()[0]
            raise CheckpointError(f"{path}: does not fit task.json's labels and head ({first})") from None
        return (model if device == "meta" else model.to(device)), tokenizer, task
