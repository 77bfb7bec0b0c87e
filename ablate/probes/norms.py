"""What a norm layer does to the tokens it normalises (issue 37; the tutorial: LayerNorm 「抹掉长度/尺度，只保留方向」,
erases length and scale and keeps only the direction).

For every norm layer of every block (`Block.norms`: the attention sub-layer's, then the FFN's) and the
final Pre-LN norm, over the tokens of the probe batch, with x a token's input to the norm and y its output:

- `norm_cos`: the mean cosine of x and y, how far the norm turns a token (1: direction kept);
- `norm_centre`: the mean cosine of x and x - mean(x), the part of the turn that taking the mean away makes
  (1 for a norm that does not centre, RMSNorm); dividing by a scalar never turns, so what is left of the
  turn is the gain and the bias (1 for both at initialisation: gain 1, bias 0);
- `norm_cv_in`, `norm_cv_out`: the spread of the tokens' lengths (their L2 norms' standard deviation over
  their mean) going in and coming out; a norm that erases length brings `norm_cv_out` to about 0 before its
  gain, and the gain and bias keep the lengths of different tokens different only as far as they point
  differently.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..models.block import norm_classes
from .common import blocks_of, encoder_of, probe, removing, to_device

# A block's norm layers by name, in Block.norms order: a sequential block's two, a parallel block's one.
NORM_SLOTS = {2: ("attn", "ffn"), 1: ("both",)}


def _length_spread(h: torch.Tensor) -> float:
    lengths = h.norm(dim=-1)
    return (lengths.std(correction=0) / lengths.mean()).item()


def geometry(x: torch.Tensor, y: torch.Tensor, centres: bool) -> dict[str, float]:
    """`norm_cos`, `norm_centre`, `norm_cv_in`, `norm_cv_out` of tokens x (..., d) going in and y coming out
    of one norm layer (`centres`: it takes each token's mean away first, as LayerNorm does)."""
    x, y = x.reshape(-1, x.shape[-1]).double(), y.reshape(-1, y.shape[-1]).double()
    centred = x - x.mean(-1, keepdim=True) if centres else x
    return {
        "norm_cos": F.cosine_similarity(x, y, dim=-1).mean().item(),
        "norm_centre": F.cosine_similarity(x, centred, dim=-1).mean().item(),
        "norm_cv_in": _length_spread(x),
        "norm_cv_out": _length_spread(y),
    }


@probe
@torch.no_grad()
def norm_geometry(model: nn.Module, x: torch.Tensor) -> dict[str, float]:
    """`<measure>_l{l}_{slot}` for every norm of block l (slot attn, ffn; both in a parallel block) and
    `<measure>_final` for a Pre-LN stack's final norm, the measures of `geometry`. A model without norm
    layers (model.norm=none, or a recurrent one) gets none of these keys."""
    (x,) = to_device(model, x)
    encoder = encoder_of(model)
    named: dict[nn.Module, str] = {}
    for layer, block in enumerate(blocks_of(model)):
        norms = tuple(getattr(block, "norms", ()))
        for slot, norm in zip(NORM_SLOTS.get(len(norms), ()), norms):
            named[norm] = f"l{layer}_{slot}"
    final = getattr(encoder, "final_norm", None)
    if isinstance(final, norm_classes()):  # ablate's norms and plug-ins' norm classes
        named[final] = "final"
    found: dict[str, dict[str, float]] = {}

    def keep(where: str):
        def hook(module, args, output):
            found[where] = geometry(args[0], output, centres=isinstance(module, nn.LayerNorm))

        return hook

    with removing(norm.register_forward_hook(keep(where)) for norm, where in named.items()):
        model(x)
    return {f"{measure}_{where}": value for where, measures in found.items() for measure, value in measures.items()}
