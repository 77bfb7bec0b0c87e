"""Questions, published anchors and Answer cells.

A notebook declares its question and the published results it is compared with once, at the top:

    Q = R.question("q3", "Q3 · Several heads or one", "Why does multi-head attention split ...?",
                   anchors=[R.Anchor("Vaswani et al. 2017, Table 3 (A)", "one head is 0.9 BLEU worse ...")],
                   sweeps=["heads"])

and ends with a cell tagged `answer` that calls `Q.answer(text, checks=[...], figure=path)` (or
`Q.not_run_yet(S)` when its sweep is missing). The cell shows "**Answer.** ..." as Markdown and
also carries the same content as JSON (ANSWER_MIME), which `ablate report build` reads back for
index.html and FINDINGS.md. Each check's verdict is computed from an Effect, never typed:

    anchor.expect_greater(effect)  the anchor says a > b: agrees if a is measurably above b,
                                   disagrees if measurably below, inconclusive inside the interval
    anchor.expect_same(effect)     the anchor says a ≈ b: agrees inside the interval, disagrees outside
    ..., level=R.level(df, where)  both arms at the task's reference level (chance, or the order-blind
                                   level): inconclusive, since two runs that learned nothing are no evidence
    anchor.judge(ok, evidence)     any other rule: True / False / None (inconclusive)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .data import Sweep
from .stats import LEVEL_MARGIN, Effect

ANSWER_MIME = "application/vnd.ablate.answer+json"
AGREES, DISAGREES, INCONCLUSIVE, NOT_RUN = "agrees", "disagrees", "inconclusive", "not run yet"


@dataclass(frozen=True)
class Check:
    """One anchor compared with the measurement: the verdict and the numbers behind it."""

    anchor: Anchor
    verdict: str
    evidence: str

    def as_dict(self) -> dict[str, str]:
        return {"cite": self.anchor.cite, "claim": self.anchor.claim, "verdict": self.verdict, "evidence": self.evidence}


@dataclass(frozen=True)
class Anchor:
    """A published result: who (`cite`) and what it says (`claim`)."""

    cite: str
    claim: str

    def judge(self, ok: bool | None, evidence: str) -> Check:
        return Check(self, {True: AGREES, False: DISAGREES, None: INCONCLUSIVE}[ok], evidence)

    def _failed_both(self, effect: Effect, evidence: str, level: float | None) -> Check | None:
        """Both arms at (or below, or within 1 point of) the reference level: two runs that learned
        nothing beyond it are no evidence for or against the anchor, whatever their difference."""
        if level is None or not (level == level) or not effect.comparable:
            return None
        if max(effect.a.mean, effect.b.mean) <= level + LEVEL_MARGIN:
            return self.judge(None, f"{evidence}; both at or below the reference level ({100 * level:.1f} %): no evidence "
                                    "either way")
        return None

    def expect_greater(self, effect: Effect, what: str = "", level: float | None = None) -> Check:
        """The anchor says variant a beats variant b (effect = a - b). With `level` (a reference level
        of the same metric), both arms at it make the check inconclusive."""
        evidence = f"{what}{': ' if what else ''}{effect.a} vs {effect.b}, {effect}"
        failed = self._failed_both(effect, evidence, level)
        if failed is not None:
            return failed
        if not effect.comparable:
            return self.judge(None, evidence)
        if not effect.has_interval:
            return self.judge(None, evidence)
        return self.judge({1: True, -1: False, 0: None}[effect.sign], evidence)

    def expect_less(self, effect: Effect, what: str = "", level: float | None = None) -> Check:
        """The anchor says variant a is below variant b (effect = a - b)."""
        check = self.expect_greater(effect, what, level)
        flipped = {AGREES: DISAGREES, DISAGREES: AGREES}.get(check.verdict, check.verdict)
        return Check(self, flipped, check.evidence)

    def expect_same(self, effect: Effect, what: str = "", level: float | None = None) -> Check:
        """The anchor says a and b are about equal: agrees when the difference is inside its interval."""
        evidence = f"{what}{': ' if what else ''}{effect.a} vs {effect.b}, {effect}"
        failed = self._failed_both(effect, evidence, level)
        if failed is not None:
            return failed
        if not effect.has_interval:
            return self.judge(None, evidence)
        return self.judge(not effect.measurable, evidence)


def overall(verdicts: Sequence[str]) -> str:
    """One verdict for a question from its checks."""
    v = set(verdicts)
    if not v:
        return INCONCLUSIVE
    if v == {NOT_RUN}:
        return NOT_RUN
    if len(v) == 1:
        return v.pop()
    if DISAGREES in v:
        return "partly disagrees" if AGREES in v else DISAGREES
    if AGREES in v:
        return "agrees in part, the rest inconclusive"
    return INCONCLUSIVE


@dataclass
class Question:
    """A question (or claim) of the article, its published anchors and the sweeps it reads."""

    key: str
    title: str
    text: str
    anchors: list[Anchor] = field(default_factory=list)
    sweeps: list[str] = field(default_factory=list)

    def _repr_markdown_(self) -> str:
        cited = "\n".join(f"- *{a.cite}*: {a.claim}" for a in self.anchors)
        return f"### {self.title}\n\n**Question.** {self.text}\n\n**Published anchors.**\n\n{cited}\n"

    def payload(self, text: str, checks: Sequence[Check], figure: str | Path | None, status: str) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "question": self.text,
            "answer": text,
            "status": status,
            "verdict": NOT_RUN if status == NOT_RUN else overall([c.verdict for c in checks]),
            "checks": [c.as_dict() for c in checks],
            "figure": Path(figure).name if figure else None,
            "sweeps": list(self.sweeps),
        }

    def answer(self, text: str, checks: Sequence[Check] = (), figure: str | Path | None = None) -> dict[str, Any]:
        """Show the Answer (Markdown) and hand the builder the same content (JSON); returns it. Runs of
        spaces (left by optional sentences that came out empty) become one."""
        data = self.payload(re.sub(r" {2,}", " ", text).strip(), checks, figure, "answered")
        show(data)
        return data

    def not_run_yet(self, *missing: Sweep | str) -> dict[str, Any]:
        """The Answer when a sweep is missing: "not run yet — run `make sweep-X`" for each."""
        lines = [m.missing if isinstance(m, Sweep) else str(m) for m in missing]
        text = "; ".join(dict.fromkeys(line for line in lines if line))
        checks = [Check(a, NOT_RUN, text) for a in self.anchors]
        data = self.payload(text, checks, None, NOT_RUN)
        show(data)
        return data


def question(key: str, title: str, text: str, anchors: Sequence[Anchor] = (), sweeps: Sequence[str] = ()) -> Question:
    return Question(key, title, text, list(anchors), list(sweeps))


def markdown(data: dict[str, Any]) -> str:
    """The Answer cell's Markdown: the sentence, then each anchor with its verdict."""
    lines = [f"**Answer.** {data['answer']}", ""]
    if data["checks"]:
        lines.append(f"**Compared with the published anchors** — overall: **{data['verdict']}**")
        lines.append("")
        for c in data["checks"]:
            lines.append(f"- *{c['cite']}* — {c['claim']}: **{c['verdict']}** ({c['evidence']})")
    return "\n".join(lines)


def show(data: dict[str, Any]) -> None:
    from IPython.display import display

    display({"text/markdown": markdown(data), ANSWER_MIME: data}, raw=True)
