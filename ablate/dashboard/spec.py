"""A sweep's dashboard as plain data: the runs it shows, how they are grouped, and its panels.

The spec is what `ablate dashboard NAME --dry-run` prints and what `ablate.dashboard.wandb_ui` turns
into a W&B workspace (and report); the tests check it, so every key a panel names is listed here
with where W&B keeps it ("config", "summary", or "history": logged during the run, images too).

    runs       the sweep's W&B group f"{sweep}-{budget}" and config budget == budget (budgets never mix)
    group_by   the swept keys but the seed (one line or bar per configuration, its seeds averaged),
               the compared toggles first (the keys the sweep compares; not the tuned learning rate)
    panels     parallel coordinates over the swept keys -> the sweep's metric; validation curves
               (val/acc, val/loss against the step); test accuracy bars; the probe scalars its
               question reads (summary `probe/...` keys, as the report notebooks read them); the
               attention heatmaps the probes log at initialisation and after training (Transformer
               runs only: an RNN has no attention to draw).
"""

from __future__ import annotations

from typing import Any

from ..sweep.spec import Sweep


def question_of(name: str) -> tuple[str | None, tuple[str, ...]]:
    """(the title of the question sweep `name` answers — its Answer's title in reports/build/answers.json and
    its heading in reports/FINDINGS.md —, the probe scalars its dashboard shows), both from the study
    manifests (ablate.studies; reports/<notebook>.yaml): (None, ()) for a sweep no manifest reads. A
    probe named `..._last` (the results table's name of a per-layer probe at the last layer) is shown at
    the last layer of the sweep's shallowest model (last_layer)."""
    from ..studies import load, of_sweep

    q, probes, _ = of_sweep(name, load())
    return (q.title if q else None), probes


CURVES = ("val/acc", "val/loss")  # history, against the step
TEST = "test/acc"  # summary
ATTENTION = ("probe/init/attention", "probe/final/attention")  # images (ablate.probing.heatmap), history
DEFAULT_METRIC = "val/acc_best"


def last_layer(key: str, sweep: Sweep) -> str:
    """`probe/init/cosine_last` -> `probe/init/cosine_l{d-1}`, d the fewest layers of the sweep's runs."""
    if not key.endswith("_last"):
        return key
    depth = min(r.cfg.model.n_layers for r in sweep.runs)
    return f"{key.removesuffix('_last')}_l{depth - 1}"


def budget_of(sweep: Sweep) -> str:
    budgets = sorted({r.cfg.budget for r in sweep.runs})
    return budgets[0] if len(budgets) == 1 else "none"  # a budget is one value per sweep (ablate.budgets)


def compared(sweep: Sweep) -> list[str]:
    """The keys the sweep compares: its swept keys but the seed and the tuned key."""
    tuned = sweep.tune.key if sweep.tune is not None else None
    return [k for k in sweep.varying if k not in ("seed", tuned)]


def build(sweep: Sweep, entity: str | None, project: str | None) -> dict[str, Any]:
    """The dashboard of `sweep` (loaded at the budget it shows) as plain, JSON-ready data."""
    budget = budget_of(sweep)
    group = f"{sweep.name}-{budget}"
    metric = (sweep.spec.get("metric") or {}).get("name") or DEFAULT_METRIC
    swept = list(sweep.varying)
    keys = compared(sweep)
    group_by = keys + [k for k in swept if k not in keys and k != "seed"]
    question, probes = question_of(sweep.name)
    probes = list(dict.fromkeys(last_layer(k, sweep) for k in probes))
    label = ", ".join(keys) or "seed"
    trains = any(r.cfg.trainer.max_steps != 0 for r in sweep.runs)  # max_steps=0: the init probes only
    sections = [
        {"name": f"{sweep.name} ({budget}): {label}", "panels": [
            {"type": "parallel_coordinates", "title": f"{' · '.join(swept)} → {metric}",
             "columns": [{"key": k, "in": "config"} for k in swept] + [{"key": metric, "in": "summary"}]},
            *([{"type": "bar", "title": f"test accuracy by {label}", "metrics": [TEST]}] if trains else []),
        ]},
    ]
    if trains:
        sections.append({"name": "validation curves", "panels": [
            {"type": "line", "title": f"{key} by {label}", "x": "Step", "y": [key]} for key in CURVES]})
    if probes:
        sections.append({"name": f"probes: {question}", "panels": [
            {"type": "bar", "title": f"{key} by {label}", "metrics": [key]} for key in probes]})
    if trains and any(getattr(r.cfg.model, "arch", "transformer") == "transformer" for r in sweep.runs):
        sections.append({"name": "attention (rows: layers, columns: heads)", "panels": [
            {"type": "media", "title": key.split("/")[1] + " attention", "media": [key]} for key in ATTENTION]})
    return {
        "sweep": sweep.name,
        "file": str(sweep.path),
        "budget": budget,
        "entity": entity,
        "project": project or sweep.runs[0].cfg.run.project,
        "name": f"{sweep.name} · {budget}",
        "question": question,
        "filters": [{"key": "group", "in": "run", "op": "=", "value": group},
                    {"key": "budget", "in": "config", "op": "=", "value": budget}],
        "group_by": group_by,
        "compared": keys,
        "metric": {"name": metric, "goal": (sweep.spec.get("metric") or {}).get("goal", "maximize")},
        "sections": sections,
    }


def reads(panel: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, key) of every key a panel names: where is "config", "summary" or "history"."""
    kind = panel["type"]
    if kind == "parallel_coordinates":
        return [(c["in"], c["key"]) for c in panel["columns"]]
    if kind == "line":
        return [("history", k) for k in panel["y"]]
    if kind == "bar":
        return [("summary", k) for k in panel["metrics"]]
    if kind == "media":
        return [("history", k) for k in panel["media"]]
    raise ValueError(f"unknown panel type {kind!r}")


def all_reads(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (where, key) the dashboard names: its filters, grouping and panels."""
    out = [(f["in"], f["key"]) for f in spec["filters"] if f["in"] != "run"]
    out += [("config", k) for k in spec["group_by"]]
    for section in spec["sections"]:
        for panel in section["panels"]:
            out += reads(panel)
    return list(dict.fromkeys(out))
