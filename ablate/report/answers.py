"""Questions, published anchors, verdicts and Answer cells.

A notebook declares its question and the published results it is compared with once, at the top:

    BAG = R.Anchor("Vaswani et al. 2017, §3.5", "without positions, attention is blind to word order",
                   "没有位置编码，注意力看不到词序", kind="outcome")
    Q = R.question("q1", anchors=[BAG])   # title, question and sweeps: reports/q1_word_order.yaml

and ends with a cell tagged `answer`:

    Q.answer(record=dict(no_pe=none_bi, learned_pe=learned_bi, level=lvl), details="...",
             checks=[BAG.less(effect, "copy, validation", level=lvl, primary=True, reason="..."), ...],
             figure=R.savefig(fig, "q1_copy"))

whose prose is the question's templates, reports/prose/en/<key>.md and reports/prose/zh/<key>.md, written
from the record (prose.py); an older cell passes (English, Chinese) pairs, plain=(en, zh) and so on.

(or `Q.not_run_yet(S)` when a sweep is missing). The cell shows the answer as Markdown and carries the
same content as JSON (ANSWER_MIME), which `ablate report build` reads back for index.html and
FINDINGS.md / FINDINGS.zh.md.

Each check's verdict is computed, never typed:

    anchor.greater(effect, what, primary=, reason=)   the claim says a > b: agrees when the 95 % interval
    anchor.less(...)                                  of a - b lies above 0 (below, for less), disagrees
                                                      when on the other side, else inconclusive
    anchor.same(effect, what, margin=m, ...)          a claim of sameness: agrees only when the TOST
                                                      p-value against ±m is < 0.05; disagrees when the
                                                      95 % interval lies wholly outside ±m (no margin:
                                                      excludes 0); otherwise inconclusive. Without a
                                                      margin it can never agree.
    anchor.faster(R.solve_test(a, b), what, ...)      the claim says a solves the task in fewer steps than
                                                      b: the rank test on time to solve (unsolved runs
                                                      censored) decides; one time for every run: not testable
    anchor.judge(ok, evidence, p=, ...)               any other rule: True / False / None
    anchor.not_testable(what, why, ...)               the setting cannot test the claim
    ..., level=R.level(df, where)                     both arms at or below the task's reference level
                                                      (+ LEVEL_MARGIN): not testable, since two runs
                                                      that learned nothing are no evidence either way
    ..., premise=False, why="..."                     the setting does not realise the claim's premise
    ..., learned=False, why="..."                     the arm the claim favours (a for greater, b for less)
                                                      did not learn the task at the training length: its
                                                      edge elsewhere is no evidence (the caller decides)

Whatever the rule, two accuracies both at or above SOLVED (0.99) are not testable ("both solve the task: no
room to differ"; `ceiling=False` opts out), and two arms whose every run diverged are not testable.

Every check is `primary` (the one test of its anchor, with the `reason` it is the right experiment)
or supporting. `Q.answer` applies Holm across the primary checks that carry a p-value (an agrees or
disagrees whose adjusted p >= 0.05 becomes inconclusive) and takes the question's verdict from the
primary checks only (`overall`): supporting checks are shown, never counted. Where anchors are marked
`tutorial=True` (the tutorial's own claim), the headline verdict comes from their primary checks alone;
each other (side) anchor gets its own verdict in the payload's `side` list, and the two are corrected
for multiplicity as separate families.

Each check also takes its words in the tutorial's language, keyword-only: `what_zh=`, `reason_zh=` (and
`why_zh=` beside `why=`, `evidence_zh=` beside judge's evidence). Its `evidence_zh` carries the same
numbers as `evidence`, formatted with `fmt("zh")`, and the verdict rule's clauses (not testable, TOST,
Holm) in Chinese. A check written without them still works: its Chinese evidence then quotes the
English label, and FINDINGS.zh.md shows the English reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import prose
from .data import Sweep, missing_zh, read_meta
from .solve import SolveTest
from .stats import ACCURACY, LEVEL_MARGIN, SOLVED, Effect, holm, take_intervals

Words = tuple[str, str]  # (English, Chinese)
ANSWER_MIME = "application/vnd.ablate.answer+json"
AGREES, DISAGREES, INCONCLUSIVE, NOT_TESTABLE, NOT_RUN = "agrees", "disagrees", "inconclusive", "not testable", "not run yet"
PARTLY_DISAGREES = "partly disagrees"
AGREES_IN_PART = "agrees in part, the rest inconclusive"
DISAGREES_IN_PART = "disagrees in part, the rest inconclusive"
AGREES_IN_PART_UNTESTED = "agrees in part, the rest not testable here"
DISAGREES_IN_PART_UNTESTED = "disagrees in part, the rest not testable here"
ALPHA = 0.05  # the level of every test, and the family-wise level of a question's primary tests (Holm)
KINDS = ("outcome", "mechanism")  # what training shows / what the probes show
# The verdict words in the tutorial's language (FINDINGS.zh.md, the Holm note of a check).
VERDICT_ZH = {
    AGREES: "成立",
    DISAGREES: "不成立",
    INCONCLUSIVE: "证据不足",
    NOT_TESTABLE: "无法在此检验",
    NOT_RUN: "尚未运行",
    PARTLY_DISAGREES: "部分不成立",
    AGREES_IN_PART: "部分成立，其余证据不足",
    DISAGREES_IN_PART: "部分不成立，其余证据不足",
    AGREES_IN_PART_UNTESTED: "部分成立，其余无法在此检验",
    DISAGREES_IN_PART_UNTESTED: "部分不成立，其余无法在此检验",
}
PAIRS = ("plain", "mechanism", "outcome", "changes")


def p_text(p: float | None, lang: str = "en") -> str:
    """A p-value for a sentence: 'p = 0.012', 'p < 0.001' (the same in Chinese; none: 'p n/a', '无 p 值')."""
    if p is None or not math.isfinite(p):
        return "无 p 值" if lang == "zh" else "p n/a"
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _none_if_nan(x: float | None) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


@dataclass(frozen=True)
class Check:
    """One anchor compared with the measurement: the verdict, the numbers behind it, whether it is the
    anchor's primary test (and why that is the right experiment), its p-value (Holm-adjusted in
    `p_holm` once the question's answer is given), the equivalence margin of a sameness claim; the
    evidence and the reason in Chinese (`evidence_zh`, `reason_zh`: the same numbers)."""

    anchor: Anchor
    verdict: str
    evidence: str
    primary: bool = True
    reason: str = ""
    p: float | None = None
    p_holm: float | None = None
    kind: str = "outcome"
    margin: float | None = None
    evidence_zh: str = ""
    reason_zh: str = ""

    def as_dict(self) -> dict[str, Any]:
        a = self.anchor
        return {"cite": a.cite, "cite_zh": a.cite_zh, "claim": a.claim, "claim_zh": a.claim_zh, "wording": a.wording,
                "kind": self.kind,
                "tutorial": a.tutorial,
                "verdict": self.verdict, "evidence": self.evidence, "evidence_zh": self.evidence_zh,
                "primary": self.primary, "reason": self.reason, "reason_zh": self.reason_zh,
                "p": _none_if_nan(self.p), "p_holm": _none_if_nan(self.p_holm), "margin": self.margin}


@dataclass(frozen=True)
class Anchor:
    """A published result: who (`cite`), what it says (`claim`, and in Chinese `claim_zh`), whether it
    is about the outcome of training or the mechanism the probes see (`kind`), and the paper's own
    wording where it hedges or differs from the tutorial's story (`wording`)."""

    cite: str
    claim: str
    claim_zh: str = ""
    kind: str = "outcome"
    wording: str = ""
    tutorial: bool = False  # the tutorial's own claim: the question's headline verdict comes from these
    label: str = ""  # a short name where one cite has several claims ("Table 3 (A), too many heads")
    cite_zh: str = ""  # the cite in Chinese where it is not a paper's ("教程的解释（梯度高速公路）")
    label_zh: str = ""  # the label in Chinese ("Vaswani et al. 2017, Table 3 (A)，头太多")

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Anchor {self.cite!r}: kind={self.kind!r}; use one of {', '.join(KINDS)}")

    # -------------------------------------------------------------- checks

    def _check(self, verdict: str, evidence: Words, *, primary: bool, reason: str, reason_zh: str = "",
               p: float | None = None, margin: float | None = None) -> Check:
        if not isinstance(primary, bool):
            raise TypeError(f"Anchor {self.cite!r}: primary= must be True or False, got {primary!r}")
        if primary and not str(reason).strip():
            raise ValueError(f"Anchor {self.cite!r}: a primary check needs reason= (why this is the right "
                             "experiment for the claim)")
        en, zh = evidence
        return Check(self, verdict, en, primary, str(reason), _none_if_nan(p), None, self.kind, margin,
                     zh, str(reason_zh).strip())

    @staticmethod
    def _evidence(effect: Effect, what: str, what_zh: str) -> Words:
        """'what: a vs b, difference, p' in English, and in Chinese with the same numbers ('what_zh：a 对 b，…';
        without `what_zh`, the English label)."""
        label = what_zh or what
        en = f"{what}{': ' if what else ''}{effect.a} vs {effect.b}, {effect}"
        zh = f"{label}{'：' if label else ''}{effect.a:zh} 对 {effect.b:zh}，{effect:zh}"
        if effect.has_interval:
            en, zh = f"{en}, {p_text(effect.p)}", f"{zh}，{p_text(effect.p, 'zh')}"
        return en, zh

    def _untestable(self, effect: Effect, evidence: Words, *, level: float | None, premise: bool, why: Words,
                    primary: bool, reason: Words, learned: bool = True, ceiling: bool = True) -> Check | None:
        """Not testable: the premise is not realised; the arm the claim favours did not learn the task
        (`learned=False`); both arms diverged; both sit at or above SOLVED on an accuracy (`ceiling`: no room
        to differ); or both sit at or below the reference level (+ LEVEL_MARGIN). In each case their
        difference is no evidence for or against the claim."""
        said = {"primary": primary, "reason": reason[0], "reason_zh": reason[1]}
        if not premise:
            if not why[0]:
                raise ValueError(f"Anchor {self.cite!r}: premise=False needs why= (what the setting lacks)")
            return self._check(NOT_TESTABLE, _also(evidence, why[0], why[1] or why[0]), **said)
        if not learned:
            en = "the favoured variant did not solve the task at the training length"
            zh = "论断看好的变体在训练长度上没有解决这个任务"
            if why[0]:
                en, zh = f"{en}: {why[0]}", f"{zh}：{why[1] or why[0]}"
            return self._check(NOT_TESTABLE, _also(evidence, en, zh), **said)
        a, b = effect.a, effect.b
        if a.n == 0 and b.n == 0 and a.n_diverged and b.n_diverged:
            return self._check(NOT_TESTABLE, _also(evidence, "both variants diverged: nothing to compare",
                                                   "两个变体都发散了，没有可比较的结果"), **said)
        if not effect.comparable:
            return None
        if ceiling and a.kind == ACCURACY and b.kind == ACCURACY and min(a.mean, b.mean) >= SOLVED:
            at = f"{100 * SOLVED:g}"
            return self._check(NOT_TESTABLE, _also(
                evidence, f"both solve the task (≥ {at} %): no room to differ",
                f"两者都解决了这个任务（≥ {at}%）：没有相差的余地，无法在此检验"), **said)
        if level is None or not math.isfinite(level):
            return None
        if max(a.mean, b.mean) <= level + LEVEL_MARGIN:
            at, margin = f"{100 * level:.1f}", f"{100 * LEVEL_MARGIN:g}"
            return self._check(NOT_TESTABLE, _also(
                evidence, f"neither variant learned the task (both at or below the reference level {at} % + {margin} point)",
                f"两个变体都没有学会这个任务（都没有比参考水平 {at}% 高出 {margin} 个百分点以上），无法在此检验"), **said)
        return None

    def _direction(self, effect: Effect, what: Words, want: int, when: dict[str, Any], why: Words, primary: bool,
                   reason: Words) -> Check:
        evidence = self._evidence(effect, *what)
        untestable = self._untestable(effect, evidence, why=why, primary=primary, reason=reason, **when)
        if untestable is not None:
            return untestable
        if not effect.has_interval:
            return self._check(INCONCLUSIVE, evidence, primary=primary, reason=reason[0], reason_zh=reason[1])
        verdict = INCONCLUSIVE if effect.sign == 0 else AGREES if effect.sign == want else DISAGREES
        return self._check(verdict, evidence, primary=primary, reason=reason[0], reason_zh=reason[1], p=effect.p)

    def greater(self, effect: Effect, what: str = "", *, level: float | None = None, premise: bool = True,
                learned: bool = True, ceiling: bool = True, why: str = "", primary: bool, reason: str = "",
                what_zh: str = "", why_zh: str = "", reason_zh: str = "") -> Check:
        """The claim says variant a is above variant b (effect = a - b, or a / b). `learned=False`: a, the
        favoured arm, did not learn the task at the training length (not testable, `why` says more)."""
        when = {"level": level, "premise": premise, "learned": learned, "ceiling": ceiling}
        return self._direction(effect, (what, what_zh), +1, when, (why, why_zh), primary, (reason, reason_zh))

    def less(self, effect: Effect, what: str = "", *, level: float | None = None, premise: bool = True,
             learned: bool = True, ceiling: bool = True, why: str = "", primary: bool, reason: str = "",
             what_zh: str = "", why_zh: str = "", reason_zh: str = "") -> Check:
        """The claim says variant a is below variant b (`learned=False`: b, the favoured arm, did not learn)."""
        when = {"level": level, "premise": premise, "learned": learned, "ceiling": ceiling}
        return self._direction(effect, (what, what_zh), -1, when, (why, why_zh), primary, (reason, reason_zh))

    def same(self, effect: Effect, what: str = "", *, margin: float | None = None, level: float | None = None,
             premise: bool = True, ceiling: bool = True, why: str = "", primary: bool, reason: str = "",
             what_zh: str = "", why_zh: str = "", reason_zh: str = "") -> Check:
        """A claim of sameness. Agrees only when `margin` (stated before the data were read; the metric's
        units, 0.02 = 2 points; a factor > 1 for a ratio) is given and the TOST p-value is < 0.05;
        disagrees when the 95 % interval lies wholly outside ±margin (without a margin: excludes 0);
        otherwise inconclusive. Two accuracies both at the ceiling are not testable (`ceiling=False`: judged
        anyway)."""
        evidence = self._evidence(effect, what, what_zh)
        untestable = self._untestable(effect, evidence, level=level, premise=premise, ceiling=ceiling,
                                      why=(why, why_zh), primary=primary, reason=(reason, reason_zh))
        if untestable is not None:
            return untestable
        said = {"primary": primary, "reason": reason, "reason_zh": reason_zh}
        if not effect.has_interval:
            return self._check(INCONCLUSIVE, evidence, margin=margin, **said)
        if margin is None:
            if effect.measurable:
                return self._check(DISAGREES, evidence, p=effect.p, **said)
            return self._check(INCONCLUSIVE, _also(
                evidence, "no equivalence margin was stated, and finding no difference is not showing sameness",
                "没有事先给出等价界限，而没有发现差异并不等于证明两者相同"), p=effect.p, **said)
        tost = effect.tost(margin)
        bound, bound_zh = _margin_text(effect, margin), _margin_text(effect, margin, "zh")
        if tost < ALPHA:
            return self._check(AGREES, _also(evidence, f"inside the margin {bound} (TOST {p_text(tost)})",
                                             f"落在等价界限 {bound_zh} 以内（TOST {p_text(tost, 'zh')}）"),
                               p=tost, margin=margin, **said)
        m = math.log(margin) if effect.ratio else margin
        lo, hi = (math.log(effect.lo), math.log(effect.hi)) if effect.ratio else (effect.lo, effect.hi)
        if lo > m or hi < -m:
            beyond = effect.beyond(margin)
            return self._check(DISAGREES, _also(
                evidence, f"the interval lies wholly outside the margin {bound} ({p_text(beyond)})",
                f"区间完全落在等价界限 {bound_zh} 之外（{p_text(beyond, 'zh')}）"), p=beyond, margin=margin, **said)
        return self._check(INCONCLUSIVE, _also(evidence, f"not shown inside the margin {bound} (TOST {p_text(tost)})",
                                               f"未能证明落在等价界限 {bound_zh} 以内（TOST {p_text(tost, 'zh')}）"),
                           p=tost, margin=margin, **said)

    def below(self, effect: Effect, value: float, what: str = "", *, primary: bool, reason: str = "",
              what_zh: str = "", reason_zh: str = "") -> Check:
        """The claim says a / b (a - b) lies below `value`, not merely below no effect (0.5: a gets under half
        of what b gets). Agrees when the 95 % interval lies wholly below `value`, disagrees when wholly above,
        otherwise inconclusive; its p is two-sided against `value` (`Effect.against`)."""
        said = {"primary": primary, "reason": reason, "reason_zh": reason_zh}
        label = what_zh or what
        en = f"{what}{': ' if what else ''}{effect.a} vs {effect.b}, {effect}"
        zh = f"{label}{'：' if label else ''}{effect.a:zh} 对 {effect.b:zh}，{effect:zh}"
        if not effect.has_interval:
            return self._check(INCONCLUSIVE, (en, zh), **said)
        side, p = effect.against(value)
        bound = f"×{value:g}" if effect.ratio else f"{value:g}"
        en, zh = f"{en}, against {bound}: {p_text(p)}", f"{zh}，以 {bound} 为界检验：{p_text(p, 'zh')}"
        verdict = {-1: AGREES, 1: DISAGREES, 0: INCONCLUSIVE}[side]
        return self._check(verdict, (en, zh), p=p, **said)

    def faster(self, test: SolveTest, what: str = "", *, primary: bool, reason: str = "", what_zh: str = "",
               reason_zh: str = "") -> Check:
        """The claim says variant a reaches the task's solve level in fewer steps than b (`R.solve_test`:
        unsolved runs censored, ranked last). Not testable when every run of both arms has one time (all
        solved at the same check, or none solved: a floor or ceiling of the schedule); agrees when the rank
        test's p < 0.05 with a the faster, disagrees with a the slower, otherwise inconclusive."""
        label = what_zh or what
        en = f"{what}{': ' if what else ''}{test.a} vs {test.b}, {test}"
        zh = f"{label}{'：' if label else ''}{test.a:zh} 对 {test.b:zh}，{test:zh}"
        said = {"primary": primary, "reason": reason, "reason_zh": reason_zh}
        if test.p is not None and test.floor:
            return self._check(NOT_TESTABLE, _also((en, zh), "every run of both arms has the same time to solve: "
                                                   "no room to differ", "两组的每次运行达到解决水平的步数都相同：没有相差的余地"),
                               **said)
        verdict = INCONCLUSIVE if test.sign == 0 else AGREES if test.sign < 0 else DISAGREES
        return self._check(verdict, (en, zh), p=test.p, **said)

    def judge(self, ok: bool | None, evidence: str, *, p: float | None = None, primary: bool, reason: str = "",
              evidence_zh: str = "", reason_zh: str = "") -> Check:
        """Any other rule: True agrees, False disagrees, None inconclusive; `evidence_zh`: the same numbers in
        Chinese (without it, the English evidence)."""
        if ok not in (True, False, None):
            raise TypeError(f"Anchor {self.cite!r}: judge(ok=...) takes True, False or None, got {ok!r}")
        verdict = {True: AGREES, False: DISAGREES, None: INCONCLUSIVE}[ok]
        return self._check(verdict, (evidence, evidence_zh or evidence), primary=primary, reason=reason,
                           reason_zh=reason_zh, p=p)

    def not_testable(self, what: str, why: str, *, primary: bool, reason: str = "", what_zh: str = "",
                     why_zh: str = "", reason_zh: str = "") -> Check:
        """The setting cannot test the claim (`why`)."""
        label = what_zh or what
        return self._check(NOT_TESTABLE, (f"{what}{': ' if what else ''}{why}", f"{label}{'：' if label else ''}{why_zh or why}"),
                           primary=primary, reason=reason, reason_zh=reason_zh)


