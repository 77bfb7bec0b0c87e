"""Whole models around the encoder: an input embedding, the encoder, and a task head.

`SequenceClassifier` reads MNIST as 28 rows of 28 pixels (the tutorial's model);
`TokenModel` reads token ids and predicts a token at every position (copy tasks).
"""

from __future__ import annotations

import torch
from torch import nn

from .config import EncoderConfig
from .encoder import Encoder


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


POOLINGS = {"mean": lambda d: MeanPool(), "cls": ClsPool}


class SequenceClassifier(nn.Module):
    """(B, T, in_features) -> class logits (B, n_classes)."""

    def __init__(self, cfg: EncoderConfig, in_features: int, n_classes: int, pooling: str = "mean"):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r} is not allowed; choose one of {', '.join(POOLINGS)}")
        self.embed = nn.Linear(in_features, cfg.d_model)
        self.pool = POOLINGS[pooling](cfg.d_model)
        self.encoder = Encoder(cfg)
        self.head = nn.Linear(cfg.d_model, n_classes)

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
        self.encoder = Encoder(cfg)
        self.head = nn.Linear(cfg.d_model, n_out)

    def forward(self, tokens: torch.Tensor, return_attention: bool = False):
        out = self.encoder(self.embed(tokens), return_attention)
        if return_attention:
            return self.head(out[0]), out[1]
        return self.head(out)


def parameter_groups(model: nn.Module) -> dict[str, int]:
    """Parameter counts split into attention / ffn / embedding (input embedding, positional table,
    CLS token) / other (norms, output head). Works on a whole model or a bare Encoder."""
    counts = {"attention": 0, "ffn": 0, "embedding": 0, "other": 0}
    for name, p in model.named_parameters():
        if ".attn.fn." in f".{name}":
            group = "attention"
        elif ".ffn.fn." in f".{name}":
            group = "ffn"
        elif name.startswith(("embed.", "pool.")) or ".pos_enc." in f".{name}":
            group = "embedding"
        else:
            group = "other"
        counts[group] += p.numel()
    counts["total"] = sum(counts.values())
    return counts
