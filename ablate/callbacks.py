"""Lightning pieces the harness adds: exact resume, divergence stop, throughput, atomic weights-only
checkpoints written at every epoch end (and the best epoch's weights), progress lines for logs, and a
metrics.csv that survives resumption."""

from __future__ import annotations

import csv
import io
import math
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from lightning_fabric.plugins import TorchCheckpointIO
from pytorch_lightning.callbacks import Checkpoint, ModelCheckpoint
from pytorch_lightning.loggers.logger import Logger, rank_zero_experiment
from pytorch_lightning.utilities import rank_zero_only

from .checkpoint import load_checkpoint
from .fileio import atomic_write


class Diverged(RuntimeError):
    def __init__(self, step: int, loss: float, what: str = "loss"):
        super().__init__(f"{what} became {loss} at step {step}")
        self.step, self.loss = step, loss


class DivergenceGuard(pl.Callback):
    """Stops the run at the first non-finite training loss (raises `Diverged`, caught by the driver).

    On the CPU every step's loss is read. On an accelerator reading the loss back makes the host wait for the
    step to finish, every step (issue 42), so the first non-finite step and its loss are kept on the device
    and read every `every` steps, at an epoch's last step and before any checkpoint is saved: the step
    recorded is the same, and a checkpoint never holds the weights of a diverged run."""

    every = 50

    def __init__(self, lazy: bool | None = None) -> None:
        self.lazy = lazy  # None: lazy on an accelerator, every step on the CPU
        self.first: torch.Tensor | None = None  # the first non-finite step (-1: none yet), on the loss's device
        self.value: torch.Tensor | None = None  # its loss

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = (outputs["loss"] if isinstance(outputs, dict) else outputs).detach()
        if not (self.lazy if self.lazy is not None else loss.device.type != "cpu"):
            value = float(loss)
            if not math.isfinite(value):
                raise Diverged(trainer.global_step, value)
            return
        if self.first is None:
            self.first = torch.full((), -1, dtype=torch.long, device=loss.device)
            self.value = torch.zeros((), dtype=torch.float32, device=loss.device)
        newly = ~torch.isfinite(loss) & (self.first < 0)
        self.first = torch.where(newly, torch.full_like(self.first, trainer.global_step), self.first)
        self.value = torch.where(newly, loss.float(), self.value)
        if trainer.global_step % self.every == 0 or batch_idx + 1 >= trainer.num_training_batches:
            self.check()

    def check(self) -> None:
        if self.first is not None and int(self.first) >= 0:
            raise Diverged(int(self.first), float(self.value))

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        self.check()


def _numpy_state() -> tuple:
    """numpy's RNG state as plain Python values, so checkpoints load with weights_only=True."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return (name, keys.tolist(), int(pos), int(has_gauss), float(cached))


class RngState(pl.Callback):
    """Checkpoints carry torch/CUDA/numpy/python RNG states (Lightning's do not), so resuming from an
    end-of-epoch last.ckpt reproduces the uninterrupted run exactly (data order and dropout)."""

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        checkpoint["rng_states"] = {
            "torch": torch.get_rng_state(),
            "numpy": _numpy_state(),
            "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        states = checkpoint.get("rng_states")
        if not states:
            return
        torch.set_rng_state(states["torch"])
        name, keys, pos, has_gauss, cached = states["numpy"]
        np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
        random.setstate(states["python"])
        if states["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(states["cuda"])


class ModuleGradNorms(pl.Callback):
    """The gradient flow of a model the probes cannot read (a plug-in's, ablate/plugins.py): `grad/<module>`, the L2
    norm of the gradients of each top-level module of the task's network (its `model`, else the LightningModule
    itself), after each backward pass, logged as train/loss is (every trainer.log_every_n_steps optimiser steps,
    into metrics.csv and W&B). The probes' per-layer grad_l and groups, for any module."""

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        network = getattr(pl_module, "model", pl_module)
        for name, child in network.named_children():
            grads = [p.grad.detach() for p in child.parameters() if p.grad is not None]
            if grads:
                norm = torch.stack([g.double().square().sum() for g in grads]).sum().sqrt()
                pl_module.log(f"grad/{name}", norm.float(), on_step=True, on_epoch=False)


class Throughput(pl.Callback):
    """Training samples per second of training time (validation excluded), accumulated over resumes."""

    def __init__(self) -> None:
        self.samples = 0
        self.seconds = 0.0
        self._t0 = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.seconds += time.perf_counter() - self._t0
        self.samples += len(batch[0]) * trainer.world_size

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds else float("nan")

    def state_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "seconds": self.seconds}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.samples, self.seconds = state["samples"], state["seconds"]