def _margin_text(effect: Effect, margin: float, lang: str = "en") -> str:
    if effect.ratio:
        return f"×/÷{margin:g}"
    if effect.a.percent:
        return f"±{100 * margin:g} 个百分点" if lang == "zh" else f"±{100 * margin:g} points"
    return f"±{margin:g}"


def _also(evidence: Words, en: str, zh: str) -> Words:
    """The evidence with one more clause of the verdict's rule, in both languages."""
    return f"{evidence[0]}; {en}", f"{evidence[1]}；{zh}"


def overall(verdicts: Sequence[str]) -> str:
    """A question's verdict from its primary checks' verdicts: all the same -> that one; agrees and
    disagrees -> partly disagrees; agrees with inconclusive (and maybe not testable) -> agrees in part, the
    rest inconclusive; agrees with not testable alone -> agrees in part, the rest not testable here (a test
    that could not be run is not one that ran and could not decide); disagrees likewise (a disagreement is
    never hidden); otherwise (none, or only inconclusive and not testable) inconclusive."""
    v = set(verdicts)
    if not v:
        return INCONCLUSIVE
    if len(v) == 1:
        return v.pop()
    if AGREES in v and DISAGREES in v:
        return PARTLY_DISAGREES
    for decided, inconclusive, untested in ((AGREES, AGREES_IN_PART, AGREES_IN_PART_UNTESTED),
                                            (DISAGREES, DISAGREES_IN_PART, DISAGREES_IN_PART_UNTESTED)):
        if decided in v:
            return untested if v - {decided} == {NOT_TESTABLE} else inconclusive
    return INCONCLUSIVE


