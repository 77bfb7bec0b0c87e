"""Early termination: W&B's hyperband rule (wandb/sweeps 0.3.0, `hyperband_stopping.py`), applied by the
local runner to the learning-rate stage (stage 1) of a tuned sweep.

A sweep file asks for it in W&B's own key, so the same file still runs under `wandb agent`:

    early_terminate: {type: hyperband, min_iter: 1, eta: 3}

W&B's rule. An iteration is one row of a run's history of the sweep's metric; here one validation,
i.e. one epoch. The bands are `min_iter * eta**k` (k = 0, 1, ...), or with `max_iter` and `s` the
numbers `max_iter / eta**k` for k = 1..s that are at least 1 (each floored). At band b the threshold
is, among the runs whose history has at least b values, the value at b of the one ranked `int(n / eta)`
from the best (0-based: eta 3 keeps the best third and those tied with the threshold). A running
run is stopped at the last band its history has reached when its value there (`strict`, W&B's
default; else its best value so far) is worse than that threshold.

Where ablate applies it differently from W&B's agents, and why:
- Within each variant's stage 1 (its values of the tuned key on the tune seeds), never across
  variants. W&B's controller ranks every run of the sweep together, so a weaker variant (one head
  against eight) would lose its runs at every rate and its own best rate would never be found.
  Stage 2 (the measurement seeds) is never stopped: a stopped run is no measurement.
- In step. Every stage-1 run of a variant trains to the band and waits there, its place saved
  (`paused`); once all of them are there the rule is applied, the losers are recorded `stopped`, the
  others go on to the next band. W&B's controller applies the rule whenever it looks, to whatever the
  runs have logged by then, so its choice depends on which runs happen to be ahead; here it is the
  rule applied to the curves at each band: the same for any number of workers, after a kill and
  rerun, and a run that went on ends with the numbers of one never paused (resume from last.ckpt is
  exact).
- The history of `val/acc_mean` (the mean over epochs, known only at a run's end) is its running mean.

The decisions are recorded in the sweep folder's `hyperband.json` (by variant and band: which runs went
on, which stopped, at what value and threshold), and a stopped run's summary.json says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fileio import atomic_write
from ..runfiles import read_json_object, read_metrics_rows

KEYS = ("type", "min_iter", "max_iter", "s", "eta", "strict")  # W&B's schema: hyperband_stopping
EXAMPLE = "early_terminate: {type: hyperband, min_iter: 1, eta: 3}"
MAX_BANDS = 100  # W&B's min_iter form makes this many
LEDGER = "hyperband.json"
PAUSE_ENV = "ABLATE_PAUSE_AFTER_EPOCH"  # the runner asks a run to pause after this many epochs


class HyperbandError(ValueError):
    """A bad early_terminate block: one line naming the problem and, after '; ', the fix."""


@dataclass(frozen=True)
class Hyperband:
    bands: tuple[int, ...]
    eta: float
    strict: bool = True

    def next_band(self, after: int, epochs: int) -> int | None:
        """The first band past `after` epochs and before a run's last (`epochs`): a run is never held after its
        last epoch (it would be stopped untested, or resumed only to be tested), or None."""
        return next((b for b in self.bands if after < b < epochs), None)

    def as_dict(self) -> dict[str, Any]:
        return {"bands": list(self.bands), "eta": self.eta, "strict": self.strict}

    def within(self, epochs: int) -> tuple[int, ...]:
        """The bands a run of `epochs` epochs is held at: those before its last epoch."""
        return tuple(b for b in self.bands if b < epochs)

    def describe(self, epochs: int) -> str:
        shown = ", ".join(map(str, self.within(epochs)))
        rule = "value at the band" if self.strict else "best value so far"
        return (f"early termination (W&B's hyperband, within each variant's stage 1): after epoch {shown}, a run whose "
                f"{rule} is worse than the top 1/{self.eta:g} of those at the band stops, the rest go on")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def bands(min_iter: int | None = None, max_iter: int | None = None, s: int | None = None, eta: float = 3) -> list[int]:
    """W&B's bands: from min_iter up by factors of eta, or from max_iter down s times (those >= 1)."""
    if max_iter is not None:
        out, band = [], float(max_iter)
        for _ in range(int(s or 0)):
            band /= eta
            if band < 1:
                break
            out.append(int(band))
        return sorted(out)
    assert min_iter is not None
    out, band = [], float(min_iter)
    for _ in range(MAX_BANDS):  # W&B makes 100; past 1e9 epochs (a large eta) none could ever apply
        if band > 1e9:
            break
        out.append(int(band))
        band *= eta
    return out


