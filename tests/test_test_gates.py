"""The suite on a fresh clone: a test that trains on MNIST skips, saying why, where MNIST is not there, and fails
where CI requires MNIST (ABLATE_REQUIRE_MNIST=1, as .ci/run sets it)."""

from __future__ import annotations

import os
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
def test_dashboard_real_runs_skip_without_mnist(tmp_path):
    empty = tmp_path / "no-data"
    empty.mkdir()
    target = "tests/test_dashboard.py::test_every_panel_key_is_logged_by_a_real_run[baseline]"
    done = _pytest(tmp_path, target, ABLATE_DATA_DIR=str(empty))
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 skipped" in done.stdout and f"no MNIST under {empty}" in done.stdout, done.stdout[-3000:]
    required = _pytest(tmp_path, target, ABLATE_DATA_DIR=str(empty), ABLATE_REQUIRE_MNIST="1")
    assert required.returncode == 1 and "1 failed" in required.stdout, required.stdout[-3000:]

