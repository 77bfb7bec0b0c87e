"""Numbers for Answer sentences: a metric over seeds with a 95 % interval that respects its range, the
difference (or ratio) of two variants, the share of runs that learned, Holm's correction, each
formatted for a sentence. Nothing here is typed by hand in a notebook.

    e = estimate(df, "val/acc_best", {"model.pos_enc": "none"})   # Estimate: mean [lo, hi] over seeds
    d = effect(e, estimate(df, "val/acc_best", {"model.pos_enc": "learned"}))   # Effect: a - b, p
    f = learned(df, {"model.n_heads": 1})                          # Fraction: k of n runs learned
    f"{e}" -> "97.3 % [96.1, 98.2]"    f"{d}" -> "+4.1 points [2.0, 6.3]"    f"{f}" -> "5 of 5 runs (95 % CI 48–100 %)"

The interval of one variant is ablate.results.interval's, the one `ablate.results.aggregate` gives for the
same runs (its names, `kind_of`, `widen`, `bootstrap_means`, `B`, ..., are re-exported here): by the metric's
kind (`kind_of`), accuracies a widened percentile bootstrap over seeds with the evaluation set's own error
(`eval/n_val`, `eval/n_test`; without them over seeds only, and `Estimate.eval_noise` is False), fractions
and bounded probe quantities the same over seeds only, each inside its range; gradients (`grad*`, or
`scale="log"`) the geometric mean with a Student-t interval on the log values, two of them compare as a
ratio; everything else the mean with a Student-t interval.

Two variants (`effect(a, b)`): Welch's t on the per-seed values (scipy), for accuracies with the
evaluation set's own variance p(1 - p) / n_eval of each arm added to the standard error (and nothing to
the Welch–Satterthwaite denominator: it is known); the difference of two proportions is kept in [-1, 1].
Not a bootstrap of the difference: the widened bootstrap of a skewed handful of seeds (one of five
runs failed) spreads past the metric's bound and put a variant solved on every seed level with one
that failed once. Log estimates give the ratio a/b with Welch's interval on the log scale.
`Effect.tost(margin)` is the p-value of the two one-sided tests
of |a - b| < margin (equivalence).

Digits follow the interval: its width to 2 significant digits, the mean to the same decimals (a log
estimate: each number to 2 significant digits). One run: no interval, and the text says "1 run".

Every Estimate, Effect and Fraction formatted into text is recorded (`take_intervals`), so that the
Answer that quotes it carries its interval in its JSON and a test can check the ranges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scistats

from ..registry import REFERENCE_TEXT
from ..results.interval import (  # noqa: F401 - re-exported: notebooks and tests read S.B, S.widen, S._rng, S.kind_of
    ACCURACY,
    BOUNDED,
    BOUNDS,
    FRACTION,
    FRACTION_WORDS,
    LINEAR,
    LOG,
    N_EVAL,
    PERCENT_WORDS,
    SEED,
    B,
    _rng,
    bootstrap_means,
    bounded,
    bounds_of,
    interval,
    is_percent,
    kind_of,
    n_eval_of,
    t_quantile_975,
    widen,
)

# ------------------------------------------------------------------ formatting


def number(x: float, digits: int = 3) -> str:
    """3 significant digits, no scientific notation for ordinary magnitudes: 0.0123, 1.23, 123, 12,345."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if x == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(x)))
    if magnitude >= digits - 1:
        if float(x).is_integer():  # a count (steps, runs, images) is shown whole
            return f"{x:,.0f}"
        return f"{round(x, digits - 1 - magnitude):,.0f}"  # a measured 9,797.6 to 2 digits: 9,800
    if magnitude < -4:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{max(0, digits - 1 - magnitude)}f}"


def _fixed(x: float, decimals: int) -> str:
    """x to `decimals` decimals (negative: rounded to tens, hundreds, ...; at most 12) with a true minus
    sign, never "-0.0"."""
    if not math.isfinite(x):
        return "n/a"
    if decimals < 0:
        x = round(x, decimals)
    text = f"{x:,.{min(max(0, decimals), 12)}f}"
    if text.startswith("-") and float(text.replace(",", "")) == 0:
        text = text[1:]
    return text.replace("-", "−")


