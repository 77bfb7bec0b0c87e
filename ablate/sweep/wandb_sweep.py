"""`ablate sweep NAME --wandb-sweep`: the sweep registered with W&B, so that its runs land on W&B's
sweep page (parallel coordinates, parameter importance) instead of only in a group.

The sweep file is already a W&B sweep configuration, so it is registered as it is (`wandb.sweep`),
in the project and entity the runs log to; every run then carries `run.sweep_id=<id>` (not part of
its identity: the run ids and directories stay the same). The id is kept in the sweep's runs folder
(STATE), so the same command again, or after an interruption, reuses it instead of registering a
second sweep, and an offline machine can still tag its runs with an id registered earlier: they
join the sweep when they are uploaded (`ablate sync NAME`).

Registering needs W&B online (an API key and the host answering, ablate.tracking.wandb_mode);
offline, with no id registered before, one line says so and the sweep runs as without the flag.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TextIO

from .. import config as C
from ..rundir import runs_root, write_json
from .spec import Sweep, SweepError

STATE = "wandb-sweep.json"  # in $ABLATE_RUNS_DIR/<sweep>/: {"id", "entity", "project", "url"}


def state_path(name: str) -> Path:
    return runs_root() / name / STATE


def read_state(name: str) -> dict | None:
    try:
        data = json.loads(state_path(name).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("id"), str) and data["id"] else None


def where(sweep: Sweep) -> tuple[str | None, str]:
    """(entity, project) the runs log to: the file's entity or $WANDB_ENTITY (None: the account's
    default), and run.project, which every run must share (a sweep lives in one project)."""
    projects = sorted({r.cfg.run.project for r in sweep.runs})
    if len(projects) > 1:
        raise SweepError(f"--wandb-sweep: the runs log to {len(projects)} W&B projects ({', '.join(projects)}) "
                         "but a W&B sweep lives in one; give run.project one value")
    entity = sweep.spec.get("entity") or os.environ.get("WANDB_ENTITY") or None
    return (str(entity) if entity else None), projects[0]


def check(sweep: Sweep) -> None:
    """--wandb-sweep on a sweep whose runs do not log to W&B is bad input (SweepError)."""
    quiet = sorted({r.cfg.tracking for r in sweep.runs if r.cfg.tracking != "wandb"})
    if quiet:
        raise SweepError(f"--wandb-sweep needs runs that log to W&B, but tracking={quiet[0]} here; "
                         "drop --tracking none (or tracking: none in the file), or drop --wandb-sweep")
    where(sweep)


def attach(sweep: Sweep, sweep_id: str) -> Sweep:
    """The same sweep with run.sweep_id=<sweep_id> in every run's config (run ids unchanged)."""
    runs = []
    for run in sweep.runs:
        cfg = dataclasses.replace(run.cfg, run=dataclasses.replace(run.cfg.run, sweep_id=sweep_id))
        assert C.run_id(cfg) == run.run_id, "run.sweep_id must not change a run's id"
        runs.append(dataclasses.replace(run, cfg=cfg))
    return dataclasses.replace(sweep, runs=runs)


def register(sweep: Sweep, mode: str, err: TextIO) -> str | None:
    """The W&B sweep id for this sweep's runs: the one stored from before (same entity and project),
    else a new one from `wandb.sweep` when `mode` is online; None (one line said why) offline."""
    entity, project = where(sweep)
    stored = read_state(sweep.name)
    if stored is not None and stored.get("project") == project and (entity is None or stored.get("entity") == entity):
        err.write(f"ablate sweep {sweep.name}: W&B sweep {stored['id']} (registered before; "
                  f"{stored.get('url') or 'its runs join it when synced'})\n")
        return stored["id"]
    if mode != "online":
        err.write(f"ablate sweep {sweep.name}: W&B is {mode}: runs are not registered with a W&B sweep "
                  "(that needs an API key, `wandb login`, and the W&B host); the runs go on as without "
                  "--wandb-sweep, and `ablate sync` uploads them as a group\n")
        return None
    import wandb

    try:
        sweep_id = wandb.sweep(dict(sweep.spec), entity=entity, project=project)
    except Exception as error:  # noqa: BLE001 - W&B's errors (auth, network, a rejected file) vary by version
        text = (str(error).strip().splitlines() or [type(error).__name__])[-1]
        raise SweepError(f"W&B did not register sweep {sweep.name}: {text}; check `wandb login` and the "
                         f"project {project!r}, or drop --wandb-sweep") from None
    if not sweep_id:
        raise SweepError(f"W&B did not register sweep {sweep.name} (wandb.sweep returned nothing); "
                         "check `wandb login` and the project name, or drop --wandb-sweep")
    api_entity = entity
    if api_entity is None:
        try:
            api_entity = wandb.Api().default_entity
        except Exception:  # noqa: BLE001 - only the URL needs it
            api_entity = None
    url = f"https://wandb.ai/{api_entity}/{project}/sweeps/{sweep_id}" if api_entity else ""
    write_json(state_path(sweep.name), {"id": sweep_id, "entity": api_entity, "project": project, "url": url,
                                        "file": str(sweep.path)})
    err.write(f"ablate sweep {sweep.name}: registered W&B sweep {sweep_id}" + (f" ({url})" if url else "") + "\n")
    return sweep_id
