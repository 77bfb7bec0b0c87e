"""Probes during a training run and on a saved checkpoint.

Every run measures the cheap probes (score statistics, gradient flow, collapse, residual norms,
parameter shares, equivariance) at step 0 and at the end (and every `run.probe_every` steps), and
the expensive ones (head masking on validation data, accuracy with permuted test rows) at the end.
Scalars go to `probes.json` under stable flat names (`probe/init/entropy_l0`, `probe/final/grad_ratio`,
...) that the results table reads as columns, periodic ones to `probes.csv`, arrays (attention maps,
per-layer curves, a token task's test accuracy per emitted position) to `probes.npz`, and all of it to W&B: the scalars of init and the end in the run
summary (and the final ones as the Table "probes/final"), the periodic ones as curves, maps as heatmaps.
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

from .callbacks import Diverged
from .fileio import atomic_write
from .limits import EVAL_CHUNK
from .probes import (
    accuracy_by_position,
    attention_maps,
    has_attention,
    order_sensitivity,
    periodic_part,
    periodic_probes,
    probe_mode,
    run_probes,
)

CURVE = "probes.csv"  # the periodic probes: step, then one column per scalar (`grad_l0`, `logit_std_l1`, ...)
TABLE = "probes/final"  # W&B: the final probes as one Table (columns probe, value)
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

    def __init__(self, run_dir: Path, batch, permutation: torch.Tensor, every: int = 0, chunk: int = EVAL_CHUNK):
        self.run_dir = Path(run_dir)
        self.batch, self.permutation, self.every = batch, permutation, every
        self.chunk = chunk  # examples per pass of the final probes over a split (ablate.limits.eval_chunk)
        self.scalars: dict[str, float] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self.seconds = 0.0  # spent probing (summary.json: probe_time_s)
        self._header: list[str] | None = None  # probes.csv's columns, once known

    def restart_curve(self, resume_step: int | None) -> None:
        """probes.csv keeps the rows up to the checkpoint resumed from (the rest is measured again);
        a run started afresh starts it afresh. Only whole rows are kept: a line cut short by a kill,
        one with another number of fields than the header, or a step out of order ends what is kept."""
        path = self.run_dir / CURVE
        if not path.is_file():
            return
        kept: list[str] = []
        if resume_step is not None:
            try:
                kept = _whole_rows(path.read_text(), resume_step)
            except (OSError, UnicodeDecodeError):
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
            self._finite(model, trainer.global_step if trainer is not None else 0)
            return self._measure_now(model, point, trainer, **kw)
        finally:
            self.seconds += time.perf_counter() - started

    def _finite(self, model, step: int) -> None:
        """Raise Diverged where the model is no longer finite: a weight, or its output on the probe batch.
        The probes run after an optimiser step that the loss guard only sees at the next one, and a
        non-finite model broke them with a traceback (recorded `failed`, which a tuned sweep reruns forever)."""
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            raise Diverged(step, float("nan"), "a weight")
        with probe_mode(model), torch.no_grad():
            x = self.batch[0].to(next(model.parameters()).device)
            out = model(x[:1])
        if not bool(torch.isfinite(out).all()):
            raise Diverged(step, float("nan"), "the model's output")

    def _measure_now(self, model, point: str, trainer: pl.Trainer | None, **kw) -> dict[str, float]:
        device = next(model.parameters()).device
        batch = tuple(t.to(device) for t in self.batch)
        if point == "step":  # the curve: what changes with training, on the same fixed batch
            scalars = periodic_probes(model, batch)
            # W&B's heatmap of the maps, for a model that has them (an LSTM/GRU has none: no image)
            maps = _wandb(trainer) and has_attention(model)
            arrays = {"attention": attention_maps(model, batch[0][:1])[0].cpu().numpy()} if maps else {}
        else:
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
        """W&B: the periodic probes as history (curves); those at init and at the end, measured once,
        in the run summary (W&B would draw each history key as a one-point chart)."""
        for logger in _wandb(trainer):
            if point == "step":
                logger.log_metrics(named, step=trainer.global_step)
            else:
                logger.experiment.summary.update(named)
            if attention is not None:
                logger.log_image(f"probe/{point}/attention", [heatmap(attention)], step=trainer.global_step,
                                 caption=["rows: layers, columns: heads (dark = high weight)"])

    def initial(self, model) -> dict[str, float]:
        """The probes at initialisation, without a trainer (a run that trains nothing: max_steps=0)."""
        return self._measure(model, "init", None)

    def on_train_start(self, trainer, pl_module):
        if not trainer.is_global_zero:
            return
        if not any(k.startswith("probe/init/") for k in self.scalars):
            self._measure(pl_module.model, "init", trainer)
        if self.every and not (self.run_dir / CURVE).exists():
            # step 0 of the curve is the init measurement (kept in the checkpoint's state, so a
            # resumed run whose curve was unreadable still starts it at step 0)
            init = {k.removeprefix("probe/init/"): v for k, v in self.scalars.items() if k.startswith("probe/init/")}
            self._append_curve(0, periodic_part(init))
            if trainer.global_step == 0:  # W&B's probe/step curves start there too
                self._log(trainer, {f"probe/step/{k}": v for k, v in periodic_part(init).items()}, None, "step")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if self.every and step % self.every == 0 and trainer.is_global_zero:
            named = self._measure(pl_module.model, "step", trainer)
            self._append_curve(step, {k.removeprefix("probe/step/"): v for k, v in named.items()})

    def _append_curve(self, step: int, values: dict[str, float]) -> None:
        """One row of probes.csv, written by one append (a kill leaves at most a line cut short, which
        a resume drops). A header that does not match the row's names (a resumed run measuring more
        than it did) is rewritten with both, the old rows' new cells empty."""
        path = self.run_dir / CURVE
        row = {"step": step, **values}
        if self._header is None and path.exists():
            self._header = _read_header(path)
        if self._header is not None and self._header != list(row):
            self._widen(path, list(row))
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=self._header or list(row), lineterminator="\n")
        if self._header is None:
            writer.writeheader()
            self._header = list(row)
        writer.writerow(row)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)  # never through a link
        try:
            os.write(fd, text.getvalue().encode())
        finally:
            os.close(fd)

    def _widen(self, path: Path, names: list[str]) -> None:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        header = list(dict.fromkeys([*(self._header or []), *names]))
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write(path, text.getvalue())
        self._header = header

    def final(self, trainer: pl.Trainer | None, model, datamodule, expensive: bool) -> dict[str, float]:
        """Cheap probes, and the expensive ones if asked: head masking on validation data, and
        (MNIST rows) prediction agreement and accuracy with the whole test set's rows permuted. A token
        task (copy) also gets `final/acc_by_position` in probes.npz: test accuracy at each emitted
        position (ablate.probes.accuracy_by_position), one pass over the test set."""
        kw: dict[str, Any] = {}
        if expensive:
            x, y = datamodule.val_set.tensors()
            kw = {"expensive": True, "val_loader": _chunks(x[:EXPENSIVE_EXAMPLES], y[:EXPENSIVE_EXAMPLES], min(512, self.chunk))}
        named = self._measure(model, "final", trainer, **kw)
        if datamodule.kind == "tokens":  # where the errors sit: one pass over the test set, cheap
            started = time.perf_counter()
            by_position = accuracy_by_position(model, _chunks(*datamodule.test_set.tensors(), self.chunk))
            self.seconds += time.perf_counter() - started
            self.arrays["final/acc_by_position"] = by_position
            self._write()
        if expensive and datamodule.kind == "classify":
            started = time.perf_counter()
            order = order_sensitivity(model, _chunks(*datamodule.test_set.tensors(), self.chunk), self.permutation)
            self.seconds += time.perf_counter() - started
            extra = {f"probe/final/test_{k}": v for k, v in order.items()}
            self.scalars.update(extra)
            self._write()
            if trainer is not None:
                self._log(trainer, extra, None, "final")
            named.update(extra)
        self._log_table(trainer, named)
        return named

    def _log_table(self, trainer: pl.Trainer | None, named: dict[str, float]) -> None:
        """W&B: the final probes as one Table "probes/final" (probe, value), sortable in the UI."""
        rows = [[k.removeprefix("probe/final/"), float(v)] for k, v in sorted(named.items())]
        for logger in _wandb(trainer):
            logger.log_table(TABLE, columns=["probe", "value"], data=rows, step=trainer.global_step)


