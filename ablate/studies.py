"""The questions the reports answer, each with one home: `reports/<notebook>.yaml` beside its notebook.

A study is one notebook (`reports/<notebook>.py`), the sweep files it reads and this manifest:

    order: 3                                    # its place in the findings, the index and `ablate studies`
    questions:                                  # what the notebook answers, one Answer each, in this order
      - key: q3                                 # the Answer's key: its page is reports/findings/q3.md
        title: Q3 · Several small heads or one big one
        title_zh: Q3 · 多个小头，还是一个大头
        question: Why does multi-head attention split the width ...?
        question_zh: 为什么多头注意力要把维度拆成几个子空间 ...？
        sweeps: [heads, heads_tutorial, heads_poshist, heads_poshist_16]   # every table the answer reads
        primary: [heads_poshist, heads_poshist_16]                          # those its primary tests read
    sweeps:                                     # per sweep, optional: what the dashboard and the export add
      heads_poshist:
        probes: [probe/final/rowmax_l0]         # the summary scalars `ablate dashboard` shows
        exports: [relations]                    # the arrays `ablate report export` keeps for the figures

Read by `ablate report build` (which notebooks run, in which order; each must answer exactly its
manifest's questions), the notebooks themselves (`R.question("q3", anchors=...)` takes its title,
question and sweeps from here), `ablate report export` (EXPORTS), `ablate dashboard` (title, probes)
and `ablate studies` (the listing). Nothing else names a question: a new one is a notebook, its sweep
files and its manifest, with no edit under ablate/.

A leaf module (yaml only): every layer may read it, a notebook included.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .yamlfile import YamlFileError, read_yaml

STUDIES_ENV = "ABLATE_STUDIES"  # the folder of the manifests (`ablate report build` sets it to its source)
# The extra arrays `ablate report export` can keep for a sweep (ablate.results.export implements each;
# a test checks the two lists agree).
EXPORTS = {
    "attention_init": "layer-0 attention maps at initialisation of each variant's first seed (probes.npz)",
    "attention_final": "layer-0 attention maps after training of each variant's first seed (probes.npz)",
    "permuted": "the final model's layer-0 maps on the probe example with its positions reordered (checkpoint)",
    "sentence": "every run's layer-0 attention on 猫坐在垫子上 and on 垫子在猫坐上 (copy task, checkpoint)",
    "relations": "every run's weight per head on the token two back, its own token and BOS (checkpoint)",
    "by_position": "every run's test accuracy at each emitted position (probes.npz, else its checkpoint)",
}
TOP = {"order", "questions", "sweeps"}
QUESTION_KEYS = {"key", "title", "title_zh", "question", "question_zh", "sweeps", "primary"}
SWEEP_KEYS = {"probes", "exports"}


class StudyError(ValueError):
    """A manifest that cannot be used; the message names the file, the problem and the fix."""


@dataclass(frozen=True)
class Question:
    key: str
    title: str
    title_zh: str
    text: str
    text_zh: str
    sweeps: tuple[str, ...]
    primary: tuple[str, ...]

    @property
    def secondary(self) -> tuple[str, ...]:
        return tuple(s for s in self.sweeps if s not in self.primary)


@dataclass(frozen=True)
class Study:
    notebook: str  # reports/<notebook>.py
    path: Path  # its manifest
    order: int
    questions: tuple[Question, ...]
    probes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # sweep -> dashboard probe scalars
    exports: dict[str, tuple[str, ...]] = field(default_factory=dict)  # sweep -> EXPORTS names

    @property
    def sweeps(self) -> list[str]:
        return list(dict.fromkeys(s for q in self.questions for s in q.sweeps))


def _strings(value: Any, where: str, path: Path, allow_empty: bool = True) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value) \
            or (not value and not allow_empty):
        raise StudyError(f"{path}: {where} must be a list of names, e.g. [pos_enc, pos_enc_causal]; "
                         f"got {value!r}")
    if len(set(value)) != len(value):
        raise StudyError(f"{path}: {where} names {sorted(v for v in value if value.count(v) > 1)[0]} twice; "
                         "name each once")
    return tuple(value)


def _text(entry: dict, key: str, where: str, path: Path) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise StudyError(f"{path}: {where} has no {key}; write it as one line of text")
    return " ".join(value.split())


def _unknown(got: dict, allowed: set[str], where: str, path: Path) -> None:
    extra = sorted(set(got) - allowed)
    if extra:
        raise StudyError(f"{path}: {where} has an unknown key {extra[0]!r}; the keys are {', '.join(sorted(allowed))}")


def _question(entry: Any, i: int, path: Path) -> Question:
    where = f"questions[{i}]"
    if not isinstance(entry, dict):
        raise StudyError(f"{path}: {where} must be a mapping with {', '.join(sorted(QUESTION_KEYS))}")
    _unknown(entry, QUESTION_KEYS, where, path)
    sweeps = _strings(entry.get("sweeps"), f"{where}.sweeps", path, allow_empty=False)
    primary = _strings(entry.get("primary", []), f"{where}.primary", path)
    stray = [s for s in primary if s not in sweeps]
    if stray:
        raise StudyError(f"{path}: {where}.primary names {stray[0]}, which is not in its sweeps; "
                         "list every table the answer reads under sweeps")
    return Question(_text(entry, "key", where, path), _text(entry, "title", where, path),
                    _text(entry, "title_zh", where, path), _text(entry, "question", where, path),
                    _text(entry, "question_zh", where, path), sweeps, primary)


def read_study(path: Path | str) -> Study:
    """The manifest at `path` (reports/<notebook>.yaml), checked; StudyError (one line) otherwise."""
    path = Path(path)
    try:
        raw = read_yaml(path, "study manifest")
    except YamlFileError as err:
        raise StudyError(str(err)) from None
    if not isinstance(raw, dict):
        raise StudyError(f"{path}: a study manifest is a mapping with {', '.join(sorted(TOP))}")
    _unknown(raw, TOP, "the manifest", path)
    order = raw.get("order")
    if not isinstance(order, int) or isinstance(order, bool):
        raise StudyError(f"{path}: order must be an integer (its place among the studies); got {order!r}")
    entries = raw.get("questions")
    if not isinstance(entries, list) or not entries:
        raise StudyError(f"{path}: questions must list the notebook's questions (key, title, title_zh, question, "
                         "question_zh, sweeps, primary)")
    questions = tuple(_question(e, i, path) for i, e in enumerate(entries))
    keys = [q.key for q in questions]
    if len(set(keys)) != len(keys):
        raise StudyError(f"{path}: two questions have the key {next(k for k in keys if keys.count(k) > 1)!r}; "
                         "keys name each question once")
    per_sweep = raw.get("sweeps") or {}
    if not isinstance(per_sweep, dict):
        raise StudyError(f"{path}: sweeps must map a sweep name to its probes and exports")
    read = {s for q in questions for s in q.sweeps}
    probes: dict[str, tuple[str, ...]] = {}
    exports: dict[str, tuple[str, ...]] = {}
    for name, entry in per_sweep.items():
        where = f"sweeps.{name}"
        if name not in read:
            raise StudyError(f"{path}: {where}: no question of this manifest reads {name}; "
                             "add it to a question's sweeps or remove the entry")
        if not isinstance(entry, dict):
            raise StudyError(f"{path}: {where} must be a mapping with probes and/or exports")
        _unknown(entry, SWEEP_KEYS, where, path)
        p = _strings(entry.get("probes", []), f"{where}.probes", path)
        bad = [k for k in p if not k.startswith("probe/")]
        if bad:
            raise StudyError(f"{path}: {where}.probes: {bad[0]!r} is not a probe scalar; name one such as "
                             "probe/final/rowmax_l0 (`_last` for the last layer)")
        e = _strings(entry.get("exports", []), f"{where}.exports", path)
        bad = [k for k in e if k not in EXPORTS]
        if bad:
            raise StudyError(f"{path}: {where}.exports: unknown export {bad[0]!r}; choose from {', '.join(EXPORTS)}")
        if p:
            probes[name] = p
        if e:
            exports[name] = e
    return Study(path.stem, path, order, questions, probes, exports)


def studies_dir() -> Path:
    """$ABLATE_STUDIES, else ./reports where it holds manifests, else the repository's reports/."""
    if os.environ.get(STUDIES_ENV):
        return Path(os.environ[STUDIES_ENV])
    here = Path("reports")
    if any(here.glob("*.yaml")):
        return here
    if any(Path(".").glob("*.yaml")) and any(Path(p.stem + ".py").is_file() for p in Path(".").glob("*.yaml")):
        return Path(".")  # a notebook opened inside reports/: a manifest <notebook>.yaml beside its <notebook>.py
    return Path(__file__).resolve().parents[1] / "reports"


