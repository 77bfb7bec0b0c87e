"""Whole models around the encoder: an input embedding, the encoder, and a task head.

`SequenceClassifier` reads MNIST as 28 rows of 28 pixels (the tutorial's model);
`TokenModel` reads token ids and predicts a token at every position (copy tasks).
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import MultiHeadAttention
from .block import FeedForward
from .config import EncoderConfig
from .encoder import Encoder
from .rnn import RNN_CELLS, RecurrentEncoder, RecurrentLayer


class RowEmbedding(nn.Linear):
    """Linear(in_features, d_model): the input embedding of real-valued tokens (an MNIST row)."""


class MeanPool(nn.Module):
    """Average the tokens (the tutorial's choice)."""

    extra_tokens = 0

    def prepend(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, d)
        return h.mean(dim=1)


class ClsPool(nn.Module):
    """Prepend a learned [CLS] token and read it out (Devlin et al. 2019)."""

    extra_tokens = 1

    def __init__(self, d_model: int):
        super().__init__()
        self.token = nn.Parameter(torch.zeros(1, 1, d_model))

    def prepend(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, 1+T, d)
        return torch.cat((self.token.expand(x.shape[0], -1, -1), x), dim=1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h[:, 0]


class LastPool(ClsPool):
    """The recurrent arch's `cls`: the learned token is appended and the output there read out, the final
    state after one more step. A uni-directional RNN at a prepended token has read nothing yet."""

    def prepend(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T+1, d), the token last
        return torch.cat((x, self.token.expand(x.shape[0], -1, -1)), dim=1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h[:, -1]


POOLINGS = {"mean": lambda d: MeanPool(), "cls": ClsPool}
RNN_POOLINGS = {"mean": lambda d: MeanPool(), "cls": LastPool}  # what `pooling` means with arch=lstm/gru


def build_encoder(cfg: EncoderConfig) -> Encoder | RecurrentEncoder:
    """The encoder `cfg.arch` names: (B, T, d_model) -> (B, T, encoder.d_out), and with
    return_attention=True also its attention maps (an empty list for an RNN)."""
    return RecurrentEncoder(cfg) if cfg.arch in RNN_CELLS else Encoder(cfg)


class SequenceClassifier(nn.Module):
    """(B, T, in_features) -> class logits (B, n_classes). pooling='mean' averages the encoder's outputs
    (an RNN's too); 'cls' reads a learned token, prepended for the Transformer, appended for an RNN."""

    def __init__(self, cfg: EncoderConfig, in_features: int, n_classes: int, pooling: str = "mean"):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r} is not allowed; choose one of {', '.join(POOLINGS)}")
        self.embed = RowEmbedding(in_features, cfg.d_model)
        self.pool = (RNN_POOLINGS if cfg.arch in RNN_CELLS else POOLINGS)[pooling](cfg.d_model)
        self.encoder = build_encoder(cfg)
        self.head = nn.Linear(self.encoder.d_out, n_classes)

    def forward(self, x: torch.Tensor, return_attention: bool = False):
        h = self.pool.prepend(self.embed(x))
        out = self.encoder(h, return_attention)
        if return_attention:
            return self.head(self.pool(out[0])), out[1]
        return self.head(self.pool(out))


class TokenModel(nn.Module):
    """(B, T) token ids -> per-position logits (B, T, n_out)."""

    def __init__(self, cfg: EncoderConfig, n_tokens: int, n_out: int):
        super().__init__()
        self.embed = nn.Embedding(n_tokens, cfg.d_model)
        self.encoder = build_encoder(cfg)
        self.head = nn.Linear(self.encoder.d_out, n_out)

    def forward(self, tokens: torch.Tensor, return_attention: bool = False):
        out = self.encoder(self.embed(tokens), return_attention)
        if return_attention:
            return self.head(out[0]), out[1]
        return self.head(out)


EMBEDDINGS = (nn.Embedding, RowEmbedding, ClsPool)  # input embeddings and the CLS token


def parameter_groups(model: nn.Module) -> dict[str, int]:
    """Parameter counts split into attention / ffn / embedding (input embedding, positional
    encodings, CLS token) / other (norms, output head), by module type: MultiHeadAttention,
    FeedForward, an encoder's Positional slots and EMBEDDINGS; a parameter is counted once, in the
    first group that claims it. A model with a recurrent encoder also has `recurrent` (its LSTM/GRU
    layers, beside attention 0 and ffn 0); a Transformer has no such key. Works on a whole model or a
    bare encoder."""
    group: dict[int, str] = {}

    def claim(module: nn.Module, name: str) -> None:
        for p in module.parameters():
            group.setdefault(id(p), name)

    for m in model.modules():
        if isinstance(m, (Encoder, RecurrentEncoder)):
            for slot in m.positional.modules():
                claim(slot, "embedding")
    recurrent = False
    for m in model.modules():
        if isinstance(m, MultiHeadAttention):
            claim(m, "attention")
        elif isinstance(m, FeedForward):
            claim(m, "ffn")
        elif isinstance(m, RecurrentLayer):
            claim(m, "recurrent")
            recurrent = True
        elif isinstance(m, EMBEDDINGS):
            claim(m, "embedding")
    names = ("attention", "ffn", "recurrent", "embedding", "other") if recurrent else ("attention", "ffn", "embedding", "other")
    counts = dict.fromkeys(names, 0)
    for p in model.parameters():
        counts[group.get(id(p), "other")] += p.numel()
    counts["total"] = sum(counts.values())
    return counts
