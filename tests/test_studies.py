"""One home per question (issue 27): the study manifests (reports/<notebook>.yaml, ablate.studies) are what the
report build, the notebooks, the export, the dashboard and `ablate studies` read, and a new study needs no edit
under ablate/."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ablate import studies
from ablate.dashboard import spec as dashboard
from ablate.report.build import BuildError, build, notebooks
from ablate.results import export as E
from ablate.results.exported import TARGETS
from tests.report_builds import FIXTURE, SOURCES, quiet

ROOT = Path(__file__).resolve().parents[1]
SWEEP_FILES = {p.stem for p in (ROOT / "sweeps").glob("*.yaml")}

MANIFEST = """\
order: 1
questions:
  - key: tiny
    title: Tiny · Does the model beat chance on MNIST rows?
    title_zh: 小问题 · 模型在按行读入的 MNIST 上能超过随机水平吗？
    question: Does the tutorial's model, at every temperature, beat chance on MNIST read as 28 rows?
    question_zh: 教程的模型在每个温度下，能在按 28 行读入的 MNIST 上超过随机水平吗？
    sweeps: [temperature]
    primary: [temperature]
sweeps:
  temperature:
    probes: [probe/final/rowmax_l0]
    exports: [attention_final]
"""

NOTEBOOK = '''\
# %% [markdown]
# # Tiny · Does the model beat chance on MNIST rows?

# %%
from ablate import report as R

LEARNS = R.Anchor("Tutorial", "the model learns MNIST rows", "模型能学会按行读入的 MNIST", kind="outcome",
                  tutorial=True)
Q = R.question("tiny", anchors=[LEARNS])
S = R.sweep("temperature")

# %% tags=["answer"]
acc = float(S.df["test/acc"].mean())
Q.answer(plain=(f"Yes: {100 * acc:.1f} % test accuracy.", f"能：测试准确率 {100 * acc:.1f} %。"),
         mechanism=("", ""), outcome=("", ""), changes=("", ""),
         checks=[LEARNS.judge(acc > 0.1, f"test accuracy {100 * acc:.1f} %", primary=True, reason="above chance (10 %)")])
'''


def new_study(folder: Path, manifest: str = MANIFEST, notebook: str = NOTEBOOK, name: str = "tiny") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(manifest, encoding="utf-8")
    (folder / f"{name}.py").write_text(notebook, encoding="utf-8")
    return folder


# ------------------------------------------------------------------ the committed studies


def test_every_notebook_has_one_manifest_and_every_table_it_names_exists():
    found = studies.load(SOURCES)
    assert [s.notebook for s in found] == notebooks(SOURCES) and studies.orphans(SOURCES) == []
    assert len(found) >= 6
    for s in found:
        for q in s.questions:
            missing = [n for n in q.sweeps if n not in SWEEP_FILES and n not in TARGETS]
            assert not missing, f"{s.path}: {q.key} reads {missing}, which are neither sweep files nor bench tables"
            assert q.primary, f"{s.path}: {q.key} names no primary sweep"


def test_the_committed_findings_answer_exactly_the_manifests_questions_in_their_order():
    """FINDINGS.md's headings are the manifests' titles in the studies' order: nothing else names a question."""
    titles = [q.title for s in studies.load(SOURCES) for q in s.questions]
    headings = [line[3:] for line in (SOURCES / "FINDINGS.md").read_text(encoding="utf-8").splitlines()
                if line.startswith("## ") and line[3:] in titles]
    assert headings == titles
    zh = (SOURCES / "FINDINGS.zh.md").read_text(encoding="utf-8")
    assert all(q.title_zh in zh for s in studies.load(SOURCES) for q in s.questions)


def test_the_exports_the_manifests_may_ask_for_are_the_ones_export_computes():
    source = inspect.getsource(E.run_arrays) + inspect.getsource(E.export) + inspect.getsource(E.export_sweep)
    asked = {m.group(1) for m in re.finditer(r'"(attention_(?:init|final)|[a-z_]+)" in extras', source)}
    asked |= {f"attention_{p}" for p in ("init", "final") if f'"{p}"' in inspect.getsource(E.run_arrays)}
    assert asked == set(studies.EXPORTS)


def test_the_dashboard_takes_each_sweeps_title_and_probes_from_its_manifest():
    title, probes = dashboard.question_of("heads_poshist")
    q3 = studies.question("q3", SOURCES)
    assert title == q3.title and probes == ("probe/final/rowmax_l0",)
    assert dashboard.question_of("baseline") == (None, ())
    # a sweep two questions read belongs to the one that names it primary
    assert dashboard.question_of("rnn_copy")[0] == studies.question("rnn-position", SOURCES).title


def _manual() -> str:
    from ablate import readme

    return "\n".join(page.read_text(encoding="utf-8") for page in readme.pages())


