"""Order sensitivity: what a fixed permutation of the input sequence (MNIST's rows) changes.

Self-attention without positional information is permutation-equivariant, A(Px) = P A(x) Pᵀ, and a
mean- or CLS-pooled classifier on top of it is then permutation-invariant.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import nn

from .common import IGNORE, attention_blocks, probe, to_device


def _as_index(permutation: torch.Tensor | Sequence[int], device: torch.device) -> torch.Tensor:
    perm = torch.as_tensor(permutation, dtype=torch.long, device=device)
    if not torch.equal(perm.sort().values, torch.arange(len(perm), device=device)):
        raise ValueError(f"permutation={perm.tolist()} is not a permutation of 0..{len(perm) - 1}")
    return perm


def _encoder_permutation(perm: torch.Tensor, length: int) -> torch.Tensor:
    """The permutation of the encoder's tokens: tokens a pooling prepends (CLS) stay in front."""
    extra = length - len(perm)
    return torch.cat((torch.arange(extra, device=perm.device), perm + extra))


@probe
@torch.no_grad()
def equivariance_error(
    model: nn.Module, x: torch.Tensor, permutation: torch.Tensor | Sequence[int]
) -> float:
    """max |A(Px) - P A(x) Pᵀ| over the batch and heads of the first layer's attention weights,
    where Px = x[:, permutation] (the sequence dim permuted)."""
    attention_blocks(model, "equivariance_error")
    (x,) = to_device(model, x)
    perm = _as_index(permutation, x.device)
    a = model(x, return_attention=True)[1][0]  # (B, H, T, T)
    a_perm = model(x[:, perm], return_attention=True)[1][0]
    p = _encoder_permutation(perm, a.shape[-1])
    expected = a[:, :, p][:, :, :, p]  # (P A Pᵀ)[i, j] = A[p_i, p_j]
    return (a_perm - expected).abs().max().item()


@probe
@torch.no_grad()
def order_sensitivity(
    model: nn.Module, loader: Iterable, permutation: torch.Tensor | Sequence[int]
) -> dict[str, float]:
    """acc (original order), perm_acc (every sequence permuted) and perm_agreement (fraction of
    predictions that do not change) over `loader`. For per-position outputs (copy tasks) the
    permuted prediction at i is compared with the original one at permutation[i]. It reads the
    model's outputs only, so it measures a recurrent model as it measures a Transformer."""
    right = right_perm = agree = total = 0
    for x, y in loader:
        x, y = to_device(model, x, y)
        perm = _as_index(permutation, x.device)
        pred = model(x).argmax(-1)  # (B,) or (B, T)
        pred_perm = model(x[:, perm]).argmax(-1)
        if pred.dim() == 2:  # one prediction per position moves with its token
            pred, y = pred[:, perm], y[:, perm]
        counted = y != IGNORE
        right += int(((pred == y) & counted).sum())
        right_perm += int(((pred_perm == y) & counted).sum())
        agree += int(((pred_perm == pred) & counted).sum())
        total += int(counted.sum())
    if total == 0:
        raise ValueError("order_sensitivity: the loader has no counted targets")
    return {"acc": right / total, "perm_acc": right_perm / total, "perm_agreement": agree / total}