class AtomicCheckpointIO(TorchCheckpointIO):
    """torch.save into memory, then temp file + rename: a kill mid-save never leaves a broken last.ckpt.
    Loading is weights-only whatever the caller asks (Trainer.fit(ckpt_path=...) comes through here):
    a checkpoint holds tensors and plain values, and a crafted pickle must not run code."""

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        atomic_write(Path(path), buffer.getvalue())

    def load_checkpoint(self, path, map_location=None, weights_only=None) -> dict[str, Any]:
        return load_checkpoint(Path(path), map_location=map_location or "cpu")


class Paused(Exception):
    """The run trained to the epoch the sweep runner asked it to wait at (early termination's band,
    ablate.sweep.hyperband), its place saved in last.ckpt: recorded `paused`, resumed exactly later."""

    def __init__(self, epochs: int):
        super().__init__(f"paused after epoch {epochs}")
        self.epochs = epochs


class LastCheckpoint(Checkpoint):
    """last.ckpt at the end of every training epoch and every `every_n_steps` optimiser steps.

    Lightning's `ModelCheckpoint(save_last=True, save_top_k=0)` writes nothing until the run ends
    (its "last" copy follows a top-k save, and there are none), so a run killed in epoch 3 restarted
    at step 0. The epoch-end checkpoint is taken after the epoch's validation, with the RNG states
    (`RngState`), so a run resumed from it continues exactly as the uninterrupted one. Being a
    `Checkpoint`, Lightning runs it after every other callback. It also carries the metrics known at
    its step, so a run resumed at its last step (killed while probing or testing) reports them.
    `after_epoch(trainer)` is called once an epoch's checkpoint is on disk (progress lines). With
    `pause_after` N the run raises `Paused` once N epochs are done and saved (at once when it resumes
    with N or more done)."""

    def __init__(self, path: Path, every_n_steps: int = 0, after_epoch=None, stop=None, pause_after: int | None = None):
        self.path = Path(path)
        self.every = every_n_steps
        self.after_epoch = after_epoch
        self.metrics: dict[str, float] = {}  # callback_metrics of the checkpoint resumed from
        self.stop = stop  # stop(signum): raises, ending the run as that signal would (train.Interrupted)
        self.asked: int | None = None  # a signal that asked the run to save its place and stop
        self.pause_after = pause_after

    def on_train_start(self, trainer, pl_module):
        if self.pause_after is not None and trainer.current_epoch >= self.pause_after:
            raise Paused(trainer.current_epoch)

    def save_and_stop(self, signum: int) -> None:
        """A warning before the end (SLURM's USR2 ahead of the time limit): save last.ckpt at the next step
        (mid-epoch; a resume from it is exact) or after the epoch's validation when that comes first, then
        stop through `stop(signum)`."""
        self.asked = signum

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        # never on an epoch's last batch: Lightning resumes such a checkpoint past the epoch's validation
        # (a run killed in it was recorded completed with the previous epoch's val/acc); the epoch's own
        # checkpoint follows the validation
        last = batch_idx + 1 >= trainer.num_training_batches
        if self.asked is not None and not last and self.stop is not None:
            trainer.save_checkpoint(self.path)
            self.stop(self.asked)
        if self.every and trainer.global_step % self.every == 0 and not last:
            trainer.save_checkpoint(self.path)

    def on_train_epoch_end(self, trainer, pl_module):
        trainer.save_checkpoint(self.path)
        if self.after_epoch is not None and trainer.is_global_zero:
            self.after_epoch(trainer)
        if self.asked is not None and self.stop is not None:
            self.stop(self.asked)
        if self.pause_after is not None and trainer.current_epoch + 1 >= self.pause_after:
            raise Paused(trainer.current_epoch + 1)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        checkpoint["callback_metrics"] = {k: float(v) for k, v in trainer.callback_metrics.items()}

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        self.metrics = dict(checkpoint.get("callback_metrics", {}))


