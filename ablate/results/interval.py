"""The 95 % interval of a metric over seeds: one rule for the results table (`aggregate`'s `_lo`, `_hi`),
`ablate compare` and the report notebooks (`ablate.report.stats.estimate`, which re-exports these names), so
the same runs get the same interval wherever they are quoted (issue 43). numpy, scipy and pandas only.

The interval depends on what the metric is (`kind_of`):

- accuracy (the metric's last part contains `acc`): a two-level percentile bootstrap (B = 4000,
  a fixed seed): resample the seeds, take their mean p̄* (its distance from the mean widened so that
  few seeds get Student's t's width, not the plain bootstrap's, which is too narrow: `widen`), then
  add the evaluation set's own error once per replicate, because every seed is scored on the same
  evaluation set, whose sampling error does not average out over seeds (`bootstrap_means`). The set's
  size is the table's `eval/n_val` / `eval/n_test` (examples: sequences or images; `n_eval_of`); without
  it the bootstrap is over seeds only.
- fraction (`frac`, `share`, `agreement`, `onehot`): the same bootstrap over seeds only.
  Both stay in [0, 1].
- bounded (probe quantities with a fixed range, BOUNDS): the same bootstrap over seeds, inside the range.
- log (gradient norms and ratios, `grad*`): the geometric mean with a Student-t interval on the log
  values (a value <= 0 has no logarithm: such a metric is summarised as linear).
- linear (everything else): the mean with a Student-t interval.

The bootstrap's stream is fixed by the data alone (`_rng(metric, sorted values, n_eval)`): the same runs
get the same interval in whatever order their rows come and whichever `where` selected them.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

B = 4000  # bootstrap replicates
SEED = 14  # the bootstrap's fixed seed (mixed with the data, so two variants draw independent streams)
ACCURACY, FRACTION, BOUNDED, LOG, LINEAR = "accuracy", "fraction", "bounded", "log", "linear"
PERCENT_WORDS = ("acc", "frac", "share", "agreement", "onehot")  # metrics shown in percent
FRACTION_WORDS = ("frac", "share", "agreement", "onehot")
# Probe quantities with a fixed range (docs/probes.md): the largest attention weight, the entropy normalised by
# log T, the permutation-equivariance error max |A(Px) - P A(x) P^T| (weights lie in [0, 1]), the mean token cosine,
# and the mean cosines of a token going into a norm layer with what comes out and with itself centred.
BOUNDS = {"rowmax": (0.0, 1.0), "entropy": (0.0, 1.0), "equiv_error": (0.0, 1.0), "cosine": (-1.0, 1.0),
          "norm_cos": (-1.0, 1.0), "norm_centre": (-1.0, 1.0)}
N_EVAL = {"val": "eval/n_val", "test": "eval/n_test"}  # a metric's split -> its evaluated examples


def t_quantile_975(dof: float) -> float:
    """The 0.975 quantile of Student's t with `dof` degrees of freedom (scipy's; NaN for dof < 1). The one
    t-quantile of ablate: the intervals here and the reports' tests both use it."""
    if not dof >= 1:
        return math.nan
    # imported on first use: `ablate results` without an interval does not pay for scipy
    from scipy import stats

    return float(stats.t.ppf(0.975, dof))


def is_percent(metric: str) -> bool:
    last = metric.rsplit("/", 1)[-1]
    return any(word in last for word in PERCENT_WORDS)


def kind_of(metric: str, scale: str | None = None) -> str:
    """How `metric` is summarised: "accuracy", "fraction", "bounded", "log" or "linear" (see the module's
    text); `scale="log"` or `"linear"` overrides the name."""
    if scale not in (None, LOG, LINEAR):
        raise ValueError(f"scale={scale!r}; use 'log', 'linear' or None (from the metric's name)")
    if scale is not None:
        return scale
    last = metric.rsplit("/", 1)[-1]
    if "acc" in last:
        return ACCURACY
    if any(word in last for word in FRACTION_WORDS):
        return FRACTION
    if bounds_of(metric) is not None:
        return BOUNDED
    if last.startswith("grad"):
        return LOG
    return LINEAR


def bounds_of(metric: str) -> tuple[float, float] | None:
    """The range of a bounded probe quantity (BOUNDS, by the name's last part: `probe/final/rowmax_l0`), else None."""
    last = metric.rsplit("/", 1)[-1]
    return next((b for word, b in BOUNDS.items() if last == word or last.startswith(word + "_")), None)


def n_eval_of(df: pd.DataFrame, metric: str) -> int | None:
    """The examples `metric`'s split evaluated (eval/n_val, eval/n_test), the fewest over df's rows; None
    without such a column or a positive value in it."""
    column = N_EVAL.get(metric.split("/", 1)[0])
    if column is None or column not in df.columns:
        return None
    values = pd.to_numeric(df[column], errors="coerce").dropna()
    return int(values.min()) if len(values) and values.min() > 0 else None


def _rng(*key: Any) -> np.random.Generator:
    """A generator fixed by SEED and `key` (the metric, the values sorted, n_eval): the same numbers on
    every build, and for the same runs wherever they are quoted, in whatever order their rows came (a run
    folder, an exported table and W&B list them differently)."""
    return np.random.default_rng([SEED, zlib.crc32(repr(key).encode())])


