"""One sweep run in its own process: forked from a pre-imported forkserver, or (multi-device runs)
started as `python -m ablate.sweep.worker key=value ...` so Lightning's DDP launcher can re-run it.

Either way the process dies with the runner (Ctrl-C, kill, kill -9): it asks the kernel for SIGKILL
when its parent dies (PR_SET_PDEATHSIG), and a forked worker also watches the runner itself, because
its parent is the forkserver. Its output goes to the run directory's train.log; its result is the
run directory's summary.json, and its exit status says how it ended (OK, FAILED, BUSY, DISK: the
runs folder is full or read-only, TERMINATED: stopped by SIGTERM, resumable).

The forkserver gets a temporary folder of its own (TMPDIR): what it and the runs leave in temporary
files (W&B makes `wandb-media` and `wandb-artifacts` folders when it is imported) is removed with it
when the sweep ends, even when the server is killed. The runner's own multiprocessing folder
(`pymp-*`, which holds the server's socket) is removed by multiprocessing when the runner exits; when
the runner is killed (SIGKILL), the forkserver, which outlives it, removes both folders as it exits,
and when both were killed, the next sweep removes what they left (the folder's `.runner` file names
the runner's pid and its `pymp-*` folder).

This module stays light to import: the runner imports it; the heavy modules are in PRELOAD, which
the forkserver imports once so that a run starts training in about a second instead of ~7.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

# Exit statuses; anything else means the process died without a result. TERMINATED is the shell's
# 128 + SIGTERM, which `ablate train` also exits with when it is stopped.
OK, FAILED, BUSY, DISK, CTRL_C, TERMINATED = 0, 3, 4, 5, 130, 143
DISK_ERRNOS = (errno.ENOSPC, errno.EROFS, errno.EDQUOT)  # the runs folder cannot take more: stop the sweep
LOG = "train.log"
RETRAIN_ENV = "ABLATE_RETRAIN"  # set per run by the runner (--retrain-stale: "stale"): train(retrain=...)
# Imported once by the forkserver, so that a run forked from it imports nothing heavy. Imports only:
# no torch op runs there. The wandb, pandas, pyarrow, opentelemetry entries are what wandb.init
# imports on its first call in a process (~2.5 s measured here).
PRELOAD = [
    "torch", "numpy", "pytorch_lightning", "pytorch_lightning.loggers", "lightning_fabric", "torchmetrics",
    "torchvision.datasets", "torch.utils.serialization", "fsspec",
    "wandb", "wandb.sdk.wandb_init", "wandb.sdk.wandb_run", "wandb.sdk.launch", "wandb.apis.public",
    "wandb.sdk.artifacts", "pandas", "pyarrow", "psutil", "requests", "opentelemetry.sdk.metrics",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter", "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "ablate.train", "ablate.tasks", "ablate.data", "ablate.data.common", "ablate.data.synthetic", "ablate.data.mnist",
    "ablate.data.copytask", "ablate.probing", "ablate.tracking",
    "ablate.callbacks", "ablate.provenance", "ablate.sweep.worker",
]

# The forkserver's own environment: nothing it imports may start a thread or a CUDA context that
# forked runs would inherit broken. (Runs get the runner's environment back; see run_forked.)
FORKSERVER_ENV = {
    "PYTORCH_NVML_BASED_CUDA_CHECK": "1",  # torch.cuda.is_available() without initialising CUDA
    "JE_ARROW_MALLOC_CONF": "background_thread:false",  # pyarrow (wandb -> pandas) starts one otherwise
}

_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1
_CONTEXT = None
_TMPDIR: str | None = None  # the running forkserver's temporary folder
TMPDIR_KEY = "ABLATE_FORKSERVER_TMPDIR"  # set in the forkserver's environment only

RUNNER_FILE = ".runner"  # in a forkserver's folder: "<runner pid>\n<the runner's pymp-* folder>\n<its PID namespace>\n"


def pid_namespace() -> str:
    """This process's PID namespace ('pid:[4026531836]' on Linux; '' where /proc does not say): a pid means
    the same process only within one namespace (containers sharing one /tmp each count from 1)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _runner_of(folder: str) -> tuple[int, str | None] | None:
    """(pid, multiprocessing folder) of the runner that made a forkserver's folder; None if unknown, or if
    the runner lived in another PID namespace than ours (its pid says nothing here: never ours to remove)."""
    try:
        lines = (Path(folder) / RUNNER_FILE).read_text().splitlines()
        pid, mine = lines[:2]
        if len(lines) > 2 and lines[2] != pid_namespace():
            return None
        return int(pid), mine if Path(mine).name.startswith("pymp-") else None
    except (OSError, ValueError):
        return None


