"""`ablate train`: one config -> one run directory (+ a W&B run), resumable and recorded exactly once.

config -> data + task -> Lightning Trainer -> run directory:
    config.yaml   the resolved config (every key, typed)
    metrics.csv   per-step and per-epoch metrics
    summary.json  status, final metrics under their logged names, parameter counts, wall time,
                  samples/s, provenance
    last.ckpt     model, optimiser, loops and RNG states (resume point)
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from . import config as C
from .callbacks import (
    AtomicCheckpointIO,
    Diverged,
    DivergenceGuard,
    RngState,
    RunCSVLogger,
    Throughput,
)
from .rundir import CKPT, RunLock, is_finished, read_summary, runs_root, write_config, write_json


class RunBusy(RuntimeError):
    """Another process holds the run directory's lock."""


def is_ddp_child() -> bool:
    """Processes Lightning's DDP launcher starts for ranks > 0 re-run the CLI; they must not write."""
    return os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("NODE_RANK", "0") != "0"


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
    ):
        warnings.filterwarnings("ignore", message=pattern)


def run_dir_for(cfg: C.Config) -> Path:
    return Path(cfg.run.dir) if cfg.run.dir else runs_root() / cfg.run.group / C.run_id(cfg)


def prepare(cfg: C.Config):
    """Everything that can fail on bad input, before anything is written: data, task, sizes."""
    from .data import build_datamodule
    from .tasks import build_task

    datamodule = build_datamodule(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("fit")
    task = build_task(C.to_dict(cfg), datamodule)
    return datamodule, task


def _trainer(cfg: C.Config, run_dir: Path, loggers: list, callbacks: list):
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import ModelCheckpoint

    t = cfg.trainer
    checkpoint = ModelCheckpoint(
        dirpath=run_dir,
        save_last=True,
        save_top_k=0,
        every_n_train_steps=t.ckpt_every_n_steps or None,
        enable_version_counter=False,
    )
    strategy: Any = t.strategy
    if t.strategy == "ddp" and (t.accelerator == "cpu" or not torch.cuda.is_available()):
        from pytorch_lightning.strategies import DDPStrategy

        strategy = DDPStrategy(process_group_backend="gloo")
    return pl.Trainer(
        max_epochs=t.max_epochs,
        max_steps=t.max_steps,
        accelerator=t.accelerator,
        devices=int(t.devices) if t.devices.isdigit() else t.devices,
        strategy=strategy,
        precision=t.precision,
        gradient_clip_val=cfg.optim.grad_clip,
        limit_val_batches=t.limit_val_batches,
        log_every_n_steps=t.log_every_n_steps,
        logger=loggers,
        callbacks=[checkpoint, *callbacks],
        plugins=[AtomicCheckpointIO()],
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


def train(cfg: C.Config, log=print, callbacks: list | None = None) -> dict[str, Any]:
    """Run `cfg` to completion (or resume it); returns the summary. Finished runs are not repeated.
    `callbacks` are extra Lightning callbacks (notebooks, tests)."""
    import pytorch_lightning as pl

    from .models import parameter_groups
    from .provenance import provenance

    quiet()
    run_dir = run_dir_for(cfg)
    child = is_ddp_child()
    if not child and is_finished(run_dir):
        summary = read_summary(run_dir)
        log(f"ablate: {run_dir} already {summary['status']}; not run again (delete it to re-run)")
        return summary
    if cfg.trainer.threads:
        torch.set_num_threads(cfg.trainer.threads)
    torch.set_flush_denormal(cfg.trainer.flush_denormal)  # False where the CPU cannot (no effect on GPUs)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule, task = prepare(cfg)  # data errors surface here, before anything is written

    lock = RunLock(run_dir)
    if not child and not lock.acquire():
        raise RunBusy(f"{run_dir} is being trained by another process (lock {lock.path}); wait for it")
    if not child and is_finished(run_dir):  # another process finished it while this one prepared
        lock.release()
        summary = read_summary(run_dir)
        log(f"ablate: {run_dir} already {summary['status']}; not run again (delete it to re-run)")
        return summary
    try:
        ckpt = run_dir / CKPT
        resume_step = None
        if ckpt.exists():
            resume_step = int(torch.load(ckpt, map_location="cpu", weights_only=False)["global_step"])
            log(f"ablate: resuming {run_dir} from {CKPT} (step {resume_step})")
        started = time.time()
        previous = read_summary(run_dir) or {}
        summary: dict[str, Any] = {
            "run_id": C.run_id(cfg),
            "run_dir": str(run_dir),
            "group": cfg.run.group,
            "status": "running",
            "params": parameter_groups(task.model),
            "provenance": provenance(cfg.trainer.accelerator),
            "attempts": previous.get("attempts", 0) + 1,
        }
        if not child:
            write_config(run_dir, C.to_dict(cfg))
            write_json(run_dir / "summary.json", summary)
        loggers: list = [RunCSVLogger(run_dir, resume_step)]
        if cfg.tracking == "wandb":
            from .tracking import wandb_logger

            loggers.append(wandb_logger(run_dir, C.run_id(cfg), cfg.run.group, cfg.run.project, C.flat(cfg)))
        throughput = Throughput()
        extra = [RngState(), DivergenceGuard(), throughput, *(callbacks or [])]
        recorder = None
        if cfg.run.probes:
            from .probing import ProbeRecorder, probe_batch, probe_permutation

            batch = probe_batch(datamodule, cfg.run.probe_batch)
            perm = probe_permutation(datamodule, batch[0].shape[1])
            recorder = ProbeRecorder(run_dir, batch, perm, cfg.run.probe_every)
            extra.append(recorder)
        trainer = _trainer(cfg, run_dir, loggers, extra)
        try:
            trainer.fit(task, datamodule=datamodule, ckpt_path=str(ckpt) if ckpt.exists() else None)
            metrics = _scalars(trainer.callback_metrics)
            if recorder is not None and trainer.is_global_zero:
                recorder.final(trainer, task.model, datamodule, cfg.run.expensive_probes)
            trainer.test(task, datamodule=datamodule, verbose=False)
            summary["status"] = "completed"
        except Diverged as err:
            metrics = {}
            summary.update(status="diverged", diverged_step=err.step, diverged_loss=str(err.loss))
            log(f"ablate: run diverged: {err}")
        summary["metrics"] = {**metrics, **_scalars(trainer.callback_metrics)}
        summary["wall_time_s"] = previous.get("wall_time_s", 0.0) + (time.time() - started)
        summary["train_samples_per_s"] = throughput.samples_per_s
        summary["global_step"] = trainer.global_step
        if recorder is not None:
            summary["probes"] = recorder.scalars
            summary["probe_time_s"] = previous.get("probe_time_s", 0.0) + recorder.seconds
        for logger in loggers:
            logger.finalize("success")
        if cfg.tracking == "wandb" and trainer.is_global_zero:
            import wandb

            if wandb.run is not None:
                keys = ("status", "wall_time_s", "train_samples_per_s", "global_step", "attempts", "diverged_step")
                wandb.run.summary.update({k: summary[k] for k in keys if k in summary})
                wandb.run.summary.update({f"params/{k}": v for k, v in summary["params"].items()})
                wandb.run.summary.update({"commit": summary["provenance"]["commit"]})
                wandb.finish()
        if not child and trainer.is_global_zero:
            write_json(run_dir / "summary.json", summary)
        return summary
    except Exception as err:
        if not child and not isinstance(err, RunBusy):
            failed = {**(read_summary(run_dir) or {}), "status": "failed", "error": traceback.format_exc(limit=-8)}
            write_json(run_dir / "summary.json", failed)
        raise
    finally:
        lock.release()
