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


@probe
@torch.no_grad()
def relation_weights(model: nn.Module, x: torch.Tensor, back: int = 2) -> torch.Tensor:
    """Where each head puts its weight, by relation (issue 24, Q3: do heads specialise?): (L, H, 3), the
    mean over query positions i > back (position 0 holds BOS) of each head's post-softmax weight
    0. on position i - back, the positional relation (poshist's token two back);
    1. on the positions j >= 1 that hold the query's own token, itself included, the content relation
       (poshist's and histogram's count);
    2. on BOS, position 0, where a counting head leaves the weight 1 / (1 + count).
    A position counted in both (j = i - back holding the same token) is counted in both. x (B, T)."""
    from .scores import attention_maps

    maps = attention_maps(model, x)  # (B, L, H, T, T)
    x = x.to(maps.device)
    T = x.shape[1]
    queries = torch.arange(back + 1, T, device=maps.device)  # (Q,)
    rows = maps[:, :, :, queries, :]  # (B, L, H, Q, T)
    positional = rows[..., torch.arange(len(queries), device=maps.device), queries - back]  # (B, L, H, Q)
    same = (x[:, queries, None] == x[:, None, :])  # (B, Q, T)
    same[:, :, 0] = False  # BOS is its own relation
    content = (rows * same[:, None, None].to(rows.dtype)).sum(-1)  # (B, L, H, Q)
    bos = rows[..., 0]  # (B, L, H, Q)
    return torch.stack([positional, content, bos], dim=-1).mean(dim=(0, 3)).float()  # (L, H, 3)
