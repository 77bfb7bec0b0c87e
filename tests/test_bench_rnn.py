"""`ablate bench rnn`: slopes and crossovers against closed forms, the CSV's shape, bad --lengths, and a
real tiny run end to end (no timed assertions: times are whatever the machine gives)."""

from __future__ import annotations

import csv
import io
import math
import subprocess
from dataclasses import fields, replace
from pathlib import Path

import pytest
import torch

from ablate.bench import BENCHMARKS, DEFAULTS, main
from ablate.bench.rnn import (
    MODELS,
    Row,
    build_model,
    cpu_peak_bytes,
    crossovers,
    fit,
    parse_lengths,
    report,
    running_peak,
    to_csv,
)
from ablate.models import RecurrentEncoder, matched_hidden

NS = [16, 32, 64, 128, 256, 512, 1024, 2048]


def _rows(time: dict, mem: dict, ns: list[int] = NS, serial=None) -> list[Row]:
    """Synthetic rows: time[model](n) ms and mem[model](n) MB; `serial(n)` ms for the LSTM at fixed tokens."""
    rows = [Row("batch", m, n, 8, 1000, "cpu", 1, "t", time[m](n), mem[m](n), "cpu_peak") for n in ns for m in MODELS]
    if serial:
        rows += [Row("tokens", "lstm", n, 8 * ns[-1] // n, 1000, "cpu", 1, "t", serial(n), 1.0, "cpu_peak") for n in ns]
    return fit(rows)


def test_slopes_and_crossover_of_power_laws_are_exact():
    """LSTM 3n ms, Transformer 0.01 n^2 ms: slopes 1 and 2, times cross at n = 300 (3n = 0.01 n^2), which
    log-log interpolation between 256 and 512 finds exactly; memories 2n and 0.5 n^1.5 cross at 16."""
    rows = _rows(
        {"lstm": lambda n: 3 * n, "transformer": lambda n: 0.01 * n**2, "transformer_p0": lambda n: 0.005 * n**2},
        {"lstm": lambda n: 2 * n, "transformer": lambda n: 0.5 * n**1.5, "transformer_p0": lambda n: n},
        serial=lambda n: 5 * n**0.25,
    )
    by = {(r.series, r.model): r for r in rows}
    assert by["batch", "lstm"].time_slope == pytest.approx(1, abs=1e-9)
    assert by["batch", "transformer"].time_slope == pytest.approx(2, abs=1e-9)
    assert by["batch", "lstm"].mem_slope == pytest.approx(1, abs=1e-9)
    assert by["batch", "transformer"].mem_slope == pytest.approx(1.5, abs=1e-9)
    assert by["batch", "transformer_p0"].time_slope == pytest.approx(2, abs=1e-9)
    assert by["batch", "transformer_p0"].mem_slope == pytest.approx(1, abs=1e-9)
    assert by["tokens", "lstm"].time_slope == pytest.approx(0.25, abs=1e-9)
    assert by["batch", "lstm"].fit_from_n == 256  # the upper half: n >= sqrt(16 * 2048) = 181
    assert float(by["batch", "lstm"].time_crossover_n) == pytest.approx(300, rel=1e-9)
    assert float(by["batch", "lstm"].mem_crossover_n) == 16  # 2 * 16 = 0.5 * 16^1.5 = 32: met at a measured n
    assert float(by["batch", "transformer"].time_crossover_p0_n) == pytest.approx(600, rel=1e-9)  # 3n = 0.005 n^2
    assert by["batch", "transformer"].mem_crossover_p0_n == ""  # 2n and n never cross
    text = "\n".join(report(rows))
    assert "time, LSTM vs Transformer: crossover at n = 300 (interpolated" in text
    assert "memory, LSTM vs Transformer: crossover at n = 16 (interpolated" in text
    assert "time, LSTM vs Transformer at dropout 0: crossover at n = 600 (interpolated" in text
    assert "slope of time against n over n >= 256: 0.25" in text


def test_crossover_sentence_names_who_costs_more():
    rows = _rows(
        {"lstm": lambda n: 3 * n, "transformer": lambda n: 0.01 * n**2,  # LSTM slower below 300
         "transformer_p0": lambda n: 2 * n},  # never cross: the Transformer at dropout 0 faster throughout
        {"lstm": lambda n: n, "transformer": lambda n: 4 * n,  # never cross: LSTM lower throughout
         "transformer_p0": lambda n: n},
    )
    text = "\n".join(report(rows))
    assert "below 300 the LSTM costs more, above 300 the Transformer\n" in text
    assert "memory, LSTM vs Transformer: no crossover in [16, 2048]; the LSTM is lower throughout (ratio 0.25 ... 0.25)" in text
    assert ("time, LSTM vs Transformer at dropout 0: no crossover in [16, 2048]; the Transformer at dropout 0 is "
            "lower throughout (ratio 1.50 ... 1.50)") in text
    assert all(r.mem_crossover_n == "" for r in rows)


def test_crossovers_closed_forms():
    ns = [10, 100, 1000]
    assert crossovers(ns, [1, 2, 3], [1, 5, 9]) == [10.0]  # equal at a measured length
    assert crossovers(ns, [1, 2, 3], [2, 4, 6]) == []  # a ratio that never changes sign
    # a = n, b = 1000 / n: equal where n^2 = 1000, between 10 and 100
    assert crossovers(ns, ns, [1000 / n for n in ns]) == [pytest.approx(math.sqrt(1000), rel=1e-12)]
    # up and down again: crosses twice, each interpolated in log-log
    up_down = crossovers([1, 10, 100], [1, 100, 1], [10, 10, 10])
    assert up_down == [pytest.approx(10**0.5, rel=1e-12), pytest.approx(10**1.5, rel=1e-12)]


def test_running_peak_and_cpu_peak_of_known_allocations():
    assert running_peak([(0, 4), (1, 1), (2, -4), (3, 2)]) == 5
    assert running_peak([(3, 2), (2, -4), (0, 4), (1, 1)]) == 5  # taken in time order, not list order
    assert running_peak([(0, -3), (1, 1)]) == 0  # never above the start
    mib = 2**20

    def work():
        big = torch.ones(4 * mib // 4)  # 4 MiB of float32
        small = torch.ones(mib // 4)  # 1 MiB: peak 5 MiB
        del big
        two = torch.ones(2 * mib // 4)  # 3 MiB held
        return small, two

    peak = cpu_peak_bytes(work)
    assert 5 * mib <= peak < 5 * mib + 64 * 1024  # the tensors, plus at most a few small blocks


def test_parse_lengths():
    assert parse_lengths("16:2048") == NS
    assert parse_lengths("16:100") == [16, 32, 64]
    assert parse_lengths("300,8,100,8") == [8, 100, 300]
    for bad in ("abc", "64", "1:8", "8:4", "0,8", "8,x", "16:16", "2:3:4", ""):
        with pytest.raises(ValueError, match="--lengths="):
            parse_lengths(bad)


@pytest.mark.parametrize("bad", ["abc", "64", "8:4", "1,8"])
def test_bad_lengths_exit_2_with_one_line_and_write_nothing(bad, tmp_path, capsys):
    out = tmp_path / "rnn.csv"
    assert main(["rnn", "--lengths", bad, "--csv", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line, = captured.err.strip().splitlines()
    assert line.startswith(f"ablate: --lengths={bad!r} is not allowed; give MIN:MAX")
    assert not out.exists()


def test_registered_with_its_defaults():
    assert BENCHMARKS["rnn"].__module__ == "ablate.bench.rnn"
    assert DEFAULTS["rnn"]["lengths"] == "16:2048" and DEFAULTS["attention"]["lengths"] == "32:8192"


def test_the_lstm_is_ablates_matched_lstm_and_the_transformer_the_tutorials():
    lstm, tf = build_model("lstm", 32), build_model("transformer", 32)
    assert isinstance(lstm.encoder, RecurrentEncoder)
    assert lstm.encoder.hidden == matched_hidden(lstm.encoder.cfg) and lstm.encoder.cfg.pos_enc == "none"
    assert lstm.encoder.cfg.arch == "lstm" and tf.encoder.cfg.arch == "transformer"
    assert (tf.encoder.cfg.d_model, tf.encoder.cfg.n_heads, tf.encoder.cfg.ffn_dim, tf.encoder.cfg.n_layers) == (64, 4, 128, 2)
    assert tf.encoder.cfg.max_len == 32 and tf.encoder.cfg.pos_enc == "learned" and tf.encoder.cfg.dropout == 0.1
    p0 = build_model("transformer_p0", 32).encoder.cfg
    assert p0.dropout == 0 and p0 == replace(tf.encoder.cfg, dropout=0.0)


def test_tiny_run_end_to_end(tmp_path, capsys):
    """n = 8, 16, one step: the table, slopes, crossovers and serial part print; the CSV has one row per
    (model, n) and per fixed-token n, every field filled as the header says."""
    out = tmp_path / "rnn.csv"
    argv = ["rnn", "--lengths", "8,16", "--steps", "1", "--repeats", "1", "--warmup", "0", "--threads", "1",
            "--batch-size", "2", "--csv", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    for needed in ("LSTM ms", "Tr. p=0 MB", "log-log slope over n >= 8", "crossover, measured:",
                   "  time, LSTM vs Transformer: ", "  memory, LSTM vs Transformer at dropout 0: ",
                   "serial part: the LSTM at a fixed 32 tokens per step", "What this machine can and cannot show"):
        assert needed in text, needed
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert list(rows[0]) == [f.name for f in fields(Row)] + ["commit", "dirty"]  # the provenance ends each row
    assert [(r["series"], r["model"], int(r["n"]), int(r["batch"])) for r in rows] == [
        ("batch", "lstm", 8, 2), ("batch", "transformer", 8, 2), ("batch", "transformer_p0", 8, 2),
        ("batch", "lstm", 16, 2), ("batch", "transformer", 16, 2), ("batch", "transformer_p0", 16, 2),
        ("tokens", "lstm", 8, 4), ("tokens", "lstm", 16, 2)]
    params = {(r["model"], r["n"]): int(r["params"]) for r in rows}
    assert params["transformer", "16"] - params["transformer", "8"] == 8 * 64  # the learned table, n rows
    assert params["lstm", "8"] == params["lstm", "16"] == sum(p.numel() for p in build_model("lstm", 8).parameters())
    for r in rows:
        assert float(r["time_ms"]) > 0 and float(r["mem_mb"]) > 0 and r["mem_kind"] == "cpu_peak"
        assert r["device"] == "cpu" and r["threads"] == "1" and r["fit_from_n"] == "8"
        assert math.isfinite(float(r["time_slope"])) and math.isfinite(float(r["mem_slope"]))
    main_rows = [r for r in rows if r["series"] == "batch"]
    crossings = {(r["time_crossover_n"], r["mem_crossover_n"], r["time_crossover_p0_n"], r["mem_crossover_p0_n"]) for r in rows}
    assert len(crossings) == 1  # repeated on every row
    # the Transformer's activation memory grows with n at a fixed batch: more than its table's 8 rows
    tf = {int(r["n"]): float(r["mem_mb"]) for r in main_rows if r["model"] == "transformer"}
    assert tf[16] > tf[8]


def test_csv_shape_of_synthetic_rows():
    """One line per (series, model, n), the header the Row's fields, slopes and crossovers on every line."""
    rows = _rows(
        {"lstm": lambda n: 3 * n, "transformer": lambda n: 0.01 * n**2, "transformer_p0": lambda n: 0.005 * n**2},
        {"lstm": lambda n: 2 * n, "transformer": lambda n: 0.5 * n**1.5, "transformer_p0": lambda n: n},
        serial=lambda n: 5.0,
    )
    lines = list(csv.reader(io.StringIO(to_csv(rows))))
    assert lines[0] == [*(f.name for f in fields(Row)), "commit", "dirty"]  # the code's provenance ends each row
    git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True)
    assert {line[-2] for line in lines[1:]} == {git.stdout.strip() if git.returncode == 0 else ""}
    assert len(lines) == 1 + 3 * len(NS) + len(NS)
    parsed = list(csv.DictReader(io.StringIO(to_csv(rows))))
    lstm = [r for r in parsed if (r["series"], r["model"]) == ("batch", "lstm")]
    assert {r["time_slope"] for r in lstm} == {"1"} and {r["mem_slope"] for r in lstm} == {"1"}
    assert {r["time_crossover_n"] for r in parsed} == {"300"} and {r["mem_crossover_p0_n"] for r in parsed} == {""}
    assert [abs(float(r["time_slope"])) < 1e-9 for r in parsed if r["series"] == "tokens"] == [True] * len(NS)
    assert [float(r["time_ms"]) for r in lstm] == [3.0 * n for n in NS]


def test_csv_path_that_is_a_folder_and_zero_threads_exit_2_before_work(tmp_path, capsys):
    assert main(["rnn", "--lengths", "8,16", "--csv", str(tmp_path)]) == 2
    line, = capsys.readouterr().err.strip().splitlines()
    assert line == f"ablate: --csv {tmp_path} is a folder; give a file path such as {tmp_path / 'rnn_cost.csv'}"
    with pytest.raises(SystemExit) as exit_:
        main(["rnn", "--threads", "0"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "ablate: --threads must be >= 1; see `ablate bench --help`\n"  # one line