def parse(where: str, block: Any, tuned: bool) -> Hyperband:
    """The early_terminate block of a sweep file, checked as W&B's schema does, for a tuned sweep only."""
    if not isinstance(block, dict):
        raise HyperbandError(f"{where}: early_terminate must be a mapping; write e.g. {EXAMPLE}")
    for key in block:
        if key not in KEYS:
            raise HyperbandError(f"{where}: early_terminate has no key {key!r} (W&B's schema allows "
                                 f"{', '.join(KEYS)}); remove it")
    if block.get("type") != "hyperband":
        raise HyperbandError(f"{where}: early_terminate type={block.get('type')!r}; W&B's only type is hyperband: "
                             f"write e.g. {EXAMPLE}")
    for key in ("min_iter", "max_iter", "s"):
        value = block.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise HyperbandError(f"{where}: early_terminate {key}={value!r}; expected an integer >= 1")
    eta = block.get("eta", 3)
    if not _number(eta) or eta <= 1:
        raise HyperbandError(f"{where}: early_terminate eta={eta!r}; expected a number > 1 (each band keeps "
                             "the top 1/eta of the runs)")
    strict = block.get("strict", True)
    if not isinstance(strict, bool):
        raise HyperbandError(f"{where}: early_terminate strict={strict!r}; expected true or false")
    if block.get("max_iter") is not None:
        if block.get("s") is None:
            raise HyperbandError(f"{where}: early_terminate max_iter needs s (how many bands below it, W&B's "
                                 "schema); add e.g. s: 2, or give min_iter instead")
        found = bands(max_iter=block["max_iter"], s=block["s"], eta=eta)
    elif block.get("min_iter") is not None:
        found = bands(min_iter=block["min_iter"], eta=eta)
    else:
        raise HyperbandError(f"{where}: early_terminate needs min_iter, or max_iter and s (W&B's schema); "
                             f"write e.g. {EXAMPLE}")
    if not found:
        raise HyperbandError(f"{where}: early_terminate max_iter={block['max_iter']} over eta={eta:g} gives no band "
                             "of at least 1 epoch; raise max_iter or lower eta")
    if not tuned:
        raise HyperbandError(f"{where}: early_terminate stops runs of the learning-rate stage of a tuned sweep, and "
                             "this sweep is not tuned: every run is a measurement, and a stopped one would be none; "
                             "add a description line `tune optim.lr on seeds 0`, or remove early_terminate")
    return Hyperband(bands=tuple(found), eta=float(eta), strict=strict)


@dataclass(frozen=True)
class Stop:
    band: int
    value: float  # the run's value the rule compared (at the band, or its best so far)
    threshold: float

    def as_dict(self) -> dict[str, Any]:
        return {"band": self.band, "value": self.value, "threshold": self.threshold}


def thresholds(histories: Sequence[Sequence[float]], rule: Hyperband) -> list[float]:
    """Per band, W&B's threshold on histories oriented so that smaller is better (inf: no run reached it)."""
    out = []
    for band in rule.bands:
        values = sorted(h[band - 1] for h in histories if len(h) >= band)
        out.append(values[int((1.0 / rule.eta) * len(values))] if values else math.inf)  # W&B's r * n
    return out


def to_stop(histories: Mapping[str, Sequence[float]], running: set[str] | frozenset[str], rule: Hyperband,
            maximize: bool) -> dict[str, Stop]:
    """W&B's `hyperband_stop_runs`: of the `running` runs, those to stop, given every run's history of the
    metric (NaN and infinite values dropped, as W&B's `filter_invalid`)."""
    sign = -1.0 if maximize else 1.0
    oriented = {k: [sign * float(x) for x in h if math.isfinite(x)] for k, h in histories.items()}
    limits = thresholds([h for h in oriented.values() if h], rule)
    out: dict[str, Stop] = {}
    for name in histories:
        h = oriented[name]
        if name not in running or not h:
            continue
        reached = [(b, t) for b, t in zip(rule.bands, limits) if b <= len(h)]
        if not reached:
            continue
        band, threshold = reached[-1]
        value = h[band - 1] if rule.strict else min(h)
        if value > threshold:
            out[name] = Stop(band, sign * value, sign * threshold)
    return out


def history(run_dir: Path, metric: str) -> list[float]:
    """A run's per-epoch history of `metric` from its metrics.csv (val/acc_mean: the running mean of val/acc)."""
    rows = read_metrics_rows(run_dir / "metrics.csv") or []
    column = "val/acc" if metric == "val/acc_mean" else metric
    values = [float(r[column]) for r in rows if r.get(column) not in (None, "")]
    if metric == "val/acc_mean":
        values = [sum(values[: i + 1]) / (i + 1) for i in range(len(values))]
    return values


def read_ledger(folder: Path, rule: Hyperband) -> dict[str, Any]:
    """The decisions made so far under `rule` (by variant, then band); none when they were made under another
    early_terminate block (the file is then rewritten with the next decision)."""
    data = read_json_object(folder / LEDGER) or {}
    return data.get("decisions", {}) if data.get("rule") == rule.as_dict() else {}


def write_ledger(folder: Path, rule: Hyperband, decisions: dict[str, Any]) -> None:
    import json

    atomic_write(folder / LEDGER, json.dumps({"rule": rule.as_dict(), "decisions": decisions}, indent=1,
                                             sort_keys=True) + "\n")