def interval_strings(mean: float, lo: float, hi: float, decimals: int | None = None,
                     relative: bool = False) -> tuple[str, str, str]:
    """mean, lo, hi as text. Digits follow the interval: its width to 2 significant digits and the mean
    to the same decimals ((0.973, 0.961, 0.982) -> ('0.973', '0.961', '0.982')); a zero-width interval
    keeps the mean's 3 significant digits; `decimals` fixes them; `relative` (log scale): each number to
    2 significant digits."""
    if relative:
        return tuple(number(x, 2).replace("-", "−") for x in (mean, lo, hi))  # type: ignore[return-value]
    if 0 < max(abs(mean), abs(lo), abs(hi)) < 1e-4:  # tiny numbers: scientific, 2 significant digits
        return tuple(f"{x:.1e}".replace("-", "−") for x in (mean, lo, hi))  # type: ignore[return-value]
    if decimals is None:
        width = hi - lo
        if math.isfinite(width) and width > 0:
            decimals = 1 - math.floor(math.log10(width))
        elif mean != 0 and math.isfinite(mean):
            decimals = max(0, 2 - math.floor(math.log10(abs(mean))))
        else:
            decimals = 0
    return _fixed(mean, decimals), _fixed(lo, decimals), _fixed(hi, decimals)


# ------------------------------------------------------------------ what an Answer quotes

_RECORDED: list[dict[str, Any]] = []


def _finite(x: float) -> float | None:
    """x for JSON: rounded to 10 decimals (no float noise in the payload), None when not finite."""
    return round(float(x), 10) if x is not None and math.isfinite(x) else None


def _record(metric: str, kind: str, mean: float, lo: float, hi: float) -> None:
    entry = {"metric": metric, "kind": kind, "mean": _finite(mean), "lo": _finite(lo), "hi": _finite(hi)}
    if entry not in _RECORDED:
        _RECORDED.append(entry)


def take_intervals() -> list[dict[str, Any]]:
    """Every interval formatted into text since the last call ({"metric", "kind", "mean", "lo", "hi"},
    the metric's own units: a fraction, not percent), and forget them; `Question.answer` calls it."""
    out = list(_RECORDED)
    _RECORDED.clear()
    return out


def _lang(lang: str) -> str:
    if lang not in ("en", "zh"):
        raise ValueError(f"lang={lang!r}; use 'en' or 'zh'")
    return lang


