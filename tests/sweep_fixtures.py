"""Fixtures of the modules that run real sweeps (test_sweep.py, test_tune.py): import them by name."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module", autouse=True)
def forkserver():
    """One forkserver for the whole module (an `ablate sweep` command stops the one it starts)."""
    from ablate.sweep import worker

    worker.forkserver()
    yield
    worker.stop_forkserver()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    from ablate.data import files

    monkeypatch.setattr(files, "network_available", lambda timeout=3.0: False)  # never download
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.chdir(tmp_path)


def train_arch_sweep(root, name: str, fixed: dict, arches: list[str]):
    """A sweep file `name` under root/sweeps (smoke budget, one seed, the `fixed` keys, model.arch over
    `arches`), every run trained for real into root/runs/<name>: the mixed LSTM/Transformer sweeps of the
    RNN tests. Returns the runs folder of the sweep."""
    import yaml

    from ablate.sweep import spec
    from ablate.train import train

    sweeps, runs = root / "sweeps", root / "runs"
    sweeps.mkdir()
    sweep_file = {"program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"], "method": "grid",
                  "parameters": {"run.group": {"value": name}, "budget": {"value": "smoke"},
                                 **{k: {"value": v} for k, v in fixed.items()},
                                 "model.arch": {"values": arches}, "seed": {"values": [0]}}}
    (sweeps / f"{name}.yaml").write_text(yaml.safe_dump(sweep_file))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLATE_RUNS_DIR", str(runs))
        mp.setenv("ABLATE_PROGRESS", "0")
        for run in spec.load(str(sweeps / f"{name}.yaml"), budget="smoke").runs:
            assert train(run.cfg, log=lambda _line: None)["status"] == "completed"
    return runs / name


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc): what SLURM's signal to a job step reaches besides it."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
