"""Tolerances that follow the size of the compared numbers, so a test passes on any machine.

Two float computations of one function differ by rounding: a few units of the dtype's eps times the
size of the numbers involved. Fused kernels sum in an order that depends on the CPU's instruction set
(AVX2, AVX-512, ARM) or the GPU, so a fixed `atol` that one machine passes another fails: issue 11's
1.5e-5 against 1e-5 allowed, where unscaled scores at tau 0.1 reach |s| = 79 and a rounding error of
eps * |s| in a score becomes a relative error of the same size in its softmax weight.

`atol(*scales)` = FACTOR * eps(dtype) * prod(max(1, scale)). Measured on the every-setting grid of
tests/test_attention.py, fused vs explicit vs float64 stays below 8 * eps * max|score| * max|output|;
FACTOR = 32 leaves a margin of 4 and still catches a 0.1 % change of the score scale
(test_attention.py::test_the_tolerance_catches_a_wrong_scale).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ablate.models import MultiHeadAttention

FACTOR = 32.0


def eps(dtype: torch.dtype = torch.float32) -> float:
    return torch.finfo(dtype).eps


def atol(*scales: float, dtype: torch.dtype = torch.float32, factor: float = FACTOR) -> float:
    """factor * eps(dtype) * the product of max(1, |scale|) over `scales`."""
    return factor * eps(dtype) * math.prod(max(1.0, abs(s)) for s in scales)


def max_abs(t: torch.Tensor) -> float:
    """Largest finite |entry| of t (masked scores are -inf)."""
    finite = t[torch.isfinite(t)]
    return finite.abs().max().item() if finite.numel() else 0.0


@torch.no_grad()
def max_abs_logit(model: nn.Module, x: torch.Tensor) -> float:
    """Largest |pre-softmax score| (scale, temperature and any score bias applied) of every
    MultiHeadAttention inside `model` on input `x`: the attention's own `project` and `logits` on the
    input each one receives in `model(x)`."""
    found: list[tuple[MultiHeadAttention, torch.Tensor]] = []
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    handles = [m.register_forward_pre_hook(lambda m, args: found.append((m, args[0]))) for m in layers]
    try:
        model(x)
    finally:
        for h in handles:
            h.remove()
    return max((max_abs(m.logits(*m.project(h)[:2])) for m, h in found), default=0.0)


def assert_close(actual: torch.Tensor, expected: torch.Tensor, *scales: float, factor: float = FACTOR):
    """torch.testing.assert_close with rtol 0 and atol(max|expected|, *scales) at the eps of the less
    precise of the two dtypes, compared in the more precise one."""
    coarse, fine = sorted((actual.dtype, expected.dtype), key=lambda d: torch.finfo(d).eps, reverse=True)
    tol = atol(max_abs(expected), *scales, dtype=coarse, factor=factor)
    torch.testing.assert_close(actual.to(fine), expected.to(fine), atol=tol, rtol=0)


@torch.no_grad()
def output_atol(model: nn.Module, x: torch.Tensor, factor: float = FACTOR) -> float:
    """Rounding allowance for model(x): atol(max|model(x)|, max|attention score|), what two kernels
    (another batch shape, another CPU) may give apart for one output entry."""
    return atol(max_abs(model(x)), max_abs_logit(model, x), factor=factor)


def near_tie_mask(logits: torch.Tensor, tol: float) -> torch.Tensor:
    """True where argmax(logits, -1) has a top-2 margin of at most 2 * tol: an error of tol in each
    of the two logits (another kernel's rounding) can flip that prediction."""
    top2 = logits.topk(2, dim=-1).values  # (..., 2)
    return top2[..., 0] - top2[..., 1] <= 2 * tol


def near_ties(logits: torch.Tensor, tol: float, counted: torch.Tensor | None = None) -> int:
    """How many predictions (those where `counted`, if given) are near ties (`near_tie_mask`)."""
    close = near_tie_mask(logits, tol)
    return int((close & counted).sum() if counted is not None else close.sum())


def assert_accuracy_close(actual: float, expected: float, ties: int, total: int) -> None:
    """Two accuracies over `total` predictions from kernels that round apart: each near tie
    (`near_ties`) may flip one prediction, so they may differ by ties / total and no more, plus the rounding
    of a quotient in float32 (torchmetrics keeps the recorded accuracy in float32: 66/260 is 0.2538461685)."""
    allowed = ties / total + torch.finfo(torch.float32).eps
    assert abs(actual - expected) <= allowed, (
        f"accuracy {actual} vs {expected}: |diff| {abs(actual - expected):.3g} > {allowed:.3g} "
        f"({ties} near ties of {total})"
    )
