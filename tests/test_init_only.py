"""trainer.max_steps=0: a run that measures the model as initialised and trains nothing (issue 24, Q4's
initialisation probes over a hundred seeds cost no training)."""

from __future__ import annotations

import math

import pytest

from ablate import config as C
from ablate.results import table
from ablate.results.cost import steps_of
from tests.test_resume import COPY
from tests.test_train import run


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")


def test_an_init_only_run_records_the_init_probes_of_the_trained_run_and_nothing_else(tmp_path):
    """The same config and seed, trained and not: the init-only run's probes are the trained run's
    `probe/init/*` to the bit, it has no checkpoint, no metrics.csv, no test metrics, global_step 0,
    and the results table reads it as a completed run."""
    items = [*COPY, "model.n_layers=3", "model.norm=pre"]
    trained = run(*items, f"run.dir={tmp_path / 'trained'}")
    initial = run(*items, "trainer.max_steps=0", f"run.dir={tmp_path / 'init'}")
    assert initial["status"] == "completed" and initial["global_step"] == 0
    init_probes = {k: v for k, v in trained["probes"].items() if k.startswith("probe/init/")}
    assert initial["probes"] == init_probes and len(init_probes) > 20
    assert not any(k.startswith(("test/", "val/", "train/")) for k in initial["metrics"])
    assert set(initial["metrics"]) == {k for k in trained["metrics"] if k.startswith("ref/")}
    assert not (tmp_path / "init" / "last.ckpt").exists() and not (tmp_path / "init" / "metrics.csv").exists()
    record = table.read_run(tmp_path / "init")
    assert record.status == "completed" and record.probes["probe/init/grad_ratio"] == init_probes["probe/init/grad_ratio"]


def test_max_steps_zero_costs_no_steps_and_below_minus_one_is_refused():
    cfg = C.build(C.parse_overrides([*COPY, "trainer.max_steps=0"]))
    assert steps_of(cfg) == 0
    with pytest.raises(C.ConfigError, match=r"trainer.max_steps=-2"):
        C.build(C.parse_overrides([*COPY, "trainer.max_steps=-2"]))
    assert math.isnan(run(*COPY, "trainer.max_steps=0", "run.probes=false")["train_samples_per_s"])
