"""Time to solve as an outcome, and differences of runs paired on one evaluation set.

Time to solve: the optimiser steps a run took to first reach the task's solve level on validation
(`val/step_solved`, >= 99 %); a run that never got there is *censored* at the steps it ran
(`global_step`: it would have needed more). Where most runs of every arm solve a task, final accuracy
ties at the ceiling while the steps still separate the arms, and a run that failed counts as the slowest
instead of dragging a mean of accuracies down (Welch's t on val/acc_mean was swamped by one failed seed).

    t = R.time_to_solve(df, where)              Solve: each run's steps, solved or censored
    test = R.solve_test(a, b)                   a against b: Mann–Whitney U with every censored run ranked
                                                after every solved one (exact where the counts are small:
                                                scipy's permutation distribution, ties included), and
                                                scipy's log-rank test beside it
    d = R.paired(df, metric, a, b)              a - b over runs paired by seed, scipy's ttest_rel

Ranking a censored run last is exact when every censored run ran at least as long as the slowest solved
one (one budget for all: the sweeps here), and it is then Gehan's generalised Wilcoxon test. Where that
fails the test says so (`valid`) and `solve_test` refuses to give a rank p-value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scistats

from ..results.stats import t_quantile_975
from .stats import ACCURACY, FRACTION, LOG, Effect, _format, _lang, effect, estimate, rows

EXACT_LIMIT = 200_000  # splits of the pooled runs enumerated for an exact p-value; above it, the normal approximation


@dataclass(frozen=True)
class Solve:
    """One variant's runs: the steps each ran until it solved (`solved` True) or stopped unsolved;
    `diverged` marks runs that diverged (never solved, whatever step they stopped at: ranked last)."""

    steps: tuple[float, ...]
    solved: tuple[bool, ...]
    label: str = ""
    diverged: tuple[bool, ...] = ()

    def _diverged(self, i: int) -> bool:
        return bool(self.diverged) and self.diverged[i]

    @property
    def n(self) -> int:
        return len(self.steps)

    @property
    def k(self) -> int:
        return int(sum(self.solved))

    @property
    def ranked(self) -> np.ndarray:
        """Each run's time for the rank test: its steps when it solved, +inf (after every solved run) when not."""
        return np.array([s if ok else math.inf for s, ok in zip(self.steps, self.solved)], dtype=float)

    @property
    def median(self) -> float:
        """The median with censored runs counted as the slowest: +inf when half or more never solved."""
        return float(np.median(self.ranked)) if self.n else math.nan

    def fmt(self, lang: str = "en") -> str:
        zh = _lang(lang) == "zh"
        if not self.n:
            return "没有完成的运行" if zh else "no completed run"
        times = sorted(int(s) for s, ok in zip(self.steps, self.solved) if ok)
        shown = ", ".join(str(t) for t in times)
        censored = [i for i, ok in enumerate(self.solved) if not ok and not self._diverged(i)]
        budget = max((int(self.steps[i]) for i in censored), default=None)
        n_div = sum(self._diverged(i) for i in range(self.n))
        if zh:
            median = f"{self.median:g} 步" if math.isfinite(self.median) else "未达到"
            never = f"，{len(censored)} 次在 {budget} 步内未解决" if budget is not None else ""
            never += f"，{n_div} 次发散" if n_div else ""
            return f"中位数 {median}（{self.n} 次运行：{shown or '无'}{never}）"
        median = f"{self.median:g} steps" if math.isfinite(self.median) else "not reached"
        never = f"; {len(censored)} never, censored at {budget}" if budget is not None else ""
        never += f"; {n_div} diverged" if n_div else ""
        return f"median {median} ({self.n} runs: {shown or 'none solved'}{never})"

    def __str__(self) -> str:
        return self.fmt()

    def __format__(self, spec: str) -> str:
        return _format(self, spec)


def time_to_solve(df: pd.DataFrame, where: Mapping[str, Any] | None = None, *, step: str = "val/step_solved",
                  budget: str = "global_step", label: str = "") -> Solve:
    """The completed and diverged runs of df matching `where`: `step` where it is set (solved), else
    censored at `budget`; a diverged run never solves (the slowest, whatever step it stopped at)."""
    chosen = rows(df, where)
    state = chosen["status"] if "status" in chosen.columns else pd.Series("completed", index=chosen.index)
    chosen, state = chosen[state.isin(("completed", "diverged"))], state[state.isin(("completed", "diverged"))]
    solved_at = pd.to_numeric(chosen[step], errors="coerce") if step in chosen else pd.Series(math.nan, chosen.index)
    diverged = tuple(bool(x == "diverged") for x in state)
    solved_at = solved_at.where(~pd.Series(diverged, index=solved_at.index), math.nan)
    ran = pd.to_numeric(chosen[budget], errors="coerce")
    steps = tuple(float(s if math.isfinite(s) else r) for s, r in zip(solved_at, ran))
    return Solve(steps, tuple(bool(math.isfinite(s)) for s in solved_at), label, diverged)