def load(folder: Path | str | None = None) -> list[Study]:
    """Every study of `folder` (default studies_dir()), in their order: each `<notebook>.yaml` beside its
    `<notebook>.py`. StudyError when a manifest is bad, has no notebook, two share an order or a question
    key, or two say what the dashboard or export adds for the same sweep (one home each)."""
    folder = Path(folder) if folder is not None else studies_dir()
    studies = [read_study(p) for p in sorted(folder.glob("*.yaml"))]
    for s in studies:
        if not (folder / f"{s.notebook}.py").is_file():
            raise StudyError(f"{s.path}: no notebook {folder / (s.notebook + '.py')} beside it; a manifest "
                             "describes the notebook of its own name")
    seen_order: dict[int, str] = {}
    seen_key: dict[str, str] = {}
    seen_sweep: dict[str, str] = {}
    for s in studies:
        if s.order in seen_order:
            raise StudyError(f"{s.path}: order {s.order} is {seen_order[s.order]}'s too; give each study its own")
        seen_order[s.order] = s.notebook
        for q in s.questions:
            if q.key in seen_key:
                raise StudyError(f"{s.path}: question key {q.key!r} is also {seen_key[q.key]}'s; keys are unique")
            seen_key[q.key] = s.notebook
        for name in {*s.probes, *s.exports}:
            if name in seen_sweep:
                raise StudyError(f"{s.path}: sweeps.{name} is also described by {seen_sweep[name]}.yaml; "
                                 "describe a sweep's probes and exports in one manifest")
            seen_sweep[name] = s.notebook
    return sorted(studies, key=lambda s: s.order)


