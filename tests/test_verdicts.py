"""Verdicts from hand-made tables: two arms that learned nothing are not evidence, sameness needs an
equivalence margin (TOST), the question's verdict comes from its primary tests only, Holm across them,
and the Answer's payload carries every interval it quotes."""

import json
import math
import re

import pandas as pd
import pytest
from scipy import stats

import ablate.report as R
from ablate.report import answers
from ablate.report import stats as S

REASON = "the experiment the claim is about"


@pytest.fixture(autouse=True)
def no_data(tmp_path, monkeypatch):
    """No exported data (meta.json is read for the budget), nothing left over from another test."""
    monkeypatch.setenv("ABLATE_REPORT_DATA", str(tmp_path / "data"))
    S.take_intervals()


def frame(a, b, metric="test/acc", n_eval=None):
    rows = [{"v": "a", "seed": i, "status": "completed", metric: x} for i, x in enumerate(a)]
    rows += [{"v": "b", "seed": i, "status": "completed", metric: x} for i, x in enumerate(b)]
    df = pd.DataFrame(rows)
    if n_eval is not None:
        df["eval/n_test"] = n_eval
    return df


def effect(a, b, metric="test/acc", n_eval=None):
    return R.compare(frame(a, b, metric, n_eval), metric, {"v": "a"}, {"v": "b"})


def anchor(**kw):
    return R.Anchor("Someone 2020", "a beats b", "a 胜过 b", **kw)


FAR = ([0.90, 0.92, 0.94], [0.50, 0.51, 0.52])  # a measurably above b
CLOSE = ([0.90, 0.92, 0.94], [0.89, 0.91, 0.95])  # no measurable difference
STUCK = ([0.300, 0.302, 0.304], [0.290, 0.291, 0.292])  # measurably different, both at the order-blind level


def test_direction_checks():
    far, close = effect(*FAR), effect(*CLOSE)
    x = anchor()
    assert x.greater(far, primary=True, reason=REASON).verdict == "agrees"
    assert x.less(far, primary=True, reason=REASON).verdict == "disagrees"
    assert x.greater(close, primary=True, reason=REASON).verdict == "inconclusive"
    check = x.greater(far, "copy", primary=True, reason=REASON)
    assert check.p == far.p and check.kind == "outcome" and check.primary and check.reason == REASON
    assert check.evidence.startswith(f"copy: {far.a} vs {far.b}, {far}")
    one = effect([0.9], [0.5])  # one seed each: no interval, never a verdict either way
    assert x.greater(one, primary=True, reason=REASON).verdict == "inconclusive"


def test_below_a_stated_factor():
    """`below(effect, 0.5)`: a claim that a gets under half of b, decided by where the 95 % interval lies
    against x0.5, not against no effect."""
    x, metric = anchor(), "probe/x/grad_l0"
    halved = effect([0.30, 0.35, 0.32, 0.33], [1.0, 1.1, 0.95, 1.05], metric)  # about x0.32
    less = effect([0.80, 0.85, 0.82, 0.83], [1.0, 1.1, 0.95, 1.05], metric)  # about x0.81: less, not halved
    wide = effect([0.2, 1.5, 0.5, 0.9], [1.0, 1.1, 0.95, 1.05], metric)
    assert x.below(halved, 0.5, primary=True, reason=REASON).verdict == "agrees"
    check = x.below(less, 0.5, "first layer", primary=True, reason=REASON)
    assert check.verdict == "disagrees" and x.less(less, primary=True, reason=REASON).verdict == "agrees"
    side, p = less.against(0.5)
    assert check.p == p and check.evidence == f"first layer: {less.a} vs {less.b}, {less}, against ×0.5: p < 0.001"
    assert x.below(wide, 0.5, primary=True, reason=REASON).verdict == "inconclusive"
    assert x.below(effect([0.3], [1.0], metric), 0.5, primary=True, reason=REASON).verdict == "inconclusive"


