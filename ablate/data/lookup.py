"""Synthetic lookup task (Q3): each position's target is the ordered pair of the two tokens before it.

Input `t_1 .. t_L` (length L), tokens uniform in [0, vocab), no separator. At position i the target
is the ordered pair (t_{i+A}, t_{i+B}) = (t_{i-2}, t_{i-1}) as one of vocab² classes,
t_{i-2} * vocab + t_{i-1}; the first two positions have no such pair and are IGNORE (-100). The
control `lookup1` asks for one lookup only, y_i = t_{i+A} = t_{i-2} (vocab classes), at the same
positions of the same kind of sequences.

Why it isolates Q3 ("several small heads beat one big one"): one softmax that puts weight on both
positions sums their value vectors through one W_V, so the pair (p, q) and (q, p) differ only through
unequal weights; two heads can each fetch one token into their own subspace, which a linear read-out
decodes. The control needs one fetch, which one head suits: if heads help, they help on `lookup` and
not on `lookup1`. A second layer can also fetch the tokens one after the other, so the 1-layer,
attention-only model is the one that isolates the question.

Design choices, made before any run: offsets A = -2, B = -1 point backwards, so a causal model can
solve the task as well as a bidirectional one; |A| != |B|, so the two positions are told apart by
position alone (a scheme that sees only |i - j|, bidirectional ALiBi, cannot tell t_{i-1} from
t_{i+1} — no lookup task can fix that); at the start of the sequence the target is IGNORE rather than
wrapped round, so the same relative rule holds at every targeted position and a longer test
sequence (data.test_length) asks the same function. No BOS: every targeted position has both its
partners to attend to. An order-blind model knows the bag of tokens but not which two precede i,
so it can expect little: 9.3 % at length 8, vocabulary 10 (chance 1.5 %; see expected_order_blind
for why the recorded in-sample `order_blind` level is far higher).
Its registry entries: ablate/registry.py.
"""

from __future__ import annotations

import torch

from .synthetic import IGNORE, SyntheticTask

A, B = -2, -1  # the target at i is (t_{i+A}, t_{i+B}); the control's is t_{i+A}
SPAN = max(0, -A, -B) + max(0, A, B)  # positions without both partners (the registry's minimum length - 1)

__all__ = ["A", "B", "SPAN", "Lookup", "Lookup1", "expected_order_blind", "lookup_sequences", "lookup_targets"]


def lookup_targets(x: torch.Tensor, vocab: int, pair: bool) -> torch.Tensor:
    """y (n, L) for token ids x (n, L): t_{i+A} * vocab + t_{i+B} (pair) or t_{i+A} (the control),
    IGNORE where i+A or i+B falls outside the sequence."""
    y = torch.full_like(x, IGNORE)  # (n, L)
    first, stop = max(0, -A, -B), x.shape[1] - max(0, A, B)  # targeted positions: first .. stop-1
    if stop > first:
        target = x[:, first + A : stop + A].clone()  # (n, stop-first)
        if pair:
            target.mul_(vocab).add_(x[:, first + B : stop + B])
        y[:, first:stop] = target
    return y


def lookup_sequences(
    n: int, length: int, vocab: int, pair: bool, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """n sequences of `length` tokens uniform in [0, vocab): x (n, L) token ids, y (n, L) targets."""
    x = torch.randint(0, vocab, (n, length), generator=generator)  # (n, L)
    return x, lookup_targets(x, vocab, pair)


def expected_order_blind(x: torch.Tensor, y: torch.Tensor, pair: bool) -> float:
    """The accuracy an order-blind model can expect on these sequences: the mean, over the targeted
    positions, of the probability that the best guess from (bag of tokens, own token) is right.

    Tokens are i.i.d., so given the bag and the own token o every arrangement of the other L-1 tokens
    is equally likely, and (t_{i+A}, t_{i+B}) is an ordered draw of two of them without replacement:
    with c the bag's counts less o, P(u, v) = c_u c_v / ((L-1)(L-2)) for u != v and
    c_u (c_u - 1) / ((L-1)(L-2)) for u = v, at best max(m1 m2, m1 (m1 - 1)) / ((L-1)(L-2)) for the
    two largest counts m1 >= m2; the control's best is m1 / (L-1).

    `ablate.data.reference.order_blind` is instead the best score of any function of (bag, own token)
    on the set itself. Here a bag of 8 tokens almost never repeats and the own tokens of a sequence
    differ, so that maximum mostly counts memorised positions (77 % on 300 sequences, 73 % on 2,000);
    this expectation (9.3 % at length 8, vocabulary 10) is what a model blind to order can reach on
    fresh data."""
    keep = y != IGNORE
    n, length = x.shape
    # per row, each token's count from the sorted row (O(n L) memory, any vocabulary)
    ordered = x.sort(dim=1).values  # (n, L)
    count_of = lambda v: (torch.searchsorted(ordered, v, right=True) - torch.searchsorted(ordered, v))  # noqa: E731
    own = count_of(x.contiguous())  # (n, L) count of each position's own token
    starts = torch.ones_like(ordered, dtype=torch.bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]  # one entry per distinct token of the row
    distinct = torch.where(starts, count_of(ordered), torch.zeros_like(ordered))
    if length < 3:
        distinct = torch.cat((distinct, torch.zeros(n, 3 - length, dtype=distinct.dtype)), dim=1)
    top = distinct.topk(3, dim=1).values[:, None, :].repeat(1, length, 1)  # (n, L, 3) largest counts
    # less the own token: lower the first of the three equal to its count (if none is, the top two stay)
    first = (top == own[..., None]).long().cumsum(2).eq(1) & (top == own[..., None])  # (n, L, 3)
    m1, m2 = (top - first.long()).sort(dim=2, descending=True).values[..., :2].unbind(2)  # (n, L)
    if pair:
        best = torch.maximum(m1 * m2, m1 * (m1 - 1)).double() / ((length - 1) * (length - 2))
    else:
        best = m1.double() / (length - 1)
    return best[keep].mean().item()


class Lookup(SyntheticTask):
    """Batches: x int64 (B, L) token ids, y int64 (B, L) pair classes (IGNORE at the first two)."""

    name = "lookup"
    pair = True
    # what an order-blind model can expect, not the in-sample maximum (see expected_order_blind)
    levels = {"order_blind": lambda x, y: expected_order_blind(x, y, True)}

    def generate(self, n: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return lookup_sequences(n, length, self.cfg.vocab, self.pair, generator)


class Lookup1(Lookup):
    """The one-lookup control: y_i = t_{i+A}, vocab classes, at the same positions."""

    name = "lookup1"
    pair = False
    levels = {"order_blind": lambda x, y: expected_order_blind(x, y, False)}