def _format(x: Any, spec: str) -> str:
    """format() of an Estimate / Effect / Fraction: "zh" (optionally after a width: ">40zh") gives the
    Chinese text, any other spec applies to the English text."""
    if spec.endswith("zh"):
        return format(x.fmt("zh"), spec[:-2])
    return format(x.fmt(), spec)


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
    """A metric over the seeds of one variant: mean with its 95 % interval [lo, hi], n runs with a value.
    `kind` says how (module text); `eval_noise` whether the evaluation set's error is in the interval."""

    metric: str
    mean: float
    lo: float = math.nan
    hi: float = math.nan
    n: int = 0  # completed runs with a value
    n_runs: int = 0  # runs of the variant (any status)
    n_diverged: int = 0
    kind: str = LINEAR
    eval_noise: bool = False
    n_eval: int | None = None
    std: float = math.nan  # over seeds, ddof=1 (the metric's scale)
    decimals: int | None = None  # fixed decimals (slopes) instead of digits following the interval
    values: tuple[float, ...] = field(default=(), repr=False, compare=False)  # one per run
    _replicates: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def percent(self) -> bool:
        return self.kind != LOG and is_percent(self.metric)

    @property
    def has_interval(self) -> bool:
        return self.n >= 2 and math.isfinite(self.lo) and math.isfinite(self.hi)

    @property
    def ci95(self) -> float:
        """The larger distance from the mean to an end of the interval (NaN without one)."""
        if not self.has_interval:
            return math.nan
        return max(self.hi - self.mean, self.mean - self.lo)

    def value(self, x: float) -> str:
        """One number of this metric as text (percent where the metric is one)."""
        x = 100 * x if self.percent else x
        if self.decimals is not None and math.isfinite(x):
            return _fixed(x, self.decimals)
        return number(x)

    def fmt(self, lang: str = "en") -> str:
        """The text, in English or Chinese (`lang="zh"`, or `f"{e:zh}"`): the same numbers."""
        zh = _lang(lang) == "zh"
        if self.n == 0:
            if self.n_diverged:
                return (f"发散（{self.n_runs} 次运行中 {self.n_diverged} 次）" if zh
                        else f"diverged ({self.n_diverged} of {self.n_runs} runs)")
            return "没有完成的运行" if zh else "no completed run"
        unit = ("%" if zh else " %") if self.percent else ""  # Chinese sets % close to its number (issue 39)
        scale = 100 if self.percent else 1
        if self.has_interval:
            mean, lo, hi = interval_strings(scale * self.mean, scale * self.lo, scale * self.hi, self.decimals,
                                            relative=self.kind == LOG and self.decimals is None)
            text = f"{mean}{unit} [{lo}, {hi}]"
            _record(self.metric, self.kind, self.mean, self.lo, self.hi)
        else:
            text = (f"{self.value(self.mean)}{unit}（{self.n} 次运行，无区间）" if zh else
                    f"{self.value(self.mean)}{unit} ({self.n} run{'s' if self.n != 1 else ''}, no interval)")
            _record(self.metric, self.kind, self.mean, math.nan, math.nan)
        if self.n_diverged:
            text += (f"，{self.n_runs} 次运行中 {self.n_diverged} 次发散" if zh
                     else f", {self.n_diverged} of {self.n_runs} runs diverged")
        return text

    def __str__(self) -> str:
        return self.fmt()

    def __format__(self, spec: str) -> str:
        return _format(self, spec)


def from_values(metric: str, values, kind: str | None = None, *, n_eval: int | None = None, n_runs: int | None = None,
                n_diverged: int = 0, decimals: int | None = None) -> Estimate:
    """An Estimate of one value per run (`kind` from the metric's name when None): the interval of
    ablate.results.interval, the one `ablate.results.aggregate` gives too."""
    i = interval(metric, values, kind, n_eval=n_eval)
    return Estimate(metric, i.mean, i.lo, i.hi, n=i.n, n_runs=i.n if n_runs is None else n_runs, n_diverged=n_diverged,
                    kind=i.kind, eval_noise=bool(i.n_eval), n_eval=int(i.n_eval) if i.n_eval else None, std=i.std,
                    decimals=decimals, values=i.values, _replicates=i.replicates)


def estimate(
    df: pd.DataFrame,
    metric: str,
    where: Mapping[str, Any] | None = None,
    status: tuple[str, ...] = ("completed",),
    *,
    scale: str | None = None,
    n_eval: int | None = None,
) -> Estimate:
    """`metric` over the runs of df matching `where` (runs whose status is in `status` enter; diverged
    ones are counted in n_diverged). `scale`: "log" / "linear" instead of the name's kind; `n_eval`:
    the evaluation set's size when the table has no eval/n_* column for it."""
    if metric not in df.columns:
        raise KeyError(f"no column {metric!r} in the table")
    chosen = rows(df, where)
    state = chosen["status"] if "status" in chosen.columns else pd.Series("completed", index=chosen.index)
    done = chosen[state.isin(status)]
    values = pd.to_numeric(done[metric], errors="coerce").to_numpy(dtype=float)
    if n_eval is None:
        n_eval = n_eval_of(done, metric)
    return from_values(metric, values, kind_of(metric, scale), n_eval=n_eval, n_runs=len(chosen),
                       n_diverged=int((state == "diverged").sum()))


def values_estimate(name: str, values, decimals: int | None = None, scale: str | None = None) -> Estimate:
    """An Estimate of plain numbers (one per seed), summarised as `name`'s kind says (an accuracy's interval
    stays in [0, 1]) unless `scale` is given."""
    return from_values(name, values, kind_of(name, scale), decimals=decimals)



