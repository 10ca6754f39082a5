"""X-Mixup (Yang et al. 2022): cross-lingual manifold mixup. A target text and its source-language
counterpart run the encoder side by side; at one layer the target's hidden states are mixed with
what they attend to in the source, by a ratio that grows with how well the two align.

Where the mix sits. Eq. 2-4 write the attention sub-layer as MultiHead and mix
LN(lambda h_T|S + (1 - lambda) h_T). Here the mix is inside layer l's attention sub-layer, before
its own LayerNorm:

    h~_T = LN(x_T + lambda CrossAttn(x_T -> x_S) + (1 - lambda) SelfAttn(x_T))

so Eq. 4's LN is the layer's, lambda = 0 is exactly the plain forward, and the cross-attention
takes the layer's inputs as its self-attention does (with the source equal to the target it *is*
the self-attention). No attention weights are added; the ratio's W and b are the only new ones.

Shapes: B pairs, T tokens (both texts padded to one length), H hidden, N heads.
"""
import math

import torch
import torch.nn as nn

from model import mean_pool


def inverse_sigmoid_decay(step, k):
    """Eq. 6's schedule (Bengio et al. 2015): p* = k / (k + exp(step / k)), the probability that the
    mixup is fed the gold source rather than its round-trip translation."""
    return k / (k + math.exp(step / k))


def attention_entropy(probs, query_mask, key_mask):
    """Eq. 5's H(A) per example, in nats: the entropy of each real query's attention over the real
    keys, averaged over heads and real queries. probs (B, N, Tq, Tk); masks (B, Tq), (B, Tk).
    Attention on padded keys is dropped and the rest renormalised, so padding never counts."""
    p = probs * key_mask[:, None, None, :]
    p = p / p.sum(-1, keepdim=True).clamp(min=1e-12)
    entropy = -(p * p.clamp(min=1e-12).log()).sum(-1).mean(1)        # (B, Tq); 0 log 0 = 0 with a finite gradient
    q = query_mask.to(entropy.dtype)
    return (entropy * q).sum(1) / q.sum(1).clamp(min=1)              # (B,)


class MixupRatio(nn.Module):
    """Eq. 5: lambda = lambda0 * sigmoid((H(A) + H(A^T)) W + b), per example, W and b trained."""

    def __init__(self, lambda0=0.5):
        super().__init__()
        self.lambda0 = lambda0
        self.linear = nn.Linear(1, 1)

    def forward(self, entropy, entropy_transposed):
        return self.lambda0 * torch.sigmoid(self.linear((entropy + entropy_transposed)[:, None]))[:, 0]  # (B,)


def mixup_layer(layer, ratio, target, target_mask, source, source_mask, fixed_ratio=None):
    """Eq. 3-5 at one layer: the target's output with its attention mixed with its cross-attention
    over the source (the layer's own attention parameters), and the ratio used (B,)."""
    self_attention = layer.attention(target, target_mask)
    cross, A = layer.attention(target, target_mask, context=source, context_mask=source_mask, return_probs=True)  # Eq. 3
    if fixed_ratio is None:
        _, A_t = layer.attention(source, source_mask, context=target, context_mask=target_mask, return_probs=True)
        lam = ratio(attention_entropy(A, target_mask, source_mask), attention_entropy(A_t, source_mask, target_mask))
    else:  # an ablation: a constant ratio
        lam = torch.full((len(target),), float(fixed_ratio), device=target.device)
    lam = lam.to(cross.dtype)[:, None, None]
    mixed = lam * cross + (1 - lam) * self_attention                 # Eq. 4, before the LayerNorm
    h = layer.attn_norm(target + layer.dropout(mixed))
    return layer.feed_forward(h), lam[:, 0, 0]


def mixup_encode(encoder, ratio, source_ids, source_mask, target_ids, target_mask, layer_index, fixed_ratio=None):
    """Both texts through the encoder, stacked along the batch, the target mixed at `layer_index`
    (0-based). Returns (source states, target states, lambda), each state (B, T, H)."""
    B = len(source_ids)
    if target_ids.shape != source_ids.shape:
        raise ValueError(f"pad source and target to one length: {tuple(source_ids.shape)} vs {tuple(target_ids.shape)}")
    mask = torch.cat([source_mask, target_mask])                     # (2B, T)
    h = encoder.embed(torch.cat([source_ids, target_ids]))           # (2B, T, H)
    lam = None
    for i, layer in enumerate(encoder.layers):
        if i != layer_index:
            h = layer(h, mask)                                       # Eq. 2: each text on its own
            continue
        source = layer(h[:B], source_mask)
        target, lam = mixup_layer(layer, ratio, h[B:], target_mask, h[:B], source_mask, fixed_ratio)
        h = torch.cat([source, target])
    return h[:B], h[B:], lam


class XMixup(nn.Module):
    """A Classifier run as X-Mixup on (source, target) pairs, plus the ratio's W and b."""

    def __init__(self, classifier, layer, lambda0=0.5, fixed_ratio=None):
        super().__init__()
        if not 0 <= layer < len(classifier.encoder.layers):
            raise ValueError(f"--mixup-layer {layer + 1} is not one of the encoder's layers 1..{len(classifier.encoder.layers)}")
        self.classifier, self.layer, self.fixed_ratio = classifier, layer, fixed_ratio
        self.ratio = MixupRatio(lambda0)

    def forward(self, source_ids, source_mask, target_ids, target_mask):
        """(source logits, target logits, source representation, target representation, lambda)."""
        hs, ht, lam = mixup_encode(self.classifier.encoder, self.ratio, source_ids, source_mask, target_ids, target_mask,
                                   self.layer, self.fixed_ratio)
        head = self.classifier.head
        # Eq. 7's sequence representations r: the mean-pooled final states of the real tokens
        return head(hs), head(ht), mean_pool(hs, source_mask), mean_pool(ht, target_mask), lam

    def predict(self, source_ids, source_mask, target_ids, target_mask):
        """Mixup inference (Sec. 4.3): a sentence label from the mean of the two predicted
        distributions (returned as log-probabilities), word labels from the target alone."""
        source, target = self(source_ids, source_mask, target_ids, target_mask)[:2]
        if target.dim() == 3:
            return target
        return ((source.float().softmax(-1) + target.float().softmax(-1)) / 2).log()