def test_both_variants_at_the_reference_level_are_not_testable():
    stuck = effect(*STUCK)
    assert stuck.measurable  # the difference is real ...
    x = anchor()
    for check in (x.greater(stuck, "x", level=0.297, primary=True, reason=REASON),
                  x.less(stuck, level=0.297, primary=True, reason=REASON),
                  x.same(stuck, level=0.297, margin=0.05, primary=True, reason=REASON),
                  x.same(stuck, level=0.297, primary=False)):
        assert check.verdict == "not testable"  # ... but between two runs that learned nothing
        assert "neither variant learned the task" in check.evidence
    learned = effect([0.90, 0.92, 0.94], STUCK[1])  # one arm above the level: judged as usual
    assert x.greater(learned, level=0.297, primary=True, reason=REASON).verdict == "agrees"
    assert x.less(learned, level=0.297, primary=True, reason=REASON).verdict == "disagrees"
    assert x.greater(stuck, level=None, primary=True, reason=REASON).verdict == "agrees"  # no level: no such rule


def test_a_setting_without_the_claims_premise_is_not_testable():
    x = anchor()
    check = x.greater(effect(*FAR), "copy", premise=False, why="the task needs no order", primary=True, reason=REASON)
    assert check.verdict == "not testable" and check.evidence.endswith("; the task needs no order")
    with pytest.raises(ValueError, match="why="):
        x.greater(effect(*FAR), premise=False, primary=True, reason=REASON)
    assert x.not_testable("MNIST rows", "no positions to remove", primary=False).verdict == "not testable"


def test_sameness_needs_an_equivalence_margin():
    # a difference well inside ±2 points, measured on a large test set
    inside = effect([0.900, 0.902, 0.901, 0.899, 0.900], [0.899, 0.901, 0.900, 0.900, 0.898], n_eval=100_000)
    assert not inside.measurable and inside.hi - inside.lo < 0.01
    x = anchor()
    agrees = x.same(inside, "learned vs sinusoidal", margin=0.02, primary=True, reason=REASON)
    assert agrees.verdict == "agrees" and agrees.margin == 0.02 and agrees.p == inside.tost(0.02) < 0.05
    assert "inside the margin ±2 points" in agrees.evidence
    # no margin: no difference found is not sameness
    assert x.same(inside, primary=True, reason=REASON).verdict == "inconclusive"
    # the interval straddles the margin: inconclusive, with the TOST p-value
    straddle = x.same(inside, margin=0.001, primary=True, reason=REASON)
    assert straddle.verdict == "inconclusive" and straddle.p == inside.tost(0.001) >= 0.05
    # the interval wholly outside the margin: disagrees (without a margin: excludes 0)
    far = effect(*FAR)
    out = x.same(far, margin=0.05, primary=True, reason=REASON)
    assert far.lo > 0.05 and out.verdict == "disagrees" and out.p == far.beyond(0.05) < 0.05
    assert x.same(far, primary=True, reason=REASON).verdict == "disagrees"
    # a wide interval (few seeds, noisy) inside which the margin lies: inconclusive either way
    noisy = effect(*CLOSE)
    assert x.same(noisy, margin=0.02, primary=True, reason=REASON).verdict == "inconclusive"


def test_tost_on_a_welch_effect_matches_the_90_percent_interval():
    d = effect([10.0, 11.0, 12.0, 11.5], [10.5, 11.2, 11.8, 11.0], metric="val/step_solved")
    assert d.method == "welch"
    for margin in (0.5, 1.0, 1.5, 3.0):
        q = stats.t.ppf(0.95, d._dof) * d._se  # the 90 % interval inside ±margin <=> TOST p < 0.05
        assert (d.tost(margin) < 0.05) == (abs(d.diff) + q < margin)


def test_primary_checks_need_a_reason_and_a_declared_role():
    x = anchor()
    with pytest.raises(ValueError, match="reason="):
        x.greater(effect(*FAR), primary=True)
    with pytest.raises(TypeError):
        x.greater(effect(*FAR))  # primary= is required
    with pytest.raises(ValueError, match="kind="):
        R.Anchor("X", "y", kind="speculation")


