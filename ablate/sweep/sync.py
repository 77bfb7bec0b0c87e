"""`ablate sync NAME`: upload every offline W&B run of a sweep in one command.

A sweep's runs log offline wherever W&B cannot be reached (ablate.tracking.wandb_mode), each into
`$ABLATE_RUNS_DIR/<sweep>/<run id>/wandb/offline-run-*`. This finds them all and hands them to W&B's
own `wandb sync` in one call; runs W&B has already uploaded (its `.wandb.synced` marker) are
skipped by W&B itself, so the command can be run again after more runs have finished. A run that
carries a W&B sweep id (`ablate sweep NAME --wandb-sweep`) lands on that sweep's page.

Offline, it says so in one line and changes nothing (exit 2); `--dry-run` lists the runs and
whether each is uploaded already, online or not.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ..cliparse import OneLineParser
from ..rundir import runs_root

NEEDS = "an API key (`wandb login` or WANDB_API_KEY) and the W&B host answering; WANDB_MODE must not be offline"



def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="ablate sync", allow_abbrev=False, description="Upload every offline W&B run of a sweep "
                "(runs/NAME/*/wandb/offline-run-*) with `wandb sync`, in one command; runs uploaded before are skipped.")
    p.add_argument("name", help="a sweep name (its runs folder under $ABLATE_RUNS_DIR; 'train' for `ablate train` "
                   "runs), or the path of its sweep .yaml file")
    p.add_argument("--dry-run", action="store_true", help="list the offline runs and whether each is uploaded; "
                   "upload nothing (works offline)")
    return p


def sweep_name(text: str) -> str:
    """The runs folder's name: a sweep file's stem, or the name as given."""
    path = Path(text)
    return path.stem if path.suffix in (".yaml", ".yml") else text


def not_folders(folder: Path) -> list[Path]:
    """The runs of the sweep whose `wandb` is there but is no folder (a file in its place): nothing to upload
    there, and a user who asked to sync them is told so, not left to wonder (issue 41)."""
    if not folder.is_dir():
        return []
    return [p / "wandb" for p in sorted(folder.iterdir())
            if p.is_dir() and not p.is_symlink() and (p / "wandb").exists() and not (p / "wandb").is_dir()]


def offline_runs(folder: Path, skip: Callable[[Path], None] = lambda path: None) -> list[Path]:
    """Every offline W&B run directory under the sweep's runs, in run order (one per run id; a
    resumed run may have several). A symbolic link (a run folder, its `wandb` folder or an
    `offline-run-*` entry) is never a run of this sweep, wherever it points (/etc, another sweep):
    it is passed to `skip`, in order, and left out."""
    if not folder.is_dir():
        return []
    found = []
    for run_dir in sorted(p for p in folder.iterdir() if p.is_symlink() or p.is_dir()):
        wandb_dir = run_dir / "wandb"
        for path in (run_dir, wandb_dir):
            if path.is_symlink():
                skip(path)
                break
        else:
            for path in sorted(wandb_dir.glob("offline-run-*")):
                if path.is_symlink():
                    skip(path)
                elif path.is_dir():
                    found.append(path)
    return found


def synced(run: Path) -> bool:
    """W&B's own marker: `wandb sync` leaves run-<id>.wandb.synced beside the run's .wandb file."""
    records = list(run.glob("*.wandb"))
    return bool(records) and all(r.with_suffix(".wandb.synced").exists() for r in records)


def command(runs: list[Path]) -> list[str]:
    """W&B's own CLI uploading `runs` (each an offline-run folder), in one process."""
    return [sys.executable, "-m", "wandb", "sync", *map(str, runs)]


def main(argv: list[str] | None = None) -> int:
    """`ablate sync NAME [--dry-run]`; exit 0 uploaded (or nothing left to upload, or listed),
    1 `wandb sync` failed, 2 bad input or W&B offline (nothing done)."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    return run(args, sys.stdout, sys.stderr)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    name = sweep_name(args.name)
    folder = runs_root() / name
    if not folder.is_dir():
        known = sorted(p.name for p in runs_root().iterdir() if p.is_dir()) if runs_root().is_dir() else []
        hint = f"give one of: {', '.join(known)}" if known else "run the sweep first (with tracking=wandb)"
        err.write(f"ablate: no runs folder {folder}; {hint}\n")
        return 2
    links: list[Path] = []
    runs = offline_runs(folder, links.append)
    if links:
        err.write(f"ablate sync {name}: skipped {len(links)} symbolic link(s), not runs of this sweep: "
                  f"{', '.join(map(str, links))}\n")
    if files := not_folders(folder):
        err.write(f"ablate sync {name}: skipped {len(files)} run(s) whose wandb is a file, not W&B's folder: "
                  f"{', '.join(map(str, files))}\n")
    if not runs:
        err.write(f"ablate: no offline W&B runs under {folder} (its runs used tracking=none, or logged online); "
                  "nothing to upload\n")
        return 2
    todo = [r for r in runs if not synced(r)]
    if args.dry_run:
        for r in runs:
            out.write(f"{'uploaded' if r not in todo else 'offline ':<8}  {r}\n")
        out.write(f"{len(todo)} of {len(runs)} offline runs of {name} to upload\n")
        return 0
    if not todo:
        err.write(f"ablate sync {name}: all {len(runs)} offline runs are uploaded already; nothing to do\n")
        return 0
    from ..tracking import wandb_mode

    mode = wandb_mode()
    if mode != "online":
        err.write(f"ablate: W&B is {mode}: {len(todo)} runs of {name} stay offline, nothing uploaded; "
                  f"uploading needs {NEEDS}\n")
        return 2
    err.write(f"ablate sync {name}: uploading {len(todo)} offline runs ({len(runs) - len(todo)} uploaded before) "
              "with wandb sync\n")
    err.flush()
    done = subprocess.run(command(todo), env={**os.environ, "WANDB_SILENT": "false"})
    if done.returncode != 0:
        err.write(f"ablate: wandb sync exited with status {done.returncode}; its messages above say why; "
                  f"run `ablate sync {name}` again (runs uploaded meanwhile are skipped)\n")
        return 1
    left = [r for r in todo if not synced(r)]
    if left:
        err.write(f"ablate: {len(left)} of {len(todo)} runs are still not marked uploaded (first: {left[0]}); "
                  f"run `ablate sync {name}` again\n")
        return 1
    err.write(f"ablate sync {name}: {len(todo)} runs uploaded\n")
    return 0
