"""Head importance (Michel et al. 2019, "Are Sixteen Heads Really Better than One?"): the drop in
validation accuracy when one head alone is masked.

A head is masked by a forward pre-hook on its layer's W_O (`block.attention.out`) that zeroes the head's
slice h*d_head:(h+1)*d_head of the concatenated heads; W_O's bias still goes through.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from .common import accuracy, attention_blocks, has_attention, probe, removing


@contextmanager
def masked_heads(model: nn.Module, heads: Iterable[tuple[int, int]]) -> Iterator[None]:
    """Within the block, the (layer, head) pairs in `heads` contribute nothing to W_O's input."""
    blocks = attention_blocks(model, "head masking")
    by_layer: dict[int, list[int]] = defaultdict(list)
    for layer, head in heads:
        n_heads = blocks[layer].attention.n_heads
        if not 0 <= head < n_heads:
            raise ValueError(
                f"head={head} is not allowed in layer {layer}; it has heads 0..{n_heads - 1}"
            )
        by_layer[layer].append(head)

    def zero(d_head: int, drop: list[int]):
        def hook(module, args):
            z = args[0].clone()  # (B, T, nh*hs)
            for h in drop:
                z[..., h * d_head : (h + 1) * d_head] = 0
            return (z, *args[1:])

        return hook

    attention = [block.attention for block in blocks]
    handles = [
        attention[layer].out.register_forward_pre_hook(zero(attention[layer].d_head, drop))
        for layer, drop in by_layer.items()
    ]
    with removing(handles):
        yield


@probe
def head_importance(model: nn.Module, loader: Iterable) -> dict[str, float]:
    """acc (nothing masked) and head_drop_l{l}_h{h} = acc - accuracy with that head alone masked;
    a recurrent model has no heads: acc alone."""
    base = accuracy(model, loader)
    out = {"acc": base}
    if not has_attention(model):
        return out
    for layer, block in enumerate(attention_blocks(model, "head_importance")):
        for head in range(block.attention.n_heads):
            with masked_heads(model, [(layer, head)]):
                out[f"head_drop_l{layer}_h{head}"] = base - accuracy(model, loader)
    return out


@probe
@torch.no_grad()
def masked_output(
    model: nn.Module, x: torch.Tensor, heads: Iterable[tuple[int, int]]
) -> torch.Tensor:
    """model(x) in eval mode with `heads` masked."""
    with masked_heads(model, heads):
        return model(x)
