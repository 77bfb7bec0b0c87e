"""What a sweep would cost at another budget, from what its runs cost here.

For every run a sweep file defines at the target budget (default full): its optimiser steps
(epochs x batches per epoch, from its config), and the seconds per step its variant measured in the
exported table (train_samples_per_s / batch size, same swept values, any seed). CPU hours are
those measured seconds per step times the steps: one worker thread of the machine the table came
from. GPU hours are not measured (no GPU was lent to the machine that made the committed data): they
are given for an assumed range of steps per second, GPU_STEPS_PER_S, which is what small models like
these typically reach when each step is bound by kernel launches and Lightning's per-step overhead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..registry import TASKS
from ..registry import spec as task_spec

GPU_STEPS_PER_S = (100, 300)  # assumed, not measured: see the module docstring


@dataclass(frozen=True)
class Cost:
    sweep: str
    budget: str
    runs: int
    epochs: str  # "mnist 20, copy 30"
    steps: int  # optimiser steps of all runs
    cpu_hours: float | None  # one thread, at the measured seconds per step; None if not measurable
    gpu_hours: tuple[float, float]  # at GPU_STEPS_PER_S (high, low)


def steps_of(cfg) -> int:
    """Optimiser steps of one run: epochs x ceil(training examples / batch), capped by max_steps."""
    n = task_spec(cfg.data.task).train_examples(cfg.data)
    steps = cfg.trainer.max_epochs * math.ceil(n / cfg.data.batch_size)
    return min(steps, cfg.trainer.max_steps) if cfg.trainer.max_steps >= 0 else steps


def _seconds_per_step(df: pd.DataFrame, keys: list[str]) -> dict[tuple, float]:
    """Mean seconds per optimiser step of each variant (swept values other than seed) in the table."""
    if "train_samples_per_s" not in df.columns:
        return {}
    ok = df[df["train_samples_per_s"].notna() & (df["train_samples_per_s"] > 0)]
    if ok.empty:
        return {}
    per_step = (ok["data.batch_size"] if "data.batch_size" in ok else 64) / ok["train_samples_per_s"]
    if not keys:
        return {(): float(per_step.mean())}
    means = per_step.groupby([ok[k].astype(str) for k in keys]).mean()
    return {(k if isinstance(k, tuple) else (k,)): float(v) for k, v in means.items()}


def sweep_cost(name: str, table: pd.DataFrame | None, sweeps: Path | str = "sweeps", budget: str = "full") -> Cost | None:
    """The cost of sweeps/<name>.yaml at `budget`; None when there is no such sweep file."""
    from ..sweep import spec

    path = Path(sweeps) / f"{name}.yaml"
    if not path.is_file():
        return None
    sweep = spec.load(str(path), budget=budget)
    keys = [k for k in sweep.varying if k not in ("seed", "budget")]
    measured = _seconds_per_step(table, keys) if table is not None else {}
    fallback = sum(measured.values()) / len(measured) if measured else None
    steps, cpu_seconds, known = 0, 0.0, bool(measured)
    epochs: dict[str, int] = {}
    for run in sweep.runs:
        n = steps_of(run.cfg)
        steps += n
        epochs.setdefault(run.cfg.data.task, run.cfg.trainer.max_epochs)
        variant = tuple(str(run.params[k]) for k in keys)
        per_step = measured.get(variant, fallback)
        if per_step is None:
            known = False
        else:
            cpu_seconds += n * per_step
    return Cost(
        sweep=name,
        budget=budget,
        runs=len(sweep.runs),
        epochs=", ".join(f"{task} {e}" for task, e in sorted(epochs.items(), key=lambda kv: list(TASKS).index(kv[0]))),
        steps=steps,
        cpu_hours=cpu_seconds / 3600 if known else None,
        gpu_hours=(steps / GPU_STEPS_PER_S[1] / 3600, steps / GPU_STEPS_PER_S[0] / 3600),
    )