@dataclass(frozen=True)
class Effect:
    """Variant a against variant b: the difference a - b (the ratio a / b for log estimates) with its
    95 % interval [lo, hi] and a two-sided p-value; `method` says how ("bootstrap", "welch", "none")."""

    a: Estimate
    b: Estimate
    diff: float
    lo: float = math.nan
    hi: float = math.nan
    p: float = math.nan
    method: str = "none"
    _replicates: np.ndarray | None = field(default=None, repr=False, compare=False)  # of a - b (bootstrap)
    _se: float = math.nan  # Welch: standard error and degrees of freedom (the log scale for a ratio)
    _dof: float = math.nan

    @property
    def ratio(self) -> bool:
        return self.a.kind == LOG

    @property
    def kind(self) -> str:
        return "ratio" if self.ratio else "difference"

    @property
    def null(self) -> float:
        """The value of no effect: 1 for a ratio, 0 for a difference."""
        return 1.0 if self.ratio else 0.0

    @property
    def comparable(self) -> bool:
        return self.a.n > 0 and self.b.n > 0

    @property
    def has_interval(self) -> bool:
        return self.comparable and math.isfinite(self.lo) and math.isfinite(self.hi)

    @property
    def measurable(self) -> bool:
        """The 95 % interval excludes no effect (0, or a ratio of 1)."""
        return self.has_interval and (self.lo > self.null or self.hi < self.null)

    @property
    def sign(self) -> int:
        """+1 / -1 when a is measurably above / below b, else 0."""
        return (1 if self.lo > self.null else -1) if self.measurable else 0

    @property
    def ci95(self) -> float:
        """The larger distance from the estimate to an end of its interval (old callers)."""
        return max(self.hi - self.diff, self.diff - self.lo) if self.has_interval else math.nan

    def _distance(self, margin: float) -> tuple[float, float]:
        """The estimate and the margin on the scale the test runs on (log for a ratio)."""
        if not margin > 0 or (self.ratio and not margin > 1):
            raise ValueError(f"margin={margin!r}: a difference's margin is > 0 (in the metric's units, 0.02 = 2 "
                             "points); a ratio's is a factor > 1 (1.25 = within ×/÷1.25)")
        if self.ratio:
            return math.log(self.diff), math.log(margin)
        return self.diff, margin

    def tost(self, margin: float) -> float:
        """p-value of the two one-sided tests that -margin < a - b < margin (for a ratio: 1/margin < a/b <
        margin): the larger of the two one-sided p-values, so p < 0.05 exactly when the 90 % interval
        lies inside the margin. NaN without an interval."""
        d, m = self._distance(margin)
        if not self.has_interval:
            return math.nan
        if not self._se > 0:  # no spread and no evaluation noise: nothing shows the difference is small
            return 1.0
        below = float(scistats.t.sf((d + m) / self._se, self._dof))  # H0: d <= -m
        above = float(scistats.t.cdf((d - m) / self._se, self._dof))  # H0: d >= m
        return max(below, above)

    def beyond(self, margin: float) -> float:
        """Two-sided-style p-value that the difference lies outside ±margin on the side of its estimate
        (twice the one-sided p of H0 |a - b| <= margin): < 0.05 when the 95 % interval lies wholly
        outside the margin. NaN without an interval."""
        d, m = self._distance(margin)
        if not self.has_interval:
            return math.nan
        if not self._se > 0:  # no spread: nothing shows the difference is large either
            return 1.0
        one = float(scistats.t.sf((abs(d) - m) / self._se, self._dof))
        return min(1.0, 2 * one)

    def against(self, value: float) -> tuple[int, float]:
        """The effect against `value` in place of no effect (a ratio's factor, 0.5 = a halving; or a difference):
        +1 / -1 when the 95 % interval lies wholly above / below it, else 0, with the two-sided p of
        a - b = value (a / b = value), Welch's t on the test's scale; (0, nan) without an interval."""
        if self.ratio and not value > 0:
            raise ValueError(f"value={value!r}: a ratio is compared with a factor > 0")
        if not self.has_interval:
            return 0, math.nan
        side = 1 if self.lo > value else -1 if self.hi < value else 0
        if not self._se > 0:
            return side, (0.0 if side else 1.0)
        centre = (math.log(self.lo) + math.log(self.hi)) / 2 if self.ratio else (self.lo + self.hi) / 2
        null = math.log(value) if self.ratio else value
        if not self.ratio and self.a.kind in (ACCURACY, FRACTION, BOUNDED):  # the interval may be clipped
            centre = self.diff
        return side, float(2 * scistats.t.sf(abs(centre - null) / self._se, self._dof))

    def _text(self, zh: bool = False) -> str:
        if self.ratio:
            if not self.has_interval:
                return f"×{number(self.diff, 2)}"
            mean, lo, hi = interval_strings(self.diff, self.lo, self.hi, relative=True)
            return f"×{mean} [{lo}, {hi}]"
        unit = (" 个百分点" if zh else " points") if self.a.percent else ""
        scale = 100 if self.a.percent else 1
        if not self.has_interval:
            d = scale * self.diff
            return ("+" if d > 0 else "") + number(d).replace("-", "−") + unit
        mean, lo, hi = interval_strings(scale * self.diff, scale * self.lo, scale * self.hi, self.a.decimals)
        if self.diff > 0 and mean.strip("0.,") != "":
            mean = "+" + mean
        return f"{mean}{unit} [{lo}, {hi}]"

    def fmt(self, lang: str = "en") -> str:
        """The text, in English or Chinese (`lang="zh"`, or `f"{d:zh}"`): the same numbers."""
        zh = _lang(lang) == "zh"
        if not self.comparable:
            side = self.a if self.a.n == 0 else self.b
            return f"无法比较（{side.fmt(lang)}）" if zh else f"no comparison ({side.fmt()})"
        text = self._text(zh)
        _record(self.a.metric, self.kind, self.diff, self.lo, self.hi)
        if not self.has_interval:
            return f"{text}（一组只有 1 次运行，无区间）" if zh else f"{text} (1 run in an arm, no interval)"
        return text

    def __str__(self) -> str:
        return self.fmt()

    def __format__(self, spec: str) -> str:
        return _format(self, spec)


