"""Fixtures of the modules that run real sweeps (test_sweep.py, test_tune.py): import them by name."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def forkserver():
    """One forkserver for the whole module (an `ablate sweep` command stops the one it starts)."""
    from ablate.sweep import worker

    worker.forkserver()
    yield
    worker.stop_forkserver()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    from ablate.data import mnist

    monkeypatch.setattr(mnist, "network_available", lambda timeout=3.0: False)  # never download
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.chdir(tmp_path)
