"""`ablate train`: one config -> one run directory (+ a W&B run), resumable and recorded exactly once.

config -> data + task -> Lightning Trainer -> run directory:
    config.yaml   the resolved config (every key, typed)
    metrics.csv   per-step and per-epoch metrics
    summary.json  status, final metrics under their logged names, parameter counts, wall time,
                  samples/s, provenance
    last.ckpt     model, optimiser, loops and RNG states (resume point)
    best.ckpt     the weights of the epoch with the best val/acc (run.keep_best)
    attempts/<n>/ the files of an earlier attempt, set aside when the run was trained again (--retrain)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import config as C
from . import ctrlc
from . import plugins as P
from .callbacks import (
    AtomicCheckpointIO,
    BestCheckpoint,
    Diverged,
    DivergenceGuard,
    LastCheckpoint,
    ModuleGradNorms,
    Paused,
    ProgressLines,
    RngState,
    RunCSVLogger,
    Throughput,
)
from .checkpoint import CheckpointError, fit_problem, load_checkpoint
from .limits import eval_chunk
from .rundir import (  # Interrupted, RunBusy: raised here (their home: rundir, which a job reads without torch)
    BEST,
    CKPT,
    CONFIG,
    FINISHED,
    METRICS,
    RETRAINING,
    SUMMARY,
    Interrupted,
    RunBusy,
    RunLock,
    check_run_dir,
    config_problem,
    json_problem,
    keep_attempt,
    metrics_problem,
    read_summary,
    retrains,
    run_dir_for,
    set_aside,
    write_config,
    write_json,
)
from .runfiles import RunFileError, read_metrics_rows


def recorded(err: BaseException) -> str | None:
    """What summary.json says after `train` was interrupted by `err` (SIGTERM, Ctrl-C): "interrupted",
    the status of a run that had already finished ("completed", "diverged": never downgraded), "" when
    the folder could not be written any more, or None when the interruption came before the run
    directory was touched (while the data and the model were being prepared)."""
    return getattr(err, "ablate_recorded", None)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises `Interrupted` wherever the run is (setup, training, probes, test). Lightning's
    own handler only sets a flag that its loops turn into a SystemExit with status 0 (and not at
    all outside `fit`); it calls this one after its own."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _cluster_environment():
    """Lightning's own environment where a launcher started this process as one of a run's ranks (torchrun;
    srun: the tasks of its step are the ranks). Inside a SLURM allocation but not one of several srun tasks
    (a batch script, `srun -n1`, where ablate's runner trains runs side by side): Lightning's plain
    environment, whose launcher starts the ranks > 0 on a free port of the run's own; Lightning would pick
    SLURM's by itself, whose port comes from the job id and is the same for every run of the job (issue 42:
    EADDRINUSE). Else None: Lightning's launcher starts the ranks > 0 (LOCAL_RANK, NODE_RANK)."""
    from lightning_fabric.plugins.environments import (
        LightningEnvironment,
        SLURMEnvironment,
        TorchElasticEnvironment,
    )

    quiet()  # SLURMEnvironment.detect() warns when srun exists but did not start this process
    if TorchElasticEnvironment.detect():
        return TorchElasticEnvironment()
    if SLURMEnvironment.detect():
        if int(os.environ.get("SLURM_STEP_NUM_TASKS", "1")) > 1:  # srun's tasks are the ranks; requeueing is
            return SLURMEnvironment(auto_requeue=False)  # ablate's, never Lightning's SIGUSR1 handler and hpc_ckpt
        return LightningEnvironment()
    return None


def is_ddp_child() -> bool:
    """A rank > 0 of a DDP run (Lightning's launcher, torchrun or srun started it): it must not write."""
    if os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("NODE_RANK", "0") != "0":
        return True
    env = _cluster_environment()
    return env is not None and env.global_rank() != 0


def launch_id() -> str:
    """The launch every rank of an externally started run shares (srun's job step, torchrun's run id), '' for
    none: rank 0 writes it into summary.json once it has taken stock, and the other ranks wait for it."""
    if os.environ.get("TORCHELASTIC_RUN_ID") and os.environ.get("RANK"):
        return f"torchrun:{os.environ['TORCHELASTIC_RUN_ID']}:{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    if os.environ.get("SLURM_STEP_ID") and int(os.environ.get("SLURM_NTASKS", "1")) > 1:  # a requeued job keeps
        restart = os.environ.get("SLURM_RESTART_COUNT", "0")  # its id and step: the restart count tells them apart
        return f"slurm:{os.environ.get('SLURM_JOB_ID')}.{os.environ['SLURM_STEP_ID']}.{restart}"
    return ""


