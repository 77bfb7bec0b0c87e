"""What every probe shares: probe mode (eval, forked RNG, modes restored), hook handling, the loss.

A probe is a plain function of (model, batch). `model` is anything with `.encoder` (an `Encoder`, or
the `RecurrentEncoder` of model.arch=lstm/gru) and a forward `model(x, return_attention=False)`:
`SequenceClassifier` or `TokenModel`. A probe of attention on a recurrent model raises NotApplicable;
`run_probes` leaves those out (`not_applicable(model)` names them).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from ..models import Block, Encoder, RecurrentEncoder, RecurrentLayer

IGNORE = -100  # F.cross_entropy's ignore_index: copy-task positions that carry no target


class NotApplicable(ValueError):
    """A probe of something the model does not have (attention, heads) was asked of it."""


def encoder_of(model: nn.Module) -> Encoder | RecurrentEncoder:
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, (Encoder, RecurrentEncoder)):
        raise TypeError(
            f"a probe needs a model with an `.encoder` of type Encoder or RecurrentEncoder, got {type(model).__name__}"
        )
    return encoder


def blocks_of(model: nn.Module) -> list[Block] | list[RecurrentLayer]:
    """The Transformer's Blocks, or the recurrent layers, in order."""
    return list(encoder_of(model).blocks)


def has_attention(model: nn.Module) -> bool:
    """False for a recurrent model (model.arch=lstm/gru): no attention maps, scores or heads."""
    return isinstance(encoder_of(model), Encoder)


def attention_blocks(model: nn.Module, probe: str) -> list[Block]:
    """The Blocks, or NotApplicable naming `probe` for a model without attention."""
    if not has_attention(model):
        raise NotApplicable(f"{probe} needs attention, and this model (arch={encoder_of(model).cfg.arch}) has "
                            "none; not applicable")
    return blocks_of(model)


def device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _cuda_devices(model: nn.Module) -> list[int]:
    """CUDA device indices the model lives on: the RNGs `fork_rng` must save and restore."""
    return sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})


@contextmanager
def probe_mode(model: nn.Module) -> Iterator[None]:
    """Eval mode and a forked RNG for the duration; every module's own train/eval flag restored after.

    Nothing a probe does (dropout is off; a shuffled loader draws from the global RNG) can change the
    RNG stream a training run sees, so its metrics are identical with probes on or off.
    """
    modes = {m: m.training for m in model.modules()}
    try:
        with torch.random.fork_rng(devices=_cuda_devices(model)):
            model.eval()
            yield
    finally:
        for m, training in modes.items():
            m.training = training


def probe(fn):
    """Run `fn(model, ...)` in `probe_mode(model)`."""

    @functools.wraps(fn)
    def wrapper(model: nn.Module, *args, **kwargs):
        with probe_mode(model):
            return fn(model, *args, **kwargs)

    return wrapper


@contextmanager
def removing(handles: Iterable[torch.utils.hooks.RemovableHandle]) -> Iterator[None]:
    """Remove the hooks on exit, whatever happens inside."""
    handles = list(handles)
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def to_device(model: nn.Module, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    device = device_of(model)
    return tuple(t.to(device) for t in tensors)


def task_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the last dim: (B, C) vs (B,) for MNIST rows, (B, T, C) vs (B, T) for copy."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=IGNORE)


def correct(logits: torch.Tensor, y: torch.Tensor) -> tuple[int, int]:
    """(right, counted) predictions; positions whose target is IGNORE are not counted."""
    counted = y != IGNORE
    right = (logits.argmax(-1) == y) & counted
    return int(right.sum()), int(counted.sum())


@probe
@torch.no_grad()
def accuracy(model: nn.Module, loader: Iterable) -> float:
    """Accuracy over every batch of `loader`, IGNORE targets not counted."""
    right = total = 0
    for x, y in loader:
        x, y = to_device(model, x, y)
        r, n = correct(model(x), y)
        right, total = right + r, total + n
    return right / total if total else float("nan")


def ratio(a: float, b: float) -> float:
    """a / b, with inf for a > 0 = b and nan for 0 / 0 instead of an exception."""
    if b == 0:
        return float("inf") if a > 0 else float("nan")
    return a / b
