"""Temperature at inference (issue 37; the tutorial: "推理采样时调它", tune τ when sampling): a trained model
evaluated with its attention's τ changed, nothing retrained.

`model.temperature` divides the scores by τ through one number, each attention layer's `scale`
((1/√d_head if qk_scale else 1) / τ); a positional score bias (ALiBi) is added after it and is not
divided. So scale / f inside `attention_temperature(model, f)` is exactly the model built with
temperature τ × f and the same weights. The output softmax's own temperature (the logits divided by f,
what sampling a next token would change) moves the loss and never the argmax.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from .common import IGNORE, attention_blocks, correct, probe, task_loss, to_device

FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)  # the trained τ times these at inference


def factor_name(factor: float) -> str:
    """A factor as a key's tail: 0.1 -> "0p1", 3.0 -> "3" (no dot in a metric's name)."""
    return f"{factor:g}".replace(".", "p")


@contextmanager
def attention_temperature(model: nn.Module, factor: float) -> Iterator[None]:
    """Within the block every attention layer's τ is `factor` times the trained one (its scale / factor)."""
    if not factor > 0:
        raise ValueError(f"factor={factor!r} is not allowed; a temperature factor is a number > 0")
    layers = [block.attention for block in attention_blocks(model, "attention temperature")]
    saved = [layer.scale for layer in layers]
    try:
        for layer in layers:
            layer.scale = layer.scale / factor
        yield
    finally:
        for layer, scale in zip(layers, saved):
            layer.scale = scale


@probe
@torch.no_grad()
def inference_temperature(model: nn.Module, loader: Iterable, factors: Sequence[float] = FACTORS) -> dict[str, float]:
    """For each factor f over `loader`: `tau_acc_<f>` and `tau_loss_<f>`, accuracy and task loss with every
    attention layer at f times its trained τ; `out_tau_loss_<f>`, the task loss with the output logits
    divided by f and attention as trained (its accuracy is the trained model's: an argmax ignores f)."""
    out: dict[str, float] = {}
    names = [factor_name(f) for f in factors]
    out_loss, counted = dict.fromkeys(names, 0.0), 0
    for x, y in loader:  # attention as trained: the output softmax at every factor in one pass
        x, y = to_device(model, x, y)
        logits, n = model(x), int((y != IGNORE).sum())
        counted += n
        for f, name in zip(factors, names):
            out_loss[name] += task_loss(logits / f, y).item() * n
    for f, name in zip(factors, names):
        right = total = 0
        loss = 0.0
        with attention_temperature(model, f):
            for x, y in loader:
                x, y = to_device(model, x, y)
                logits = model(x)
                r, n = correct(logits, y)
                right, total = right + r, total + n
                loss += task_loss(logits, y).item() * n
        out[f"tau_acc_{name}"] = right / total if total else float("nan")
        out[f"tau_loss_{name}"] = loss / total if total else float("nan")
        out[f"out_tau_loss_{name}"] = out_loss[name] / counted if counted else float("nan")
    return out