def orphans(folder: Path | str | None = None) -> list[str]:
    """The notebooks of `folder` that have no manifest (each must have one to be built)."""
    folder = Path(folder) if folder is not None else studies_dir()
    return sorted(p.stem for p in folder.glob("*.py") if not (folder / f"{p.stem}.yaml").is_file())


def question(key: str, folder: Path | str | None = None) -> Question:
    """The question `key` of the studies in `folder`; StudyError naming the keys there otherwise."""
    studies = load(folder)
    for s in studies:
        for q in s.questions:
            if q.key == key:
                return q
    keys = [q.key for s in studies for q in s.questions]
    raise StudyError(f"no question {key!r} in the manifests of {Path(folder) if folder else studies_dir()}; "
                     f"the keys are {', '.join(keys)}")


def of_sweep(name: str, studies: list[Study]) -> tuple[Question | None, tuple[str, ...], tuple[str, ...]]:
    """(the question a sweep answers — the first that names it primary, else the first that reads it —,
    its dashboard probes, its extra exports)."""
    reading = [q for s in studies for q in s.questions if name in q.sweeps]
    q = next((q for q in reading if name in q.primary), reading[0] if reading else None)
    probes = next((s.probes[name] for s in studies if name in s.probes), ())
    exports = next((s.exports[name] for s in studies if name in s.exports), ())
    return q, probes, exports


# ------------------------------------------------------------------ `ablate studies`


def sweep_line(name: str, sweeps: Path | str = "sweeps") -> str:
    """What sweeps/<name>.yaml runs, in a line: its description's first line, else the first sentence of its
    header comment ('no sweep file' where there is none)."""
    import re

    path = Path(sweeps) / f"{name}.yaml"
    if not path.is_file():
        return "no sweep file: a table of `ablate bench`" if name.endswith("_cost") else "no sweep file"
    try:
        raw = read_yaml(path, "sweep file")
    except YamlFileError as err:
        return str(err)
    text = raw.get("description") if isinstance(raw, dict) else None
    if isinstance(text, str) and text.strip():
        return text.strip().splitlines()[0].strip()
    header = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line.lstrip("#").strip())
    comment = " ".join(" ".join(header).split())
    ends = [m.end() - 1 for m in re.finditer(r"\. ", comment + " ") if not re.search(r"(?:\bal|\be\.g|\bi\.e)$",
                                                                                    comment[: m.start()])]
    return comment[: ends[0]] if ends else comment


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def studies_table(studies: list[Study]) -> list[str]:
    """One row per question: its notebook, title, primary and secondary sweeps (Markdown)."""
    rows = ["| notebook | question | primary sweeps | secondary sweeps |", "| --- | --- | --- | --- |"]
    for s in studies:
        for q in s.questions:
            names = [", ".join(f"`{n}`" for n in group) or "—" for group in (q.primary, q.secondary)]
            rows.append(f"| `{s.notebook}` | {_cell(q.title)} | {names[0]} | {names[1]} |")
    return rows


def sweeps_table(studies: list[Study], sweeps: Path | str = "sweeps") -> list[str]:
    """One row per sweep file: the question it answers (primary or secondary) and its description's first line;
    the sweeps no study reads last."""
    rows = ["| sweep | answers | role | what it runs (its description) |", "| --- | --- | --- | --- |"]
    names = sorted(p.stem for p in Path(sweeps).glob("*.yaml"))
    read = [n for s in studies for n in s.sweeps if n in names]
    for name in [*dict.fromkeys(read), *(n for n in names if n not in read)]:
        q, _, _ = of_sweep(name, studies)
        role = "—" if q is None else ("primary" if name in q.primary else "secondary")
        rows.append(f"| `{name}` | {_cell(q.title) if q else 'no study'} | {role} | {_cell(sweep_line(name, sweeps))} |")
    return rows


