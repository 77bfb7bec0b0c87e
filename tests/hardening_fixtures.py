"""Fixtures of the issue-23 hardening tests (test_hardening_*.py): real tiny runs of a sweep `hard`
trained once per module (fixture `trained`), and a fresh copy of them per test as $ABLATE_RUNS_DIR (fixture
`runs`): import `trained_runs, runs_copy` into a test module to use them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ablate import config as C
from ablate.rundir import read_summary

TINY = ["data.task=copy", "data.vocab=6", "data.length=4", "data.n_train=128", "data.n_val=32", "data.n_test=32",
        "data.batch_size=32", "model.d_model=16", "model.n_layers=1", "trainer.max_epochs=1", "tracking=none",
        "run.probes=false"]


@pytest.fixture(scope="module", name="trained")
def trained_runs(tmp_path_factory) -> Path:
    """Runs of sweep `hard`: seeds 0 and 1 completed, and one run diverged (lr 1e12 without a norm)."""
    from ablate.train import train

    runs = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLATE_RUNS_DIR", str(runs))
        mp.setenv("ABLATE_PROGRESS", "0")
        for extra, status in ((["seed=0"], "completed"), (["seed=1"], "completed"),
                              (["seed=2", "optim.lr=1e12", "model.norm=none"], "diverged")):
            cfg = C.build(C.parse_overrides([*TINY, "run.group=hard", *extra]))
            assert train(cfg, log=lambda *a: None)["status"] == status
    return runs


@pytest.fixture(name="runs")
def runs_copy(trained, tmp_path, monkeypatch) -> Path:
    """A fresh copy of the trained runs folder, as $ABLATE_RUNS_DIR."""
    root = tmp_path / "runs"
    shutil.copytree(trained, root, symlinks=True)
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(root))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    monkeypatch.setenv("COLUMNS", "250")
    return root


def by_status(root: Path, status: str) -> list[Path]:
    return [d for d in sorted((root / "hard").iterdir()) if (read_summary(d) or {}).get("status") == status]


def edit_summary(run_dir: Path, **changes) -> dict:
    data = json.loads((run_dir / "summary.json").read_text())
    for key, value in changes.items():
        if key == "metrics":
            data["metrics"].update(value)
        else:
            data[key] = value
    (run_dir / "summary.json").write_text(json.dumps(data))  # NaN, Infinity: Python's JSON spelling
    return data
