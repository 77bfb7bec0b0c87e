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


def record_no_time(path) -> None:
    """summary.json as a run made before runs recorded their time (provenance without `time`) wrote it."""
    summary = json.loads(path.read_text())
    summary["provenance"].pop("time", None)
    path.write_text(json.dumps(summary))


def test_a_file_time_in_the_year_11476_does_not_crash_export_and_the_date_is_unknown(here):
    runs, data, sweeps = here
    for path in summaries(runs):
        record_no_time(path)
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
        record_no_time(path)
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


# ------------------------------------------------------------------ item 6: the swap as one unit


class Killed(BaseException):
    """A kill -9 in the middle of export, in-process: nothing after the failing call runs (no except
    OSError catches it)."""


@pytest.fixture(scope="module")
def probe_runs(tmp_path_factory):
    """Two real runs of group `tiny`: seed 0 with periodic probes (a curves file), seed 1 without. Returns
    (root, {seed: run folder name})."""
    import yaml

    root = tmp_path_factory.mktemp("probed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLATE_RUNS_DIR", str(root / "runs"))
        mp.setenv("ABLATE_PROGRESS", "0")
        probes = ["run.expensive_probes=false", "run.probe_batch=16"]
        assert run(*TINY_COPY, "trainer.max_epochs=1", "run.group=tiny", "seed=0", "run.probe_every=4",
                   *probes)["status"] == "completed"
        assert run(*TINY_COPY, "trainer.max_epochs=1", "run.group=tiny", "seed=1", *probes)["status"] == "completed"
    (root / "sweeps").mkdir()
    ids = {yaml.safe_load((d / "config.yaml").read_text())["seed"]: d.name for d in (root / "runs" / "tiny").iterdir()}
    return root, ids


def runs_of(root: Path, ids: dict[int, str], seeds: tuple[int, ...], where: Path) -> Path:
    """A runs folder holding only the runs of `seeds`."""
    for seed in seeds:
        shutil.copytree(root / "runs" / "tiny" / ids[seed], where / "tiny" / ids[seed])
    return where


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of `folder`, hidden ones too (a staged file left behind shows)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def visible(snap: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in snap.items() if not k.startswith(".")}


def without_files(meta: bytes) -> dict:
    out = json.loads(meta)
    out.pop("files", None)
    return out


def check_all_old_all_new_or_refused(data: Path, old: dict[str, bytes], new: dict[str, bytes]) -> str:
    """What the readers make of `data`: 'old' or 'new' when it is all one export (and every reader reads
    it), else 'refused': the build's check and the readers of any file of the other export refuse it in
    one line that says to run the export again; a reader never returns a file of another export than
    meta.json's."""
    from ablate.results.exported import DataFileError, check_folder, read_curves

    now = visible(snapshot(data))
    meta = without_files(now["meta.json"])
    gen = next(g for g, snap in (("old", old), ("new", new)) if without_files(snap["meta.json"]) == meta)
    same = {k: v for k, v in now.items() if k != "meta.json"} == {k: v for k, v in visible((old, new)[gen == "new"]).items()
                                                                   if k != "meta.json"}
    if same:
        check_folder(data)
    else:
        with pytest.raises(DataFileError) as refused:
            check_folder(data)
        line = str(refused.value)
        assert "\n" not in line and "run the export again (`make report-export`)" in line, line
    expected = (old, new)[gen == "new"]
    readers = {"tiny.csv": lambda: R.table("tiny", data), "tiny.npz": lambda: R.arrays("tiny", data),
               "tiny_curves.csv": lambda: read_curves("tiny", data)}
    for file, read in readers.items():
        try:
            read()
        except DataFileError as err:
            assert not same and "make report-export" in str(err), (file, err)
            continue
        assert now.get(file) == expected.get(file), (file, gen)  # what it read is of meta.json's export
    return gen if same else "refused"


SCENARIOS = {"more runs": ((0,), (0, 1)), "curves go": ((0,), (1,)), "curves come": ((1,), (0,))}


