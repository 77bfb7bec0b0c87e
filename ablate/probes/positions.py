"""Accuracy by position in the emitted sequence: where a token task's errors sit (early or late outputs)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
from torch import nn

from .common import IGNORE, NotApplicable, probe, to_device


@probe
@torch.no_grad()
def accuracy_by_position(model: nn.Module, loader: Iterable) -> np.ndarray:
    """(K,) float64: accuracy at the k-th emitted token, k = 0 .. K-1, over every sequence of `loader`.

    The k-th emitted token of a sequence is its k-th position whose target is not IGNORE (copy: the
    k-th blank, which holds the k-th token in order, or in reverse order for reverse copy); positions
    whose target is IGNORE are not counted. K is the most counted positions any sequence has; each
    k is averaged over the sequences that have a k-th. One forward pass per batch. NotApplicable for
    a model with one output per sequence (MNIST rows); ValueError when the loader counts nothing."""
    right = np.zeros(0)
    total = np.zeros(0)
    for x, y in loader:
        x, y = to_device(model, x, y)
        logits = model(x)
        if logits.dim() != 3:
            raise NotApplicable("accuracy_by_position needs one output per position (a token task); this model "
                                "gives one per sequence")
        counted = y != IGNORE  # (B, T)
        rank = (counted.cumsum(dim=1) - 1)[counted]  # the k of each counted position
        hit = (logits.argmax(-1) == y)[counted].double()
        k = int(rank.max()) + 1 if rank.numel() else 0
        if k > len(total):
            right, total = np.pad(right, (0, k - len(right))), np.pad(total, (0, k - len(total)))
        right[:k] += torch.bincount(rank, weights=hit, minlength=k).cpu().numpy()
        total[:k] += torch.bincount(rank, minlength=k).cpu().numpy()
    if not total.any():
        raise ValueError("accuracy_by_position: the loader has no counted targets")
    return right / total