@pytest.mark.parametrize("verdicts, overall", [
    (["agrees", "agrees"], "agrees"),
    (["disagrees"], "disagrees"),
    (["not testable", "not testable"], "not testable"),
    (["inconclusive"], "inconclusive"),
    (["agrees", "disagrees", "inconclusive"], "partly disagrees"),
    (["agrees", "inconclusive"], "agrees in part, the rest inconclusive"),
    (["agrees", "not testable"], "agrees in part, the rest not testable here"),  # issue 37: not "inconclusive"
    (["agrees", "not testable", "inconclusive"], "agrees in part, the rest inconclusive"),
    (["disagrees", "inconclusive"], "disagrees in part, the rest inconclusive"),
    (["disagrees", "not testable"], "disagrees in part, the rest not testable here"),
    (["disagrees", "not testable", "inconclusive"], "disagrees in part, the rest inconclusive"),
    (["not testable", "inconclusive"], "inconclusive"),
    ([], "inconclusive"),
])
def test_overall_verdict_rules(verdicts, overall):
    assert answers.overall(verdicts) == overall


def ask(checks, **kw):
    q = R.Question("q9", "Q9 · test", "Does a beat b?", "a 胜过 b 吗？", anchors=[anchor()], title_zh="Q9 · 测试")
    pairs = {k: (f"{k} en", f"{k} 中") for k in ("plain", "mechanism", "outcome", "changes")}
    return q.answer(checks=checks, **{**pairs, **kw})


def test_supporting_checks_never_change_the_verdict():
    x, y = anchor(), anchor(kind="mechanism")
    primaries = [x.greater(effect(*FAR), primary=True, reason=REASON),
                 y.greater(effect(*CLOSE), primary=True, reason=REASON)]
    supports = [[], [x.less(effect(*FAR), primary=False)], [x.greater(effect(*FAR), primary=False)] * 3,
                [y.judge(False, "a probe says no", primary=False), y.judge(True, "another says yes", p=0.001, primary=False)]]
    verdicts = {ask(primaries + s)["verdict"] for s in supports}
    assert verdicts == {"agrees in part, the rest inconclusive"}
    only_support = ask([x.less(effect(*FAR), primary=False)])  # no primary test: nothing to conclude
    assert only_support["verdict"] == "inconclusive"
    payload = ask(supports[1] + primaries)  # primary tests are listed first
    assert [c["primary"] for c in payload["checks"]] == [True, True, False]


def test_holm_turns_a_weak_agreement_inconclusive():
    x = anchor()
    one = ask([x.judge(True, "e1", p=0.03, primary=True, reason=REASON)])
    assert one["verdict"] == "agrees" and one["checks"][0]["p_holm"] == pytest.approx(0.03)
    two = ask([x.judge(True, "e1", p=0.03, primary=True, reason=REASON),
               x.judge(True, "e2", p=0.04, primary=True, reason=REASON),
               x.judge(True, "e3", p=0.5, primary=False)])  # supporting: not in the family
    # m = 2: 0.03 x 2 = 0.06, 0.04 x 1 -> 0.06: both >= 0.05
    assert [c["p_holm"] for c in two["checks"]] == [pytest.approx(0.06), pytest.approx(0.06), None]
    assert [c["verdict"] for c in two["checks"]] == ["inconclusive", "inconclusive", "agrees"]
    assert "Holm-adjusted over 2 primary tests p = 0.06" in two["checks"][0]["evidence"]
    assert two["verdict"] == "inconclusive" and "2 verdicts moved to inconclusive" in two["multiplicity"]["en"]
    assert "Holm–Bonferroni" in two["multiplicity"]["en"] and "Holm–Bonferroni" in two["multiplicity"]["zh"]
    strong = ask([x.judge(True, "e1", p=0.001, primary=True, reason=REASON),
                  x.judge(False, "e2", p=0.02, primary=True, reason=REASON),
                  x.judge(None, "e3", p=0.9, primary=True, reason=REASON)])
    # sorted: 0.001 x 3, 0.02 x 2 = 0.04, 0.9 x 1 -> all stand
    assert [c["p_holm"] for c in strong["checks"]] == [pytest.approx(0.003), pytest.approx(0.04), pytest.approx(0.9)]
    assert strong["verdict"] == "partly disagrees"


