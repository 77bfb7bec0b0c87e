"""`ablate sweep`: reading and expanding W&B sweep files, bad input (exit 2, one line, nothing
written), and running them: parallel forked workers, divergence, failures, skipping finished runs,
and exactly-once after the runner is killed with SIGKILL in the middle of a sweep."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from ablate import cli, limits
from ablate import config as C
from ablate.budgets import BUDGETS, SMOKE_SEEDS
from ablate.rundir import read_summary
from ablate.sweep import runner, spec
from ablate.sweep.spec import SweepError

REPO = Path(__file__).resolve().parents[1]
SWEEP_FILES = sorted((REPO / "sweeps").glob("*.yaml"))
HEADER = {"program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"]}
# A copy task small enough that a run trains in well under a second once the worker is forked.
TINY = {
    "data.task": {"value": "copy"}, "data.vocab": {"value": 6}, "data.length": {"value": 4},
    "data.n_train": {"value": 128}, "data.n_val": {"value": 32}, "data.n_test": {"value": 32},
    "data.batch_size": {"value": 32}, "model.d_model": {"value": 16}, "model.n_heads": {"value": 2},
    "model.n_layers": {"value": 1}, "trainer.max_epochs": {"value": 1}, "run.probes": {"value": False},
    "tracking": {"value": "none"},
}


# the module-wide forkserver and the isolated runs folder, network and W&B mode
from .sweep_fixtures import descendants, forkserver, isolated  # noqa: E402, F401


def write(tmp_path: Path, name: str, parameters: dict, **top) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**HEADER, "method": "grid", **top, "parameters": parameters}, sort_keys=False))
    return path


def statuses(tmp_path: Path, name: str) -> dict[str, dict]:
    return {d.name: read_summary(d) for d in sorted((tmp_path / "runs" / name).iterdir()) if d.is_dir()}


# -- reading and expanding ---------------------------------------------------------------------

def test_grid_is_the_product_of_values_in_file_order(tmp_path):
    path = write(tmp_path, "g", {"model.n_heads": {"values": [1, 2]}, "optim.lr": {"value": 0.01},
                                 "model.norm": {"values": ["pre", "post", "none"]}, "seed": {"values": [0, 1]}})
    sweep = spec.load(str(path))
    assert sweep.name == "g" and sweep.method == "grid" and len(sweep.runs) == 2 * 3 * 2
    assert [(r.params["model.n_heads"], r.params["model.norm"], r.params["seed"]) for r in sweep.runs][:4] == [
        (1, "pre", 0), (1, "pre", 1), (1, "post", 0), (1, "post", 1)]
    assert sweep.varying == ["model.n_heads", "model.norm", "seed"]
    first = sweep.runs[0].cfg
    assert first.model.n_heads == 1 and first.optim.lr == 0.01 and first.run.group == "g"
    assert first.trainer.threads == 1 and first.run.dir is None
    ids = [r.run_id for r in sweep.runs]
    assert len(set(ids)) == len(ids)
    # the id is the one `ablate train` gives the same keys: threads and group do not change it
    assert ids[0] == C.run_id(C.build({"model.n_heads": "1", "optim.lr": "0.01", "model.norm": "pre", "seed": "0"}))
    assert spec.load(str(path), threads=2).runs[0].cfg.trainer.threads == 2
    assert [r.run_id for r in spec.load(str(path), threads=2).runs] == ids


def test_random_draws_run_cap_distinct_configs_reproducibly(tmp_path):
    params = {"optim.lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1},
              "model.n_layers": {"min": 1, "max": 4},  # W&B infers int_uniform
              "model.dropout": {"distribution": "uniform", "min": 0.0, "max": 0.5},
              "model.norm": {"values": ["pre", "post"], "probabilities": [0.8, 0.2]},
              "model.temperature": {"distribution": "q_uniform", "min": 0.5, "max": 2.0, "q": 0.5},
              "seed": {"value": 3}}
    path = write(tmp_path, "r", params, method="random", run_cap=12)
    a, b, other = spec.load(str(path)), spec.load(str(path)), spec.load(str(path), seed=1)
    assert cli.main(["sweep", str(path), "--dry-run", "--sweep-seed", "0"]) == 0
    assert len(a.runs) == 12 and [r.run_id for r in a.runs] == [r.run_id for r in b.runs]
    assert [r.run_id for r in a.runs] != [r.run_id for r in other.runs]
    for run in a.runs:
        cfg = run.cfg
        assert 1e-4 <= cfg.optim.lr <= 1e-1 and cfg.model.n_layers in (1, 2, 3, 4)
        assert 0.0 <= cfg.model.dropout <= 0.5 and cfg.model.temperature in (0.5, 1.0, 1.5, 2.0)
        assert cfg.model.norm in ("pre", "post") and cfg.seed == 3
    # a space smaller than run_cap gives each configuration once
    small = write(tmp_path, "small", {"model.norm": {"values": ["pre", "post"]}}, method="random", run_cap=10)
    assert sorted(r.cfg.model.norm for r in spec.load(str(small)).runs) == ["post", "pre"]


def test_budget_option_overrides_the_file_and_smoke_keeps_seed_0(tmp_path):
    path = write(tmp_path, "b", {"budget": {"value": "quick"}, "data.task": {"value": "copy"},
                                 "model.n_heads": {"values": [1, 2]}, "seed": {"values": [0, 1, 2]}})
    quick = spec.load(str(path))
    assert len(quick.runs) == 6 and {r.cfg.budget for r in quick.runs} == {"quick"}
    assert quick.runs[0].cfg.trainer.max_epochs == BUDGETS["quick"]["copy"]["trainer.max_epochs"]
    smoke = spec.load(str(path), budget="smoke")
    assert [(r.params["model.n_heads"], r.cfg.seed) for r in smoke.runs] == [(1, s) for s in SMOKE_SEEDS] + [
        (2, s) for s in SMOKE_SEEDS]
    assert smoke.runs[0].cfg.trainer.max_epochs == BUDGETS["smoke"]["copy"]["trainer.max_epochs"]
    assert smoke.runs[0].params["budget"] == "smoke"
    assert len(spec.load(str(path), budget="none").runs) == 6


def test_a_sweep_can_have_its_own_quick_profile_and_explicit_keys_still_win(monkeypatch):
    from ablate import budgets
    from ablate.budgets import SWEEPS

    # every sweep named there exists and uses only keys a budget may change
    allowed = {k for task in BUDGETS["quick"].values() for k in task}
    for group, tasks in SWEEPS["quick"].items():
        assert group in {p.stem for p in SWEEP_FILES} and all(set(t) <= allowed for t in tasks.values())
    scaling = {"trainer.max_epochs": 2, "data.train_subset": 5000}
    monkeypatch.setitem(budgets.SWEEPS, "quick", {"scaling": {"mnist": scaling}})
    cfg = C.build({"budget": "quick", "run.group": "scaling"})
    assert cfg.trainer.max_epochs == scaling["trainer.max_epochs"] != BUDGETS["quick"]["mnist"]["trainer.max_epochs"]
    assert cfg.data.train_subset == scaling["data.train_subset"]
    assert cfg.data.val_size == BUDGETS["quick"]["mnist"]["data.val_size"]  # the rest from the budget
    default = C.build({"budget": "quick"})  # any other group: the budget's own profile
    assert default.trainer.max_epochs == BUDGETS["quick"]["mnist"]["trainer.max_epochs"]
    explicit = C.build({"budget": "quick", "run.group": "scaling", "trainer.max_epochs": 7})
    assert explicit.trainer.max_epochs == 7
    assert C.build({"budget": "smoke", "run.group": "scaling"}) == C.build({"budget": "smoke", "run.group": "scaling"})
    assert set(budgets.SWEEPS["quick"]) <= {p.stem for p in SWEEP_FILES}


@pytest.mark.parametrize("budget", [None, "smoke", "quick", "full", "none"])
@pytest.mark.parametrize("path", SWEEP_FILES, ids=[p.stem for p in SWEEP_FILES])
def test_every_sweep_file_expands_and_every_config_builds(path, budget):
    raw = yaml.safe_load(path.read_text())
    assert set(raw) <= set(spec.TOP_LEVEL_KEYS) and raw["command"] == HEADER["command"]
    assert all(set(p) <= set(spec.PARAMETER_KEYS) for p in raw["parameters"].values())
    assert set(raw["parameters"]) <= set(C.all_keys())
    sweep = spec.load(str(path), budget=budget)  # builds every expanded config
    assert {r.cfg.run.group for r in sweep.runs} == {path.stem}
    # the probes read a whole split EVAL_CHUNK sequences at a time in every sweep (limits.EVAL_BYTES)
    assert {limits.eval_chunk(r.cfg) for r in sweep.runs} == {limits.EVAL_CHUNK}
    seeds = {r.cfg.seed for r in sweep.runs}
    n_seeds = len(raw["parameters"]["seed"]["values"])
    if (budget or raw["parameters"]["budget"]["value"]) == "smoke":
        assert seeds <= set(SMOKE_SEEDS)
    else:
        assert len(seeds) == n_seeds
    if budget is not None:  # a budget changes epochs and sizes only (and the seeds, for smoke)
        base = spec.load(str(path), budget="none")
        # run.name: the display name ends with the seed (smoke's seeds differ)
        keys = {k for task in BUDGETS[budget].values() for k in task} | {"budget", "seed", "run.name"}
        by_variant = {r.label([k for k in base.varying if k != "seed"]): C.flat(r.cfg) for r in base.runs}
        for run in sweep.runs:
            before = by_variant[run.label([k for k in sweep.varying if k not in ("seed", "budget")])]
            changed = {k for k, v in C.flat(run.cfg).items() if before[k] != v}
            assert changed <= keys, changed - keys


BAD = {
    "yaml": ("program: ablate\nmethod: grid\nparameters:\n  seed: {values: [0, 1}\n", "line 4"),
    "top-level key": ({**HEADER, "method": "grid", "budget": "smoke", "parameters": {"seed": {"value": 0}}},
                      "unknown top-level key 'budget'"),
    "parameter key": ({**HEADER, "method": "grid", "parameters": {"seed": {"values": [0], "default": 0}}},
                      "unknown key 'default'"),
    "ablate key": ({**HEADER, "method": "grid", "parameters": {"model.n_head": {"values": [1, 2]}}},
                   "did you mean model.n_heads?"),
    "empty grid": ({**HEADER, "method": "grid", "parameters": {"model.n_heads": {"values": []}}}, "values is empty"),
    "impossible": ({**HEADER, "method": "grid", "parameters": {"model.d_model": {"value": 64},
                                                                "model.n_heads": {"values": [4, 3]}}},
                   "run 2 (model.d_model=64 model.n_heads=3"),
    "bad value": ({**HEADER, "method": "grid", "parameters": {"model.norm": {"values": ["pre", "side"]}}},
                  "model.norm"),
    "bayes": ({**HEADER, "method": "bayes", "parameters": {"seed": {"values": [0, 1]}}}, "wandb agent"),
    "early_terminate": ({**HEADER, "method": "grid", "early_terminate": {"type": "hyperband", "min_iter": 1},
                         "parameters": {"seed": {"values": [0, 1]}}}, "early_terminate stops runs of the learning-rate stage of a tuned sweep"),
    "random without run_cap": ({**HEADER, "method": "random", "parameters": {"seed": {"values": [0, 1]}}},
                               "run_cap"),
    "run.dir": ({**HEADER, "method": "grid", "parameters": {"run.dir": {"value": "/tmp/x"}}}, "cannot be swept"),
    "other group": ({**HEADER, "method": "grid", "parameters": {"run.group": {"value": "other"}}}, "sweep name"),
    "not a mapping": ({**HEADER, "method": "grid", "parameters": {"seed": 3}}, "{value: 3}"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_sweep_file_exits_2_with_one_line_before_any_run(case, tmp_path, capsys):
    content, expected = BAD[case]
    path = tmp_path / "bad.yaml"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    assert cli.main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ablate: ") and "\n" not in err and "; " in err, err
    assert expected in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("argv, expected", [
    (["sweep", "nonexistent"], "no sweep file 'nonexistent'"),
    (["sweep", "FILE", "--budget", "huge"], "invalid choice: 'huge'"),
    (["sweep", "FILE", "--max-runs", "0"], "--max-runs=0"),
    (["sweep", "FILE", "--gpus", "2"], "unrecognized arguments: --gpus 2"),
    (["sweep", "FILE", "--workers", "0"], "--workers=0"),
    (["sweep", "FILE", "--threads", "0"], "--threads=0"),
    (["sweep", "FILE", "--runs-per-gpu", "0"], "--runs-per-gpu=0"),
    (["sweep", "FILE", "--runs-per-gpu", "many"], "invalid int value: 'many'"),
    (["sweep", "FILE", "--wandb-sweep", "--tracking", "none"], "--wandb-sweep needs runs that log to W&B"),
])
def test_bad_options_exit_2_with_one_line(argv, expected, tmp_path, capsys):
    path = write(tmp_path, "ok", TINY)
    assert cli.main([str(path) if a == "FILE" else a for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ablate: ") and "\n" not in err and expected in err, err
    assert not (tmp_path / "runs").exists()


def test_bare_name_finds_the_repository_sweep_and_dry_run_writes_nothing(capsys):
    assert cli.main(["sweep", "scaling", "--budget", "smoke", "--dry-run"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    # a tuned sweep: its 24 stage-1 runs (6 variants x 4 learning rates on seed 0), the two stage
    # lines, the summary; smoke keeps seed 0 only, so stage 2 is empty
    assert len(out) == 27 and out[-1].startswith("24 runs in") and out[-3:-1] == ["stage 1: 24 runs", "stage 2: 0 runs"]
    assert all(line.split()[1] == "new" and "budget=smoke" in line for line in out[:24])
    assert not Path("runs").exists()


def test_gpu_slots_are_disjoint_and_cpu_machines_ignore_them():
    assert runner.gpu_slots(["0", "1", "2", "3", "4", "5", "6", "7"], 2) == ["0,1", "2,3", "4,5", "6,7"]
    assert runner.gpu_slots(["3", "5", "7"], 1) == ["3", "5", "7"]
    assert runner.gpu_slots(["0", "1", "2"], 2) == ["0,1"]  # the odd one out stays idle
    with pytest.raises(SweepError, match="only 2 GPUs"):
        runner.gpu_slots(["0", "1"], 4)
    assert runner.plan(None, 1, None, ["0", "1", "2", "3"]) == runner.Plan(4, ["0", "1", "2", "3"])
    assert runner.plan(None, 1, 2, ["0", "1", "2", "3"]) == runner.Plan(2, ["0,1", "2,3"])
    assert runner.plan(1, 1, 2, ["0", "1", "2", "3"]) == runner.Plan(1, ["0,1"])
    with pytest.raises(SweepError, match="--workers 2 or fewer"):
        runner.plan(3, 1, 2, ["0", "1", "2", "3"])
    cpu = runner.plan(None, 1, 4, [])  # --gpus-per-run accepted and ignored without GPUs
    assert cpu.workers == runner.cpu_count() and cpu.slots == [None] * cpu.workers
    assert runner.plan(None, 2, None, []).workers == max(1, runner.cpu_count() // 2)
    assert runner._env(1, "2,3")["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert runner.default_threads(None, [], None) == 1  # one run per core, one thread each
    assert runner.default_threads(1, [], None) == runner.cpu_count()
    assert runner.default_threads(None, ["0", "1"], 1) == max(1, runner.cpu_count() // 2)


def test_runs_asking_for_more_devices_than_a_slot_are_rejected(tmp_path):
    path = write(tmp_path, "ddp", {**TINY, "trainer.devices": {"value": 2}})
    sweep = spec.load(str(path))
    with pytest.raises(SweepError, match="--gpus-per-run 2"):
        runner.Runner(sweep, gpus_per_run=1, gpus=["0", "1"])
    assert runner.Runner(sweep, gpus_per_run=2, gpus=["0", "1"]).plan == runner.Plan(1, ["0,1"])


# -- running -----------------------------------------------------------------------------------

def test_divergence_is_recorded_the_sweep_exits_0_and_a_second_call_reruns_nothing(tmp_path, capsys):
    path = write(tmp_path, "div", {**TINY, "model.norm": {"value": "none"}, "optim.lr": {"values": [1e-3, 1e12]}})
    assert cli.main(["sweep", str(path), "--workers", "2"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result == {**result, "runs": 2, "completed": 1, "diverged": 1, "failed": 0, "run_now": 2}
    runs = statuses(tmp_path, "div")
    assert sorted(s["status"] for s in runs.values()) == ["completed", "diverged"]
    assert "1 diverged" in captured.err and "start-up of a run: process" in captured.err
    for name, s in runs.items():
        assert (tmp_path / "runs" / "div" / name / "train.log").exists() and s["group"] == "div"
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").rglob("*") if p.is_file()}
    assert cli.main(["sweep", str(path)]) == 0  # nothing trained: no file below is touched
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["skipped"] == 2 and result["run_now"] == 0 and result["diverged"] == 1
    assert mtimes == {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").rglob("*") if p.is_file()}


def test_a_crashing_run_is_failed_with_its_error_the_others_go_on_and_a_rerun_retries_it(tmp_path, capsys):
    # every key is checked before a run now, so the crash comes from the run's folder: its metrics.csv
    # is a directory, which writing it fails on at the end of training (an OSError, not a full disk)
    path = write(tmp_path, "crash", {**TINY, "seed": {"values": [0, 1]}})
    second = spec.load(str(path)).runs[1]
    (tmp_path / "runs" / "crash" / second.run_id / "metrics.csv").mkdir(parents=True)
    assert cli.main(["sweep", str(path)]) == 1
    err = capsys.readouterr().err
    assert "ablate: 1 of 2 runs failed" in err and "Is a directory" in err
    runs = statuses(tmp_path, "crash")
    failed = [s for s in runs.values() if s["status"] == "failed"]
    assert len(failed) == 1 and "Is a directory" in failed[0]["error"].strip().splitlines()[-1]
    assert [s["status"] for s in runs.values()].count("completed") == 1
    assert cli.main(["sweep", str(path)]) == 1  # the failed run is tried again, the completed one is not
    again = statuses(tmp_path, "crash")
    assert [s["attempts"] for s in again.values() if s["status"] == "failed"] == [2]
    assert [s for s in again.values() if s["status"] == "completed"] == [
        s for s in runs.values() if s["status"] == "completed"]


def test_broken_data_files_are_bad_input_found_before_any_run(tmp_path, monkeypatch, capsys):
    """MNIST files that are there but cannot be read are one line naming the file and exit 2, before
    any run starts (not one failed run per configuration)."""
    path = write(tmp_path, "early", {"tracking": {"value": "none"}, "run.probes": {"value": False}})
    raw = tmp_path / "broken" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):
        (raw / name).write_bytes(b"")  # present, so nothing is downloaded, but unreadable
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path / "broken"))
    assert cli.main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("ablate: data.task=mnist: MNIST file ")
    assert str(raw / "train-images-idx3-ubyte") in err
    assert not (tmp_path / "runs" / "early").exists() or not any((tmp_path / "runs" / "early").iterdir())


def test_every_distinct_data_config_is_checked_before_any_run(tmp_path, capsys):
    """The first configuration of a task builds; a later one of the same task cannot: still exit 2
    before anything runs (copy's vocab check now lives in its registry entry, so the expansion itself
    refuses it, naming the run)."""
    path = write(tmp_path, "vocab", {"data.task": {"value": "copy"}, "data.vocab": {"values": [10, 1]},
                                     "tracking": {"value": "none"}})
    assert cli.main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("ablate: ") and "run 2 (data.task=copy data.vocab=1" in err
    assert "data.vocab=1 is not allowed for data.task=copy" in err
    assert not (tmp_path / "runs" / "vocab").exists() or not any((tmp_path / "runs" / "vocab").iterdir())


def test_missing_data_is_bad_input_found_before_any_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path / "nowhere"))  # and no network (see isolated)
    path = write(tmp_path, "nodata", {"data.task": {"values": ["copy", "mnist"]}, "tracking": {"value": "none"}})
    assert cli.main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ablate: data.task=mnist: MNIST not found") and "\n" not in err
    assert "ABLATE_DATA_DIR" in err and not (tmp_path / "runs").exists()


def test_the_commands_data_check_needs_neither_lightning_nor_torchvision(tmp_path):
    """What `ablate sweep` checks before any run (MNIST's four files, a synthetic task's memory) runs in the
    command without Lightning or torchvision (a command on a login node stays small; the forkserver imports
    them alone), and where /dev holds no GPU driver's device file it counts no GPU, and knows that
    accelerator=auto trains on the CPU, without torch either. In a fresh interpreter, as the command runs
    them; a broken MNIST file is still found there. (Torch itself is imported: the config's size check
    builds the model on the meta device.)"""
    import torch

    from tests.test_data import write_idx

    raw = tmp_path / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, n in (("train", 30), ("t10k", 10)):
        write_idx(raw / f"{prefix}-images-idx3-ubyte", torch.zeros(n, 28, 28, dtype=torch.uint8))
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", torch.arange(n, dtype=torch.uint8) % 10)
    path = write(tmp_path, "light", {"data.task": {"values": ["copy", "mnist", "facts"]}, "tracking": {"value": "none"},
                                     "trainer.accelerator": {"value": "cpu"}})  # a name accepted without Lightning
    probe = ("import json, sys\n"
             "from ablate import limits\n"
             "from ablate.sweep import runner, spec\n"
             "from ablate.sweep.spec import SweepError\n"
             "gpus = [runner.visible_gpus(), limits.trains_on_gpu('auto'), 'torch' in sys.modules]\n"
             "try:\n"
             f"    runner.check_data(spec.load({str(path)!r}).runs)\n"
             "    said = ''\n"
             "except SweepError as err:\n"
             "    said = str(err)\n"
             "heavy = [m for m in ('pytorch_lightning', 'lightning_fabric', 'torchmetrics', 'torchvision') "
             "if m in sys.modules]\n"
             "print(json.dumps([said, limits.gpu_device_files(), gpus, heavy]))\n")
    env = {**os.environ, "ABLATE_DATA_DIR": str(tmp_path / "data")}
    env.pop("CUDA_VISIBLE_DEVICES", None)

    def check() -> list:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    said, files, gpus, heavy = check()
    assert said == "" and heavy == [], (said, heavy)
    if not files:  # this machine (CI's): no GPU, known without torch
        assert gpus == [[], False, False], gpus
    labels = raw / "t10k-labels-idx1-ubyte"
    labels.write_bytes(labels.read_bytes()[:-1])  # one label short: found by the same check, still without them
    said, _, _, heavy = check()
    assert said == (f"data.task=mnist: MNIST file {labels} is 17 bytes long, but its header declares 10 labels "
                    "(18 bytes): truncated; delete it and let torchvision download it again, or point "
                    "ABLATE_DATA_DIR at a good copy") and heavy == [], (said, heavy)


def test_a_synthetic_tasks_sets_too_big_for_memory_are_refused_before_any_run(tmp_path, monkeypatch, capsys):
    """The memory a synthetic task's sets need is checked by the command before any run, in the words the data
    module itself refuses them with."""
    from ablate.data import files

    monkeypatch.setattr(files, "memory_bytes", lambda: 2**18)  # 256 KiB; the sets need 255 KiB
    path = write(tmp_path, "big", {**TINY, "data.length": {"value": 8},
                                   "data.n_train": {"value": 512}, "data.n_val": {"value": 64},
                                   "data.n_test": {"value": 64}})  # tiny, should a regression train it
    assert cli.main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("ablate: data.task=copy: the copy task's sets need about 0.000243 GiB "
                                               "(512 + 64 sequences of 17 tokens"), err
    assert err.endswith("; lower data.n_train, data.n_val, data.n_test, data.length or data.test_length")
    assert not (tmp_path / "runs" / "big").exists() or not any((tmp_path / "runs" / "big").iterdir())


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    """Running, not a zombie (a container's init may never reap them)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _sweep_process(path: Path, tmp_path: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "ABLATE_RUNS_DIR": str(tmp_path / "runs")}
    return subprocess.Popen([sys.executable, "-m", "ablate", "sweep", str(path), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PR_SET_PDEATHSIG is Linux's")
def test_sigkill_mid_sweep_then_the_same_command_finishes_each_run_exactly_once(tmp_path, capsys):
    # three short runs, then three long ones that save last.ckpt every 8 steps
    params = {**TINY, "data.n_train": {"value": 1024}, "trainer.max_epochs": {"values": [1, 5]},
              "trainer.ckpt_every_n_steps": {"value": 8}, "seed": {"values": [0, 1, 2]}}
    path = write(tmp_path, "kill", params)
    long = {r.run_id for r in spec.load(str(path)).runs if r.cfg.trainer.max_epochs == 5}
    root = tmp_path / "runs" / "kill"
    proc = _sweep_process(path, tmp_path, "--workers", "2")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # kill when a run is done and a long one is mid-way, checkpointed
        runs = statuses(tmp_path, "kill") if root.exists() else {}
        done = [n for n, s in runs.items() if s and s["status"] == "completed"]
        midway = [n for n in long & set(runs) if runs[n] and runs[n]["status"] == "running"
                  and (root / n / "last.ckpt").exists()]
        if done and midway:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    else:
        pytest.fail("the sweep never had a finished and a checkpointed running run at once")
    family = _descendants(proc.pid)
    proc.kill()
    proc.communicate()
    before = {n: ((root / n / "summary.json").stat().st_mtime_ns, (root / n / "summary.json").read_text())
              for n, s in statuses(tmp_path, "kill").items() if s and s["status"] == "completed"}
    interrupted = {n for n, s in statuses(tmp_path, "kill").items() if s and s["status"] == "running"}
    assert family and interrupted and before
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in family if _alive(p)], "worker processes outlived the runner"

    assert cli.main(["sweep", str(path)]) == 0  # the same command again (in this process: faster)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["completed"] == 6 and result["skipped"] == len(before)
    runs = statuses(tmp_path, "kill")
    assert len(runs) == 6 and {s["status"] for s in runs.values()} == {"completed"}
    for name, (mtime, text) in before.items():  # completed before the kill: untouched
        assert (root / name / "summary.json").stat().st_mtime_ns == mtime
        assert (root / name / "summary.json").read_text() == text
    for name in interrupted:  # resumed, not restarted: a second attempt, and its log says so
        assert runs[name]["attempts"] == 2
    assert any("resuming" in (root / n / "train.log").read_text() for n in midway)
    for name in set(runs) - set(before) - interrupted:
        assert runs[name]["attempts"] == 1
    configs = [yaml.safe_load((root / n / "config.yaml").read_text()) for n in runs]
    assert sorted((c["trainer"]["max_epochs"], c["seed"]) for c in configs) == [(e, s) for e in (1, 5) for s in range(3)]


def test_a_worker_killed_by_a_signal_is_recorded_failed(tmp_path, capsys):
    path = write(tmp_path, "oom", {**TINY, "data.n_train": {"value": 4096}, "trainer.max_epochs": {"value": 50}})
    codes: list[int] = []
    sweep = threading.Thread(target=lambda: codes.append(cli.main(["sweep", str(path)])))
    sweep.start()
    deadline = time.monotonic() + 60
    lock = None
    while lock is None and time.monotonic() < deadline and sweep.is_alive():
        locks = list((tmp_path / "runs" / "oom").glob("*/.lock")) if (tmp_path / "runs").exists() else []
        lock = locks[0] if locks and locks[0].read_text().strip() else None
        time.sleep(0.05)
    assert lock is not None, capsys.readouterr().err
    os.kill(int(lock.read_text()), signal.SIGKILL)  # what the OOM killer does
    sweep.join(60)
    assert codes == [1]
    summary = read_summary(lock.parent)
    assert summary["status"] == "failed" and "killed by SIGKILL" in summary["error"]
    assert "1 of 1 runs failed" in capsys.readouterr().err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PR_SET_PDEATHSIG is Linux's")
def test_a_killed_forkserver_stops_the_sweep_in_one_line_and_loses_no_run(tmp_path, capsys):
    """kill -9 of the forkserver (or the OOM killer choosing it) took its runs with it, and the runner recorded
    them `failed`: "worker process exited with status 255 before recording a result", "no error recorded"
    (issue 41's rough edges). They are now interrupted, the sweep stops saying why, and the same command
    finishes them, resuming the one that had a checkpoint."""
    params = {**TINY, "data.n_train": {"value": 2048}, "trainer.max_epochs": {"value": 6},
              "trainer.ckpt_every_n_steps": {"value": 8}, "seed": {"values": [0, 1]}}
    path = write(tmp_path, "server", params)
    root = tmp_path / "runs" / "server"
    proc = _sweep_process(path, tmp_path, "--workers", "2")
    deadline = time.monotonic() + 90
    while not list(root.glob("*/last.ckpt")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    checkpointed = {p.parent.name for p in root.glob("*/last.ckpt")}
    servers = [p for p in _descendants(proc.pid) if b"forkserver" in Path(f"/proc/{p}/cmdline").read_bytes()
               and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(proc.pid)]  # not its runs
    assert checkpointed and len(servers) == 1
    os.kill(servers[0], signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    result = json.loads(out.strip().splitlines()[-1])
    assert proc.returncode == 1 and result["failed"] == 0 and result["interrupted"] >= 1, err[-3000:]
    assert f"the forkserver that starts its runs (process {servers[0]}) died" in err.splitlines()[-1]
    assert "failed" not in {s["status"] for s in statuses(tmp_path, "server").values() if s}

    assert cli.main(["sweep", str(path)]) == 0  # the same command again
    runs = statuses(tmp_path, "server")
    assert len(runs) == 2 and {s["status"] for s in runs.values()} == {"completed"}
    assert all(runs[name]["attempts"] == 2 for name in checkpointed)


def test_ctrl_c_stops_the_workers_and_leaves_the_run_to_resume(tmp_path, capsys):
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored
    path = write(tmp_path, "intr", {**TINY, "data.n_train": {"value": 2048}, "trainer.max_epochs": {"value": 20},
                                    "trainer.ckpt_every_n_steps": {"value": 4}})
    root = tmp_path / "runs" / "intr"

    returned = threading.Event()

    def press_ctrl_c():  # once the run is under way (it has a checkpoint)
        while not list(root.glob("*/last.ckpt")) and not returned.wait(0.05):
            pass
        if not returned.is_set():
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    try:
        assert cli.main(["sweep", str(path)]) == 130
    finally:
        returned.set()
        signal.signal(signal.SIGINT, previous)
    err = capsys.readouterr().err
    assert "interrupted" in err and "run the same command again" in err
    (name,) = statuses(tmp_path, "intr")
    pid = int((root / name / ".lock").read_text())
    # the worker got SIGTERM from the runner: `ablate train` records it interrupted (it resumes)
    assert not _alive(pid) and read_summary(root / name)["status"] == "interrupted"


@pytest.mark.slow
def test_a_multi_device_run_starts_as_its_own_command_and_trains_with_ddp(tmp_path, capsys):
    path = write(tmp_path, "ddp", {**TINY, "data.n_train": {"value": 256}, "trainer.accelerator": {"value": "cpu"},
                                   "trainer.devices": {"value": 2}, "trainer.strategy": {"value": "ddp"}})
    (run,) = spec.load(str(path)).runs
    assert not runner.forked(run) and runner.worker_command(run)[1:3] == ["-m", "ablate.sweep.worker"]
    assert cli.main(["sweep", str(path)]) == 0
    summary = read_summary(tmp_path / "runs" / "ddp" / run.run_id)
    assert summary["status"] == "completed" and summary["global_step"] == 256 // 32 // 2


def test_runs_log_to_wandb_with_the_sweep_as_group_and_the_flat_config(tmp_path, capsys):
    from tests.wandb_records import offline_run_record

    path = write(tmp_path, "wb", {**TINY, "tracking": {"value": "wandb"}, "model.n_heads": {"values": [1, 2]}})
    assert cli.main(["sweep", str(path)]) == 0
    runs = statuses(tmp_path, "wb")
    assert len(runs) == 2
    for name in runs:
        offline = list((tmp_path / "runs" / "wb" / name / "wandb").glob("offline-run-*"))
        assert len(offline) == 1 and re.fullmatch(rf"offline-run-[0-9_]+-{name}-[0-9a-f]{{6}}", offline[0].name)
        record = offline_run_record(tmp_path / "runs" / "wb" / name)  # what `wandb sync` uploads
        n_heads = yaml.safe_load((tmp_path / "runs" / "wb" / name / "config.yaml").read_text())["model"]["n_heads"]
        assert record["id"].startswith(f"{name}-") and f"run:{name}" in record["tags"]
        assert record["name"] == f"n_heads={n_heads} s0"
        assert record["group"] == "wb-none" and record["job_type"] == "sweep"  # the sweep, its budget
        assert record["config"]["model.d_model"] == 16 and record["config"]["run.group"] == "wb"


# -- busy is not failed; full disks; SIGTERM; temporary folders ----------------------------------

def _json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


class _Pipe:
    """A child's pipe read to its end by a thread, so the test can look at what it said so far."""

    def __init__(self, stream):
        self.chunks: list[str] = []
        self.thread = threading.Thread(target=lambda: self.chunks.extend(iter(stream.readline, "")), daemon=True)
        self.thread.start()

    def text(self) -> str:
        return "".join(list(self.chunks))


@pytest.mark.slow
def test_two_identical_sweeps_at_once_both_exit_0_and_each_run_is_trained_once(tmp_path):
    """Busy is not failed: a run another process holds is waited for and counts as it ended. Two
    sweeps start at once; this test holds the first run's lock meanwhile (a third trainer), so both
    meet a busy run for certain, and both then race for it when it is let go."""
    from ablate.rundir import RunLock

    path = write(tmp_path, "twice", {**TINY, "data.n_train": {"value": 64}, "seed": {"values": [0, 1]}})
    first, second = spec.load(str(path)).runs
    root = tmp_path / "runs" / "twice"
    held = RunLock(root / first.run_id)
    assert held.acquire()
    processes = []
    try:
        processes = [_sweep_process(path, tmp_path, "--workers", "2") for _ in range(2)]
        pipes = [(_Pipe(p.stdout), _Pipe(p.stderr)) for p in processes]
        deadline = time.monotonic() + 300  # generous: two sweeps importing torch on a loaded machine
        while not all(f"waiting   {first.run_id}" in err.text() for _, err in pipes):  # both met the held run
            assert time.monotonic() < deadline, [err.text() for _, err in pipes]
            assert all(p.poll() is None for p in processes), [err.text() for _, err in pipes]
            time.sleep(0.1)
    finally:
        held.release()
        for p in processes:
            try:
                p.wait(timeout=300)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    a, b = processes
    for out, err in pipes:
        out.thread.join(10)
        err.thread.join(10)
    (out_a, err_a), (out_b, err_b) = ((out.text(), err.text()) for out, err in pipes)
    assert (a.returncode, b.returncode) == (0, 0), err_a + err_b
    results = [_json(out_a), _json(out_b)]
    assert [r["completed"] for r in results] == [2, 2] and [r["failed"] for r in results] == [0, 0]
    # a worker may start on a run the other process has just finished: it finds it done and trains
    # nothing (attempts stays 1, below), so run_now (workers started) can exceed the runs trained
    assert sum(r["run_now"] for r in results) >= 2
    for r in results:  # each process accounts for both runs: its own, skipped, or the other's
        assert r["skipped"] + r["by_other_process"] + r["run_now"] == 2, r
    assert f"waiting   {first.run_id}" in err_a and f"waiting   {first.run_id}" in err_b  # both met the held run
    runs = statuses(tmp_path, "twice")
    assert len(runs) == 2 and all(s["status"] == "completed" and s["attempts"] == 1 for s in runs.values())


def test_a_runs_folder_the_runner_cannot_write_stops_the_sweep_with_one_line(tmp_path, monkeypatch, capsys):
    """ENOSPC in the runner itself (creating a run's folder): the sweep stops, exit 1, one line naming
    the error and the folder; the run completed before stays, the next ones never start."""
    path = write(tmp_path, "full", {**TINY, "seed": {"values": [0, 1, 2]}})
    first, second, third = spec.load(str(path)).runs
    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if self.name == second.run_id:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    assert cli.main(["sweep", str(path), "--workers", "1"]) == 1
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert last == (f"ablate: cannot write to {tmp_path / 'runs' / 'full'}: [Errno 28] No space left on device; "
                    "free space or set ABLATE_RUNS_DIR, then run the same command again"), captured.err
    assert "Traceback" not in captured.err
    assert _json(captured.out)["completed"] == 1
    root = tmp_path / "runs" / "full"
    assert read_summary(root / first.run_id)["status"] == "completed"
    assert not (root / second.run_id).exists() and not (root / third.run_id).exists()


def test_a_dead_worker_whose_failure_cannot_be_recorded_stops_the_sweep_with_one_line(tmp_path, monkeypatch, capsys):
    """The runner records a worker killed by a signal as failed; when the runs folder is full that
    write fails (ENOSPC, simulated in the runner process): one line and exit 1, not a traceback."""
    from ablate import rundir

    path = write(tmp_path, "dead", {**TINY, "data.n_train": {"value": 4096}, "trainer.max_epochs": {"value": 50}})
    real = rundir.atomic_write
    full = threading.Event()

    def atomic_write(target, text):
        if full.is_set():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
        return real(target, text)

    monkeypatch.setattr(rundir, "atomic_write", atomic_write)
    codes: list[int] = []
    sweep = threading.Thread(target=lambda: codes.append(cli.main(["sweep", str(path)])))
    sweep.start()
    root = tmp_path / "runs" / "dead"
    deadline = time.monotonic() + 60
    lock = None
    while lock is None and time.monotonic() < deadline and sweep.is_alive():
        locks = list(root.glob("*/.lock")) if root.exists() else []
        lock = locks[0] if locks and locks[0].read_text().strip() else None
        time.sleep(0.05)
    assert lock is not None, capsys.readouterr().err
    full.set()  # the disk fills up, then the run's process is killed (the OOM killer)
    os.kill(int(lock.read_text()), signal.SIGKILL)
    sweep.join(60)
    assert codes == [1]
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (
        f"ablate: cannot write to {root}: [Errno 28] No space left on device; free space or set ABLATE_RUNS_DIR, "
        "then run the same command again"), err
    assert "Traceback" not in err


# Started in the forkserver (through PYTHONPATH), so in every worker forked from it: the log named by
# ABLATE_TEST_FULL_LOG opens as /dev/full, whose every write fails with a real ENOSPC from the kernel.
FULL_LOG_HOOK = """
import os

_FULL = os.environ.get("ABLATE_TEST_FULL_LOG")
if _FULL:
    _open = os.open

    def _open_full(path, flags, mode=0o777, *, dir_fd=None):
        if os.fspath(path).endswith(_FULL):
            return _open("/dev/full", os.O_WRONLY | os.O_CLOEXEC)
        return _open(path, flags, mode, dir_fd=dir_fd)

    os.open = _open_full
"""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux) for a real ENOSPC")
def test_a_worker_whose_disk_is_full_stops_the_sweep_instead_of_starting_run_after_run(tmp_path, monkeypatch, capsys):
    """A real ENOSPC in a worker: the second run's log is /dev/full (every write: 'No space left on
    device'). The run is recorded failed with the error, the sweep stops before the third run."""
    from ablate.sweep import worker

    path = write(tmp_path, "full", {**TINY, "seed": {"values": [0, 1, 2]}})
    first, second, third = spec.load(str(path)).runs
    root = tmp_path / "runs" / "full"
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(FULL_LOG_HOOK)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("ABLATE_TEST_FULL_LOG", os.path.join(second.run_id, "train.log"))
    worker.stop_forkserver()
    worker.forkserver()  # one that starts with the hook
    try:
        assert cli.main(["sweep", str(path), "--workers", "1"]) == 1
    finally:
        worker.stop_forkserver()
        monkeypatch.delenv("ABLATE_TEST_FULL_LOG")
        worker.forkserver()  # the module's, without the hook
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1] == (
        f"ablate: cannot write to {root}: [Errno 28] No space left on device; free space or set ABLATE_RUNS_DIR, "
        "then run the same command again"), captured.err
    result = _json(captured.out)
    assert result["completed"] == 1 and result["failed"] == 1 and result["run_now"] == 2
    assert read_summary(root / first.run_id)["status"] == "completed"
    summary = read_summary(root / second.run_id)
    assert summary["status"] == "failed" and "No space left on device" in summary["error"]
    assert not (root / third.run_id).exists()


@pytest.mark.parametrize("devices", [1, 2], ids=["forked worker", "DDP command"])
def test_a_train_log_that_is_a_link_is_never_written_through_and_fails_its_run_with_one_line(
        devices, tmp_path, capsys):
    """A planted `train.log -> ~/.bashrc` must not get a run's output appended (nor be read back into
    summary.json): the run fails with one line naming the link, the other runs go on."""
    extra = {"trainer.accelerator": {"value": "cpu"}, "trainer.devices": {"value": 2},
             "trainer.strategy": {"value": "ddp"}} if devices == 2 else {"seed": {"values": [0, 1]}}
    path = write(tmp_path, "link", {**TINY, **extra})
    runs = spec.load(str(path)).runs
    linked = runs[-1]
    root = tmp_path / "runs" / "link"
    target = tmp_path / "bashrc"
    target.write_text("export SECRET=1\n")
    (root / linked.run_id).mkdir(parents=True)
    log = root / linked.run_id / "train.log"
    log.symlink_to(target)
    assert cli.main(["sweep", str(path), "--workers", "1"]) == 1
    captured = capsys.readouterr()
    assert target.read_text() == "export SECRET=1\n" and log.is_symlink()
    line = f"{log} is a symbolic link (to {target}), not the run's log; remove it, then run the same command again"
    summary = read_summary(root / linked.run_id)
    assert summary["status"] == "failed" and summary["error"] == line and "SECRET" not in json.dumps(summary)
    assert f"failed    {linked.run_id}" in captured.err and line in captured.err, captured.err
    assert "Traceback" not in captured.err
    assert _json(captured.out)["failed"] == 1 and _json(captured.out)["completed"] == len(runs) - 1
    log.unlink()  # the fix the line asks for: the run trains when run again
    if devices == 1:
        assert cli.main(["sweep", str(path)]) == 0
        assert read_summary(root / linked.run_id)["status"] == "completed"


@pytest.mark.slow
def test_sigterm_to_every_process_of_the_sweep_leaves_each_run_recorded_interrupted(tmp_path):
    """As SLURM ends a job (preemption, time limit, scancel): SIGTERM to the runner, its forkserver and
    every run at once, not only to the runner. Each run records itself `interrupted`, none is left
    `running` or failed, and the command exits 143."""
    path = write(tmp_path, "slurmterm", {**TINY, "data.n_train": {"value": 2048}, "trainer.max_epochs": {"value": 20},
                                         "trainer.ckpt_every_n_steps": {"value": 4}, "seed": {"values": [0, 1]}})
    root = tmp_path / "runs" / "slurmterm"
    driver = subprocess.Popen([sys.executable, "-m", "ablate", "sweep", str(path), "--workers", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(list(root.glob("*/last.ckpt"))) < 2 and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.05)
    assert len(list(root.glob("*/last.ckpt"))) == 2, driver.communicate(timeout=60)[1]
    for pid in [driver.pid, *descendants(driver.pid)]:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    err = driver.communicate(timeout=120)[1]
    assert driver.returncode == 143, err
    found = statuses(tmp_path, "slurmterm")
    assert len(found) == 2 and all(s["status"] == "interrupted" for s in found.values()), (found, err)
    assert all(s["interrupted_by"] == "signal SIGTERM" for s in found.values())


def test_a_run_stopped_by_sigterm_is_interrupted_and_resumable_not_failed(tmp_path, capsys):
    path = write(tmp_path, "term", {**TINY, "data.n_train": {"value": 2048}, "trainer.max_epochs": {"value": 20},
                                    "trainer.ckpt_every_n_steps": {"value": 4}})
    root = tmp_path / "runs" / "term"
    codes: list[int] = []
    sweep = threading.Thread(target=lambda: codes.append(cli.main(["sweep", str(path)])))
    sweep.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sweep.is_alive() and not list(root.glob("*/last.ckpt")):
        time.sleep(0.05)
    (lock,) = root.glob("*/.lock")
    os.kill(int(lock.read_text()), signal.SIGTERM)  # a scheduler preempting the run, not the sweep
    sweep.join(60)
    assert codes == [1]
    err = capsys.readouterr().err
    assert "interrupted" in err and "stopped by a signal; run the same command again to resume it" in err
    assert err.strip().splitlines()[-1] == ("ablate: 1 of 1 runs were stopped by SIGTERM (interrupted, resumable); "
                                            "run the same command again to resume them")
    assert "failed:" not in err
    assert read_summary(lock.parent)["status"] == "interrupted" and (lock.parent / "last.ckpt").exists()


@pytest.mark.slow
def test_a_sweep_leaves_nothing_in_the_temporary_folder(tmp_path, short_tmp):
    """W&B makes wandb-media and wandb-artifacts folders when it is imported (the forkserver imports
    it for the runs); the sweep's own temporary folder holds them and goes at the end."""
    temp = short_tmp  # TMPDIR: the forkserver binds a Unix socket in it
    path = write(tmp_path, "clean", TINY)
    env = {**os.environ, "ABLATE_RUNS_DIR": str(tmp_path / "runs"), "TMPDIR": str(temp)}
    done = subprocess.run([sys.executable, "-m", "ablate", "sweep", str(path)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert _json(done.stdout)["completed"] == 1
    assert sorted(p.name for p in temp.iterdir()) == []


# -- run names, W&B sweep ids -------------------------------------------------------------------

def test_each_run_is_named_by_its_swept_values_and_names_change_no_run_id(tmp_path):
    from ablate.sweep.names import display_name, short

    assert [short(x) for x in (0.0003, 0.001, 0.01, 1e12, 2.5, 512, False, "pre")] == \
        ["3e-4", "1e-3", "0.01", "1e12", "2.5", "512", "False", "pre"]
    keys = ["model.qk_scale", "model.d_head", "optim.lr", "seed"]
    assert display_name({"model.qk_scale": False, "model.d_head": 512, "optim.lr": 0.0003, "seed": 1}, keys, 1) \
        == "qk_scale=False d_head=512 lr=3e-4 s1"
    assert display_name({"data.length": 4, "model.length": 2}, ["data.length", "model.length"], 0) \
        == "data.length=4 model.length=2 s0"  # the bare names would read the same
    long = display_name({f"model.k{i}": "x" * 20 for i in range(9)}, [f"model.k{i}" for i in range(9)], 7)
    assert len(long) == C.NAME_MAX and long.endswith("… s7")
    path = write(tmp_path, "named", {**TINY, "optim.lr": {"values": [3e-4, 1e-3]}, "model.norm": {"value": "pre"},
                                     "seed": {"values": [0, 1]}})
    sweep = spec.load(str(path))
    assert [r.cfg.run.name for r in sweep.runs] == ["lr=3e-4 s0", "lr=3e-4 s1", "lr=1e-3 s0", "lr=1e-3 s1"]
    for run in sweep.runs:  # the same id as the configuration built without a name
        unnamed = C.build({k: v for k, v in C.flat(run.cfg).items() if k != "run.name"})
        assert unnamed.run.name == "" and C.run_id(unnamed) == run.run_id
    one = spec.load(str(write(tmp_path, "single", TINY)))
    assert one.runs[0].cfg.run.name == "single s0"  # nothing varies: the sweep's name
    own = spec.load(str(write(tmp_path, "own", {**TINY, "run.name": {"value": "mine"}})))
    assert own.runs[0].cfg.run.name == "mine"  # a name the file gives wins


def test_a_run_made_before_names_existed_is_not_run_again_and_new_runs_are_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU: --runs-per-gpu is ignored, with one line
    path = write(tmp_path, "old", {**TINY, "model.n_heads": {"values": [1, 2]}})
    first = spec.load(str(path)).runs[0]
    # the run as `ablate train` made it before sweeps named their runs: no run.name
    argv = [f"{k}={v}" for k, v in C.flat(first.cfg).items() if k not in ("run.name", "run.dir")]
    assert cli.main(["train", *argv]) == 0
    before = (tmp_path / "runs" / "old" / first.run_id / "config.yaml").read_text()
    assert "name: ''" in before
    capsys.readouterr()
    assert cli.main(["sweep", str(path), "--runs-per-gpu", "2"]) == 0
    captured = capsys.readouterr()
    assert "note: --runs-per-gpu 2 is ignored: no GPU is visible" in captured.err
    result = _json(captured.out)
    assert result["skipped"] == 1 and result["run_now"] == 1 and result["completed"] == 2
    assert (tmp_path / "runs" / "old" / first.run_id / "config.yaml").read_text() == before  # untouched
    (second,) = [d for d in statuses(tmp_path, "old") if d != first.run_id]
    config = yaml.safe_load((tmp_path / "runs" / "old" / second / "config.yaml").read_text())
    assert config["run"]["name"] == "n_heads=2 s0" and config["run"]["sweep_id"] == ""


def test_wandb_sweep_offline_says_so_in_one_line_and_runs_as_without_it(tmp_path, capsys):
    from ablate.sweep import wandb_sweep

    path = write(tmp_path, "wbs", {**TINY, "tracking": {"value": "wandb"}})
    assert cli.main(["sweep", str(path), "--wandb-sweep"]) == 0  # WANDB_MODE=offline (isolated)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "W&B is offline" in line]
    assert len(lines) == 1 and "not registered with a W&B sweep" in lines[0] and "wandb login" in lines[0]
    assert not wandb_sweep.state_path("wbs").exists()
    (run_id,) = statuses(tmp_path, "wbs")
    config = yaml.safe_load((tmp_path / "runs" / "wbs" / run_id / "config.yaml").read_text())
    assert config["run"]["sweep_id"] == "" and config["run"]["name"] == "wbs s0"


def test_a_sweep_id_registered_before_is_reused_and_every_run_carries_it(tmp_path, monkeypatch, capsys):
    import wandb

    from ablate.rundir import write_json
    from ablate.sweep import wandb_sweep

    path = write(tmp_path, "reuse", {**TINY, "tracking": {"value": "wandb"}, "seed": {"values": [0, 1]}})
    write_json(tmp_path / "runs" / "reuse" / wandb_sweep.STATE,
               {"id": "abc123xy", "entity": "me", "project": "ablate", "url": "https://wandb.ai/me/ablate/sweeps/abc123xy"})

    def no_registration(*args, **kwargs):
        raise AssertionError("a stored sweep id must be reused, not registered again")

    monkeypatch.setattr(wandb, "sweep", no_registration)
    sweep = spec.load(str(path))
    for mode in ("offline", "online"):  # reused either way: offline runs join the sweep when synced
        assert wandb_sweep.register(sweep, mode, sys.stderr) == "abc123xy"
    attached = wandb_sweep.attach(sweep, "abc123xy")
    assert [r.run_id for r in attached.runs] == [r.run_id for r in sweep.runs]
    assert {r.cfg.run.sweep_id for r in attached.runs} == {"abc123xy"}
    capsys.readouterr()
    assert cli.main(["sweep", str(path), "--wandb-sweep"]) == 0
    assert "W&B sweep abc123xy (registered before" in capsys.readouterr().err
    from tests.wandb_records import offline_run_record

    for run_id in statuses(tmp_path, "reuse"):
        config = yaml.safe_load((tmp_path / "runs" / "reuse" / run_id / "config.yaml").read_text())
        assert config["run"]["sweep_id"] == "abc123xy"
        record = offline_run_record(tmp_path / "runs" / "reuse" / run_id)  # what wandb sync uploads
        assert record["sweep_id"] == "abc123xy" and f"run:{run_id}" in record["tags"]
        assert record["name"] == f"reuse s{config['seed']}"
    # another project is another sweep: offline, nothing is reused and nothing registered
    other = spec.load(str(write(tmp_path, "reuse", {**TINY, "tracking": {"value": "wandb"},
                                                    "run.project": {"value": "elsewhere"}})))
    assert wandb_sweep.register(other, "offline", sys.stderr) is None


def test_online_registration_stores_the_id_once_and_a_refusal_is_one_line(tmp_path, monkeypatch):
    import io

    import wandb

    from ablate.sweep import wandb_sweep

    calls = []

    def register(config, entity=None, project=None, prior_runs=None):  # W&B's server, which tests never reach
        calls.append((config, entity, project))
        return "newid42"

    monkeypatch.setattr(wandb, "sweep", register)
    path = write(tmp_path, "online", {**TINY, "tracking": {"value": "wandb"}, "seed": {"values": [0, 1]}}, entity="team")
    sweep = spec.load(str(path))
    monkeypatch.setenv("WANDB_MODE", "online")  # wandb.sweep above stands in for the server
    assert cli.main(["sweep", str(path), "--wandb-sweep", "--max-runs", "0"]) == 2  # bad input: nothing registered
    assert calls == [] and not wandb_sweep.state_path("online").exists()
    monkeypatch.setenv("WANDB_MODE", "offline")
    err = io.StringIO()
    assert wandb_sweep.register(sweep, "online", err) == "newid42"
    assert calls == [(sweep.spec, "team", "ablate")]  # the file as it is, in the runs' project
    state = json.loads(wandb_sweep.state_path("online").read_text())
    assert state == {**state, "id": "newid42", "entity": "team", "project": "ablate",
                     "url": "https://wandb.ai/team/ablate/sweeps/newid42"}
    assert "registered W&B sweep newid42 (https://wandb.ai/team/ablate/sweeps/newid42)" in err.getvalue()
    assert wandb_sweep.register(sweep, "online", err) == "newid42" and len(calls) == 1  # reused, not registered again

    def refuse(*args, **kwargs):
        raise wandb.errors.CommError("permission denied\nfor entity team")

    monkeypatch.setattr(wandb, "sweep", refuse)
    wandb_sweep.state_path("online").unlink()
    with pytest.raises(SweepError, match=r"^W&B did not register sweep online: for entity team; check `wandb login`"):
        wandb_sweep.register(sweep, "online", err)
    assert not wandb_sweep.state_path("online").exists()
    # run.project is no part of a run's id: only draws that differ elsewhere can mix projects
    mixed = spec.load(str(write(tmp_path, "mixed", {**TINY, "tracking": {"value": "wandb"},
                                                      "seed": {"values": list(range(10))},
                                                      "run.project": {"values": ["a", "b"]}}, method="random", run_cap=12)))
    assert {r.cfg.run.project for r in mixed.runs} == {"a", "b"}
    with pytest.raises(SweepError, match="a W&B sweep lives in one"):
        wandb_sweep.check(mixed)


def test_runs_per_gpu_packs_the_workers_onto_the_visible_gpus_and_says_so(tmp_path, monkeypatch, capsys):
    # two GPUs as the runner sees them (CUDA_VISIBLE_DEVICES); without a driver the runs train on the CPU
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    path = write(tmp_path, "packed", {**TINY, "seed": {"values": [0, 1, 2]}})
    assert cli.main(["sweep", str(path), "--runs-per-gpu", "2", "--threads", "1"]) == 0
    captured = capsys.readouterr()
    assert "3 to run on 3 workers x 1 thread(s), GPUs 0 x2 | 1 -> " in captured.err  # 3 runs: 2 on GPU 0, 1 on 1
    assert _json(captured.out)["completed"] == 3
    import torch

    if not torch.cuda.is_available():  # listed GPUs torch cannot use (an old driver): said in one line
        notes = [line for line in captured.err.splitlines() if line.startswith("note: CUDA_VISIBLE_DEVICES lists")]
        assert len(notes) == 1 and "the runs train on the CPU, shared out as if per GPU" in notes[0], captured.err
    assert cli.main(["sweep", str(path), "--workers", "5", "--runs-per-gpu", "2"]) == 2
    assert "ablate: --workers=5 needs 3 GPUs at 2 runs per GPU but 2 are visible; use --workers 4 or fewer" \
        in capsys.readouterr().err


def test_runs_finished_by_other_code_are_named_when_the_sweep_runs_again(tmp_path, capsys):
    """A sweep run again after a code change reused every finished run silently (issue 43, item 5): it now
    says how many were made by other code, and which commit."""
    from ablate.provenance import git_state
    from ablate.rundir import write_json

    if git_state()["commit"] is None:
        pytest.skip("not a git checkout: no commit to compare")
    path = write(tmp_path, "stale", {**TINY, "seed": {"values": [0, 1]}})
    assert cli.main(["sweep", str(path)]) == 0
    capsys.readouterr()
    old = tmp_path / "runs" / "stale" / sorted(statuses(tmp_path, "stale"))[0]
    summary = read_summary(old)
    summary["provenance"]["commit"] = "0" * 40
    write_json(old / "summary.json", summary)
    assert cli.main(["sweep", str(path)]) == 0
    err = capsys.readouterr().err
    assert "ablate sweep stale: of the 2 runs finished before, 1 of them made by other code (commit 0000000000;" in err
    assert "kept, not rerun; --retrain-stale trains them again as new attempts" in err
    assert read_summary(old)["provenance"]["commit"] == "0" * 40  # kept, not rerun


def test_retrain_stale_trains_again_exactly_the_runs_other_code_made_and_only_once(tmp_path, capsys):
    """--retrain-stale (issue 43): of two completed runs, the one another commit made is trained again as a new
    attempt (its earlier files kept in attempts/1/), the other is kept; the same command again, with or without
    the flag, has nothing to run."""
    from ablate.provenance import git_state
    from ablate.rundir import write_json

    now = git_state()["commit"]
    if now is None:
        pytest.skip("not a git checkout: no commit to compare")
    path = write(tmp_path, "restale", {**TINY, "seed": {"values": [0, 1]}})
    assert cli.main(["sweep", str(path)]) == 0
    stale, current = sorted(statuses(tmp_path, "restale"))
    root = tmp_path / "runs" / "restale"
    old = read_summary(root / stale)
    old["provenance"]["commit"] = "0" * 40
    write_json(root / stale / "summary.json", old)
    kept = read_summary(root / current)
    capsys.readouterr()
    # --dry-run says which finished runs other code made, and what the command would do with them
    for flag, then in (([], "kept (--retrain-stale trains it again)"), (["--retrain-stale"], "trained again (--retrain-stale)")):
        assert cli.main(["sweep", str(path), "--dry-run", *flag]) == 0
        listed = capsys.readouterr().out.splitlines()
        marked = [line for line in listed if line.endswith(f"  made by other code: {then}")]
        assert [line.split()[:2] for line in marked] == [[stale, "completed"]]
        assert listed[-1] == f"1 of them finished and made by other code: {then.replace('it again', 'them again')}"
    assert read_summary(root / stale)["provenance"]["commit"] == "0" * 40  # a dry run writes nothing

    assert cli.main(["sweep", str(path), "--retrain-stale"]) == 0
    out, err = capsys.readouterr()
    assert "ablate sweep restale: 2 runs, 1 finished before, 1 to run on " in err
    assert (f"ablate sweep restale: of the 1 runs to run, 1 of them made by other code (commit 0000000000; the code "
            f"is now at {now[:10]}): trained again as new attempts (--retrain-stale), each earlier one kept in its "
            "folder's attempts/") in err.splitlines()
    ran = [line for line in err.splitlines() if line.startswith("[")]
    assert len(ran) == 1 and ran[0].startswith(f"[2/2] completed {stale} "), err
    assert _json(out)["run_now"] == 1 and _json(out)["skipped"] == 1 and _json(out)["completed"] == 2
    new = read_summary(root / stale)
    assert new["status"] == "completed" and new["provenance"]["commit"] == now and new["retrained"] == "attempts/1"
    assert new["earlier_provenance"][-1]["commit"] == "0" * 40
    assert read_summary(root / stale / "attempts" / "1") == old and read_summary(root / current) == kept

    for again in (["--retrain-stale"], []):  # retrained once: made by this code now
        assert cli.main(["sweep", str(path), *again]) == 0
        out, err = capsys.readouterr()
        assert "ablate sweep restale: 2 runs, 2 finished before, 0 to run -> " in err and "other code" not in err
        assert _json(out)["run_now"] == 0
    assert read_summary(root / stale) == new and not (root / stale / "attempts" / "2").exists()
