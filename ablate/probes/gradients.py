"""Gradient flow: the gradient norm of every layer and parameter group after one backward pass.

The gradients come from `torch.autograd.grad`, so no parameter's `.grad` is ever written: a probe
in the middle of training leaves the accumulated gradients exactly as they were.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..models import Block
from .common import blocks_of, has_attention, probe, ratio, task_loss, to_device

GROUPS = ("wq", "wk", "wv", "wo", "ffn", "norm")  # W_Q, W_K, W_V, W_O, FFN, LayerNorms


def _group_squares(block: Block, grads: list[tuple[nn.Parameter, torch.Tensor]]) -> tuple[dict[str, float], float]:
    """Sum of squared gradients of each group of one block, by the module each parameter belongs to.
    W_Q/W_K/W_V (each with its bias) are where the attention's `projections()` say, in either layout
    (the fused qkv projection's row slices, or model.qk_reparam's separate q, k, v); W_O includes its
    bias; model.value_skipinit's and shaped_attention's alpha, beta, gamma count with W_V (they weigh the values);
    everything else in the
    block (its LayerNorms) is `norm`. With model.qkv_tie two groups read one tensor: each shows its gradient,
    and the second return value is what they count twice (0.0 untied), for the block's total."""
    attn, ffn = block.attention, block.feed_forward
    rows: dict[int, list[tuple[str, slice]]] = {}
    for name, parts in attn.projections().items():
        for p, r in parts:
            rows.setdefault(id(p), []).append((name, r))
    group = {id(p): "wo" for p in attn.out.parameters()}
    group |= {id(p): "ffn" for p in (ffn.parameters() if ffn is not None else ())}
    group |= {id(p): "wv" for p in (attn.alpha, attn.beta, attn.gamma) if p is not None}  # the mixing's scalars weigh V
    sq, twice = dict.fromkeys(GROUPS, 0.0), 0.0
    for p, g in grads:
        if id(p) in rows:
            seen = set()
            for name, r in rows[id(p)]:
                value = g[r].double().square().sum().item()
                sq[name] += value
                twice += value if (r.start, r.stop) in seen else 0.0
                seen.add((r.start, r.stop))
        else:
            sq[group.get(id(p), "norm")] += g.double().square().sum().item()
    return sq, twice


@probe
def gradient_flow(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, float]:
    """grad_l (whole block), grad_{wq,wk,wv,wo,ffn,norm}_l for every layer l, grad_ratio = first /
    last layer, and batch_loss, for one backward pass of the task loss on `batch` in eval mode.
    A recurrent model: grad_l of each LSTM/GRU layer (all its weights and biases), no groups."""
    x, y = to_device(model, *batch)
    blocks = blocks_of(model)
    params = [
        (layer, p) for layer, block in enumerate(blocks) for p in block.parameters() if p.requires_grad
    ]
    # cuDNN refuses an RNN's backward in eval mode ("cudnn RNN backward can only be called in training mode",
    # pytorch/pytorch#5878): without it torch's native kernels give the same gradients; no attention op uses it
    with torch.enable_grad(), torch.backends.cudnn.flags(enabled=False):
        loss = task_loss(model(x), y)
        grads = torch.autograd.grad(loss, [p for _, p in params], allow_unused=True)
    per_layer: list[list[tuple[nn.Parameter, torch.Tensor]]] = [[] for _ in blocks]
    for (layer, p), g in zip(params, grads):
        per_layer[layer].append((p, g if g is not None else torch.zeros_like(p)))
    out: dict[str, float] = {"batch_loss": loss.item()}
    grouped = has_attention(model)
    for layer, (block, grads_l) in enumerate(zip(blocks, per_layer)):
        if not grouped:
            out[f"grad_l{layer}"] = math.sqrt(sum(g.double().square().sum().item() for _, g in grads_l))
            continue
        sq, twice = _group_squares(block, grads_l)
        out[f"grad_l{layer}"] = math.sqrt(sum(sq.values()) - twice)
        for group in GROUPS:
            out[f"grad_{group}_l{layer}"] = math.sqrt(sq[group])
    out["grad_ratio"] = ratio(out["grad_l0"], out[f"grad_l{len(blocks) - 1}"])
    return out