def test_the_payload():
    x = anchor(wording="we suspect")
    d = effect(*FAR, n_eval=500)
    f = R.learned(pd.DataFrame({"status": ["completed"] * 3, "val/acc_best": [1.0, 1.0, 0.105], "ref/val/chance": 0.1}))
    plain = (f"a wins by {d}; {f} learned.", f"a 领先 {d}；{f} 学会了。")
    payload = ask([x.greater(d, "copy", primary=True, reason=REASON)], plain=plain, figure="/x/q9_acc.png",
                  details=lambda lang: ["more", "", "of it"] if lang == "en" else ["更多", "细节"],
                  figures=["/x/q9_a.png", "/x/q9_b.png"])
    assert set(payload) == {"key", "title", "title_zh", "question", "question_zh", "status", "plain", "mechanism",
                            "outcome", "changes", "details", "verdict", "checks", "multiplicity", "intervals", "figure",
                            "figures", "sweeps", "budget", "side", "short", "at_scale", "brief"}
    assert payload["brief"] == {"en": "", "zh": ""}  # no template: the findings show the short answer
    # details: each language's own sentences, empty ones left out, joined as the language joins them
    assert payload["details"] == {"en": "more of it", "zh": "更多细节"}
    assert payload["at_scale"] == {"en": "", "zh": ""}  # no at_scale= given: the build's default scale note
    # no short= given: the answers table shows the plain answer's first sentence
    assert payload["short"] == {"en": plain[0], "zh": plain[1]}
    assert payload["status"] == "answered" and payload["verdict"] == "agrees"
    assert payload["plain"] == {"en": plain[0], "zh": plain[1]} and payload["question_zh"] == "a 胜过 b 吗？"
    assert (payload["figure"], payload["figures"]) == ("q9_acc.png", ["q9_a.png", "q9_b.png"])
    check = payload["checks"][0]
    assert set(check) == {"cite", "cite_zh", "claim", "claim_zh", "wording", "kind", "verdict", "evidence", "evidence_zh",
                          "primary", "reason", "reason_zh", "p", "p_holm", "margin", "tutorial"}
    assert (check["wording"], check["claim_zh"], check["reason"]) == ("we suspect", "a 胜过 b", REASON)
    json.dumps(payload, allow_nan=False)  # strict JSON: no NaN anywhere
    # every Estimate / Effect / Fraction formatted into the answer is in `intervals`
    quoted = {(i["kind"], i["mean"]) for i in payload["intervals"]}
    assert {("accuracy", round(d.a.mean, 10)), ("accuracy", round(d.b.mean, 10)), ("difference", round(d.diff, 10)),
            ("fraction", round(2 / 3, 10))} <= quoted
    for i in payload["intervals"]:
        if i["kind"] in ("accuracy", "fraction"):
            assert 0 <= i["lo"] <= i["mean"] <= i["hi"] <= 1
    assert ask([])["intervals"] == []  # drained by the answer that quoted them
    with pytest.raises(TypeError, match="plain="):
        ask([], plain="only English")
    with pytest.raises(TypeError, match="missing changes="):
        R.Question("q", "t", "x").answer(plain=("a", "b"), mechanism=("", ""), outcome=("", ""))


def test_budget_comes_from_the_exported_sweeps(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.json").write_text(json.dumps({"sweeps": {"s1": {"budget": "quick"}, "s2": {"budget": "full"},
                                                           "other": {"budget": "smoke"}}}))
    q = R.Question("q", "t", "x", sweeps=["s1", "s2", "missing"])
    pairs = {k: ("", "") for k in ("mechanism", "outcome", "changes")}
    assert q.answer(plain=("a", "b"), **pairs)["budget"] == "full, quick"


def test_the_older_notebooks_calls_are_gone():
    """No deprecated shims: every check declares its role, and the answer takes its parts by keyword."""
    x = anchor()
    assert not any(hasattr(x, name) for name in ("expect_greater", "expect_less", "expect_same"))
    assert not hasattr(answers, "LEGACY_REASON")
    with pytest.raises(TypeError):
        x.judge(None, "unclear")  # primary= is required
    q = R.Question("q1", "Q1", "Word order?", anchors=[x], sweeps=["pos_enc"])
    with pytest.raises(TypeError):
        q.answer("It matters.", [x.judge(True, "e", primary=False)], "fig.png")


SOLVED_BOTH = ([1.0, 1.0, 0.998, 1.0, 1.0], [1.0, 0.999, 1.0, 1.0, 1.0])  # both arms solve the task


