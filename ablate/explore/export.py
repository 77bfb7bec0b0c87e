"""A trained model as plain data for the explorer page: its config and every weight as float32.

`export_model(run directory or last.ckpt)` loads the checkpoint with ablate.checkpoint's weights-only
loader (tensors and plain values; nothing else is ever unpickled), checks that the model its config builds
fits this machine (ablate.limits, from the config alone) and that its weights fit that model (shapes from a
meta-device build: no model is ever allocated), and returns a JSON-ready dict:

    {"format": "ablate-explore-model", "version": 1,
     "kind": "classify" | "tokens",            # SequenceClassifier (MNIST rows) or TokenModel
     "sizes": {"in_features": 28, "n_classes": 10} | {"n_tokens": ..., "n_out": ...},
     "pooling": "mean" | "cls",
     "model": {every model.* field, head_dim, ffn_dim},      # what forward.js reads
     "config": {"model.d_model": 64, ..., "seed": 0},      # the run's flat config, as W&B shows it
     "weights": {name: {"shape": [...], "dtype": "float32" | "float16",
                        "b64": base64 of the little-endian numbers}},  # the model's state_dict
     "params": total parameter count, "global_step": int,
     "metrics": {"test/acc": ..., "test/acc_perm": ...}}  # from the run's summary.json; {} when absent

`precision="float16"` halves the page (the explorer's default); float16 holds weights to 3 significant digits,
and the tests measure what that costs in logits against the float32 model.

forward.js computes the encoder from exactly this.
"""

from __future__ import annotations

import base64
import functools
import json
from pathlib import Path
from typing import Any

from .. import limits
from ..checkpoint import CheckpointError, fit_problem, load_checkpoint

FORMAT, VERSION = "ablate-explore-model", 2
PRECISIONS = {"float32": "<f4", "float16": "<f2"}
SUMMARY = "summary.json"  # beside last.ckpt in a run directory (ablate.rundir.SUMMARY)
METRICS = ("test/acc", "test/acc_perm", "val/acc")  # what the page shows per model
CKPT = "last.ckpt"  # what a run directory holds (ablate.rundir.CKPT; not imported: explore sits beside it)
PREFIX = "model."  # the LightningModule keeps the nn.Module as `model`


class ExploreError(ValueError):
    """Input the explorer cannot use, in one line: `problem; fix`."""


def checkpoint_path(source: Path) -> Path:
    """The last.ckpt of a run directory, or the checkpoint file itself; ExploreError when neither exists."""
    source = Path(source)
    if source.is_dir():
        if not (source / CKPT).is_file():
            raise ExploreError(f"{source} holds no {CKPT}; give a run directory of a finished `ablate train` "
                               "(or its last.ckpt)")
        return source / CKPT
    if not source.exists():
        raise ExploreError(f"{source} does not exist; give a run directory or its {CKPT}")
    return source


def _encoder_fields(model_cfg) -> dict[str, Any]:
    """Every field of the model's config (max_len resolved), with the two sizes forward.js reads derived."""
    from dataclasses import asdict

    return {**asdict(model_cfg), "head_dim": model_cfg.head_dim, "ffn_dim": model_cfg.ffn_dim}


def _shapes(cfg, sizes: dict[str, int]) -> dict[str, Any]:
    """The state_dict of the model the config builds, on the meta device: every name and shape, no memory."""
    from ..models.meta import meta_model

    return meta_model(cfg.encoder, sizes, cfg.pooling).state_dict()


@functools.cache
def supports() -> dict[str, Any]:
    """{model key: "any", or the values forward.js computes}, read from its SUPPORTS block; a key not there is
    computed at its default only. Values as the config spells them (true/false for a bool)."""
    text = (Path(__file__).parent / "forward.js").read_text(encoding="utf-8")
    block = text.split("// SUPPORTS-BEGIN", 1)[1].split("// SUPPORTS-END", 1)[0]
    body = block[block.index("{"):block.rindex("}") + 1]
    return {k: v if v == "any" else tuple(_spelled(x) for x in v) for k, v in json.loads(body).items()}


def _spelled(value) -> str:
    return json.dumps(value) if isinstance(value, bool) or value is None else str(value)


def unsupported(cfg) -> tuple[str, str, tuple[str, ...]] | None:
    """(key, its value, the values forward.js computes) for the first model key of `cfg` the page cannot
    compute, else None."""
    from dataclasses import fields

    for f in fields(cfg.model):
        allowed = supports().get(f.name, (_spelled(f.default),))
        if allowed != "any" and (value := _spelled(getattr(cfg.model, f.name))) not in allowed:
            return f.name, value, allowed
    return None


def _size_keys(cfg) -> str:
    """The settings that sized the model, as a message names them: those off their defaults."""
    from ..config import SIZE_KEYS, Config, flat

    values, defaults = flat(cfg), flat(Config())
    return ", ".join(f"{k}={values[k]}" for k in SIZE_KEYS if values[k] != defaults[k]) or "the default sizes"


