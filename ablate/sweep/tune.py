"""Fair tuning: each variant of a sweep at its own best value of one key (the learning rate), chosen
on validation, in two stages.

A sweep file says so in one line of W&B's own `description` field, because W&B's sweep schema
(wandb/sweeps, config/schema.json) has `additionalProperties: false` at the top level and passes
every parameter to the program, so neither a `tune:` block nor a reserved parameter would stay a
plain W&B sweep file:

    description: |
      Q2: does the 1/sqrt(d_k) scaling matter?
      tune optim.lr on seeds 0 1
    metric: {name: val/acc_best, goal: maximize}      # W&B's own: what to choose by, and which way
    parameters:
      optim.lr: {values: [0.0001, 0.0003, 0.001, 0.003]}   # the values tried: a grid parameter
      seed: {values: [0, 1, 2, 3, 4]}

Stage 1 runs every variant (every combination of the other grid keys) at every value of the key on
the tune seeds. A variant's value is chosen once all its stage-1 runs are finished: the best mean
of the metric over the tune seeds; a diverged run, or one without a finite metric, counts as the
worst possible (so a value that diverged on any tune seed loses to every value that did not); ties
go to the smaller value. Stage 2 runs the grid's other seeds at the chosen value. A failed run
(an error, not a measurement) is retried by the next invocation like any failed run, so a choice
waits for it instead of counting it, and stage-2 runs are never started at a value a retry could
change.

A gate, `tune optim.lr on seeds 0 where val/acc_best >= 0.99`, makes the choice among the values that meet a
premise on every tune seed (a finished run whose gate metric is finite and on the right side of the bound):
a test that presumes the model learned the task is then run at a rate where it did, chosen among those by the
metric as before. When no value meets the gate on every tune seed, every value competes (the choice line says
so, and the test's own premise check decides what that means).

W&B agents run the whole grid (every value on every seed); the results table applies the same
choice to their runs (tune seeds only), so both tables agree.

`choose` is the one rule (with `score`): the runner applies it to summary.json files, the results table to its
rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import config as C

LINE = re.compile(r"^tune\b")
SENTENCE = re.compile(r"^tune\s+(?P<key>\S+)\s+on\s+seeds?\s+(?P<seeds>\d+(?:\s*[,\s]\s*\d+)*)"
                      r"(?:\s+where\s+(?P<gate>.*?))?\s*$")
GATE = re.compile(r"^(?P<metric>\S+)\s*(?P<op>>=|<=)\s*(?P<bound>\S+)$")
EXAMPLE = "tune optim.lr on seeds 0 1"
GATE_EXAMPLE = "tune optim.lr on seeds 0 where val/acc_best >= 0.99"
# The floor for learning rates (issue 13): at least this many values, spanning at least this factor.
LR_KEY = "optim.lr"
MIN_LR_VALUES = 4
MIN_LR_SPAN = 30.0


# The validation metrics every run's summary.json holds (ablate.tasks logs them; val/seq_acc: token
# tasks only). A test checks a real run logs each; the results table's val/gain_last_epoch and
# val/step_solved come from metrics.csv, which the runner does not read, so they cannot be tuned on.
# val/acc_mean: the mean over epochs (ablate.train.learning_curve), which ranks by speed where every
# value solves the task.
METRICS = ("val/acc", "val/acc_best", "val/acc_mean", "val/loss", "val/seq_acc")


class TuneError(ValueError):
    """A tune line that cannot be used; the message names the problem and, after '; ', the fix."""


@dataclass(frozen=True)
class Gate:
    """The premise a value must meet on every tune seed to be chosen: `metric op bound`."""
    metric: str  # a val/ metric in METRICS
    op: str  # ">=" or "<="
    bound: float

    def passes(self, value: Any, status: str | None) -> bool:
        """A finished run meets the gate: completed, its metric finite and on the bound's side."""
        try:
            x = float(value)
        except (TypeError, ValueError):
            return False
        if status != "completed" or not math.isfinite(x):
            return False
        return x >= self.bound if self.op == ">=" else x <= self.bound

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.bound:g}"


