"""Probes during a training run and on a saved checkpoint.

Every run measures the cheap probes (score statistics, gradient flow, collapse, residual norms,
parameter shares, equivariance) at step 0 and at the end (and every `run.probe_every` steps), and
the expensive ones (head masking on validation data, accuracy with permuted test rows) at the end.
Scalars go to `probes.json` under stable flat names (`probe/init/entropy_l0`, `probe/final/grad_ratio`,
...) that the results table reads as columns, periodic ones to `probes.csv`, arrays (attention maps,
per-layer curves) to `probes.npz`, and all of it to W&B (scalars as metrics, maps as heatmaps).
Probes never touch the RNG or gradients, so training metrics are identical with probes on or off.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch

from .fileio import atomic_write
from .probes import order_sensitivity, run_probes

EXPENSIVE_EXAMPLES = 2048  # head masking evaluates L*H times: on at most this many validation examples


def probe_batch(datamodule, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first n validation examples: the same fixed batch at every probe point."""
    x, y = datamodule.val_set.tensors()
    return x[:n], y[:n]


def probe_permutation(datamodule, seq_len: int) -> torch.Tensor:
    """MNIST: the task's fixed row permutation; copy: a fixed permutation of the positions."""
    if getattr(datamodule, "permutation", None) is not None:
        return datamodule.permutation
    return torch.randperm(seq_len, generator=torch.Generator().manual_seed(0))


def heatmap(attention: np.ndarray, scale: int = 4) -> np.ndarray:
    """(L, H, T, T) weights -> one uint8 image, layers as rows and heads as columns, 1-px gaps."""
    L, H, T, _ = attention.shape
    img = np.full((L * (T + 1) - 1, H * (T + 1) - 1), 255, dtype=np.uint8)
    for layer in range(L):
        for head in range(H):
            a = attention[layer, head]
            a = (a - a.min()) / (a.max() - a.min() + 1e-12)
            img[layer * (T + 1) : layer * (T + 1) + T, head * (T + 1) : head * (T + 1) + T] = (255 * (1 - a)).astype(np.uint8)
    return np.kron(img, np.ones((scale, scale), dtype=np.uint8))


class ProbeRecorder(pl.Callback):
    """Runs the probes at init, every `every` steps, and (via `final`) at the end; writes and logs them."""

    def __init__(self, run_dir: Path, batch, permutation: torch.Tensor, every: int = 0):
        self.run_dir = Path(run_dir)
        self.batch, self.permutation, self.every = batch, permutation, every
        self.scalars: dict[str, float] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self.seconds = 0.0  # spent probing (summary.json: probe_time_s)

    def restart_curve(self, resume_step: int | None) -> None:
        """probes.csv keeps the rows up to the checkpoint resumed from (the rest is measured again);
        a run started afresh starts it afresh."""
        path = self.run_dir / "probes.csv"
        if not path.is_file():
            return
        kept: list[str] = []
        if resume_step is not None:
            try:
                lines = path.read_text().splitlines(keepends=True)
                kept = lines[:1] + [r for r in lines[1:] if int(r.split(",", 1)[0]) <= resume_step]
            except (OSError, ValueError):
                kept = []  # unreadable: the curve restarts at the resume point
        if len(kept) > 1:
            atomic_write(path, "".join(kept))
        else:
            path.unlink()

    # state survives resume, so init probes are those of the real initialisation
    def state_dict(self) -> dict[str, Any]:
        return {"scalars": dict(self.scalars)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scalars = dict(state["scalars"])
        self._load_arrays()

    def _load_arrays(self) -> None:
        try:
            with np.load(self.run_dir / "probes.npz") as f:
                self.arrays = {k: f[k] for k in f.files}
        except Exception:  # missing, truncated (BadZipFile), garbage: the init arrays are lost, not the run
            self.arrays = {}

    def _measure(self, model, point: str, trainer: pl.Trainer | None, **kw) -> dict[str, float]:
        started = time.perf_counter()
        try:
            return self._measure_now(model, point, trainer, **kw)
        finally:
            self.seconds += time.perf_counter() - started

    def _measure_now(self, model, point: str, trainer: pl.Trainer | None, **kw) -> dict[str, float]:
        device = next(model.parameters()).device
        batch = tuple(t.to(device) for t in self.batch)
        scalars, arrays = run_probes(model, batch, permutation=self.permutation, **kw)
        named = {f"probe/{point}/{k}": v for k, v in scalars.items()}
        if point in ("init", "final"):
            self.scalars.update(named)
            self.arrays.update({f"{point}/{k}": v for k, v in arrays.items()})
            self._write()
        if trainer is not None:
            self._log(trainer, named, arrays.get("attention"), point)
        return named

    def _write(self) -> None:
        atomic_write(self.run_dir / "probes.json", json.dumps(self.scalars, indent=1, sort_keys=True) + "\n")
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **self.arrays)
        atomic_write(self.run_dir / "probes.npz", buffer.getvalue())

    def _log(self, trainer: pl.Trainer, named: dict[str, float], attention, point: str) -> None:
        from pytorch_lightning.loggers import WandbLogger

        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.log_metrics(named, step=trainer.global_step)
                if attention is not None:
                    logger.log_image(f"probe/{point}/attention", [heatmap(attention)], step=trainer.global_step,
                                     caption=["rows: layers, columns: heads (dark = high weight)"])

    def on_train_start(self, trainer, pl_module):
        if trainer.is_global_zero and not any(k.startswith("probe/init/") for k in self.scalars):
            self._measure(pl_module.model, "init", trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if self.every and step % self.every == 0 and trainer.is_global_zero:
            named = self._measure(pl_module.model, "step", trainer)
            self._append_curve(step, named)

    def _append_curve(self, step: int, named: dict[str, float]) -> None:
        path = self.run_dir / "probes.csv"
        row = {"step": step, **{k.removeprefix("probe/step/"): v for k, v in named.items()}}
        new = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)  # never through a link
        with open(fd, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)

    def final(self, trainer: pl.Trainer | None, model, datamodule, expensive: bool) -> dict[str, float]:
        """Cheap probes, and the expensive ones if asked: head masking on validation data, and
        (MNIST rows) prediction agreement and accuracy with the whole test set's rows permuted."""
        kw: dict[str, Any] = {}
        if expensive:
            x, y = datamodule.val_set.tensors()
            kw = {"expensive": True, "val_loader": _chunks(x[:EXPENSIVE_EXAMPLES], y[:EXPENSIVE_EXAMPLES], 512)}
        named = self._measure(model, "final", trainer, **kw)
        if expensive and datamodule.kind == "classify":
            started = time.perf_counter()
            order = order_sensitivity(model, _chunks(*datamodule.test_set.tensors(), 1000), self.permutation)
            self.seconds += time.perf_counter() - started
            extra = {f"probe/final/test_{k}": v for k, v in order.items()}
            self.scalars.update(extra)
            self._write()
            named.update(extra)
        return named


def _chunks(x: torch.Tensor, y: torch.Tensor, size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A whole split as a list of large batches: evaluation without DataLoader overhead."""
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(x), size)]
