"""What each layer's tokens can be read for, by a linear readout (issue 37; the tutorial: 浅层学语法，深层学抽象,
shallow layers learn the surface, deep layers the abstraction).

A sequence classifier (MNIST rows) is read at every depth: the tokens entering the first block (`in`:
embedding and positions) and the output of every block l. Two linear readouts are fitted on the first half
of the evaluation examples and scored on the other half, one weight matrix shared by every position:

- `readout_r2`: the surface, each token's own input (its row of 28 pixels, or its token as a one-hot),
  reconstructed from the token's state alone: R² over the held-out tokens (1: the input is all there
  linearly; 0: no better than its mean);
- `readout_acc`: the abstraction, the sequence's label from one token's state alone: accuracy over the
  held-out tokens (chance: one over the classes; a token that has gathered the whole image can reach the
  classifier's accuracy).

Ridge regression in float64, the penalty 1e-3 of the mean feature variance times the number of fitted
tokens, so that it is scale-free; the same split for every layer.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from .common import blocks_of, probe, removing, to_device

MAX_EXAMPLES = 1024  # evaluation sequences read: 512 fitted (14,336 MNIST tokens for 65 weights each), 512 scored
RIDGE = 1e-3


def _ridge(features: torch.Tensor, targets: torch.Tensor, fit: torch.Tensor) -> torch.Tensor:
    """Predictions for every row of `features` from a ridge fit (with an intercept) on the rows `fit`."""
    mean_x, mean_y = features[fit].mean(0), targets[fit].mean(0)
    xc, yc = features[fit] - mean_x, targets[fit] - mean_y
    penalty = RIDGE * xc.var(0).mean() * len(xc)
    gram = xc.T @ xc + penalty * torch.eye(xc.shape[1], dtype=xc.dtype, device=xc.device)
    weights = torch.linalg.solve(gram, xc.T @ yc)
    return (features - mean_x) @ weights + mean_y


def _surface(states: torch.Tensor, inputs: torch.Tensor, fit: torch.Tensor) -> float:
    held = ~fit
    predicted = _ridge(states, inputs, fit)[held]
    truth = inputs[held]
    residual = ((truth - predicted) ** 2).sum()
    total = ((truth - truth.mean(0)) ** 2).sum()
    return (1 - residual / total).item()


def _label(states: torch.Tensor, labels: torch.Tensor, classes: int, fit: torch.Tensor) -> float:
    held = ~fit
    predicted = _ridge(states, F.one_hot(labels, classes).double(), fit)[held].argmax(-1)
    return (predicted == labels[held]).double().mean().item()


@probe
@torch.no_grad()
def layer_readout(model: nn.Module, loader: Iterable, max_examples: int = MAX_EXAMPLES) -> dict[str, float]:
    """`readout_r2_in`, `readout_acc_in` for the tokens entering the first block, and
    `readout_r2_l{l}`, `readout_acc_l{l}` for the output of block l, over the first `max_examples`
    sequences of `loader`. Only for a sequence classifier (one label per sequence) whose tokens are its
    inputs' (pooling mean: no added cls token): {} otherwise."""
    blocks = blocks_of(model)
    states: dict[str, list[torch.Tensor]] = {}
    inputs: list[torch.Tensor] = []
    labels: list[torch.Tensor] = []

    def keep(where: str, entering: bool = False):
        def hook(module, args, output=None):
            h = args[0] if entering else output[0] if isinstance(output, tuple) else output
            states.setdefault(where, []).append(h.double().cpu())

        return hook

    handles = [blocks[0].register_forward_pre_hook(keep("in", entering=True))]
    handles += [block.register_forward_hook(keep(f"l{layer}")) for layer, block in enumerate(blocks)]
    seen = 0
    with removing(handles):
        for x, y in loader:
            if y.dim() != 1:
                return {}
            x, y = x[: max_examples - seen], y[: max_examples - seen]
            (xd,) = to_device(model, x)
            model(xd)
            inputs.append(F.one_hot(x, int(x.max()) + 1).double() if not x.is_floating_point() else x.double())
            labels.append(y.cpu())
            seen += len(x)
            if seen >= max_examples:
                break
    if seen < 4:
        return {}
    width = max(t.shape[-1] for t in inputs)
    surface = torch.cat([F.pad(t, (0, width - t.shape[-1])) for t in inputs])  # (N, T, k)
    label = torch.cat(labels)
    n, length = surface.shape[:2]
    fit = (torch.arange(n) < n // 2).repeat_interleave(length)  # the first half of the sequences, every token
    tokens_label = label.repeat_interleave(length)
    classes = int(label.max()) + 1
    out: dict[str, float] = {}
    for where, parts in states.items():
        h = torch.cat(parts)
        if h.shape[1] != length:  # pooling cls / last adds a token the input has not: no token to pair it with
            return {}
        h = h.reshape(n * length, -1)
        out[f"readout_r2_{where}"] = _surface(h, surface.reshape(n * length, -1), fit)
        out[f"readout_acc_{where}"] = _label(h, tokens_label, classes, fit)
    return out
