"""Numbers for Answer sentences: a metric over seeds as mean ± 95 % interval, the difference of two
variants, log-log slopes, each formatted for a sentence. Nothing here is typed by hand in a notebook.

    e = estimate(df, "test/acc", {"model.n_heads": 8})   # Estimate: mean, ci95, n over seeds
    d = effect(estimate(df, ..., a), estimate(df, ..., b))  # Effect: a - b with a Welch interval
    f"{e}"  -> "97.3 ± 0.4 %"          f"{d}"  -> "+4.1 ± 1.2 points"
                                                or "no measurable difference (Δ = +0.3 ± 0.9 points)"

The interval of one variant is ablate.results.aggregate's (Student's t over seeds). The difference of
two variants gets Welch's t interval, the "combined interval" of the two; a difference inside it
(|Δ| <= half-width) is "no measurable difference". With one seed there is no interval, and the text
says so rather than calling a difference real.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..results import aggregate, best_lr, swept_keys, t_quantile_975

PERCENT_WORDS = ("acc", "frac", "share", "agreement")  # metrics shown in percent


def is_percent(metric: str) -> bool:
    last = metric.rsplit("/", 1)[-1]
    return any(word in last for word in PERCENT_WORDS)


def number(x: float, digits: int = 3) -> str:
    """3 significant digits, no scientific notation for ordinary magnitudes: 0.0123, 1.23, 123, 12,345."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if x == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(x)))
    if magnitude >= digits - 1:
        return f"{x:,.0f}"
    if magnitude < -4:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{max(0, digits - 1 - magnitude)}f}"


def pair(value: float, half: float) -> tuple[str, str]:
    """A value and its interval half-width, the interval to 2 significant digits and the value to the
    same decimals: (0.9213, 0.0497) -> ('0.921', '0.050'); a zero interval keeps 3 significant digits."""
    if not (math.isfinite(half) and half > 0):
        return number(value), "0"
    decimals = 1 - math.floor(math.log10(half))
    if decimals > 6:  # tiny numbers: scientific
        return f"{value:.2e}", f"{half:.1e}"
    decimals = max(0, decimals)
    return f"{value:,.{decimals}f}", f"{half:,.{decimals}f}"


