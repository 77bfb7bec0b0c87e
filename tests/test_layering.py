"""The layers hold: every import of every module (inside functions too) follows tests/layering.RULES,
and the checker itself finds a forbidden import wherever it is written."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import layering
from tests.layering import (
    BELOW_REPORTS,
    HEAVY_LIBRARIES,
    RULES,
    Graph,
    Rule,
    check,
    edges_of,
    imports,
    module_name,
)

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


@functools.cache
def project_edges() -> tuple:
    """Every import of the package and the notebooks, parsed once for all the rules (each parse: 2 s here)."""
    return tuple(edges_of(ROOT, "ablate") + [e for p in sorted((ROOT / "reports").glob("*.py"))
                                             for e in imports(p, ROOT)])


@pytest.mark.parametrize("rule", RULES, ids=[r.layer for r in RULES])
def test_the_project_keeps_its_layers(rule):
    problems = check(list(project_edges()), (rule,))
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------ reports read tables only, transitively

REPORT_MODULES = sorted([module_name(p, ROOT) for p in (ROOT / "ablate" / "report").rglob("*.py")]
                        + [module_name(p, ROOT) for p in (ROOT / "reports").glob("*.py")])


def test_the_walk_sees_the_packages_that_export_through_ablate_lazy():
    """ablate.lazy.exports assigns a package's __getattr__: the walk follows its LAZY names as it follows a
    written one (it lost them once, when the packages moved to the helper)."""
    graph = Graph(ROOT)
    for package, name, home in (("ablate.results", "aggregate", "ablate.results.stats"),
                                ("ablate.models", "RoPE", "ablate.models.positional"),
                                ("ablate.data", "CopyTask", "ablate.data.copytask")):
        assert (graph.lazy(package) or {}).get(name) == home, package


def test_the_walk_names_the_chain_through_a_lazy_package_and_a_call_time_import(tmp_path, monkeypatch):
    """A report reaches the config through a lazily exported name of the results package, and the config
    imports torch inside a function: the walk names every step and where it is written. The CLI entry
    point's own call-time import of the harness is not followed; its import-time one is."""
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/results/__init__.py": """
            LAZY = {"load": ".table", "aggregate": ".stats"}

            def __getattr__(name):
                import importlib
                return getattr(importlib.import_module(LAZY[name], __name__), name)
            """,
        "pkg/results/stats.py": "import numpy\n",
        "pkg/results/table.py": "from ..config import keys\n",
        "pkg/config.py": "def keys():\n    import torch\n    return torch\n",
        "pkg/report/__init__.py": "from ..results import aggregate\n",
        "pkg/report/data.py": "def table():\n    from ..results import load\n    return load\n",
        "pkg/report/cli.py": "def main():\n    from ..results.table import keys\n",
        "pkg/report/cli2.py": "from ..results.table import keys\n",
    })
    graph = Graph(tmp_path, packages=("pkg",), scripts=())
    forbidden = ("pkg.config",)
    assert graph.chains("pkg.report", forbidden) == []  # stats is clean; the package imports nothing at import
    assert graph.chains("pkg.report.data", forbidden) == [
        "pkg.report.data -> pkg.results.table for pkg.results.load (pkg/report/data.py:2) "
        "-> pkg.config (pkg/results/table.py:1)"]
    assert graph.chains("pkg.results.table", ()) == [
        "pkg.results.table -> pkg.config (pkg/results/table.py:1) -> torch (pkg/config.py:2)"]
    monkeypatch.setattr(layering, "ENTRY_POINTS", ("pkg.report.cli", "pkg.report.cli2"))
    assert graph.chains("pkg.report.cli", forbidden) == []  # inside main(): run only when the user runs it
    assert graph.chains("pkg.report.cli2", forbidden) == [
        "pkg.report.cli2 -> pkg.results.table (pkg/report/cli2.py:1) -> pkg.config (pkg/results/table.py:1)"]


def test_the_walk_refuses_a_module_getattr_it_cannot_see_through(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "def __getattr__(name):\n    return 1\n",
                      "pkg/a.py": "from pkg import thing\n"})
    with pytest.raises(ValueError, match="a module __getattr__ without a literal LAZY dict"):
        Graph(tmp_path, packages=("pkg",), scripts=()).chains("pkg.a", ())


@pytest.mark.parametrize("module", REPORT_MODULES)
def test_reports_reach_no_training_code_even_transitively(module):
    """Issue 14: ablate/report and reports/*.py import nothing of training, tasks, data, models, sweeps,
    the config, run directories or probes, nor torch / lightning / wandb, at import time or inside a
    function, directly or through any module they import."""
    chains = Graph(ROOT).chains(module)
    assert not chains, "\n".join(chains)


def test_importing_the_report_and_the_notebooks_imports_loads_no_training_code():
    """What a notebook runs before it reads a table: `import ablate.report` (and the CLI module), then
    each notebook's own imports. Nothing of the harness below the results layer is in sys.modules."""
    statements = ["import ablate.report", "import ablate.report.cli"]
    for path in sorted((ROOT / "reports").glob("*.py")):
        tree = ast.parse(path.read_text())
        statements += [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    code = "\n".join([*dict.fromkeys(statements), textwrap.dedent(f"""
        import sys
        bad = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY_LIBRARIES!r}
                     or any(m == f or m.startswith(f + '.') for f in {BELOW_REPORTS!r}))
        print(' '.join(bad))
        """)])
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == []
