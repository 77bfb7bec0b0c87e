"""A sweep file: a plain W&B sweep configuration, read, checked and expanded into runs.

The same file works for `wandb sweep FILE` + `wandb agent` and for `ablate sweep FILE`, so nothing
outside W&B's schema is accepted: top-level keys and parameter keys are W&B's, parameter names are
`ablate train` keys. Everything that can be wrong with a file is found here, before any run: YAML
syntax, unknown keys, an unsupported method, an empty grid, and any expanded configuration that
does not build (`ablate.config.build` is run on every one of them).

Expansion: `grid` is the product of every parameter's values, in file order; `random` draws
`run_cap` configurations with a fixed seed (reproducible), without repeating one.
"""

from __future__ import annotations

import difflib
import itertools
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .. import config as C
from ..budgets import SMOKE_SEEDS

# https://docs.wandb.ai/models/sweeps/sweep-config-keys
TOP_LEVEL_KEYS = ("program", "command", "method", "metric", "parameters", "name", "description",
                  "project", "entity", "early_terminate", "run_cap")
PARAMETER_KEYS = ("value", "values", "distribution", "probabilities", "min", "max", "mu", "sigma",
                  "q", "a", "b", "parameters")
METHODS = ("grid", "random")  # bayes needs W&B's server-side model
# Keys that say where a run is recorded; the runner sets them, a sweep file must not.
RESERVED = {
    "run.dir": "every run of a sweep gets its own directory ($ABLATE_RUNS_DIR/<sweep>/<run id>)",
}
SWEEPS_DIR = Path("sweeps")


class SweepError(ValueError):
    """A bad sweep file or option: the message names the problem and, after '; ', the fix."""


@dataclass(frozen=True)
class Run:
    """One expanded configuration of a sweep."""

    index: int  # position in the expansion (1-based), for messages
    params: dict[str, Any]  # the sweep's values for this run (file keys, after --budget)
    cfg: C.Config
    run_id: str

    def label(self, keys: list[str] | None = None) -> str:
        keys = list(self.params) if keys is None else keys
        return " ".join(f"{k}={self.params[k]}" for k in keys if k in self.params)


@dataclass(frozen=True)
class Sweep:
    name: str  # file stem: the run group and the folder under $ABLATE_RUNS_DIR
    path: Path
    method: str
    spec: dict[str, Any]  # the file as loaded
    runs: list[Run]
    varying: list[str]  # parameter names that take more than one value (for short labels)


