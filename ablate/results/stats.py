"""Over seeds: mean, 95 % interval, standard deviation and n per variant; each variant at its best
learning rate; which config keys a table sweeps.

Import-clean: this module (and the light `ablate.results` package) imports nothing of the harness
below the results layer (no config, run directories, sweeps, torch), so the reports can use it on an
exported table (tests/test_layering.py walks every import). What it needs of the harness comes with
the table: `df.attrs["swept_keys"]` (load() computes them; ablate.report.data.table() reads them from
meta.json), else the column order of the table's format.

The interval is ablate.results.interval's, the one `ablate compare` and the report notebooks quote
(`ablate.report.stats.estimate`): for the same runs `aggregate` gives the same mean, lo and hi, to the bit.
Accuracies, fractions and bounded probes stay in their range (a bootstrap over seeds, for accuracies with
the evaluation set's own error), gradients are summarised on the log scale, the rest by Student's t.

A tuned sweep (a `tuned.<key>` column, see ablate.sweep.tune) is read at each variant's chosen value:
`best_lr` returns those rows (every seed), `aggregate(df)` gives one row per variant at it, with the
`tuned.<key>` column and the stage-1 curve (`tune/<metric>@<key>=<value>`: the metric's mean over the
tune seeds at each value tried, -inf (maximised) / inf (minimised) where a run diverged or was stopped early).

Diverged runs have no final metrics. By default they are left out of the statistics (`n` counts
the runs that entered them, `n_diverged` how many diverged); `diverged_as=0.1` (say, chance
accuracy) counts each diverged run as that value instead, a dict gives one value per metric.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..budgets import profile_keys
from .interval import N_EVAL, interval, n_eval_of, t_quantile_975  # noqa: F401 - t_quantile_975: ablate.results' name

METRIC = re.compile(r"^(test|val|train)/")
CORRUPT = "corrupt"  # the status of a run whose files cannot be read
# ablate.config.NOT_IDENTITY: keys that name where or how a run ran, never what it is (a test keeps the
# two equal; the reports may not import the config)
NOT_IDENTITY = ("run.dir", "run.group", "run.project", "run.name", "run.sweep_id", "tracking", "trainer.threads",
                "trainer.log_every_n_steps", "run.keep_best")
PROFILE_CONTEXT = ("budget", "data.task", "run.group")  # what a profile key's value follows from
TUNED = "tuned."  # the prefix of a tuned sweep's chosen-value column (table.py)


class ResultsError(ValueError):
    """No runs to tabulate, or a request the table cannot answer; the message says what to do."""


def _scalar(v: Any) -> Any:
    """A value as `same` compares it: numpy scalars as Python's, missing values as None, and a string that
    spells a boolean, null or a number (a command line's `0.001`, `true`) as that value."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, str):
        text = v.strip().lower()
        if text in ("true", "false"):
            return text == "true"
        if text in ("null", "~"):
            return None
        try:
            v = float(text) if text not in ("nan", "inf", "-inf", "infinity", "-infinity") else v
        except ValueError:
            return v
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def same(a: Any, b: Any) -> bool:
    """Whether `a` and `b` are one value of a key, wherever they come from (a table cell, a config default, a
    command line, a sweep file). The rule: numpy scalars are Python's; a string that spells a boolean, null or
    a number is that value ('0.001' is 0.001, 'true' is True); missing (None, NaN, pd.NA) equals missing only;
    a boolean equals a boolean only (True is not 1); numbers are equal within a relative 1e-9 (a CSV round
    trip may print 0.0003 as 0.00030000000000000003); anything else by ==."""
    a, b = _scalar(a), _scalar(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    return bool(a == b)


def _worst(maximize: bool) -> float:
    return -math.inf if maximize else math.inf


def score(value: Any, status: str | None, maximize: bool) -> float:
    """A finished run's score: its metric, or the worst possible when it diverged or has no finite metric.
    ablate.sweep.tune.score, the runner's rule (a test keeps the two equal; the reports may not import sweeps)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return _worst(maximize)
    return x if status == "completed" and math.isfinite(x) else _worst(maximize)


def _varies(column: pd.Series) -> bool:
    return column.astype(object).map(repr).nunique() > 1  # None, NaN and unhashables compare by value


def swept(df: pd.DataFrame, config_keys: list[str], listed: Collection[str] = ()) -> list[str]:
    """The config keys that vary between the readable runs (listed ones always): not the bookkeeping
    keys, and a budget-profile key (ablate.budgets: epochs, subset sizes) only when it varies between
    runs of the same budget, task and sweep (it differs between the tasks of a sweep because of the
    profile, not because the sweep compares it)."""
    rows = df
    if "status" in df.columns and (df["status"] != CORRUPT).any():
        rows = df[df["status"] != CORRUPT]  # a corrupt row's missing config would make every key vary
    skip, profiled = set(NOT_IDENTITY), profile_keys()
    context = [rows[c].astype(object).map(repr) for c in PROFILE_CONTEXT if c in rows.columns]

    def varies(key: str) -> bool:
        if key in skip or key not in rows.columns:
            return False
        if key not in profiled or not context:
            return _varies(rows[key])
        return any(_varies(group) for _, group in rows[key].groupby(context, sort=False))

    return [k for k in config_keys if k in listed or varies(k)]


class _Kept(list):
    """A list in df.attrs that pandas hands on instead of deep-copying: pandas 3 deep-copies df.attrs in
    every operation's __finalize__, which with a sweep's key lists was two million copy calls and a seventh
    of a report notebook's time. Attrs are set whole, never changed in place, so sharing them is safe."""

    def __deepcopy__(self, memo: dict) -> _Kept:
        return self


class _KeptDict(dict):
    """A dict in df.attrs, handed on like _Kept (its values with it)."""

    def __deepcopy__(self, memo: dict) -> _KeptDict:
        return self


def kept(attrs: dict[str, Any]) -> dict[str, Any]:
    """`attrs` with each list and dict value handed on, not deep-copied, by pandas: what every
    `df.attrs = ...` here assigns."""
    return {k: _KeptDict(v) if isinstance(v, dict) else _Kept(v) if isinstance(v, list) else v
            for k, v in attrs.items()}


def config_columns(df: pd.DataFrame) -> list[str]:
    """The table's config columns: df.attrs["config_keys"] when set, else (a table read back from a CSV)
    the columns between run_id and status, as the table's format orders them (run_id | config keys |
    seed | tuned.<key>, stage | status | metrics ...), without tuned.<key> and stage."""
    keys = df.attrs.get("config_keys")
    if keys is not None:
        return [k for k in keys if k in df.columns]
    columns = [c for c in df.columns if isinstance(c, str)]
    end = columns.index("status") if "status" in columns else len(columns)
    return [c for c in columns[:end] if c not in ("run_id", "stage") and not c.startswith(TUNED) and "/" not in c]


def swept_keys(df: pd.DataFrame) -> list[str]:
    """The config keys the sweep varies (seed included when it varies), in column order: df.attrs
    ["swept_keys"] when the table came from ablate.results.load or ablate.report.table (meta.json);
    otherwise the config columns (config_columns) whose values differ between rows, by load()'s rule."""
    keys = df.attrs.get("swept_keys")
    if keys is not None:
        return [k for k in keys if k in df.columns]
    return swept(df, config_columns(df))




def tuned_key(df: pd.DataFrame) -> str | None:
    """The key a tuned table was tuned on (its `tuned.<key>` column), None for an untuned one."""
    key = (df.attrs.get("tune") or {}).get("key")
    if key and f"{TUNED}{key}" in df.columns:
        return key
    found = [c[len(TUNED):] for c in df.columns if isinstance(c, str) and c.startswith(TUNED) and c[len(TUNED):] in df.columns]
    return found[0] if found else None


def curve_column(metric: str, key: str, value) -> str:
    return f"tune/{metric}@{key}={value:g}" if isinstance(value, float) else f"tune/{metric}@{key}={value}"


def _metrics(df: pd.DataFrame, metrics: Sequence[str] | None) -> list[str]:
    if metrics is None:
        return list(df.attrs.get("metrics") or [c for c in df.columns if METRIC.match(c)])
    return [metrics] if isinstance(metrics, str) else list(metrics)


def _check(df: pd.DataFrame, columns: list[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ResultsError(f"no column {', '.join(map(repr, missing))} in the table; columns: {', '.join(df.columns)}")


def _counted(
    df: pd.DataFrame,
    by: list[str],
    metrics: list[str],
    status: tuple[str, ...],
    diverged_as: float | dict[str, float] | None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows that enter the statistics: (frame, sizes). frame: the `by` columns, each metric's value
    (NaN where the run does not count), n_runs and n_diverged (1 or 0 per row); sizes: the rows' eval/n_*
    columns, NaN where the run does not count. One row per run of `status` or diverged, index 0..n-1."""
    rows = df[df["status"].isin(status) | (df["status"] == "diverged")].reset_index(drop=True)
    diverged = rows["status"] == "diverged"
    counted = rows["status"].isin(status) & (~diverged | (diverged_as is None))
    values = rows[metrics].apply(pd.to_numeric, errors="coerce").astype(float).where(counted, np.nan)
    if diverged_as is not None:
        fill = diverged_as if isinstance(diverged_as, dict) else dict.fromkeys(metrics, diverged_as)
        for metric, value in fill.items():
            if metric in values.columns:
                values.loc[diverged, metric] = float(value)
        counted = counted | diverged
    frame = pd.concat([rows[by], values], axis=1)
    frame["n_runs"] = counted.astype(int)
    frame["n_diverged"] = diverged.astype(int)
    sizes = rows[[c for c in dict.fromkeys(N_EVAL.values()) if c in rows.columns]].where(counted)
    return frame, sizes


def _groups(frame: pd.DataFrame, by: list[str]):
    if by:
        return frame.groupby(by, dropna=False, sort=True)
    return frame.groupby(np.zeros(len(frame), dtype=int))


STATS = ("mean", "lo", "hi", "std", "n")  # aggregate's columns per metric, in order: <metric>_<stat>


def aggregate(
    df: pd.DataFrame,
    by: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    status: Sequence[str] = ("completed",),
    diverged_as: float | dict[str, float] | None = None,
) -> pd.DataFrame:
    """One row per group of `by` (default: the swept keys other than seed) with, for each metric
    (default: every logged metric), `<metric>_mean`, `_lo`, `_hi`, `_std` and `_n`, plus `n_runs` and
    `n_diverged`. mean, lo and hi are the 95 % interval of ablate.results.interval, bit for bit what
    `ablate.report.stats.estimate(df, metric, where=<the group>)` gives for the same runs (and `ablate
    compare` prints): accuracies, fractions and bounded probes a bootstrap that stays in their range
    (accuracies with the evaluation set's own error, from eval/n_val, eval/n_test), gradients (`grad*`)
    the geometric mean with a t-interval on the log scale, the rest the mean with Student's t. lo and hi
    are empty where n < 2. std: over the runs, ddof=1; n: runs with a finite value.

    Runs whose status is in `status` enter the statistics; diverged runs enter them as
    `diverged_as` when it is given and are left out when it is None (their group still appears,
    with n = 0, so a variant that always diverges is not silently dropped).

    A tuned table with `by` not given: one row per variant at its chosen value (see `tuned`)."""
    if by is None and tuned_key(df) is not None:
        return tuned(df, metrics=metrics, status=status, diverged_as=diverged_as)
    by = [k for k in swept_keys(df) if k != "seed"] if by is None else [by] if isinstance(by, str) else list(by)
    metrics = _metrics(df, metrics)
    status = (status,) if isinstance(status, str) else tuple(status)
    _check(df, [*by, *metrics, "status"])
    frame, sizes = _counted(df, by, metrics, status, diverged_as)
    groups = _groups(frame, by)
    columns: dict[str, list[float]] = {f"{m}_{s}": [] for m in metrics for s in STATS}
    for _, group in groups:  # in the order of the groups' index below
        evaluated = sizes.loc[group.index]
        for m in metrics:
            i = interval(m, group[m].to_numpy(dtype=float), n_eval=n_eval_of(evaluated, m))
            for s, x in zip(STATS, (i.mean, i.lo, i.hi, i.std, i.n)):
                columns[f"{m}_{s}"].append(x)
    n_runs = groups["n_runs"].sum()
    out = pd.DataFrame(columns, index=n_runs.index)
    for m in metrics:
        out[f"{m}_n"] = out[f"{m}_n"].astype(int)
    out["n_runs"] = n_runs
    out["n_diverged"] = groups["n_diverged"].sum()
    out = out.reset_index(drop=not by)
    out.attrs = kept({"by": by, "metrics": metrics, "status": list(status), "diverged_as": diverged_as})
    return out


def best_lr(
    df: pd.DataFrame,
    metric: str = "val/acc_best",
    lr_key: str = "optim.lr",
    maximize: bool = True,
    status: Sequence[str] = ("completed",),
    diverged_as: float | dict[str, float] | None = None,
) -> pd.DataFrame:
    """The rows of each variant (the swept keys other than seed and `lr_key`) at the learning rate
    whose seed-mean of `metric` is best: select on validation, then compare on test with
    `aggregate(best_lr(df), metrics=["test/acc"])`. Every row of a chosen (variant, lr) is returned,
    diverged and failed ones too, so the comparison can count them. The mean is the arithmetic one over
    the runs `aggregate` counts (same `status` and `diverged_as`); a variant with no mean at any lr (all diverged)
    keeps its smallest lr; ties go to the smaller lr. Without a swept `lr_key`, `df` is returned.

    A sweep tuned on `lr_key` (its `tuned.<lr_key>` column): the rows at each variant's chosen value,
    every seed (the choice was made on the tune seeds by the sweep's own metric); a variant whose
    stage 1 is not finished yet (no choice) is chosen by the rule above, on the rows it has."""
    if tuned_key(df) == lr_key:
        chosen = df[f"{TUNED}{lr_key}"]
        at = pd.Series([same(v, c) for v, c in zip(df[lr_key], chosen)], index=df.index, dtype=bool)
        pending = chosen.isna()
        if not pending.any():
            return df[at]
        rest = _best_lr(df[pending], metric, lr_key, maximize, status, diverged_as)
        return df[(at & ~pending) | df.index.isin(rest.index)]
    return _best_lr(df, metric, lr_key, maximize, status, diverged_as)


def _best_lr(df, metric, lr_key, maximize, status, diverged_as) -> pd.DataFrame:
    keys = swept_keys(df)
    if lr_key not in keys:
        return df.copy()
    variant = [k for k in keys if k not in ("seed", lr_key)]
    by = [*variant, lr_key]
    _check(df, [*by, metric, "status"])
    status = (status,) if isinstance(status, str) else tuple(status)
    frame, _ = _counted(df, by, [metric], status, diverged_as)
    scores = _groups(frame, by)[[metric]].mean().add_suffix("_mean").reset_index()
    scores = scores.sort_values(
        [f"{metric}_mean", lr_key], ascending=[not maximize, True], na_position="last", kind="stable"
    )
    chosen = scores.drop_duplicates(subset=variant) if variant else scores.head(1)
    wanted = pd.MultiIndex.from_frame(chosen[[*variant, lr_key]].astype(object))
    have = pd.MultiIndex.from_frame(df[[*variant, lr_key]].astype(object))
    return df[have.isin(wanted)]


def tuned(
    df: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    status: Sequence[str] = ("completed",),
    diverged_as: float | dict[str, float] | None = None,
) -> pd.DataFrame:
    """A tuned table, one row per variant: its keys, the value of the tuned key the statistics are at
    (its chosen one; `tuned.<key>` is empty where stage 1 is not finished, and the value is then the best
    on the rows there are), `aggregate`'s statistics over every seed at that value, and the stage-1 curve
    (`tune/<metric>@<key>=<value>`, the metric's mean over the tune seeds at each value tried, -inf /
    inf (the worst) where one diverged or was stopped early, empty where one has not finished)."""
    key = tuned_key(df)
    if key is None:
        raise ResultsError("the table is not of a tuned sweep (no tuned.<key> column); use aggregate(df)")
    info = df.attrs.get("tune") or {}
    metric = info.get("metric", "val/acc_best")
    maximize = info.get("goal", "maximize") == "maximize"
    variant = [k for k in swept_keys(df) if k not in ("seed", key)]
    at = best_lr(df, metric=metric, lr_key=key, maximize=maximize)
    out = aggregate(at, by=[*variant, key], metrics=metrics, status=status, diverged_as=diverged_as)
    column = f"{TUNED}{key}"
    firsts = at.drop_duplicates(subset=[*variant, key])
    chosen = {tuple(map(repr, r[:-1])): r[-1] for r in firsts[[*variant, key, column]].itertuples(index=False)}
    out.insert(len(variant) + 1, column, [chosen.get(tuple(map(repr, r)), np.nan)
                                          for r in out[[*variant, key]].itertuples(index=False)])
    # the curve: stage-1 rows, mean over the tune seeds per value (worst where one diverged or was stopped early)
    worst = -math.inf if maximize else math.inf
    stage1 = df[df["stage"] == 1] if "stage" in df.columns else df.iloc[0:0]
    n_tune = stage1["seed"].nunique() if "seed" in stage1.columns else 0  # the tune seeds this table ran
    values = info.get("values") or sorted(stage1[key].dropna().unique())
    curve: dict[str, list[float]] = {curve_column(metric, key, v): [] for v in values}
    for row in out[variant].itertuples(index=False) if variant else [()]:
        mine = stage1
        for k, v in zip(variant, row):
            mine = mine[mine[k].astype(object).map(repr) == repr(v)]
        for v in values:
            runs = mine[[same(x, v) for x in mine[key]]]
            finished = runs["status"].isin(("completed", "diverged", "stopped"))
            if runs.empty or not finished.all() or runs["seed"].nunique() < n_tune:
                mean = np.nan  # not every tune seed has finished at this value yet
            else:  # the runner's own rule: diverged, or no finite metric, scores the worst
                scores = [score(x, st, maximize) for x, st in zip(
                    runs[metric] if metric in runs else [np.nan] * len(runs), runs["status"])]
                mean = worst if any(math.isinf(x) for x in scores) else float(np.mean(scores))
            curve[curve_column(metric, key, v)].append(mean)
    for name, column_values in curve.items():
        out[name] = column_values
    out.attrs = kept({**out.attrs, "tune": {**info, "key": key, "metric": metric}, "curve": list(curve)})
    return out
