"""The explorer's benchmark (`python -m ablate.explore.bench`): it measures a real page in Chromium and prints
the load and redraw figures of each page and, for two, their ratio; bad input exits 2 with one line before any
work. Browser-gated like the other explorer tests (tests/browser_gate.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ablate.explore import bench
from tests.browser_gate import gate

PAGE = Path(__file__).resolve().parents[1] / "reports" / "explorer.html"
pytestmark = gate()


def test_it_measures_a_real_page_and_prints_the_ratio_of_two():
    """One real measurement of the committed page (the numbers positive), and the table of two pages with the
    ratio row computed from the two rows (the table is a pure function of the medians)."""
    # a process of its own, as a user runs it (pytest-playwright's event loop may be running in this one)
    done = subprocess.run([sys.executable, "-m", "ablate.explore.bench", str(PAGE), "--repeats", "1", "--steps", "2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split("  ")[0] == "page" and len(lines) == 2
    numbers = [float(x) for x in re.findall(r"\d+\.\d+", lines[1])]
    assert len(numbers) == 3 and all(n > 0 for n in numbers), lines
    keys = ["load_s", *(f"redraw_ms_{m}" for m in bench.MODELS)]
    two = bench.table({"before": dict(zip(keys, (2.0, 100.0, 200.0))), "after": dict(zip(keys, (1.0, 50.0, 50.0)))})
    assert two.splitlines()[-1].split() == ["after", "/", "before", "×0.50", "×0.50", "×0.25"]


def test_bad_input_exits_2_with_one_line(capsys, tmp_path):
    assert bench.main([str(tmp_path / "missing.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no page at" in err[0]
    assert bench.main([str(PAGE), "--repeats", "0"]) == 2