def resolve(name_or_path: str) -> Path:
    """A path to a .yaml file, or a bare name found as sweeps/NAME.yaml (here or in the repository)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    if path.suffix == "" and len(path.parts) == 1:
        repo = Path(__file__).resolve().parents[2] / SWEEPS_DIR
        for folder in (SWEEPS_DIR, repo):
            if (folder / f"{name_or_path}.yaml").is_file():
                return folder / f"{name_or_path}.yaml"
    known = sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml")) if SWEEPS_DIR.is_dir() else []
    hint = f"give a path or one of: {', '.join(known)}" if known else "give the path of a sweep .yaml file"
    raise SweepError(f"no sweep file {name_or_path!r}; {hint}")


def read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "syntax error"
        raise SweepError(f"{path} is not valid YAML{where} ({problem}); fix its syntax") from None
    if not isinstance(data, dict):
        raise SweepError(f"{path} must hold a mapping (program, method, parameters, ...); "
                         "see sweeps/*.yaml for examples")
    return data


def _closest(word: str, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean {close[0]}?" if close else f"allowed: {', '.join(choices)}"


def check_top_level(path: Path, spec: dict[str, Any]) -> None:
    for key in spec:
        if key not in TOP_LEVEL_KEYS:
            raise SweepError(f"{path}: unknown top-level key {key!r} (W&B's schema allows no others); "
                             f"{_closest(str(key), TOP_LEVEL_KEYS)}")
    method = spec.get("method")
    if method == "bayes":
        raise SweepError(f"{path}: method bayes needs W&B's server; run it with `wandb sweep {path}` "
                         "and `wandb agent`, or use method grid or random here")
    if method not in METHODS:
        raise SweepError(f"{path}: method={method!r} is not allowed; use grid or random")
    params = spec.get("parameters")
    if not isinstance(params, dict) or not params:
        raise SweepError(f"{path}: 'parameters' must be a non-empty mapping of ablate train keys; "
                         "e.g. parameters: {model.n_heads: {values: [1, 4]}}")
    if method == "random":
        cap = spec.get("run_cap")
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise SweepError(f"{path}: method random needs run_cap (an integer >= 1, W&B's own key) "
                             "to know how many runs to draw; add e.g. run_cap: 20")


def check_parameter(path: Path, name: str, p: Any, method: str) -> None:
    where = f"{path}: parameter {name!r}"
    if name not in C.all_keys():
        raise SweepError(f"{where} is not an ablate train key; {_closest(str(name), C.all_keys())} "
                         "(`ablate keys` lists them all)")
    if name in RESERVED:
        raise SweepError(f"{where} cannot be swept: {RESERVED[name]}; remove it")
    if not isinstance(p, dict):
        raise SweepError(f"{where} must be a mapping; write {{value: {p!r}}} or {{values: [...]}}")
    for key in p:
        if key not in PARAMETER_KEYS:
            raise SweepError(f"{where}: unknown key {key!r} (W&B's schema allows no others); "
                             f"{_closest(str(key), PARAMETER_KEYS)}")
    if "parameters" in p:
        raise SweepError(f"{where}: nested parameters are not ablate train keys; "
                         "write dotted names instead, e.g. model.n_heads: {values: [1, 4]}")
    if "values" in p:
        values = p["values"]
        if not isinstance(values, list):
            raise SweepError(f"{where}: values must be a list; write values: [{values!r}] or value: {values!r}")
        if not values:
            raise SweepError(f"{where}: values is empty, so the sweep has no runs; give at least one value")
    if method == "grid" and not ("value" in p or "values" in p):
        raise SweepError(f"{where}: a grid needs value or values; list the values, "
                         "or use method: random for a distribution")


def check_group(path: Path, name: str, params: dict[str, Any]) -> None:
    """run.group is the sweep name (the file stem): W&B agents and the local runner must agree."""
    p = params.get("run.group")
    if p is None:
        return
    values = p.get("values", [p.get("value")])
    if any(str(v) != name for v in values):
        raise SweepError(f"{path}: run.group must be the sweep name {name!r} (the file's stem), "
                         f"not {values if len(values) > 1 else values[0]!r}; "
                         f"set run.group: {{value: {name}}} or rename the file")


# Random draws: each takes the parameter's spec and a random.Random.
def _categorical(p: dict, rng: random.Random) -> Any:
    values = p["values"]
    weights = p.get("probabilities")
    if weights is None:
        return values[rng.randrange(len(values))]
    return rng.choices(values, weights=weights)[0]


def _quantise(x: float, q: float) -> float:
    return round(x / q) * q


def _q(p: dict) -> float:
    return p.get("q", 1)


DISTRIBUTIONS = {
    "constant": lambda p, rng: p["value"],
    "categorical": _categorical,
    "int_uniform": lambda p, rng: rng.randint(int(p["min"]), int(p["max"])),
    "uniform": lambda p, rng: rng.uniform(p["min"], p["max"]),
    "q_uniform": lambda p, rng: _quantise(rng.uniform(p["min"], p["max"]), _q(p)),
    "log_uniform": lambda p, rng: math.exp(rng.uniform(p["min"], p["max"])),
    "log_uniform_values": lambda p, rng: math.exp(rng.uniform(math.log(p["min"]), math.log(p["max"]))),
    "q_log_uniform": lambda p, rng: _quantise(math.exp(rng.uniform(p["min"], p["max"])), _q(p)),
    "q_log_uniform_values": lambda p, rng: _quantise(
        math.exp(rng.uniform(math.log(p["min"]), math.log(p["max"]))), _q(p)),
    "inv_log_uniform": lambda p, rng: math.exp(-rng.uniform(p["min"], p["max"])),
    "inv_log_uniform_values": lambda p, rng: 1 / math.exp(
        rng.uniform(math.log(1 / p["max"]), math.log(1 / p["min"]))),
    "normal": lambda p, rng: rng.gauss(p.get("mu", 0.0), p.get("sigma", 1.0)),
    "q_normal": lambda p, rng: _quantise(rng.gauss(p.get("mu", 0.0), p.get("sigma", 1.0)), _q(p)),
    "log_normal": lambda p, rng: math.exp(rng.gauss(p.get("mu", 0.0), p.get("sigma", 1.0))),
    "q_log_normal": lambda p, rng: _quantise(math.exp(rng.gauss(p.get("mu", 0.0), p.get("sigma", 1.0))), _q(p)),
}
NEEDS = {name: ("min", "max") for name in DISTRIBUTIONS if "uniform" in name}
NEEDS.update(categorical=("values",), constant=("value",))


def distribution(path: Path, name: str, p: dict) -> str:
    """The W&B distribution of a random parameter (W&B's inference when none is named)."""
    if "distribution" in p:
        dist = p["distribution"]
    elif "values" in p:
        dist = "categorical"
    elif "value" in p:
        dist = "constant"
    elif "min" in p and "max" in p:
        ints = all(isinstance(p[k], int) and not isinstance(p[k], bool) for k in ("min", "max"))
        dist = "int_uniform" if ints else "uniform"
    else:
        raise SweepError(f"{path}: parameter {name!r} needs value, values or a distribution with "
                         "min and max; add them")
    if dist not in DISTRIBUTIONS:
        raise SweepError(f"{path}: parameter {name!r}: distribution {dist!r} is not supported by the "
                         f"local runner; use one of {', '.join(DISTRIBUTIONS)}, or a W&B agent")
    for key in NEEDS.get(dist, ()):
        if key not in p:
            raise SweepError(f"{path}: parameter {name!r}: distribution {dist} needs {key}; add it")
    probs = p.get("probabilities")
    if probs is not None and (not isinstance(probs, list) or len(probs) != len(p.get("values", []))):
        raise SweepError(f"{path}: parameter {name!r}: probabilities must be a list as long as values; fix it")
    return dist


def grid(params: dict[str, dict]) -> list[dict[str, Any]]:
    names = list(params)
    axes = [params[n]["values"] if "values" in params[n] else [params[n]["value"]] for n in names]
    return [dict(zip(names, combo)) for combo in itertools.product(*axes)]


def draw(path: Path, params: dict[str, dict], run_cap: int, seed: int) -> list[dict[str, Any]]:
    """run_cap distinct draws (fewer only when the space is smaller), reproducible for a given seed."""
    dists = {n: distribution(path, n, p) for n, p in params.items()}
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for _ in range(100 * run_cap):
        if len(out) == run_cap:
            break
        combo = {n: DISTRIBUTIONS[d](params[n], rng) for n, d in dists.items()}
        key = repr(sorted(combo.items()))
        if key not in seen:
            seen.add(key)
            out.append(combo)
    return out


def load(name_or_path: str, budget: str | None = None, tracking: str | None = None,
         threads: int | None = None, seed: int = 0, default_threads: int = 1) -> Sweep:
    """Read, check and expand a sweep file. `budget`, `tracking`, `threads` (the command line's
    options) override the file's values for every run (trainer.threads is `default_threads` where
    neither sets it); with budget smoke the seed list becomes SMOKE_SEEDS; `seed` seeds method
    random. Raises SweepError (bad file) or ConfigError (a configuration that does not build)."""
    path = resolve(name_or_path)
    name = path.stem
    spec = read(path)
    check_top_level(path, spec)
    method = spec["method"]
    params: dict[str, dict] = spec["parameters"]
    for key, p in params.items():
        check_parameter(path, str(key), p, method)
    check_group(path, name, params)
    if method == "grid":
        combos = grid(params)
    else:
        combos = draw(path, params, spec["run_cap"], seed)
    runner_keys: dict[str, Any] = {"run.group": name}
    if tracking is not None:
        runner_keys["tracking"] = tracking
    if budget is not None:
        runner_keys["budget"] = budget
    runs: list[Run] = []
    ids: set[str] = set()
    for combo in combos:
        combo = {**combo, **{k: v for k, v in runner_keys.items() if k in combo}}
        overrides = {**combo, **runner_keys}
        if threads is not None or "trainer.threads" not in overrides:
            overrides["trainer.threads"] = threads or default_threads
        for variant in _smoke_seeds(combo, overrides):
            cfg = _build(path, len(runs) + 1, variant)
            rid = C.run_id(cfg)
            if rid in ids:  # e.g. several seeds mapped to SMOKE_SEEDS, or a repeated value
                continue
            ids.add(rid)
            params_shown = {k: variant[k] for k in combo}
            runs.append(Run(index=len(runs) + 1, params=params_shown, cfg=cfg, run_id=rid))
    if not runs:
        raise SweepError(f"{path}: the sweep expands to no runs; give each parameter at least one value")
    varying = [k for k in params if len({repr(r.params.get(k)) for r in runs}) > 1]
    return Sweep(name=name, path=path, method=method, spec=spec, runs=runs, varying=varying)


def _smoke_seeds(combo: dict[str, Any], overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """Budget smoke runs the seeds in SMOKE_SEEDS only (the one axis a budget may change)."""
    budget = str(overrides.get("budget", "none")).strip()
    if budget != "smoke" or "seed" not in combo:
        return [overrides]
    return [{**overrides, "seed": s} for s in SMOKE_SEEDS]


def _build(path: Path, index: int, overrides: dict[str, Any]) -> C.Config:
    try:
        return C.build(overrides)
    except C.ConfigError as err:
        shown = " ".join(f"{k}={v}" for k, v in overrides.items() if k not in ("run.group", "trainer.threads"))
        raise C.ConfigError(f"{path}: run {index} ({shown}) does not build: {err}") from None
