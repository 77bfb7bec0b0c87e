"""`ablate sweep NAME --executor slurm|local`: the sweep's runs as submitit jobs, each exactly once.

The runs not finished yet go out as one job array, `--chunk` of them per job (each job pays the ~6 s
import of torch, Lightning and W&B once), at most `--max-jobs` at once. A job trains its runs one after
the other in its own process (`run_chunk`), through `ablate.train.train`, so the run directories, their
ids and the skip/resume/lock rules are the local runner's.

"Done" is read from each run's own summary.json, never from submitit or the scheduler (without slurmdbd
there is no sacct; a job killed before it wrote its result is seen only as gone from squeue). The driver
looks at the queue (one squeue call for all its arrays) and, as soon as one job is gone, at that job's
runs alone: each is finished (completed, diverged), failed (its exception is in summary.json: reported,
retried by the next command), or unfinished (interrupted by SIGTERM: preempted, timed out, scancel; or
its job died). An unfinished run is submitted again at once, not when the rest of its array has ended,
at most `--retries` times, and resumes from its last.ckpt; with `--max-jobs` the new job waits for room
under the cap, counting every array's queued and running tasks. A tuned sweep's stage 2 runs are
submitted as soon as their variant's stage 1 has finished.

A job of GPUs (`--gpus-per-job G`) trains G x `--runs-per-gpu N` runs of its chunk at once (the chunk is
G x N runs unless `--chunk` says otherwise): the local runner inside the job (`run_packed`), each run its
own process with its slot's CUDA_VISIBLE_DEVICES, the job's CPUs shared out between them. The tutorial's
models use a sliver of a data-centre GPU; one run per job would leave most of it idle.

`--executor local` runs the same jobs as processes on this machine (submitit's LocalExecutor), with no
scheduler: what the tests of this module run where SLURM is not installed. (Its jobs all see GPUs
0..G-1: submitit's local executor does not share GPUs out between concurrent jobs.)
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TextIO

from ..fileio import atomic_write
from ..rundir import FINISHED, read_summary, runs_root
from . import runner as R
from .spec import Run, Sweep, SweepError

EXECUTORS = ("here", "local", "slurm")
JOBS_FOLDER = ".submitit"  # under the runs folder: each job's pickles and log (<runs>/.submitit/<sweep>/)
LEDGER = "jobs.json"  # in the jobs folder: every array a driver submitted, with its runs (adopted by the next)
DRIVER_LOCK = "driver.lock"  # in the jobs folder: held by the command driving the sweep
POLL_S = 1.0  # the first wait between two looks at the jobs (squeue, and the runs' summary.json files)
MAX_POLL_S = 5.0  # the wait doubles while nothing changes, up to this: one squeue call per driver per 5 s
POLL_ENV = "ABLATE_POLL_MAX_S"  # sets MAX_POLL_S (between POLL_S and 60): a private cluster may be asked more often
DRIVER_ENV = "ABLATE_DRIVER_LOCK"  # in a SLURM job: the driver lock of the command that submitted it
REQUEUES_ENV = "ABLATE_REQUEUES"  # in a SLURM job: how often it may requeue itself where that command is gone


def max_poll_s() -> float:
    """MAX_POLL_S, or $ABLATE_POLL_MAX_S where it is a number of seconds from POLL_S to 60."""
    try:
        value = float(os.environ.get(POLL_ENV, ""))
    except ValueError:
        return MAX_POLL_S
    return min(60.0, max(POLL_S, value)) if value == value else MAX_POLL_S
SAY_EVERY_S = 30.0  # a progress line at least this often while nothing changes
SQUEUE_TRIES = 30  # squeue failing this many times in a row (a second apart) stops the command


class SchedulerGone(RuntimeError):
    """The scheduler stopped answering while jobs ran: the command stops (exit 1), the jobs may go on."""


@dataclass(frozen=True)
class Options:
    executor: str = "here"
    partition: str | None = None
    time: int = 60  # the job's time limit (sbatch --time), minutes
    cpus_per_job: int = 1  # sbatch --cpus-per-task: also each run's torch threads
    gpus_per_job: int = 0  # sbatch --gpus-per-node
    chunk: int = 1  # runs per job
    max_jobs: int | None = None  # jobs at once (the array's %N; local: processes at once)
    retries: int = 2  # how often an unfinished run is submitted again
    account: str | None = None  # sbatch --account
    qos: str | None = None  # sbatch --qos
    mem: str | None = None  # sbatch --mem: a job's host memory (8G, 16000M)
    constraint: str | None = None  # sbatch --constraint: node features
    runs_per_gpu: int = 1  # runs at once on each of a job's GPUs (the local runner's --runs-per-gpu)
    retrain_stale: bool = False  # --retrain-stale (the local runner's flag too): finished runs of other code again

    @property
    def slots(self) -> int:
        """Runs a job trains at once: one without GPUs, else G GPUs x N runs per GPU."""
        return max(1, self.gpus_per_job * self.runs_per_gpu)

    @property
    def at_once(self) -> int:
        """Runs a job trains at once: its slots, or its chunk where that is smaller."""
        return max(1, min(self.slots, self.chunk))  # (a chunk < 1 is refused by `check`)

    @property
    def threads(self) -> int:
        """Each run's torch threads: the job's CPUs shared out between the runs it trains at once."""
        return max(1, self.cpus_per_job // self.at_once)


def local_cap(options: Options) -> int:
    """--executor local's jobs at once without --max-jobs: one per core, each core taken by one run; one job
    when they ask for GPUs (submitit's local executor gives every job the same GPUs 0..G-1)."""
    if options.gpus_per_job:
        return 1
    return max(1, R.cpu_count() // options.at_once)


def check(options: Options, dry_run: bool = False) -> None:
    """SweepError (exit 2, one line) for options that cannot work, before anything is submitted."""
    for name, value, low in (("--time", options.time, 1), ("--cpus-per-job", options.cpus_per_job, 1),
                             ("--gpus-per-job", options.gpus_per_job, 0), ("--chunk", options.chunk, 1),
                             ("--max-jobs", options.max_jobs, 1), ("--retries", options.retries, 0)):
        if value is not None and value < low:
            raise SweepError(f"{name}={value} is not allowed; expected an integer >= {low}")
    if options.runs_per_gpu > 1 and not options.gpus_per_job:
        raise SweepError(f"--runs-per-gpu {options.runs_per_gpu} packs runs onto a job's GPUs, but the jobs ask for "
                         "none; add --gpus-per-job G (or drop --runs-per-gpu)")
    if options.mem is not None and not re.fullmatch(r"\d+[KMGT]?", options.mem):
        raise SweepError(f"--mem {options.mem}: not a memory size; write it as sbatch does, e.g. 8G or 16000M (a run "
                         "of the tutorial's models peaks at about 1.3 GB, times the runs a job trains at once)")
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise SweepError(f"--executor {options.executor} needs submitit, which is not installed; "
                         "pip install '.[slurm]' in ablate's checkout (or use --executor here)") from None
    if options.executor == "slurm" and not dry_run and not shutil.which("sbatch"):
        raise SweepError("--executor slurm needs SLURM's sbatch and squeue, which are not on PATH here; run it on "
                         "the cluster's login node (or use --executor local or here)")
    if options.executor == "slurm" and not dry_run:
        limits, default = partition_limits()
        if options.partition and limits and options.partition not in limits:
            raise SweepError(f"--partition {options.partition}: the cluster has no such partition; choose one of "
                             f"{', '.join(limits)}")
        where = options.partition or default
        limit = limits.get(where) if where else None
        if limit is not None and options.time > limit:
            raise SweepError(f"--time {options.time}: partition {where}'s time limit is {limit} minutes, so SLURM would "
                             f"leave the jobs pending forever (PartitionTimeLimit); use --time {limit} or less (an "
                             "interrupted run resumes in the next job) or another --partition")


def minutes(text: str) -> int | None:
    """A SLURM time limit as sinfo prints it ([days-]hours:minutes:seconds, minutes:seconds, or minutes) in
    whole minutes, rounded down; None for infinite or unknown."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)|(\d+)", text.strip())
    if not m:
        return None
    if m[5]:
        return int(m[5])
    days, hours, mins = (int(g) if g else 0 for g in m.groups()[:3])  # seconds are rounded away
    if m[2] is None:  # minutes:seconds
        hours, mins = 0, int(m[3])
    return days * 1440 + hours * 60 + mins


def partition_limits() -> tuple[dict[str, int | None], str | None]:
    """({partition: its time limit in minutes, None if infinite}, the default partition's name), from sinfo
    (which marks the default with *); ({}, None) when sinfo does not answer."""
    out = subprocess.run(["sinfo", "-h", "-o", "%P %l"], capture_output=True, text=True)
    limits: dict[str, int | None] = {}
    default = None
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        name, _, limit = line.strip().partition(" ")
        if name.endswith("*"):
            name = default = name[:-1]
        limits[name] = minutes(limit)
    return limits, default


def check_runs(sweep: Sweep) -> None:
    """A job runs one process: runs of several devices or nodes need srun's tasks (docs/scaling-out.md). A job
    trains its runs to their end: early termination, which holds a variant's runs at each band, is the local
    runner's (inside one allocation: `srun ablate sweep FILE`)."""
    if sweep.early is not None:
        raise SweepError(f"{sweep.path}: early_terminate is applied by the local runner only (it holds a variant's "
                         "runs at each band), and the jobs of --executor slurm|local would train every run to its end; "
                         f"run `ablate sweep {sweep.path}` inside one allocation (docs/scaling-out.md), or remove it")
    for run in sweep.runs:
        t = run.cfg.trainer
        if t.devices != "1" or t.num_nodes != 1:
            raise SweepError(f"run {run.index} ({run.label()}) asks for trainer.devices={t.devices} "
                             f"trainer.num_nodes={t.num_nodes}, but a job of --executor slurm|local trains one "
                             "process; set trainer.devices=1 or use --executor here (or srun ablate train)")


def items(run: Run) -> list[str]:
    """The run's command line (key=value for every key), which rebuilds exactly its configuration."""
    return R.worker_command(run)[3:]


def _executor(options: Options, folder: Path, name: str, jobs: int):
    import submitit

    if options.executor == "local":
        executor = submitit.LocalExecutor(folder)
        executor.update_parameters(timeout_min=options.time, gpus_per_node=options.gpus_per_job)
        return executor
    executor = submitit.SlurmExecutor(folder, max_num_timeout=0)  # requeueing is ablate's (resume checks)
    executor.update_parameters(job_name=f"ablate-{name}", time=options.time, cpus_per_task=options.cpus_per_job,
                               signal_delay_s=warning_s(options.time),
                               ntasks_per_node=1, stderr_to_stdout=True,
                               array_parallelism=options.max_jobs or 256,
                               **({"partition": options.partition} if options.partition else {}),
                               **{k: v for k in ("account", "qos", "mem", "constraint") if (v := getattr(options, k))},
                               **({"gpus_per_node": options.gpus_per_job} if options.gpus_per_job else {}))
    return executor


def warning_s(minutes_: int) -> int:
    """Seconds before a job's time limit SLURM sends SIGUSR2 (sbatch --signal=USR2@S): 90, or a quarter of a
    short job's time (submitit's fixed 90 s came 8 s into a 1-minute job, before any run had started)."""
    return max(5, min(90, minutes_ * 60 // 4))


def sbatch_lines(options: Options, folder: Path, name: str, jobs: int) -> list[str]:
    """The #SBATCH lines of one stage's array of `jobs` jobs (submitit's own script, as sbatch gets it)."""
    from submitit.slurm.slurm import _make_sbatch_string

    params = dict(_executor(options, folder, name, jobs).parameters)
    params.pop("max_num_timeout", None)
    script = _make_sbatch_string(command="python -m submitit.core._submit", folder=folder, map_count=jobs, **params)
    return [line for line in script.splitlines() if line.startswith("#SBATCH")]


def job_env(options: Options, folder: Path | None = None) -> dict[str, str]:
    """What every job's process sets before it trains: the runs folder (absolute), no progress bar, threads;
    in a SLURM job the driver lock in the jobs `folder` and --retries, for `requeue_in_place`."""
    threads = str(options.cpus_per_job)
    requeue = {DRIVER_ENV: str(folder.resolve() / DRIVER_LOCK), REQUEUES_ENV: str(options.retries)} \
        if folder is not None and options.executor == "slurm" else {}
    from .worker import RETRAIN_ENV

    retrain = {RETRAIN_ENV: "stale"} if options.retrain_stale else {}  # train asks each run under its lock
    return {"ABLATE_RUNS_DIR": str(runs_root().resolve()), "ABLATE_PROGRESS": "0", "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads, "WANDB_SILENT": os.environ.get("WANDB_SILENT", "true"), **requeue, **retrain}


def requeue_in_place() -> str | None:
    """In a SLURM job whose runs were just interrupted (preempted, timed out, signalled): where the command that
    submitted it is gone (its driver lock is free: killed, its login shell closed), nobody would submit the runs
    again, so the job requeues itself (`scontrol requeue`) and its runs resume from their checkpoints when SLURM
    starts it again, through the same checks as a submission. Only a job SLURM still lists as RUNNING: one
    cancelled (scancel, the driver's own on Ctrl-C, which marks it CANCELLED first) is let go. At most --retries times (SLURM_RESTART_COUNT);
    the same command run later adopts the job. Returns the line to say; None where the driver is alive (it
    submits the runs again) or the job is not SLURM's."""
    job, lock = os.environ.get("SLURM_JOB_ID"), os.environ.get(DRIVER_ENV)
    if not job or not lock:
        return None
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return None  # the driver holds it
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=60)
    if state.stdout.strip() != "RUNNING":  # cancelled (the driver's Ctrl-C, the user's scancel), ending: let it go
        return None
    restarts, allowed = int(os.environ.get("SLURM_RESTART_COUNT") or 0), int(os.environ.get(REQUEUES_ENV) or 0)
    if restarts >= allowed:
        return (f"ablate: the command that submitted job {job} is gone and the job was requeued {restarts} time(s) "
                "(--retries): not again; run the same command to submit its runs")
    done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return f"ablate: job {job} not requeued ({done.stderr.strip() or done.returncode}); run the same command " \
               "to submit its runs"
    return (f"ablate: the command that submitted job {job} is gone: requeued in place ({restarts + 1} of {allowed}); "
            "its runs resume when SLURM starts it again")


def run_chunk(commands: list[list[str]], env: dict[str, str], threads: int, runs_per_gpu: int = 1,
              gpus: int = 0) -> list[str]:
    """In the job: train each configuration in turn (finished ones are skipped by `train` itself). SIGTERM
    (preemption, time limit, scancel) and SIGUSR2 (submitit's warning before the time limit) stop it: the
    run is recorded `interrupted` and the process exits 143, to be submitted again and resume. A job of
    `gpus` GPUs that trains more than one run at once (Options.slots) runs `run_packed` instead."""
    os.environ.update(env)
    if gpus * runs_per_gpu > 1 and len(commands) > 1:
        return run_packed(commands, runs_per_gpu, gpus)
    from .. import config as C
    from ..train import Interrupted, RunBusy, train
    from .worker import RETRAIN_ENV

    def interrupt(signum, frame):
        raise Interrupted(signum)

    for signum in (signal.SIGTERM, signal.SIGUSR2):  # submitit's own handlers would ignore SIGTERM; while a run
        # trains, SIGUSR2 saves its place first (train._warning_saves)
        signal.signal(signum, interrupt)
    statuses = []
    for command in commands:
        cfg = C.build(C.parse_overrides(command))
        if cfg.trainer.threads is None:
            cfg = C.build({"trainer.threads": threads}, base=cfg)
        try:
            statuses.append(train(cfg, log=_chunk_log(R.run_dir(_run_of(cfg))),
                                  retrain=os.environ.get(RETRAIN_ENV) or None)["status"])
        except RunBusy as err:  # another process trains it: the driver reads what it makes of it
            print(f"ablate: {err}", flush=True)
            statuses.append("busy")
        except Interrupted as stop:
            print(f"ablate: {R.run_dir(_run_of(cfg))} interrupted by {signal.Signals(stop.signum).name}; it resumes "
                  "when submitted again", flush=True)
            _say_requeue()
            raise
        except Exception as err:  # recorded as failed by train: the next configuration still runs
            print(f"ablate: {type(err).__name__}: {err}", flush=True)
            statuses.append("failed")
    return statuses


def _say_requeue() -> None:
    line = requeue_in_place()
    if line:
        print(line, flush=True)


def _chunk_log(folder: Path):
    """A run's lines in a chunk job: to the job's log, and appended to the run's own train.log as the local
    runner's runs have it (never through a link: worker.open_log)."""
    from .worker import LOG, open_log

    def log(line: str) -> None:
        print(line, flush=True)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd = open_log(folder / LOG)
        except Exception:  # the job's log has it; a run folder that cannot be written fails the run elsewhere
            return
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    return log


def run_packed(commands: list[list[str]], runs_per_gpu: int, gpus: int) -> list[str]:
    """In a job of GPUs: the chunk's runs through the local runner, `runs_per_gpu` at once on each GPU the
    job sees, each in its own process (one crash or out-of-memory error ends one run), with the runner's
    exactly-once rules. SIGTERM stops every run at once, SIGUSR2 (the warning ahead of the time limit) lets each
    save its place at its next step first and starts no other (train._warning_saves); either way the runs are
    recorded `interrupted` and the job exits 143.

    SLURM signals every process of the job, not only this one: the forkserver and its runs ignore SIGUSR2
    (worker.forkserver; by default it would end them unrecorded), and a run ends through this runner's
    SIGTERM or its own (`train` takes SIGTERM itself: recorded `interrupted`)."""
    from .. import config as C
    from ..rundir import Interrupted
    from . import worker

    visible = R.visible_gpus()
    if not visible:
        raise RuntimeError(f"the job asked for {gpus} GPU(s) but sees none (CUDA_VISIBLE_DEVICES unset and "
                           "torch counts no device); its runs were not started and are submitted again")
    runs = [replace(_run_of(C.build(C.parse_overrides(command))), index=i + 1) for i, command in enumerate(commands)]
    sweep = Sweep(name=runs[0].cfg.run.group, path=Path(), method="grid", spec={}, runs=runs, varying=[])
    worker.forkserver()  # started before the handlers: it and its runs ignore both signals
    runner = R.Runner(sweep, threads=max(r.cfg.trainer.threads or 1 for r in runs), gpus=visible,
                      runs_per_gpu=runs_per_gpu, stream=sys.stdout,
                      retrain_stale=os.environ.get(worker.RETRAIN_ENV) == "stale")
    signal.signal(signal.SIGTERM, R._raise_interrupt)  # SIGTERM: the runner stops its runs at once
    signal.signal(signal.SIGUSR2, lambda signum, frame: runner.drain(signum))  # the warning: they save first
    report = runner.run()
    if report.interrupted:
        print(f"ablate: {len(report.outcomes.get('interrupted', []))} run(s) of this job interrupted (preempted, "
              "timed out or cancelled); they resume when submitted again", flush=True)
        _say_requeue()
        raise Interrupted(signal.SIGTERM)
    return [_status(run) or "failed" for run in runs]


class _JobRef:
    """A job known by its id alone (an array an earlier command submitted): what `_poll` reads of a job, and
    how many of its tasks the last look listed."""

    def __init__(self, job_id: str, tasks: int = 1):
        self.job_id = job_id
        self.tasks = tasks


def _run_of(cfg) -> Run:
    from .. import config as C

    return Run(index=0, params={}, cfg=cfg, run_id=C.run_id(cfg))


def _status(run: Run) -> str | None:
    return (read_summary(R.run_dir(run)) or {}).get("status")


class Dispatch:
    """The rounds of one `ablate sweep --executor slurm|local` command."""

    def __init__(self, sweep: Sweep, options: Options, stream: TextIO):
        R.check_runs_folder(sweep)
        self.sweep, self.options, self.stream = sweep, options, stream
        self.folder = runs_root().resolve() / JOBS_FOLDER / sweep.name
        self.tries: dict[str, int] = {}  # run id -> submissions by this command
        self.job_ids: list[str] = []  # the arrays (local: jobs) this command submitted or adopted
        self.live: list[tuple[Any, list[Run]]] = []  # each job (SLURM: array task) not ended yet, and its runs
        self.queued: list[list[Run]] = []  # chunks waiting for room under the cap
        self.submitted = self.finished = 0  # jobs submitted; runs this command saw finish
        self.stale: set[str] = set()  # --retrain-stale: runs finished by other code, retrained here (until they end)
        self._shown: tuple | None = None
        self._said = time.monotonic()

    def say(self, line: str) -> None:
        self.stream.write(f"ablate sweep {self.sweep.name}: {line}\n")
        self.stream.flush()

    def _hold(self) -> None:
        """The sweep's driver lock (released by the OS however this process ends, kill -9 included): a second
        command driving the same sweep would submit its pending runs again."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = os.open(self.folder / DRIVER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock)
            holder = (self.folder / (DRIVER_LOCK + ".pid")).read_text().strip() if \
                (self.folder / (DRIVER_LOCK + ".pid")).is_file() else "?"
            raise SweepError(f"another command is driving sweep {self.sweep.name} ({holder}); let it finish, or stop it "
                             "and run this again: its queued jobs are adopted, not submitted twice") from None
        atomic_write(self.folder / (DRIVER_LOCK + ".pid"), f"pid {os.getpid()} on {os.uname().nodename}\n")

    def _ledger(self) -> dict[str, list[str]]:
        try:
            return json.loads((self.folder / LEDGER).read_text())
        except (OSError, ValueError):
            return {}

    def _record(self, ids: list[str], runs: list[Run]) -> None:
        ledger = self._ledger()
        for job_id in ids:
            ledger[job_id] = [r.run_id for r in runs]
        atomic_write(self.folder / LEDGER, json.dumps(ledger, indent=1) + "\n")

    def _adopt(self) -> list[Run]:
        """The arrays an earlier command submitted that are still queued or running (a driver killed, a login
        shell gone): waited for as this command's own, their runs never submitted twice. Returns their runs."""
        if self.options.executor != "slurm":
            return []
        ledger = self._ledger()
        if not ledger:
            return []
        listed, _ = self._look([_JobRef(job_id) for job_id in ledger])
        alive = [job_id for job_id in ledger if _listed(job_id, listed)]
        atomic_write(self.folder / LEDGER, json.dumps({j: ledger[j] for j in alive}, indent=1) + "\n")
        if not alive:
            return []
        known = {r.run_id: r for r in self.sweep.runs}
        runs = []
        for job_id in alive:  # its runs that finished before this command are counted as such already
            mine = [known[i] for i in ledger[job_id] if i in known and _status(known[i]) not in FINISHED]
            self.live.append((_JobRef(job_id, sum(1 for i in listed if _listed(job_id, {i}))), mine))
            runs += mine
        self.job_ids += alive
        self.say(f"adopting SLURM job array {' '.join(alive)} of an earlier command ({len(runs)} runs): waiting for "
                 "it instead of submitting its runs again")
        for run in runs:
            self.tries[run.run_id] = self.tries.get(run.run_id, 0) + 1
        return runs

    def run(self) -> R.Report:
        self._hold()
        stages = R.Stages(self.sweep) if self.sweep.tune is not None else None
        first = stages.stage1 if stages else self.sweep.runs
        report = R.Report(total=len(first) + (stages.stage2_total if stages else 0), stages=stages)
        started = time.monotonic()
        if stages:
            stages.redo = self.stale
        if self.options.retrain_stale:
            self.stale |= R.stale_runs(first)
        if stages:
            self.say(stages.describe())
        todo, before = self._take(first, report)
        self.say(f"{report.total} runs, {sum(report.skipped.values())} finished before, {len(todo)} to run as "
                 f"{self.options.executor} jobs of {self.options.chunk} run(s){packing(self.options)} -> "
                 f"{runs_root() / self.sweep.name}")
        for line in R.code_notes(before, [r for r in todo if r.run_id in self.stale], len(todo)):
            self.say(line)
        old_term = signal.signal(signal.SIGTERM, R._raise_interrupt) if R._main_thread() else None
        waiting: list[Run] = []  # trained by another process (their lock held): waited for, never submitted
        try:
            adopted = self._adopt()
            todo = [r for r in todo if r not in adopted]
            pause, replan = POLL_S, True
            while True:
                for name, runs in stages.plan() if stages and replan else []:
                    self.say(f"stage 2 of {stages.choice_line(name)}")
                    flying = {r.run_id for _, rs in self.live for r in rs} | {r.run_id for c in self.queued for r in c}
                    if self.options.retrain_stale:
                        self.stale |= R.stale_runs([r for r in runs if r.run_id not in flying])
                    new, kept = self._take([r for r in runs if r.run_id not in flying and r not in waiting], report)
                    todo += new  # (a run in an adopted array is waited for, not submitted again)
                    for line in R.code_notes(kept, [r for r in new if r.run_id in self.stale], len(new)):
                        self.say(line)
                busy = [r for r in todo if R.locked(r)]
                if busy:
                    self.say(f"{len(busy)} run(s) are being trained by another process (their lock is held); "
                             "waiting for them instead of submitting them twice")
                    waiting += busy
                self._queue([r for r in todo if r not in busy])
                self._fill()
                ended, changed = self._poll()
                todo = [r for runs in ended for r in self._after(runs, report)]
                replan = bool(ended)  # a stage 2 is decided only when a stage-1 run has ended
                for run in [r for r in waiting if not R.locked(r)]:
                    waiting.remove(run)
                    replan = True
                    self.stale.discard(run.run_id)  # the other process's lock held it: what it made counts
                    if _status(run) in FINISHED or _status(run) == "failed":
                        report.elsewhere.setdefault(_status(run), []).append(run)
                    else:
                        todo.append(run)
                if ended or todo:
                    continue  # a retry, a stage 2 or the next queued chunk goes out at once
                if not (self.live or self.queued or waiting):
                    break
                pause = POLL_S if changed else min(max_poll_s(), 2 * pause)
                time.sleep(pause)
        except KeyboardInterrupt as stop:
            report.interrupted = True
            report.signal = getattr(stop, "signum", signal.SIGINT)
            self.say(f"interrupted; cancelling jobs {' '.join(self.job_ids)} (their runs resume next time)")
            self._cancel()
        except SchedulerGone as err:
            report.stopped = str(err)
        finally:
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)
            os.close(self._lock)  # the driver lock, released
        report.wall_s = time.monotonic() - started
        return report

    def _queue(self, runs: list[Run]) -> None:
        """Runs to submit, `--chunk` to a job, each counted as one more submission."""
        chunk = self.options.chunk
        self.queued += [runs[i:i + chunk] for i in range(0, len(runs), chunk)]
        for run in runs:
            self.tries[run.run_id] = self.tries.get(run.run_id, 0) + 1

    def _cap(self) -> int | None:
        """Jobs at once: --max-jobs; local without it one per core (local_cap); SLURM without it no cap."""
        if self.options.max_jobs:
            return self.options.max_jobs
        return local_cap(self.options) if self.options.executor == "local" else None

    def _fill(self) -> None:
        """Submit the queued chunks there is room for under the cap (counting the jobs alive, the queued and
        running tasks of earlier arrays included): SLURM takes them all as one array throttled to the room
        left (its %N), the local executor as many processes as there is room for."""
        cap = self._cap()
        room = len(self.queued) if cap is None else cap - self.alive
        if not self.queued or room <= 0:
            return
        # nothing in flight on SLURM: every chunk in one array, SLURM keeping it to the cap (it goes on without
        # the driver); else as many chunks as there is room for, so that the cap holds over all the arrays
        everything = self.options.executor == "slurm" and (cap is None or not self.live)
        wave = self.queued if everything else self.queued[:room]
        self.queued = self.queued[len(wave):]
        n = len(wave)
        executor = _executor(self.options, self.folder, self.sweep.name, n)
        if self.options.executor == "slurm":
            executor.update_parameters(array_parallelism=room if cap is not None else 256)
        env = job_env(self.options, self.folder)
        try:
            jobs = executor.map_array(run_chunk, [[items(r) for r in c] for c in wave], [env] * n,
                                      [self.options.threads] * n, [self.options.runs_per_gpu] * n,
                                      [self.options.gpus_per_job] * n)
        except Exception as err:  # sbatch refused the array (a limit of the partition, the account)
            text = [line for line in str(err).splitlines() if line.strip()]
            said = text[-1] if text else type(err).__name__
            runs = sum(len(c) for c in wave)
            if "array" in str(err).lower() and n > 1:  # MaxArraySize (default 1001): fewer, larger jobs
                raise SweepError(f"the scheduler refused an array of {n} jobs: {said}; raise --chunk (now "
                                 f"{self.options.chunk}) so that fewer jobs carry the {runs} runs, e.g. --chunk "
                                 f"{math.ceil(runs / 1000)}") from None
            raise SweepError(f"the scheduler refused the jobs: {said}; fix the job options (--partition, --time, "
                             "--cpus-per-job, --gpus-per-job, --mem, --account, --qos, --constraint)") from None
        ids = sorted({str(j.job_id).split("_")[0] for j in jobs})
        self.job_ids += ids
        self.live += list(zip(jobs, wave))
        self.submitted += n
        if self.options.executor == "slurm":
            self._record(ids, [r for c in wave for r in c])
        where = f"SLURM job array {' '.join(ids)}" if self.options.executor == "slurm" else \
            f"local jobs {' '.join(str(j.job_id) for j in jobs)}"
        self.say(f"submitted {sum(len(c) for c in wave)} runs as {n} jobs: {where}"
                 + (f", at most {cap} at once" if self.options.max_jobs else "") + f" (logs: {self.folder})")

    @property
    def alive(self) -> int:
        """Jobs (array tasks) queued or running, as the last look saw them."""
        return sum(getattr(job, "tasks", 1) for job, _ in self.live)

    def _poll(self) -> tuple[list[list[Run]], bool]:
        """One look at the jobs: the runs of each job that has ended (each goes on as soon as its own job is
        gone, not when the whole array is), and whether anything changed since the last look. A line when the
        counts or SLURM's reasons for pending jobs change (or every 30 s). A reason SLURM never gets past
        (NEVER) cancels the jobs and stops the command in one line naming the fix."""
        if not self.live:
            return [], False
        listed, pending = self._look([job for job, _ in self.live])
        stuck = sorted({reason for reason in pending if reason in NEVER})
        if stuck:
            self._cancel()
            raise SweepError(f"SLURM will not start the jobs ({stuck[0]}): {NEVER[stuck[0]]}; the jobs "
                             f"{' '.join(self.job_ids)} were cancelled and nothing ran")
        ended, live = [], []
        for job, runs in self.live:
            gone = (job.done() if not isinstance(job, _JobRef) else False) if listed is None else \
                not _listed(str(job.job_id), listed)
            if gone:
                ended.append(runs)
            else:
                live.append((job, runs))
                if listed is not None and isinstance(job, _JobRef):  # an adopted array: its tasks listed
                    job.tasks = sum(1 for i in listed if _listed(str(job.job_id), {i}))
        self.live = live
        counts = (len(ended), self.alive, tuple(sorted(pending.items())))
        changed = counts != self._shown
        if changed or time.monotonic() - self._said > SAY_EVERY_S:
            why = ", ".join(f"{n} {reason}" for reason, n in sorted(pending.items()))
            self.say(f"{self.alive} of {max(self.submitted, self.alive)} jobs queued or running"
                     + (f" (pending: {why})" if why else "")
                     + f"; {self.finished + sum(len(rs) for rs in ended)} runs finished")
            self._shown, self._said = counts, time.monotonic()
        return ended, changed

    def _look(self, jobs: list) -> tuple[set[str] | None, dict[str, int]]:
        """The array tasks squeue lists (queued or running) of these jobs' arrays, and of the pending ones how
        many wait for each reason SLURM gives (squeue's %r; "None" left out). None for local jobs, which are
        asked one by one (job.done())."""
        if self.options.executor != "slurm":
            return None, {}
        ids = sorted({str(j.job_id).split("_")[0] for j in jobs})
        for _ in range(SQUEUE_TRIES):  # a busy slurmctld answers late or not at all now and then
            out = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T|%r", "-j", ",".join(ids)], capture_output=True,
                                 text=True)
            if out.returncode == 0:
                return queue_state(out.stdout)
            if "Invalid job id" in out.stderr:  # every job has ended and been purged
                return set(), {}
            time.sleep(POLL_S)
        raise SchedulerGone(f"squeue failed {SQUEUE_TRIES} times: {out.stderr.strip() or out.returncode}; the jobs "
                         f"{' '.join(ids)} may still run: run the same command again once the cluster answers")

    def _after(self, todo: list[Run], report: R.Report) -> list[Run]:
        """Sort an ended job's runs by what their summary.json says; the unfinished ones go again."""
        again = []
        for run in todo:
            status = _status(run)
            if run.run_id in self.stale and R.stale_runs([run]):
                status = None  # its job ended before it had retrained it
            if status in FINISHED or status == "failed":
                self.stale.discard(run.run_id)
                report.outcomes.setdefault(status, []).append(run)
                self.finished += 1
            elif self.tries[run.run_id] <= self.options.retries:
                again.append(run)
            else:
                report.outcomes.setdefault("interrupted", []).append(run)
                self.say(f"{run.run_id} is still {status or 'not started'} after {self.tries[run.run_id]} submissions "
                         "(--retries); the same command submits it again")
        if again:
            self.say(f"{len(again)} run(s) interrupted or killed before they finished; submitting them again "
                     "(they resume from last.ckpt)")
        return again

    def _take(self, runs: list[Run], report: R.Report) -> tuple[list[Run], list[dict]]:
        """The runs to submit among `runs`, and the summaries of those kept: finished before and not to be retrained,
        each counted as skipped by its status (each run's summary read once: one that ends meanwhile is counted
        once, as the runner's `take` does)."""
        todo, kept = [], []
        for run in runs:
            summary = read_summary(R.run_dir(run)) or {}
            if summary.get("status") in FINISHED and run.run_id not in self.stale:
                kept.append(summary)
                report.skipped[summary["status"]] = report.skipped.get(summary["status"], 0) + 1
            else:
                todo.append(run)
        return todo, kept

    def _cancel(self) -> None:
        if self.options.executor == "slurm" and self.job_ids:
            subprocess.run(["scancel", *self.job_ids], capture_output=True)


# SLURM's reasons for a pending job that it will never get past by itself, and the fix in ablate's flags
# (squeue's %r; slurm.schedmd.com/job_reason_codes.html). Any other reason (Priority, Resources,
# JobArrayTaskLimit, ...) is shown in the progress line and waited for.
NEVER = {
    "PartitionTimeLimit": "--time is over the partition's time limit; lower --time (an interrupted run resumes in "
                          "the next job) or choose another --partition",
    "PartitionNodeLimit": "a job asks for more nodes than the partition allows; choose another --partition",
    "QOSMaxWallDurationPerJobLimit": "--time is over the QOS's time limit; lower --time or choose another --qos",
    "QOSMaxCpuPerJobLimit": "--cpus-per-job is over the QOS's limit; lower it or choose another --qos",
    "QOSMaxGRESPerJob": "--gpus-per-job is over the QOS's limit; lower it or choose another --qos",
    "AccountNotAllowed": "the account may not use this partition; choose another --account or --partition",
    "QOSNotAllowed": "the QOS may not be used here; choose another --qos or --partition",
    "InvalidAccount": "no such account for this user; check --account (sacctmgr show assoc user=$USER)",
    "InvalidQOS": "no such QOS for this user; check --qos (sacctmgr show assoc user=$USER)",
    "BadConstraints": "no node has the features asked for; check --constraint (sinfo -o '%N %f')",
}  # not PartitionConfig ("not available now"): SLURM 22.05 gives it for a moment after the submission, then the real one


def queue_state(squeue_out: str) -> tuple[set[str], dict[str, int]]:
    """(the job ids listed, {reason: pending jobs}) from squeue's `%i|%T|%r` lines (one per array task, `123_4`)."""
    lines = [line.split("|") for line in squeue_out.splitlines() if line.strip()]
    pending: dict[str, int] = {}
    for fields_ in lines:
        if len(fields_) == 3 and fields_[1].strip() == "PENDING" and fields_[2].strip() not in ("None", "(null)", ""):
            reason = fields_[2].strip()
            pending[reason] = pending.get(reason, 0) + 1
    return {fields_[0].strip() for fields_ in lines}, pending


def _listed(job_id: str, listed: set[str]) -> bool:
    """Whether squeue listed the job: an array task (`123_4`) by its id, an array (`123`) by any of its tasks."""
    return job_id in listed if "_" in job_id else any(i == job_id or i.startswith(job_id + "_") for i in listed)


def dry_run(sweep: Sweep, options: Options, out: TextIO) -> int:
    """The runs (as the local runner's --dry-run lists them), then the sbatch parameters of the first array."""
    code = R.dry_run(sweep, out, retrain_stale=options.retrain_stale)
    if options.executor == "slurm":
        stages = R.Stages(sweep) if sweep.tune is not None else None
        listed = stages.stage1 if stages else sweep.runs
        again = R.stale_runs(listed) if options.retrain_stale else set()
        todo = [r for r in listed if _status(r) not in FINISHED or r.run_id in again]
        jobs = max(1, math.ceil(len(todo) / options.chunk))
        folder = runs_root().resolve() / JOBS_FOLDER / sweep.name
        out.write(f"sbatch parameters of the first array ({len(todo)} runs, {jobs} jobs of {options.chunk}"
                  f"{packing(options)}):\n")
        for line in sbatch_lines(options, folder, sweep.name, jobs):
            out.write(line + "\n")
    return code


def packing(options: Options) -> str:
    """', N at once (G GPUs x R runs per GPU, T thread(s) each)' for a job of several slots, else ''."""
    if options.at_once == 1:
        return ""
    short = f" on {options.cpus_per_job} CPU(s): raise --cpus-per-job" if options.cpus_per_job < options.at_once else ""
    return (f", {options.at_once} at once ({options.gpus_per_job} GPU(s) x {options.runs_per_gpu} run(s) per GPU, "
            f"{options.threads} thread(s) each{short})")


# The job flags of `ablate sweep` (--time, --chunk, ...): Options' fields, their defaults the fields' own
# (--runs-per-gpu is the local runner's flag too)
FLAGS = {f.name: f.default for f in fields(Options) if f.name not in ("executor", "runs_per_gpu", "retrain_stale")}


def options_of(args: Any) -> Options:
    """Options from parsed arguments (None: the field's default; --chunk: as many runs as a job trains at
    once, at least the default)."""
    given = {k: v if (v := getattr(args, k)) is not None else FLAGS[k] for k in FLAGS}
    options = Options(executor=args.executor, runs_per_gpu=args.runs_per_gpu or 1,
                      retrain_stale=args.retrain_stale, **given)
    if args.chunk is None:
        options = replace(options, chunk=max(FLAGS["chunk"], options.slots))
    return options
