"""Where the parameters are: attention / FFN / embeddings / other, in total and per layer."""

from __future__ import annotations

from torch import nn

from ..models import parameter_groups
from .common import blocks_of, has_attention


def _matrices(module: nn.Module | None) -> int:
    """Parameters in the weight matrices of `module` (biases and norm gains are 1-D)."""
    if module is None:
        return 0
    return sum(p.numel() for p in module.parameters() if p.dim() >= 2)


def parameter_shares(model: nn.Module) -> dict[str, float]:
    """share_{attention,ffn,embedding,other} of all parameters (`ablate.models.parameter_groups`),
    params_total, and per layer share_attention_l / share_ffn_l: the fraction of that block's weight
    matrices (W_Q, W_K, W_V, W_O vs the two FFN matrices; biases and norms excluded) in each.
    With d_head * n_heads = d_model and ffn_mult = m, share_ffn_l = 2m / (2m + 4): 2/3 at m = 4.
    A recurrent model: share_recurrent beside them (attention and ffn 0), no per-layer shares."""
    counts = parameter_groups(model)
    total = counts["total"]
    out = {f"share_{g}": counts[g] / total for g in counts if g != "total"}
    out["params_total"] = float(total)
    if not has_attention(model):
        return out
    for layer, block in enumerate(blocks_of(model)):
        attn = _matrices(block.attention)
        ffn = _matrices(block.feed_forward)  # None when the FFN is removed
        out[f"share_attention_l{layer}"] = attn / (attn + ffn)
        out[f"share_ffn_l{layer}"] = ffn / (attn + ffn)
    return out