LAUNCH_WAIT_S = 600  # a rank > 0 waits this long for rank 0 to take stock of the run directory


def _wait_for_rank0(run_dir: Path, launch: str, retrain: str | None) -> dict[str, Any] | None:
    """Until rank 0 of this launch has taken stock (summary.json names the launch): None; or the summary of
    a run that was finished before and is not retrained (rank 0 ends without training). RunBusy when rank 0
    never says."""
    deadline = time.monotonic() + LAUNCH_WAIT_S
    while time.monotonic() < deadline:
        summary = read_summary(run_dir) or {}
        if summary.get("launch") == launch and summary.get("status") == "running":  # this launch's, not an
            return None  # earlier one's of the same id (torchrun without --rdzv-id reuses "none")
        if summary.get("status") in FINISHED and not retrains(summary, retrain):
            return summary
        time.sleep(0.2)
    raise RunBusy(f"rank 0 of {launch} did not start {run_dir} within {LAUNCH_WAIT_S} s (its own error says why)")


def quiet() -> None:
    """Keep Lightning's advice out of run logs; real warnings still show."""
    import logging
    import warnings

    for name in ("pytorch_lightning", "lightning_fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for pattern in (
        r".*LeafSpec.*",
        r".*smaller than the logging interval.*",
        r".*does not have many workers.*",
        r".*Experiment logs directory.*",
        r".*Checkpoint directory .* exists and is not empty.*",
        r".*The `srun` command is available on your system but is not used.*",  # ablate launches, not srun
    ):
        warnings.filterwarnings("ignore", message=pattern)


