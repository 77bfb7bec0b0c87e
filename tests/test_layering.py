"""The layers hold: every import of every module (inside functions too) follows tests/layering.RULES,
and the checker itself finds a forbidden import wherever it is written."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.layering import RULES, Rule, check, edges_of, imports

ROOT = Path(__file__).resolve().parents[1]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


RULES_OF_PKG = (
    Rule("pkg.models", allowed=("pkg.models",), why="pure"),
    Rule("pkg.tasks", forbidden=("pkg.report",), why="below reports"),
)


def test_checker_finds_a_forbidden_import_inside_a_function(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/models/__init__.py": "from .layer import Layer\n",
        "pkg/models/layer.py": """
            import torch

            class Layer:
                def forward(self):
                    from ..tasks import loss  # hidden edge: models -> tasks
                    return loss
            """,
        "pkg/tasks/__init__.py": "from ..models import Layer\n",
        "pkg/tasks/loss.py": """
            def run():
                if True:
                    import pkg.report.build as b  # hidden edge: tasks -> report
                    return b
            """,
        "pkg/report/__init__.py": "",
        "pkg/report/build.py": "from ..tasks import loss\n",  # allowed: no rule on report here
    })
    problems = check(edges_of(tmp_path, "pkg"), RULES_OF_PKG, project="pkg")
    assert len(problems) == 2, problems
    assert "pkg/models/layer.py:6: pkg.models.layer imports pkg.tasks" in problems[0]
    assert "may import only pkg.models" in problems[0]
    assert "pkg/tasks/loss.py:4: pkg.tasks.loss imports pkg.report.build" in problems[1]


def test_checker_is_silent_on_a_clean_package(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/models/__init__.py": "import math\nfrom . import layer\n",
        "pkg/models/layer.py": "from .sub import x\n",
        "pkg/models/sub.py": "x = 1\n",
    })
    assert check(edges_of(tmp_path, "pkg"), RULES_OF_PKG, project="pkg") == []


def test_relative_imports_resolve_to_absolute_names(tmp_path):
    _write(tmp_path, {"pkg/a/b/__init__.py": "from ...c import d\nfrom . import e\n",
                      "pkg/a/f.py": "from .g import h\nfrom .. import i\n"})
    got = {e.imported for p in ("pkg/a/b/__init__.py", "pkg/a/f.py") for e in imports(tmp_path / p, tmp_path)}
    assert got == {"pkg.c", "pkg.c.d", "pkg.a.b", "pkg.a.b.e", "pkg.a.g", "pkg.a.g.h", "pkg", "pkg.i"}


@pytest.mark.parametrize("rule", RULES, ids=[r.layer for r in RULES])
def test_the_project_keeps_its_layers(rule):
    edges = edges_of(ROOT, "ablate") + [e for p in sorted((ROOT / "reports").glob("*.py"))
                                        for e in imports(p, ROOT)]
    problems = check(edges, (rule,))
    assert not problems, "\n".join(problems)
