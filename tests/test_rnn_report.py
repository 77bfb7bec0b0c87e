"""The RNN-vs-Transformer table (reports/rnn_table.py): its answers follow the benchmark's numbers. The
notebook runs in a real Jupyter kernel on a copy of the smoke fixture (tests/data/reports) whose
`ablate bench rnn` table is replaced by one with known power laws: the verdicts, the slopes and the
crossover the answer quotes are the ones those laws give."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ablate.report.build import build
from tests.data_copies import edited_copy

FIXTURE = Path(__file__).parent / "data" / "reports"
SOURCES = Path(__file__).resolve().parents[1] / "reports"
COLUMNS = ["series", "model", "n", "batch", "params", "device", "threads", "torch", "time_ms", "mem_mb", "mem_kind",
           "time_slope", "mem_slope", "fit_from_n", "time_crossover_n", "mem_crossover_n"]

pytestmark = pytest.mark.slow  # starts a Jupyter kernel


def bench_rows(device: str) -> list[dict]:
    """The Transformer's time 0.01 n² ms, the LSTM's 0.64 n ms: they cross at n = 64. Memory: Transformer
    0.001 n² MB, LSTM 0.016 n MB (crossing at n = 16). The LSTM at fixed tokens: time ∝ n^0.5."""
    ns = [8, 16, 32, 64, 128, 256]
    rows = []
    for n in ns:
        for model, t, m in (("lstm", 0.64 * n, 0.016 * n), ("transformer", 0.01 * n * n, 0.001 * n * n)):
            rows.append({"series": "batch", "model": model, "n": n, "batch": 8, "params": 68000, "time_ms": t,
                         "mem_mb": m})
        rows.append({"series": "tokens", "model": "lstm", "n": n, "batch": 2048 // n, "params": 68000,
                     "time_ms": 10 * n ** 0.5, "mem_mb": 1.0})
    for r in rows:
        r.update(device=device, threads=1, torch="2.x", mem_kind="cpu_peak" if device == "cpu" else "cuda_peak",
                 time_slope="", mem_slope="", fit_from_n=32, time_crossover_n="", mem_crossover_n="")
    return rows


@pytest.fixture(scope="module")
def rnn_build(tmp_path_factory):
    """One build of the notebook on the fixture with two edits (each read by its own answer): the benchmark's
    table replaced by bench_rows("cpu"), and the LSTM's (no PE) accuracy by position at copy 32 replaced by a
    known curve: 30 % on the first quarter, 90 % on the last, 50 % between except 25 % at emitted token 20."""
    import numpy as np
    import pandas as pd

    from ablate.results.export import BY_POSITION, npz_bytes

    root = tmp_path_factory.mktemp("rnn")
    data = root / "data"
    edited_copy(FIXTURE, data)
    with open(data / "rnn_cost.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(bench_rows("cpu"))
    table = pd.read_csv(data / "rnn_copy_long.csv")
    lstm = table[(table["model.arch"] == "lstm") & (table["model.pos_enc"] == "none")]["run_id"]
    curve = np.full(32, 0.5, dtype=np.float32)
    curve[:8], curve[-8:], curve[19] = 0.3, 0.9, 0.25
    with np.load(data / "rnn_copy_long.npz") as f:
        arrays = {k: f[k] for k in f.files}
    assert all(f"{r}/{BY_POSITION}" in arrays for r in table["run_id"])  # the fixture holds the array
    arrays.update({f"{r}/{BY_POSITION}": curve for r in lstm})
    (data / "rnn_copy_long.npz").write_bytes(npz_bytes(arrays))
    (built,) = build(SOURCES, data, root / "out", only=["rnn_table"], log=lambda _: None)
    assert built.error is None, built.error
    return {a["key"]: a for a in built.answers}, root / "out"


@pytest.fixture(scope="module")
def answers(rnn_build):
    return rnn_build[0]


def test_every_row_of_the_table_is_answered(answers):
    assert list(answers) == ["rnn-compute", "rnn-long-range", "rnn-position", "rnn-mnist"]
    for a in answers.values():
        assert a["status"] == "answered" and a["plain"]["en"] and a["plain"]["zh"]
        assert sum(c["primary"] for c in a["checks"]) >= 1


def test_the_complexity_answer_follows_the_benchmark(answers):
    a = answers["rnn-compute"]
    primary = [c for c in a["checks"] if c["primary"]]
    cost, serial = primary
    assert cost["cite"] == serial["cite"] == "Vaswani et al. 2017, Table 1"
    assert cost["verdict"] == "agrees"  # slopes 2.00 against 1.00 over n >= 32: a gap of 1 >= SLOPE_GAP
    assert "Transformer 2.00, LSTM 1.00, difference 1.00" in cost["evidence"]
    assert serial["verdict"] == "not testable" and "no parallel hardware" in serial["evidence"]
    plain = a["plain"]["en"]
    assert plain.startswith("The Transformer's step grows faster with length: its time as n^2.00, the LSTM's as n^1.00")
    assert "cross at n ≈ 64 (the Transformer is cheaper below, the LSTM above)" in plain
    assert "n^2.00 against n^1.00" in plain and "cross at n ≈ 16" in plain
    assert "n^2.00" in a["plain"]["zh"] and "n ≈ 64" in a["plain"]["zh"]
    support = {c["evidence"].split(":")[0]: c for c in a["checks"] if not c["primary"]}
    assert support["memory slope in n ≥ 32"]["verdict"] == "agrees"
    fixed = next(c for c in a["checks"] if "fixed number of tokens" in c["evidence"])
    assert fixed["verdict"] == "agrees" and "time slope in n 0.50" in fixed["evidence"]


@pytest.fixture(scope="module")
def positions(rnn_build):
    return rnn_build


def test_where_the_errors_sit_follows_the_exported_arrays(positions):
    """The figure is drawn; the LSTM's first and last quarter at copy 32 are the arrays' (supporting checks,
    marked as added after the primary results had been read); the plain answer quotes them in both languages."""
    answers, out = positions
    a = answers["rnn-long-range"]
    assert (out / "figures" / "rnn_error_positions.png").is_file()
    assert any(str(f).endswith("rnn_error_positions.png") for f in a["figures"])
    quarter = [c for c in a["checks"] if "first quarter of the emitted tokens" in c["evidence"]]
    assert quarter and all(not c["primary"] for c in quarter)
    assert all("added after the primary results had been read" in c["evidence"] for c in quarter)
    at32 = next(c for c in quarter if "copy at 32 tokens" in c["evidence"] and "reverse" not in c["evidence"])
    assert at32["evidence"].endswith("): 30.0 % (1 run, no interval) vs 90.0 % (1 run, no interval), −60.0 points "
                                     "(1 run in an arm, no interval)")  # the smoke fixture: one seed
    plain = a["plain"]["en"]
    assert "copy at 32 tokens: first quarter 30.0 % (1 run, no interval), last quarter 90.0 %" in plain
    assert "lowest at emitted token 20 of 32;" in plain or "lowest at emitted token 20 of 32." in plain
    assert "前四分之一为 30.0%" in a["plain"]["zh"] and "最低点在第 20 个输出（共 32 个）" in a["plain"]["zh"]
