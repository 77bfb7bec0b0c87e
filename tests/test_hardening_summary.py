"""A summary.json far bigger than a run writes (a sparse 20 GB file) is read through the one capped
reader: unreadable for the trainer and the sweep runner (set aside, the run goes on), `corrupt` in the
table, never a MemoryError."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ablate import cli
from ablate.results import load
from ablate.rundir import read_summary

from .hardening_fixtures import TINY, by_status, runs_copy, trained_runs  # noqa: F401 - fixtures

HUGE = 20_000_000_000  # bytes; a sparse file: no disk is used


def sparse(path: Path, size: int = HUGE) -> None:
    path.write_text('{"status": "completed", ')
    os.truncate(path, size)
    assert path.stat().st_size == size and path.stat().st_blocks * 512 < 1 << 20


def test_a_20_gb_summary_is_unreadable_for_the_runner_and_corrupt_in_the_table(runs, capsys):
    from ablate import rundir
    from ablate.sweep import runner

    victim = by_status(runs, "completed")[0]
    sparse(victim / "summary.json")
    assert rundir.read_summary(victim) is None and not rundir.is_finished(victim)
    assert rundir.json_problem(victim / "summary.json", "status") == (
        f"is {HUGE:,} bytes, far more than a run writes")
    assert runner.read_summary is rundir.read_summary  # the runner's one reader
    table = load("hard").set_index("run_dir")
    assert table.loc[str(victim), "status"] == "corrupt"
    assert table.loc[str(victim), "error"] == f"summary.json is {HUGE:,} bytes, far more than a run writes"
    assert cli.main(["results", "hard"]) == 0
    err = capsys.readouterr().err
    assert f"summary.json is {HUGE:,} bytes" in err and "MemoryError" not in err


def test_ablate_train_sets_a_20_gb_summary_aside_and_runs(tmp_path, capsys):
    folder = tmp_path / "big"
    folder.mkdir()
    sparse(folder / "summary.json")
    assert cli.main(["train", *TINY, f"run.dir={folder}"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["status"] == "completed"
    assert read_summary(folder)["status"] == "completed"
    (aside,) = folder.glob("summary.json.corrupt-*")
    assert aside.stat().st_size == HUGE
    assert f"{folder / 'summary.json'} is {HUGE:,} bytes, far more than a run writes; set aside" in err


def test_a_clock_set_back_during_a_run_leaves_its_wall_time_positive(tmp_path, monkeypatch):
    """The machine's clock stepped back two days mid-run (NTP, a VM restored) recorded wall_time_s =
    -172,742 in summary.json, the results and compare: durations are read off a monotonic clock."""
    import time

    import pytorch_lightning as pl

    from ablate import config as C
    from ablate.train import train

    wall = time.time

    class StepBack(pl.Callback):
        def on_train_batch_end(self, *args):
            monkeypatch.setattr(time, "time", lambda: wall() - 172_742)

    cfg = C.build(C.parse_overrides([*TINY, f"run.dir={tmp_path / 'run'}"]))
    summary = train(cfg, log=lambda *a: None, callbacks=[StepBack()])
    assert summary["status"] == "completed" and 0 < summary["wall_time_s"] < 600
    assert read_summary(tmp_path / "run")["wall_time_s"] == summary["wall_time_s"]