def _welch(x: np.ndarray, y: np.ndarray, ex: float = 0.0, ey: float = 0.0) -> tuple[float, float, float, float]:
    """Welch's t for mean(x) - mean(y): (difference, standard error, degrees of freedom, two-sided p).
    `ex`, `ey`: variance each mean carries besides its seeds' (the evaluation set's own error, known, so
    it adds to the standard error and nothing to the Welch–Satterthwaite denominator)."""
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    d, se = float(x.mean() - y.mean()), math.sqrt(vx + vy + ex + ey)
    if se == 0:
        return d, 0.0, math.nan, (0.0 if d != 0 else 1.0)
    denominator = vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1)
    dof = (vx + vy + ex + ey) ** 2 / denominator if denominator > 0 else math.inf
    p = float(2 * scistats.t.sf(abs(d) / se, dof))
    return d, se, dof, p


def effect(a: Estimate, b: Estimate) -> Effect:
    """a - b (a / b for log estimates) with its 95 % interval and p-value, by Welch's t (accuracies: with
    each arm's evaluation-set variance added, `_eval_var`); no interval with fewer than 2 runs an arm."""
    if (a.kind == LOG) != (b.kind == LOG) and a.n and b.n:
        raise ValueError(f"cannot compare {a.metric} on the {a.kind} scale with {b.metric} on the {b.kind} scale")
    if not (a.n and b.n):
        return Effect(a, b, math.nan)
    if a.kind == LOG:
        ratio = a.mean / b.mean
        if a.n < 2 or b.n < 2:
            return Effect(a, b, ratio)
        d, se, dof, p = _welch(np.log(a.values), np.log(b.values))
        half = t_quantile_975(dof) * se if se > 0 else 0.0
        return Effect(a, b, ratio, math.exp(d - half), math.exp(d + half), p, "welch", None, se, dof)
    diff = a.mean - b.mean
    if a.n < 2 or b.n < 2:
        return Effect(a, b, diff)
    d, se, dof, p = _welch(np.asarray(a.values), np.asarray(b.values), _eval_var(a), _eval_var(b))
    half = t_quantile_975(dof) * se if se > 0 else 0.0
    lo, hi = diff - half, diff + half
    if a.kind in (ACCURACY, FRACTION):  # a difference of two proportions lies in [-1, 1]
        lo, hi = max(lo, -1.0), min(hi, 1.0)
    elif a.kind == BOUNDED and bounds_of(a.metric):
        low, high = bounds_of(a.metric)
        lo, hi = max(lo, low - high), min(hi, high - low)
    return Effect(a, b, diff, lo, hi, p, "welch", None, se, dof)


