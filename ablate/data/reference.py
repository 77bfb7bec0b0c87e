"""Reference levels of a task, computed exactly on one of its evaluation sets.

- `chance`: the accuracy of the best constant prediction, the most frequent target of the set.
- `order_blind`: the accuracy an order-blind model can expect. A model that cannot see order (no
  positional encoding, no causal mask) is permutation-equivariant: its prediction at a position is a
  function of that position's own token and of the multiset of the sequence's tokens. `order_blind`
  here is the best score of such a function on the set itself: positions that share (multiset, own
  token), within a sequence and across sequences with the same multiset, get one prediction, the
  most frequent target among them. Where every such position is equally likely to hold any of the
  group's targets (copy: every blank looks the same; histogram: the count is a function of the bag)
  that is also what the model can expect on fresh data: E[largest token count] / length for copy,
  30.0 % at length 8 and vocabulary 10; 100 % for histogram. Where positions of one sequence carry
  different own tokens (lookup), the maximum on the set counts memorised positions, and the task
  gives its own exact expectation instead (its data module's `levels`).

Tokens tasks: x (n, T) int64, y (n, T) with IGNORE (-100) where there is no target.
Classification: x (n, T, features), y (n,): only `chance` applies.
"""

from __future__ import annotations

import torch

IGNORE = -100  # F.cross_entropy's default ignore_index: a position without a target


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
    # one id per distinct multiset: rows sorted, then deduplicated (O(n L) memory, any vocabulary)
    bag = torch.unique(x.sort(dim=1).values, dim=0, return_inverse=True)[1]  # (n,)
    key = (bag[:, None] * k + x)[keep]  # (targets,) all an order-blind model knows of a position
    key = torch.unique(key, return_inverse=True)[1]
    target = torch.unique(y[keep], return_inverse=True)[1]
    n_out = int(target.max().item()) + 1
    pairs, per_pair = torch.unique(key * n_out + target, return_counts=True)
    majority = torch.zeros(int(key.max().item()) + 1, dtype=torch.long)
    majority.scatter_reduce_(0, pairs // n_out, per_pair, reduce="amax")
    return majority.sum().item() / target.numel()


LEVELS = {"chance": lambda x, y: chance(y), "order_blind": order_blind}


def reference_levels(x: torch.Tensor, y: torch.Tensor, names: tuple[str, ...],
                     own: dict | None = None) -> dict[str, float]:
    """{name: level} for the names a task's registry entry lists; `own` holds a task's own
    computation of a level (name -> function of x, y), used instead of the generic one."""
    levels = {**LEVELS, **(own or {})}
    return {name: levels[name](x, y) for name in names}
