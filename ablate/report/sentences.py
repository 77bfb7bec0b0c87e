"""Sentences an Answer builds from a sweep's table: how the learning rate was chosen (each variant at the
value its stage 1 chose, or its best of an untuned grid), whether the runs had converged, and the caveat
for too few seeds. The numbers themselves and their intervals: stats.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..results.stats import best_lr, swept_keys
from .stats import PLATEAU, SOLVED


def at_best_lr(df: pd.DataFrame, metric: str = "val/acc_best", lr_key: str = "optim.lr") -> pd.DataFrame:
    """Each variant's runs at its best learning rate, selected on `metric` (validation):
    ablate.results.best_lr. A sweep with one learning rate is returned as it is."""
    out = best_lr(df, metric=metric, lr_key=lr_key)
    out.attrs = dict(df.attrs)
    return out


def tune_info(df: pd.DataFrame) -> dict[str, Any] | None:
    """A tuned sweep's search ({key, seeds, values, metric, goal}, from meta.json) when the table has its
    `tuned.<key>` column; None for an untuned one."""
    info = df.attrs.get("tune") or {}
    key = info.get("key")
    return dict(info) if key and f"tuned.{key}" in df.columns else None


def lr_phrase(df: pd.DataFrame, lr_key: str = "optim.lr", metric: str = "val/acc_best") -> str:
    """How learning rates were chosen, for a sentence. A tuned sweep: 'each variant at its own learning
    rate, chosen on val/acc_best (validation) of seed 0 from 4 values (0.0003 to 0.01, 33×), then 5 seeds
    at the chosen value'; an untuned one: 'each variant at its best of 2 learning rates (0.001, 0.0003)
    on val/acc_best' or 'every variant at the one learning rate 0.001'."""
    info = tune_info(df)
    if info is not None and info.get("key") == lr_key:
        values = sorted(float(v) for v in info.get("values") or df[lr_key].dropna().unique())
        seeds = [int(s) for s in info.get("seeds") or []]
        tuned_on = f"seed{'s' if len(seeds) != 1 else ''} {', '.join(map(str, seeds))}" if seeds else "the tune seeds"
        span = f", {values[-1] / values[0]:.0f}×" if values and values[0] > 0 else ""
        best = best_lr(df, metric=info.get("metric", metric), lr_key=lr_key)
        n = seeds_per_variant(best)
        gate = f" among the rates with {info['gate'].replace('>=', '≥').replace('<=', '≤')} (all where none had)" \
            if info.get("gate") else ""
        text = (f"each variant at its own learning rate, chosen on {info.get('metric', metric)} (validation) of "
                f"{tuned_on}{gate} from {len(values)} values ({values[0]:g} to {values[-1]:g}{span}), then {n} seed"
                f"{'s' if n != 1 else ''} at the chosen value")
        edges = _edge_choices(df, best, values, lr_key, info.get("metric", metric), info.get("goal", "maximize"))
        if edges:
            n_variants, counts = edges
            said = [f"{k} the {word}" for k, word in zip(counts, ("smallest", "largest")) if k]
            if said:
                text += (f"; of the {n_variants} variants, {' and '.join(said)} value tried, strictly better there "
                         "than at its neighbour: the best may lie outside the range")
        return text
    if lr_key not in df.columns:
        return "every variant at the default learning rate"
    lrs = sorted({float(v) for v in df[lr_key].dropna()}, reverse=True)
    listed = ", ".join(f"{v:g}" for v in lrs)
    if lr_key in swept_keys(df) and len(lrs) > 1:
        return f"each variant at its best of {len(lrs)} learning rates ({listed}) on {metric}"
    return f"every variant at the one learning rate {listed}"