def test_two_arms_at_the_ceiling_are_not_testable():
    """Both accuracies at or above SOLVED: no room to differ, for every kind of check, unless the caller opts out."""
    top = effect(*SOLVED_BOTH, n_eval=100_000)
    x = anchor()
    for check in (x.greater(top, "copy, 8 tokens", primary=True, reason=REASON, **ZH),
                  x.less(top, "copy, 8 tokens", level=0.3, primary=True, reason=REASON, **ZH),
                  x.same(top, "copy, 8 tokens", margin=0.02, primary=True, reason=REASON, **ZH),
                  x.same(top, primary=False)):
        assert check.verdict == "not testable", check.evidence
        assert "both solve the task (≥ 99 %): no room to differ" in check.evidence
        assert "两者都解决了这个任务（≥ 99%）" in check.evidence_zh
        assert numbers(check.evidence_zh) == numbers(check.evidence)
    assert x.same(top, margin=0.02, ceiling=False, primary=True, reason=REASON).verdict == "agrees"  # opted out
    assert x.greater(top, ceiling=False, primary=True, reason=REASON).verdict == "inconclusive"
    # one arm below the ceiling: judged as usual
    assert x.greater(effect(SOLVED_BOTH[0], [0.95, 0.96, 0.94, 0.95, 0.96]), primary=True, reason=REASON).verdict == "agrees"
    # not an accuracy (a fraction from a probe near 1): no ceiling rule
    share = effect([0.999, 1.0, 1.0], [0.995, 0.996, 0.994], metric="probe/final/onehot_frac")
    assert x.greater(share, primary=True, reason=REASON).verdict == "agrees"


def test_two_diverged_arms_are_not_testable():
    df = pd.DataFrame([{"v": v, "seed": i, "status": "diverged", "val/acc_best": math.nan}
                       for v in "ab" for i in range(3)])
    both = R.compare(df, "val/acc_best", {"v": "a"}, {"v": "b"})
    assert both.a.n == both.b.n == 0 and both.a.n_diverged == both.b.n_diverged == 3
    x = anchor()
    for check in (x.greater(both, primary=True, reason=REASON), x.same(both, margin=0.02, primary=True, reason=REASON)):
        assert check.verdict == "not testable" and "both variants diverged" in check.evidence
        assert "两个变体都发散了" in check.evidence_zh
    one = pd.concat([df[df["v"] == "a"], frame([], [0.9, 0.91, 0.92], "val/acc_best")])
    # one arm diverged, the other learned: no rule makes it untestable (no interval: inconclusive)
    assert x.greater(R.compare(one, "val/acc_best", {"v": "a"}, {"v": "b"}), primary=True,
                     reason=REASON).verdict == "inconclusive"


def test_a_claim_whose_favoured_arm_did_not_learn_can_be_declared_not_testable():
    far = effect(*FAR)
    x = anchor()
    check = x.greater(far, "copy, 8 tokens", learned=False, why="59.7 % at the training length",
                      why_zh="训练长度上为 59.7 %", primary=True, reason=REASON, **ZH)
    assert check.verdict == "not testable" and check.p is None
    assert check.evidence.endswith("; the favoured variant did not solve the task at the training length: "
                                   "59.7 % at the training length")
    assert check.evidence_zh.endswith("；论断看好的变体在训练长度上没有解决这个任务：训练长度上为 59.7 %")
    assert x.less(far, learned=False, primary=False).verdict == "not testable"
    assert x.greater(far, learned=True, primary=True, reason=REASON).verdict == "agrees"


def test_not_run_yet():
    q = R.Question("q4", "Q4", "Residuals?", "残差？", anchors=[anchor(), anchor(kind="mechanism")])
    payload = q.not_run_yet("not run yet — run `make sweep-residual`")
    assert payload["status"] == payload["verdict"] == "not run yet"
    assert payload["plain"] == {"en": "not run yet — run `make sweep-residual`", "zh": "尚未运行 — 请运行 `make sweep-residual`"}
    assert [c["verdict"] for c in payload["checks"]] == ["not run yet"] * 2
    assert [c["kind"] for c in payload["checks"]] == ["outcome", "mechanism"]


