"""Run a sweep's configurations: W in parallel, each in its own process, each exactly once.

Start-up: a run is forked from a forkserver that imported torch, Lightning and W&B once (PRELOAD),
so it reaches its first training step in about a second instead of paying ~7 s of imports. Runs with
trainer.devices other than 1 start as `python -m ablate.sweep.worker ...` instead, so that Lightning's
DDP launcher can start the other ranks with the same command line.

Exactly once: a run's directory is $ABLATE_RUNS_DIR/<sweep>/<run id>; finished runs (completed,
diverged) are skipped, a running one holds the directory's lock, an interrupted one resumes from its
last.ckpt, a failed one is retried. Workers die with the runner (see ablate.sweep.worker), so the
same command after Ctrl-C or kill -9 finishes exactly the missing runs. With --retrain-stale, a
completed or diverged run that other code made is trained again as a new attempt, once: the check is
made again under the run's lock, and a run retrained is made by this code.

Tuned sweeps (ablate.sweep.tune) run in two stages: stage 1 (every variant at every value of the
tuned key, on the tune seeds) first; each variant's stage 2 (the other seeds at its chosen value) is
queued as soon as its stage-1 runs are all finished. The choice is read from those runs' summary.json
files each time, so the same command after an interruption in either stage makes the same choice
and runs exactly what is missing.

Busy is not failed: a run whose lock another process holds (the same sweep started twice) is waited
for, and counts as whatever that process made of it. A runs folder that is full or read-only
(ENOSPC, EROFS, EDQUOT, in a worker or here) stops the sweep with one line instead of failing run
after run; a run stopped by SIGTERM is interrupted (it resumes), not failed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, TextIO

from .. import config as C
from .. import limits
from .. import plugins as P
from ..provenance import other_code, other_code_note
from ..rundir import FINISHED, LOCK, METRICS, SUMMARY, read_summary, retrains, runs_root, write_json
from ..runfiles import RunFileError, nonfinite_cell, nonfinite_metric, read_metrics_rows
from . import gpus as G
from . import hyperband as H
from . import tune as T
from . import worker
from .progress import Progress, duration
from .spec import Run, Sweep, SweepError


def visible_gpus() -> list[str]:
    """CUDA device ids this process may use (CUDA_VISIBLE_DEVICES, else every device torch counts)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip() and d.strip() != "-1"]
    if sys.platform.startswith("linux") and not limits.gpu_device_files():
        return []  # torch would count none, and costs seconds to import (a sweep's command need not)
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def gpus_unusable() -> str:
    """Why torch cannot use the GPUs CUDA_VISIBLE_DEVICES lists ('' when it can): most often a driver older than
    the one torch's CUDA build needs (the cu130 wheels: driver 580 or newer), when accelerator=auto would
    quietly train on the CPU."""
    import torch

    if torch.cuda.is_available():
        return ""
    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is a CPU-only build; install a CUDA build of torch"
    return (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees none (no NVIDIA driver, or one older than "
            "its CUDA build needs: check nvidia-smi, or install the torch wheel for your driver's CUDA version)")


def gpu_slots(gpus: list[str], per_run: int) -> list[str]:
    """Disjoint CUDA_VISIBLE_DEVICES values, one per GPU group: 8 GPUs, 2 per run -> '0,1' .. '6,7'."""
    return G.groups(gpus, per_run)


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def default_threads(workers: int | None, gpus: list[str], gpus_per_run: int | None, runs_per_gpu: int = 1) -> int:
    """Torch threads per run when --threads is not given: 1 (one run per core), or the cores shared
    out when --workers is given or GPUs set the number of runs (runs_per_gpu per GPU group)."""
    if gpus:
        slots = len(gpus) // max(1, gpus_per_run or 1) * max(1, runs_per_gpu)
        return max(1, cpu_count() // max(1, workers or slots))
    return max(1, cpu_count() // workers) if workers else 1


@dataclass(frozen=True)
class Plan:
    workers: int
    slots: list[str | None]  # CUDA_VISIBLE_DEVICES per worker slot (None: CPU only)


def plan(workers: int | None, threads: int, gpus_per_run: int | None, gpus: list[str],
         processes: int = 1, runs_per_gpu: int = 1) -> Plan:
    """How many runs at once, and the GPUs of each: `runs_per_gpu` runs per GPU group when there are
    GPUs (n_gpus // K groups; see ablate.sweep.gpus.assign), else one run per `threads` x `processes`
    cores (processes: DDP ranks of the largest run). --gpus-per-run and --runs-per-gpu are ignored
    without GPUs."""
    if workers is not None and workers < 1:
        raise SweepError(f"--workers={workers} is not allowed; expected an integer >= 1")
    if gpus:
        slots: list[str | None] = list(G.assign(gpus, runs_per_gpu, gpus_per_run or 1))
        if workers is not None and workers > len(slots):
            per = f" at {runs_per_gpu} runs per GPU" if runs_per_gpu > 1 else ""
            needed = -(-workers // runs_per_gpu) * (gpus_per_run or 1)  # ceil(workers / runs per GPU) groups
            raise SweepError(f"--workers={workers} needs {needed} GPUs{per} but "
                             f"{len(gpus)} are visible; use --workers {len(slots)} or fewer, or raise --runs-per-gpu")
        n = workers or len(slots)
        return Plan(n, slots[:n])
    n = workers or max(1, cpu_count() // (max(1, threads) * max(1, processes)))
    return Plan(n, [None] * n)


def check_devices(sweep: Sweep, gpus: list[str], gpus_per_run: int | None) -> None:
    """On GPUs, a run may not ask for more devices than its slot holds."""
    if not gpus:
        return
    k = gpus_per_run or 1
    for run in sweep.runs:
        devices = run.cfg.trainer.devices
        if devices.isdigit() and int(devices) > k:
            raise SweepError(f"run {run.index} ({run.label()}) asks for trainer.devices={devices} but "
                             f"--gpus-per-run is {k}; pass --gpus-per-run {devices}")


def check_runs_folder(sweep: Sweep) -> None:
    """The sweep's runs folder ($ABLATE_RUNS_DIR/<sweep>) is a folder or can be made: a file in its
    place (or above it) is bad input, found before any work (SweepError), not a sweep stopped at its
    first run."""
    target = runs_root() / sweep.name
    for folder in (target, *target.parents):
        if folder.exists():
            if not folder.is_dir():
                raise SweepError(f"the runs folder {folder} is a file, not a folder; move it away or set "
                                 "ABLATE_RUNS_DIR to a folder")
            return


def run_dir(run: Run) -> Path:
    return runs_root() / run.cfg.run.group / run.run_id


def _status(run: Run) -> str | None:
    return (read_summary(run_dir(run)) or {}).get("status")


def finished(run: Run) -> bool:
    return _status(run) in FINISHED


def code_notes(before: list[dict], retrained: list[Run], todo: int) -> list[str]:
    """The lines a sweep's command opens with about other code (provenance.other_code_note), whichever runs it
    (this runner, the executor): which of the runs finished before (`before`, their summaries) another commit or
    another source of a plug-in made, kept; and which of the `todo` runs to run are trained again for it."""
    lines = []
    if before and (note := other_code_note(before)):
        lines.append(f"of the {len(before)} runs finished before, {note}")
    summaries = [read_summary(run_dir(r)) for r in retrained]
    if summaries and (note := other_code_note(summaries, "trained again as new attempts (--retrain-stale), each "
                                              "earlier one kept in its folder's attempts/")):
        lines.append(f"of the {todo} runs to run, {note}")
    return lines


def stale_runs(runs: list[Run]) -> set[str]:
    """The ids of `runs` whose folder holds a completed or diverged run that other code made: what
    --retrain-stale trains again (rundir.retrains; git is asked once per commit, not once per run)."""
    summaries = {r.run_id: read_summary(run_dir(r)) for r in runs}
    done = [s for s in summaries.values() if s and s["status"] in FINISHED]
    others = set(other_code(done)[0]) if done else set()
    return {rid for rid, s in summaries.items() if retrains(s, "stale", others)}


def locked(run: Run) -> bool:
    """Another process holds the run's lock (trains it now). Never blocks, never writes; a shared
    lock taken and dropped at once, so that a worker's exclusive one can only lose a race to it and
    then wait like this process does."""
    try:
        fd = os.open(run_dir(run) / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # no lock file (never run), or not a plain file: nobody trains it
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def check_data(runs: list[Run]) -> None:
    """The data of every run is there (downloaded now if it can be) before any run starts: a missing
    data set is bad input (one line, exit 2), not one failed run per configuration, and parallel
    runs never download the same files at once. Likewise each run.init_from checkpoint."""
    if not runs:
        return
    # without Lightning or torchvision (a plug-in's task: its own data module's prepare_data)
    from ..data.files import DataError, ready

    for data in dict.fromkeys(r.cfg.data for r in runs):  # every distinct data config, once each
        try:
            ready(data)
        except (DataError, C.ConfigError) as err:
            raise SweepError(f"data.task={data.task}: {err}") from None
    starts = {r.cfg.run.init_from: r.cfg for r in runs if r.cfg.run.init_from}
    if not starts:
        return
    from ..train import read_init  # Lightning: only where a run starts from a checkpoint

    for cfg in starts.values():  # each checkpoint once
        try:
            read_init(cfg)  # there, readable, a completed run's (whether its weights fit: each run, at its start)
        except C.ConfigError as err:
            raise SweepError(str(err)) from None


def forked(run: Run) -> bool:
    """Single-device runs fork from the forkserver; DDP runs need a command line of their own."""
    return run.cfg.trainer.devices == "1"


def worker_command(run: Run) -> list[str]:
    items = [f"{k}={v}" for k, v in C.flat(run.cfg).items()]
    rebuilt = C.build(C.parse_overrides(items))
    assert C.run_id(rebuilt) == run.run_id, "the command line must rebuild the same configuration"
    return [sys.executable, "-m", "ablate.sweep.worker", *items]


def untrusted(directory: Path, metrics: dict[str, Any]) -> str | None:
    """Why a completed stage-1 run cannot be chosen on (the results table's rule: it lists the run
    `corrupt`): NaN or inf in its summary metrics or metrics.csv, or a metrics.csv that cannot be read."""
    if (problem := nonfinite_metric(metrics)) is not None:
        return f"{SUMMARY} {problem}"
    try:
        rows = read_metrics_rows(directory / METRICS)
    except RunFileError as err:
        return str(err)
    problem = nonfinite_cell(rows or [])
    return None if problem is None else f"{METRICS} {problem}"


class Stages:
    """A tuned sweep's two stages (see ablate.sweep.tune): stage 1, then per variant, once its stage-1
    runs are all finished (completed or diverged), the stage-2 runs at the value chosen from them."""

    def __init__(self, sweep: Sweep):
        assert sweep.tune is not None
        self.tune = sweep.tune
        self.variants: dict[str, list[Run]] = {}
        for run in sweep.runs:  # labelled by the keys that vary (constant ones name no variant)
            shown = {k: run.params[k] for k in sweep.varying if k in run.params}
            self.variants.setdefault(T.variant(shown, self.tune.key), []).append(run)
        self.stage1 = [r for r in sweep.runs if self.is_stage1(r)]
        self.stage2_total = sweep.expected_runs() - len(self.stage1)
        self.chosen: dict[str, Any] = {}  # variant -> its chosen value
        self.scores: dict[str, dict[Any, float]] = {}  # variant -> value -> mean score over the tune seeds
        self.passed: dict[str, dict[Any, bool]] = {}  # variant -> value -> met the gate on every tune seed
        self.untrusted: dict[str, str] = {}  # run folder -> why its `completed` cannot be chosen on
        self.redo: set[str] = set()  # run ids to be retrained (--retrain-stale): their summary is not chosen on

    def is_stage1(self, run: Run) -> bool:
        return run.cfg.seed in self.tune.seeds

    def variant_of(self, run: Run) -> str:
        return next(name for name, runs in self.variants.items() if run in runs)

    def value(self, run: Run) -> Any:
        return C.flat(run.cfg)[self.tune.key]

    def decide(self, name: str) -> tuple[Any, dict[Any, float], dict[Any, bool]] | None:
        """The variant's chosen value, each value's mean score and whether it met the gate on every tune
        seed (all True without a gate), once every stage-1 run is finished."""
        t = self.tune
        scores: dict[Any, list[float]] = {}
        passed: dict[Any, bool] = {}
        for run in self.variants[name]:
            if not self.is_stage1(run):
                continue
            summary = read_summary(run_dir(run)) or {}
            status = summary.get("status")
            if status not in FINISHED or run.run_id in self.redo:
                return None
            metrics = summary.get("metrics") if isinstance(summary.get("metrics"), dict) else {}
            if status == "completed" and (problem := untrusted(run_dir(run), metrics)) is not None:
                self.untrusted[str(run_dir(run))] = problem  # the table lists it corrupt: no choice on it
                return None
            self.untrusted.pop(str(run_dir(run)), None)
            scores.setdefault(self.value(run), []).append(T.score(metrics.get(t.metric), status, t.maximize))
            ok = t.gate is None or t.gate.passes(metrics.get(t.gate.metric), status)
            passed[self.value(run)] = passed.get(self.value(run), True) and ok
        means = {v: (T.worst(t.maximize) if any(abs(x) == float("inf") for x in xs) else sum(xs) / len(xs))
                 for v, xs in sorted(scores.items())}
        passed = dict(sorted(passed.items()))
        return T.choose(scores, t.maximize, passed if t.gate is not None else None), means, passed

    def plan(self) -> list[tuple[str, list[Run]]]:
        """(variant, its stage-2 runs) for each variant decided now that was not before."""
        out = []
        for name, runs in self.variants.items():
            if name in self.chosen:
                continue
            decided = self.decide(name)
            if decided is None:
                continue
            self.chosen[name], self.scores[name], self.passed[name] = decided
            out.append((name, [r for r in runs if not self.is_stage1(r) and self.value(r) == decided[0]]))
        return out

    def choice_line(self, name: str) -> str:
        t, chosen = self.tune, self.chosen[name]
        curve = ", ".join(f"{v:g}: {T.shown(x)}" if isinstance(v, float) else f"{v}: {T.shown(x)}"
                          for v, x in self.scores[name].items())
        return (f"{name}: {t.key}={chosen} chosen ({t.metric} mean over seeds "
                f"{' '.join(map(str, t.seeds))}: {curve}{T.gate_phrase(t.gate, self.passed[name])})")

    def describe(self) -> str:
        t = self.tune
        rest = sorted({r.cfg.seed for r in self.variants_runs() if not self.is_stage1(r)})
        return (f"tuning {t.key}: stage 1 runs each of {len(self.variants)} variants at its {len(t.values)} values on "
                f"seeds {' '.join(map(str, t.seeds))} ({len(self.stage1)} runs); stage 2 runs "
                + (f"seeds {' '.join(map(str, rest))} at each variant's chosen value ({self.stage2_total} runs); "
                   + (f"chosen for all {len(self.variants)} variants" if len(self.chosen) == len(self.variants) else
                      f"chosen so far for {len(self.chosen)} of {len(self.variants)} variants, the others when "
                      "their stage 1 has finished") if rest else "nothing (no other seeds)"))

    def variants_runs(self) -> list[Run]:
        return [r for runs in self.variants.values() for r in runs]


@dataclass
class Active:
    run: Run
    slot: int
    spawned_at: float  # time.monotonic() as the process started (one clock machine-wide)
    process: Any = None  # multiprocessing Process (forked) or subprocess.Popen (DDP)
    conn: Any = None
    forked_s: float | None = None  # until the worker process runs
    first_step_s: float | None = None  # until its first training step
    disk: str | None = None  # the worker's OSError when the runs folder is full or read-only

    def exitcode(self) -> int | None:
        if isinstance(self.process, subprocess.Popen):
            return self.process.poll()
        return self.process.exitcode

    def waitables(self) -> list:
        if isinstance(self.process, subprocess.Popen):
            return []
        return [self.process.sentinel] + ([self.conn] if self.conn is not None else [])


def _env(threads: int | None, gpus: str | None) -> dict[str, str]:
    threads = threads or 1
    env = dict(os.environ)
    env.update(ABLATE_PROGRESS="0", ABLATE_RUNS_DIR=str(runs_root().resolve()), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), WANDB_SILENT=env.get("WANDB_SILENT", "true"))
    if worker.temp_dir() is not None:  # removed with the forkserver: nothing a run leaves in TMPDIR stays
        env["TMPDIR"] = worker.temp_dir()
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    env.pop(H.PAUSE_ENV, None)  # set per run by the runner (early termination), never inherited
    env.pop(worker.RETRAIN_ENV, None)  # likewise (--retrain-stale)
    return env


def _tail(path: Path, lines: int = 5) -> str:
    """The log's last lines; never read through a link (a planted one would land in summary.json)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with open(fd, "rb") as log:
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no error recorded"


def cannot_write(err: OSError, folder: Path) -> str:
    """The one line that stops a sweep on an OSError: what failed, where, and what to do."""
    fix = {errno.ENOSPC: "free space", errno.EDQUOT: "free space (disk quota)",
           errno.EROFS: "make it writable"}.get(err.errno)
    what = f"[Errno {err.errno}] {err.strerror}" if err.errno is not None else str(err)
    if fix is None:
        return f"sweep stopped by an OS error in {folder}: {what}; fix it and run the same command again"
    return f"cannot write to {folder}: {what}; {fix} or set ABLATE_RUNS_DIR, then run the same command again"


@dataclass
class Report:
    total: int
    skipped: dict[str, int] = field(default_factory=dict)  # finished before this invocation
    outcomes: dict[str, list[Run]] = field(default_factory=dict)  # of the runs this invocation ran
    elsewhere: dict[str, list[Run]] = field(default_factory=dict)  # ended by another process meanwhile
    forked_s: list[float] = field(default_factory=list)
    first_step_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False
    signal: int = signal.SIGINT  # what interrupted the sweep
    stopped: str | None = None  # why the sweep stopped early (the runs folder cannot be written)
    stages: Stages | None = None  # a tuned sweep's stages, with the choices made

    def count(self, outcome: str) -> int:
        return (self.skipped.get(outcome, 0) + len(self.outcomes.get(outcome, []))
                + len(self.elsewhere.get(outcome, [])))


class Runner:
    def __init__(self, sweep: Sweep, workers: int | None = None, threads: int = 1,
                 gpus_per_run: int | None = None, max_runs: int | None = None,
                 stream: TextIO | None = None, gpus: list[str] | None = None, runs_per_gpu: int = 1,
                 retrain_stale: bool = False):
        check_runs_folder(sweep)
        self.sweep = sweep
        self.threads = threads
        self.gpus = visible_gpus() if gpus is None else gpus
        ranks = max(int(r.cfg.trainer.devices) if r.cfg.trainer.devices.isdigit() else 1 for r in sweep.runs)
        self.plan = plan(workers, threads, gpus_per_run, self.gpus, processes=ranks, runs_per_gpu=runs_per_gpu)
        check_devices(sweep, self.gpus, gpus_per_run)
        if max_runs is not None and max_runs < 1:
            raise SweepError(f"--max-runs={max_runs} is not allowed; expected an integer >= 1")
        self.max_runs = max_runs
        self.stream = stream or sys.stderr
        self.active: dict[str, Active] = {}
        self.waiting: dict[str, Run] = {}  # runs another process is training: their results count here
        self.interrupted = False
        self.stop: str | None = None  # set when the runs folder cannot be written: start nothing more
        self.left: int | None = None  # of --max-runs, what stage 2 may still start
        # early termination (sweep.early): the epoch each stage-1 run is to pause after when it starts next, and
        # the runs paused at their variant's band, waiting for the rest of the variant's stage 1
        self.pause: dict[str, int] = {}
        self.held: set[str] = set()
        self.draining = False  # a warning before a job's time limit (drain): start nothing more
        self.retrain_stale = retrain_stale
        # --retrain-stale: the runs finished by other code that this invocation trains again, each until its
        # retrain has ended (then it is finished by this code: never retrained twice)
        self.stale: set[str] = set()

    def drain(self, signum: int = signal.SIGUSR2) -> None:
        """SLURM's warning ahead of a packed job's time limit: start no more runs, and pass the warning to the
        ones training (each saves its place at its next step and stops, recorded `interrupted`); the sweep
        then ends interrupted, its unstarted runs left for the next submission."""
        self.draining = True
        for active in list(self.active.values()):
            try:
                os.kill(active.process.pid, signum)
            except (ProcessLookupError, TypeError):  # ended meanwhile, or not started yet
                pass

    # -- starting and ending one run -------------------------------------------------------------
    def _start(self, run: Run, slot: int) -> Active:
        env = _env(run.cfg.trainer.threads, self.plan.slots[slot])
        if run.run_id in self.pause:
            env[H.PAUSE_ENV] = str(self.pause[run.run_id])
        if run.run_id in self.stale:  # train asks again under the run's lock: another runner may have retrained it
            env[worker.RETRAIN_ENV] = "stale"
        active = Active(run=run, slot=slot, spawned_at=time.monotonic())
        directory = run_dir(run)
        directory.mkdir(parents=True, exist_ok=True)  # a full or read-only runs folder stops the sweep here
        if forked(run):
            ctx = worker.forkserver()
            reader, writer = ctx.Pipe(duplex=False)
            process = ctx.Process(target=worker.run_forked, name=f"ablate-{run.run_id}",
                                  args=(run.cfg, env, os.getcwd(), writer, active.spawned_at))
            process.start()
            writer.close()
            active.process, active.conn = process, reader
        else:
            log = worker.open_log(directory / worker.LOG)  # never through a link (LinkedLog)
            try:
                active.process = subprocess.Popen(worker_command(run), stdout=log, stderr=log,
                                                  stdin=subprocess.DEVNULL, env=env,
                                                  preexec_fn=worker.die_with_parent)
            finally:
                os.close(log)
        return active

    def _label(self, run: Run) -> str:
        return f"{run.run_id} {run.label(self.sweep.varying)}".strip()

    def _launch(self, run: Run, slot: int, progress: Progress, report: Report) -> bool:
        """Start `run` in `slot`; False (the slot stays free) when another process has finished it
        meanwhile or is training it now."""
        if finished(run) and not (run.run_id in self.stale and stale_runs([run])):
            progress.pending = max(0, progress.pending - 1)
            self._elsewhere(run, report, progress)
            return False
        if locked(run):
            self.waiting[run.run_id] = run
            progress.wait(run.run_id, self._label(run))
            return False
        try:
            self.active[run.run_id] = self._start(run, slot)
        except worker.LinkedLog as err:  # a DDP run's log (the runner opens it): the run fails, the sweep goes on
            worker.record_failure(run_dir(run), str(err), worker.identity(run.cfg))
            report.outcomes.setdefault("failed", []).append(run)
            progress.start(run.run_id, self._label(run))
            progress.finish(run.run_id, "failed", f"{self._label(run)}: {err}")
            return False
        progress.start(run.run_id, self._label(run))
        return True

    def _fill(self, queue: list[Run], free: list[int], progress: Progress, report: Report) -> None:
        while queue and free and self.stop is None and not self.draining:
            try:
                launched = self._launch(queue[0], free[0], progress, report)
            except OSError as err:  # the runs folder cannot take the run's folder: start nothing more
                self.stop = cannot_write(err, runs_root() / self.sweep.name)
                return
            if launched:
                free.pop(0)
            queue.pop(0)

    def _elsewhere(self, run: Run, report: Report, progress: Progress) -> None:
        """Another process ended `run` (finished or failed): its outcome counts here, once."""
        self.stale.discard(run.run_id)
        summary = read_summary(run_dir(run)) or {}
        status = summary.get("status")
        report.elsewhere.setdefault(status, []).append(run)
        note = f": {_last_line(summary.get('error'))}" if status == "failed" else ""
        progress.finish(run.run_id, status, f"{self._label(run)} (by another process){note}")

    def _check_waiting(self, queue: list[Run], report: Report, progress: Progress) -> None:
        """Runs another process was training: once its lock is free, count what it made of them, or
        (it left them unfinished: killed, interrupted) run them here."""
        for rid, run in list(self.waiting.items()):
            if locked(run):
                continue
            del self.waiting[rid]
            status = (read_summary(run_dir(run)) or {}).get("status")
            if status in FINISHED or status == "failed":
                self._elsewhere(run, report, progress)
            else:
                queue.insert(0, run)
                progress.requeue(rid)

    def _read(self, active: Active) -> None:
        while active.conn is not None:
            try:
                if not active.conn.poll():
                    return
                message = active.conn.recv()
            except (EOFError, OSError):
                active.conn.close()
                active.conn = None
                return
            if message[0] == "forked":
                active.forked_s = float(message[1])
            elif message[0] == "started":
                active.first_step_s = float(message[1])
            elif message[0] == "disk":
                active.disk = str(message[1])

    def _outcome(self, active: Active, code: int) -> tuple[str, str]:
        """(completed|diverged|failed|busy|interrupted, one line to show) for an ended process.
        A worker whose runs folder is full or read-only sets self.stop."""
        run, directory = active.run, run_dir(active.run)
        summary = read_summary(directory) or {}
        status = summary.get("status")
        if code == worker.OK and status in FINISHED:
            return status, ""
        if code == worker.OK and status == "paused":
            return "paused", f"at its early-termination band, epoch {summary.get('paused_after_epoch')}"
        if code == worker.FAILED and status in FINISHED:  # the summary was never downgraded (train._record)
            if run.run_id in self.stale and (other_code([summary])[0] or P.changed(summary)):  # the earlier attempt's
                return "failed", (f"its retrain failed before it started ({worker.LOG} says why); the earlier "
                                  f"{status} run stays")
            return status, f"recorded {status}, then its process failed ({worker.LOG} says why)"
        if code == worker.BUSY:
            return "busy", "another process holds its lock"
        if self.interrupted:
            return "interrupted", ""
        if code == worker.DISK:
            error = active.disk or _last_line(summary.get("error"))
            self.stop = self.stop or cannot_write(_oserror(error), runs_root() / self.sweep.name)
            return "failed", error
        if status == "interrupted" or code in (worker.TERMINATED, worker.CTRL_C, -signal.SIGTERM, -signal.SIGINT):
            return "interrupted", "stopped by a signal; run the same command again to resume it"
        if code in (worker.FAILED, worker.OK) and status == "failed":
            return "failed", _last_line(summary.get("error"))
        how = f"killed by {_signal_name(code)}" if code < 0 else f"exited with status {code}"
        error = f"worker process {how} before recording a result"
        tail = _tail(directory / worker.LOG)
        worker.record_failure(directory, f"{error}\n{tail}".strip(), worker.identity(run.cfg))
        return "failed", error

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> Report:
        stages = Stages(self.sweep) if self.sweep.tune is not None else None
        first = stages.stage1 if stages else self.sweep.runs
        total = len(first) + (stages.stage2_total if stages else 0)
        report = Report(total=total, stages=stages)
        todo: list[Run] = []
        before: list[dict] = []  # the summaries of the runs finished before
        if stages:
            stages.redo = self.stale

        def take(runs) -> None:
            """Queue the runs not finished yet (and those to retrain); count the finished ones as skipped, by status."""
            if self.retrain_stale:
                self.stale |= stale_runs(runs)
            for run in runs:
                if finished(run) and run.run_id not in self.stale:
                    before.append(read_summary(run_dir(run)))
                    status = before[-1]["status"]
                    report.skipped[status] = report.skipped.get(status, 0) + 1
                elif self.sweep.early is not None and _status(run) == "paused":
                    self.held.add(run.run_id)  # at its band: decided on with its variant (_bands)
                else:
                    todo.append(run)

        take(first)
        if stages and self.sweep.early is not None:
            ledger = H.read_ledger(runs_root() / self.sweep.name, self.sweep.early)
            for run in todo:  # each stage-1 run trains to the first band it has not passed
                self._aim(stages, run, ledger)
        decided: list[str] = []
        if stages:  # variants whose stage 1 finished before: their stage 2 is known now
            for name, runs in stages.plan():
                decided.append(name)
                take(runs)
        self.left = None
        if self.max_runs is not None:
            todo = todo[: self.max_runs]
            self.left = self.max_runs - len(todo)
        undecided = 0  # stage-2 runs not known yet: they may still use a worker
        if stages:
            undecided = sum(len({r.cfg.seed for r in runs if not stages.is_stage1(r)})
                            for name, runs in stages.variants.items() if name not in stages.chosen)
        workers = min(self.plan.workers, len(todo) + len(self.held)
                      + min(undecided, self.left if self.left is not None else undecided)) or 1
        where = runs_root() / self.sweep.name
        gpu_note = f", GPUs {G.describe(self.plan.slots[:workers])}" if self.gpus else ""
        progress = Progress(self.sweep.name, total, workers, self.stream)
        progress.counts.update({k: v for k, v in report.skipped.items()})
        progress.pending = len(todo)
        progress.unplanned = min(undecided, self.left if self.left is not None else undecided)
        done_before = sum(report.skipped.values())
        later = total - done_before - len(todo)
        plan_note = f" on {workers} workers x {self.threads} thread(s){gpu_note}" if todo or undecided else ""
        progress.say(f"ablate sweep {self.sweep.name}: {total} runs, {done_before} finished before, "
                     f"{len(todo)} to run" + (f" ({later} left for later)" if later else "")
                     + f"{plan_note} -> {where}")
        for line in code_notes(before, [r for r in todo if r.run_id in self.stale], len(todo)):
            progress.say(f"ablate sweep {self.sweep.name}: {line}")
        if stages:
            progress.say(f"ablate sweep {self.sweep.name}: {stages.describe()}")
            if self.sweep.early is not None:
                epochs = min(r.cfg.trainer.max_epochs for r in stages.stage1)
                progress.say(f"ablate sweep {self.sweep.name}: {self.sweep.early.describe(epochs)}")
            for name in decided:
                progress.say(f"ablate sweep {self.sweep.name}: stage 2 of {stages.choice_line(name)}")
        if any(forked(r) for r in todo) or undecided:
            worker.forkserver()  # imports PRELOAD now, while the first runs are set up
        started = time.monotonic()
        free = list(range(workers))
        queue = list(todo)
        old_term = signal.signal(signal.SIGTERM, _raise_interrupt) if _main_thread() else None
        seen = progress.finished
        try:
            if stages and self.held:  # paused before: decided on now where their variant is all at the band
                self._bands(stages, queue, report, progress)
            while (queue or self.active or self.waiting) and self.stop is None and not (self.draining and not self.active):
                self._fill(queue, free, progress, report)
                progress.draw()
                waitables = [w for a in self.active.values() for w in a.waitables()]
                if waitables:  # a run ended or reported, or a second passed (redraw the ETA)
                    wait(waitables, timeout=1.0)
                else:  # only DDP runs (subprocesses) or runs another process trains: poll them
                    time.sleep(0.5)
                ended = []
                for rid, active in list(self.active.items()):
                    self._read(active)
                    code = active.exitcode()
                    if code is None:
                        continue
                    if not isinstance(active.process, subprocess.Popen):
                        active.process.join()
                    del self.active[rid]
                    free.append(active.slot)
                    ended.append((active, code))
                # a forked run "exits" LOST when its forkserver's status pipe closes: give the server time to end
                lost = any(forked(a.run) and code == worker.LOST for a, code in ended)
                if lost and (server := worker.forkserver_died(wait=5.0)) is not None:
                    ended = self._server_lost(server, ended, report, progress)
                for active, code in ended:  # before the next runs start: a full disk stops them
                    try:
                        self._finish(active, code, report, progress)
                    except OSError as err:  # recording a dead worker's failure: the folder takes nothing
                        self.stop = self.stop or cannot_write(err, runs_root() / self.sweep.name)
                        report.outcomes.setdefault("failed", []).append(active.run)
                self._check_waiting(queue, report, progress)
                if stages and self.held:  # a variant's last stage-1 run ended here or elsewhere
                    self._bands(stages, queue, report, progress)
                if stages and progress.finished != seen:
                    seen = progress.finished
                    self._stage2(stages, queue, report, progress)
        except KeyboardInterrupt as stop:
            self.interrupted = report.interrupted = True
            report.signal = getattr(stop, "signum", signal.SIGINT)
            progress.say(f"ablate sweep {self.sweep.name}: interrupted; stopping {len(self.active)} runs")
            self._stop_all(report, progress)
        except OSError as err:  # this process cannot write the runs folder (a run's record, a log)
            self.stop = self.stop or cannot_write(err, runs_root() / self.sweep.name)
        finally:
            if self.stop is not None:
                report.stopped = self.stop
                progress.say(f"ablate sweep {self.sweep.name}: stopping: {self.stop}")
                self._stop_all(report, progress)
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)
            progress.close()
        if self.draining:
            self.interrupted = report.interrupted = True
            report.signal = signal.SIGUSR2
        report.wall_s = time.monotonic() - started
        return report

    def _aim(self, stages: Stages, run: Run, ledger: dict[str, Any]) -> None:
        """The epoch a stage-1 run pauses after when it starts: the first band its variant's decisions
        (hyperband.json) have not let it past; none past the last band."""
        early = self.sweep.early
        if early is None or not stages.is_stage1(run):
            return
        name = stages.variant_of(run)
        passed = [int(b) for b, d in ledger.get(name, {}).items() if run.run_id in d.get("went_on", ())]
        band = early.next_band(max(passed, default=0), run.cfg.trainer.max_epochs)
        if band is None:
            self.pause.pop(run.run_id, None)
        else:
            self.pause[run.run_id] = band

    def _bands(self, stages: Stages, queue: list[Run], report: Report, progress: Progress) -> None:
        """Early termination (ablate.sweep.hyperband): for each variant whose stage-1 runs are all at its band
        (paused) or finished, W&B's rule on their curves; the decision is recorded in hyperband.json, then the
        losers are recorded `stopped` and the others queued to the next band (first, so the variant goes on)."""
        early, t = self.sweep.early, stages.tune
        assert early is not None
        folder = runs_root() / self.sweep.name
        ledger = H.read_ledger(folder, early)
        busy = set(self.active) | set(self.waiting) | {r.run_id for r in queue}
        for name, runs in stages.variants.items():
            stage1 = [r for r in runs if stages.is_stage1(r)]
            held = [r for r in stage1 if r.run_id in self.held]
            if not held or any(r.run_id in busy for r in stage1):
                continue
            summaries = {r.run_id: read_summary(run_dir(r)) or {} for r in stage1}
            if any(s.get("status") not in FINISHED and r.run_id not in self.held
                   for r, s in zip(stage1, summaries.values())):
                continue  # one failed or was interrupted: the next invocation runs it, then decides
            band = min(int(summaries[r.run_id].get("paused_after_epoch") or 0) for r in held)
            decision = ledger.setdefault(name, {}).setdefault(str(band), {"stopped": {}, "went_on": []})
            new = {r.run_id for r in held} - set(decision["stopped"]) - set(decision["went_on"])
            if new:  # not decided before (the first time, or a run the grid has gained since)
                curves = {r.run_id: H.history(run_dir(r), t.metric) for r in stage1}
                stops = H.to_stop(curves, new, early, t.maximize)
                decision["stopped"].update({rid: stop.as_dict() for rid, stop in stops.items()})
                decision["went_on"] += [r.run_id for r in held if r.run_id in new and r.run_id not in stops]
                H.write_ledger(folder, early, ledger)  # first: a kill after it repeats nothing, and decides the same
            shown = f"{name}: " if name else ""
            stopped = sum(1 for r in held if r.run_id in decision["stopped"])
            progress.say(f"ablate sweep {self.sweep.name}: {shown}early termination at epoch {band}: "
                         f"{stopped} of {len(held)} runs stopped, {len(held) - stopped} go on")
            for run in held:
                self.held.discard(run.run_id)
                stop = decision["stopped"].get(run.run_id)
                if stop is None:
                    self._aim(stages, run, ledger)
                    queue.insert(0, run)
                    progress.pending += 1
                    continue
                summary = summaries[run.run_id]
                summary.update(status="stopped", early_terminate=stop)
                write_json(run_dir(run) / SUMMARY, summary)
                report.outcomes.setdefault("stopped", []).append(run)
                progress.finish(run.run_id, "stopped", f"{self._label(run)}: {t.metric} {stop['value']:.4g} at epoch "
                                f"{stop['band']}, short of the threshold {stop['threshold']:.4g}")

    def _stage2(self, stages: Stages, queue: list[Run], report: Report, progress: Progress) -> None:
        """Queue the stage-2 runs of every variant whose stage 1 has just finished (within --max-runs)."""
        for name, runs in stages.plan():
            progress.say(f"ablate sweep {self.sweep.name}: stage 2 of {stages.choice_line(name)}")
            if self.retrain_stale:
                self.stale |= stale_runs(runs)
            for run in runs:
                progress.unplanned = max(0, progress.unplanned - 1)  # planned now: pending, or skipped
                if finished(run) and run.run_id not in self.stale:  # e.g. run by W&B agents or another process
                    status = read_summary(run_dir(run))["status"]
                    report.skipped[status] = report.skipped.get(status, 0) + 1
                    progress.counts[status] = progress.counts.get(status, 0) + 1
                elif self.left is None or self.left > 0:
                    queue.append(run)
                    progress.pending += 1
                    if self.left is not None:
                        self.left -= 1

    def _finish(self, active: Active, code: int, report: Report, progress: Progress) -> None:
        self._read(active)
        if active.conn is not None:
            active.conn.close()
        outcome, note = self._outcome(active, code)
        if outcome != "busy":
            self.stale.discard(active.run.run_id)
        if outcome == "paused":  # waits for the rest of its variant's stage 1 (_bands), not finished
            self.held.add(active.run.run_id)
            progress.finish(active.run.run_id, outcome, f"{self._label(active.run)}: {note}")
            return
        if outcome == "busy":  # another process trains it: wait for its result
            self.waiting[active.run.run_id] = active.run
            progress.wait(active.run.run_id, self._label(active.run))
            return
        report.outcomes.setdefault(outcome, []).append(active.run)
        if active.first_step_s is not None and active.forked_s is not None:
            report.forked_s.append(active.forked_s)
            report.first_step_s.append(active.first_step_s)
        progress.finish(active.run.run_id, outcome, self._label(active.run) + (f": {note}" if note else ""))

    def _server_lost(self, server: int, ended: list[tuple[Active, int]], report: Report,
                     progress: Progress) -> list[tuple[Active, int]]:
        """The forkserver died (kill -9, the OOM killer): every run it forked looks ended with status 255, and
        its end can no longer be read. Its runs die with it (die_with_parent), as after a kill -9: they resume
        from their checkpoints. Each is made sure to have stopped (SIGTERM, SIGKILL after 30 s) and is counted
        as what it recorded, else interrupted, never failed with an error of the runner's making; the sweep
        stops, saying so in one line. Returns the other ended runs (DDP runs, forked runs that ended for reasons
        of their own), to be finished as usual."""
        lost = ([a for a, code in ended if forked(a.run) and code == worker.LOST]
                + [a for a in self.active.values() if forked(a.run)])
        for active in lost:
            with contextlib.suppress(ProcessLookupError):  # it may end (and be reaped) meanwhile
                if worker.running(active.process.pid):
                    os.kill(active.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for active in lost:
            while worker.running(active.process.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            with contextlib.suppress(ProcessLookupError):
                if worker.running(active.process.pid):
                    os.kill(active.process.pid, signal.SIGKILL)
            if active.conn is not None:
                active.conn.close()
            self.active.pop(active.run.run_id, None)
            status = (read_summary(run_dir(active.run)) or {}).get("status")
            outcome = status if status in FINISHED else "interrupted"
            report.outcomes.setdefault(outcome, []).append(active.run)
            note = "" if status in FINISHED else ": stopped with the forkserver; run the same command again to resume it"
            progress.finish(active.run.run_id, outcome, self._label(active.run) + note)
        self.stop = self.stop or (f"the forkserver that starts its runs (process {server}) died (killed?); its "
                                  f"{len(lost)} run(s) were stopped, none is lost: run the same command again to go on")
        return [(a, code) for a, code in ended if a not in lost]  # ended for reasons of their own: as usual

    def _stop_all(self, report: Report, progress: Progress) -> None:
        for active in self.active.values():  # SIGTERM: a worker dies at once (its DDP ranks with it)
            active.process.terminate()
        deadline = time.monotonic() + 5
        for active in self.active.values():
            left = max(0.1, deadline - time.monotonic())
            if isinstance(active.process, subprocess.Popen):
                try:
                    active.process.wait(left)
                except subprocess.TimeoutExpired:
                    active.process.kill()
                    active.process.wait()
            else:
                active.process.join(left)
                if active.process.exitcode is None:
                    active.process.kill()
                    active.process.join()
            report.outcomes.setdefault("interrupted", []).append(active.run)
            progress.running.pop(active.run.run_id, None)
        self.active.clear()
        self.waiting.clear()  # another process's runs: it goes on with them


class _Terminated(KeyboardInterrupt):
    signum = signal.SIGTERM


def _raise_interrupt(signum, frame):
    raise _Terminated


def _oserror(text: str | None) -> OSError:
    """An OSError back from a worker's message ('[Errno 28] No space left on device')."""
    match = re.search(r"\[Errno (\d+)\] ([^:\n]*)", text or "")
    if match is None:
        return OSError(errno.ENOSPC, text or "no room left")
    return OSError(int(match.group(1)), match.group(2).strip())


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _median(values: list[float]) -> float:
    return values[len(values) // 2]


def summarise(sweep: Sweep, report: Report, stream: TextIO, out: TextIO) -> int:
    """Print what failed (with its error's last line), the start-up cost, one JSON line; exit status:
    0 when every run ended completed or diverged (whoever ran it), 1 when one failed or was stopped
    (SIGTERM), or the folder cannot be written, 130 / 143 when the sweep itself was interrupted."""
    for run in report.outcomes.get("failed", []) + report.elsewhere.get("failed", []):
        summary = read_summary(run_dir(run)) or {}
        stream.write(f"failed: {run_dir(run)} ({run.label(sweep.varying)}): {_last_line(summary.get('error'))}\n")
    if report.first_step_s:  # the first runs also wait for the forkserver's imports
        forked, first = sorted(report.forked_s), sorted(report.first_step_s)
        stream.write(f"start-up of a run: process {_median(forked):.2f} s, first training step "
                     f"{_median(first):.2f} s (medians; max {first[-1]:.2f} s) over {len(first)} runs\n")
    counts = {k: report.count(k) for k in ("completed", "diverged", "stopped", "failed", "interrupted")}
    result = {"sweep": sweep.name, "runs": report.total, **counts,
              "left": report.total - counts["completed"] - counts["diverged"] - counts["stopped"],
              "skipped": sum(report.skipped.values()), "run_now": sum(len(v) for v in report.outcomes.values()),
              "by_other_process": sum(len(v) for v in report.elsewhere.values()),
              "wall_s": round(report.wall_s, 1), "runs_dir": str(runs_root() / sweep.name)}
    stages = report.stages
    if stages is not None:
        result["tuned"] = {"key": stages.tune.key, "metric": stages.tune.metric, "chosen": dict(stages.chosen),
                           "undecided": [v for v in stages.variants if v not in stages.chosen],
                           **({"gate": str(stages.tune.gate)} if stages.tune.gate is not None else {})}
        waiting = result["tuned"]["undecided"]
        for folder, problem in stages.untrusted.items():
            stream.write(f"ablate: {folder}: {problem}; its variant's {stages.tune.key} is not chosen on it "
                         "(delete the folder to run it again)\n")
        if waiting and not (report.stopped or report.interrupted):
            stream.write(f"ablate: stage 2 of {len(waiting)} of {len(stages.variants)} variants waits for their "
                         f"stage 1 (runs not finished: failed, interrupted or left for later); run the same "
                         "command again\n")
    out.write(json.dumps(result) + "\n")
    out.flush()
    if report.stopped:
        stream.write(f"ablate: {report.stopped}\n")
        return 1
    if report.interrupted:
        stream.write(f"ablate: sweep {sweep.name} interrupted after {duration(report.wall_s)}; run the same "
                     "command again to finish it (interrupted runs resume from last.ckpt)\n")
        return 128 + int(report.signal) if report.signal == signal.SIGTERM else 130
    if counts["failed"] or counts["interrupted"]:
        parts = [f"{counts['failed']} of {report.total} runs failed"] if counts["failed"] else []
        if counts["interrupted"]:
            parts.append(f"{counts['interrupted']} of {report.total} runs were stopped by SIGTERM (interrupted, "
                         "resumable)")
        stream.write(f"ablate: {', '.join(parts)}; run the same command again to resume "
                     + ("and retry them (the errors above, each run's summary.json and train.log say why they failed)\n"
                        if counts["failed"] else "them\n"))
        return 1
    return 0


def dry_run(sweep: Sweep, out: TextIO, retrain_stale: bool = False) -> int:
    """The expanded runs, their ids and their state; runs nothing, writes nothing. A tuned sweep lists
    stage 1, then the stage-2 runs of the variants whose choice is made (stage 1 finished), and says
    how many are known only once the others' stage 1 has finished. A finished run that other code made
    (another commit, another plug-in source) is marked, with what the command would do with it."""
    check_runs_folder(sweep)
    stages = Stages(sweep) if sweep.tune is not None else None
    stale = stale_runs(sweep.runs if stages is None else stages.stage1)
    if stages is not None and retrain_stale:
        stages.redo = stale  # as the run will: a variant whose stage 1 is retrained is chosen on the new runs
    planned = stages.plan() if stages is not None else []  # the stage-2 runs decided now (plan() says each once)
    stale |= stale_runs([r for _, runs in planned for r in runs])
    then = "trained again (--retrain-stale)" if retrain_stale else "kept (--retrain-stale trains it again)"

    def line(run: Run) -> None:
        status = (read_summary(run_dir(run)) or {}).get("status", "new")
        mark = f"  made by other code: {then}" if run.run_id in stale else ""
        out.write(f"{run.run_id}  {status:<9}  {run.label()}{mark}\n")

    said = (f"{len(stale)} of them finished and made by other code: {then.replace('it again', 'them again')}\n"
            if stale else "")
    if stages is None:
        for run in sweep.runs:
            line(run)
        out.write(f"{len(sweep.runs)} runs in {runs_root() / sweep.name}\n{said}")
        return 0
    for run in stages.stage1:
        line(run)
    out.write(f"stage 1: {len(stages.stage1)} runs\n")
    for name, runs in planned:
        out.write(f"stage 2 of {stages.choice_line(name)}\n")
        for run in runs:
            line(run)
    known = sum(len(runs) for _, runs in planned)
    unknown = stages.stage2_total - known
    out.write(f"stage 2: {stages.stage2_total} runs" + (f", {unknown} of them at a value chosen when their variant's "
              f"stage 1 has finished ({len(stages.variants) - len(planned)} of {len(stages.variants)} variants)"
              if unknown else "") + "\n")
    out.write(f"{len(stages.stage1) + stages.stage2_total} runs in {runs_root() / sweep.name} "
              f"({stages.describe()})\n{said}")
    return 0
