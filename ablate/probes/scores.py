"""Attention maps and pre-softmax score statistics per layer.

The scores are the model's own `MultiHeadAttention.logits(q, k)` (after the √d_head scale, the
temperature, any positional score bias and the causal mask) on the input each attention layer actually receives, captured
with a forward pre-hook; the weights are their softmax, exactly the explicit attention path. The
variance of the q and k components they are made of is reported beside them.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import attention_blocks, probe, removing, to_device

ONE_HOT = 0.99  # a row whose largest weight exceeds this counts as (near) one-hot


@probe
@torch.no_grad()
def attention_maps(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Post-softmax weights (B, L, H, T, T): `attention_maps(model, x[:1])[0]` is one example's maps."""
    attention_blocks(model, "attention_maps")
    (x,) = to_device(model, x)
    _, maps = model(x, return_attention=True)  # L x (B, H, T, T)
    return torch.stack(maps, dim=1)


@probe
@torch.no_grad()
def layer_qk(model: nn.Module, x: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """q and k of every layer, L x ((B, H, T, hs), (B, H, T, hs)), positional rotation applied: what
    the scores are made of, projected from the input each attention layer actually receives."""
    blocks = attention_blocks(model, "the score probes")
    (x,) = to_device(model, x)
    inputs: list[torch.Tensor | None] = [None] * len(blocks)

    def keep(layer: int):
        def hook(module, args):
            inputs[layer] = args[0]  # (B, T, d): after pre_norm, what attention sees

        return hook

    with removing(b.attention.register_forward_pre_hook(keep(i)) for i, b in enumerate(blocks)):
        model(x)
    return [block.attention.project(h)[:2] for block, h in zip(blocks, inputs)]


@probe
@torch.no_grad()
def layer_logits(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Pre-softmax scores of every layer, L x (B, H, T, T), -inf where the causal mask hides a key."""
    return [block.attention.logits(q, k) for block, (q, k) in zip(attention_blocks(model, "layer_logits"), layer_qk(model, x))]


def component_variance(t: torch.Tensor) -> float:
    """Mean over the components of q or k (B, H, T, hs) of each one's variance over the B * T tokens:
    1 where every component has unit variance, the premise of the sqrt(d_k) scaling."""
    B, H, T, hs = t.shape
    return t.transpose(1, 2).reshape(B * T, H * hs).var(dim=0).mean().item()


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


@torch.no_grad()
def score_stats(model: nn.Module, x: torch.Tensor) -> dict[str, float]:
    """logit_std_l, logit_max_l (std and max |score| over visible entries), entropy_l, rowmax_l,
    onehot_frac_l (fraction of rows with max weight > 0.99), and beside them q_var_l, k_var_l (the
    measured variance of q and k components, `component_variance`), for every layer l.

    With qk_scale off and q, k components of unit variance, logit_std is about sqrt(d_k): the two
    variances say how far a layer's input meets that premise (model.init='unit' realises it)."""
    out: dict[str, float] = {}
    blocks = attention_blocks(model, "score_stats")
    for layer, (block, (q, k)) in enumerate(zip(blocks, layer_qk(model, x))):
        s = block.attention.logits(q, k)  # (B, H, T, T)
        visible = s[torch.isfinite(s)]
        rows = row_stats(s)
        out[f"logit_std_l{layer}"] = visible.std().item()
        out[f"logit_max_l{layer}"] = visible.abs().max().item()
        out[f"entropy_l{layer}"] = rows["entropy"].mean().item()
        out[f"rowmax_l{layer}"] = rows["rowmax"].mean().item()
        out[f"onehot_frac_l{layer}"] = rows["onehot"].mean().item()
        out[f"q_var_l{layer}"] = component_variance(q)
        out[f"k_var_l{layer}"] = component_variance(k)
    return out


def entropy_per_head(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """(L, H) normalised attention entropy of every head."""
    return torch.stack([row_stats(s)["entropy_heads"] for s in layer_logits(model, x)])