def main(argv: list[str]) -> int:
    """`ablate studies [--sweeps] [--source DIR]`: the studies (or every sweep file) as a Markdown table."""
    import sys

    from .cliparse import OneLineParser

    p = OneLineParser(prog="ablate studies", description="the questions the reports answer, each from its manifest "
                      "(reports/<notebook>.yaml): notebook, question, primary and secondary sweeps")
    p.add_argument("--sweeps", action="store_true", help="one row per sweep file instead: the question it answers, "
                   "its role and its description's first line")
    p.add_argument("--source", metavar="DIR", default=None, help="the folder of the notebooks and manifests "
                   "(default ./reports)")
    p.add_argument("--sweeps-dir", metavar="DIR", default="sweeps", help="the sweep files (default ./sweeps)")
    args = p.parse_args(argv)
    try:
        studies = load(args.source)
    except StudyError as err:
        print(f"ablate: {err}", file=sys.stderr)
        return 2
    alone = orphans(args.source)
    if alone:
        print(f"ablate: {alone[0]}.py has no manifest {alone[0]}.yaml beside it; write one (see ablate/studies.py)",
              file=sys.stderr)
        return 2
    rows = sweeps_table(studies, args.sweeps_dir) if args.sweeps else studies_table(studies)
    print("\n".join(rows))
    return 0


def sweep_tasks(sweeps: Path | str = "sweeps") -> dict[str, list[str]]:
    """data.task -> the sweep files that train it (its `value` or `values`; the default task, mnist, where a file
    names none)."""
    out: dict[str, list[str]] = {}
    for path in sorted(Path(sweeps).glob("*.yaml")):
        try:
            raw = read_yaml(path, "sweep file")
        except YamlFileError:
            continue
        param = ((raw or {}).get("parameters") or {}).get("data.task") if isinstance(raw, dict) else None
        tasks = [param.get("value")] if isinstance(param, dict) and "value" in param else \
            list(param.get("values") or []) if isinstance(param, dict) else ["mnist"]
        for task in tasks:
            out.setdefault(str(task), []).append(path.stem)
    return out


def tasks_main(argv: list[str]) -> int:
    """`ablate tasks [plugins=NAMES]`: every data.task of the registry (with the tasks of the plug-ins NAMES, each
    marked with its plug-in), what it tests, its reference levels, its own keys and the sweeps that train it, as a
    Markdown table (docs/train.md shows it)."""
    import sys

    from .cliparse import OneLineParser, plugins_arg
    from .registry import PLUGIN_MISSING, REFERENCE_TEXT, TASKS

    p = OneLineParser(prog="ablate tasks", usage="ablate tasks [plugins=NAMES] [--sweeps-dir DIR]",
                      description="every task (data.task) of ablate/registry.py: what it tests, the reference levels "
                      "its runs record, its own data.* keys, the sweeps that train it",
                      epilog="plugins=NAMES: the tasks of these plug-ins too, each marked with its plug-in "
                      "(docs/plugins.md)")
    p.add_argument("--sweeps-dir", metavar="DIR", default="sweeps", help="the sweep files (default ./sweeps)")
    args = p.parse_args(plugins_arg(argv)[1])  # plugins=NAMES: loaded by the CLI (ablate.cli.cmd_tasks)
    used = sweep_tasks(args.sweeps_dir)
    rows = ["| task | what it tests | reference levels (`ref/<split>/…`) | its own keys | sweeps |",
            "| --- | --- | --- | --- | --- |"]
    for name, task in TASKS.items():
        levels = ", ".join(f"`{r}`" for r in task.references)
        keys = ", ".join(f"`data.{k}`" for k in task.keys) or "—"
        sweeps = ", ".join(f"`{s}`" for s in used.get(name, [])) or "—"
        added = f" (plugins={task.plugin})" if task.plugin else ""
        rows.append(f"| `{name}`{added} | {_cell(task.about)} | {levels} | {keys} | {sweeps} |")
    rows += ["", "The reference levels:", ""]
    rows += [f"- `{level}`: {text}" for level, text in REFERENCE_TEXT.items()]
    print("\n".join(rows))
    unknown = sorted(set(used) - set(TASKS))
    if unknown:
        print(f"ablate: sweep files name unknown tasks {', '.join(unknown)}: {', '.join(used[unknown[0]])}; "
              f"{PLUGIN_MISSING}", file=sys.stderr)
        return 2
    return 0
