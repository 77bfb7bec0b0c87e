"""Synthetic lag-recall task (issue 25, the RNN's long range): read n tokens and a query; at the query,
emit the first token, read n steps earlier.

Input `t_1 .. t_n, QUERY` (length n+1) with tokens uniform in [0, vocab), QUERY = vocab. Target: t_1 at
the query, IGNORE (-100) elsewhere. The lag n is data.length (data.test_length tests another lag).

Why it isolates "an RNN forgets the start of a long sequence": there is one token to hold, so the
model's capacity is not the question (copy at length L holds L tokens at once and confounds memory
with capacity); only how far back it must reach moves, with the number of distractors read after it.
A recurrent model must carry t_1 through n updates of its state; attention reaches it in one step, if
its positions tell it which token came first.

Reference levels: chance (the most frequent target, about 1 / vocab), and the order-blind level. A
model blind to order knows the bag of the n tokens and that t_1 is one of them, each of the n
positions equally likely to be the first given the bag, so its best guess is the bag's most frequent
token, right with probability (largest count) / n: `expected_order_blind` (30.0 % at n = 8, vocabulary
10, falling towards 1 / vocab as n grows). The generic in-sample maximum (`reference.order_blind`)
would count memorised bags instead: a bag of n tokens almost never repeats, and every sequence has one
target. Its registry entry: ablate/registry.py.
"""

from __future__ import annotations

import torch

from .synthetic import IGNORE, SyntheticTask

__all__ = ["Recall", "expected_order_blind", "recall_sequences"]


def recall_sequences(n: int, length: int, vocab: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n sequences: x (n, L+1) token ids `t_1 .. t_L, QUERY`, y (n, L+1) with t_1 at the query."""
    tokens = torch.randint(0, vocab, (n, length), generator=generator)  # (n, L)
    x = torch.cat((tokens, torch.full((n, 1), vocab)), dim=1)  # (n, L+1)
    y = torch.full_like(x, IGNORE)
    y[:, -1] = tokens[:, 0]
    return x, y


def expected_order_blind(x: torch.Tensor, y: torch.Tensor) -> float:
    """The accuracy an order-blind model can expect: the mean over sequences of the largest token count
    among t_1 .. t_L, over L (x (n, L+1) ends with the query; y is not read: every row has one target)."""
    tokens = x[:, :-1]  # (n, L)
    if tokens.numel() == 0:
        return float("nan")
    ordered = tokens.sort(dim=1).values  # (n, L): each token's count by binary search, any vocabulary
    counts = torch.searchsorted(ordered, ordered, right=True) - torch.searchsorted(ordered, ordered)
    return (counts.max(dim=1).values.double() / tokens.shape[1]).mean().item()


class Recall(SyntheticTask):
    """Batches: x int64 (B, L+1) token ids, y int64 (B, L+1) (IGNORE except at the query)."""

    name = "recall"
    levels = {"order_blind": expected_order_blind}  # an expectation on fresh data, not an in-sample maximum

    def generate(self, n: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return recall_sequences(n, length, self.cfg.vocab, generator)