@pytest.mark.parametrize("legacy", [False, True], ids=["recorded", "legacy meta.json"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_kill_at_any_rename_leaves_all_old_all_new_or_a_refusal(probe_runs, tmp_path, monkeypatch, scenario, legacy):
    """An export of new runs over an exported folder, stopped (in-process) at its k-th os.replace for every k:
    the staged files' own renames, each target's, and meta.json's last. Each time the readers see all old,
    all new, or refuse in one line; the same export run again gives the new folder byte for byte. A folder
    whose meta.json has no `files` (exported before they were recorded) is protected as well."""
    root, ids = probe_runs
    before, after = SCENARIOS[scenario]
    old_runs, new_runs = runs_of(root, ids, before, tmp_path / "old"), runs_of(root, ids, after, tmp_path / "new")
    sweeps, base = root / "sweeps", tmp_path / "base"
    export(["tiny"], runs=old_runs, data=base, sweeps=sweeps, log=quiet)
    if legacy:
        meta = json.loads((base / "meta.json").read_text())
        del meta["files"]
        (base / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    old = snapshot(base)
    full = tmp_path / "full"
    shutil.copytree(base, full)
    export(["tiny"], runs=new_runs, data=full, sweeps=sweeps, log=quiet)
    new = snapshot(full)
    assert ("tiny_curves.csv" in old, "tiny_curves.csv" in new) == {"more runs": (True, True), "curves go": (True, False),
                                                                   "curves come": (False, True)}[scenario]

    real = os.replace
    calls = 0

    def counting(src, dst, *args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == kill_at:
            raise Killed
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", counting)
    kill_at, total = 0, None
    seen = []
    for kill_at in range(1, 30):
        data = tmp_path / f"k{kill_at}"
        shutil.copytree(base, data)
        calls = 0
        try:
            export(["tiny"], runs=new_runs, data=data, sweeps=sweeps, log=quiet)
        except Killed:
            seen.append(check_all_old_all_new_or_refused(data, old, new))
        else:
            total = calls
            assert snapshot(data) == new
            break
        monkeypatch.setattr(os, "replace", real)
        export(["tiny"], runs=new_runs, data=data, sweeps=sweeps, log=quiet)  # the same command again
        assert snapshot(data) == new
        monkeypatch.setattr(os, "replace", counting)
    # staging: one write per file (+ meta.json's migration first for a legacy one), then one rename each
    files = len([f for f in new if f != "meta.json"]) + 1
    assert total == 2 * files + legacy, (total, files)
    assert seen[:files + legacy] == ["old"] * (files + legacy)  # killed while staging: all old
    assert seen[-1] == "refused"  # killed just before meta.json's rename: new files, old meta.json
    assert "refused" in seen and set(seen) <= {"old", "refused"}


def test_a_real_kill_9_between_renames_is_refused_and_the_next_export_cleans_up(probe_runs, tmp_path, capsys):
    """`kill -9` (SIGKILL, sent by the export process to itself) right after the first target is renamed:
    the build refuses the folder with one line, and the export run again removes the staged files left
    behind and writes the new folder, byte for byte what an uninterrupted export writes."""
    import signal
    import subprocess
    import sys
    import textwrap

    from ablate import cli

    root, ids = probe_runs
    old_runs, new_runs = runs_of(root, ids, (0,), tmp_path / "old"), runs_of(root, ids, (0, 1), tmp_path / "new")
    data, full = tmp_path / "data", tmp_path / "full"
    export(["tiny"], runs=old_runs, data=data, sweeps=root / "sweeps", log=quiet)
    old = snapshot(data)
    shutil.copytree(data, full)
    export(["tiny"], runs=new_runs, data=full, sweeps=root / "sweeps", log=quiet)
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from ablate.results.export import export
        real, renamed = os.replace, []
        def replace(src, dst):
            if renamed and not Path(dst).name.startswith("."):
                os.kill(os.getpid(), signal.SIGKILL)
            real(src, dst)
            if not Path(dst).name.startswith("."):
                renamed.append(dst)
        os.replace = replace
        export(["tiny"], runs={str(new_runs)!r}, data={str(data)!r}, sweeps={str(root / 'sweeps')!r}, log=print)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    left = sorted(p.name for p in data.iterdir() if p.name.startswith("."))
    assert ".meta.json.export" in left and len(left) >= 2, left  # staged files a kill leaves behind
    assert (data / "tiny.csv").read_bytes() == (full / "tiny.csv").read_bytes()  # a new table beside old files
    assert check_all_old_all_new_or_refused(data, old, snapshot(full)) == "refused"
    out = tmp_path / "out"
    capsys.readouterr()
    code = cli.main(["report", "build", "--data", str(data), "--out", str(out),
                     "--source", str(Path(__file__).resolve().parents[1] / "reports")])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and not out.exists() and len(err) == 1, err
    assert err[0].startswith(f"ablate: {data / 'tiny'}") and "run the export again (`make report-export`)" in err[0]
    export(["tiny"], runs=new_runs, data=data, sweeps=root / "sweeps", log=quiet)
    assert snapshot(data) == snapshot(full)  # no staged file left, and every file the new one


def test_a_folder_exported_before_files_were_recorded_is_still_read(tmp_path):
    """A meta.json without `files` (exported before they were recorded, as reports/data was until
    2026-12-01): the build's check and the readers accept it as before. The committed folder, exported since,
    records its files, and every one of them matches."""
    import shutil

    from ablate.results.exported import check_folder

    committed = Path(__file__).resolve().parents[1] / "reports" / "data"
    recorded = json.loads((committed / "meta.json").read_text())
    assert set(recorded["files"]) == {p.name for p in committed.iterdir() if p.suffix in (".csv", ".npz")
                                      and p.stem not in ("attention_cost", "rnn_cost")}
    check_folder(committed)
    legacy = tmp_path / "data"
    shutil.copytree(committed, legacy)
    meta = {k: v for k, v in recorded.items() if k != "files"}
    (legacy / "meta.json").write_text(json.dumps(meta))
    check_folder(legacy)
    assert len(R.table("heads", legacy)) == meta["sweeps"]["heads"]["runs"]


def test_a_second_export_into_a_folder_being_written_is_refused_in_one_line(here):
    """Two `report export`s into one folder at once both exited 0, and one sweep's export was lost (issue 41,
    item 8). The first holds the folder (an flock on it, as long as it writes); the second is refused with one
    line (ExportError: the CLI's exit 2) before it writes anything; once the first is done the same call works."""
    import fcntl
    import os

    from ablate.results.export import ExportError

    runs, data, sweeps = here
    data.mkdir()
    first = os.open(data, os.O_RDONLY | os.O_DIRECTORY)  # what a running export holds
    fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        with pytest.raises(ExportError, match=r"^another `ablate report export` is writing into .* now; wait for it "
                                              r"to end, then run this one again$"):
            export(["tiny"], runs=runs, data=data, sweeps=sweeps, log=quiet)
        assert list(data.iterdir()) == []
    finally:
        os.close(first)
    export(["tiny"], runs=runs, data=data, sweeps=sweeps, log=quiet)
    assert (data / "tiny.csv").is_file() and (data / "meta.json").is_file()
