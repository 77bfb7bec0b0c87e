"""The same table from W&B, for sweeps whose agents ran on machines whose run directories are not here.

Each `ablate train` logs to W&B with the tag `run:<run id>` and an id of its attempt's (the run id and six
hex digits; runs logged before: the run id itself, which is then read as the run id), group = "<sweep
name>-<budget>" (runs written before budgets were kept apart: the sweep name alone; both are read). A run
trained more than once (retrained, or by a colleague in the same project) is several W&B runs: the table
takes the one that finished last (a finished one before any other), the run folder's rule of one row per
run. Also logged: the flat config
({'model.n_heads': 4, ...}; older runs also a nested copy under `config`) and, in the summary, the
logged metrics and probe scalars, `status` and the parameter counts (as `attention`, `ffn`,
`recurrent` (an LSTM/GRU run's), ... or `params/attention`, ...; table.PARAMS). A public-API
`Run` gives: `id`, `state`, `config` (the raw API JSON wraps each value as {"value": ...}; both
forms are read), `summary`, `commit`.

W&B's state is the status unless the summary recorded a terminal one (diverged runs finish
normally): finished -> completed, failed / crashed / killed -> failed, running / pending /
preempting / preempted -> running. What W&B does not hold is left empty or approximated:
dirty, error, attempts, diverged_step, run_dir are empty; wall_time_s is W&B's `_runtime` and
global_step the last logged `trainer/global_step`, unless the summary carries those names.
`train/loss` is W&B's last *logged* value (every log_every_n_steps), so it is not compared.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pandas as pd

from ..budgets import NAMES as BUDGET_NAMES
from ..config import SECTIONS, all_keys, flatten_overrides, with_added_keys
from .table import METRIC, PARAMS, ResultsError, RunRecord, eval_sizes, from_records, no_runs

STATES = {
    "finished": "completed",
    "failed": "failed",
    "crashed": "failed",
    "killed": "failed",
    "running": "running",
    "pending": "running",
    "preempting": "running",
    "preempted": "running",
}
TERMINAL = ("completed", "diverged")
# what ablate's summary says where W&B's state would read "finished": a run held at an early-termination band
# closes its W&B run (and one the runner then stopped stays so there): never a completed run
HELD = ("paused", "stopped")


def _unwrap(value: Any) -> Any:
    if isinstance(value, dict) and "value" in value and set(value) <= {"value", "desc"}:
        return value["value"]
    return value


def run_config(raw: dict[str, Any]) -> dict[str, Any]:
    """W&B config -> ablate's flat keys in ablate's order; W&B's own keys (`_wandb`) and what
    Lightning adds (the nested hparams `config`, `n_tokens`, ...) are dropped."""
    known = all_keys()
    config = {k: _unwrap(v) for k, v in dict(raw).items()}
    config = flatten_overrides(config, load=False)  # nested sections, if a run logged them so
    if not any(k in config for k in known) and isinstance(config.get("config"), dict):
        config = flatten_overrides(config["config"], load=False)  # only the Lightning hparams were logged
    plugged = bool(config.get("plugins"))  # a plug-in's section keys are its own (read without importing it)
    ours = [k for k in config if k in known or k.split(".", 1)[0] in SECTIONS
            or (plugged and "." in k and not k.startswith("_") and k.split(".", 1)[0] not in ("config", "_wandb"))]
    if ours:
        config = with_added_keys({k: config[k] for k in ours})
        ours = list(config)
    order = {k: i for i, k in enumerate(known)}
    return {k: config[k] for k in sorted(ours, key=lambda k: order.get(k, len(order)))}


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _summary(run) -> dict[str, Any]:
    summary = getattr(run, "summary", None)
    if summary is None:
        return {}
    keys = list(summary.keys())
    return {k: summary[k] for k in keys}


def run_id_of(run) -> str:
    """The ablate run id of a W&B run: its `run:<id>` tag (ablate.tracking.RUN_TAG), else its W&B id."""
    for text in getattr(run, "tags", None) or []:
        kind, _, value = str(text).partition(":")
        if kind == "run" and value and "~" not in value:
            return value
    return str(run.id)


def latest(runs: list) -> list:
    """One W&B run per ablate run id: of several attempts, a finished one (finished, or a terminal status in the
    summary) before the others, and of those the one created last."""
    def rank(run) -> tuple:
        status = (_summary(run).get("status"), str(getattr(run, "state", "") or "").lower())
        return (status[0] in TERMINAL or status[1] == "finished", str(getattr(run, "created_at", "") or ""))

    chosen: dict[str, Any] = {}
    for run in runs:
        key = run_id_of(run)
        if key not in chosen or rank(run) >= rank(chosen[key]):
            chosen[key] = run
    return list(chosen.values())


def run_record(run) -> RunRecord:
    """A W&B public-API Run (or anything with its attributes) -> RunRecord."""
    summary = _summary(run)
    state = str(getattr(run, "state", "") or "").lower()
    status = summary.get("status") if summary.get("status") in (*TERMINAL, *HELD) else STATES.get(state, state or "unknown")
    params = {p: summary[k] for p in PARAMS for k in (f"params/{p}", p) if _scalar(summary.get(k))}
    config = run_config(getattr(run, "config", None) or {})
    return RunRecord(
        run_id=run_id_of(run),
        config=config,
        status=str(status),
        metrics={**{k: v for k, v in summary.items() if METRIC.match(k) and _scalar(v)}, **eval_sizes(config)},
        probes={k: v for k, v in summary.items() if k.startswith("probe/") and _scalar(v)},
        params=params,
        bookkeeping={
            "wall_time_s": summary.get("wall_time_s", summary.get("_runtime")),
            "train_samples_per_s": summary.get("train_samples_per_s"),
            "global_step": summary.get("global_step", summary.get("trainer/global_step")),
            "attempts": summary.get("attempts"),
            "diverged_step": summary.get("diverged_step"),
            "commit": getattr(run, "commit", None) or None,
        },
    )


def groups(name: str) -> list[str]:
    """The W&B groups of sweep `name`: one per budget ("<name>-<budget>", ablate.tracking.run_fields),
    and the sweep name alone (runs written before)."""
    return [name, *(f"{name}-{budget}" for budget in BUDGET_NAMES)]


def fetch_runs(name: str, path: str, api=None) -> list:
    """The runs of sweep `name` (its W&B groups) in `path` ("entity/project"); `api` defaults to wandb.Api()."""
    try:
        if api is None:
            import wandb

            api = wandb.Api(timeout=30)
        kwargs: dict[str, Any] = {"filters": {"group": {"$in": groups(name)}}}
        if "lazy" in inspect.signature(api.runs).parameters:
            kwargs["lazy"] = False  # config and summary in the listing, not one request per run
        return list(api.runs(path, **kwargs))
    except Exception as err:  # wandb raises its own errors, requests' and ValueError: report, don't trace
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ResultsError(f"could not list the W&B runs of group {name!r} in {path}: {first}") from None


def load_wandb(name: str, path: str, api=None, sweeps: str = "sweeps") -> pd.DataFrame:
    """`load(name)` built from the W&B runs of group `name` in project `path` ("entity/project")."""
    if path.count("/") != 1 or not all(path.split("/")):
        raise ResultsError(f"--wandb {path!r} is not ENTITY/PROJECT; give e.g. my-team/ablate")
    runs = fetch_runs(name, path, api)
    if not runs:
        raise no_runs(f"W&B {path} (group {name})", name)
    records = [run_record(run) for run in latest(runs)]
    return from_records(records, name=name, source=f"wandb:{path}", sweep_file=Path(sweeps) / f"{name}.yaml")