def _tensor(value, precision: str) -> dict[str, Any]:
    import numpy as np

    array = value.detach().cpu().float().numpy().astype(PRECISIONS[precision])
    return {"shape": list(array.shape), "dtype": precision,
            "b64": base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()}


def _metrics(path: Path) -> dict[str, float]:
    """The run's test and validation accuracy from its summary.json (plain JSON), {} when there is none."""
    import json
    import math

    try:
        summary = json.loads((path.parent / SUMMARY).read_text())
        metrics = summary["metrics"]
        return {k: float(metrics[k]) for k in METRICS
                if isinstance(metrics.get(k), (int, float)) and math.isfinite(metrics[k])}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _status(path: Path) -> str | None:
    """The status summary.json beside the checkpoint records ('unreadable' for a file that cannot be read);
    None where there is none (a checkpoint handed on its own)."""
    import json

    summary = path.parent / SUMMARY
    if not summary.exists():
        return None
    try:
        status = json.loads(summary.read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return "unreadable"
    return status if isinstance(status, str) else "unreadable"


def export_model(source: Path, precision: str = "float32") -> dict[str, Any]:
    """The model of a run directory (or of a last.ckpt) as a JSON-ready dict (see the module docstring).
    ExploreError, one line, for a missing path or checkpoint, a checkpoint that is not an ablate run's,
    a config this version cannot build, a recurrent model (model.arch=lstm/gru: no attention to draw), or
    weights that do not fit it."""
    from ..config import ConfigError, flat, from_dict

    if precision not in PRECISIONS:
        raise ExploreError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}; choose one of them")
    path = checkpoint_path(source)
    if (status := _status(path)) not in (None, "completed"):  # a checkpoint of an unfinished run is a half-trained model
        raise ExploreError(f"{path.parent} is a run that is {status}, not completed (its summary.json says so); "
                           "finish it first (the same `ablate train` command resumes it) or give a completed run")
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as err:
        raise ExploreError(f"{err}; give a run directory or last.ckpt written by `ablate train`") from None
    hyper = ckpt["hyper_parameters"]
    if not isinstance(hyper, dict) or not isinstance(hyper.get("config"), dict):
        raise ExploreError(f"checkpoint {path} holds no run config; give a last.ckpt written by `ablate train`")
    if {"in_features", "n_classes"} <= set(hyper):
        kind, names = "classify", ("in_features", "n_classes")
    elif {"n_tokens", "n_out"} <= set(hyper):
        kind, names = "tokens", ("n_tokens", "n_out")
    else:
        raise ExploreError(f"checkpoint {path} names no model sizes (in_features/n_classes or n_tokens/n_out); "
                           "give a last.ckpt written by `ablate train`")
    try:
        cfg = from_dict(hyper["config"])
    except (ConfigError, KeyError, TypeError, ValueError) as err:
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ExploreError(f"checkpoint {path} holds a config this version cannot build ({line}); "
                           "retrain it with this version of ablate") from None
    if problem := unsupported(cfg):
        key, value, allowed = problem
        raise ExploreError(f"{source} is a model.{key}={value} run; the page's forward pass computes model.{key}="
                           f"{' or '.join(allowed)} only (ablate/explore/forward.js, SUPPORTS); give the run "
                           "directory of such a run")
    try:
        sizes = {n: int(hyper[n]) for n in names}
    except (TypeError, ValueError):
        raise ExploreError(f"checkpoint {path} holds model sizes that are not integers; give a last.ckpt written "
                           "by `ablate train`") from None
    # before any model is built: a few small tensors may come with a config of a 9 TB model
    if problem := limits.checkpoint_problem(cfg, sizes, _size_keys(cfg)):
        raise ExploreError(f"checkpoint {path}: {problem}; give a last.ckpt written by `ablate train` that fits "
                           "this machine")
    state = ckpt["state_dict"]
    if not isinstance(state, dict):
        raise ExploreError(f"checkpoint {path} holds no state_dict; give a last.ckpt written by `ablate train`")
    weights = {k.removeprefix(PREFIX): v for k, v in state.items() if k.startswith(PREFIX)}
    expected = _shapes(cfg, sizes)
    if problem := fit_problem(weights, expected):
        raise ExploreError(f"checkpoint {path} does not fit the model its config builds ({problem}); "
                           "give a last.ckpt written by `ablate train` with this version")
    return {
        "format": FORMAT, "version": VERSION, "kind": kind, "sizes": sizes, "pooling": cfg.pooling,
        "model": _encoder_fields(cfg.encoder), "config": flat(cfg),
        "weights": {name: _tensor(weights[name], precision) for name in expected},
        "params": int(sum(t.numel() for t in expected.values())), "global_step": int(ckpt["global_step"]),
        "metrics": _metrics(path),
    }