def _eval_var(e: Estimate) -> float:
    """The variance the evaluation set's own sampling adds to a variant's mean accuracy: p(1 - p) / n_eval
    (once, not divided by the seeds: they share one evaluation set); 0 without `eval_noise`."""
    if not (e.eval_noise and e.n_eval):
        return 0.0
    n = e.n_eval
    p = (min(max(e.mean, 0.0), 1.0) * n + 0.5) / (n + 1)  # Jeffreys-smoothed: 500 of 500 still has a variance
    return p * (1 - p) / n


def compare(df: pd.DataFrame, metric: str, a: Mapping[str, Any], b: Mapping[str, Any], *,
            scale: str | None = None) -> Effect:
    """Effect of variant `a` minus variant `b` on `metric` (each a `where` mapping)."""
    return effect(estimate(df, metric, a, scale=scale), estimate(df, metric, b, scale=scale))


# ------------------------------------------------------------------ learned or not


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval of k successes in n trials (scipy.stats.beta)."""
    if n <= 0:
        return math.nan, math.nan
    alpha = 1 - confidence
    lo = float(scistats.beta.ppf(alpha / 2, k, n - k + 1)) if k > 0 else 0.0
    hi = float(scistats.beta.ppf(1 - alpha / 2, k + 1, n - k)) if k < n else 1.0
    return lo, hi


@dataclass(frozen=True)
class Fraction:
    """k of n runs learned, with the exact 95 % interval; `steps`: each learned run's val/step_solved."""

    k: int
    n: int
    lo: float
    hi: float
    metric: str = "val/acc_best"
    steps: tuple[float, ...] = ()

    @property
    def mean(self) -> float:
        return self.k / self.n if self.n else math.nan

    def fmt(self, lang: str = "en") -> str:
        """The text, in English or Chinese (`lang="zh"`, or `f"{f:zh}"`): the same numbers."""
        zh = _lang(lang) == "zh"
        if self.n == 0:
            return "没有完成的运行" if zh else "no completed run"
        _record(f"learned: {self.metric}", FRACTION, self.mean, self.lo, self.hi)
        ci = f"{100 * self.lo:.0f}–{100 * self.hi:.0f}" + ("%" if zh else " %")
        if zh:
            return f"{self.n} 次运行中 {self.k} 次（95% 置信区间 {ci}）"
        return f"{self.k} of {self.n} run{'s' if self.n != 1 else ''} (95 % CI {ci})"

    def __str__(self) -> str:
        return self.fmt()

    def __format__(self, spec: str) -> str:
        return _format(self, spec)


def learned(df: pd.DataFrame, where: Mapping[str, Any] | None = None, metric: str = "val/acc_best",
            threshold: float | None = None) -> Fraction:
    """How many runs of `where` learned: `metric` above its row's reference level by more than the row's
    margin (`above_level`, the rule `LEARNED_RULE` states; the complement of `at_level`), or at least
    `threshold` when given (SOLVED = 0.99: solved). Completed and diverged runs count (a diverged run did
    not learn)."""
    if metric not in df.columns:
        raise KeyError(f"no column {metric!r} in the table")
    chosen = rows(df, where)
    if "status" in chosen.columns:
        chosen = chosen[chosen["status"].isin(("completed", "diverged"))]
    if threshold is None:
        split = split_of(metric)
        ref = row_level(chosen, split)
        if ref.isna().any():
            raise ValueError(f"no reference level (ref/{split}/chance) for {int(ref.isna().sum())} run(s) of {where}; "
                             "pass threshold=")
        ok = above_level(chosen, metric, split)
    else:
        ok = (pd.to_numeric(chosen[metric], errors="coerce") >= threshold).fillna(False).astype(bool)
    steps: tuple[float, ...] = ()
    if "val/step_solved" in chosen.columns:
        s = pd.to_numeric(chosen.loc[ok, "val/step_solved"], errors="coerce")
        steps = tuple(float(x) for x in s if math.isfinite(x))
    k, n = int(ok.sum()), len(chosen)
    return Fraction(k, n, *clopper_pearson(k, n), metric=metric, steps=steps)