def _edge_choices(df, best, values, lr_key, metric, goal) -> tuple[int, tuple[int, int]] | None:
    """How many variants chose the smallest / the largest value tried while doing strictly better there (on the
    stage-1 mean of `metric`) than at the next value in: their best may lie outside the range. A variant that
    ties (every value solves the task: the rule takes the smaller) is not counted."""
    if len(values) < 2 or metric not in df.columns:
        return None
    variant = [k for k in swept_keys(df) if k not in ("seed", lr_key)]
    stage1 = df[df["stage"] == 1] if "stage" in df.columns else df
    sign = 1.0 if goal == "maximize" else -1.0
    counts, n = [0, 0], 0
    groups = best.groupby(variant, dropna=False, sort=False) if variant else [((), best)]
    for key, rows_ in groups:
        n += 1
        key = key if isinstance(key, tuple) else (key,)
        mine = stage1
        for k, v in zip(variant, key):
            mine = mine[mine[k].astype(object).map(repr) == repr(v)]
        chosen = float(rows_[lr_key].iloc[0])
        means = {v: sign * pd.to_numeric(mine.loc[np.isclose(mine[lr_key].astype(float), v), metric],
                                         errors="coerce").mean() for v in values}
        for side, (edge, inner) in enumerate(((values[0], values[1]), (values[-1], values[-2]))):
            if np.isclose(chosen, edge) and means[edge] > means[inner]:
                counts[side] += 1
    return n, (counts[0], counts[1])


def chosen_lrs(df: pd.DataFrame, label, lr_key: str = "optim.lr") -> str:
    """The learning rate each variant was compared at, for a sentence: 'none, causal 0.003; ...'.
    `label(row) -> str` names a variant; df: rows at the chosen values (at_best_lr)."""
    seen: dict[str, set[float]] = {}
    for _, row in df.iterrows():
        seen.setdefault(label(row), set()).add(float(row[lr_key]))
    return "; ".join(f"{name} {', '.join(f'{v:g}' for v in sorted(values))}" for name, values in seen.items())


def convergence(df: pd.DataFrame, what: str = "primary runs", gain: str = "val/gain_last_epoch",
                acc: str = "val/acc_best") -> str:
    """A sentence on whether the runs of df had converged: the median run's validation gain over its last
    epoch, and how many gained at most 1 point or had solved the task (>= 99 %). '' without the column."""
    if gain not in df.columns:
        return ""
    done = df[df["status"] == "completed"]
    gains = pd.to_numeric(done[gain], errors="coerce")
    if gains.notna().sum() == 0:
        return ""
    solved = pd.to_numeric(done[acc], errors="coerce") >= SOLVED if acc in done else pd.Series(False, index=done.index)
    flat = (gains <= PLATEAU) | solved
    median = float(gains.median())
    state = ("converged or plateaued" if median <= PLATEAU or solved.mean() > 0.5
             else "still learning: the comparison is of models early in training")
    return (f"Over its last epoch the median of the {len(done)} {what} gained {100 * median:+.1f} points of validation "
            f"accuracy; {int(flat.sum())} of {len(done)} gained at most {100 * PLATEAU:g} point or had solved the task "
            f"(≥ {100 * SOLVED:g} %): {state}.")


def seeds_per_variant(df: pd.DataFrame) -> int:
    """The fewest completed seeds any variant has (0 if none)."""
    keys = [k for k in swept_keys(df) if k != "seed"]
    done = df[df["status"] == "completed"]
    if done.empty:
        return 0
    return int(done.groupby(keys, dropna=False).size().min()) if keys else len(done)


def caveat(df: pd.DataFrame) -> str:
    """A sentence for Answers built on too few seeds to give intervals ('' when there are enough)."""
    n = seeds_per_variant(df)
    if n >= 2:
        return ""
    budgets = sorted({str(b) for b in df["budget"].dropna()}) if "budget" in df.columns else []
    budget = f" (budget {', '.join(budgets)})" if budgets else ""
    return (f"With {'one seed' if n == 1 else 'no completed run'} per variant{budget} there is no 95 % interval, so no "
            "difference between variants is called measurable: such comparisons are inconclusive.")