class BestCheckpoint(ModelCheckpoint):
    """best.ckpt: the weights of the epoch whose val/acc beat every earlier epoch's (a tie keeps the earlier
    one), so the model that val/acc_best reports. Lightning's ModelCheckpoint with one fixed file name, written
    after the epoch's validation, weights only (model state_dict, hyper-parameters, step: no optimiser), by rank 0,
    through AtomicCheckpointIO (temp file + rename). Its best score is part of every last.ckpt (callbacks state),
    so a resumed run compares with the epochs before the interruption too; a last.ckpt without it (written
    before best.ckpt existed, or with run.keep_best=false) gives its val/acc_best instead, and best.ckpt is then
    written only by a later epoch that beats it."""

    def __init__(self, path: Path):
        # saved at validation end, before LastCheckpoint's last.ckpt at the epoch's end: last.ckpt holds this epoch's score
        super().__init__(dirpath=Path(path).parent, filename=Path(path).stem, monitor="val/acc", mode="max",
                         save_top_k=1, save_weights_only=True, auto_insert_metric_name=False,
                         enable_version_counter=False, save_on_train_epoch_end=False)

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        if self.state_key in (checkpoint.get("callbacks") or {}):
            return  # load_state_dict restores it
        best = (checkpoint.get("callback_metrics") or {}).get("val/acc_best")
        if best is not None:
            self.load_state_dict({"best_model_score": torch.tensor(best), "best_k_models": {"": torch.tensor(best)},
                                  "best_model_path": "", "kth_best_model_path": ""})

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # its own file, wherever the run folder is now: Lightning forgets the best score of a folder that moved
        # (another mount, a copy), and the next epoch would overwrite best.ckpt whatever its val/acc
        here, scores = self.format_checkpoint_name({}), list((state_dict.get("best_k_models") or {}).values())
        kept = {"best_k_models": {here: scores[0]}, "kth_value": scores[0]} if scores else {"best_k_models": {}}
        super().load_state_dict({**state_dict, **kept, "dirpath": self.dirpath, "kth_best_model_path": here if scores
                                 else "", "best_model_path": here if scores else ""})


