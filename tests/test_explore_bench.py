"""The explorer's benchmark (`python -m ablate.explore.bench`): it measures a real page in Chromium and prints
the load and redraw figures of each page and, for two, their ratio; bad input exits 2 with one line before any
work. Browser-gated like the other explorer tests (tests/browser_gate.py)."""

from __future__ import annotations

import re
from pathlib import Path

from ablate.explore import bench
from tests.browser_gate import gate

PAGE = Path(__file__).resolve().parents[1] / "reports" / "explorer.html"
pytestmark = gate()


def test_it_prints_each_pages_figures_and_their_ratio(capsys, tmp_path):
    before = tmp_path / "before.html"
    before.write_text(PAGE.read_text())
    assert bench.main([str(PAGE), "--before", str(before), "--repeats", "1", "--steps", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("  ")[0] == "page" and len(lines) == 4
    numbers = [[float(x) for x in re.findall(r"\d+\.\d+", line)] for line in lines[1:3]]
    assert all(len(n) == 3 and n[0] > 0 and n[1] > 0 and n[2] > 0 for n in numbers), lines
    assert lines[3].startswith("after / before") and lines[3].count("×") == 3


def test_bad_input_exits_2_with_one_line(capsys, tmp_path):
    assert bench.main([str(tmp_path / "missing.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no page at" in err[0]
    assert bench.main([str(PAGE), "--repeats", "0"]) == 2
