"""`ablate report build`: execute every report notebook on the exported data and write the report.

    reports/<notebook>.py      the sources (jupytext percent format, no outputs), converted in memory
    <out>/build/<notebook>.html  each executed notebook, self-contained (figures inline, no scripts
                                 fetched from the network)
    <out>/build/index.html     every Answer on top (with its verdict and key figure), links below
    <out>/build/answers.json   the same Answers as data
    <out>/figures/*.png        every figure the notebooks save (notebook qN_x saves qN_*.png)
    <out>/FINDINGS.md          question, Answer, key figure, anchors and verdicts for each question
                               and claim, and where the data came from; only on a full build

Each notebook runs in a fresh Jupyter kernel (nbclient) with ABLATE_REPORT_DATA and
ABLATE_REPORT_FIGURES pointing at the data and figure folders, and PYTHONHASHSEED fixed. The
Answers are read from the outputs of the cells tagged `answer` (ANSWER_MIME). FINDINGS.md holds no
timestamp but the data's own dates, so the same data gives the same file, byte for byte.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fileio import atomic_write
from ..results.cost import GPU_STEPS_PER_S, Cost, sweep_cost
from .answers import ANSWER_MIME, DISAGREES, INCONCLUSIVE, NOT_RUN, markdown
from .data import (
    DATA_ENV,
    FIGURES_ENV,
    TARGETS,
    DataFileError,
    NotRunYet,
    check_folder,
    make_target,
    read_meta,
    table,
)

NOTEBOOKS = ("q1_word_order", "q2_scaling", "q3_heads", "q4_residual", "claims")
KERNEL = "python3"


class BuildError(RuntimeError):
    """A notebook that cannot be found or read, or a data file that cannot be read: one line."""


@dataclass
class Built:
    """One notebook after execution."""

    name: str
    answers: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    html: Path | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.answers)


def figure_prefix(name: str) -> str:
    """q2_scaling -> 'q2_', claims -> 'claims_': the names its figures start with."""
    return name.split("_")[0] + "_"


def read_notebook(path: Path):
    import jupytext

    try:
        nb = jupytext.read(path, fmt="py:percent")
    except FileNotFoundError:
        raise BuildError(f"no notebook source {path}") from None
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    return nb


def _error_text(err: BaseException) -> str:
    text = str(err).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    # CellExecutionError: the last line is "ErrorName: message"; keep it and the cell's first line
    return lines[-1] if lines else type(err).__name__


def execute(nb, cwd: Path, env: dict[str, str], timeout: int) -> str | None:
    """Run every cell in a fresh kernel; None on success, else one line naming the error."""
    import tempfile

    from nbclient import NotebookClient
    from traitlets.config import Config

    # IPC sockets in a private temporary folder: no TCP ports, no files left behind. The client
    # creates (and so shuts down) the kernel manager itself.
    with tempfile.TemporaryDirectory(prefix="ablate-kernel-") as sockets:
        config = Config({"KernelManager": {"transport": "ipc", "ip": str(Path(sockets) / "kernel")}})
        client = NotebookClient(nb, timeout=timeout, kernel_name=KERNEL, allow_errors=False, config=config,
                                resources={"metadata": {"path": str(cwd)}})
        try:
            client.execute(env=env)
        except Exception as err:  # CellExecutionError, a timeout, a dead kernel
            return f"{type(err).__name__}: {_error_text(err)}"
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return f"{output.get('ename')}: {output.get('evalue')}"
    return None


def answers_of(nb) -> tuple[list[dict[str, Any]], str | None]:
    """The Answer payloads of the cells tagged `answer`; an error when one appears elsewhere."""
    found, stray = [], 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tagged = "answer" in cell.metadata.get("tags", [])
        for output in cell.get("outputs", []):
            payload = output.get("data", {}).get(ANSWER_MIME)
            if payload is None:
                continue
            if tagged:
                found.append(dict(payload))
            else:
                stray += 1
    if stray:
        return found, f"{stray} Answer(s) in cells not tagged `answer`"
    return found, None


SCRIPT_SRC = re.compile(r"<script[^>]*\bsrc=\"https?://[^\"]*\"[^>]*>\s*</script>\s*", re.I)


def to_html(nb, title: str) -> str:
    """The executed notebook as one HTML file: outputs (figures as data: URIs) inline, and the
    template's CDN scripts (require.js, MathJax) removed: the reports use no JavaScript or LaTeX."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(embed_images=True)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return SCRIPT_SRC.sub("", body)