def rows(df: pd.DataFrame, where: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The rows of df whose columns equal `where`'s values ({"model.n_heads": 8, "data.task": "copy"})."""
    mask = pd.Series(True, index=df.index)
    for key, value in (where or {}).items():
        if key not in df.columns:
            raise KeyError(f"no column {key!r} in the table")
        column = df[key]
        if isinstance(value, float) and not isinstance(value, bool):
            mask &= np.isclose(pd.to_numeric(column, errors="coerce"), value, rtol=1e-9, atol=0)
        elif value is None:
            mask &= column.isna()
        else:
            mask &= column.astype(object).map(lambda v, value=value: v == value).astype(bool)
    return df[mask]


@dataclass(frozen=True)
class Estimate:
    """A metric over the seeds of one variant: mean, std, 95 % t-interval half-width, n."""

    metric: str
    mean: float
    ci95: float
    std: float
    n: int  # completed runs with a value
    n_runs: int = 0  # runs of the variant (any status)
    n_diverged: int = 0
    decimals: int | None = None  # fixed decimals (slopes) instead of 3 significant digits

    @property
    def percent(self) -> bool:
        return is_percent(self.metric)

    def value(self, x: float) -> str:
        x = 100 * x if self.percent else x
        if self.decimals is not None and math.isfinite(x):
            return f"{x + 0.0:.{self.decimals}f}".replace("-0.00", "0.00")
        return number(x)

    def fmt(self) -> str:
        if self.n == 0:
            if self.n_diverged:
                return f"diverged ({self.n_diverged} of {self.n_runs} runs)"
            return "no completed run"
        unit = " %" if self.percent else ""
        mean = self.value(self.mean)
        if self.n < 2 or not math.isfinite(self.ci95):
            text = f"{mean}{unit}"  # one seed: no interval (say so once, see `caveat`)
        elif self.decimals is not None:
            ci = f"{(100 * self.ci95 if self.percent else self.ci95):.{self.decimals}f}"
            text = f"{mean} ± {ci}{unit}"
        else:
            scale = 100 if self.percent else 1
            mean, ci = pair(scale * self.mean, scale * self.ci95)
            text = f"{mean} ± {ci}{unit}"
        if self.n_diverged:
            text += f", {self.n_diverged} of {self.n_runs} runs diverged"
        return text

    def __str__(self) -> str:
        return self.fmt()

    def __format__(self, spec: str) -> str:
        return format(self.fmt(), spec)


def estimate(
    df: pd.DataFrame,
    metric: str,
    where: Mapping[str, Any] | None = None,
    status: tuple[str, ...] = ("completed",),
) -> Estimate:
    """`metric` over the runs of df matching `where`, as ablate.results.aggregate computes it
    (completed runs enter, diverged ones are counted in n_diverged)."""
    chosen = rows(df, where)
    n_runs = len(chosen)
    if metric not in df.columns:
        raise KeyError(f"no column {metric!r} in the table")
    if chosen.empty:
        return Estimate(metric, math.nan, math.nan, math.nan, 0, 0, 0)
    frame = chosen.copy()
    frame.attrs = {}
    agg = aggregate(frame, by=[], metrics=[metric], status=status)
    if agg.empty:  # runs there, none finished (running, failed): nothing to estimate
        return Estimate(metric, math.nan, math.nan, math.nan, 0, n_runs, 0)
    agg = agg.iloc[0]
    return Estimate(
        metric,
        float(agg[f"{metric}_mean"]),
        float(agg[f"{metric}_ci95"]),
        float(agg[f"{metric}_std"]),
        int(agg[f"{metric}_n"]),
        n_runs,
        int(agg["n_diverged"]),
    )


@dataclass(frozen=True)
class Effect:
    """a - b for two variants, with Welch's 95 % interval (the two intervals combined)."""

    a: Estimate
    b: Estimate

    @property
    def diff(self) -> float:
        return self.a.mean - self.b.mean

    @property
    def ci95(self) -> float:
        a, b = self.a, self.b
        if a.n < 2 or b.n < 2:
            return math.nan
        va, vb = a.std**2 / a.n, b.std**2 / b.n
        if va + vb == 0:
            return 0.0
        dof = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
        return t_quantile_975(dof) * math.sqrt(va + vb)

    @property
    def comparable(self) -> bool:
        return self.a.n > 0 and self.b.n > 0

    @property
    def has_interval(self) -> bool:
        return self.comparable and math.isfinite(self.ci95)

    @property
    def measurable(self) -> bool:
        """The difference lies outside its 95 % interval (needs two seeds per variant)."""
        return self.has_interval and abs(self.diff) > self.ci95

    @property
    def sign(self) -> int:
        """+1 / -1 when a is measurably above / below b, else 0."""
        return int(np.sign(self.diff)) if self.measurable else 0

    def _diff(self) -> str:
        unit = " points" if self.a.percent else ""
        scale = 100 if self.a.percent else 1
        d = self.diff * scale
        if self.a.decimals is not None:
            size, half = f"{abs(d):.{self.a.decimals}f}", f"{self.ci95 * scale:.{self.a.decimals}f}"
        elif self.has_interval:
            size, half = pair(abs(d), self.ci95 * scale)
        else:
            size, half = number(abs(d)), ""
        text = ("+" if d > 0 else "−" if d < 0 and float(size.replace(",", "")) != 0 else "") + size
        if self.has_interval:
            text += " ± " + half
        return text + unit

    def fmt(self) -> str:
        if not self.comparable:
            side = self.a if self.a.n == 0 else self.b
            return f"no comparison ({side.fmt()})"
        if not self.has_interval:
            return f"Δ = {self._diff()}, not measurable with one seed"
        if not self.measurable:
            return f"no measurable difference, Δ = {self._diff()}"
        return self._diff()

    def __str__(self) -> str:
        return self.fmt()

    def __format__(self, spec: str) -> str:
        return format(self.fmt(), spec)


def effect(a: Estimate, b: Estimate) -> Effect:
    return Effect(a, b)


def compare(df: pd.DataFrame, metric: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> Effect:
    """Effect of variant `a` minus variant `b` on `metric` (each a `where` mapping)."""
    return Effect(estimate(df, metric, a), estimate(df, metric, b))


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
        text = (f"each variant at its own learning rate, chosen on {info.get('metric', metric)} (validation) of "
                f"{tuned_on} from {len(values)} values ({values[0]:g} to {values[-1]:g}{span}), then {n} seed"
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


SOLVED = 0.99  # a task is solved at this validation accuracy
PLATEAU = 0.01  # a run gaining at most this over its last epoch has converged or plateaued
LEVEL_MARGIN = 0.01  # within this of a reference level, a run is at that level


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


def row_level(df: pd.DataFrame, split: str = "val") -> pd.Series:
    """Per row, the reference level a run that learned nothing useful sits at: the order-blind level
    (`ref/<split>/order_blind`) where the task records one below 99 %, else chance (`ref/<split>/chance`;
    the histogram's order-blind level is 100 %: a count depends only on the bag of tokens); NaN where
    the table records neither."""
    out = pd.Series(math.nan, index=df.index, dtype=float)
    if f"ref/{split}/chance" in df.columns:
        out = pd.to_numeric(df[f"ref/{split}/chance"], errors="coerce").astype(float)
    if f"ref/{split}/order_blind" in df.columns:
        blind = pd.to_numeric(df[f"ref/{split}/order_blind"], errors="coerce").astype(float)
        out = blind.where(blind < SOLVED, out)
    return out


def level(df: pd.DataFrame, where: Mapping[str, Any] | None = None, split: str = "val") -> float:
    """`row_level` averaged over the rows of `where` (NaN when none records one)."""
    values = row_level(rows(df, where), split).dropna()
    return float(values.mean()) if len(values) else math.nan


def at_level(df: pd.DataFrame, metric: str = "val/acc_best", split: str = "val") -> pd.Series:
    """Per row: True where `metric` is below, or within 1 point of, the row's reference level
    (`row_level`): the run learned nothing that the reference predictor cannot do."""
    value = pd.to_numeric(df[metric], errors="coerce")
    return (value <= row_level(df, split) + LEVEL_MARGIN).fillna(False).astype(bool)


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x (NaN with fewer than two usable points)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2 or np.unique(x[ok]).size < 2:
        return math.nan
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def slope_estimate(df: pd.DataFrame, x: str, y: str, where: Mapping[str, Any] | None = None) -> Estimate:
    """The log-log slope of y against x, fitted once per seed, as an Estimate over seeds."""
    chosen = rows(df, where)
    chosen = chosen[chosen["status"] == "completed"]
    seeds = chosen["seed"] if "seed" in chosen else pd.Series(0, index=chosen.index)
    slopes = [loglog_slope(g[x], g[y]) for _, g in chosen.groupby(seeds)]
    slopes = [s for s in slopes if math.isfinite(s)]
    name = f"slope of log {y} vs log {x}"
    if not slopes:
        return Estimate(name, math.nan, math.nan, math.nan, 0, len(chosen), 0, decimals=2)
    return values_estimate(name, slopes, decimals=2)


def values_estimate(name: str, values, decimals: int | None = None) -> Estimate:
    """An Estimate of plain numbers (one per seed)."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    n = len(v)
    if n == 0:
        return Estimate(name, math.nan, math.nan, math.nan, 0, decimals=decimals)
    std = float(v.std(ddof=1)) if n > 1 else math.nan
    ci = t_quantile_975(n - 1) * std / math.sqrt(n) if n > 1 else math.nan
    return Estimate(name, float(v.mean()), ci, std, n, n, decimals=decimals)


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


def ci95_errorbar(values) -> tuple[float, float]:
    """For seaborn's errorbar=: the 95 % t-interval over seeds, the interval the Answers quote
    (deterministic, unlike a bootstrap); a single value gets no bar."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        m = float(v.mean()) if len(v) else math.nan
        return m, m
    half = t_quantile_975(len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return float(v.mean() - half), float(v.mean() + half)
