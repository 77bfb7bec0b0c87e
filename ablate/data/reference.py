"""Reference levels of a task, computed exactly on one of its evaluation sets.

- `chance`: the accuracy of the best constant prediction, the most frequent target of the set.
- `order_blind`: the best accuracy any order-blind model can reach on the set. A model that cannot
  see order (no positional encoding, no causal mask) is permutation-equivariant: its prediction at a
  position is a function of that position's own token and of the multiset of the sequence's tokens.
  So positions that share (multiset, own token) — within a sequence and across sequences with the
  same multiset — get one prediction, and the best one is their most frequent target. The level is
  the sum of those majorities over all target positions. For the copy task (every blank looks the
  same) it is E[largest token count] / length: 30.0 % at length 8 and vocabulary 10.

Tokens tasks: x (n, T) int64, y (n, T) with IGNORE (-100) where there is no target.
Classification: x (n, T, features), y (n,): only `chance` applies.
"""

from __future__ import annotations

import torch

IGNORE = -100


def chance(y: torch.Tensor) -> float:
    """Accuracy of always predicting the most frequent target."""
    targets = y[y != IGNORE]
    if targets.numel() == 0:
        return float("nan")
    return torch.unique(targets, return_counts=True)[1].max().item() / targets.numel()


def order_blind(x: torch.Tensor, y: torch.Tensor) -> float:
    """The best accuracy of a prediction that depends only on (multiset of x's row, own token)."""
    keep = y != IGNORE
    if not keep.any():
        return float("nan")
    tokens, x = torch.unique(x, return_inverse=True)  # compact ids 0..k-1 (vocabularies can be huge)
    k = len(tokens)
    counts = torch.zeros(x.shape[0], k, dtype=torch.long).scatter_add_(1, x, torch.ones_like(x))
    bag = torch.unique(counts, dim=0, return_inverse=True)[1]  # (n,) one id per distinct multiset
    key = (bag[:, None] * k + x)[keep]  # (targets,) all an order-blind model knows of a position
    key = torch.unique(key, return_inverse=True)[1]
    target = torch.unique(y[keep], return_inverse=True)[1]
    n_out = int(target.max().item()) + 1
    pairs, per_pair = torch.unique(key * n_out + target, return_counts=True)
    majority = torch.zeros(int(key.max().item()) + 1, dtype=torch.long)
    majority.scatter_reduce_(0, pairs // n_out, per_pair, reduce="amax")
    return majority.sum().item() / target.numel()


LEVELS = {"chance": lambda x, y: chance(y), "order_blind": order_blind}


def reference_levels(x: torch.Tensor, y: torch.Tensor, names: tuple[str, ...]) -> dict[str, float]:
    """{name: level} for the names a task's registry entry lists."""
    return {name: LEVELS[name](x, y) for name in names}