def test_details_in_one_language_only_are_refused():
    """The Chinese page shows the details in Chinese: a plain English string is refused, naming the form to use."""
    with pytest.raises(TypeError, match="details= takes a function of the language"):
        ask([anchor().greater(effect(*FAR), primary=True, reason=REASON)], details="English only")


def test_the_answer_cell_shows_the_plain_answer_first():
    x = anchor()
    data = ask([x.greater(effect(*FAR), primary=True, reason=REASON), x.less(effect(*FAR), primary=False)],
               details=lambda lang: "d")
    md = answers.markdown(data)
    order = [md.index(s) for s in ("**Answer.** plain en", "plain 中", "**Mechanism.** mechanism en",
                                   "**Outcome.** outcome en", "**Published anchors** — overall: **agrees**",
                                   f"Why this test: {REASON}", "**Supporting evidence**", "**Multiplicity.**",
                                   "**What would change the answer.** changes en", "**Details.** d")]
    assert order == sorted(order)
    assert not math.isnan(data["checks"][0]["p"])


# ------------------------------------------------------------------ the same evidence in the tutorial's language

NUMBER = re.compile(r"[−+-]?\d+(?:\.\d+)?(?:e[−+-]?\d+)?")


def numbers(text):
    return NUMBER.findall(text)


def latin_words(text):
    """The words of two or more Latin letters in a text (the Chinese evidence may keep TOST and Holm)."""
    return set(re.findall(r"[A-Za-z]{2,}", text)) - {"TOST", "Holm"}


ZH = {"what_zh": "复制任务，8 个词", "reason_zh": "论断所说的实验"}


def test_chinese_evidence_carries_the_same_numbers_and_the_rules_clauses():
    """Every kind of check gives `evidence_zh`: the English evidence's numbers, in the same order, with the
    verdict rule's clause (not testable, TOST, no margin) in Chinese and no English word left."""
    x = anchor()
    inside = effect([0.900, 0.902, 0.901, 0.899, 0.900], [0.899, 0.901, 0.900, 0.900, 0.898], n_eval=100_000)
    grads = effect([0.4, 0.5, 0.45], [1.9, 2.1, 2.0], metric="probe/init/grad_ratio")  # a ratio, on the log scale
    cases = [  # (check, English clause, its Chinese twin)
        (x.greater(effect(*FAR, n_eval=500), "copy, 8 tokens", primary=True, reason=REASON, **ZH), " vs ", " 对 "),
        (x.less(grads, "copy, 8 tokens", primary=True, reason=REASON, **ZH), "×", "×"),
        (x.greater(effect(*STUCK), "copy, 8 tokens", level=0.297, primary=True, reason=REASON, **ZH),
         "neither variant learned the task (both at or below the reference level 29.7 % + 1 point)",
         "两个变体都没有学会这个任务（都没有比参考水平 29.7% 高出 1 个百分点以上），无法在此检验"),
        (x.greater(effect(*FAR), "copy, 8 tokens", premise=False, why="the task needs no order", why_zh="任务不需要词序",
                   primary=True, reason=REASON, **ZH), "; the task needs no order", "；任务不需要词序"),
        (x.same(inside, "copy, 8 tokens", margin=0.02, primary=True, reason=REASON, **ZH),
         "inside the margin ±2 points (TOST p", "落在等价界限 ±2 个百分点 以内（TOST p"),
        (x.same(inside, "copy, 8 tokens", margin=0.001, primary=True, reason=REASON, **ZH),
         "not shown inside the margin ±0.1 points (TOST p", "未能证明落在等价界限 ±0.1 个百分点 以内（TOST p"),
        (x.same(effect(*FAR), "copy, 8 tokens", margin=0.05, primary=True, reason=REASON, **ZH),
         "the interval lies wholly outside the margin ±5 points", "区间完全落在等价界限 ±5 个百分点 之外"),
        (x.same(inside, "copy, 8 tokens", primary=True, reason=REASON, **ZH),
         "no equivalence margin was stated", "没有事先给出等价界限"),
        (x.same(grads, "copy, 8 tokens", margin=2.0, primary=False, what_zh=ZH["what_zh"]), "margin ×/÷2", "等价界限 ×/÷2"),
        (x.greater(effect([0.9], [0.5]), "copy, 8 tokens", primary=False, what_zh=ZH["what_zh"]),
         "(1 run in an arm, no interval)", "（一组只有 1 次运行，无区间）"),
        (x.not_testable("copy, 8 tokens", "no causal run", what_zh=ZH["what_zh"], why_zh="没有因果掩码的运行",
                        primary=True, reason=REASON, reason_zh=ZH["reason_zh"]), ": no causal run", "：没有因果掩码的运行"),
        (x.judge(True, "share of a layer 66.7 % at 4 × d", evidence_zh="一层中的占比 66.7 %（4 × d）", p=0.01,
                 primary=True, reason=REASON, reason_zh=ZH["reason_zh"]), "share", "占比"),
    ]
    for check, en, zh in cases:
        assert en in check.evidence and zh in check.evidence_zh, (check.evidence, check.evidence_zh)
        assert numbers(check.evidence_zh) == numbers(check.evidence), (check.evidence, check.evidence_zh)
        assert not latin_words(check.evidence_zh.replace("4 × d", "")), check.evidence_zh
        assert check.reason_zh == (ZH["reason_zh"] if check.primary else "")
        assert check.as_dict()["evidence_zh"] == check.evidence_zh and check.as_dict()["reason_zh"] == check.reason_zh
    # a check written without its Chinese words still gives Chinese evidence around the English label
    bare = x.greater(effect(*FAR), "copy", primary=True, reason=REASON)
    assert bare.evidence_zh.startswith("copy：") and " 对 " in bare.evidence_zh and bare.reason_zh == ""
    assert x.judge(None, "only English", primary=False).evidence_zh == "only English"