@dataclass(frozen=True)
class SolveTest:
    """a against b on time to solve. `u`: Mann–Whitney's U of a (large: a slower); `p`: its two-sided
    p-value (`method` "exact" or "asymptotic"), None where the ranks are not valid; `p_logrank`: scipy's
    log-rank test; `sign`: -1 when a is the faster (p < 0.05), +1 the slower, 0 neither."""

    a: Solve
    b: Solve
    u: float
    p: float | None
    method: str
    p_logrank: float | None
    valid: bool

    @property
    def sign(self) -> int:
        if self.p is None or not self.p < 0.05:
            return 0
        return -1 if self.u < self.a.n * self.b.n / 2 else +1

    @property
    def floor(self) -> bool:
        """Every run of both arms solved at the same step (the first check that could see it) or none
        solved at all: the arms sit at one floor or ceiling of what the schedule resolves, no evidence."""
        times = set(self.a.ranked) | set(self.b.ranked)
        return len(times) == 1

    def fmt(self, lang: str = "en") -> str:
        zh = _lang(lang) == "zh"
        if self.p is None:
            return ("秩检验不适用（有运行在最慢的已解决运行之前就停止了）" if zh
                    else "no rank test (a run stopped before the slowest solved one: its rank is unknown)")
        p = "p < 0.001" if self.p < 0.001 else f"p = {self.p:.2g}"
        lr = ("" if self.p_logrank is None else
              (f"，对数秩检验 p = {self.p_logrank:.2g}" if zh else f"; log-rank p = {self.p_logrank:.2g}"))
        if zh:
            how = "精确" if self.method == "exact" else "正态近似"
            return f"秩和检验（曼-惠特尼）U = {self.u:g}（未解决的运行排在最后），{p}（{how}）{lr}"
        return f"Mann–Whitney U = {self.u:g} (unsolved runs ranked last), {p} ({self.method}){lr}"

    def __str__(self) -> str:
        return self.fmt()

    def __format__(self, spec: str) -> str:
        return _format(self, spec)


def _logrank(a: Solve, b: Solve) -> float | None:
    horizon = max([*a.steps, *b.steps], default=0.0)

    def data(s: Solve):
        done = [t for t, ok in zip(s.steps, s.solved) if ok]
        right = [horizon if s._diverged(i) else t for i, (t, ok) in enumerate(zip(s.steps, s.solved)) if not ok]
        return scistats.CensoredData(uncensored=done, right=right)

    if not (a.k + b.k) or not (a.n and b.n):
        return None  # no event at all: the test has nothing to compare
    with np.errstate(invalid="ignore", divide="ignore"):  # no variance (every time equal): NaN, said as None
        p = float(scistats.logrank(data(a), data(b)).pvalue)
    return p if math.isfinite(p) else None


def solve_test(a: Solve, b: Solve) -> SolveTest:
    """Time to solve, a against b (see the module text)."""
    x, y = a.ranked, b.ranked
    if not (a.n and b.n):
        return SolveTest(a, b, math.nan, None, "none", None, False)
    slowest = max([t for s in (a, b) for t, ok in zip(s.steps, s.solved) if ok], default=-math.inf)
    valid = all(t >= slowest for s in (a, b) for i, (t, ok) in enumerate(zip(s.steps, s.solved))
                if not ok and not s._diverged(i))
    if not valid:
        return SolveTest(a, b, math.nan, None, "none", _logrank(a, b), False)
    exact = math.comb(a.n + b.n, a.n) <= EXACT_LIMIT
    method = "exact" if exact else "asymptotic"
    if len(set(x) | set(y)) == 1:  # every run the same time: no difference, and the statistic is degenerate
        return SolveTest(a, b, a.n * b.n / 2, 1.0, method, _logrank(a, b), True)
    finite = np.where(np.isinf(x), 1e300, x), np.where(np.isinf(y), 1e300, y)  # ranks only: +inf as the largest
    u = float(scistats.mannwhitneyu(*finite, alternative="two-sided", method="asymptotic").statistic)
    if exact:  # every split of the pooled runs, ties included (scipy's permutation_test, scipy >= 1.8)
        def statistic(p, q, axis):
            return scistats.mannwhitneyu(p, q, axis=axis, alternative="two-sided", method="asymptotic").statistic

        p = float(scistats.permutation_test(finite, statistic, permutation_type="independent", n_resamples=np.inf,
                                            vectorized=True, alternative="two-sided").pvalue)
    else:
        p = float(scistats.mannwhitneyu(*finite, alternative="two-sided", method="asymptotic").pvalue)
    return SolveTest(a, b, u, min(p, 1.0), method, _logrank(a, b), True)


