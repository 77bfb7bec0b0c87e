"""Synthetic histogram task: at each token, say how many times it occurs in its sequence (the
`hist` program of Weiss et al. 2021, "Thinking Like Transformers" (RASP)).

Input `BOS, t_1 .. t_L` (length L+1) with tokens uniform in [0, vocab) and BOS = vocab. Targets:
y_i = #{j : t_j = t_i}, a class in 1..L (class 0 is never a target), IGNORE (-100) at BOS.

Why it is Q2's task: the answer needs attention spread evenly over the matching tokens. A query that
scores its c matching keys s and the BOS key b puts weight e^b / (e^b + c e^s) on BOS, a
value that falls as 1/(1 + c) when b = s, and the FFN reads c off it. A saturated, one-hot softmax
puts all its weight on one key and loses c. Targets depend only on the multiset of tokens and the
position's own token, so the order-blind reference level is 100 %: the task asks nothing of order.
Its registry entry: ablate/registry.py.
"""

from __future__ import annotations

import torch

from ..config import DataConfig
from .synthetic import IGNORE, SyntheticTask

__all__ = ["Histogram", "histogram_counts", "histogram_sequences"]


def histogram_counts(tokens: torch.Tensor) -> torch.Tensor:
    """(n, L) token ids -> (n, L) how many times each token occurs in its row. Counted by binary
    search in each sorted row: O(n L log L) time and a few (n, L) int64 tensors, whatever the
    vocabulary (no (n, vocab) table, no (n, L, L) comparison)."""
    ordered = tokens.sort(dim=1).values  # (n, L)
    return torch.searchsorted(ordered, tokens, right=True) - torch.searchsorted(ordered, tokens)  # (n, L)


def histogram_sequences(n: int, length: int, vocab: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n sequences: x (n, L+1) token ids `BOS, t_1 .. t_L`, y (n, L+1) the count of each t_i in its
    sequence (IGNORE at BOS)."""
    tokens = torch.randint(0, vocab, (n, length), generator=generator)  # (n, L)
    x = torch.cat((torch.full((n, 1), vocab), tokens), dim=1)  # (n, L+1)
    y = torch.cat((torch.full((n, 1), IGNORE), histogram_counts(tokens)), dim=1)  # (n, L+1)
    return x, y


class Histogram(SyntheticTask):
    """Batches: x int64 (B, L+1) token ids, y int64 (B, L+1) counts (IGNORE at BOS)."""

    name = "histogram"

    def __init__(self, cfg: DataConfig):
        super().__init__(cfg)
        self.bos = cfg.vocab

    def generate(self, n: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return histogram_sequences(n, length, self.cfg.vocab, generator)
