"""NaN and inf in a completed run's summary metrics or metrics.csv make the run `corrupt` (left out of
the statistics and of the tuned choice, the runner's and the table's alike); a diverged run keeps
its status."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ablate import cli
from ablate.results import aggregate, load
from ablate.rundir import read_summary

from .hardening_fixtures import TINY, by_status, edit_summary, runs_copy, trained_runs  # noqa: F401 - fixtures


def plant_csv(run_dir: Path, value: str) -> str:
    """`value` as the first val/acc of the run's metrics.csv; the problem the table names."""
    lines = (run_dir / "metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    row = next(i for i, line in enumerate(lines[1:], 1) if line.split(",")[header.index("val/acc")])
    cells = lines[row].split(",")
    cells[header.index("val/acc")] = value
    lines[row] = ",".join(cells)
    (run_dir / "metrics.csv").write_text("\n".join(lines) + "\n")
    return f"metrics.csv line {row + 1}: val/acc = {value!r} is not a finite number"


@pytest.mark.parametrize("where, value", [("summary", "val/acc_best=inf"), ("summary", "test/acc=nan"),
                                          ("summary", "val/acc_best=-inf"), ("csv", "inf"), ("csv", "nan")])
def test_a_completed_run_with_a_non_finite_value_is_corrupt_and_left_out(where, value, runs, capsys):
    good, bad = by_status(runs, "completed")
    if where == "summary":
        key, number = value.split("=")
        edit_summary(bad, metrics={key: float(number)})
        problem = f"summary.json has {key} = {float(number)}, not a finite number"
    else:
        problem = plant_csv(bad, value)
    table = load("hard").set_index("run_dir")
    assert table.loc[str(bad), "status"] == "corrupt" and table.loc[str(bad), "error"] == problem
    assert table.loc[str(good), "status"] == "completed"
    stats = aggregate(load("hard"), by=[], metrics=["val/acc_best", "test/acc"])
    assert stats.loc[0, "val/acc_best_n"] == 1 and stats.loc[0, "test/acc_n"] == 1
    assert stats.loc[0, "val/acc_best_mean"] == pytest.approx(read_summary(good)["metrics"]["val/acc_best"])
    assert math.isfinite(stats.loc[0, "val/acc_best_mean"])
    assert cli.main(["results", "hard", "--aggregate"]) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "corrupt" in line] == [
        f"ablate: warning: run {bad.name} ({bad}): {problem}; listed with status corrupt, left out of the statistics"]


def test_a_diverged_run_keeps_its_status_with_its_non_finite_loss(runs):
    (diverged,) = by_status(runs, "diverged")
    assert read_summary(diverged)["diverged_loss"] == "nan"  # what the trainer records: a string
    edit_summary(diverged, metrics={"train/loss": math.nan})
    row = load("hard").set_index("run_dir").loc[str(diverged)]
    assert row["status"] == "diverged" and pd.isna(row["error"])


def test_the_runner_does_not_choose_on_a_non_finite_stage_1_run(tmp_path, monkeypatch):
    """A tuned sweep whose stage-1 run says val/acc_best = inf (or whose metrics.csv holds nan): neither the
    runner nor the table makes the variant's choice on it (the table lists the run corrupt)."""
    from ablate.sweep import runner, spec
    from ablate.train import train

    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    params = {k: {"value": yaml.safe_load(v)} for k, v in (item.split("=", 1) for item in TINY)}
    path = sweeps / "tuned.yaml"
    path.write_text(yaml.safe_dump({
        "program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"], "method": "grid",
        "description": "tune optim.lr on seeds 0", "metric": {"name": "val/acc_best", "goal": "maximize"},
        "parameters": {**params, "optim.lr": {"values": [1e-4, 3e-4, 1e-3, 3e-3]}, "seed": {"values": [0, 1]}}}))
    sweep = spec.load(str(path))
    stages = runner.Stages(sweep)
    for run in stages.stage1:
        assert train(run.cfg, log=lambda *a: None)["status"] == "completed"
    (variant,) = stages.variants
    assert stages.decide(variant) is not None  # every stage-1 run finished: a choice
    smallest = runner.run_dir(stages.stage1[0])
    edit_summary(smallest, metrics={"val/acc_best": math.inf})
    assert stages.decide(variant) is None
    stream, out = io.StringIO(), io.StringIO()
    runner.summarise(sweep, runner.Report(total=8, stages=stages), stream, out)
    assert stream.getvalue().splitlines()[0] == (
        f"ablate: {smallest}: summary.json has val/acc_best = inf, not a finite number; its variant's optim.lr "
        "is not chosen on it (delete the folder to run it again)")
    assert json.loads(out.getvalue())["tuned"]["undecided"] == [variant]
    table = load("tuned", sweeps=sweeps)
    assert table["tuned.optim.lr"].isna().all()
    assert (table.set_index("run_dir").loc[str(smallest), "status"]) == "corrupt"
    edit_summary(smallest, metrics={"val/acc_best": 0.5})
    assert stages.decide(variant) is not None
    problem = plant_csv(smallest, "nan")
    assert load("tuned", sweeps=sweeps).set_index("run_dir").loc[str(smallest), "error"] == problem
    assert stages.decide(variant) is None


@pytest.mark.parametrize("extra", [
    ["optim.lr=1e12", "model.norm=none", "run.probes=true", "run.probe_every=1"],  # weights blown by one step
    ["model.temperature=1e-300", "run.probes=true", "run.probe_every=1"],  # non-finite scores as built
    ["model.temperature=1e-300", "run.probes=true", "trainer.max_steps=0"],  # an initialisation-only run
], ids=["weights blow up between probes", "non-finite at init", "non-finite at init, init only"])
def test_a_model_gone_non_finite_is_diverged_wherever_the_probes_see_it(extra, tmp_path):
    """The periodic probe ran after the optimiser step that made the weights non-finite, before the loss guard
    saw it, and crashed (`max(): Expected reduction dim`): the run was recorded `failed`, and a tuned sweep
    reran it on every rerun, never reaching stage 2 (issue 41, item 1)."""
    from ablate import config as C
    from ablate.train import train

    cfg = C.build(C.parse_overrides([*TINY, *extra, f"run.dir={tmp_path / 'run'}"]))
    summary = train(cfg, log=lambda *a: None)
    assert summary["status"] == "diverged" and read_summary(tmp_path / "run")["status"] == "diverged"
    assert summary["diverged_step"] >= 0 and not math.isfinite(float(summary["diverged_loss"]))


def test_a_metrics_csv_with_a_row_out_of_order_is_corrupt(runs):
    """A metrics.csv whose steps go back (a row moved by hand, or appended by something else) was read as a
    learning curve (issue 41's rough edges); it is now `corrupt`, with the line that goes back."""
    run = by_status(runs, "completed")[0]
    lines = (run / "metrics.csv").read_text().splitlines()
    rows = [i for i, line in enumerate(lines[1:], 1) if line.split(",")[0]]
    first, later = rows[0], rows[-1]
    lines[first], lines[later] = lines[later], lines[first]
    (run / "metrics.csv").write_text("\n".join(lines) + "\n")
    table = load("hard").set_index("run_dir")
    assert table.loc[str(run), "status"] == "corrupt"
    assert "metrics.csv line" in table.loc[str(run), "error"] and "out of order" in table.loc[str(run), "error"]