def prepare(cfg: C.Config, init: InitFrom | None = None):
    """Everything that can fail on bad input, before anything is written: run.init_from's checkpoint (`init`, read
    here unless given), data, task, sizes. The task's model starts from the checkpoint's weights."""
    from .data import build_datamodule
    from .models.config import PLUGGED
    from .tasks import build_task

    init = init or read_init(cfg)  # before the data: a bad checkpoint is refused at once
    plugged = PLUGGED["arch"].get(cfg.model.arch)  # a plug-in's whole model, with its own data module or data.task's
    if plugged is not None and plugged.build.datamodule is not None:
        datamodule = plugged.build.datamodule(cfg, cfg.options(cfg.model.arch))
    else:
        datamodule = build_datamodule(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("fit")
    task = build_task(cfg, datamodule)  # initialised as without init_from: the RNG draws after it are the same
    if init is not None:
        init.load_into(task)
    return datamodule, task


@dataclass(frozen=True)
class InitFrom:
    """The checkpoint run.init_from names, loaded weights-only: its model's tensors (not the optimiser, the step
    or the task's metric states such as val/acc_best) and, for the summary's provenance, where they came from."""

    given: str  # run.init_from, as the messages name it
    path: Path  # the checkpoint file
    weights: dict[str, Any]  # the task's model.* tensors, without the prefix
    record: dict[str, Any]  # provenance: path, sha256, the run id and step of the run that wrote it

    def load_into(self, task) -> None:
        """The weights into `task.model`, or ConfigError (one line) when they do not fit the model it built."""
        if problem := fit_problem(self.weights, task.model.state_dict()):
            raise C.ConfigError(f"{self.given}: the model in {self.path} does not fit the one this config builds: "
                                f"{problem}; start from a run with the same model.* keys and data.task sizes")
        task.model.load_state_dict(self.weights)


def read_init(cfg: C.Config) -> InitFrom | None:
    """run.init_from's checkpoint: a file as it is, a run folder's last.ckpt once that run has completed (an
    unfinished run's would still change). ConfigError, one line, for anything else."""
    if cfg.run.init_from is None:
        return None
    given, path = f"run.init_from={cfg.run.init_from}", Path(cfg.run.init_from)
    fix = "give the folder of a completed `ablate train` run or a .ckpt file one wrote"
    if path.is_dir():
        status = (read_summary(path) or {}).get("status")
        if not (path / CKPT).is_file():
            raise C.ConfigError(f"{given}: the folder holds no {CKPT}; {fix}")
        if status != "completed":
            raise C.ConfigError(f"{given}: the run there is {status or 'of unknown status (no readable summary.json)'}"
                                f", not completed, and its {CKPT} may still change; finish it first, or give "
                                f"{path / CKPT} to start from it as it is now")
        path = path / CKPT
    elif not path.exists():
        raise C.ConfigError(f"{given}: no such file or folder; {fix}")
    try:
        saved = load_checkpoint(path)
    except CheckpointError as err:
        raise C.ConfigError(f"{given}: {err}; {fix}") from None
    try:
        source = C.run_id(C.from_dict(saved["hyper_parameters"]["config"]))
    except (C.ConfigError, KeyError, TypeError, ValueError):
        source = None  # weights that fit are used all the same; the file's hash says which they were
    weights = {k.removeprefix("model."): v for k, v in saved["state_dict"].items() if k.startswith("model.")}
    record = {"path": str(path), "sha256": _sha256(path), "run_id": source, "global_step": int(saved["global_step"])}
    return InitFrom(given, path, weights, record)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _trainer(cfg: C.Config, run_dir: Path, loggers: list, callbacks: list):
    import pytorch_lightning as pl

    t = cfg.trainer
    strategy: Any = t.strategy
    if t.strategy == "ddp":
        from pytorch_lightning.strategies import DDPStrategy

        # broadcast_buffers=False: the model's buffers (positional tables) are constants, the same on every rank;
        # broadcasting them is a collective on every forward, which evaluation's uneven shards would hang on
        gloo = t.accelerator == "cpu" or not torch.cuda.is_available()
        strategy = DDPStrategy(process_group_backend="gloo" if gloo else None, broadcast_buffers=False)
    environment = _cluster_environment()
    return pl.Trainer(
        max_epochs=t.max_epochs,
        num_nodes=t.num_nodes,
        max_steps=t.max_steps,
        accelerator=t.accelerator,
        devices=int(t.devices) if t.devices.isdigit() else t.devices,
        strategy=strategy,
        precision=t.precision,
        gradient_clip_val=cfg.optim.grad_clip,
        accumulate_grad_batches=t.accumulate_grad_batches,
        limit_val_batches=t.limit_val_batches,
        log_every_n_steps=t.log_every_n_steps,
        logger=loggers,
        callbacks=callbacks,
        plugins=[AtomicCheckpointIO(), *([environment] if environment is not None else [])],
        default_root_dir=str(run_dir),
        enable_progress_bar=_progress_bar(),
        enable_model_summary=False,
        num_sanity_val_steps=0,
        deterministic=False,
    )


def _progress_bar() -> bool:
    """Lightning's bar on a terminal only (ABLATE_PROGRESS=0/1 forces it): logs stay readable."""
    forced = os.environ.get("ABLATE_PROGRESS")
    return forced == "1" if forced in ("0", "1") else sys.stderr.isatty()


def _scalars(metrics: dict[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in metrics.items():
        out[k] = float(v.item() if isinstance(v, torch.Tensor) else v)
    return out


def _take_stock(run_dir: Path, cfg: C.Config, task, log) -> int | None:
    """Before a (re)start: the step last.ckpt resumes from (None: start afresh). A file of the run
    that cannot be used is set aside as `<name>.corrupt-<time>`, named in one line, and the run goes
    on as an interrupted one:
      last.ckpt    truncated, garbage, holding more than tensors and plain values, written by another
                   config (left by a run whose config.yaml was set aside) or not fitting the model:
                   start afresh;
      metrics.csv  unreadable while resuming, or missing although the checkpoint was taken after a
                   validation (whose rows are saved before it): the rows before the checkpoint are
                   lost, so last.ckpt is set aside too and the run starts afresh (a deterministic rerun
                   gives the same numbers, and a metrics.csv that silently lacks its first epochs would
                   not);
      summary.json unreadable: a completed run cannot be told from an interrupted one, so it is
                   finished again from last.ckpt (at its last step: probes and test only);
      config.yaml, probes.json: rewritten from the config and the checkpoint."""
    ckpt, step, validated = run_dir / CKPT, None, False
    for hpc in sorted(run_dir.glob("*hpc_ckpt_*")):  # Lightning under SLURM would load it past these checks
        renamed = hpc.with_name(hpc.name.replace("hpc_ckpt_", "lightning-hpc-"))  # any name holding hpc_ckpt_ counts
        os.replace(hpc, renamed)
        log(f"ablate: {hpc} is Lightning's SLURM requeue checkpoint, which ablate never resumes from (its own "
            f"{CKPT} is checked first); set aside as {set_aside(renamed).name}")
    if ckpt.exists() or ckpt.is_symlink():
        try:
            saved = load_checkpoint(ckpt)
            _check_fit(ckpt, saved, C.run_id(cfg), task)
            step = int(saved["global_step"])
            validated = any(str(k).startswith("val/") for k in saved.get("callback_metrics") or {})
            if _mid_epoch_without_place(saved):
                aside = set_aside(ckpt)
                log(f"ablate: {ckpt} (step {step}) is a mid-epoch checkpoint that does not hold the place in the "
                    f"epoch's data order (written before ablate saved it, or under DDP): resuming it would not "
                    f"give the uninterrupted run's numbers; set aside as {aside.name}; {run_dir} starts afresh")
                step = None
        except (CheckpointError, TypeError, ValueError, KeyError) as err:
            aside = set_aside(ckpt)
            log(f"ablate: {err}; set aside as {aside.name}; {run_dir} starts afresh")
    metrics = run_dir / METRICS
    if step is not None and not metrics.exists() and validated:  # deleted: its validation rows are lost
        aside = set_aside(ckpt)
        log(f"ablate: {metrics} is missing, but the rows of the validations before step {step} were saved in it; "
            f"{CKPT} set aside as {aside.name}; {run_dir} starts afresh")
        step = None
    elif step is not None and not metrics.exists():  # deleted, or no row was logged before the checkpoint
        log(f"ablate: {metrics} is missing: rows before step {step}, if there were any, are not in it")
    elif step is not None and (problem := metrics_problem(run_dir)):
        names = [set_aside(p).name for p in (metrics, ckpt)]
        log(f"ablate: {metrics} {problem}: its rows before step {step} cannot be kept; set aside as "
            f"{' and '.join(names)}; {run_dir} starts afresh")
        step = None
    for name, problem, after in (
        (SUMMARY, json_problem(run_dir / SUMMARY, "status"), "the run is treated as interrupted"
         + (f" (resumed from {CKPT}, step {step})" if step is not None else " (started afresh)")),
        (CONFIG, config_problem(run_dir), "it is written again from this config"),
        ("probes.json", json_problem(run_dir / "probes.json"), "it is written again at the next probes"),
    ):
        if problem:
            aside = set_aside(run_dir / name)
            log(f"ablate: {run_dir / name} {problem}; set aside as {aside.name}; {after}")
    return step


def _mid_epoch_without_place(saved: dict[str, Any]) -> bool:
    """A checkpoint taken inside an epoch (trainer.ckpt_every_n_steps) whose training loader did not
    save its place (ablate.data.common.ResumableLoader): Lightning would restart the epoch's data in a
    new order, and the run would end with other numbers than an uninterrupted one."""
    loop = (saved.get("loops") or {}).get("fit_loop") or {}
    progress = loop.get("epoch_loop.batch_progress") or {}
    if progress.get("is_last_batch", True) or not progress.get("current", {}).get("completed"):
        return False  # an epoch's end (or its very start): nothing of the epoch to go on from
    places = (loop.get("state_dict") or {}).get("combined_loader") or []
    return not (places and all(isinstance(p, dict) and "taken" in p for p in places))


def _check_fit(ckpt: Path, saved: dict[str, Any], run_id: str, task) -> None:
    """CheckpointError unless the checkpoint was written by this config and fits its model."""
    try:
        theirs = C.run_id(C.from_dict(saved["hyper_parameters"]["config"]))
    except (C.ConfigError, KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"checkpoint {ckpt} holds no config this version can read "
                              f"({str(err).splitlines()[0] if str(err) else type(err).__name__})") from None
    if theirs != run_id:
        raise CheckpointError(f"checkpoint {ckpt} was written by the run {theirs}, not this config's {run_id}")
    if problem := fit_problem(saved["state_dict"], task.state_dict()):
        raise CheckpointError(f"checkpoint {ckpt} does not fit this config's model: {problem}")


def _record(run_dir: Path, log, **fields: Any) -> str | None:
    """Update summary.json's status and return the status it holds now. A run that has already
    finished (the final summary written just before a SIGTERM came) keeps its status: it is never
    downgraded, nor repeated. A folder that cannot be written any more (full disk) is said, not
    raised (None): the caller is already on its way out with the first error."""
    summary = read_summary(run_dir) or {}
    if summary.get("status") in FINISHED:
        return summary["status"]
    try:
        write_json(run_dir / SUMMARY, {**summary, **fields})
    except OSError as err:
        log(f"ablate: could not record status {fields.get('status')!r} in {run_dir / SUMMARY}: {err}")
        return None
    return fields.get("status")


def _wandb_location() -> str | None:
    """Where the W&B run went, and how to upload it if it is offline."""
    import wandb

    run = wandb.run
    if run is None or run.settings.mode == "disabled":
        return None
    if run.offline:
        where = run.settings.sync_dir
        return f"ablate: W&B run saved offline in {where}; upload it with: wandb sync {where}"
    return f"ablate: W&B run: {run.url}"


def train(cfg: C.Config, log=print, callbacks: list | None = None, retrain: str | None = None) -> dict[str, Any]:
    """Run `cfg` to completion (or resume it); returns the summary. Finished runs are not repeated, unless
    `retrain` ("any": --retrain, "stale": --retrain-stale; rundir.retrains) says to train the run again as a
    new attempt, the earlier one kept in attempts/<n>/. `callbacks` are extra Lightning callbacks (notebooks,
    tests). Raises RunDirError (a run.dir that is not ours to write, before anything is written), RunBusy,
    Interrupted (SIGTERM: recorded as interrupted), OSError (the folder cannot be written: recorded as failed
    when it still can)."""
    with _sigterm_interrupts():
        return _train(cfg, log, callbacks, retrain)


def _already(run_dir: Path, summary: dict[str, Any]) -> str:
    """The line for a run finished before: not run again, and which code made it when that is not today's."""
    from .provenance import other_code

    others, now = other_code([summary])
    plugged = P.changed(summary)
    note = (f"; it was made by other code (commit {others[0][:10]}; the code is now at {now[:10]}): rerun it "
            "with --retrain") if others else (
        f"; it was made by other code of plugins={plugged[0]} (its source's sha256 differs from the one recorded): "
        "rerun it with --retrain") if plugged else " (rerun it with --retrain)"
    return f"ablate: {run_dir} already {summary['status']}; not run again{note}"


def _train(cfg: C.Config, log, callbacks: list | None, retrain: str | None = None) -> dict[str, Any]:
    import pytorch_lightning as pl

    from .models import parameter_groups
    from .provenance import provenance

    quiet()
    run_dir = run_dir_for(cfg)
    child, launch = is_ddp_child(), launch_id()
    if child and launch and (finished := _wait_for_rank0(run_dir, launch, retrain)) is not None:
        return finished  # rank 0 found it finished: nothing to train
    if not child:
        check_run_dir(run_dir, C.run_id(cfg))
        summary = read_summary(run_dir)
        if summary and summary["status"] in FINISHED and not retrains(summary, retrain):
            log(_already(run_dir, summary))
            return summary
    if cfg.trainer.threads:
        torch.set_num_threads(cfg.trainer.threads)
    torch.set_flush_denormal(cfg.trainer.flush_denormal)  # False where the CPU cannot (no effect on GPUs)
    init = read_init(cfg)  # run.init_from's checkpoint, before the data are read
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule, task = prepare(cfg, init)  # data errors surface here, before anything is written
    init_from = init.record if init is not None else None  # the weights are the model's now; only their source stays
    del init

    ctrlc.check()  # a Ctrl-C pressed while the imports above ran, swallowed by one of them: stop before any write
    lock = RunLock(run_dir)
    if not child and not lock.acquire():
        raise RunBusy(f"{run_dir} is being trained by another process (lock {lock.path}); wait for it")
    # asked again under the lock: another process may have finished (or retrained) it while this one prepared
    earlier = None if child else read_summary(run_dir)
    again = retrains(earlier, retrain) or bool(earlier and earlier.get(RETRAINING))  # a move a kill cut short
    if earlier and earlier["status"] in FINISHED and not again:
        lock.release()
        log(_already(run_dir, earlier))
        return earlier
    started = time.monotonic()  # durations only: a clock set back must not make them negative
    previous: dict[str, Any] = {}
    try:
        kept = keep_attempt(run_dir) if again else None
        if kept is not None:
            moved = read_summary(kept) or earlier
            commit = str((moved.get("provenance") or {}).get("commit"))[:10]
            log(f"ablate: {run_dir} is trained again from scratch as a new attempt; the earlier one "
                f"({moved['status']}, commit {commit}) is kept in {kept}")
        ckpt = run_dir / CKPT
        if child:  # rank 0 has checked (and set aside) the run's files before it started this one
            resume_step = int(load_checkpoint(ckpt)["global_step"]) if ckpt.exists() else None
        else:
            resume_step = _take_stock(run_dir, cfg, task, log)
        if resume_step is not None:
            log(f"ablate: resuming {run_dir} from {CKPT} (step {resume_step})")
        previous = earlier if kept is not None else read_summary(run_dir) or {}
        summary: dict[str, Any] = {
            "run_id": C.run_id(cfg),
            "run_dir": str(run_dir),
            "group": cfg.run.group,
            "status": "running",
            "params": parameter_groups(getattr(task, "model", task)),
            # with run.init_from, the checkpoint the weights came from (its sha256, the run id and step that wrote it)
            "provenance": {**provenance(cfg.trainer.accelerator), **({"init_from": init_from} if init_from else {}),
                           **({"plugins": P.provenance(cfg.plugins)} if cfg.plugins else {})},
            "attempts": previous.get("attempts", 0) + 1,
            # each earlier attempt's: a resumed run may have been trained by other code, threads or machines
            **({"earlier_provenance": [*previous.get("earlier_provenance", []), previous["provenance"]]}
               if isinstance(previous.get("provenance"), dict) else {}),
            **({"launch": launch} if launch else {}),  # the other ranks wait for it (_wait_for_rank0)
            **({"retrained": str(kept.relative_to(run_dir))} if kept is not None else {}),  # where the earlier one is
        }
        if kept is not None:
            previous = {}  # a new attempt from scratch: its wall and probe time are its own
        if not child:
            write_config(run_dir, C.to_dict(cfg))
            write_json(run_dir / SUMMARY, summary)
        return _fit(Attempt(cfg, run_dir, datamodule, task, summary, previous, resume_step, started, log,
                            list(callbacks or [])))
    except (KeyboardInterrupt, SystemExit) as err:  # Ctrl-C (Lightning: exit 1), SIGTERM (Interrupted)
        if not child:
            how = f"signal {signal.Signals(err.signum).name}" if isinstance(err, Interrupted) else type(err).__name__
            with _signals_held():  # a second SIGTERM or Ctrl-C must not cut the recording short
                status = _record(run_dir, log, status="interrupted", interrupted_by=how,
                                 wall_time_s=previous.get("wall_time_s", 0.0) + (time.monotonic() - started))
            err.ablate_recorded = status or ""  # type: ignore[union-attr]
        raise
    except Exception as err:
        if not child:
            status = _record(run_dir, log, status="failed", error=traceback.format_exc(limit=-8))
            err.ablate_recorded = status or ""  # type: ignore[attr-defined]  # the run had started: not bad input
        raise
    finally:
        lock.release()


def _stop(signum: int) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def _warning_saves(last: LastCheckpoint):
    """While training, SIGUSR2 (SLURM's warning ahead of a job's time limit: `sbatch --signal=USR2@S`)
    saves the run's place at the next step and then stops it, recorded `interrupted` by SIGUSR2, so the
    partial epoch is not lost; a SIGTERM still stops it at once. Also in the runs of a sweep, which ignore
    SIGUSR2 outside training (the forkserver's, so that SLURM's signal to every process of a packed job ends
    none unrecorded): there their runner stops starting runs and lets these save their place. Left alone
    outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGUSR2, lambda signum, frame: last.save_and_stop(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGUSR2, previous)


@contextlib.contextmanager
def _signals_held():
    """While the block runs, SIGTERM and SIGINT do nothing: one that comes meanwhile asks for what is
    already happening (the run stopping), and must not cut the recording short. (The handlers are
    swapped rather than the signals blocked: a blocked signal still reaches the process through its
    other threads, Lightning's and W&B's.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stop = (signal.SIGTERM, signal.SIGINT)
    handlers = {s: signal.signal(s, lambda signum, frame: None) for s in stop}
    try:
        yield
    finally:
        for s, handler in handlers.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)  # None: set outside Python


def learning_curve(path: Path) -> dict[str, float]:
    """`val/acc_mean`: the mean of every epoch's validation accuracy (metrics.csv, whole even after a
    resume), the area under the learning curve over the epochs. Where every learning rate solves a
    task, val/acc_best ties; this still ranks the runs by how fast they got there (a tune metric)."""
    try:
        rows = read_metrics_rows(path) or []
    except RunFileError:
        return {}
    accs = [float(r["val/acc"]) for r in rows if r.get("val/acc")]
    return {"val/acc_mean": sum(accs) / len(accs)} if accs else {}


@dataclass
class Attempt:
    """One attempt at a run, as _train prepared it for _fit (or _initial_only): the summary it fills in and
    writes, the summary an earlier attempt left (`previous`, {} for the first), where training resumes."""

    cfg: C.Config
    run_dir: Path
    datamodule: Any
    task: Any
    summary: dict[str, Any]
    previous: dict[str, Any]
    resume_step: int | None
    started: float
    log: Callable[[str], None]
    callbacks: list = field(default_factory=list)

    def close(self, status: str, metrics: dict[str, Any], global_step: int, samples_per_s: float,
              recorder=None, **extra: Any) -> dict[str, Any]:
        """The summary's closing fields, one home for a trained run and an initial-only one: its status (and
        `extra`, e.g. where it diverged), metrics, wall and probe time summed over the attempts, step, speed."""
        s = self.summary
        s.update(status=status, **extra)
        s["metrics"] = metrics
        s["wall_time_s"] = self.previous.get("wall_time_s", 0.0) + (time.monotonic() - self.started)
        s["train_samples_per_s"] = samples_per_s
        s["global_step"] = global_step
        if recorder is not None:
            s["probes"] = recorder.scalars
            s["probe_time_s"] = self.previous.get("probe_time_s", 0.0) + recorder.seconds
        return s


def _to_wandb(run, summary: dict[str, Any], log, probes: bool = False) -> None:
    """The run's closing summary on W&B (every final metric, also those never logged as history: a sweep's
    tune metric and the ref/ levels must be there for its dashboard and sweep page), then the run closed."""
    import wandb

    keys = ("status", "wall_time_s", "train_samples_per_s", "global_step", "attempts", "diverged_step")
    run.summary.update({k: summary[k] for k in keys if k in summary and summary[k] == summary[k]})  # no NaN speed
    run.summary.update({f"params/{k}": v for k, v in summary["params"].items()})
    run.summary.update({"commit": summary["provenance"]["commit"]})
    run.summary.update({**summary["metrics"], **(summary.get("probes", {}) if probes else {})})
    where = _wandb_location()
    wandb.finish()
    if where:
        log(where)


def _initial_only(a: Attempt) -> dict[str, Any]:
    """trainer.max_steps=0: the model as initialised, measured by the probes at initialisation (with
    run.probes), nothing trained or tested. An initialisation study over a hundred seeds then costs
    no training (Q4's gradient and collapse probes)."""
    from .probing import ProbeRecorder, probe_batch, probe_permutation

    recorder, status, diverged = None, "completed", {}
    if a.cfg.run.probes and _probes_apply(a.cfg, a.log):
        batch = probe_batch(a.datamodule, a.cfg.run.probe_batch)
        recorder = ProbeRecorder(a.run_dir, batch, probe_permutation(a.datamodule, batch[0].shape[1]),
                                 chunk=eval_chunk(a.cfg))
        try:
            recorder.initial(a.task.model)
        except Diverged as err:  # a model non-finite as initialised (e.g. model.temperature=1e-300)
            status, diverged = "diverged", {"diverged_step": err.step, "diverged_loss": str(err.loss)}
            a.log(f"ablate: run diverged: {err}")
    summary = a.close(status, a.datamodule.reference_levels(), 0, float("nan"), recorder, **diverged)
    if a.cfg.tracking == "wandb" and not is_ddp_child():  # a W&B run of its own (attempt_id), its summary only
        from .tracking import wandb_logger

        _to_wandb(wandb_logger(a.run_dir, a.cfg).experiment, summary, a.log, probes=True)
    if not is_ddp_child():
        write_json(a.run_dir / SUMMARY, summary)
    return summary


def _probes_apply(cfg: C.Config, log) -> bool:
    """The probes read ablate's encoder (its attention, norms, positions): for a plug-in's whole model they are
    not available, said in one line; its loss curves (metrics.csv, the summary's curve) are recorded all the same."""
    from .models.config import PLUGGED

    opaque = [f"model.{key}={getattr(cfg.model, key)}" for key in P.OPAQUE if getattr(cfg.model, key) in PLUGGED[key]]
    if not opaque:
        return True
    if not is_ddp_child():
        log(f"ablate: probes are not available for this model ({opaque[0]}, a plug-in's: the probes read ablate's "
            "attention and blocks); its loss and accuracy curves and its gradient norms per module are recorded")
    return False


def _fit(a: Attempt) -> dict[str, Any]:
    if a.cfg.trainer.max_steps == 0:
        return _initial_only(a)
    cfg, run_dir, datamodule, task, log = a.cfg, a.run_dir, a.datamodule, a.task, a.log
    child = is_ddp_child()
    ours = not _distributed()  # the process group DDP is about to open is this run's to close
    ckpt = run_dir / CKPT
    progress = not _progress_bar()  # logs and pipes get one line per epoch instead of the bar
    loggers: list = [RunCSVLogger(run_dir, a.resume_step)]
    if cfg.tracking == "wandb":
        from .tracking import wandb_logger

        loggers.append(wandb_logger(run_dir, cfg, resume=a.resume_step is not None, write=not child))
    throughput = Throughput()
    lines = ProgressLines(log, run_dir) if progress else None
    last = LastCheckpoint(ckpt, cfg.trainer.ckpt_every_n_steps, after_epoch=lines, stop=_stop,
                          pause_after=_pause_after())
    best = [BestCheckpoint(run_dir / BEST)] if cfg.run.keep_best else []
    own = [C.callback_class(path)() for path in P.names(cfg.trainer.callbacks)]  # trainer.callbacks, the user's
    extra = [last, *best, RngState(), DivergenceGuard(), throughput, *([lines] if lines else []), *a.callbacks, *own]
    recorder = None
    if cfg.run.probes and not _probes_apply(cfg, log):  # a plug-in's model: the probes' gradient flow, per module
        extra.append(ModuleGradNorms())
    elif cfg.run.probes:
        from .probing import ProbeRecorder, probe_batch, probe_permutation

        batch = probe_batch(datamodule, cfg.run.probe_batch)
        perm = probe_permutation(datamodule, batch[0].shape[1])
        recorder = ProbeRecorder(run_dir, batch, perm, cfg.run.probe_every, eval_chunk(cfg))
        if not child:
            recorder.restart_curve(a.resume_step)
        extra.append(recorder)
    trainer = _trainer(cfg, run_dir, loggers, extra)
    references = datamodule.reference_levels()  # the task's levels on its own sets: before training, so
    # a set the levels cannot be computed for fails the run before it has trained
    status, diverged = "completed", {}
    try:
        paused = None
        ctrlc.check()  # and one swallowed while the trainer and its loggers were made (W&B, Lightning imports)
        with _warning_saves(last):
            try:
                trainer.fit(task, datamodule=datamodule, ckpt_path=str(ckpt) if a.resume_step is not None else None,
                            weights_only=True)
            except Paused as pause:  # early termination's band (ablate.sweep.hyperband): no final probes or test
                paused = pause
        metrics = {**last.metrics, **_scalars(trainer.callback_metrics)}
        if paused is not None:
            status, diverged = "paused", {"paused_after_epoch": paused.epochs}
            log(f"ablate: paused after epoch {paused.epochs} (the sweep's early termination band); resumes from {CKPT}")
        else:
            if recorder is not None and trainer.is_global_zero:
                if progress:
                    log("ablate: probing the final model" + (" (with head masking)" if cfg.run.expensive_probes else ""))
                recorder.final(trainer, task.model, datamodule, cfg.run.expensive_probes)
            trainer.test(task, datamodule=datamodule, verbose=False)
        metrics.update(references)
        if not child and trainer.is_global_zero:
            metrics.update(learning_curve(run_dir / METRICS))
    except Diverged as err:
        metrics = dict(references)  # the task's levels hold for a run that diverged too: the reports count it at chance
        status, diverged = "diverged", {"diverged_step": err.step, "diverged_loss": str(err.loss)}
        log(f"ablate: run diverged: {err}")
    summary = a.close(status, {**metrics, **_scalars(trainer.callback_metrics)}, trainer.global_step,
                      throughput.samples_per_s, recorder, **diverged)
    for logger in loggers:
        logger.finalize("success")
    if cfg.tracking == "wandb" and trainer.is_global_zero:
        import wandb

        if wandb.run is not None:
            _to_wandb(wandb.run, summary, log)
    if not child and trainer.is_global_zero:
        write_json(run_dir / SUMMARY, summary)
    if ours and _distributed():  # every rank is past its last collective. Lightning closes only NCCL's group
        torch.distributed.destroy_process_group()  # (atexit); gloo's, left open, can abort a rank as it exits
    return summary  # ("terminate called without an active exception", pytorch/pytorch#190489)


def _pause_after() -> int | None:
    """The epoch the sweep runner asked this run to pause after (early termination's band), if any."""
    from .sweep.hyperband import PAUSE_ENV

    text = os.environ.get(PAUSE_ENV, "")
    return int(text) if text.isdigit() and int(text) > 0 else None


def _distributed() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()