def _holm_family(checks: list[Check], family: list[int]) -> int:
    """Holm within one family of primary checks (indices into `checks`, changed in place): each gets
    `p_holm`; an agrees or disagrees whose adjusted p is >= ALPHA becomes inconclusive. Returns how many
    verdicts moved."""
    m, moved = len(family), 0
    for i, q in zip(family, holm([checks[i].p for i in family])):
        c = checks[i]
        if c.verdict in (AGREES, DISAGREES) and q >= ALPHA:
            moved += 1
            zh = (f"{c.evidence_zh}；对 {m} 个主要检验做 Holm 校正后 p = {q:.2g} ≥ {ALPHA:g}："
                  f"证据不足（原为{VERDICT_ZH[c.verdict]}）") if c.evidence_zh else ""
            c = replace(c, verdict=INCONCLUSIVE, evidence=f"{c.evidence}; Holm-adjusted over {m} primary tests "
                        f"p = {q:.2g} ≥ {ALPHA:g}: inconclusive (was {c.verdict})", evidence_zh=zh)
        checks[i] = replace(c, p_holm=q)
    return moved


def _family_note(m: int, moved: int) -> dict[str, str]:
    if m == 0:
        return {"en": "No primary test carries a p-value, so there is nothing to correct for multiple testing.",
                "zh": "没有带 p 值的主要检验，无需多重比较校正。"}
    if m == 1:
        return {"en": "One primary test carries a p-value: no correction for multiple testing is needed.",
                "zh": "只有一个主要检验带 p 值，无需多重比较校正。"}
    return {"en": f"Holm–Bonferroni across the {m} primary tests that carry a p-value (family-wise error "
                  f"{100 * ALPHA:g} %): {moved} verdict{'s' if moved != 1 else ''} moved to inconclusive by it.",
            "zh": f"对 {m} 个带 p 值的主要检验做 Holm–Bonferroni 校正（族错误率 {100 * ALPHA:g}%）："
                  f"{moved} 个判定因此改为证据不足。"}


