"""Attention maps and pre-softmax score statistics per layer.

The scores are the model's own `MultiHeadAttention.logits(q, k)` (after the √d_head scale, the
temperature, any positional score bias and the causal mask) on the input each attention layer actually receives, captured
with a forward pre-hook; the weights are their softmax, exactly the explicit attention path.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import blocks_of, probe, removing, to_device

ONE_HOT = 0.99  # a row whose largest weight exceeds this counts as (near) one-hot


@probe
@torch.no_grad()
def attention_maps(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Post-softmax weights (B, L, H, T, T): `attention_maps(model, x[:1])[0]` is one example's maps."""
    (x,) = to_device(model, x)
    _, maps = model(x, return_attention=True)  # L x (B, H, T, T)
    return torch.stack(maps, dim=1)


@probe
@torch.no_grad()
def layer_logits(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Pre-softmax scores of every layer, L x (B, H, T, T), -inf where the causal mask hides a key."""
    (x,) = to_device(model, x)
    blocks = blocks_of(model)
    inputs: list[torch.Tensor | None] = [None] * len(blocks)

    def keep(layer: int):
        def hook(module, args):
            inputs[layer] = args[0]  # (B, T, d): after pre_norm, what attention sees

        return hook

    with removing(b.attention.register_forward_pre_hook(keep(i)) for i, b in enumerate(blocks)):
        model(x)
    scores = []
    for block, h in zip(blocks, inputs):
        q, k, _ = block.attention.project(h)  # (B, H, T, hs) each
        scores.append(block.attention.logits(q, k))  # (B, H, T, T)
    return scores


def row_stats(scores: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-row statistics of one layer's scores (B, H, T, T), rows with a single visible key left out.

    entropy: -sum p log p / log(visible keys), 1 for uniform and 0 for one-hot; rowmax: the largest
    weight; onehot: rowmax > ONE_HOT. Each is a 1-D tensor over the kept rows; `entropy_heads` (H,)."""
    visible = torch.isfinite(scores)
    n_keys = visible.sum(-1)  # (B, H, T)
    rows = n_keys > 1
    p = scores.softmax(dim=-1)
    entropy = -torch.special.xlogy(p, p).sum(-1) / n_keys.clamp(min=2).log()  # (B, H, T)
    rowmax = p.amax(dim=-1)  # (B, H, T)
    per_head = (entropy * rows).sum((0, 2)) / rows.sum((0, 2))  # (H,)
    return {
        "entropy": entropy[rows],
        "rowmax": rowmax[rows],
        "onehot": (rowmax[rows] > ONE_HOT).float(),
        "entropy_heads": per_head,
    }


def score_stats(model: nn.Module, x: torch.Tensor) -> dict[str, float]:
    """logit_std_l, logit_max_l (std and max |score| over visible entries), entropy_l, rowmax_l,
    onehot_frac_l (fraction of rows with max weight > 0.99), for every layer l."""
    out: dict[str, float] = {}
    for layer, s in enumerate(layer_logits(model, x)):
        visible = s[torch.isfinite(s)]
        rows = row_stats(s)
        out[f"logit_std_l{layer}"] = visible.std().item()
        out[f"logit_max_l{layer}"] = visible.abs().max().item()
        out[f"entropy_l{layer}"] = rows["entropy"].mean().item()
        out[f"rowmax_l{layer}"] = rows["rowmax"].mean().item()
        out[f"onehot_frac_l{layer}"] = rows["onehot"].mean().item()
    return out


def entropy_per_head(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """(L, H) normalised attention entropy of every head."""
    return torch.stack([row_stats(s)["entropy_heads"] for s in layer_logits(model, x)])