def test_ablate_studies_lists_the_manifests_and_the_manual_shows_its_output():
    for flag in ([], ["--sweeps"]):
        out = subprocess.run([sys.executable, "-m", "ablate", "studies", *flag], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
        assert out.strip() in _manual(), \
            f"the manual's table differs from `ablate studies {' '.join(flag)}`: run `make readme`"
        rows = [r for r in out.splitlines() if r.startswith("| `")]
        if flag:
            assert {r.split("`")[1] for r in rows} == SWEEP_FILES
        else:
            assert len(rows) == sum(len(s.questions) for s in studies.load(SOURCES))


# ------------------------------------------------------------------ a new study: no edit under ablate/


def test_a_new_study_is_built_dashboarded_and_exported_from_its_manifest_alone(tmp_path, monkeypatch):
    """A notebook and its manifest in a folder of their own: the build runs it and writes its answer under the
    manifest's title, the dashboard shows its title and probes, and the export keeps what it asks for."""
    source = new_study(tmp_path / "reports")
    out = tmp_path / "out"
    [built] = build(source, FIXTURE, out, log=quiet)
    assert built.error is None, built.error
    [answer] = built.answers
    assert answer["key"] == "tiny" and answer["title"] == "Tiny · Does the model beat chance on MNIST rows?"
    assert answer["sweeps"] == ["temperature"] and answer["verdict"] == "agrees"
    findings = (out / "FINDINGS.md").read_text(encoding="utf-8")
    assert "## Tiny · Does the model beat chance on MNIST rows?" in findings
    assert "小问题 · 模型在按行读入的 MNIST 上能超过随机水平吗？" in (out / "FINDINGS.zh.md").read_text(encoding="utf-8")
    monkeypatch.setenv(studies.STUDIES_ENV, str(source))
    assert dashboard.question_of("temperature") == ("Tiny · Does the model beat chance on MNIST rows?",
                                                 ("probe/final/rowmax_l0",))
    assert studies.of_sweep("temperature", studies.load())[2] == ("attention_final",)


def test_a_notebook_that_answers_other_questions_than_its_manifest_fails_its_build(tmp_path):
    """Every question of the manifest is answered, once, in its order; a key no manifest has stops the notebook."""
    extra = MANIFEST.replace("sweeps:\n  temperature:", "  - key: extra\n    title: Extra\n    title_zh: 另一个\n"
                             "    question: Another?\n    question_zh: 另一个？\n    sweeps: [temperature]\n"
                             "sweeps:\n  temperature:")
    source = new_study(tmp_path / "reports", manifest=extra)
    [built] = build(source, FIXTURE, tmp_path / "out", log=quiet)
    assert built.error == ("its Answers are tiny, its manifest tiny.yaml lists tiny, extra: answer each of the "
                           "manifest's questions once, in its order")
    source = new_study(tmp_path / "other", manifest=MANIFEST.replace("key: tiny", "key: other"))
    [built] = build(source, FIXTURE, tmp_path / "out2", log=quiet)
    assert built.error == f"CellExecutionError: StudyError: no question 'tiny' in the manifests of {source}; the keys are other"


# ------------------------------------------------------------------ bad manifests: one line each, before any work


BAD = [
    (MANIFEST.replace("order: 1", "order: first"), "order must be an integer (its place among the studies); got 'first'"),
    (MANIFEST.replace("    primary: [temperature]", "    primary: [ffn]"),
     "questions[0].primary names ffn, which is not in its sweeps; list every table the answer reads under sweeps"),
    (MANIFEST.replace("exports: [attention_final]", "exports: [maps]"),
     "sweeps.temperature.exports: unknown export 'maps'; choose from " + ", ".join(studies.EXPORTS)),
    (MANIFEST.replace("probes: [probe/final/rowmax_l0]", "probes: [rowmax]"),
     "sweeps.temperature.probes: 'rowmax' is not a probe scalar; name one such as probe/final/rowmax_l0 "
     "(`_last` for the last layer)"),
    (MANIFEST.replace("    title_zh:", "    titel_zh:"),
     "questions[0] has an unknown key 'titel_zh'; the keys are key, primary, question, question_zh, sweeps, "
     "title, title_zh"),
    (MANIFEST.replace("sweeps:\n  temperature:", "sweeps:\n  ffn:"),
     "sweeps.ffn: no question of this manifest reads ffn; add it to a question's sweeps or remove the entry"),
    ("- a list\n", "a study manifest is a mapping with order, questions, sweeps"),
]


@pytest.mark.parametrize("manifest, line", BAD, ids=[str(i) for i in range(len(BAD))])
def test_a_bad_manifest_is_refused_in_one_line_naming_the_fix(tmp_path, manifest, line):
    source = new_study(tmp_path / "reports", manifest=manifest)
    with pytest.raises(BuildError) as err:
        build(source, FIXTURE, tmp_path / "out", log=quiet)
    assert str(err.value) == f"{source / 'tiny.yaml'}: {line}"
    assert not (tmp_path / "out").exists()  # before any work
    run = subprocess.run([sys.executable, "-m", "ablate", "studies", "--source", str(source)], capture_output=True,
                         text=True, cwd=ROOT)
    assert run.returncode == 2 and run.stdout == "" and run.stderr == f"ablate: {source / 'tiny.yaml'}: {line}\n"


def test_one_home_each_two_studies_cannot_share_a_key_an_order_or_a_sweeps_exports(tmp_path):
    source = new_study(tmp_path / "reports")
    new_study(source, MANIFEST.replace("order: 1", "order: 2").replace("probes: [probe/final/rowmax_l0]\n    ", ""),
              NOTEBOOK, name="twin")
    with pytest.raises(studies.StudyError, match="question key 'tiny' is also tiny's; keys are unique"):
        studies.load(source)
    (source / "twin.yaml").write_text(MANIFEST.replace("key: tiny", "key: twin"), encoding="utf-8")
    with pytest.raises(studies.StudyError, match="order 1 is tiny's too; give each study its own"):
        studies.load(source)
    (source / "twin.yaml").write_text(MANIFEST.replace("key: tiny", "key: twin").replace("order: 1", "order: 2"),
                                      encoding="utf-8")
    with pytest.raises(studies.StudyError, match="sweeps.temperature is also described by tiny.yaml; describe a "
                                                 "sweep's probes and exports in one manifest"):
        studies.load(source)
    (source / "twin.yaml").unlink()
    with pytest.raises(BuildError, match=r"twin.py has no manifest twin.yaml beside it; write one"):
        notebooks(source)
    (source / "twin.py").unlink()
    (source / "lonely.yaml").write_text(MANIFEST.replace("key: tiny", "key: lonely").replace("order: 1", "order: 3")
                                        .replace("sweeps:\n  temperature:\n    probes: [probe/final/rowmax_l0]\n"
                                                 "    exports: [attention_final]\n", ""), encoding="utf-8")
    with pytest.raises(studies.StudyError, match=r"no notebook .*lonely.py beside it"):
        studies.load(source)


def test_a_notebook_names_its_question_by_key_only():
    """R.question takes the key and the anchors; the title, question and sweeps are the manifest's."""
    from ablate import report as R

    q = R.question("q2")
    m = studies.question("q2", SOURCES)
    assert (q.title, q.title_zh, q.text, q.text_zh, tuple(q.sweeps)) == (m.title, m.title_zh, m.text, m.text_zh,
                                                                           m.sweeps)
    with pytest.raises(studies.StudyError, match="no question 'q9' in the manifests of .*; the keys are q1, q2"):
        R.question("q9")
    for path in SOURCES.glob("*.py"):
        calls = re.findall(r"R\.question\(([^)]*)\)", path.read_text(encoding="utf-8"))
        assert all(re.fullmatch(r'"[\w-]+", anchors=\[[\w, ]*\]', c) for c in calls), (path, calls)


def test_the_study_listing_needs_no_torch():
    code = textwrap.dedent("""
        import sys
        from ablate.cli import main
        main(["studies"])
        assert "torch" not in sys.modules, "ablate studies imported torch"
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "| `q1_word_order` |" in out.stdout


def test_ablate_tasks_lists_the_registry_with_the_sweeps_that_train_each_task():
    """The registry's own words (TaskSpec.about, REFERENCE_TEXT) are what the README's tasks table shows."""
    from ablate.registry import REFERENCE_TEXT, TASKS

    out = subprocess.run([sys.executable, "-m", "ablate", "tasks"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() in _manual(), "the manual's tasks table differs from `ablate tasks`: run `make readme`"
    rows = {r.split("`")[1]: r for r in out.splitlines() if r.startswith("| `")}
    assert list(rows) == list(TASKS)
    for name, task in TASKS.items():
        assert task.about in rows[name] and all(f"`{r}`" in rows[name] for r in task.references)
    assert all(f"- `{level}`: {text}" in out for level, text in REFERENCE_TEXT.items())
    trained = {s for name in TASKS for s in re.findall(r"`(\w+)`", rows[name].split(" | ")[-1])}
    assert trained == SWEEP_FILES  # every sweep file trains a task the registry knows
    assert "`pos_enc_extrapolate`" in rows["lookup1"] and "`scaling`" in rows["histogram"]


def test_the_explorers_links_to_the_answers_name_manifest_questions_with_pages():
    """The explorer names each demo's answer by its question's key (page.js ANSWERS): each key is a manifest's,
    and its findings pages exist beside the committed page, in both languages."""
    source = (ROOT / "ablate" / "explore" / "page.js").read_text(encoding="utf-8")
    answers = dict(re.findall(r'(\w+): "([\w-]+)"', re.search(r"const ANSWERS = \{([^}]*)\}", source).group(1)))
    keys = {q.key for s in studies.load(SOURCES) for q in s.questions}
    assert answers and set(answers.values()) <= keys
    for key in answers.values():
        assert (SOURCES / "findings" / f"{key}.md").is_file() and (SOURCES / "findings" / f"{key}.zh.md").is_file()
    assert set(re.findall(r'data-find="(\w+)"', (ROOT / "ablate" / "explore" / "page.html").read_text())) <= set(answers)
