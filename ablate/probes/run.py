"""`run_probes`: every probe on one model and probe batch, as flat scalars plus per-layer arrays;
`periodic_probes`: the part measured during training (curves); `format_probes`: scalars as text
tables, one row per layer."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from .collapse import collapse_of, norms_of, sublayer_outputs
from .common import blocks_of, has_attention
from .gradients import gradient_flow
from .heads import head_importance
from .norms import norm_geometry
from .order import equivariance_error, order_sensitivity
from .readout import layer_readout
from .scores import attention_maps, score_stats
from .shares import parameter_shares
from .temperature import inference_temperature

# Families shown as one table each by `format_probes`: scalar-name prefixes, in display order.
FAMILIES = {
    "scores": ("logit_std", "logit_max", "entropy", "rowmax", "onehot_frac", "q_var", "k_var"),
    "gradients": ("grad",),
    "collapse": ("cosine", "erank", "resid_norm"),
    "shares": ("share",),
    "heads": ("head_drop",),
    "temperature at inference": ("tau_acc", "tau_loss", "out_tau_loss"),
    "norms": ("norm_cos", "norm_centre", "norm_cv_in", "norm_cv_out"),
    "readout": ("readout_r2", "readout_acc"),
}
PER_LAYER = re.compile(r"^(?P<name>.+)_l(?P<layer>\d+)(?:_(?P<slot>.+))?$")
# Cheap scalars measured at init and at the end only, never periodically: parameter shares (fixed by
# the architecture), the equivariance error (how the architecture sees order) and what the norm layers do
# to the tokens (a gain and a bias away from their initial 1 and 0 by the end). Name prefixes.
AT_ENDS_ONLY = ("share", "params_total", "equiv_error", "norm_")
# What a model without attention (model.arch=lstm/gru) is not measured for: its keys are absent (the
# results table shows them empty), never NaN and never an error. Everything else applies to it.
NOT_APPLICABLE_TO_RNN = (
    "attention maps",
    "score statistics (logit_std, logit_max, entropy, rowmax, onehot_frac, q_var, k_var)",
    "gradient groups (grad_wq/wk/wv/wo/ffn/norm)",
    "per-layer shares (share_attention_l, share_ffn_l)",
    "head importance (head_drop)",
    "equivariance error (equiv_error)",
    "attention temperature at inference (tau_acc, tau_loss, out_tau_loss)",
)


def not_applicable(model: nn.Module) -> tuple[str, ...]:
    """The probes `run_probes` leaves out for this model, in words (empty for a Transformer)."""
    return () if has_attention(model) else NOT_APPLICABLE_TO_RNN


def periodic_probes(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, float]:
    """The cheap probes that change with training, measured every `run.probe_every` steps: per layer,
    score statistics (`logit_std` score std, `rowmax` largest weight, `onehot_frac`, `entropy`, ...),
    gradient flow (`grad` the block's absolute gradient norm, and its groups), collapse (`cosine`,
    `erank`) and residual norms; `batch_loss`, `grad_ratio`. One forward for the scores, one forward
    and backward for the gradients (the only pass that needs autograd), one for collapse and norms.
    Exactly `periodic_part` of what `run_probes` measures on the same model and batch. A recurrent
    model: no score statistics (`not_applicable`)."""
    x, _ = batch
    scalars = score_stats(model, x) if has_attention(model) else {}
    scalars.update(gradient_flow(model, batch))
    hidden = sublayer_outputs(model, x)
    scalars.update(collapse_of(hidden))
    scalars.update(norms_of(hidden))
    return scalars


def periodic_part(scalars: dict[str, float]) -> dict[str, float]:
    """The scalars of `run_probes(cheap=True)` that `periodic_probes` measures (AT_ENDS_ONLY left out)."""
    return {k: v for k, v in scalars.items() if not k.startswith(AT_ENDS_ONLY)}


def run_probes(
    model: nn.Module,
    batch: tuple[torch.Tensor, torch.Tensor],
    *,
    cheap: bool = True,
    expensive: bool = False,
    val_loader: Iterable | None = None,
    permutation: torch.Tensor | Sequence[int] | None = None,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """(scalars, arrays) for `model` on the probe `batch` = (x, y).

    cheap: score statistics, gradient flow, collapse, residual norms, parameter shares, what each norm layer
    does to the tokens (`norm_geometry`), and, when a `permutation` of the sequence is given (MNIST rows),
    the first layer's equivariance error.
    expensive: head importance over `val_loader`, the trained model at other attention temperatures on it
    (`inference_temperature`), a sequence classifier's linear readouts of each layer (`layer_readout`), and,
    with a `permutation`, order sensitivity on it.
    arrays: `attention` (L, H, T, T) of the first example, and one array per per-layer scalar family
    (`entropy` (L,), `resid_norm` (2L,) attn/ffn interleaved, `head_drop` (L, H), ...).
    Each probe runs in eval mode under a forked RNG; the model's modes and `.grad`s are left as found.
    A recurrent model gets every probe that needs only its outputs and hidden states: gradient flow per
    layer, collapse and norms of each layer's output, parameter shares, acc and order sensitivity; the
    attention probes (`not_applicable(model)`) are left out, their keys absent.
    """
    x, _ = batch
    scalars: dict[str, float] = {}
    arrays: dict[str, np.ndarray] = {}
    if cheap:
        scalars.update(periodic_probes(model, batch))
        scalars.update(parameter_shares(model))
        scalars.update(norm_geometry(model, x))
        if has_attention(model):
            if permutation is not None:
                scalars["equiv_error"] = equivariance_error(model, x, permutation)
            arrays["attention"] = attention_maps(model, x[:1])[0].cpu().numpy()
    if expensive:
        if val_loader is None:
            raise ValueError(
                "run_probes(expensive=True) needs val_loader= (head masking runs over it)"
            )
        scalars.update(head_importance(model, val_loader))
        if has_attention(model):
            scalars.update(inference_temperature(model, val_loader))
        scalars.update(layer_readout(model, val_loader))
        if permutation is not None:
            scalars.update(order_sensitivity(model, val_loader, permutation))
    arrays.update(layer_arrays(scalars, len(blocks_of(model))))
    return scalars, arrays


def layer_arrays(scalars: dict[str, float], n_layers: int) -> dict[str, np.ndarray]:
    """Per-layer scalars as arrays: `name_l{l}` -> name (L,), `name_l{l}_{slot}` -> name (L * slots,)
    in layer-major order, `head_drop_l{l}_h{h}` -> head_drop (L, H)."""
    grouped: dict[str, dict[tuple[int, str], float]] = {}
    for key, value in scalars.items():
        m = PER_LAYER.match(key)
        if m:
            grouped.setdefault(m["name"], {})[int(m["layer"]), m["slot"] or ""] = value
    arrays = {}
    for name, values in grouped.items():
        slots = list(dict.fromkeys(slot for _, slot in values))
        if len(values) != n_layers * len(slots):
            continue  # not one value per layer and slot: no array
        table = np.array([[values[layer, s] for s in slots] for layer in range(n_layers)])
        arrays[name] = table if name == "head_drop" else table.reshape(-1)
    return arrays


def _family(name: str) -> str:
    for family, prefixes in FAMILIES.items():
        if any(name == p or name.startswith(p + "_") for p in prefixes):
            return family
    return "other"


def _number(value: float) -> str:
    """4 significant digits; counts (params_total) in full."""
    return f"{value:.0f}" if value.is_integer() and abs(value) >= 1e4 else f"{value:.4g}"


def format_probes(scalars: dict[str, float], not_measured: Sequence[str] = ()) -> str:
    """One table per family (rows: layers, columns: measurements), then the whole-model scalars, then
    the probes that do not apply to the model (`not_applicable(model)`), if any are given."""
    tables: dict[str, dict[int, dict[str, float]]] = {}
    overall: list[tuple[str, float]] = []
    for key, value in scalars.items():
        m = PER_LAYER.match(key)
        if not m:
            overall.append((key, value))
            continue
        column = f"{m['name']}_{m['slot']}" if m["slot"] else m["name"]
        tables.setdefault(_family(m["name"]), {}).setdefault(int(m["layer"]), {})[column] = value
    parts = []
    for family in [*FAMILIES, "other"]:
        rows = tables.get(family)
        if not rows:
            continue
        columns = list(dict.fromkeys(c for row in rows.values() for c in row))
        cells = [["layer", *columns]]
        cells += [
            [str(layer), *(_number(row[c]) if c in row else "-" for c in columns)]
            for layer, row in sorted(rows.items())
        ]
        widths = [max(len(r[i]) for r in cells) for i in range(len(columns) + 1)]
        lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
        parts.append(f"[{family}]\n" + "\n".join(lines))
    if overall:
        width = max(len(k) for k, _ in overall)
        parts.append("[model]\n" + "\n".join(f"{k.ljust(width)}  {_number(v)}" for k, v in overall))
    if not_measured:
        parts.append("[not applicable: the model has no attention]\n" + "\n".join(not_measured))
    return "\n\n".join(parts)