def correct(checks: Sequence[Check]) -> tuple[list[Check], dict[str, str]]:
    """Holm across the primary checks that carry a p-value: each gets `p_holm`, and an agrees or disagrees
    whose adjusted p is >= ALPHA becomes inconclusive (its evidence says so). Where some anchor is the
    tutorial's claim (`Anchor.tutorial`), its primary tests are one family and the side anchors' another:
    a side anchor never docks the headline, not even through the correction. Returns the checks and the
    multiplicity note ({"en", "zh"})."""
    checks = list(checks)
    tested = [i for i, c in enumerate(checks) if c.primary and c.p is not None and math.isfinite(c.p)]
    if not any(c.anchor.tutorial for c in checks):
        note = _family_note(len(tested), _holm_family(checks, tested))
    else:
        claim = [i for i in tested if checks[i].anchor.tutorial]
        side = [i for i in tested if not checks[i].anchor.tutorial]
        first, second = _family_note(len(claim), _holm_family(checks, claim)), None
        if any(not c.anchor.tutorial and c.primary for c in checks):
            second = _family_note(len(side), _holm_family(checks, side))
        heads = {"en": ("The tutorial's claim: ", " The side anchors, a family of their own: "),
                 "zh": ("教程的论断：", "旁证论断（单独成族）：")}
        note = {lang: heads[lang][0] + first[lang] + (heads[lang][1] + second[lang] if second else "")
                for lang in ("en", "zh")}
    note = {lang: text + {"en": " Supporting evidence is not corrected; it does not move the verdict.",
                          "zh": "辅助证据不做校正，也不影响判定。"}[lang] for lang, text in note.items()}
    return checks, note