# ------------------------------------------------------------------ several tests


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values, in the order given (None / NaN stay None and do not count):
    the i-th smallest of m becomes max over j <= i of min(1, (m - j + 1) p_(j))."""
    valid = [(p, i) for i, p in enumerate(pvalues) if p is not None and math.isfinite(p)]
    m = len(valid)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(valid)):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def errorbar(values) -> tuple[float, float]:
    """For seaborn's `errorbar=`: the 95 % interval of the mean over seeds by the same widened bootstrap
    as an Estimate's (seeds only; B = 4000, a fixed seed, so the figure is the same on every build).
    Values all in [0, 1] (accuracies, fractions) keep their bar in [0, 1], values all >= 0 keep it >= 0;
    a single value gets no bar."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        m = float(v.mean()) if len(v) else math.nan
        return m, m
    bounds = (0.0, 1.0) if v.min() >= 0 and v.max() <= 1 else (0.0, math.inf) if v.min() >= 0 else None
    v = np.sort(v)  # one interval for the same values in any order
    reps = bootstrap_means(v, None, _rng("errorbar", tuple(v)))
    return bounded(reps, float(v.mean()), bounds)


ci95_errorbar = errorbar  # the old name


def geomean(values) -> float:
    """Seaborn's `estimator=` for magnitudes that span orders of magnitude between runs (gradient norms):
    the geometric mean of the positive values (NaN without any)."""
    v = np.asarray(values, dtype=float)
    return float(np.exp(np.mean(np.log(v[v > 0])))) if (v > 0).any() else math.nan


def log_errorbar(values) -> tuple[float, float]:
    """Seaborn's `errorbar=` to go with `geomean`: `errorbar` on the log values, mapped back."""
    v = np.asarray(values, dtype=float)
    lo, hi = errorbar(np.log(v[v > 0]))
    return float(np.exp(lo)), float(np.exp(hi))


SOLVED = 0.99  # a task is solved at this validation accuracy
PLATEAU = 0.01  # a run gaining at most this over its last epoch has converged or plateaued
LEVEL_MARGIN = 0.01  # within this of a reference level, a run is at that level (the least of `row_margin`)
LUCK = 0.975  # row_margin: the quantile of a level's binomial luck a run must beat (the top of its 95 % range)
LEVELS = tuple(REFERENCE_TEXT)  # the reference levels a task may record (ref/<split>/<level>: ablate.registry)
LEARNED_RULE = ("learned: {metric} above the task's highest reference level ({levels}; a level of 99 % or more "
                "is no floor) by more than {margin:g} point and by more than a predictor at that level scores by "
                "luck in one pass over the {split} set (the top of its 95 % binomial range on its {column} "
                "examples){best}")


def split_of(metric: str) -> str:
    """The evaluation split a metric is measured on ("val", "test"); "val" for a column of another name."""
    split = metric.split("/", 1)[0]
    return split if split in N_EVAL else "val"


def learned_rule(metric: str = "val/acc_best") -> str:
    """`above_level`'s rule in one line of English, for a report's footnote."""
    names = ", ".join(level.replace("_", "-") for level in LEVELS)
    split = split_of(metric)
    best = ("; the best of several epochs' passes clears that by luck more often than one pass does"
            if metric.endswith("_best") else "")
    return LEARNED_RULE.format(metric=metric, levels=names, margin=100 * LEVEL_MARGIN, split=
                               {"val": "validation", "test": "test"}[split], column=N_EVAL[split], best=best)