def _remove(folder: str) -> None:
    """A forkserver's folder and, its runner being gone, the runner's pymp-* folder."""
    runner = _runner_of(folder)
    if runner is not None and runner[1] is not None:
        shutil.rmtree(runner[1], ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)


def _server_exit(folder: str) -> None:
    """atexit of the forkserver: it exits when the runner has closed its end, i.e. has ended or is
    ending. Its own folder always goes; the runner's pymp-* folder once the runner is gone (a runner
    that exits normally removes it itself; one killed by SIGKILL cannot)."""
    runner = _runner_of(folder)
    deadline = time.monotonic() + 2
    while runner is not None and os.getppid() == runner[0] and time.monotonic() < deadline:
        time.sleep(0.01)  # the kernel closes a dying runner's files before it reparents its children
    if runner is not None and os.getppid() != runner[0]:
        _remove(folder)
    shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> None:
    """Remove the forkserver folders (and their runners' pymp-* folders) that a runner and its server
    both killed (kill -9 of the process group) left in the temporary folder: this user's, whose runner
    is gone. A folder without a readable `.runner` is left alone (being made now, or by older code)."""
    for folder in Path(tempfile.gettempdir()).glob("ablate-sweep-*"):
        try:
            if not folder.is_dir() or folder.is_symlink() or folder.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        runner = _runner_of(str(folder))
        if runner is not None and runner[0] != os.getpid() and not _alive(runner[0]):
            _remove(str(folder))


if os.environ.get(TMPDIR_KEY):  # imported by the forkserver (PRELOAD): its folder goes when it exits
    atexit.register(_server_exit, os.environ[TMPDIR_KEY])


def forkserver():
    """The forkserver context, its server started now: it imports PRELOAD while the caller goes on
    (the runner starts it before importing torch itself)."""
    global _CONTEXT, _TMPDIR
    import multiprocessing
    from multiprocessing import forkserver as server

    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(PRELOAD)
    if _TMPDIR is None or not os.path.isdir(_TMPDIR) or not forkserver_running():  # a server starts now
        if _TMPDIR is not None:
            shutil.rmtree(_TMPDIR, ignore_errors=True)
        from multiprocessing import util

        remove_stale()
        _TMPDIR = tempfile.mkdtemp(prefix="ablate-sweep-")
        # this process's multiprocessing folder (pymp-*: the server's socket), made now if it is not yet
        Path(_TMPDIR, RUNNER_FILE).write_text(f"{os.getpid()}\n{util.get_temp_dir()}\n{pid_namespace()}\n")
    env = {**FORKSERVER_ENV, "TMPDIR": _TMPDIR, TMPDIR_KEY: _TMPDIR}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    # SLURM signals every process of a job step (preemption, time limit, scancel: SIGTERM; submitit's
    # --signal: SIGUSR2, whose default action ends a process): the server starts with both ignored, kept
    # across its exec and by the runs it forks, so neither it nor a run dies of them unrecorded; a run
    # takes SIGTERM itself once `train` starts (recorded `interrupted`), and its runner stops it on either
    held = {signum: signal.signal(signum, signal.SIG_IGN) for signum in (signal.SIGTERM, signal.SIGUSR2)} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        server.ensure_running()
    finally:
        for signum, handler in held.items():
            signal.signal(signum, handler)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return _CONTEXT


def temp_dir() -> str | None:
    """The forkserver's temporary folder (None when none runs): runs use it as their TMPDIR too."""
    return _TMPDIR if forkserver_running() else None


def forkserver_running() -> bool:
    from multiprocessing import forkserver as server

    return getattr(server._forkserver, "_forkserver_pid", None) is not None