def side_verdicts(anchors: Sequence[Anchor], checks: Sequence[Check]) -> list[dict[str, str]]:
    """Each published side anchor (not the tutorial's claim) with primary checks: its own verdict, from
    those checks only, and why where it is not testable. Empty where no anchor is marked `tutorial`."""
    if not any(a.tutorial for a in anchors):
        return []
    out = []
    for a in anchors:
        mine = [c for c in checks if c.primary and c.anchor is a]
        if a.tutorial or not mine:
            continue
        verdict = overall([c.verdict for c in mine])
        why = "; ".join(c.evidence for c in mine if c.verdict == NOT_TESTABLE)
        why_zh = "；".join(c.evidence_zh or c.evidence for c in mine if c.verdict == NOT_TESTABLE)
        out.append({"cite": a.label or a.cite, "cite_zh": a.label_zh or a.cite_zh or a.label or a.cite,
                    "claim": a.claim, "claim_zh": a.claim_zh, "verdict": verdict,
                    "why": why, "why_zh": why_zh})
    return out


def headline(anchors: Sequence[Anchor], checks: Sequence[Check]) -> str:
    """The question's verdict: from the primary tests of the tutorial's claim where an anchor is marked
    `tutorial`, else (older notebooks) from every primary test."""
    marked = any(a.tutorial for a in anchors)
    return overall([c.verdict for c in checks if c.primary and (c.anchor.tutorial or not marked)])