def _chunks(x: torch.Tensor, y: torch.Tensor, size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A whole split as a list of large batches: evaluation without DataLoader overhead."""
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(x), size)]


def _wandb(trainer: pl.Trainer | None) -> list:
    """The trainer's W&B loggers (none without a trainer or with tracking=none)."""
    if trainer is None:
        return []
    from pytorch_lightning.loggers import WandbLogger

    return [logger for logger in trainer.loggers if isinstance(logger, WandbLogger)]


def _read_header(path: Path) -> list[str] | None:
    with open(path, newline="") as f:
        return next(csv.reader(f), None)


def _whole_rows(text: str, last_step: int) -> list[str]:
    """The header and the rows of a probes.csv `text` up to step `last_step`, each a whole line with
    as many fields as the header, steps increasing; [] without a header. Stops at the first other line."""
    lines = text.splitlines(keepends=True)
    if not lines or not lines[0].endswith("\n") or not lines[0].startswith("step,"):
        return []
    width = len(next(csv.reader(lines[:1])))
    kept, previous = lines[:1], -1
    for line in lines[1:]:
        fields = next(csv.reader([line]), [])
        try:
            step = int(fields[0])
        except (IndexError, ValueError):
            break
        if not line.endswith("\n") or len(fields) != width or not previous < step <= last_step:
            break
        kept.append(line)
        previous = step
    return kept
