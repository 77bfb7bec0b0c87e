"""Issue 24's statistics, from hand-made tables: the headline verdict comes from the tutorial's claim
(a side anchor that is not testable keeps its own row and never docks it); time to solve with unsolved
runs censored, against scipy's rank and log-rank tests; differences paired on one evaluation set
against the closed form."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import ablate.report as R
from ablate.report import stats as S

REASON = "the experiment the claim is about"


@pytest.fixture(autouse=True)
def no_data(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_REPORT_DATA", str(tmp_path / "data"))
    S.take_intervals()


def runs(arms: dict[str, list], metric: str = "test/acc") -> pd.DataFrame:
    return pd.DataFrame([{"v": v, "seed": i, "status": "completed", metric: x}
                         for v, values in arms.items() for i, x in enumerate(values)])


def solve_frame(arms: dict[str, list]) -> pd.DataFrame:
    """Each run: the step it solved at, or None (never, within 630 steps)."""
    return pd.DataFrame([{"v": v, "seed": i, "status": "completed", "global_step": 630,
                          "val/step_solved": math.nan if t is None else t}
                         for v, times in arms.items() for i, t in enumerate(times)])


# ------------------------------------------------------------------ the headline and the side anchors


def test_the_headline_comes_from_the_tutorials_claim_and_a_side_anchor_gets_its_own_row():
    """A hand-made question: the tutorial's claim agrees (a measurably above b); a side anchor's primary
    test has both arms at the ceiling (not testable). Before, overall() of all primary tests gave 'agrees
    in part, the rest inconclusive'; now the headline is the claim's 'agrees', and the side anchor keeps
    'not testable' with its reason, in a row of its own."""
    df = runs({"a": [0.90, 0.92, 0.94], "b": [0.50, 0.51, 0.52], "c": [0.995, 1.0, 1.0], "d": [1.0, 0.995, 1.0]})
    claim = R.Anchor("Tutorial", "a beats b", "a 胜过 b", tutorial=True)
    side = R.Anchor("Vaswani et al. 2017, Table 3 (B)", "c beats d", "c 胜过 d")
    q = R.Question("qx", "Qx", "?", "？", anchors=[claim, side], sweeps=[])
    checks = [claim.greater(R.compare(df, "test/acc", {"v": "a"}, {"v": "b"}), "ab", primary=True, reason=REASON),
              side.greater(R.compare(df, "test/acc", {"v": "c"}, {"v": "d"}), "cd", primary=True, reason=REASON)]
    assert R.overall([c.verdict for c in checks]) == R.AGREES_IN_PART_UNTESTED  # the old rule, for the record
    data = q.answer(plain=("p", "p"), mechanism=("", ""), outcome=("", ""), changes=("", ""), checks=checks)
    assert data["verdict"] == R.AGREES
    (row,) = data["side"]
    assert row["cite"] == "Vaswani et al. 2017, Table 3 (B)" and row["verdict"] == R.NOT_TESTABLE
    assert "no room to differ" in row["why"] and "没有相差的余地" in row["why_zh"]
    assert data["multiplicity"]["en"].startswith("The tutorial's claim: One primary test carries a p-value")


def test_a_side_anchor_never_docks_the_claim_through_holm():
    """Two families: the claim's p = 0.03 stays significant beside a side anchor's test at p = 0.04. One
    Holm family of both (the old rule) adjusts the smaller to 2 x 0.03 = 0.06 >= 0.05 and moves both to
    inconclusive."""
    claim = R.Anchor("Tutorial", "a", "a", tutorial=True)
    side = R.Anchor("Paper", "b", "b")
    checks = [claim.judge(True, "claim", p=0.03, primary=True, reason=REASON),
              side.judge(True, "side", p=0.04, primary=True, reason=REASON)]
    fixed, note = R.answers.correct(checks)
    assert [c.verdict for c in fixed] == [R.AGREES, R.AGREES]
    assert [c.p_holm for c in fixed] == [0.03, 0.04]
    unmarked = [R.Anchor("Tutorial", "a", "a").judge(True, "claim", p=0.03, primary=True, reason=REASON),
                R.Anchor("Paper", "b", "b").judge(True, "side", p=0.04, primary=True, reason=REASON)]
    old, _ = R.answers.correct(unmarked)
    assert [c.verdict for c in old] == [R.INCONCLUSIVE, R.INCONCLUSIVE]  # 0.06 and 0.06 (Holm, one family)


# ------------------------------------------------------------------ time to solve


def test_the_issues_lookup_example_against_scipys_exact_rank_test():
    """One head solves in {251, 314, 314, 377, never}, two in {62, 62, 62, 125, 188} (the issue's numbers):
    every two-head run is faster than every one-head run, so the exact two-sided p is 2 / C(10, 5) =
    2 / 252 (closed form), what scipy's mannwhitneyu gives with the failed run as the slowest."""
    df = solve_frame({"one": [251, 314, 314, 377, None], "two": [62, 62, 62, 125, 188]})
    one, two = R.time_to_solve(df, {"v": "one"}), R.time_to_solve(df, {"v": "two"})
    assert one.steps == (251, 314, 314, 377, 630) and one.solved == (True, True, True, True, False)
    test = R.solve_test(two, one)
    assert test.method == "exact" and test.valid
    assert test.p == pytest.approx(2 / math.comb(10, 5), rel=1e-12)
    assert test.p == pytest.approx(stats.mannwhitneyu([62, 62, 62, 125, 188], [251, 314, 314, 377, 10**9],
                                                      method="exact").pvalue, rel=1e-12)
    assert test.u == 0 and test.sign == -1  # two heads the faster
    expected_logrank = stats.logrank(stats.CensoredData(uncensored=[62, 62, 62, 125, 188]),
                                     stats.CensoredData(uncensored=[251, 314, 314, 377], right=[630])).pvalue
    assert test.p_logrank == pytest.approx(expected_logrank, rel=1e-12)
    check = R.Anchor("Tutorial", "two heads solve faster", tutorial=True).faster(
        test, "lookup, steps to solve", primary=True, reason=REASON)
    assert check.verdict == R.AGREES and check.p == test.p
    assert "never, censored at 630" in check.evidence and "median 314 steps" in check.evidence


def test_ties_and_censoring_against_scipys_permutation_distribution():
    """Ties among solved runs and several censored runs: the p-value is the exact permutation p of
    Mann-Whitney's U with censored runs tied last, scipy's PermutationMethod on the same ranks."""
    a, b = [62, 125, None, None], [62, 62, 125, 188, None]
    df = solve_frame({"a": a, "b": b})
    test = R.solve_test(R.time_to_solve(df, {"v": "a"}), R.time_to_solve(df, {"v": "b"}))
    big = 10**9
    reference = stats.mannwhitneyu([t or big for t in a], [t or big for t in b],
                                   method=stats.PermutationMethod(n_resamples=np.inf))
    assert test.u == reference.statistic and test.p == pytest.approx(reference.pvalue, rel=1e-12)
    assert test.sign == 0  # p well above 0.05


def test_no_ties_no_censoring_equals_scipys_exact_mann_whitney():
    a, b = [10, 20, 30, 45, 50, 70], [15, 60, 80, 90, 95, 99, 120]
    df = solve_frame({"a": a, "b": b})
    test = R.solve_test(R.time_to_solve(df, {"v": "a"}), R.time_to_solve(df, {"v": "b"}))
    reference = stats.mannwhitneyu(a, b, method="exact")
    assert test.u == reference.statistic and test.p == pytest.approx(reference.pvalue, rel=1e-12)


def test_every_run_solved_at_the_first_check_is_not_testable_and_a_short_censored_run_has_no_rank():
    df = solve_frame({"a": [62, 62, 62], "b": [62, 62, 62]})
    test = R.solve_test(R.time_to_solve(df, {"v": "a"}), R.time_to_solve(df, {"v": "b"}))
    assert test.floor and test.p == 1.0
    check = R.Anchor("T", "a faster", tutorial=True).faster(test, primary=True, reason=REASON)
    assert check.verdict == R.NOT_TESTABLE
    short = pd.DataFrame([{"v": "a", "status": "completed", "global_step": 100, "val/step_solved": math.nan},
                          {"v": "b", "status": "completed", "global_step": 630, "val/step_solved": 300.0}])
    odd = R.solve_test(R.time_to_solve(short, {"v": "a"}), R.time_to_solve(short, {"v": "b"}))
    assert not odd.valid and odd.p is None  # stopped at 100 unsolved: it may have solved by 300 or not


# ------------------------------------------------------------------ paired differences


def test_paired_difference_against_the_closed_form():
    """d_s = a_s - b_s over the seeds both arms have: mean, t interval with n - 1 degrees of freedom,
    two-sided p, computed here by hand (the unpaired arm c's seed 3 has no partner and is left out)."""
    a = [0.81, 0.84, 0.79, 0.86]
    b = [0.78, 0.80, 0.78, 0.82, 0.99]
    df = runs({"a": a, "b": b})
    d = np.array(a) - np.array(b[:4])
    n, mean, sd = len(d), d.mean(), d.std(ddof=1)
    se = sd / math.sqrt(n)
    t = mean / se
    half = stats.t.ppf(0.975, n - 1) * se
    p = 2 * stats.t.sf(abs(t), n - 1)
    e = R.paired(df, "test/acc", {"v": "a"}, {"v": "b"})
    assert e.method == "paired"
    assert e.diff == pytest.approx(mean, abs=1e-15)
    assert (e.lo, e.hi) == (pytest.approx(mean - half, abs=1e-15), pytest.approx(mean + half, abs=1e-15))
    assert e.p == pytest.approx(p, rel=1e-10)
    assert e.p == pytest.approx(stats.ttest_rel(a, b[:4]).pvalue, rel=1e-10)


def test_pairing_removes_the_shared_evaluation_noise_that_welch_adds_twice():
    """Two arms scored on one evaluation set of 500 examples, each seed's luck shared: Welch with each
    arm's evaluation variance added sees no difference, the paired test does (the issue's point: that
    term was 56 % of the variance of Table 3 (E))."""
    a = [0.70, 0.75, 0.80, 0.85, 0.90]
    b = [x - d for x, d in zip(a, (0.020, 0.026, 0.018, 0.024, 0.022))]
    df = runs({"a": a, "b": b})
    df["eval/n_test"] = 500
    welch = R.compare(df, "test/acc", {"v": "a"}, {"v": "b"})
    pair = R.paired(df, "test/acc", {"v": "a"}, {"v": "b"})
    assert welch.p > 0.5
    assert pair.method == "paired" and pair.diff == pytest.approx(0.022) and pair.lo > 0.015 and pair.p < 1e-4


def test_differences_without_spread_give_no_paired_p_value():
    """Every seed's difference the same (a step of the evaluation's resolution apart, as accuracies on one
    set often are): a zero variance is no evidence, so the unpaired estimate is given (it was p = 1.8e-15)."""
    df = runs({"a": [0.93, 0.95], "b": [0.91, 0.93]})
    df["eval/n_test"] = 500
    e = R.paired(df, "test/acc", {"v": "a"}, {"v": "b"})
    assert e.method == "welch" and e.p > 0.05


def test_a_seed_twice_in_an_arm_is_refused_and_estimates_are_of_the_paired_runs():
    df = runs({"a": [0.1, 0.9], "b": [0.5]})
    df.loc[1, "seed"] = 0  # arm a has seed 0 twice (two learning rates, say)
    with pytest.raises(ValueError, match="occurs twice"):
        R.paired(df, "test/acc", {"v": "a"}, {"v": "b"})
    df = runs({"a": [0.8, 0.82, 0.84], "b": [0.7, 0.71, 0.75, 0.99]})  # b's seed 3 has no partner
    e = R.paired(df, "test/acc", {"v": "a"}, {"v": "b"})
    assert e.b.n == 3 and e.b.mean == pytest.approx((0.7 + 0.71 + 0.75) / 3)


def test_a_log_scale_metric_is_paired_as_a_ratio():
    """Gradients: the ratio a / b from the mean of log differences, against the closed form."""
    a, b = [2.0, 4.1, 7.9, 1.1], [1.0, 2.0, 4.2, 0.5]
    df = runs({"a": a, "b": b}, metric="probe/init/grad_l0")
    e = R.paired(df, "probe/init/grad_l0", {"v": "a"}, {"v": "b"})
    logs = np.log(np.array(a) / np.array(b))
    assert e.ratio and e.diff == pytest.approx(math.exp(logs.mean()))
    half = stats.t.ppf(0.975, 3) * logs.std(ddof=1) / 2
    assert (e.lo, e.hi) == (pytest.approx(math.exp(logs.mean() - half)), pytest.approx(math.exp(logs.mean() + half)))
    assert e.sign == 1


def test_a_diverged_run_is_never_solved_and_ranks_last():
    """A run that diverged at step 40 has not solved the task: it counts with the slowest (before, it
    was left out and its unstable arm looked faster)."""
    df = pd.DataFrame([{"v": "x", "seed": 0, "status": "completed", "global_step": 630, "val/step_solved": 100.0},
                       {"v": "x", "seed": 1, "status": "completed", "global_step": 630, "val/step_solved": 100.0},
                       {"v": "x", "seed": 2, "status": "diverged", "global_step": 40, "val/step_solved": math.nan},
                       {"v": "x", "seed": 3, "status": "diverged", "global_step": 40, "val/step_solved": math.nan},
                       *({"v": "y", "seed": i, "status": "completed", "global_step": 630, "val/step_solved": 200.0}
                         for i in range(4))])
    x, y = R.time_to_solve(df, {"v": "x"}), R.time_to_solve(df, {"v": "y"})
    assert x.n == 4 and x.k == 2 and "2 diverged" in str(x) and not math.isfinite(x.median)
    test = R.solve_test(x, y)
    assert test.valid and test.sign == 0 and test.u == 8  # two faster, two never: no winner