def row_level(df: pd.DataFrame, split: str = "val") -> pd.Series:
    """Per row, the reference level a run that learned nothing the task tests reaches: the highest of the
    levels its task records (`ref/<split>/<level>`, LEVELS: chance, order-blind, one key, position only)
    below SOLVED. A level at 99 % or more is no floor: the histogram's order-blind level is 100 % (a count
    depends only on the bag of tokens). NaN where the table records none."""
    columns = [f"ref/{split}/{name}" for name in LEVELS if f"ref/{split}/{name}" in df.columns]
    if not columns:
        return pd.Series(math.nan, index=df.index, dtype=float)
    values = df[columns].apply(pd.to_numeric, errors="coerce").astype(float)
    return values.where(values < SOLVED).max(axis=1, skipna=True)


def row_margin(df: pd.DataFrame, split: str = "val") -> pd.Series:
    """Per row, by how much a run must clear its level (`row_level`) to have learned: LEVEL_MARGIN, or more
    where the evaluation set is small: the luck of a predictor at the level on its eval/n_<split> examples,
    the 97.5th percentile of Binomial(n, level) / n minus the level (n = 1,000 at 50 %: 3.1 points; 128:
    8.6). `n` counts examples (sequences, images), not tokens, as the accuracies' intervals do (`bootstrap_means`);
    without an eval/n_<split> column, LEVEL_MARGIN alone."""
    level = row_level(df, split)
    column = N_EVAL.get(split)
    n = (pd.to_numeric(df[column], errors="coerce") if column in df.columns else pd.Series(math.nan, index=df.index))
    known = level.notna() & (n > 0)
    luck = pd.Series(0.0, index=df.index)
    if known.any():
        size = n[known].astype(int).to_numpy()
        luck[known] = scistats.binom.ppf(LUCK, size, level[known].to_numpy()) / size - level[known].to_numpy()
    return luck.clip(lower=LEVEL_MARGIN)


def above_level(df: pd.DataFrame, metric: str = "val/acc_best", split: str | None = None) -> pd.Series:
    """Per row: True where `metric` is above the row's reference level by more than its margin (`row_level`
    + `row_margin` of the metric's split, or `split`): the run learned. The one rule of "learned": `learned`
    counts these rows, `at_level` is the rest (with a value and a level), `ablate compare` shows it."""
    split = split or split_of(metric)
    value = pd.to_numeric(df[metric], errors="coerce")
    return (value > row_level(df, split) + row_margin(df, split)).fillna(False).astype(bool)


def level(df: pd.DataFrame, where: Mapping[str, Any] | None = None, split: str = "val") -> float:
    """`row_level` averaged over the rows of `where` (NaN when none records one)."""
    values = row_level(rows(df, where), split).dropna()
    return float(values.mean()) if len(values) else math.nan


def at_level(df: pd.DataFrame, metric: str = "val/acc_best", split: str = "val") -> pd.Series:
    """Per row: True where `metric` is at, below, or not clearly above the row's reference level (within
    `row_margin` of it): the run learned nothing that the reference predictor cannot do. The complement of
    `above_level` among the rows with a value and a level."""
    value = pd.to_numeric(df[metric], errors="coerce")
    known = value.notna() & row_level(df, split).notna()
    return (known & ~above_level(df, metric, split)).astype(bool)



def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x (NaN with fewer than two usable points)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2 or np.unique(x[ok]).size < 2:
        return math.nan
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])




def slope_estimate(df: pd.DataFrame, x: str, y: str, where: Mapping[str, Any] | None = None) -> Estimate:
    """The log-log slope of y against x, fitted once per seed, as an Estimate over seeds (Student's t)."""
    chosen = rows(df, where)
    chosen = chosen[chosen["status"] == "completed"]
    seeds = chosen["seed"] if "seed" in chosen else pd.Series(0, index=chosen.index)
    slopes = [loglog_slope(g[x], g[y]) for _, g in chosen.groupby(seeds)]
    slopes = [s for s in slopes if math.isfinite(s)]
    name = f"slope of log {y} vs log {x}"
    return from_values(name, slopes, LINEAR, n_runs=len(slopes) or len(chosen), decimals=2)
