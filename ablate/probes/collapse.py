"""Representation collapse and the residual stream, from the hidden state after every sub-layer.

Rank collapse (Dong et al. 2021, "Attention is not all you need"): without skip connections the
tokens of a sequence converge to one vector with depth. Measured by the mean pairwise cosine of a
sequence's tokens and the effective rank of its token matrix (Roy & Vetterli 2007).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .common import blocks_of, probe, removing, to_device

# The states `sublayer_outputs` gives per layer, by name: a Transformer block's two sub-layers
# (Block.sublayers), a recurrent layer's output (RecurrentLayer.sublayers).
SLOTS = {2: ("attn", "ffn"), 1: ("rnn",)}


@probe
@torch.no_grad()
def sublayer_outputs(model: nn.Module, x: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Hidden state (B, T, d) after the attention and after the FFN sub-layer of every block (the
    latter is the block's output; a removed FFN passes its input on). Before the final Pre-LN norm.
    A recurrent model: one state per layer, (output,), the layer's h_t at every t (B, T, hidden)."""
    (x,) = to_device(model, x)
    blocks = blocks_of(model)
    found: dict[tuple[int, str], torch.Tensor] = {}

    def keep(layer: int, slot: str):
        def hook(module, args, output):
            found[layer, slot] = output[0]

        return hook

    handles = [
        sublayer.register_forward_hook(keep(i, slot))
        for i, b in enumerate(blocks)
        for slot, sublayer in b.sublayers.items()
    ]
    with removing(handles):
        model(x)
    return [tuple(found[i, slot] for slot in b.sublayers) for i, b in enumerate(blocks)]


def mean_token_cosine(h: torch.Tensor) -> float:
    """Mean cosine similarity over the pairs of distinct tokens of each sequence of h (B, T, d)."""
    T = h.shape[1]
    if T < 2:
        return float("nan")
    u = F.normalize(h.double(), dim=-1)
    gram = u @ u.transpose(1, 2)  # (B, T, T)
    off_diagonal = gram.sum((1, 2)) - gram.diagonal(dim1=1, dim2=2).sum(-1)  # (B,)
    return (off_diagonal / (T * (T - 1))).mean().item()


def effective_rank(h: torch.Tensor) -> float:
    """exp(entropy of the normalised singular values) of each token matrix h[b] (T, d), averaged over
    the batch (Roy & Vetterli 2007): 1 for rank one, min(T, d) for equal singular values."""
    s = torch.linalg.svdvals(h.double())  # (B, min(T, d))
    p = s / s.sum(-1, keepdim=True)
    return torch.exp(-torch.special.xlogy(p, p).sum(-1)).mean().item()


def token_collapse(model: nn.Module, x: torch.Tensor) -> dict[str, float]:
    """cosine_l and erank_l of the hidden state after every block l (every recurrent layer l)."""
    return collapse_of(sublayer_outputs(model, x))


def residual_norms(model: nn.Module, x: torch.Tensor) -> dict[str, float]:
    """resid_norm_l_attn, resid_norm_l_ffn: mean per-token L2 norm after each sub-layer of block l;
    a recurrent model's resid_norm_l_rnn: of layer l's output h_t (it has no residual stream: the
    hidden state that goes on to the next layer)."""
    return norms_of(sublayer_outputs(model, x))


def collapse_of(hidden: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, float]:
    """`token_collapse` from the hidden states `sublayer_outputs` returned (one forward serves both
    families)."""
    out: dict[str, float] = {}
    for layer, hs in enumerate(hidden):
        h = hs[-1]  # the block's (the layer's) output
        out[f"cosine_l{layer}"] = mean_token_cosine(h)
        out[f"erank_l{layer}"] = effective_rank(h)
    return out


def norms_of(hidden: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, float]:
    """`residual_norms` from the hidden states `sublayer_outputs` returned."""
    out: dict[str, float] = {}
    for layer, hs in enumerate(hidden):
        for slot, h in zip(SLOTS[len(hs)], hs, strict=True):
            out[f"resid_norm_l{layer}_{slot}"] = h.norm(dim=-1).mean().item()
    return out