LOST = 255  # the exit status multiprocessing gives a forked run whose forkserver closed its status pipe


def forkserver_died(wait: float = 0.0) -> int | None:
    """The process id of this process's forkserver if it has died (kill -9, the OOM killer), else None;
    waiting up to `wait` seconds for it to end (a dying process closes its pipes before it can be waited
    for). It is left to be reaped by multiprocessing, which starts a new one when asked for the next run."""
    from multiprocessing import forkserver as server

    pid = getattr(server._forkserver, "_forkserver_pid", None)
    if pid is None:
        return None
    deadline = time.monotonic() + wait
    while True:
        try:
            ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped already
            return pid
        if ended is not None:
            return pid
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def running(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie does not: it has ended, its parent has not reaped it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: whether a signal could reach it
        return _alive(pid)


def stop_forkserver() -> None:
    """Stop the forkserver at once (it may still be importing): after bad input nothing is left
    running, after a sweep the command exits without waiting for the server's own shutdown."""
    from multiprocessing import forkserver as server

    global _TMPDIR
    pid = getattr(server._forkserver, "_forkserver_pid", None)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        server._forkserver._stop()
    if _TMPDIR is not None:  # killed: its atexit did not run
        shutil.rmtree(_TMPDIR, ignore_errors=True)
        _TMPDIR = None


def die_with_parent() -> None:
    """Linux: the kernel sends this process SIGKILL when the thread that started it exits."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _watch_runner() -> None:
    """A forked worker's parent is the forkserver, not the runner: watch the runner's end of the
    process pipe too, and die at once when it closes. Also give up the forkserver's 'alive' pipe
    that every forked process inherits, so the forkserver exits as soon as the runner does."""
    import multiprocessing
    from multiprocessing import forkserver
    from multiprocessing.connection import wait

    alive = getattr(forkserver._forkserver, "_forkserver_alive_fd", None)
    if alive is not None:
        try:
            os.close(alive)
        except OSError:
            pass
        forkserver._forkserver._forkserver_alive_fd = None
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        wait([parent.sentinel])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="ablate-runner-watch", daemon=True).start()


def _send(conn, message) -> None:
    if conn is None:
        return
    try:
        conn.send(message)
    except (OSError, EOFError):
        pass  # the runner is gone; the watchdog ends this process


def _first_step_callback(conn, spawned_at: float):
    import pytorch_lightning as pl

    class FirstStep(pl.Callback):
        """Reports when the first training step begins: the run's start-up overhead."""

        sent = False

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if not self.sent:
                self.sent = True
                _send(conn, ("started", time.monotonic() - spawned_at))

    return FirstStep()


def disk_error(err: BaseException | None) -> OSError | None:
    """The OSError in `err`'s chain that says the disk is full or read-only (None if there is none)."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in DISK_ERRNOS:
            return err
        err = err.__cause__ or err.__context__
    return None


def _say(text: str) -> None:
    """Print to the run's log, which may be on the full disk: then say nothing."""
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        pass


def record_failure(run_dir: Path, error: str, identity: dict) -> bool:
    """summary.json says failed, with `error`; under the run's lock (False if another process holds it)."""
    from ..rundir import FINISHED, RunLock, read_summary, write_json

    lock = RunLock(run_dir)
    if not lock.acquire():
        return False
    try:
        previous = read_summary(run_dir) or {}
        if previous.get("status") in FINISHED:  # never downgraded (train._record's rule): a retrain that failed
            return True  # before it set the earlier attempt aside leaves that one as it was
        write_json(run_dir / "summary.json", {**identity, **previous, "status": "failed", "error": error})
    finally:
        lock.release()
    return True


def identity(cfg) -> dict:
    from .. import config as C
    from ..train import run_dir_for

    return {"run_id": C.run_id(cfg), "run_dir": str(run_dir_for(cfg)), "group": cfg.run.group}


def run(cfg, conn=None, spawned_at: float | None = None) -> int:
    """Train `cfg` here; returns OK, FAILED (summary.json records the error), BUSY, DISK (the runs
    folder is full or read-only; the runner stops the sweep) or TERMINATED (SIGTERM; resumable)."""
    import torch

    from .. import config as C
    from ..rundir import CONFIG, write_config
    from ..train import RunBusy, is_ddp_child, run_dir_for, train

    threads = cfg.trainer.threads or 1
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:
        pass  # already set in this process
    callbacks = [_first_step_callback(conn, spawned_at)] if spawned_at is not None else []
    try:
        summary = train(cfg, log=print, callbacks=callbacks, retrain=os.environ.get(RETRAIN_ENV) or None)
    except RunBusy as err:
        _say(f"ablate: {err}")
        return BUSY
    except SystemExit as stop:  # SIGTERM: train's Interrupted (143), Lightning's SIGTERMException (None)
        _say(f"ablate: run stopped ({type(stop).__name__}); it resumes when run again")
        return stop.code if isinstance(stop.code, int) and stop.code else TERMINATED
    except KeyboardInterrupt:  # SIGINT to the worker alone (Ctrl-C reaches the runner too)
        _say("ablate: run stopped (KeyboardInterrupt); it resumes when run again")
        return CTRL_C
    except Exception as err:
        error = traceback.format_exc(limit=-8)
        _say(error)
        run_dir = run_dir_for(cfg)
        if not is_ddp_child():
            try:
                if not (run_dir / CONFIG).exists():  # failed before training: keep the run self-describing
                    write_config(run_dir, C.to_dict(cfg))
                record_failure(run_dir, error, identity(cfg))
            except OSError as unwritten:  # e.g. the disk that failed the run cannot take its record either
                if disk_error(err) is None:
                    err = unwritten
        disk = disk_error(err)
        if disk is not None:
            _send(conn, ("disk", f"[Errno {disk.errno}] {disk.strerror}"))
            return DISK
        return FAILED
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                pass
    _send(conn, ("finished", summary["status"]))
    return OK


class LinkedLog(Exception):
    """A run's train.log is a symbolic link: nothing is written through it (a planted
    `train.log -> ~/.bashrc` would get the run's output appended); the run fails with this line."""


def open_log(path: Path) -> int:
    """The run's log opened for appending, never through a link (LinkedLog names it)."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise LinkedLog(f"{path} is a symbolic link (to {os.readlink(path)}), not the run's log; "
                        "remove it, then run the same command again") from None


def _redirect_output(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_log(path)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    if hasattr(sys.stdout, "reconfigure"):  # the log reads as it happens (and a full disk shows at once)
        sys.stdout.reconfigure(line_buffering=True)


def run_forked(cfg, env: dict[str, str], cwd: str, conn, spawned_at: float) -> None:
    """Entry point of a run forked from the forkserver (multiprocessing target)."""
    _send(conn, ("forked", time.monotonic() - spawned_at))
    die_with_parent()
    _watch_runner()
    os.chdir(cwd)
    os.environ.clear()  # the forkserver's environment is the one of its start; use the runner's now
    os.environ.update(env)
    from ..train import run_dir_for

    try:
        _redirect_output(run_dir_for(cfg) / LOG)
    except LinkedLog as err:  # the run fails with the one line; its summary.json says so
        _send(conn, ("error", str(err)))
        try:
            record_failure(run_dir_for(cfg), str(err), identity(cfg))
        except OSError:
            pass  # the runner records it (a worker that ended without a result)
        conn.close()
        os._exit(FAILED)
    except OSError as err:  # the runs folder cannot take the run's log: nothing can be recorded
        _send(conn, ("disk" if disk_error(err) else "error", f"[Errno {err.errno}] {err.strerror}: {err.filename}"))
        conn.close()
        os._exit(DISK if disk_error(err) else FAILED)
    code = run(cfg, conn, spawned_at)
    conn.close()
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    """`python -m ablate.sweep.worker key=value ...`: one run in a fresh interpreter (DDP runs;
    Lightning starts the other ranks with this same command line)."""
    die_with_parent()
    from .. import config as C

    cfg = C.build(C.parse_overrides(list(sys.argv[1:] if argv is None else argv)))
    return run(cfg)


if __name__ == "__main__":
    sys.exit(main())
