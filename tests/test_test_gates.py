"""The suite on a fresh clone: a test that trains on MNIST skips, saying why, where MNIST is not there, and fails
where CI requires MNIST (ABLATE_REQUIRE_MNIST=1, as .ci/run sets it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pytest(tmp_path: Path, target: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("ABLATE_DATA_DIR", "ABLATE_REQUIRE_MNIST")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--basetemp",
                           str(tmp_path / "basetemp"), target], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**environ, **env})


@pytest.mark.slow
def test_a_real_data_test_skips_without_mnist_and_fails_where_it_is_required(tmp_path):
    empty = tmp_path / "no-data"
    empty.mkdir()
    target = "tests/test_data.py::test_real_mnist"  # every real-data test is marked needs_mnist (conftest)
    done = _pytest(tmp_path, target, ABLATE_DATA_DIR=str(empty))
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 skipped" in done.stdout and f"no MNIST under {empty}" in done.stdout, done.stdout[-3000:]
    required = _pytest(tmp_path, target, ABLATE_DATA_DIR=str(empty), ABLATE_REQUIRE_MNIST="1")
    assert required.returncode == 1 and "1 failed" in required.stdout, required.stdout[-3000:]



def test_every_real_data_test_is_gated_by_needs_mnist():
    """One home for the real-data gate: a test that reads MNIST skips or fails through conftest.needs_mnist (which
    honours ABLATE_REQUIRE_MNIST), never through a skip condition of its own that would skip silently in CI."""
    own = [f"{p.name}:{i}" for p in sorted((ROOT / "tests").glob("test_*.py")) if p.name != Path(__file__).name
           for i, line in enumerate(p.read_text().splitlines(), 1)
           if "MNIST" in line and re.search(r"skip(if)?\(", line)]
    assert own == []
