"""Fair tuning (ablate.sweep.tune): a `tune KEY on seeds ...` line makes a sweep run in two stages,
each variant at its own best value chosen on validation. The rule on numbers; bad tune lines (exit 2,
one line, nothing written); and real tiny runs: stage 2 runs at the value stage 1 picked (an absurdly
small learning rate learns nothing and an absurdly large one wrecks the model, so the one in
between must win: a runner taking the smallest or the largest value fails), after the runner is killed in each
stage, exactly once, and the results table says what was chosen."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ablate import cli
from ablate import config as C
from ablate.rundir import read_summary
from ablate.runfiles import read_metrics_rows
from ablate.sweep import spec
from ablate.sweep.tune import Gate, choose, score

HEADER = {"program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"], "method": "grid",
          "metric": {"name": "val/acc_best", "goal": "maximize"}}
LRS = [1e-7, 1e-6, 1e-2, 3.0]  # the two tiny ones do not move the model in 32 steps; 3.0 wrecks it
# A copy task that lr 1e-2 learns well above chance in 2 epochs of 16 steps, in about a second a run.
TINY = {
    "data.task": {"value": "copy"}, "data.vocab": {"value": 6}, "data.length": {"value": 4},
    "data.n_train": {"value": 512}, "data.n_val": {"value": 64}, "data.n_test": {"value": 32},
    "data.batch_size": {"value": 32}, "model.d_model": {"value": 16}, "model.n_layers": {"value": 1},
    "trainer.max_epochs": {"value": 2}, "run.probes": {"value": False}, "tracking": {"value": "none"},
}


# the module-wide forkserver and the isolated runs folder, network and W&B mode
from .sweep_fixtures import forkserver, isolated  # noqa: E402, F401


def write(folder: Path, name: str, parameters: dict, description: str | None = "tune optim.lr on seeds 0",
          **top) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    head = {**HEADER, **({"description": description} if description is not None else {}), **top}
    path.write_text(yaml.safe_dump({**head, "parameters": parameters}, sort_keys=False))
    return path


def summaries(root: Path) -> dict[str, dict]:
    return {d.name: read_summary(d) for d in sorted(root.iterdir()) if d.is_dir()} if root.is_dir() else {}


def configs(root: Path) -> dict[str, dict]:
    return {d.name: yaml.safe_load((d / "config.yaml").read_text()) for d in sorted(root.iterdir())
            if (d / "config.yaml").is_file()} if root.is_dir() else {}


# -- the rule -----------------------------------------------------------------------------------

def test_the_best_mean_wins_a_diverged_run_is_worst_and_ties_go_to_the_smaller_value():
    assert choose({1e-3: [0.5, 0.7], 1e-2: [0.9, 0.2], 1e-4: [0.1, 0.1]}, maximize=True) == 1e-3  # 0.6 > 0.55
    worst = score(None, "diverged", maximize=True)
    assert worst == -math.inf and score(0.9, "diverged", True) == -math.inf
    assert score(float("nan"), "completed", True) == -math.inf and score(0.4, "completed", True) == 0.4
    assert choose({1e-3: [0.5, 0.5], 1e-2: [0.99, worst]}, maximize=True) == 1e-3  # one diverged seed loses
    assert choose({3e-3: [0.5], 1e-3: [0.5], 1e-2: [0.5]}, maximize=True) == 1e-3  # a tie: the smaller
    assert choose({3e-3: [worst], 1e-3: [worst]}, maximize=True) == 1e-3  # all diverged: the smallest
    assert choose({1e-3: [0.3], 1e-2: [0.2]}, maximize=False) == 1e-2  # a loss: the smaller mean
    assert score(None, "diverged", maximize=False) == math.inf
    # a gate: only the values that met it on every tune seed compete; all of them when none did
    scores = {1e-3: [0.9], 1e-2: [0.5], 3e-2: [0.6]}
    assert choose(scores, True, {1e-3: False, 1e-2: True, 3e-2: True}) == 3e-2
    assert choose(scores, True, {1e-3: False, 1e-2: True, 3e-2: False}) == 1e-2
    assert choose(scores, True, {1e-3: False, 1e-2: False, 3e-2: False}) == 1e-3
    gate = Gate("val/acc_best", ">=", 0.99)
    assert gate.passes(0.99, "completed") and not gate.passes(0.989, "completed")
    assert not gate.passes(1.0, "diverged") and not gate.passes(float("nan"), "completed") and not gate.passes(None, "completed")
    assert Gate("val/loss", "<=", 0.5).passes(0.4, "completed") and str(gate) == "val/acc_best >= 0.99"


# -- bad tune lines -----------------------------------------------------------------------------

GRID = {**TINY, "optim.lr": {"values": LRS}, "seed": {"values": [0, 1, 2]}}
BAD = {
    "three lrs": ({**GRID, "optim.lr": {"values": [1e-4, 1e-3, 1e-2]}}, {}, "has 3 values spanning 100x"),
    "span under 30x": ({**GRID, "optim.lr": {"values": [1e-3, 2e-3, 5e-3, 2e-2]}}, {}, "spanning 20x"),
    "seed not in grid": (GRID, {"description": "tune optim.lr on seeds 0 7"}, "tune seed(s) 7 are not among"),
    "key not in grid": ({**GRID, "optim.lr": {"value": 1e-3}}, {}, "optim.lr must be a grid parameter"),
    "not a key": (GRID, {"description": "tune optim.learning_rate on seeds 0"}, "is not an ablate train key"),
    "the seed": (GRID, {"description": "tune seed on seeds 0"}, "the seed cannot be tuned"),
    "malformed": (GRID, {"description": "tune optim.lr with seeds 0"}, "is not a tune line"),
    "two lines": (GRID, {"description": "tune optim.lr on seeds 0\ntune optim.lr on seeds 1"}, "keep one"),
    "goal left out": (GRID, {"metric": {"name": "val/acc_best"}}, "goal spelled out"),
    "test metric": (GRID, {"metric": {"name": "test/acc", "goal": "maximize"}}, "never on test"),
    "misspelt metric": (GRID, {"metric": {"name": "val/acc_bset", "goal": "maximize"}}, "is not one a run logs"),
    "metrics.csv metric": (GRID, {"metric": {"name": "val/step_solved", "goal": "minimize"}}, "is not one a run logs"),
    "random": (GRID, {"method": "random", "run_cap": 4}, "tuning needs method grid"),
    "gate not a comparison": (GRID, {"description": "tune optim.lr on seeds 0 where val/acc_best > 0.99"},
                              "is not 'METRIC >= NUMBER'"),
    "gate on test": (GRID, {"description": "tune optim.lr on seeds 0 where test/acc >= 0.99"},
                     "the gate's metric 'test/acc' is not one a run logs"),
    "gate bound": (GRID, {"description": "tune optim.lr on seeds 0 where val/acc_best >= nan"}, "not a finite number"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_tune_line_exits_2_with_one_line_before_any_run(case, tmp_path, capsys):
    params, top, expected = BAD[case]
    path = write(tmp_path, "bad", params, **({"description": "tune optim.lr on seeds 0"} | top))
    assert cli.main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ablate: ") and "\n" not in err and "; " in err, err
    assert expected in err, err
    assert not (tmp_path / "runs").exists()


def test_a_good_tune_line_is_read_with_prose_around_it_and_w_and_b_schema_keys_only(tmp_path):
    path = write(tmp_path, "good", GRID, description="Q: which lr?\n  tune optim.lr on seeds 0, 2  \nmore prose")
    raw = yaml.safe_load(path.read_text())
    assert set(raw) <= set(spec.TOP_LEVEL_KEYS)  # still a plain W&B sweep file
    sweep = spec.load(str(path))
    assert sweep.tune is not None and sweep.tune.key == "optim.lr" and sweep.tune.seeds == (0, 2)
    assert sweep.tune.values == tuple(LRS) and sweep.tune.metric == "val/acc_best" and sweep.tune.maximize
    assert len(sweep.runs) == 4 * 3  # every configuration (what W&B agents run), each checked
    assert sweep.expected_runs() == 4 * 2 + 1  # here: stage 1 on seeds 0 and 2, stage 2 seed 1 once
    assert spec.load(str(write(tmp_path, "plain", GRID, description="no tuning here"))).tune is None
    smoke = spec.load(str(path), budget="smoke")  # smoke keeps seed 0: stage 1 is everything
    assert smoke.tune.seeds == (0,) and {r.cfg.seed for r in smoke.runs} == {0}


def test_a_gate_chooses_among_the_values_that_met_it_and_the_runner_and_the_table_agree(tmp_path, monkeypatch):
    """`where val/acc_best >= 0.9`: the best val/acc_mean among the rates whose stage-1 runs all reached 0.9
    (real tiny runs, their two metrics then planted so the gate decides); with no rate meeting it, all compete."""
    from ablate.results import load
    from ablate.sweep import runner
    from ablate.train import train

    from .hardening_fixtures import edit_summary

    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    sweeps = tmp_path / "sweeps"
    path = write(sweeps, "gated", {**GRID, "seed": {"values": [0, 1]}},
                 description="Q: at a rate that learns\ntune optim.lr on seeds 0 where val/acc_best >= 0.9",
                 metric={"name": "val/acc_mean", "goal": "maximize"})
    sweep = spec.load(str(path))
    assert sweep.tune.gate == Gate("val/acc_best", ">=", 0.9)
    assert sweep.tune.as_dict()["gate"] == "val/acc_best >= 0.9"
    stages = runner.Stages(sweep)
    for run in stages.stage1:
        assert train(run.cfg, log=lambda *a: None)["status"] == "completed"
    planted = {1e-7: (0.80, 0.70), 1e-6: (0.95, 0.40), 1e-2: (0.92, 0.60), 3.0: (0.89, 0.65)}  # best, mean

    def plant(best_of) -> None:
        for run in stages.stage1:
            lr = C.flat(run.cfg)["optim.lr"]
            edit_summary(runner.run_dir(run), metrics={"val/acc_best": best_of(lr), "val/acc_mean": planted[lr][1]})

    plant(lambda lr: planted[lr][0])
    (variant,) = stages.variants
    chosen, means, passed = stages.decide(variant)
    assert chosen == 1e-2 and passed == {1e-7: False, 1e-6: True, 1e-2: True, 3.0: False}  # ungated: 1e-7
    assert means == {lr: v[1] for lr, v in planted.items()}
    stages.chosen[variant], stages.scores[variant], stages.passed[variant] = chosen, means, passed
    assert stages.choice_line(variant).endswith(
        "; among the values with val/acc_best >= 0.9 on every tune seed: 1e-06, 0.01)")
    table = load("gated", sweeps=sweeps)
    assert list(table["tuned.optim.lr"]) == [1e-2] * 4 and table.attrs["tune"]["gate"] == "val/acc_best >= 0.9"

    plant(lambda lr: 0.5)  # no rate meets the gate: every rate competes, the best mean wins
    chosen, means, passed = stages.decide(variant)
    assert chosen == 1e-7 and not any(passed.values())
    stages.chosen[variant], stages.scores[variant], stages.passed[variant] = chosen, means, passed
    assert "; no value met val/acc_best >= 0.9 on every tune seed, so all competed)" in stages.choice_line(variant)
    assert list(load("gated", sweeps=sweeps)["tuned.optim.lr"]) == [1e-7] * 4


# -- real runs: both stages, killed in each, exactly once ------------------------------------------

def _sweep_process(path: Path, tmp_path: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "ABLATE_RUNS_DIR": str(tmp_path / "runs")}
    return subprocess.Popen([sys.executable, "-m", "ablate", "sweep", str(path), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)


def _kill_when(proc: subprocess.Popen, root: Path, ready, what: str) -> dict[str, dict]:
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if ready(summaries(root)):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        else:
            pytest.fail(f"the sweep never reached {what}")
    finally:  # never left running behind a failed test
        proc.kill()
        proc.communicate()
    return summaries(root)


@pytest.mark.slow
def test_stage_2_runs_at_the_value_stage_1_chose_after_kills_in_each_stage_exactly_once(tmp_path, capsys):
    path = write(tmp_path / "sweeps", "tuned", {**GRID, "model.n_heads": {"values": [1, 2]}, "seed": {"values": [0, 1]}})
    root = tmp_path / "runs" / "tuned"

    def stage(runs: dict, seeds: set[int]) -> list[str]:
        cfgs = configs(root)
        return [n for n, s in runs.items() if s and s["status"] == "completed" and cfgs.get(n, {}).get("seed") in seeds]

    # killed in stage 1 (2 of its 8 runs done), then in stage 2 (1 of its 2 runs done)
    proc = _sweep_process(path, tmp_path, "--workers", "1")
    first = _kill_when(proc, root, lambda runs: 2 <= len(stage(runs, {0})) < 8, "2 finished stage-1 runs")
    assert not stage(first, {1})
    from ablate.results import aggregate, best_lr, format_table, load
    from ablate.results import write as write_table

    assert load("tuned")["tuned.optim.lr"].isna().all()  # no choice in the table before the runner's
    proc = _sweep_process(path, tmp_path, "--workers", "1")
    second = _kill_when(proc, root, lambda runs: len(stage(runs, {1})) == 1, "a finished stage-2 run")
    # a run the kill caught before its summary.json was written reads as None
    done_before = {n: (root / n / "summary.json").read_text() for n, s in second.items() if s and s["status"] == "completed"}
    assert len(stage(second, {0})) == 8  # stage 2 starts only once a variant's stage 1 is finished

    assert cli.main(["sweep", str(path)]) == 0  # the same command: finishes what is missing
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["runs"] == 10 and result["completed"] == 10 and result["skipped"] == len(done_before)
    runs, cfgs = summaries(root), configs(root)
    assert len(runs) == 10 and {s["status"] for s in runs.values()} == {"completed"}
    for name, text in done_before.items():  # finished before: untouched
        assert (root / name / "summary.json").read_text() == text
    assert all(s["attempts"] <= 2 for s in runs.values())

    # the choice, recomputed here from the stage-1 runs: 1e-2 learns; the tiny ones do not, 3.0 wrecks
    chosen = {}
    for heads in (1, 2):
        curve = {lr: [runs[n]["metrics"]["val/acc_best"] for n, c in cfgs.items()
                      if c["model"]["n_heads"] == heads and c["optim"]["lr"] == lr and c["seed"] == 0] for lr in LRS}
        assert all(len(v) == 1 for v in curve.values())
        assert curve[1e-2][0] > max(curve[lr][0] for lr in LRS if lr != 1e-2) + 0.1
        chosen[heads] = max(LRS, key=lambda lr: (curve[lr][0], -lr))
        assert chosen[heads] == 1e-2
    assert result["tuned"]["chosen"] == {"model.n_heads=1": 1e-2, "model.n_heads=2": 1e-2}
    assert result["tuned"]["undecided"] == []
    stage2 = sorted((c["model"]["n_heads"], c["optim"]["lr"], c["seed"]) for c in cfgs.values() if c["seed"] != 0)
    assert stage2 == [(h, chosen[h], 1) for h in (1, 2)]  # only at the chosen lr
    assert "optim.lr=0.01 chosen (val/acc_best mean over seeds 0" in captured.err

    # the table: the choice on every row, each variant over its seeds at it, and the stage-1 curve
    df = load("tuned")
    assert df.attrs["tune"]["key"] == "optim.lr" and list(df["tuned.optim.lr"]) == [1e-2] * 10
    assert sorted(df["stage"]) == [1] * 8 + [2] * 2
    at = best_lr(df)
    assert len(at) == 4 and set(at["optim.lr"]) == {1e-2}
    agg = aggregate(df, metrics=["val/acc_best", "test/acc"])
    assert list(agg["model.n_heads"]) == [1, 2] and list(agg["tuned.optim.lr"]) == [1e-2, 1e-2]
    assert list(agg["test/acc_n"]) == [2, 2]
    for heads, row in zip((1, 2), agg.itertuples(index=False)):
        mine = df[(df["model.n_heads"] == heads) & (df["optim.lr"] == 1e-2)]
        assert row[list(agg.columns).index("test/acc_mean")] == pytest.approx(mine["test/acc"].mean())
        for lr in LRS:
            stage1 = df[(df["model.n_heads"] == heads) & (df["optim.lr"] == lr) & (df["seed"] == 0)]
            column = f"tune/val/acc_best@optim.lr={lr:g}"
            assert row[list(agg.columns).index(column)] == pytest.approx(stage1["val/acc_best"].iloc[0])
    write_table(df, tmp_path / "table.csv")  # a table read back from CSV (no attrs) selects the same rows
    assert sorted(best_lr(pd.read_csv(tmp_path / "table.csv"))["run_id"]) == sorted(at["run_id"])
    text = format_table(agg, width=400)
    assert "tuned.optim.lr" in text and "lr=1e-07" in text and "mean val/acc_best over tune seeds 0" in text

    # a finished sweep run again does nothing; its dry run lists both stages
    mtimes = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    assert cli.main(["sweep", str(path)]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["run_now"] == 0
    assert mtimes == {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    assert cli.main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "stage 1: 8 runs" in out and "stage 2: 2 runs\n" in out and out.count("completed") == 10


def test_retrain_stale_chooses_on_the_retrained_stage_1_and_trains_each_run_once(tmp_path, capsys):
    """--retrain-stale on a tuned sweep that other code made: stage 2 is chosen on the retrained stage-1 runs (an
    earlier run's number would pick 1e-7 here), and each run, stage 2's too, is trained again once."""
    from ablate.provenance import git_state
    from ablate.rundir import write_json

    if git_state()["commit"] is None:
        pytest.skip("not a git checkout: no commit to compare")
    path = write(tmp_path / "sweeps", "retuned", {**GRID, "seed": {"values": [0, 1]}})
    root = tmp_path / "runs" / "retuned"
    assert cli.main(["sweep", str(path)]) == 0
    for name, summary in summaries(root).items():
        summary["provenance"]["commit"] = "0" * 40
        if configs(root)[name]["optim"]["lr"] == 1e-7:
            summary["metrics"]["val/acc_best"] = 1.0
        write_json(root / name / "summary.json", summary)
    capsys.readouterr()
    # the dry run previews what each command would do: kept (stage 2 chosen on the old numbers: 1e-7, a run not made
    # yet, so 4 listed runs are other code's), or retrained (stage 2 not chosen until stage 1 is trained again)
    assert cli.main(["sweep", str(path), "--dry-run"]) == 0
    kept = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("stage 2 of (one variant): optim.lr=") for line in kept) == 1
    assert kept[-1] == "4 of them finished and made by other code: kept (--retrain-stale trains them again)"
    assert cli.main(["sweep", str(path), "--dry-run", "--retrain-stale"]) == 0
    again = capsys.readouterr().out.splitlines()
    assert not any(line.startswith("stage 2 of") for line in again)
    assert "stage 2: 1 runs, 1 of them at a value chosen when their variant's stage 1 has finished (1 of 1 variants)" in again
    assert again[-1] == "4 of them finished and made by other code: trained again (--retrain-stale)"
    assert cli.main(["sweep", str(path), "--retrain-stale"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["run_now"] == 5 and result["tuned"]["chosen"] == {"(one variant)": 1e-2}, result
    runs = summaries(root)
    assert len(runs) == 5 and all(s["retrained"] == "attempts/1" for s in runs.values())
    assert not list(root.glob("*/attempts/2"))
    assert cli.main(["sweep", str(path), "--retrain-stale"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["run_now"] == 0


def test_dry_run_of_a_new_tuned_sweep_says_stage_2_waits_for_stage_1(tmp_path, capsys):
    path = write(tmp_path, "fresh", {**GRID, "model.n_heads": {"values": [1, 2]}})
    assert cli.main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 8 + 3 and out[8] == "stage 1: 8 runs"
    assert out[9] == ("stage 2: 4 runs, 4 of them at a value chosen when their variant's stage 1 has finished "
                      "(2 of 2 variants)")
    assert out[10].startswith("12 runs in ")
    assert not (tmp_path / "runs").exists()


def test_every_tunable_metric_is_in_a_real_runs_summary(tmp_path):
    """tune.METRICS is what the runner can read: a real token-task run logs all of them, MNIST all
    but val/seq_acc (so a tune line naming one never scores every run as worst)."""
    from ablate.sweep.tune import METRICS
    from ablate.train import train

    cfg = C.build(C.parse_overrides([
        "data.task=copy", "data.n_train=64", "data.n_val=32", "data.n_test=32", "trainer.max_epochs=1",
        "tracking=none", "run.probes=false", "model.d_model=16", "model.n_heads=2", f"run.dir={tmp_path / 'r'}"]))
    metrics = train(cfg, log=lambda *a: None)["metrics"]
    assert set(METRICS) <= set(metrics)
    # val/acc_mean: the mean of the epochs' val/acc in metrics.csv (here 2 epochs)
    cfg2 = C.build(C.parse_overrides([
        "data.task=copy", "data.n_train=64", "data.n_val=32", "data.n_test=32", "trainer.max_epochs=3",
        "tracking=none", "run.probes=false", "model.d_model=16", "model.n_heads=2", "optim.lr=0.01",
        f"run.dir={tmp_path / 'r2'}"]))
    metrics = train(cfg2, log=lambda *a: None)["metrics"]
    rows = read_metrics_rows(tmp_path / "r2" / "metrics.csv")
    accs = [float(r["val/acc"]) for r in rows if r["val/acc"]]
    assert len(accs) == 3 and metrics["val/acc_mean"] == pytest.approx(sum(accs) / 3, abs=1e-9)
