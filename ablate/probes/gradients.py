"""Gradient flow: the gradient norm of every layer and parameter group after one backward pass.

The gradients come from `torch.autograd.grad`, so no parameter's `.grad` is ever written: a probe
in the middle of training leaves the accumulated gradients exactly as they were.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .common import blocks_of, probe, ratio, task_loss, to_device

GROUPS = ("wq", "wk", "wv", "wo", "ffn", "norm")  # W_Q, W_K, W_V, W_O, FFN, LayerNorms


def _group_squares(block: nn.Module, grads: dict[str, torch.Tensor]) -> dict[str, float]:
    """Sum of squared gradients of each group of one block. W_Q/W_K/W_V are the row slices of the
    fused qkv projection, each with its slice of the bias; W_O includes its bias."""
    inner = block.attn.fn.inner_dim
    sq = dict.fromkeys(GROUPS, 0.0)
    for name, g in grads.items():
        if name.startswith("attn.fn.qkv."):
            for i, group in enumerate(("wq", "wk", "wv")):
                sq[group] += g[i * inner : (i + 1) * inner].double().square().sum().item()
        elif name.startswith("attn.fn.out."):
            sq["wo"] += g.double().square().sum().item()
        elif name.startswith("ffn.fn."):
            sq["ffn"] += g.double().square().sum().item()
        else:  # pre_norm / post_norm LayerNorms of either sub-layer
            sq["norm"] += g.double().square().sum().item()
    return sq


@probe
def gradient_flow(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, float]:
    """grad_l (whole block), grad_{wq,wk,wv,wo,ffn,norm}_l for every layer l, grad_ratio = first /
    last layer, and batch_loss, for one backward pass of the task loss on `batch` in eval mode."""
    x, y = to_device(model, *batch)
    blocks = blocks_of(model)
    named = [
        (layer, name, p)
        for layer, block in enumerate(blocks)
        for name, p in block.named_parameters()
        if p.requires_grad
    ]
    with torch.enable_grad():
        loss = task_loss(model(x), y)
        grads = torch.autograd.grad(loss, [p for _, _, p in named], allow_unused=True)
    per_layer: list[dict[str, torch.Tensor]] = [{} for _ in blocks]
    for (layer, name, p), g in zip(named, grads):
        per_layer[layer][name] = g if g is not None else torch.zeros_like(p)
    out: dict[str, float] = {"batch_loss": loss.item()}
    for layer, (block, grads_l) in enumerate(zip(blocks, per_layer)):
        sq = _group_squares(block, grads_l)
        out[f"grad_l{layer}"] = math.sqrt(sum(sq.values()))
        for group in GROUPS:
            out[f"grad_{group}_l{layer}"] = math.sqrt(sq[group])
    out["grad_ratio"] = ratio(out["grad_l0"], out[f"grad_l{len(blocks) - 1}"])
    return out