def paired(df: pd.DataFrame, metric: str, a: Mapping[str, Any], b: Mapping[str, Any], *,
           on: Sequence[str] = ("seed",)) -> Effect:
    """a - b on `metric` over the runs of a and b paired by `on` (the same seed; runs without a partner are
    left out, and each arm's estimate is of its paired runs only): the mean difference with Student's t
    interval and two-sided p on the n - 1 degrees of freedom of the differences (scipy's ttest_rel; a
    metric on the log scale, a gradient, as the ratio a / b from the differences of logs). Both arms are
    scored on the same evaluation examples, so the evaluation set's own sampling error is not added twice
    as for independent arms: the spread of the differences over seeds carries how the two models disagree
    on those examples, and the interval is about this evaluation set. Differences with no spread beyond the
    metric's resolution (one evaluation example; 1e-9 where the size is not known) show nothing the seeds
    vary by: then the unpaired `effect` is given instead, never a p-value from a zero variance. A seed that
    occurs twice in an arm (a `where` that does not pin every other setting) is a ValueError."""

    def by_key(where):
        chosen = rows(df, where)
        if "status" in chosen.columns:
            chosen = chosen[chosen["status"] == "completed"]
        values = pd.to_numeric(chosen[metric], errors="coerce")
        out: dict[tuple, float] = {}
        for (_, r), v in zip(chosen.iterrows(), values):
            key = tuple(r[k] for k in on)
            if key in out:
                raise ValueError(f"paired({metric!r}): {dict(zip(on, key))} occurs twice among the runs of {dict(where)}; "
                                 "pin every other setting in the where mappings")
            if math.isfinite(v):
                out[key] = float(v)
        return out

    xa, xb = by_key(a), by_key(b)
    keys = sorted(set(xa) & set(xb), key=str)
    paired_keys = set(keys)

    def partnered(where):  # the arm's runs that have a partner: what its estimate is of
        chosen = rows(df, where)
        return chosen[[tuple(r[k] for k in on) in paired_keys for _, r in chosen.iterrows()]]

    ea, eb = estimate(partnered(a), metric), estimate(partnered(b), metric)
    log = ea.kind == LOG
    if log and any(xa[k] <= 0 or xb[k] <= 0 for k in keys):
        raise ValueError(f"paired({metric!r}): a value <= 0 has no logarithm; compare it on the linear scale")
    d = np.array([math.log(xa[k] / xb[k]) if log else xa[k] - xb[k] for k in keys], dtype=float)
    if len(d) < 2:
        mean = float(d.mean()) if len(d) else math.nan
        return Effect(ea, eb, math.exp(mean) if log and len(d) else mean)
    n_eval = ea.n_eval if ea.kind == ACCURACY else None
    resolution = 1.0 / n_eval if n_eval else 1e-9
    if float(np.ptp(d)) < resolution / 2:  # no spread the metric can resolve: no paired test
        return effect(ea, eb)
    mean, se, dof = float(d.mean()), float(d.std(ddof=1)) / math.sqrt(len(d)), float(len(d) - 1)
    p = float(scistats.ttest_rel(np.log([xa[k] for k in keys]) if log else [xa[k] for k in keys],
                                 np.log([xb[k] for k in keys]) if log else [xb[k] for k in keys]).pvalue)
    half = t_quantile_975(dof) * se
    if log:
        return Effect(ea, eb, math.exp(mean), math.exp(mean - half), math.exp(mean + half), p, "paired", None, se, dof)
    lo, hi = mean - half, mean + half
    if ea.kind in (ACCURACY, FRACTION):
        lo, hi = max(lo, -1.0), min(hi, 1.0)
    return Effect(ea, eb, mean, lo, hi, p, "paired", None, se, dof)
