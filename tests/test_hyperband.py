"""Early termination (ablate.sweep.hyperband): W&B's hyperband rule, on a table of curves whose answers
W&B's own code gives (wandb/sweeps 0.3.0, `hyperband_stop_runs`: its doctest and its tests, and cases
of ties, NaN, short runs and the strict/lenient conditions, each worked out by hand below); bad
early_terminate blocks (exit 2, one line); and a real tuned sweep whose stage-1 runs are held at each
band, the losers stopped, the rest resumed to the numbers of runs never paused."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest
import yaml

from ablate import cli
from ablate.rundir import read_summary
from ablate.sweep import hyperband as H
from ablate.sweep import spec

from .sweep_fixtures import forkserver, isolated  # noqa: F401
from .test_tune import HEADER, LRS, TINY, configs, summaries

NAN = math.nan

# (case, early_terminate, goal, [(run, running?, history)], {stopped run: (band, value, threshold)})
# Each expected answer is what W&B's hyperband_stop_runs returns on the same runs (checked against
# sweeps 0.3.0 when this table was written), worked out here by its rule: r = 1/eta, threshold at band b
# = the sorted (best first) values at b of the runs with b or more values, at index int(n * r).
CASES = [
    # W&B's doctest: bands of max_iter 5, eta 2, s 2 are [1, 2]; at 2 the values are 9 10 8 7 6 -> index 2: 8.
    # b (10 at band 2) is worse; c (8) ties and goes on; finished runs are never stopped.
    ("wandb doctest", {"max_iter": 5, "eta": 2, "s": 2}, "minimize",
     [("a", False, [10, 9]), ("b", True, [10, 10]), ("c", True, [10, 8, 8]), ("d", True, [10, 7, 7]),
      ("e", False, [10, 6, 6])], {"b": (2, 10, 8)}),
    # W&B's test_hyperband_min_iter_bands: bands 3, 9, 27; at 3: 10 and 8 -> index 0: 8; `run` (10) stops
    ("wandb min_iter", {"min_iter": 3, "eta": 3}, "minimize",
     [("run", True, [10] * 4), ("run2", True, [10 - i for i in range(10)])], {"run": (3, 10, 8)}),
    ("wandb min_iter maximize", {"min_iter": 3, "eta": 3}, "maximize",
     [("run", True, [10] * 4), ("run2", True, [10 + i for i in range(10)])], {"run": (3, 10, 12)}),
    # W&B's test_2runs_band1_pass (strict false): bands [2, 6]; at 2: 10, 9 -> index 0: 9; run's best so far is 6
    ("wandb 2 runs band 1 pass", {"max_iter": 18, "eta": 3, "s": 2, "strict": False}, "minimize",
     [("run", True, [10, 10, 6]), ("run2", True, [10 - i for i in range(10)])], {}),
    # strict (W&B's default): the value at the band; at 2: 0.7, 0.6, 0.5 -> index 1: 0.6; early_peak has 0.5
    ("strict: the value at the band", {"min_iter": 2, "eta": 2}, "maximize",
     [("early_peak", True, [0.9, 0.5, 0.5]), ("steady", True, [0.6, 0.7, 0.8]), ("slow", True, [0.1, 0.6, 0.7])],
     {"early_peak": (2, 0.5, 0.6)}),
    # lenient: its best so far, 0.9, is better than 0.6
    ("lenient: the best so far", {"min_iter": 2, "eta": 2, "strict": False}, "maximize",
     [("early_peak", True, [0.9, 0.5, 0.5]), ("steady", True, [0.6, 0.7, 0.8]), ("slow", True, [0.1, 0.6, 0.7])],
     {}),
    # four runs, eta 3: index int(4 / 3) = 1 of 0.5 0.5 0.5 0.4 is 0.5: the ties go on, 0.4 stops
    ("ties with the threshold go on", {"min_iter": 1, "eta": 3}, "maximize",
     [("a", True, [0.5]), ("b", True, [0.5]), ("c", True, [0.5]), ("d", True, [0.4])], {"d": (1, 0.4, 0.5)}),
    # band 2 counts only b and c (a and d have one value): index 1 of 1.0 2.0 is 2.0: b ties and goes on;
    # d has not reached band 2, and at band 1 (threshold index 2 of 1 3 3 5: 3) it has 5 but band 1 is
    # not a band of min_iter 2: nothing applies to it yet
    ("runs short of a band do not count", {"min_iter": 2, "eta": 2}, "minimize",
     [("a", False, [1.0]), ("b", True, [3.0, 2.0]), ("c", True, [3.0, 1.0]), ("d", True, [5.0])], {}),
    # NaN values are dropped first (W&B's filter_invalid): a's history is [2.0]; at 1: 1 2 3 -> index 1: 2
    ("NaN dropped", {"min_iter": 1, "eta": 2}, "minimize",
     [("a", True, [NAN, 2.0]), ("b", True, [1.0]), ("c", True, [3.0])], {"c": (1, 3.0, 2.0)}),
    # the last band a run reached decides: at 4, a 0.9, b 0.6, c 0.96 -> index 1: 0.9; b stops there
    ("the last band reached decides", {"min_iter": 1, "eta": 2}, "maximize",
     [("a", True, [0.2, 0.3, 0.9, 0.9]), ("b", True, [0.3, 0.4, 0.5, 0.6]), ("c", False, [0.1, 0.2, 0.95, 0.96]),
      ("d", True, [0.9])], {"b": (4, 0.6, 0.9)}),
    # W&B's index is int((1 / eta) * n): with eta 1.1 and 33 runs that is 30 (int(33 / 1.1) would be 29), so the
    # threshold is the 31st value, 31, and only 32 and 33 stop
    ("the threshold's index is W&B's r * n", {"min_iter": 1, "eta": 1.1}, "minimize",
     [(f"r{i}", True, [float(i)]) for i in range(1, 34)], {"r32": (1, 32.0, 31.0), "r33": (1, 33.0, 31.0)}),
    # infinite values are dropped as NaN is (W&B's is_number: finite): the histories are [1], [2], [3] and band 2
    # is reached by none; at band 1 (1 2 3 -> index 1: 2) r3 stops
    ("infinite values dropped", {"min_iter": 1, "eta": 2}, "minimize",
     [(f"r{i}", True, [float(i), math.inf]) for i in range(1, 4)], {"r3": (1, 3.0, 2.0)}),
]


@pytest.mark.parametrize("case, block, goal, runs, expected", CASES, ids=[c[0] for c in CASES])
def test_the_rule_stops_what_w_and_bs_rule_stops_on_the_same_curves(case, block, goal, runs, expected):
    rule = H.parse("s.yaml", {"type": "hyperband", **block}, tuned=True)
    stops = H.to_stop({name: history for name, _, history in runs}, {name for name, running, _ in runs if running},
                      rule, maximize=goal == "maximize")
    assert {k: (v.band, v.value, v.threshold) for k, v in stops.items()} == expected  # exact: no arithmetic


@pytest.mark.parametrize("block, bands", [
    ({"min_iter": 3, "eta": 3}, [3, 9, 27]),  # W&B's test_hyperband_min_iter_bands (the first three)
    ({"max_iter": 81, "eta": 3, "s": 3}, [3, 9, 27]),  # test_hyperband_max_iter_bands
    ({"max_iter": 18, "eta": 3, "s": 2}, [2, 6]),  # test_init_from_max_iter
    ({"max_iter": 5, "eta": 2, "s": 2}, [1, 2]),  # the doctest: 5 / 2 = 2.5 -> 2, 1.25 -> 1
    ({"max_iter": 4, "eta": 3, "s": 5}, [1]),  # 4 / 9 < 1: W&B stops there
    ({"min_iter": 1}, [1, 3, 9]),  # eta defaults to 3
    ({"min_iter": 1, "eta": 5000.0}, [1, 5000]),  # 5000 ** 100 would overflow a float: the bands stop at 1e9
])
def test_bands_are_w_and_bs(block, bands):
    assert list(H.parse("s.yaml", {"type": "hyperband", **block}, tuned=True).bands[:len(bands)]) == bands


def test_strict_is_w_and_bs_default():
    assert H.parse("s.yaml", {"type": "hyperband", "min_iter": 1}, tuned=True).strict is True


TUNED = {**HEADER, "description": "tune optim.lr on seeds 0"}


@pytest.mark.parametrize("block, tuned, line", [
    ({"type": "hyperband", "min_iter": 1}, False, "early_terminate stops runs of the learning-rate stage of a tuned "
     "sweep, and this sweep is not tuned"),
    ({"type": "median", "min_iter": 1}, True, "early_terminate type='median'; W&B's only type is hyperband"),
    ({"type": "hyperband", "min_iters": 1}, True, "early_terminate has no key 'min_iters'"),
    ({"type": "hyperband"}, True, "early_terminate needs min_iter, or max_iter and s"),
    ({"type": "hyperband", "max_iter": 9}, True, "early_terminate max_iter needs s"),
    ({"type": "hyperband", "min_iter": 0}, True, "early_terminate min_iter=0; expected an integer >= 1"),
    ({"type": "hyperband", "min_iter": 1, "eta": 1}, True, "early_terminate eta=1; expected a number > 1"),
    ({"type": "hyperband", "min_iter": 1, "strict": "yes"}, True, "early_terminate strict='yes'; expected true or"),
    ({"type": "hyperband", "max_iter": 2, "s": 1, "eta": 3}, True, "gives no band of at least 1 epoch"),
    ({"type": "hyperband", "min_iter": 2}, True, "first band is epoch 2, not before the runs' last epoch (2), so it "
     "would stop nothing; lower min_iter"),
    ("hyperband", True, "early_terminate must be a mapping"),
])
def test_a_bad_early_terminate_exits_2_in_one_line_before_any_run(tmp_path, capsys, block, tuned, line):
    head = TUNED if tuned else HEADER
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**head, "early_terminate": block,
                                    "parameters": {**TINY, "optim.lr": {"values": LRS}, "seed": {"values": [0]}}}))
    assert cli.main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and line in err[0], err
    assert not (tmp_path / "runs").exists()


def test_the_job_executors_refuse_early_terminate_in_one_line(tmp_path, capsys):
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump({**TUNED, "early_terminate": {"type": "hyperband", "min_iter": 1},
                                    "parameters": {**TINY, "optim.lr": {"values": LRS}, "seed": {"values": [0]}}}))
    assert cli.main(["sweep", str(path), "--executor", "local"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "early_terminate is applied by the local runner only" in err[0], err


def test_a_tuned_sweep_stops_the_losers_at_each_band_and_the_rest_end_as_if_never_paused(tmp_path, capsys):
    """Two variants (1 and 2 heads), four rates each on seed 0, 3 epochs, bands 1 and 2 (min_iter 1, eta 2):
    the rule is applied within each variant, on its runs' recorded curves, once all of them are at the band;
    a run that went on ends with exactly the numbers of the same run trained in one go."""
    path = tmp_path / "hb.yaml"
    grid = {**TINY, "trainer.max_epochs": {"value": 3}, "model.n_heads": {"values": [1, 2]},
            "optim.lr": {"values": LRS}, "seed": {"values": [0, 1]}}
    path.write_text(yaml.safe_dump({**TUNED, "early_terminate": {"type": "hyperband", "min_iter": 1, "eta": 2},
                                    "parameters": grid}, sort_keys=False))
    assert cli.main(["sweep", str(path), "--workers", "2"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    root = tmp_path / "runs" / "hb"
    runs, cfgs = summaries(root), configs(root)
    recorded = json.loads((root / H.LEDGER).read_text())
    ledger = recorded["decisions"]
    sweep = spec.load(str(path))
    rule, by_id = sweep.early, {r.run_id: r for r in sweep.runs}
    assert recorded["rule"] == {"bands": list(rule.bands), "eta": 2.0, "strict": True}

    stopped = {rid for rid, s in runs.items() if s["status"] == "stopped"}
    assert stopped and result["stopped"] == len(stopped)  # the rule had something to stop
    assert set(ledger) == {"model.n_heads=1", "model.n_heads=2"}  # each variant decided on its own
    for variant, bands in ledger.items():
        mine = [rid for rid, c in cfgs.items() if f"model.n_heads={c['model']['n_heads']}" == variant and c["seed"] == 0]
        alive = set(mine) - {rid for rid in mine if runs[rid]["status"] == "diverged"}
        for band in sorted(bands, key=int):
            decision, b = bands[band], int(band)
            # W&B's rule on the curves as they were at the band (each run's first b validations)
            curves = {rid: H.history(root / rid, "val/acc_best")[:b] for rid in mine}
            held = {rid for rid in alive if len(curves[rid]) == b}
            assert set(decision["went_on"]) | set(decision["stopped"]) == held
            assert {k: v for k, v in decision["stopped"].items()} == \
                {k: v.as_dict() for k, v in H.to_stop(curves, held, rule, maximize=True).items()}
            alive = set(decision["went_on"])
        assert "1" in bands and "2" in bands  # 3 epochs: both bands below the last applied
    for rid in stopped:  # recorded where it stopped: its band, no test, its metrics at the stop
        s = runs[rid]
        band = s["early_terminate"]["band"]
        assert len(H.history(root / rid, "val/acc_best")) == band and "test/acc" not in s["metrics"]
        assert s["metrics"]["val/acc_best"] == pytest.approx(s["early_terminate"]["value"])
    went_on = [rid for rid, s in runs.items() if s["status"] == "completed" and cfgs[rid]["seed"] == 0]
    assert all(len(H.history(root / rid, "val/acc_best")) == 3 for rid in went_on)
    assert all(runs[rid]["attempts"] == 3 for rid in went_on)  # paused at epochs 1 and 2, resumed twice
    assert result["tuned"]["chosen"] == {"model.n_heads=1": 1e-2, "model.n_heads=2": 1e-2}
    assert "model.n_heads=1: early termination at epoch 1: " in captured.err
    assert "after epoch 1, 2, a run whose value at the band is worse than the top 1/2 of those at the band stops" \
        in captured.err
    assert sum(f"] stopped   {rid} " in captured.err for rid in stopped) == len(stopped)

    # a run that went on, trained again in one go elsewhere: the same numbers to the last bit
    from ablate.train import train

    rid = next(r for r in went_on if cfgs[r]["optim"]["lr"] == 1e-2)
    cfg = by_id[rid].cfg
    again = train(dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, dir=str(tmp_path / "once"))),
                  log=lambda _line: None)
    assert again["attempts"] == 1
    for key in ("val/acc_best", "val/loss", "test/acc", "val/acc_mean"):
        assert again["metrics"][key] == runs[rid]["metrics"][key], key

    # the same command again: nothing to run, nothing changed
    mtimes = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    assert cli.main(["sweep", str(path)]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["run_now"] == 0
    assert mtimes == {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    assert read_summary(root / next(iter(stopped)))["status"] == "stopped"

    # a rate added to the grid afterwards: its runs meet the decisions made without them, are judged by the same
    # rule at each band (never sent back to a band decided already), and the rest is left as it was
    grid["optim.lr"] = {"values": [*LRS, 1e-3]}
    path.write_text(yaml.safe_dump({**TUNED, "early_terminate": {"type": "hyperband", "min_iter": 1, "eta": 2},
                                    "parameters": grid}, sort_keys=False))
    again = subprocess.run([sys.executable, "-m", "ablate", "sweep", str(path)], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "ABLATE_RUNS_DIR": str(tmp_path / "runs")})
    assert again.returncode == 0, again.stderr[-3000:]
    added = [rid for rid, c in configs(root).items() if c["optim"]["lr"] == 1e-3]
    assert len(added) == 2 and all(read_summary(root / rid)["status"] in ("completed", "stopped") for rid in added)
    after = json.loads((root / H.LEDGER).read_text())["decisions"]
    for variant, bands in ledger.items():
        for band, decision in bands.items():  # what was decided stays; the new runs are added to it
            assert set(decision["went_on"]) <= set(after[variant][band]["went_on"])
            assert decision["stopped"].items() <= after[variant][band]["stopped"].items()
    assert all(runs[rid]["status"] == read_summary(root / rid)["status"] for rid in runs)