def _pair(name: str, value: Any) -> dict[str, str]:
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(s, str) for s in value)):
        raise TypeError(f"Q.answer: {name}= takes an (English, Chinese) pair of strings, got {value!r}")
    return {"en": re.sub(r" {2,}", " ", value[0]).strip(), "zh": re.sub(r" {2,}", " ", value[1]).strip()}


def _details(details: Any) -> dict[str, str]:
    """Q.answer(details=...): "" (none), or a function of the language returning a string or a list of them."""
    if isinstance(details, str) and not details.strip():
        return {"en": "", "zh": ""}
    if not callable(details):
        raise TypeError("Q.answer: details= takes a function of the language (\"en\", \"zh\") returning its sentences, "
                        f"so that the Chinese page is Chinese; got {type(details).__name__}")
    out = {}
    for lang in ("en", "zh"):
        said = details(lang)
        said = [said] if isinstance(said, str) else list(said)
        out[lang] = re.sub(r" {2,}", " ", ("" if lang == "zh" else " ").join(s.strip() for s in said if s and s.strip()))
    return out


def _budget(sweeps: Sequence[str]) -> str:
    """The budgets the question's sweeps were run at, from meta.json ('' when none is exported)."""
    meta = read_meta().get("sweeps", {})
    return ", ".join(sorted({str(meta[s]["budget"]) for s in sweeps if s in meta and meta[s].get("budget")}))


