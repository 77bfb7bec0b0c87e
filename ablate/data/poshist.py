"""Synthetic position-and-count task (Q3): at each token, the token two back and whether the token
itself occurs again in the sequence, as one class. Every answer needs one positional and one content
relation at once.

Input `BOS, t_1 .. t_L` (length L+1), tokens uniform in [0, vocab), BOS = vocab. At token i >= 3 the
target is the pair (t_{i-2}, min(c_i, CAP)) with c_i = #{j : t_j = t_i} (the histogram count, t_i
itself included), as one of vocab * CAP classes, t_{i-2} * CAP + min(c_i, CAP) - 1; with CAP = 2
the content part is whether t_i occurs elsewhere in the sequence. IGNORE (-100) at BOS and at t_1,
t_2, which have no token two back.

Why it isolates Q3 ("several small heads beat one big one") where `lookup` cannot: lookup's two
relations are of one kind (two offsets), so a second head is one more positional fetch. Here they
differ in kind, and each is one a single head serves in one layer. The positional one (`lookup1`'s
y_i = t_{i-2}) wants a head that scores position i-2 high; the content one (`histogram`'s count)
wants a head that scores the equal tokens and BOS alike, leaving weight 1/(1 + c) on BOS for the FFN
to read (1/2 for a token that occurs once, at most 1/3 otherwise). One softmax that does both splits
its weight between i-2 and the equal tokens: the weight left on BOS is then 1/(1 + c + e^(s - b)) (s
the score of i-2, b that of BOS and the equal tokens) and the token two back arrives diluted by a
count-dependent factor, so the read-out has to untangle two relations from one average. Two heads can
each serve one. One attention layer cannot compose two attention steps, so there is no induction-style
route either; the FFN is needed (it decodes the count), so the model that isolates the question is
1 layer with its FFN.

Design choices: the count is over the whole sequence (a pure content relation; under a causal mask
the later tokens are invisible, so the count is a bidirectional model's task, as in `histogram`);
it is capped at CAP, so the class count does not grow with the length and a longer test sequence
(data.test_length) asks for the same classes; CAP = 2 ("whether", not "how often") keeps the count's
decode to one threshold, so that what the head count changes is the split of the softmax, not how
finely one layer reads a weight (docs/tasks/poshist.md); the token two back, not one, so the
positional relation is `lookup1`'s. Reference levels (besides chance): `position_only`, the expected
accuracy of a model that knows t_{i-2} and its own token and guesses the count; `order_blind`, the
expected accuracy of one that knows the bag of tokens (so the count) and guesses t_{i-2} from it.
Its registry entry: ablate/registry.py.
"""

from __future__ import annotations

import math

import torch

from ..config import DataConfig
from ..registry import POSHIST_BACK as BACK
from ..registry import POSHIST_CAP as CAP
from .histogram import histogram_counts
from .lookup import expected_order_blind
from .synthetic import IGNORE, SyntheticTask

__all__ = ["BACK", "CAP", "Poshist", "expected_order_blind_poshist", "expected_position_only",
           "poshist_sequences", "poshist_targets"]


def poshist_targets(tokens: torch.Tensor) -> torch.Tensor:
    """y (n, L) for tokens (n, L) without BOS: t_{i-BACK} * CAP + min(c_i, CAP) - 1, IGNORE at the
    first BACK positions."""
    y = torch.full_like(tokens, IGNORE)  # (n, L)
    count = histogram_counts(tokens.contiguous()).clamp_(max=CAP)  # (n, L) in 1..CAP
    y[:, BACK:] = tokens[:, :-BACK] * CAP + count[:, BACK:] - 1
    return y


def poshist_sequences(n: int, length: int, vocab: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n sequences: x (n, L+1) token ids `BOS, t_1 .. t_L`, y (n, L+1) pair classes (IGNORE at BOS
    and at the first BACK tokens)."""
    tokens = torch.randint(0, vocab, (n, length), generator=generator)  # (n, L)
    x = torch.cat((torch.full((n, 1), vocab), tokens), dim=1)  # (n, L+1)
    y = torch.cat((torch.full((n, 1), IGNORE), poshist_targets(tokens)), dim=1)  # (n, L+1)
    return x, y


def _best_count_guess(others: int, vocab: int, known: int) -> float:
    """P(the most likely min(c, CAP) is right) for c = 1 + known + Binomial(others, 1/vocab): the
    count of a token when `known` of the other positions are known to hold it and `others` are unseen."""
    p = [math.comb(others, k) * (1 / vocab) ** k * (1 - 1 / vocab) ** (others - k) for k in range(others + 1)]
    capped = [0.0] * (CAP + 1)
    for k, pk in enumerate(p):
        capped[min(1 + known + k, CAP)] += pk
    return max(capped)


def expected_position_only(x: torch.Tensor, y: torch.Tensor) -> float:
    """The accuracy a model that knows t_{i-2} and its own token t_i, and nothing else of the
    sequence, can expect: the pair is right when the count is, and the count's best guess is the mode
    of min(1 + [t_{i-2} = t_i] + Binomial(L - 2, 1/vocab), CAP) (the other L - 2 tokens unseen, i.i.d.
    uniform). x (n, L+1) starts with BOS = vocab."""
    keep = y != IGNORE
    if not keep.any():
        return float("nan")
    vocab, length = int(x[0, 0]), x.shape[1] - 1
    tokens = x[:, 1:]  # (n, L)
    same = torch.zeros_like(tokens, dtype=torch.bool)
    same[:, BACK:] = tokens[:, BACK:] == tokens[:, :-BACK]  # (n, L) t_i = t_{i-2}
    same = torch.cat((torch.zeros_like(same[:, :1]), same), dim=1)  # (n, L+1), aligned with y
    level = {known: _best_count_guess(length - 2, vocab, known) for known in (0, 1)}
    right = level[0] + (level[1] - level[0]) * same.double()  # (n, L+1)
    return right[keep].mean().item()


def expected_order_blind_poshist(x: torch.Tensor, y: torch.Tensor) -> float:
    """The accuracy an order-blind model can expect: it knows the bag of tokens and its own token, so
    the count exactly, and guesses t_{i-2} as the most frequent of the other L-1 tokens (lookup1's
    expectation, `lookup.expected_order_blind`, on the tokens without BOS)."""
    return expected_order_blind(x[:, 1:], y[:, 1:], pair=False)


class Poshist(SyntheticTask):
    """Batches: x int64 (B, L+1) token ids, y int64 (B, L+1) pair classes (IGNORE at BOS, t_1, t_2)."""

    name = "poshist"
    # expectations on fresh data, not in-sample maxima (see lookup.expected_order_blind for why)
    levels = {"position_only": expected_position_only, "order_blind": expected_order_blind_poshist}

    def __init__(self, cfg: DataConfig):
        super().__init__(cfg)
        self.bos = cfg.vocab

    def generate(self, n: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return poshist_sequences(n, length, self.cfg.vocab, generator)