def _steps_per_epoch(trainer: pl.Trainer) -> int:
    """Optimiser steps of an epoch: a step every trainer.accumulate_grad_batches batches, and one at its end."""
    return -(-int(trainer.num_training_batches) // max(1, int(trainer.accumulate_grad_batches)))


class ProgressLines(pl.Callback):
    """Where there is no progress bar (logs, pipes, sweep workers), lines through `log` that say the run is
    alive: one as training starts (where, on what, how many steps), one per epoch once its checkpoint is
    saved (epoch, step, losses, val/acc, time since this attempt began), and one at least every `every_s`
    seconds in between, with the time left at this attempt's pace. A first epoch of 12 minutes printed
    nothing before (issue 43)."""

    every_s = 30.0
    # steps: after `warm_up` (the first ones pay for allocation and the loaders' start: 8x the pace of the rest
    # measured on MNIST here), the pace of the next `estimate_after` says once how long the rest will take
    warm_up, estimate_after = 10, 20

    def __init__(self, log, run_dir: Path | str = "") -> None:
        self.say = log
        self.run_dir = run_dir
        self.started = self.last = time.monotonic()
        self.first_step: int | None = None
        self.estimated = False
        self.warm: tuple[int, float] | None = None  # (step, time) once the warm-up steps are done

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.started = self.last = time.monotonic()
        self.first_step = trainer.global_step
        if trainer.is_global_zero:
            per_epoch, epochs = _steps_per_epoch(trainer), trainer.max_epochs
            where = f" {self.run_dir}" if self.run_dir else ""
            resumed = f", from step {trainer.global_step}" if trainer.global_step else ""
            self.say(f"ablate: training{where} on {pl_module.device}: {epochs} epoch(s) of {per_epoch} steps"
                     f"{resumed}")

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not trainer.is_global_zero:
            return
        now = time.monotonic()
        per_epoch = trainer.num_training_batches
        total = _steps_per_epoch(trainer) * trainer.max_epochs
        total = min(total, trainer.max_steps) if trainer.max_steps >= 0 else total
        done = trainer.global_step - (self.first_step or 0)
        left = (now - self.started) / done * (total - trainer.global_step) if done > 0 else None
        if self.warm is None and done >= self.warm_up:
            self.warm = (trainer.global_step, now)
        elif not self.estimated and self.warm and trainer.global_step - self.warm[0] >= self.estimate_after:
            self.estimated = True
            steps, spent = trainer.global_step - self.warm[0], now - self.warm[1]
            self.say(f"ablate: steps {self.warm[0]}-{trainer.global_step} took {spent:.1f} s: about "
                     f"{spent / steps * (total - trainer.global_step):.0f} s for the other {total - trainer.global_step}"
                     " at this pace, validation and probes not counted")
        if now - self.last < self.every_s:
            return
        self.last = now
        parts = [f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}",
                 f"step {trainer.global_step}/{total} ({batch_idx + 1}/{per_epoch} of this epoch)"]
        loss = trainer.callback_metrics.get("train/loss")
        parts += [f"train/loss {float(loss):.4f}"] if loss is not None else []
        parts.append(f"{now - self.started:.0f} s" + (f", about {left:.0f} s left" if left is not None else ""))
        self.say("ablate: " + "  ".join(parts))

    def __call__(self, trainer: pl.Trainer) -> None:
        m = trainer.callback_metrics
        parts = [f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}", f"step {trainer.global_step}"]
        parts += [f"{k} {float(m[k]):.4f}" for k in ("train/loss", "val/loss", "val/acc") if k in m]
        parts.append(f"{time.monotonic() - self.started:.0f} s")
        self.say("ablate: " + "  ".join(parts))


class RunCSVLogger(Logger):
    """metrics.csv in the run directory. On resume from a checkpoint at `resume_step`, rows logged
    before that step are kept and the rest (work about to be redone) dropped."""

    def __init__(self, run_dir: Path, resume_step: int | None = None):
        super().__init__()
        self.path = Path(run_dir) / "metrics.csv"
        self.rows: list[dict[str, Any]] = []
        if resume_step is not None and self.path.exists():
            with open(self.path, newline="") as f:
                self.rows = [r for r in csv.DictReader(f) if int(r["step"]) < resume_step]

    @property
    def name(self) -> str:
        return "csv"

    @property
    def version(self) -> str:
        return ""

    @property
    @rank_zero_experiment
    def experiment(self) -> RunCSVLogger:
        return self

    @rank_zero_only
    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        row = {"step": step if step is not None else len(self.rows)}
        row.update({k: float(v) for k, v in metrics.items()})
        self.rows.append(row)

    @rank_zero_only
    def save(self) -> None:
        keys = sorted({k for r in self.rows for k in r} - {"step"})
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=["step", *keys])
        writer.writeheader()
        writer.writerows(self.rows)
        atomic_write(self.path, out.getvalue())

    @rank_zero_only
    def finalize(self, status: str) -> None:
        self.save()
