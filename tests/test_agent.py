"""A run under a W&B agent's environment (offline, no network): the budget and threads the agent's machine gives
(ABLATE_BUDGET, ABLATE_THREADS) win over the sweep file's, and a tuned sweep says in one line that an agent runs
every value on every seed (issue 28). The command line is built by W&B's own agent code from the sweep file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from wandb.sdk.launch.sweeps import utils as sweep_utils

from ablate import config as C
from ablate.rundir import read_summary
from ablate.sweep import spec

PARAMETERS = {
    "data.task": {"value": "copy"}, "data.vocab": {"value": 6}, "data.length": {"value": 4},
    "data.n_train": {"value": 128}, "data.n_val": {"value": 32}, "data.n_test": {"value": 32},
    "data.batch_size": {"value": 32}, "model.d_model": {"value": 16}, "model.n_heads": {"value": 2},
    "model.n_layers": {"value": 1}, "run.probes": {"value": False}, "budget": {"value": "quick"},
    "optim.lr": {"values": [0.0001, 0.0003, 0.001, 0.003]}, "seed": {"values": [0, 1]},
}


def agent_command(sweep_file: dict, values: dict) -> list[str]:
    """What `wandb agent` runs for one configuration (wandb_agent.Agent._command_run's substitution)."""
    template = sweep_utils.create_sweep_command(sweep_file["command"])
    args = sweep_utils.create_sweep_command_args({"args": {k: {"value": v} for k, v in values.items()}})
    out = []
    for part in template:
        out += args.get(part[2:-1], []) if part.startswith("${") and part.endswith("}") else [part]
    return out


@pytest.fixture
def tuned(tmp_path, monkeypatch):
    sweep_file = {"program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"], "method": "grid",
                  "description": "a test\ntune optim.lr on seeds 0", "metric": {"name": "val/acc_best", "goal": "maximize"},
                  "parameters": PARAMETERS}
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "agented.yaml").write_text(yaml.safe_dump(sweep_file))
    monkeypatch.chdir(tmp_path)
    return sweep_file


@pytest.mark.slow
def test_a_smoke_run_under_an_agent_takes_its_budget_and_threads(tmp_path, tuned):
    values = {k: v["value"] if "value" in v else v["values"][1] for k, v in PARAMETERS.items()}
    values.update({"seed": 0, "run.group": "agented"})  # smoke keeps seed 0 only  # the sweep name, as ablate's sweep files set it
    command = agent_command(tuned, values)
    assert command[:2] == ["ablate", "train"] and "budget=quick" in command  # the file's budget
    env = {**os.environ, "WANDB_SWEEP_ID": "abc123", "WANDB_RUN_ID": "agentrun1", "WANDB_MODE": "offline",
           "WANDB_SILENT": "true", "ABLATE_RUNS_DIR": str(tmp_path / "runs"), "ABLATE_PROGRESS": "0",
           "ABLATE_BUDGET": "smoke", "ABLATE_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "ablate", *command[1:]], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    notes = [line for line in done.stderr.splitlines() if line.startswith("ablate: W&B agent: ")]
    assert notes[:2] == ["ablate: W&B agent: budget=smoke from ABLATE_BUDGET (the sweep file says quick)",
                         "ablate: W&B agent: trainer.threads=1 from ABLATE_THREADS"]
    assert len(notes) == 3 and "an agent runs every value on every seed" in notes[2]
    assert "`ablate results agented` applies the same choice" in notes[2]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    summary = read_summary(result["run_dir"])
    config = yaml.safe_load((tmp_path / "runs" / "agented" / summary["run_id"] / "config.yaml").read_text())
    assert summary["status"] == "completed"
    assert config["budget"] == "smoke" and config["trainer"]["threads"] == 1
    # the id `ablate sweep agented --budget smoke` gives this configuration
    local = {r.cfg.optim.lr: r.run_id for r in spec.load("agented", budget="smoke").runs if r.cfg.seed == 0}
    assert summary["run_id"] == local[0.0003]
    assert list((tmp_path / "runs" / "agented" / summary["run_id"] / "wandb").glob("offline-run-*"))


def test_agent_variables_are_read_under_an_agent_only_and_checked():
    assert C.agent_overrides({"ABLATE_BUDGET": "smoke"}) == {}  # no agent: the command line decides
    assert C.agent_overrides({"WANDB_SWEEP_ID": "x", "ABLATE_BUDGET": "smoke", "ABLATE_THREADS": "2"}) == \
        {"budget": "smoke", "trainer.threads": "2"}
    with pytest.raises(C.ConfigError, match=r"^ABLATE_THREADS='two' \(the W&B agent's environment\): "):
        C.agent_overrides({"WANDB_SWEEP_ID": "x", "ABLATE_THREADS": "two"})
