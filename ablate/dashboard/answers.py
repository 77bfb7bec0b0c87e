"""A question's plain answer and figures, as `ablate report build` wrote them (no torch, no notebook run).

Two places hold them: reports/build/answers.json (the Answers as data; build output, not committed)
and reports/FINDINGS.md (committed): under each question's heading its plain answer comes first, then
`**Question.** ...`, and its figures as `![title](figures/NAME.png)`. The JSON is read where it
exists, the findings otherwise; both name a question by its title (its study manifest, ablate.studies).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

REPORTS = Path("reports")
ANSWERS = Path("build") / "answers.json"
FINDINGS = "FINDINGS.md"
FIGURE = re.compile(r"^!\[[^\]]*\]\((figures/[^)\s]+)\)\s*$")


class AnswerError(ValueError):
    """No plain answer for a question: the message says what to build."""


def reports_dir() -> Path:
    """reports/ here, else the repository's."""
    here = REPORTS
    return here if (here / FINDINGS).is_file() else Path(__file__).resolve().parents[2] / REPORTS


def from_json(path: Path, title: str) -> dict[str, Any] | None:
    try:
        answers = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for a in answers if isinstance(answers, list) else []:
        if isinstance(a, dict) and a.get("title") == title:
            plain = a.get("plain")
            plain = plain.get("en", "") if isinstance(plain, dict) else str(plain or a.get("answer") or "")
            names = list(dict.fromkeys(n for n in [a.get("figure"), *(a.get("figures") or [])] if n))
            return {"title": title, "question": str(a.get("question", "")), "plain": plain.strip(),
                    "verdict": str(a.get("verdict", "")), "figures": [f"figures/{n}" for n in names],
                    "source": str(path)}
    return None


def from_findings(path: Path, title: str) -> dict[str, Any] | None:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    try:
        start = lines.index(f"## {title}") + 1
    except ValueError:
        return None
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    body = lines[start:end]
    paragraphs = [p for p in "\n".join(body).split("\n\n") if p.strip()]
    question = next((ln.removeprefix("**Question.** ") for ln in body if ln.startswith("**Question.** ")), "")
    verdict = next((re.sub(r".*(?:overall|the tutorial's claim): \*\*([^*]*)\*\*.*", r"\1", ln, flags=re.I)
                    for ln in body if re.search(r"(?:overall|the tutorial's claim): \*\*", ln, flags=re.I)), "")
    figures = [m.group(1) for ln in body if (m := FIGURE.match(ln))]
    return {"title": title, "question": question, "plain": paragraphs[0].strip() if paragraphs else "",
            "verdict": verdict, "figures": list(dict.fromkeys(figures)), "source": str(path)}


def answer(title: str, reports: Path | None = None) -> dict[str, Any]:
    """The question titled `title`: its question, plain answer, verdict and figure paths (relative to
    reports/), from answers.json if built, else FINDINGS.md. AnswerError when neither has it."""
    reports = reports or reports_dir()
    found = from_json(reports / ANSWERS, title) or from_findings(reports / FINDINGS, title)
    if not found or not found["plain"]:
        raise AnswerError(f"no plain answer for {title!r} in {reports / ANSWERS} or {reports / FINDINGS}; "
                          "run `make report` to build the findings")
    found["figures"] = [f for f in found["figures"] if (reports / f).is_file()]
    found["reports"] = str(reports)
    return found