@dataclass(frozen=True)
class Tune:
    key: str  # the tuned config key, e.g. optim.lr
    values: tuple  # its distinct typed values, ascending
    seeds: tuple[int, ...]  # the tune seeds (stage 1) as the file lists them
    metric: str  # chosen by this metric (W&B's metric.name), a val/ metric
    maximize: bool  # W&B's metric.goal
    gate: Gate | None = None  # chosen only among values meeting it on every tune seed (when any does)

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "values": list(self.values), "seeds": list(self.seeds), "metric": self.metric,
                "goal": "maximize" if self.maximize else "minimize",
                **({"gate": str(self.gate)} if self.gate is not None else {})}

    @property
    def column(self) -> str:
        """The results table's column holding each row's chosen value."""
        return f"tuned.{self.key}"


def tune_line(description: Any) -> str | None:
    """The description's line that starts with the word `tune` (None: the sweep is not tuned)."""
    if not isinstance(description, str):
        return None
    lines = [line.strip() for line in description.splitlines() if LINE.match(line.strip())]
    if len(lines) > 1:
        raise TuneError(f"the description has {len(lines)} lines starting with 'tune'; keep one ({EXAMPLE!r})")
    return lines[0] if lines else None


def _number(value: Any) -> Any:
    """A value as YAML or a W&B agent may spell it ('1e-4' is text to YAML): a float where it reads as one."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def parse_tune(path: Path | str, spec: Mapping[str, Any]) -> Tune | None:
    """The tune line of a sweep file's mapping, checked against its grid (TuneError: one line with the
    fix); None when the description has no tune line. Builds no config: `values` are the file's
    (numbers where they read as numbers); the runner takes the typed ones from its runs."""
    line = tune_line(spec.get("description"))
    if line is None:
        return None
    where = f"{path}: {line!r}"
    match = SENTENCE.match(line)
    if match is None:
        raise TuneError(f"{where} is not a tune line; write it as {EXAMPLE!r} (the key, then the tune seeds)")
    key = match.group("key")
    seeds = tuple(dict.fromkeys(int(s) for s in re.split(r"[,\s]+", match.group("seeds").strip())))
    if spec.get("method") != "grid":
        raise TuneError(f"{where}: tuning needs method grid (stage 2 depends on stage 1); use method: grid")
    params = spec.get("parameters") if isinstance(spec.get("parameters"), dict) else {}
    if key == "seed":
        raise TuneError(f"{where}: the seed cannot be tuned; tune a setting such as optim.lr")
    if key not in C.all_keys(None):
        raise TuneError(f"{where}: {key!r} is not an ablate train key; name a key of the grid, e.g. optim.lr")
    p = params.get(key)
    if not isinstance(p, dict) or not isinstance(p.get("values"), list) or len(p["values"]) < 2:
        raise TuneError(f"{where}: {key} must be a grid parameter with the values to try; "
                        f"add e.g. {key}: {{values: [0.0001, 0.0003, 0.001, 0.003]}}")
    try:
        values = tuple(sorted(dict.fromkeys(_number(v) for v in p["values"])))
    except TypeError:
        raise TuneError(f"{where}: the values of {key} cannot be ordered; give numbers") from None
    if key == LR_KEY:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
            raise TuneError(f"{where}: {key} values must be positive numbers, got {list(values)}; fix them")
        span = values[-1] / values[0]
        if len(values) < MIN_LR_VALUES or span < MIN_LR_SPAN:
            raise TuneError(f"{where}: {key} has {len(values)} values spanning {span:.3g}x; a fair comparison "
                            f"tries at least {MIN_LR_VALUES} values spanning at least {MIN_LR_SPAN:g}x "
                            "(e.g. 0.0001, 0.0003, 0.001, 0.003)")
    s = params.get("seed")
    grid_seeds = s.get("values", [s.get("value")]) if isinstance(s, dict) else None
    if not isinstance(grid_seeds, list):
        raise TuneError(f"{where}: the grid has no seed parameter; add e.g. seed: {{values: [0, 1, 2, 3, 4]}}")
    try:
        known = {int(str(v)) for v in grid_seeds}
    except ValueError:
        known = set()
    missing = [x for x in seeds if x not in known]
    if missing:
        raise TuneError(f"{where}: tune seed(s) {', '.join(map(str, missing))} are not among the grid's seeds "
                        f"{grid_seeds}; tune on seeds the grid runs")
    metric = spec.get("metric")
    name = metric.get("name") if isinstance(metric, dict) else None
    goal = metric.get("goal") if isinstance(metric, dict) else None
    if not isinstance(name, str) or goal not in ("maximize", "minimize"):
        raise TuneError(f"{where}: tuning chooses by W&B's metric; add metric: {{name: val/acc_best, goal: maximize}} "
                        "(goal spelled out: W&B's default is minimize)")
    if not name.startswith("val/"):
        raise TuneError(f"{where}: metric {name!r} is not a validation metric; choose on validation "
                        "(e.g. val/acc_best), never on test")
    if name not in METRICS:  # a misspelt name would score every run worst and pick the smallest value
        raise TuneError(f"{where}: metric {name!r} is not one a run logs in summary.json; choose one of "
                        f"{', '.join(METRICS)}")
    return Tune(key=key, values=values, seeds=seeds, metric=name, maximize=goal == "maximize",
                gate=_gate(where, match.group("gate")))


def _gate(where: str, text: str | None) -> Gate | None:
    if text is None:
        return None
    match = GATE.match(text.strip())
    if match is None:
        raise TuneError(f"{where}: the gate {text.strip()!r} is not 'METRIC >= NUMBER' or 'METRIC <= NUMBER'; "
                        f"write it as {GATE_EXAMPLE!r}")
    metric, op = match.group("metric"), match.group("op")
    if metric not in METRICS:
        raise TuneError(f"{where}: the gate's metric {metric!r} is not one a run logs in summary.json; gate on one "
                        f"of {', '.join(METRICS)}")
    try:
        bound = float(match.group("bound"))
    except ValueError:
        bound = math.nan
    if not math.isfinite(bound):
        raise TuneError(f"{where}: the gate's bound {match.group('bound')!r} is not a finite number; "
                        f"write it as {GATE_EXAMPLE!r}")
    return Gate(metric=metric, op=op, bound=bound)


def stage1_seeds(tune: Tune, seeds: Iterable[int]) -> tuple[int, ...]:
    """The tune seeds a sweep's expansion has (`seeds`: every seed of its runs); all of them when it has
    none of the tune seeds (budget smoke keeps seed 0 only: then stage 1 is everything, stage 2 nothing)."""
    have = set(seeds)
    return tuple(s for s in tune.seeds if s in have) or tuple(sorted(have))


def worst(maximize: bool) -> float:
    return -math.inf if maximize else math.inf


def score(value: Any, status: str | None, maximize: bool) -> float:
    """A finished run's score: its metric, or the worst possible when it diverged, was stopped by early termination
    (its metric is an earlier epoch's: it could beat the runs that went on and later overfit) or has no finite
    metric."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return worst(maximize)
    return x if status == "completed" and math.isfinite(x) else worst(maximize)


def choose(scores: Mapping[Any, Sequence[float]], maximize: bool, passed: Mapping[Any, bool] | None = None) -> Any:
    """The value whose mean score is best (a worst score in a value's list makes its mean the worst);
    ties, the all-worst case included, go to the smaller value. With `passed` (a gate: value -> met on
    every tune seed), only the values that passed compete, or all of them when none did."""
    def mean(xs: Sequence[float]) -> float:
        if not xs or any(math.isinf(x) for x in xs):
            return worst(maximize)
        return sum(xs) / len(xs)

    pool = [v for v in scores if passed and passed.get(v)] or list(scores)
    ranked = sorted(pool, key=lambda v: ((-1 if maximize else 1) * mean(scores[v]), v))
    return ranked[0]


def gate_phrase(gate: Gate | None, passed: Mapping[Any, bool]) -> str:
    """For a choice line: '; among the values with val/acc_best >= 0.99 on every tune seed: 0.001, 0.003'
    or '; no value met val/acc_best >= 0.99 on every tune seed, so all competed'; '' without a gate."""
    if gate is None:
        return ""
    met = [v for v, ok in passed.items() if ok]
    if not met:
        return f"; no value met {gate} on every tune seed, so all competed"
    return f"; among the values with {gate} on every tune seed: {', '.join(f'{v:g}' if isinstance(v, float) else str(v) for v in met)}"


def variant(params: Mapping[str, Any], key: str) -> str:
    """A run's variant: its sweep values other than the tuned key and the seed, as a label."""
    return " ".join(f"{k}={v}" for k, v in params.items() if k not in (key, "seed")) or "(one variant)"


def shown(value: float) -> str:
    """A score in a message: 0.9731, or 'diverged' for the worst."""
    return "diverged" if math.isinf(value) else f"{value:.4g}"
