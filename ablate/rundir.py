"""A run directory: config.yaml, metrics.csv, summary.json, last.ckpt, best.ckpt, a lock while it runs.

Every file is written atomically (temp file + os.replace), so a run killed at any moment leaves
either the old or the new version, never half of one; concurrent sweep workers never corrupt each
other's files. A write that fails (a full disk, a read-only folder) removes its temp file and raises
an OSError naming the file. Files get the usual 0666 & ~umask permissions.

A file of the run that cannot be read (truncated, garbage, a checkpoint holding more than tensors
and plain values) is set aside as `<name>.corrupt-<time>` and the run carries on as interrupted.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import yaml

from .fileio import atomic_write
from .runfiles import RunFileError, read_config_mapping, read_json_object, read_metrics_rows


class RunBusy(RuntimeError):
    """Another process holds the run directory's lock."""


class Interrupted(SystemExit):
    """SIGTERM (a scheduler preempting the job, the sweep runner stopping): the run is recorded as
    `interrupted` and resumes from last.ckpt next time. A SystemExit with status 128 + 15 = 143, so
    an uncaught one ends the process as a killed one would be read, never as a success."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum


CONFIG, SUMMARY, METRICS, CKPT, LOCK = "config.yaml", "summary.json", "metrics.csv", "last.ckpt", ".lock"
BEST = "best.ckpt"  # the weights of the epoch with the best val/acc (run.keep_best; ablate.callbacks.BestCheckpoint)
FINISHED = ("completed", "diverged", "stopped")  # terminal: never run again (stopped: by early termination)
STALE = ("completed", "diverged")  # what --retrain-stale trains again when other code made it (a stopped run's
# early-termination decision stands)
ATTEMPTS = "attempts"  # earlier attempts set aside by a retrain, attempts/<n>/: the table reads <run>/summary.json only
# an attempt's own files, moved into attempts/<n>/ by a retrain (summary.json last: see keep_attempt); wandb/ (every
# attempt's offline W&B run, each with its own id, for `ablate sync`) and train.log (appended to) stay
ATTEMPT_FILES = (CONFIG, METRICS, CKPT, BEST, "probes.json", "probes.npz", "probes.csv", "wandb_id", SUMMARY)
# what a run directory may hold besides its own set-aside (*.corrupt-*) and temp (.*.tmp) files
RUN_FILES = frozenset({CONFIG, SUMMARY, METRICS, CKPT, BEST, LOCK, "probes.json", "probes.npz", "probes.csv", "wandb",
                       "train.log", ATTEMPTS})


class RunDirError(ValueError):
    """A run directory that cannot be used as asked; the message names it, the problem and the fix."""


def runs_root() -> Path:
    """$ABLATE_RUNS_DIR, else ./runs; an empty one is unset (as ABLATE_DATA_DIR), not the working directory."""
    return Path(os.environ.get("ABLATE_RUNS_DIR") or "runs").expanduser()


def run_dir_for(cfg) -> Path:
    """run.dir, or $ABLATE_RUNS_DIR/<group>/<run id>. The group must stay inside the runs folder
    (checked on the path's words, so a runs folder that is itself a link, or holds linked group
    folders, still works): `run.group=../../x` is refused with RunDirError."""
    if cfg.run.dir:
        return Path(cfg.run.dir)
    root = runs_root()
    group = os.path.normpath(cfg.run.group)
    if os.path.isabs(cfg.run.group) or group in (".", "..") or group.startswith(".." + os.sep):
        raise RunDirError(f"run.group={cfg.run.group!r} would put the run outside the runs folder {str(root)!r}; "
                          "use a plain name such as run.group=my_sweep")
    from .config import run_id  # the config imports nothing of this module: no cycle

    return root / group / run_id(cfg)


def write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """summary.json, or None when it is missing or unreadable (`json_problem` says why): read through
    runfiles' capped reader, the table's too, so a 20 GB file is unreadable, never a MemoryError."""
    try:
        data = read_json_object(Path(run_dir) / SUMMARY)
    except (RunFileError, OSError):  # too big, a folder, not UTF-8, not JSON
        return None
    return data if data is not None and isinstance(data.get("status"), str) else None


def json_problem(path: Path, required: str | None = None) -> str | None:
    """Why a JSON object file of the run cannot be used (None when it is fine or absent)."""
    try:
        data = read_json_object(Path(path))
    except RunFileError as err:
        return err.problem
    if data is not None and required and not isinstance(data.get(required), str):
        return f"has no {required}"
    return None


def config_problem(run_dir: Path) -> str | None:
    """Why config.yaml cannot be read back as a config (None when it is fine or absent)."""
    from .config import ConfigError, from_dict

    try:
        data = read_config_mapping(Path(run_dir) / CONFIG)
        if data is not None:
            from_dict(data)
    except RunFileError as err:
        return err.problem
    except (ConfigError, TypeError, ValueError) as err:
        return f"is not a valid config ({str(err).split('; ')[0]})"
    return None


def metrics_problem(run_dir: Path) -> str | None:
    """Why metrics.csv cannot be resumed from (None when it is fine)."""
    try:
        rows = read_metrics_rows(Path(run_dir) / METRICS)
    except RunFileError as err:
        return err.problem
    if rows is None:
        return "is missing"
    if not all(row["step"].isdigit() for row in rows):
        return "has a step that is not a whole number"
    return None


def set_aside(path: Path) -> Path:
    """Rename a broken file to `<name>.corrupt-<time>` (kept for inspection, never read again)."""
    path = Path(path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        n += 1
    os.replace(path, target)
    return target


def write_config(run_dir: Path, config: dict[str, Any]) -> None:
    atomic_write(run_dir / CONFIG, yaml.safe_dump(config, sort_keys=False))


def is_finished(run_dir: Path) -> bool:
    summary = read_summary(run_dir)
    return bool(summary and summary.get("status") in FINISHED)


def retrains(summary: dict[str, Any] | None, how: str | None, others: set[str] | None = None) -> bool:
    """Whether `train(retrain=how)` trains a run whose folder holds `summary` again as a new attempt. "any"
    (ablate train --retrain): a finished run, and an unfinished one that other code started (resuming it would
    mix two codes in one result); one this code started resumes, as the same command after an interruption
    should. "stale" (ablate sweep --retrain-stale): a completed or diverged run that other code made. `others`:
    the commits provenance.other_code named, where the caller asked for many runs at once."""
    if not how or not summary:
        return False
    if how == "any" and summary["status"] in FINISHED:
        return True
    if how == "stale" and summary["status"] not in STALE:
        return False
    from .plugins import changed

    if others is None:
        from .provenance import other_code

        others = set(other_code([summary])[0])
    return (summary.get("provenance") or {}).get("commit") in others or bool(changed(summary))


RETRAINING = "retraining"  # in summary.json while keep_attempt moves an attempt aside: the folder it goes to
WAS = "status_before_retraining"  # the moved attempt's own status, while its summary says interrupted


def keep_attempt(run_dir: Path) -> Path:
    """Move the finished attempt in run_dir into attempts/<n>/ (the first n not holding a summary.json) and return
    that folder. First summary.json says the run is being retrained (status interrupted, RETRAINING: the folder),
    so that no reader takes a half-moved run for the finished one and a plain `ablate train` or sweep trains it
    (is_finished is false); then the files move, the earlier summary last, as it was. An error puts back what
    had moved; a kill leaves the mark, and the next keep_attempt of the run (train, under its lock) finishes
    the move into the same folder."""
    summary = read_summary(run_dir) or {}
    if summary.get(RETRAINING):  # a move cut short by a kill: finish it
        target = run_dir / summary[RETRAINING]
        earlier = {k: v for k, v in summary.items() if k not in (RETRAINING, WAS)} | {"status": summary.get(WAS)}
    else:
        n = 1
        while (run_dir / ATTEMPTS / str(n) / SUMMARY).exists():
            n += 1
        target, earlier = run_dir / ATTEMPTS / str(n), summary
        target.mkdir(parents=True, exist_ok=True)
        if summary:
            write_json(run_dir / SUMMARY, {**summary, "status": "interrupted", WAS: summary.get("status"),
                                           RETRAINING: target.relative_to(run_dir).as_posix()})
    moved: list[str] = []
    try:
        for name in ATTEMPT_FILES:
            if name != SUMMARY and ((run_dir / name).exists() or (run_dir / name).is_symlink()):
                os.replace(run_dir / name, target / name)
                moved.append(name)
        if earlier:
            write_json(target / SUMMARY, earlier)
            (run_dir / SUMMARY).unlink(missing_ok=True)
    except BaseException:
        if not summary.get(RETRAINING):  # put back what this call moved: the run as it was
            for name in moved:
                os.replace(target / name, run_dir / name)
            if earlier:
                write_json(run_dir / SUMMARY, earlier)
            (target / SUMMARY).unlink(missing_ok=True)
        raise
    return target


def check_run_dir(run_dir: Path, run_id: str) -> None:
    """Refuse (RunDirError) a run directory that is not ours to write: an existing file, a folder where
    one of the run's files or folders (RUN_FILES) is a symbolic link, or a non-empty folder that is
    neither a run directory of this config (its config.yaml or summary.json names `run_id`) nor only a
    run directory's own files."""
    run_dir = Path(run_dir)
    fix = "choose a new or empty folder (or leave run.dir unset)"
    if run_dir.is_symlink() and not run_dir.is_dir():
        raise RunDirError(f"run.dir={str(run_dir)!r} is a link to nothing usable; {fix}")
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"run.dir={str(run_dir)!r} is an existing file, not a folder; {fix}")
    if not run_dir.exists():
        return
    names = sorted(os.listdir(run_dir))
    for name in names:  # written through, a link would put the run's files (or read its own) elsewhere
        if name in RUN_FILES and (run_dir / name).is_symlink():
            raise RunDirError(f"{run_dir / name} is a symbolic link (to {os.readlink(run_dir / name)}); remove it "
                              "(a run writes its files only inside its folder)")
    ids = {_config_run_id(run_dir), (read_summary(run_dir) or {}).get("run_id")} - {None}
    if ids and ids != {run_id}:
        other = ", ".join(sorted(str(i) for i in ids - {run_id}))
        raise RunDirError(f"run.dir={str(run_dir)!r} holds the run {other}, not this config's {run_id}; {fix}")
    foreign = [n for n in names if n not in RUN_FILES and ".corrupt-" not in n
               and not (n.startswith(".") and n.endswith(".tmp"))]
    if foreign and not ids:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise RunDirError(f"run.dir={str(run_dir)!r} is a folder of other files ({shown}), not an ablate run "
                          f"directory; {fix}")


def _config_run_id(run_dir: Path) -> str | None:
    """The run id of the config saved in run_dir (None if there is none or it cannot be read)."""
    from .config import ConfigError, from_dict, run_id
    from .yamlfile import YamlFileError, read_yaml

    if not (run_dir / CONFIG).is_file():
        return None
    try:
        data = read_yaml(run_dir / CONFIG, "config")
        return run_id(from_dict(data)) if isinstance(data, dict) else None
    except (YamlFileError, ConfigError, TypeError, ValueError):
        return None


class RunLock:
    """An exclusive flock on run_dir/.lock; released by the OS if the process dies (even kill -9).
    The lock file is opened without following links, and must be a regular file: a planted
    `.lock -> somewhere` is refused (RunDirError), never truncated through."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / LOCK
        self.fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise RunDirError(f"{self.path} is a symbolic link; remove it (a run's lock is a plain file)") from None
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise RunDirError(f"{self.path} is not a regular file; remove it (a run's lock is a plain file)")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.fd = fd
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
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