def build_one(name: str, source: Path, env: dict[str, str], html_dir: Path, figures: Path, timeout: int) -> Built:
    started = time.time()
    nb = read_notebook(source / f"{name}.py")
    for stale in figures.glob(f"{figure_prefix(name)}*.png"):
        stale.unlink()
    error = execute(nb, source, env, timeout)
    answers, stray = answers_of(nb)
    if error is None and stray:
        error = stray
    if error is None and not answers:
        error = "no Answer: no cell tagged `answer` showed one"
    page = html_dir / f"{name}.html"
    atomic_write(page, to_html(nb, name))
    for a in answers:
        a["notebook"] = name
    return Built(name, answers, error, page, time.time() - started)


def build(
    source: Path | str = "reports",
    data: Path | str = "reports/data",
    out: Path | str = "reports",
    only: Sequence[str] | None = None,
    timeout: int = 900,
    log: Callable[[str], None] = print,
) -> list[Built]:
    """Execute the notebooks (all, or `only`), write their HTML, the index and answers.json, and on a
    full build FINDINGS.md. Returns one Built per notebook; failures are in Built.error."""
    source, data, out = Path(source), Path(data).resolve(), Path(out)
    names = list(only) if only else list(NOTEBOOKS)
    unknown = [n for n in names if not (source / f"{n}.py").is_file()]
    if unknown:
        raise BuildError(f"no notebook {', '.join(unknown)} in {source}; choose from {', '.join(NOTEBOOKS)}")
    try:
        check_folder(data)  # a damaged table or meta.json: one line now, not a traceback in a notebook
    except DataFileError as err:
        raise BuildError(str(err)) from None
    html_dir, figures = out / "build", (out / "figures").resolve()
    html_dir.mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, DATA_ENV: str(data), FIGURES_ENV: str(figures), "PYTHONHASHSEED": "0",
           "ABLATE_PROGRESS": "0"}
    built = []
    for name in names:
        b = build_one(name, source.resolve(), env, html_dir, figures, timeout)
        state = "ok" if b.ok else f"FAILED ({b.error})"
        log(f"ablate report build: {name}: {state}, {len(b.answers)} answer(s), {b.seconds:.0f} s -> {b.html}")
        built.append(b)
    meta = read_meta_all(data)
    answers = [a for b in built for a in b.answers]
    atomic_write(html_dir / "answers.json", json.dumps(answers, indent=1, sort_keys=True) + "\n")
    atomic_write(html_dir / "index.html", index_html(built, meta, data, figures))
    log(f"ablate report build: {html_dir / 'index.html'}")
    if not only:
        findings = out / "FINDINGS.md"
        atomic_write(findings, findings_md(built, meta, data, figures, source, findings.parent))
        log(f"ablate report build: {findings}")
    return built


# ------------------------------------------------------------------ provenance


def read_meta_all(data: Path) -> dict[str, Any]:
    """meta.json, plus an entry for the attention benchmark read from its CSV."""
    import csv

    meta = read_meta(data)
    sweeps = dict(meta.get("sweeps", {}))
    bench = data / "attention_cost.csv"
    if bench.is_file():
        with open(bench, newline="") as f:
            rows = list(csv.DictReader(f))
        if rows:
            r = rows[0]
            sweeps["attention_cost"] = {
                "runs": len(rows),
                "budget": f"n = {min(int(x['n']) for x in rows)} … {max(int(x['n']) for x in rows)}",
                "machine": f"{r.get('device')}, {r.get('threads')} thread(s), torch {r.get('torch')}",
                "commit": None,
                "date": None,
            }
    return {**meta, "sweeps": sweeps}


def tables_used(built: list[Built]) -> list[str]:
    seen: dict[str, None] = {}
    for b in built:
        for a in b.answers:
            seen.update(dict.fromkeys(a.get("sweeps") or []))
    return list(seen)


def provenance_rows(built: list[Built], meta: dict[str, Any]) -> list[list[str]]:
    rows = []
    used = tables_used(built)
    for name in used + [n for n in meta["sweeps"] if n not in used]:
        m = meta["sweeps"].get(name)
        if not m:
            rows.append([name, f"not run yet — run `make {make_target(name)}`", "", "", "", ""])
            continue
        status = ", ".join(f"{v} {k}" for k, v in (m.get("status") or {}).items())
        runs = f"{m.get('runs')}" + (f" ({status})" if status else "")
        commit = (m.get("commit") or "")[:12] or "—"
        if m.get("dirty"):
            commit += " (uncommitted changes)"
        if m.get("commit_mismatch"):
            commit += f", {m['commit_mismatch']} run(s) at other commits"
        rows.append([name, runs, str(m.get("budget") or "—"), commit, str(m.get("machine") or "—"), str(m.get("date") or "—")])
    return rows


# ------------------------------------------------------------------ FINDINGS.md


