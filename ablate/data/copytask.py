"""Synthetic copy task: read L tokens, a separator, then L blanks; at each blank emit the next token
(in order, or reversed) (the copy task of Graves et al. 2014, "Neural Turing Machines").

Input `t_1 .. t_L, SEP, BLANK x L` (length 2L+1) with tokens uniform in [0, vocab), SEP = vocab,
BLANK = vocab + 1. Targets: the tokens at the blank positions, IGNORE (-100) elsewhere.
Every blank looks the same, so a model blind to order can only guess the sequence's most frequent
token at each: the order-blind reference level, E[largest count] / L (30.0 % at L = 8, 23.6 % at 16,
vocabulary 10), which a model "stuck near 30 %" sits at. Its registry entry: ablate/registry.py.
"""

from __future__ import annotations

import torch

from ..config import DataConfig
from .synthetic import IGNORE, MEMORY_SHARE, SyntheticTask, split_seed

MAX_VOCAB = 2**62  # token ids vocab and vocab + 1 (SEP, BLANK) stay far inside int64

__all__ = ["IGNORE", "MEMORY_SHARE", "CopyTask", "copy_sequences", "split_seed"]


def copy_sequences(
    n: int, length: int, vocab: int, reverse: bool, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """n sequences: x (n, 2L+1) token ids, y (n, 2L+1) targets (IGNORE except at the blanks)."""
    tokens = torch.randint(0, vocab, (n, length), generator=generator)  # (n, L)
    sep = torch.full((n, 1), vocab)  # (n, 1)
    blanks = torch.full((n, length), vocab + 1)  # (n, L)
    x = torch.cat((tokens, sep, blanks), dim=1)  # (n, 2L+1)
    y = torch.full_like(x, IGNORE)
    y[:, length + 1 :] = tokens.flip(1) if reverse else tokens
    return x, y


class CopyTask(SyntheticTask):
    """Batches: x int64 (B, 2L+1) token ids, y int64 (B, 2L+1)."""

    name = "copy"

    def __init__(self, cfg: DataConfig):
        super().__init__(cfg)
        self.sep, self.blank = cfg.vocab, cfg.vocab + 1

    def generate(self, n: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return copy_sequences(n, length, self.cfg.vocab, self.cfg.reverse, generator)
