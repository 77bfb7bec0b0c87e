"""One interval for the same runs everywhere (issue 43): `ablate.results.aggregate` gives, per metric and
variant, the interval `ablate.report.stats.estimate` gives for the same rows (what `ablate compare` and the
report notebooks quote), to the bit, on a committed table (Q2's `scaling`, each variant at its best rate):
accuracies near 100 % stay at or below 100 % where the table's old Student-t interval went past it (98.28
± 4.03 %), gradients are read on the log scale, linear metrics by Student's t."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ablate.results import aggregate, best_lr, format_table
from ablate.results import interval as I

ROOT = Path(__file__).resolve().parents[1]
ACCURACIES = ["test/acc", "val/acc_best", "test/seq_acc"]  # with eval/n_test, eval/n_val: the evaluation set's error
LOG = ["probe/final/grad_ratio", "probe/init/grad_l0"]
LINEAR = ["val/loss", "train/loss", "val/step_solved"]  # step_solved: empty for unsolved runs, so n varies
RANGED = ["probe/final/onehot_frac_l0", "probe/final/share_ffn", "probe/final/rowmax_l0", "probe/final/cosine_l1"]
METRICS = ACCURACIES + LOG + LINEAR + RANGED


@pytest.fixture(scope="module")
def runs():
    import ablate.report as R

    return best_lr(R.table("scaling", ROOT / "reports" / "data"))


@pytest.fixture(scope="module")
def table(runs):
    return aggregate(runs, metrics=METRICS)


def variants(table):
    by = table.attrs["by"]
    for _, row in table.iterrows():
        yield {k: row[k].item() if hasattr(row[k], "item") else row[k] for k in by}, row


def test_aggregate_gives_the_reports_interval_for_the_same_runs(runs, table):
    from ablate.report import stats as S

    assert table.attrs["by"] == ["model.d_head", "model.qk_scale", "optim.lr"] and len(table) == 6
    kinds = set()
    for where, row in variants(table):
        for metric in METRICS:
            e = S.estimate(runs, metric, where)
            kinds.add(e.kind)
            got = tuple(row[f"{metric}_{s}"] for s in ("mean", "lo", "hi", "std", "n"))
            expected = (e.mean, e.lo, e.hi, e.std, e.n)
            assert got == pytest.approx(expected, rel=0, abs=0, nan_ok=True), (where, metric)  # the same bits
    assert kinds == {"accuracy", "log", "linear", "fraction", "bounded"}
    assert any(0 < n < 5 for n in table["val/step_solved_n"])  # some runs never solved: fewer values


def test_accuracies_stay_at_or_below_100_percent_where_student_t_went_past(table):
    passed = 0
    for _, row in variants(table):
        for metric in ACCURACIES:
            mean, lo, hi, std, n = (row[f"{metric}_{s}"] for s in ("mean", "lo", "hi", "std", "n"))
            assert 0.0 <= lo <= mean <= hi <= 1.0, (metric, lo, mean, hi)
            passed += mean + I.t_quantile_975(n - 1) * std / math.sqrt(n) > 1.0  # the old interval's top
    assert passed >= 3  # d_head 8 with sqrt(d_k) scaling: 98.28 +- 4.03 % before, now at most 100 %
    assert "test/acc_ci95" not in table.columns


def test_gradients_on_the_log_scale_and_the_rest_by_student_t(runs, table):
    for where, row in variants(table):
        mine = runs[np.logical_and.reduce([runs[k] == v for k, v in where.items()])]
        for metric in LOG + LINEAR:
            x = mine[metric].dropna().to_numpy(dtype=float)
            n = len(x)
            assert row[f"{metric}_n"] == n and len(mine) == 5
            if n < 2:
                assert math.isnan(row[f"{metric}_lo"]) and math.isnan(row[f"{metric}_hi"])
                continue
            y = np.log(x) if metric in LOG else x
            half = stats.t.ppf(0.975, n - 1) * y.std(ddof=1) / math.sqrt(n)
            centre = (y.mean(), y.mean() - half, y.mean() + half)
            if metric in LOG:  # the geometric mean, the interval mapped back from the log scale
                centre = tuple(np.exp(centre))
            assert (row[f"{metric}_mean"], row[f"{metric}_lo"], row[f"{metric}_hi"]) == pytest.approx(centre, rel=1e-12)
            assert row[f"{metric}_std"] == pytest.approx(x.std(ddof=1))


def test_the_printed_view_shows_mean_and_interval(runs, table):
    lines = format_table(aggregate(runs, metrics=["test/acc"]), width=250).splitlines()
    header = lines[0].split()
    start = header.index("test/acc_mean")
    assert header[start:start + 4] == ["test/acc_mean", "[lo,", "hi]", "test/acc_n"]
    assert not any("n < 2" in line for line in lines)  # five seeds each: every variant has its interval
    for line, (_, row) in zip(lines[1:7], variants(table)):
        assert f"{row['test/acc_mean']:.4g} [{row['test/acc_lo']:.4g}, {row['test/acc_hi']:.4g}]" in line


def test_the_report_reads_the_interval_from_the_results_layer():
    """One home: the names the notebooks and tests read from ablate.report.stats are ablate.results.interval's."""
    from ablate.report import stats as S

    for name in ("B", "SEED", "BOUNDS", "N_EVAL", "kind_of", "bounds_of", "is_percent", "_rng", "widen",
                 "bootstrap_means", "bounded", "interval", "t_quantile_975"):
        assert getattr(S, name) is getattr(I, name), name