def widen(n: int) -> float:
    """How much wider the seeds' bootstrap is drawn than it resamples: t_{0.975, n-1} / (z_{0.975} sqrt((n-1)/n)).
    The plain percentile bootstrap of a mean over n seeds is too narrow for few seeds (it uses the
    population standard deviation and the normal quantile): its 95 % interval covers the true mean 73 % of
    the time for 3 normal seeds, 83 % for 5. Widened by this factor, the seeds' part of the interval is
    Student's t's for normal seeds (95 % coverage), and keeps the bootstrap's shape otherwise."""
    if n < 2:
        return 1.0
    from scipy import stats

    return float(stats.t.ppf(0.975, n - 1) / (stats.norm.ppf(0.975) * math.sqrt((n - 1) / n)))


def bootstrap_means(values: np.ndarray, n_eval: int | None, rng: np.random.Generator, b: int = B) -> np.ndarray:
    """B replicates of the mean over seeds: the seeds resampled with replacement, the replicate's distance
    from the mean widened by `widen(n)`; with `n_eval`, the evaluation set's own error on top: the
    deviation of a draw from Beta(k + 1/2, n_eval - k + 1/2) from p*, k = p* n_eval (p* the replicate
    inside [0, 1]; the seeds share one evaluation set, so it does not average out). Jeffreys' Beta rather
    than the plug-in Binomial(n_eval, p*): at p* = 1 (every example right) the plug-in has no variance and
    would claim 500 of 500 pins the accuracy at exactly 100 %; Jeffreys gives [99.5, 100] there, near the
    exact (Clopper–Pearson) [99.26, 100]. The replicates are NOT clipped: a difference of two
    variants is taken between replicates as drawn (clipping at 1 would pile a variant's widened replicates
    on the bound and bias the difference); an interval of one variant is clipped to the metric's range
    where it is read (`bounded`)."""
    values = np.asarray(values, dtype=float)
    n, mean = len(values), float(values.mean())
    means = mean + (values[rng.integers(0, n, size=(b, n))].mean(axis=1) - mean) * widen(n)
    if n_eval:
        p = np.clip(means, 0.0, 1.0)
        k = p * int(n_eval)
        means = means + rng.beta(k + 0.5, int(n_eval) - k + 0.5) - p
    return means


def bounded(reps: np.ndarray, mean: float, bounds: tuple[float, float] | None) -> tuple[float, float]:
    """The 95 % percentile interval of `reps`, holding `mean`, inside `bounds` (None: unbounded)."""
    lo, hi = (float(x) for x in np.percentile(reps, [2.5, 97.5]))
    lo, hi = min(lo, mean), max(hi, mean)
    if bounds is not None:
        lo, hi = float(np.clip(lo, *bounds)), float(np.clip(hi, *bounds))
    return lo, hi


@dataclass(frozen=True)
class Interval:
    """A metric over n runs: `mean` (the geometric mean for kind "log") with its 95 % interval [lo, hi]
    (NaN for n < 2), the standard deviation over runs (ddof=1, the metric's own scale), the kind it was
    summarised as and the evaluation set's size that entered (accuracies only)."""

    mean: float
    lo: float
    hi: float
    std: float
    n: int
    kind: str
    n_eval: int | None  # as given, for kind "accuracy" only (the bootstrap's stream is keyed by it)
    values: tuple[float, ...] = field(default=(), repr=False)  # the finite values, in the order given
    replicates: np.ndarray | None = field(default=None, repr=False, compare=False)  # the bootstrap's


def interval(metric: str, values, kind: str | None = None, n_eval: int | None = None) -> Interval:
    """The 95 % interval of `metric` over `values` (one per run; None, NaN and inf left out), summarised as
    `kind` says (from the metric's name when None; see the module's text)."""
    kind = kind_of(metric) if kind is None else kind
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    n = len(v)
    if kind == LOG and n and (v <= 0).any():
        kind = LINEAR  # a value <= 0 has no logarithm: summarised on the linear scale instead
    if kind != ACCURACY:
        n_eval = None
    common = dict(n=n, kind=kind, n_eval=n_eval, values=tuple(v))
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, **common)
    std = float(v.std(ddof=1)) if n > 1 else math.nan
    if n < 2:
        return Interval(float(v.mean()), math.nan, math.nan, std, **common)
    if kind in (ACCURACY, FRACTION, BOUNDED):
        # the stream is fixed by the data alone: the same runs get the same interval wherever they are quoted
        ordered = np.sort(v)  # resampled in one order, whatever the rows' order
        reps = bootstrap_means(ordered, n_eval, _rng(metric, tuple(ordered), n_eval))
        mean = float(v.mean())
        lo, hi = bounded(reps, mean, bounds_of(metric) if kind == BOUNDED else (0.0, 1.0))  # never outside the range
        return Interval(mean, lo, hi, std, replicates=reps, **common)
    x = np.log(v) if kind == LOG else v
    m, half = float(x.mean()), t_quantile_975(n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    if kind == LOG:
        return Interval(math.exp(m), math.exp(m - half), math.exp(m + half), std, **common)
    return Interval(m, m - half, m + half, std, **common)