def sweeps_dir(source: Path) -> Path:
    """The sweep files beside the notebooks' folder (reports/../sweeps), else ./sweeps."""
    beside = Path(source).resolve().parent / "sweeps"
    return beside if beside.is_dir() else Path("sweeps")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return lines


def full_costs(built: list[Built], meta: dict[str, Any], data: Path, sweeps: Path) -> dict[str, Cost]:
    """The full budget's cost of every sweep an answer used that is not already at full."""
    out = {}
    for name in tables_used(built):
        m = meta["sweeps"].get(name) or {}
        if name in TARGETS or m.get("budget") in (None, "full") or not (sweeps / f"{name}.yaml").is_file():
            continue
        try:
            df = table(name, data)
        except NotRunYet:
            df = None
        cost = sweep_cost(name, df, sweeps)
        if cost is not None:
            out[name] = cost
    return out


def _hours(h: float) -> str:
    return f"{h:.2g}" if h < 10 else f"{h:,.0f}"


def full_budget_section(costs: dict[str, Cost], meta: dict[str, Any]) -> list[str]:
    lo, hi = GPU_STEPS_PER_S
    rows = [[f"`make sweep-{c.sweep} BUDGET=full`", str(c.runs), c.epochs, f"{c.steps:,}",
             "—" if c.cpu_hours is None else _hours(c.cpu_hours),
             f"{_hours(c.gpu_hours[0])}–{_hours(c.gpu_hours[1])}"] for c in costs.values()]
    total_gpu = (sum(c.gpu_hours[0] for c in costs.values()), sum(c.gpu_hours[1] for c in costs.values()))
    return [
        "## What the full budget would take",
        "",
        "Every sweep the answers use, at the full budget (`ablate/budgets.py`: every run on the whole training",
        "set for many epochs). Where an answer is inconclusive or disagrees with its anchor, the budget these",
        "tables were made at may be too small to show the effect; the answer then points here. Optimiser",
        "steps come from the sweep files; CPU hours multiply them by the seconds per step each variant",
        "measured in these tables (one worker thread);",
        f"GPU hours assume {lo}–{hi} steps per second per run, which is not measured here.",
        "",
        *_md_table(["sweep", "runs", "epochs", "optimiser steps", "CPU thread-hours (measured rate)",
                    f"GPU hours at {lo}–{hi} steps/s (assumed)"], rows),
        "",
        f"All of them: about {_hours(total_gpu[0])}–{_hours(total_gpu[1])} GPU hours, one run per GPU at a time.",
        "",
    ]


def settle_line(answer: dict[str, Any], unsettled: list[dict], costs: list[Cost], meta: dict[str, Any]) -> str:
    budgets = sorted({str((meta["sweeps"].get(c.sweep) or {}).get("budget")) for c in costs})
    verdicts = {c["verdict"] for c in unsettled}
    one = len(unsettled) == 1
    phrases = ((INCONCLUSIVE, "is inconclusive" if one else "are inconclusive"),
               (DISAGREES, "disagrees with its anchor" if one else "disagree with their anchors"))
    what = " or ".join(p for v, p in phrases if v in verdicts)
    parts = [f"`make sweep-{c.sweep} BUDGET=full`, {c.runs} runs (epochs: {c.epochs}), {c.steps / 1e6:.1f} M "
             f"optimiser steps, {_hours(c.gpu_hours[0])}–{_hours(c.gpu_hours[1])} GPU hours at the assumed rate"
             for c in costs]
    return (f"**At budget {', '.join(budgets)}, {len(unsettled)} of {len(answer['checks'])} comparisons {what}.** "
            f"Whether longer training changes {'it' if one else 'them'} is for the full budget to show: " + "; ".join(parts) + ".")