def test_holms_note_on_a_check_has_its_chinese_twin():
    x = anchor()
    two = ask([x.judge(True, "e 1", evidence_zh="证据 1", p=0.03, primary=True, reason=REASON, reason_zh="理由"),
               x.judge(False, "e 2", evidence_zh="证据 2", p=0.04, primary=True, reason=REASON, reason_zh="理由")])
    first, second = two["checks"]
    assert first["evidence"].endswith("; Holm-adjusted over 2 primary tests p = 0.06 ≥ 0.05: inconclusive (was agrees)")
    assert first["evidence_zh"] == "证据 1；对 2 个主要检验做 Holm 校正后 p = 0.06 ≥ 0.05：证据不足（原为成立）"
    assert second["evidence_zh"].endswith("证据不足（原为不成立）")
    for c in (first, second):
        assert numbers(c["evidence_zh"]) == numbers(c["evidence"]) and c["reason_zh"] == "理由"
    missing = R.Question("q4", "Q4", "Residuals?", "残差？", anchors=[anchor()]).not_run_yet(
        "not run yet — run `make sweep-residual`")
    assert missing["checks"][0]["evidence_zh"] == "尚未运行 — 请运行 `make sweep-residual`"


def test_a_short_answer_is_one_sentence_of_at_most_300_characters():
    """Q.answer(short=...) is what the findings' answers table shows; longer than SHORT_LIMIT is refused with a
    line saying how long it is; without it the plain answer's first sentence is taken, cut at the limit."""
    from ablate.report.answers import SHORT_LIMIT, first_sentence

    x = anchor()
    given = ask([x.greater(effect(*FAR), primary=True, reason=REASON)], short=("a wins by 41 points.", "a 领先 41 个百分点。"))
    assert given["short"] == {"en": "a wins by 41 points.", "zh": "a 领先 41 个百分点。"}
    with pytest.raises(ValueError, match=r"the en answer has 301 characters; keep it to 300"):
        ask([x.greater(effect(*FAR), primary=True, reason=REASON)], short=("x" * 301, "短"))
    assert first_sentence("One. Two. Three.") == "One."
    assert first_sentence("第一句。第二句。", "zh") == "第一句。"
    long = "word " * 100
    cut = first_sentence(long)
    assert len(cut) <= SHORT_LIMIT and cut.endswith("word…")  # at a word boundary
    assert first_sentence("As Haviv et al. 2022 found. Then more.") == "As Haviv et al. 2022 found."
