"""The report builds the report tests read, made once per test session (each is every notebook in a real
Jupyter kernel, about a minute and a half here): on the smoke fixture (tests/data/reports) and on the
committed quick-budget data (reports/data). conftest.py makes them fixtures of every test module."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ablate.report.build import build

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "reports"
FIXTURE = Path(__file__).parent / "data" / "reports"


def quiet(_message: str) -> None:
    pass


@pytest.fixture(scope="session")
def fixture_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return out, build(SOURCES, FIXTURE, out, log=quiet), FIXTURE


@pytest.fixture(scope="session")
def committed_build(tmp_path_factory):
    """What `make report` does without new runs, in a copy of reports/ (and sweeps/) so the committed
    files stay untouched: the notebooks on the committed data, FINDINGS.md and figures beside them."""
    root = tmp_path_factory.mktemp("committed")
    out = root / "reports"
    shutil.copytree(SOURCES, out, ignore=shutil.ignore_patterns("build", "figures", "FINDINGS.md", "FINDINGS.zh.md"))
    shutil.copytree(ROOT / "sweeps", root / "sweeps")
    return out, build(out, out / "data", out, log=quiet), out / "data"


@pytest.fixture(params=["fixture", "committed"])
def built(request):
    """The report built on the smoke fixture, and on the committed quick-budget data (reports/data)."""
    return request.getfixturevalue(f"{request.param}_build")