def findings_md(built: list[Built], meta: dict[str, Any], data: Path, figures: Path, source: Path, where: Path,
                sweeps: Path | None = None) -> str:
    sweeps = sweeps if sweeps is not None else sweeps_dir(source)

    def rel(path: Path) -> str:
        return Path(os.path.relpath(Path(path).resolve(), where.resolve())).as_posix()

    lines = [
        "# Findings",
        "",
        f"Generated by `make report` (`ablate report build`) from the tables in `{rel(data)}/`; do not edit by hand.",
        "Every number below is computed by a notebook from those tables: means ± 95 % t-intervals over seeds,",
        "each variant of a tuned sweep at the learning rate its stage 1 chose on validation (an untuned sweep with",
        "several: its best on validation); a difference inside its interval is reported as \"no measurable",
        "difference\", and a comparison whose two arms both sit at or below the task's reference level (chance, or",
        "the order-blind level) is inconclusive: two runs that learned nothing are no evidence either way.",
        "",
        "## Where the data came from",
        "",
        *_md_table(["table", "runs", "budget", "commit", "machine", "date"], provenance_rows(built, meta)),
        "",
        "## Summary",
        "",
    ]
    summary = [[a["title"], a["verdict"]] for b in built for a in b.answers]
    summary += [[b.name, f"notebook failed: {b.error}"] for b in built if b.error]
    lines += [*_md_table(["question or claim", "compared with the published anchors"], summary), ""]
    costs = full_costs(built, meta, data, sweeps)
    if costs:
        lines += full_budget_section(costs, meta)
    for b in built:
        for a in b.answers:
            lines += [f"## {a['title']}", "", f"**Question.** {a['question']}", "", f"**Answer.** {a['answer']}", ""]
            if a.get("figure"):
                lines += [f"![{a['title']}]({rel(figures / a['figure'])})", ""]
            if a["checks"]:
                lines += [f"**Published anchors** — overall: **{a['verdict']}**", ""]
                for c in a["checks"]:
                    evidence = "" if c["verdict"] == NOT_RUN else f" ({c['evidence']})"
                    lines.append(f"- *{c['cite']}* — {c['claim']}: **{c['verdict']}**{evidence}")
                lines.append("")
            unsettled = [c for c in a["checks"] if c["verdict"] in (INCONCLUSIVE, DISAGREES)]
            mine = [costs[n] for n in a.get("sweeps") or [] if n in costs]
            if unsettled and mine:
                lines += [settle_line(a, unsettled, mine, meta), ""]
            lines += [f"Notebook: [`{b.name}.py`]({rel(source / (b.name + '.py'))})", ""]
        if b.error:
            lines += [f"## {b.name}", "", f"The notebook failed: `{b.error}`", ""]
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------ index.html

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.5; color: #222; }
table { border-collapse: collapse; font-size: 0.9rem; } td, th { border: 1px solid #ccc; padding: 0.2rem 0.5rem; }
section { border-top: 1px solid #ddd; margin-top: 1.5rem; }
.verdict { font-weight: 600; padding: 0.1rem 0.4rem; border-radius: 0.3rem; background: #eee; }
.agrees { background: #d7f0d7; } .disagrees, .partly-disagrees { background: #f6d5d5; }
.not-run-yet { background: #f3ecc9; }
img { max-width: 100%; } code { background: #f4f4f4; padding: 0 0.2rem; }
"""


def _md(text: str) -> str:
    import mistune

    return mistune.html(text)


def _img(path: Path) -> str:
    try:
        data = base64.b64encode(path.read_bytes()).decode()
    except FileNotFoundError:
        return ""
    return f'<img alt="{html.escape(path.name)}" src="data:image/png;base64,{data}">'


def index_html(built: list[Built], meta: dict[str, Any], data: Path, figures: Path) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>ablate — findings</title>',
        f"<style>{STYLE}</style></head><body>",
        "<h1>ablate — what the experiments say</h1>",
        f"<p>Every answer is computed by its notebook from the tables in <code>{html.escape(str(data))}</code>: "
        "means ± 95 % t-intervals over seeds, each variant at its best learning rate.</p>",
    ]
    for b in built:
        for a in b.answers:
            verdict = a["verdict"]
            css = verdict.replace(" ", "-").replace(",", "")
            parts += [
                "<section>",
                f"<h2>{html.escape(a['title'])} <span class=\"verdict {css}\">{html.escape(verdict)}</span></h2>",
                f"<p><b>Question.</b> {html.escape(a['question'])}</p>",
                _md(markdown(a)),
                _img(figures / a["figure"]) if a.get("figure") else "",
                f'<p><a href="{html.escape(b.html.name)}">notebook: {html.escape(b.name)}</a></p>',
                "</section>",
            ]
        if b.error:
            parts += ["<section>", f"<h2>{html.escape(b.name)}: the notebook failed</h2>",
                      f"<pre>{html.escape(b.error)}</pre>",
                      f'<p><a href="{html.escape(b.html.name)}">the partial notebook</a></p>' if b.html else "",
                      "</section>"]
    rows = provenance_rows(built, meta)
    parts += ["<section><h2>Where the data came from</h2><table>",
              "<tr>" + "".join(f"<th>{h}</th>" for h in ("table", "runs", "budget", "commit", "machine", "date")) + "</tr>"]
    parts += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows]
    parts += ["</table></section>", "<section><h2>Notebooks</h2><ul>"]
    parts += [f'<li><a href="{html.escape(b.html.name)}">{html.escape(b.name)}</a>'
              f'{" — failed" if b.error else ""}</li>' for b in built if b.html]
    parts += ["</ul></section>", "</body></html>", ""]
    return "\n".join(p for p in parts if p is not None)
