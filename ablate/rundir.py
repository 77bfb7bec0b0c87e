"""A run directory: config.yaml, metrics.csv, summary.json, last.ckpt, a lock while it runs.

Every file is written atomically (temp file + os.replace), so a run killed at any moment leaves
either the old or the new version, never half of one; concurrent sweep workers never corrupt each
other's files.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

CONFIG, SUMMARY, METRICS, CKPT, LOCK = "config.yaml", "summary.json", "metrics.csv", "last.ckpt", ".lock"
FINISHED = ("completed", "diverged")  # terminal: never run again


def runs_root() -> Path:
    return Path(os.environ.get("ABLATE_RUNS_DIR", "runs"))


def atomic_write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / SUMMARY).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def write_config(run_dir: Path, config: dict[str, Any]) -> None:
    atomic_write(run_dir / CONFIG, yaml.safe_dump(config, sort_keys=False))


def is_finished(run_dir: Path) -> bool:
    summary = read_summary(run_dir)
    return bool(summary and summary.get("status") in FINISHED)


class RunLock:
    """An exclusive flock on run_dir/.lock; released by the OS if the process dies (even kill -9)."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / LOCK
        self.fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            return False
        os.ftruncate(self.fd, 0)
        os.write(self.fd, str(os.getpid()).encode())
        return True

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def read_metrics(run_dir: Path) -> list[dict[str, str]]:
    try:
        with open(run_dir / METRICS, newline="") as f:
            return list(csv.DictReader(f))
    except FileNotFoundError:
        return []