@dataclass
class Question:
    """A question (or claim) of the article in English and Chinese, its published anchors and the sweeps
    it reads."""

    key: str
    title: str
    text: str
    text_zh: str = ""
    anchors: list[Anchor] = field(default_factory=list)
    sweeps: list[str] = field(default_factory=list)
    title_zh: str = ""

    def _repr_markdown_(self) -> str:
        cited = "\n".join(f"- *{a.cite}* ({a.kind}): {a.claim}" + (f' — the paper: "{a.wording}"' if a.wording else "")
                          for a in self.anchors)
        zh = f"\n\n**问题。** {self.text_zh}" if self.text_zh else ""
        return f"### {self.title}\n\n**Question.** {self.text}{zh}\n\n**Published anchors.**\n\n{cited}\n"

    def payload(self, *, status: str, plain: dict[str, str], mechanism: dict[str, str], outcome: dict[str, str],
                changes: dict[str, str], details: dict[str, str], checks: Sequence[Check], multiplicity: dict[str, str],
                figure: str | Path | None, figures: Sequence[str | Path], short: dict[str, str]) -> dict[str, Any]:
        return {
            "short": short,
            "key": self.key,
            "title": self.title,
            "title_zh": self.title_zh,
            "question": self.text,
            "question_zh": self.text_zh,
            "status": status,
            "plain": plain,
            "mechanism": mechanism,
            "outcome": outcome,
            "changes": changes,
            "details": details,
            "verdict": NOT_RUN if status == NOT_RUN else headline(self.anchors, checks),
            "side": side_verdicts(self.anchors, checks),
            "checks": [c.as_dict() for c in sorted(checks, key=lambda c: not c.primary)],
            "multiplicity": multiplicity,
            "intervals": take_intervals(),
            "figure": Path(figure).name if figure else None,
            "figures": [Path(f).name for f in figures if f],
            "sweeps": list(self.sweeps),
            "budget": _budget(self.sweeps),
        }

    def answer(self, *, plain: tuple[str, str] | None = None, mechanism: tuple[str, str] | None = None,
               outcome: tuple[str, str] | None = None, changes: tuple[str, str] | None = None, details: Any = "",
               checks: Sequence[Check] = (), figure: str | Path | None = None,
               figures: Sequence[str | Path] = (), short: tuple[str, str] | None = None,
               at_scale: tuple[str, str] | None = None, record: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Show the Answer (Markdown) and hand the builder the same content (JSON); returns it.
        `record`: the numbers and words the answer's prose prints (prose.record); the prose itself is the
        question's templates, reports/prose/en/<key>.md and reports/prose/zh/<key>.md, one per language,
        rendered from it (the record also gets `verdict`, the question's verdict word). Their `brief` block
        is the question answered for a student at the top of the findings.
        A quick study of a user's own may pass the prose as (English, Chinese) pairs of f-strings instead (every
        notebook of ablate's uses templates; a part given both ways is refused, so parts move one at a time):
        `plain`, `mechanism`, `outcome`, `changes`: pairs formatted from the same values.
        `short`: the answer in one sentence with the number that decides it, for the findings' answers table
        (at most SHORT_LIMIT characters each; without it the table shows the plain answer's first sentence).
        `at_scale`: what of this answer is expected to move at a larger scale than it was measured at (more
        steps, width, length, parallel hardware), and why; the answers table marks the answer and says it.
        `details`: how the numbers were made (learning rates, convergence, seeds), in both languages: a function
        of the language ("en", "zh") returning the sentences (a string or a list of them, empty ones left out),
        the sentence helpers taking `lang=` (R.lr_phrase, R.convergence, R.caveat, Sweep.still_learning)."""
        values, brief = None, None
        if record is not None:
            values = prose.record(**record)
            values.setdefault("verdict", headline(self.anchors, correct(checks)[0]))
            rendered = {lang: prose.render(self.key, values, lang) for lang in prose.LANGS}
            written = {b: (rendered["en"][b], rendered["zh"].get(b, "")) for b in rendered["en"]}
            given_pairs = {"plain": plain, "mechanism": mechanism, "outcome": outcome, "changes": changes,
                           "short": short, "at_scale": at_scale}
            twice = [b for b in written if given_pairs.get(b) is not None]
            if twice:
                raise TypeError(f"Q.answer: {', '.join(f'{b}=' for b in twice)} given here and as a block of "
                                f"reports/prose/<lang>/{self.key}.md; keep one")
            plain, mechanism, outcome, changes, short, at_scale = (
                written.get(b, given_pairs[b]) for b in ("plain", "mechanism", "outcome", "changes", "short",
                                                         "at_scale"))
            brief = written.get("brief")
        given = {"plain": plain, "mechanism": mechanism, "outcome": outcome, "changes": changes}
        missing = [k for k, v in given.items() if v is None]
        if missing:
            raise TypeError(f"Q.answer: missing {', '.join(f'{k}=' for k in missing)} (each an (English, Chinese) pair)")
        pairs = {k: _pair(k, v) for k, v in given.items()}
        pairs["short"] = _pair("short", short) if short is not None else {
            lang: first_sentence(pairs["plain"][lang], lang) for lang in ("en", "zh")}
        for lang, text in pairs["short"].items():
            if len(text) > SHORT_LIMIT:
                raise ValueError(f"Q.answer(short=...): the {lang} answer has {len(text)} characters; keep it to "
                                 f"{SHORT_LIMIT} (one sentence and its deciding number)")
        checked, multiplicity = correct(checks)
        data = self.payload(status="answered", details=_details(details), checks=checked, multiplicity=multiplicity,
                            figure=figure, figures=figures, **pairs)
        data["at_scale"] = _pair("at_scale", at_scale) if at_scale is not None else {"en": "", "zh": ""}
        data["brief"] = _pair("brief", brief) if brief is not None else {"en": "", "zh": ""}
        if values is not None:
            data["record"] = values
        show(data)
        return data

    def not_run_yet(self, *missing: Sweep | str) -> dict[str, Any]:
        """The Answer when a sweep is missing: "not run yet — run `make sweep-X`" for each."""
        lines = [m.missing if isinstance(m, Sweep) else str(m) for m in missing]
        text = "; ".join(dict.fromkeys(line for line in lines if line))
        zh = missing_zh(text)
        checks = [Check(a, NOT_RUN, text, True, "", kind=a.kind, evidence_zh=zh) for a in self.anchors]
        empty = {"en": "", "zh": ""}
        take_intervals()  # nothing quoted: forget what earlier cells formatted
        data = self.payload(status=NOT_RUN, plain={"en": text, "zh": zh}, mechanism=empty, outcome=empty,
                            changes=empty, details=empty, checks=checks, multiplicity=empty, figure=None, figures=(),
                            short={"en": text, "zh": zh})
        show(data)
        return data


SHORT_LIMIT = 300  # characters of an answer in the findings' answers table (issue 26: no cell over ~300)


def first_sentence(text: str, lang: str = "en") -> str:
    """The first sentence of `text` (up to '. ' in English, not after 'et al.', 'e.g.' or 'i.e.'; '。' in
    Chinese), cut at SHORT_LIMIT at a word boundary (English) with '…'."""
    text = " ".join(str(text).split())
    if lang == "zh":
        end = text.find("。") + 1
    else:
        ends = [m.end() - 1 for m in re.finditer(r"\. ", text)
                if not re.search(r"(?:\bal|\be\.g|\bi\.e|\bcf|\bvs)$", text[: m.start()])]
        end = ends[0] if ends else 0
    sentence = text[:end] if end > 0 else text
    if len(sentence) <= SHORT_LIMIT:
        return sentence
    cut = sentence[: SHORT_LIMIT - 1]
    if lang != "zh" and " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:([") + "…"


def question(key: str, anchors: Sequence[Anchor] = ()) -> Question:
    """The question `key` with its published anchors. Its title, text and sweeps, in English and Chinese, come
    from its study's manifest (reports/<notebook>.yaml, ablate.studies): the one place that names it."""
    from ..studies import question as manifest_question

    m = manifest_question(key)
    return Question(key, m.title, m.text, m.text_zh, list(anchors), list(m.sweeps), m.title_zh)


def _check_line(c: dict[str, Any]) -> str:
    wording = f' (the paper: "{c["wording"]}")' if c.get("wording") else ""
    reason = f" Why this test: {c['reason']}" if c.get("primary") and c.get("reason") else ""
    return f"- *{c['cite']}* — {c['claim']}{wording}: **{c['verdict']}** ({c['evidence']}).{reason}"


def markdown(data: dict[str, Any]) -> str:
    """The Answer cell's Markdown: the plain answer (English, then Chinese), mechanism, outcome, the
    anchors (primary tests with their reasons, then the supporting evidence), multiplicity, what would
    change the answer, details."""
    lines = [f"**Answer.** {data['plain']['en']}", ""]
    if data["plain"].get("zh") and data["plain"]["zh"] != data["plain"]["en"]:
        lines += [f"**回答。** {data['plain']['zh']}", ""]
    for key, label in (("mechanism", "Mechanism"), ("outcome", "Outcome")):
        if data[key].get("en"):
            lines += [f"**{label}.** {data[key]['en']}", ""]
    main = [c for c in data["checks"] if c["primary"]]
    support = [c for c in data["checks"] if not c["primary"]]
    if data["checks"]:
        lines += [f"**Published anchors** — overall: **{data['verdict']}**", "", *map(_check_line, main), ""]
    if support:
        lines += ["**Supporting evidence** (does not move the verdict)", "", *map(_check_line, support), ""]
    if data["multiplicity"].get("en"):
        lines += [f"**Multiplicity.** {data['multiplicity']['en']}", ""]
    if data["changes"].get("en"):
        lines += [f"**What would change the answer.** {data['changes']['en']}", ""]
    if data["details"]["en"]:
        lines += [f"**Details.** {data['details']['en']}", ""]
    return "\n".join(lines).rstrip()


def show(data: dict[str, Any]) -> None:
    from IPython.display import display

    display({"text/markdown": markdown(data), ANSWER_MIME: data}, raw=True)
