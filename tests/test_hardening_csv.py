"""CSV cells a spreadsheet would run as a formula (a run name starting with `=`) are written as text
by `ablate results --csv`; numbers stay numbers."""

from __future__ import annotations

import csv
import math

import pandas as pd
import yaml

from ablate import cli

from .hardening_fixtures import by_status, edit_summary, runs_copy, trained_runs  # noqa: F401 - fixtures


def test_safe_cell_guards_formulas_and_leaves_numbers():
    from ablate.csvcells import safe_cell, safe_frame

    for text in ("=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1", "-inf", "-", "=1"):
        assert safe_cell(text) == "'" + text
    for value in ("run", "0.5", "-0.5", "+3", "-1e-3", "1.5E+2", "", -0.5, 3, None, True, math.nan):
        assert safe_cell(value) is value or safe_cell(value) == value
    df = pd.DataFrame({"name": ["=cmd", "ok", None], "x": [-1.5, 2.0, math.nan], "n": pd.array([-1, 2, None], "Int64"),
                       "=col": ["a", "-b", "-7"]})
    out = safe_frame(df)
    assert list(out.columns) == ["name", "x", "n", "'=col"]
    assert out["name"].tolist()[:2] == ["'=cmd", "ok"] and out["name"].isna().tolist() == [False, False, True]
    assert out["'=col"].tolist() == ["a", "'-b", "-7"]
    pd.testing.assert_series_equal(out["x"], df["x"])
    pd.testing.assert_series_equal(out["n"], df["n"])
    assert df["name"].tolist()[0] == "=cmd"  # the caller's frame is left as it was


def test_results_csv_writes_a_formula_name_as_text_and_numbers_as_numbers(runs, tmp_path):
    good, bad = by_status(runs, "completed")
    cfg = yaml.safe_load((bad / "config.yaml").read_text())
    cfg["run"]["name"] = '=HYPERLINK("http://evil.example","click")'
    (bad / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    edit_summary(bad, metrics={"val/loss": -0.25})
    out = tmp_path / "t.csv"
    assert cli.main(["results", "hard", "--all-columns", "--csv", str(out)]) == 0
    with open(out, newline="") as f:
        rows = {row["run_dir"]: row for row in csv.DictReader(f)}
    assert rows[str(bad)]["run.name"] == "'" + '=HYPERLINK("http://evil.example","click")'
    assert rows[str(bad)]["val/loss"] == "-0.25" and float(rows[str(bad)]["val/loss"]) == -0.25
    assert not any(cell.startswith("'") for row in rows.values() for k, cell in row.items() if k != "run.name")
