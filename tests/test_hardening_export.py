"""Issue 23 (hardening, round three), `ablate report export`: a file time far in the future, CSV cells
a spreadsheet would run as formulas, and the data folder's swap as one unit (a kill between renames).
Real tiny copy-task runs, exported into tmp_path."""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ablate import report as R
from ablate.results.export import export
from tests.test_train import TINY_COPY, run

FAR = 300_000_000_000  # `touch -d @300000000000`: the year 11476


def quiet(_line: str) -> None:
    pass


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """Two real runs of group `tiny` (no sweep file: export takes every run): the runs folder."""
    root = tmp_path_factory.mktemp("tiny")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLATE_RUNS_DIR", str(root / "runs"))
        mp.setenv("ABLATE_PROGRESS", "0")
        for seed in (0, 1):
            assert run(*TINY_COPY, "trainer.max_epochs=1", "run.group=tiny", f"seed={seed}")["status"] == "completed"
    (root / "sweeps").mkdir()
    return root


@pytest.fixture
def here(tiny_runs, tmp_path, monkeypatch):
    """A copy of the runs in tmp_path: (runs folder, data folder, sweeps folder)."""
    shutil.copytree(tiny_runs / "runs", tmp_path / "runs")
    shutil.copytree(tiny_runs / "sweeps", tmp_path / "sweeps")
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs", tmp_path / "data", tmp_path / "sweeps"


def summaries(runs: Path) -> list[Path]:
    return sorted((runs / "tiny").glob("*/summary.json"))


def exported_date(runs: Path, data: Path, sweeps: Path) -> str | None:
    export(["tiny"], runs=runs, data=data, sweeps=sweeps, log=quiet)
    return json.loads((data / "meta.json").read_text())["sweeps"]["tiny"]["date"]


# ------------------------------------------------------------------ item 12: the date


def test_a_file_time_in_the_year_11476_does_not_crash_export_and_the_date_is_unknown(here):
    runs, data, sweeps = here
    for path in summaries(runs):
        os.utime(path, (FAR, FAR))
    assert exported_date(runs, data, sweeps) is None  # the runs record no time; a file time is no record
    assert len(R.table("tiny", data)) == 2


def test_the_date_comes_from_the_runs_own_record_not_the_file_times(here):
    """A run that records when it ran (summary.json's provenance.time, ISO 8601) dates the export: the latest
    of them, whatever the files' times say (far future, or the epoch after a copy that lost them)."""
    runs, data, sweeps = here
    for path, when in zip(summaries(runs), ("2026-03-01T10:00:00+00:00", "2026-03-02T23:59:59+00:00")):
        summary = json.loads(path.read_text())
        summary["provenance"]["time"] = when
        path.write_text(json.dumps(summary))
    os.utime(summaries(runs)[0], (FAR, FAR))
    os.utime(summaries(runs)[1], (0, 0))
    assert exported_date(runs, data, sweeps) == "2026-03-02"


def test_a_plausible_file_time_still_dates_runs_that_record_none(here):
    """Runs made before a run recorded its time keep the date they were exported with (summary.json's
    time, when it is not in the future), so exporting them again changes nothing."""
    runs, data, sweeps = here
    stamp = datetime(2026, 1, 2, 12, tzinfo=timezone.utc).timestamp()
    for path in summaries(runs):
        os.utime(path, (stamp, stamp))
    assert exported_date(runs, data, sweeps) == "2026-01-02"


@pytest.mark.parametrize("mtime", [FAR, 1e20, -1e12, float("nan"), 0.0, None])
def test_a_run_date_is_never_a_crash(mtime):
    """What crashed (`year 11476 is out of range`) where a file system keeps such a time (ext4 clamps it to
    2446): every file time gives a date or None, never an exception."""
    from ablate.results.export import run_date

    assert run_date({"provenance": {"commit": "abc"}}, mtime) is None
    assert run_date({"provenance": {"time": "2026-03-02T23:59:59-01:00"}}, mtime) == "2026-03-03"  # UTC
    assert run_date({"provenance": {"time": "yesterday"}}, mtime) is None


# ------------------------------------------------------------------ item 11: formulas in CSV cells


def number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_exported_csv_cells_a_spreadsheet_would_run_are_text(tmp_path, monkeypatch):
    """Runs whose group (`=inj`) and names (`=1+2`, `@SUM(A1)`) a spreadsheet would evaluate: every such
    cell of the exported table and probe curves starts with `'` (ablate.csvcells), the numbers stay
    numbers, and the report reads the cells back as the CSV holds them."""
    import csv
    import io

    from ablate.csvcells import FORMULA_START

    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    for seed, name in ((0, "=1+2"), (1, "@SUM(A1)")):
        assert run(*TINY_COPY, "trainer.max_epochs=1", "run.group==inj", f"run.name={name}", f"seed={seed}",
                   "run.probe_every=4", "run.expensive_probes=false", "run.probe_batch=16")["status"] == "completed"
    (tmp_path / "sweeps").mkdir()
    data = tmp_path / "data"
    export(["=inj"], runs=tmp_path / "runs", data=data, sweeps=tmp_path / "sweeps", log=quiet)
    # run.name is no swept key, so the curves file shows no names; as if it were one (a text key swept):
    from ablate.results import load
    from ablate.results.export import curves_table

    curves_text, _ = curves_table(load("=inj", root=tmp_path / "runs"), ["seed", "run.name"], "=inj", quiet)
    for file, text in (("=inj.csv", (data / "=inj.csv").read_text()), ("curves", curves_text)):
        cells = [c for row in csv.reader(io.StringIO(text)) for c in row]
        assert not [c for c in cells if c.startswith(FORMULA_START) and not number(c)], file
        assert "'=1+2" in cells and "'@SUM(A1)" in cells, file
        assert file == "curves" or "-1" in cells  # a negative number (a config default) stays a number
    table = R.table("=inj", data)
    assert sorted(table["run.name"]) == ["'=1+2", "'@SUM(A1)"] and set(table["run.group"]) == {"'=inj"}
    assert table["test/acc"].dtype == float and table["test/acc"].between(0, 1).all()
    assert (data / "=inj_curves.csv").is_file()


def test_the_committed_tables_hold_no_cell_a_spreadsheet_would_run():
    """So the committed CSVs are what export writes with the rule, and the report rebuilds byte for byte."""
    import pandas as pd

    from ablate.csvcells import safe_frame

    committed = Path(__file__).resolve().parents[1] / "reports" / "data"
    for name in json.loads((committed / "meta.json").read_text())["sweeps"]:
        table = R.table(name, committed)
        pd.testing.assert_frame_equal(safe_frame(table), table, check_dtype=False)
        curves = R.sweep(name, committed).probe_curves()
        if curves is not None:
            pd.testing.assert_frame_equal(safe_frame(curves), curves, check_dtype=False)
