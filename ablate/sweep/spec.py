"""A sweep file: a plain W&B sweep configuration, read, checked and expanded into runs.

The same file works for `wandb sweep FILE` + `wandb agent` and for `ablate sweep FILE`, so nothing
outside W&B's schema is accepted: top-level keys and parameter keys are W&B's, parameter names are
`ablate train` keys. Everything that can be wrong with a file is found here, before any run: YAML
syntax, a binary or oversized file, unknown keys, an unsupported method, an empty grid, a grid of
more than MAX_RUNS runs, a distribution that cannot be drawn from (text or infinite bounds, min > max,
a log scale that reaches 0, probabilities that are negative or do not sum to 1), and any expanded
configuration that does not build (`ablate.config.build` is run on every one of them).

Expansion: `grid` is the product of every parameter's values, in file order (counted before it is
expanded); `random` draws `run_cap` configurations with a fixed seed (reproducible), without
repeating one: a space with fewer distinct configurations gives each once, and says so.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import config as C
from .. import plugins as P
from ..budgets import SMOKE_SEEDS
from ..registry import PLUGIN_MISSING, PLUGIN_MISSING_SWEEP
from ..yamlfile import YamlFileError, read_yaml
from .hyperband import Hyperband, HyperbandError
from .hyperband import parse as parse_hyperband
from .names import display_name
from .tune import Tune, TuneError, parse_tune, stage1_seeds

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
# The most runs one sweep may expand to. Checking a configuration takes ~0.35 ms, so this many take
# ~35 s before anything runs; and at a second a run it is more than a day of training on any machine.
MAX_RUNS = 100_000


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
    notes: tuple[str, ...] = ()  # what the expansion changed and the user should hear (a smaller random space)
    # A tuned sweep (a `tune KEY on seeds ...` line in its description, see ablate.sweep.tune): `runs`
    # is then every configuration the grid defines (what W&B agents run, each checked here), of which the
    # local runner runs stage 1 and, per variant, stage 2 at the chosen value only. `tune.values` are
    # the key's typed values, `tune.seeds` the tune seeds this expansion has.
    tune: Tune | None = None
    early: Hyperband | None = None  # early_terminate (ablate.sweep.hyperband): stage 1 of a tuned sweep only

    def expected_runs(self) -> int:
        """How many runs the local runner makes of this sweep: all of `runs`, or for a tuned sweep its
        stage 1 and, per variant, each other seed once (at whichever value is chosen)."""
        if self.tune is None:
            return len(self.runs)
        stage1 = sum(1 for r in self.runs if r.cfg.seed in self.tune.seeds)
        rest = {(tuple(repr(v) for k, v in r.params.items() if k not in (self.tune.key, "seed")), r.cfg.seed)
                for r in self.runs if r.cfg.seed not in self.tune.seeds}
        return stage1 + len(rest)


def resolve(name_or_path: str) -> Path:
    """A path to a .yaml file, or a bare name found as sweeps/NAME.yaml (here or in the repository)."""
    path = Path(name_or_path)
    try:
        if path.is_file():
            return path
    except OSError as err:  # a name longer than the file system allows: no such file can exist
        raise SweepError(f"no sweep file {name_or_path!r} ({err.strerror}); give a shorter name") from None
    if path.suffix == "" and len(path.parts) == 1:
        repo = Path(__file__).resolve().parents[2] / SWEEPS_DIR
        for folder in (SWEEPS_DIR, repo):
            if (folder / f"{name_or_path}.yaml").is_file():
                return folder / f"{name_or_path}.yaml"
    known = sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml")) if SWEEPS_DIR.is_dir() else []
    hint = f"give a path or one of: {', '.join(known)}" if known else "give the path of a sweep .yaml file"
    raise SweepError(f"no sweep file {name_or_path!r}; {hint}")


def read(path: Path) -> dict[str, Any]:
    try:  # missing, oversized, binary, malformed or aliased (a YAML bomb): one line each
        data = read_yaml(path, "sweep file")
    except YamlFileError as err:
        raise SweepError(str(err)) from None
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


def load_plugins(path: Path, p: Any) -> None:
    """Import and register the plug-ins the sweep's `plugins` parameter names (every value of it), before its
    other parameters are read: their keys and values are the plug-ins'. SweepError, one line, if one cannot be."""
    if not isinstance(p, dict):
        return
    for value in p.get("values", []) if isinstance(p.get("values"), list) else [p.get("value", "")]:
        try:
            P.load(str(value or ""))
        except P.PluginError as err:
            raise SweepError(f"{path}: parameter 'plugins': {err}") from None


def check_parameter(path: Path, name: str, p: Any, method: str) -> None:
    where = f"{path}: parameter {name!r}"
    if name not in C.all_keys(None):
        if "." in name and name.partition(".")[0] not in (*C.builtin_names(), *C.sections(None)):  # a plug-in's, unnamed?
            close = difflib.get_close_matches(name, C.all_keys(None), n=1)
            hint = f"did you mean {close[0]}? {PLUGIN_MISSING_SWEEP[0].upper()}{PLUGIN_MISSING_SWEEP[1:]}" if close \
                else f"`ablate keys` lists them all; {PLUGIN_MISSING_SWEEP}"
            raise SweepError(f"{where} is not an ablate train key; {hint}")
        raise SweepError(f"{where} is not an ablate train key; {_closest(str(name), C.all_keys(None))} "
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
    if "value" in p and "values" in p:  # W&B's grid takes values and drops value; random refuses the pair
        raise SweepError(f"{where} gives both value and values; keep values to sweep it, or value to fix it")
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
# The keys each distribution reads (W&B's schema allows no others beside `distribution`), and those it needs.
USES = {name: ("min", "max", "q") if name.startswith("q_") else ("min", "max")
        for name in DISTRIBUTIONS if "uniform" in name}
USES.update(normal=("mu", "sigma"), q_normal=("mu", "sigma", "q"), log_normal=("mu", "sigma"),
            q_log_normal=("mu", "sigma", "q"), categorical=("values", "probabilities"), constant=("value",))
NEEDS = {name: ("min", "max") for name in DISTRIBUTIONS if "uniform" in name}
NEEDS.update(categorical=("values",), constant=("value",))
POSITIVE_BOUNDS = ("log_uniform_values", "q_log_uniform_values", "inv_log_uniform_values")  # draw log(min)
EXPONENT_BOUNDS = ("log_uniform", "q_log_uniform", "inv_log_uniform")  # min, max are exponents of e
MAX_EXPONENT = math.log(sys.float_info.max)  # ~709.8: exp() of more overflows
MAX_REPEATS = 10_000  # random: give up after this many draws in a row that repeat earlier ones


def distribution(path: Path, name: str, p: dict) -> str:
    """The W&B distribution of a random parameter (W&B's inference when none is named), with every
    value it reads checked (see check_distribution)."""
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
    if not isinstance(dist, str) or dist not in DISTRIBUTIONS:
        raise SweepError(f"{path}: parameter {name!r}: distribution {dist!r} is not supported by the "
                         f"local runner; use one of {', '.join(DISTRIBUTIONS)}, or a W&B agent")
    check_distribution(f"{path}: parameter {name!r}", p, dist)
    return dist


def _number(where: str, key: str, value: Any, integer: bool = False) -> float:
    """`value` as a finite number (an integer if asked), or SweepError naming the key."""
    kind = "an integer" if integer else "a finite number"
    ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    if ok and (isinstance(value, int) or math.isfinite(value)):
        return value
    hint = ""
    if isinstance(value, str):
        try:
            hint = f" (YAML reads {value} as text; write {float(value)!r})"
        except ValueError:
            pass
    raise SweepError(f"{where}: {key}={value!r} is not {kind}{hint}; write {key} as {kind}")


def check_distribution(where: str, p: dict, dist: str) -> None:
    """Everything a distribution reads can be drawn from: numbers (not text, not inf), min <= max,
    a positive min where its log is taken, exponents exp() can take, q > 0, sigma >= 0, and
    probabilities >= 0 that sum to 1 (W&B's schema, and what drawing needs)."""
    for key in p:
        if key != "distribution" and key not in USES[dist]:
            raise SweepError(f"{where}: {key!r} has no meaning for distribution {dist} (it reads "
                             f"{', '.join(USES[dist])}); remove it or choose another distribution")
    for key in NEEDS.get(dist, ()):
        if key not in p:
            raise SweepError(f"{where}: distribution {dist} needs {key}; add it")
    if "min" in USES[dist]:
        low, high = (_number(where, k, p[k], integer=dist == "int_uniform") for k in ("min", "max"))
        if low > high:
            raise SweepError(f"{where}: min={low!r} is greater than max={high!r}; swap them")
        if dist in POSITIVE_BOUNDS and low <= 0:
            raise SweepError(f"{where}: {dist} draws between log(min) and log(max), so min must be > 0, "
                             f"got min={low!r}; give a positive min (e.g. 1.0e-6)")
        if dist in EXPONENT_BOUNDS and max(abs(low), abs(high)) > MAX_EXPONENT:
            raise SweepError(f"{where}: {dist} draws exp(uniform(min, max)) and exp({max(abs(low), abs(high))!r}) "
                             f"overflows; keep min and max within ±{int(MAX_EXPONENT)} (they are exponents), "
                             f"or use {dist}_values to give the values themselves")
    if "q" in p and _number(where, "q", p["q"]) <= 0:
        raise SweepError(f"{where}: q={p['q']!r} must be > 0 (values are rounded to multiples of q); fix it")
    if "mu" in p:
        _number(where, "mu", p["mu"])
    if "sigma" in p and _number(where, "sigma", p["sigma"]) < 0:
        raise SweepError(f"{where}: sigma={p['sigma']!r} must be >= 0; fix it")
    probs = p.get("probabilities")
    if probs is not None:
        if not isinstance(probs, list) or len(probs) != len(p["values"]):
            raise SweepError(f"{where}: probabilities must be a list as long as values ({len(p['values'])}); fix it")
        for i, x in enumerate(probs):
            if _number(where, f"probabilities[{i}]", x) < 0:
                raise SweepError(f"{where}: probabilities[{i}]={x!r} is negative; give each value a probability >= 0")
        if abs(sum(probs) - 1) > 1e-6:
            raise SweepError(f"{where}: probabilities sum to {sum(probs):g}, not 1; make them sum to 1 "
                             f"(e.g. {[round(1 / len(probs), 3)] * len(probs)})")


def _support(p: dict, dist: str) -> list[Any] | None:
    """Every value a distribution can draw, for the discrete ones of at most MAX_RUNS values (None:
    a continuum, or more values than a sweep may run)."""
    if dist == "constant":
        return [p["value"]]
    if dist == "categorical":
        weights = p.get("probabilities") or [1] * len(p["values"])
        distinct: dict[str, Any] = {}
        for value, weight in zip(p["values"], weights):
            if weight > 0:
                distinct.setdefault(repr(value), value)
        return list(distinct.values())
    if dist == "int_uniform":
        low, high = int(p["min"]), int(p["max"])
        return list(range(low, high + 1)) if high - low < MAX_RUNS else None
    if dist == "q_uniform":
        q = _q(p)
        low, high = p["min"] / q, p["max"] / q
        if not (math.isfinite(low) and math.isfinite(high)) or high - low >= MAX_RUNS:
            return None
        return [k * q for k in range(round(low), round(high) + 1)]
    return None


def _count(axes: list[list[Any] | None]) -> int | None:
    """How many combinations the axes make (None if any axis is a continuum)."""
    if any(axis is None for axis in axes):
        return None
    return math.prod(len(axis) for axis in axes)


def _axes(params: dict[str, dict]) -> dict[str, list[Any]]:
    return {n: p["values"] if "values" in p else [p["value"]] for n, p in params.items()}


def check_grid_size(path: Path, params: dict[str, dict]) -> None:
    """The grid's size, counted before anything is expanded: above MAX_RUNS it is refused."""
    axes = _axes(params)
    n = math.prod(len(a) for a in axes.values())
    if n > MAX_RUNS:
        shape = " x ".join(str(len(a)) for a in axes.values() if len(a) > 1)
        raise SweepError(f"{path}: the grid has {n:,} runs ({shape}), over the {MAX_RUNS:,} one sweep may run; "
                         "split it into several files, or use method: random with a run_cap")


def grid(params: dict[str, dict]):
    """The grid's configurations, one at a time (never the whole list at once)."""
    axes = _axes(params)
    names = list(axes)
    for combo in itertools.product(*axes.values()):
        yield dict(zip(names, combo))


def _draw_one(path: Path, name: str, dist: str, p: dict, rng: random.Random) -> Any:
    try:
        value = DISTRIBUTIONS[dist](p, rng)
    except (ArithmeticError, ValueError) as err:  # exp() overflow of a far normal tail, ...
        raise SweepError(f"{path}: parameter {name!r}: a draw from {dist} failed ({err}); "
                         "narrow its bounds (mu, sigma, min, max)") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise SweepError(f"{path}: parameter {name!r}: {dist} drew {value}; narrow its bounds (mu, sigma, min, max)")
    return value


def draw(path: Path, params: dict[str, dict], run_cap: int, seed: int) -> tuple[list[dict[str, Any]], list[str]]:
    """run_cap distinct draws, reproducible for a given seed, and notes for the user. A space of at
    most run_cap distinct configurations (discrete parameters only) gives each of them once."""
    dists = {n: distribution(path, n, p) for n, p in params.items()}  # every parameter checked first
    supports = {n: _support(params[n], d) for n, d in dists.items()}
    space = _count(list(supports.values()))
    notes: list[str] = []
    if space is not None and space <= run_cap:
        if space > MAX_RUNS:
            raise SweepError(f"{path}: its parameters make {space:,} distinct configurations, over the "
                             f"{MAX_RUNS:,} one sweep may run; lower run_cap below {MAX_RUNS:,}")
        if space < run_cap:
            notes.append(f"{path}: run_cap {run_cap:,} is more than the {space:,} distinct configurations "
                         f"its parameters make; each of them runs once")
        names = list(supports)
        return [dict(zip(names, combo)) for combo in itertools.product(*supports.values())], notes
    if run_cap > MAX_RUNS:
        raise SweepError(f"{path}: run_cap {run_cap:,} is over the {MAX_RUNS:,} runs one sweep may have; lower it")
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    repeats = 0
    while len(out) < run_cap and repeats < MAX_REPEATS:
        combo = {n: _draw_one(path, n, d, params[n], rng) for n, d in dists.items()}
        key = repr(sorted(combo.items()))
        if key in seen:
            repeats += 1
            continue
        seen.add(key)
        out.append(combo)
        repeats = 0
    if len(out) < run_cap:
        notes.append(f"{path}: drew {len(out):,} distinct configurations, not run_cap {run_cap:,}: the last "
                     f"{MAX_REPEATS:,} draws all repeated earlier ones (a small space, or tiny probabilities)")
    return out, notes


def load(name_or_path: str, budget: str | None = None, tracking: str | None = None,
         threads: int | None = None, seed: int = 0, default_threads: int = 1) -> Sweep:
    """Read, check and expand a sweep file. `budget`, `tracking`, `threads` (the command line's
    options) override the file's values for every run (trainer.threads is `default_threads` where
    neither sets it); with budget smoke the seed list becomes SMOKE_SEEDS; `seed` seeds method
    random. Raises SweepError (bad file) or ConfigError (a configuration that does not build)."""
    path = resolve(name_or_path)
    name = path.stem
    problem = C.name_problem(name)
    if problem:  # the name is the runs' group: refused as it is, never stripped or cut to another
        raise SweepError(f"{path}: the sweep's name {name!r} (the file's stem) is not allowed; expected "
                         f"{problem}; rename the file")
    spec = read(path)
    check_top_level(path, spec)
    method = spec["method"]
    params: dict[str, dict] = spec["parameters"]
    load_plugins(path, params.get("plugins"))
    for key, p in params.items():
        check_parameter(path, str(key), p, method)
    check_group(path, name, params)
    try:
        tune = parse_tune(path, spec)
    except TuneError as err:
        raise SweepError(str(err)) from None
    early = None
    if "early_terminate" in spec:
        try:
            early = parse_hyperband(str(path), spec["early_terminate"], tuned=tune is not None)
        except HyperbandError as err:
            raise SweepError(str(err)) from None
    notes: list[str] = []
    if method == "grid":
        check_grid_size(path, params)
        combos = grid(params)
    else:
        combos, notes = draw(path, params, spec["run_cap"], seed)
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
    if "run.name" not in params:  # each run named by its swept values (not part of its id)
        runs = [_named(r, varying, name) for r in runs]
    if early is not None and not early.within(epochs := max(r.cfg.trainer.max_epochs for r in runs)):
        raise SweepError(f"{path}: early_terminate's first band is epoch {early.bands[0]}, not before the runs' "
                         f"last epoch ({epochs}), so it would stop nothing; lower min_iter (or max_iter)")
    if tune is not None:
        values = tuple(sorted({C.flat(r.cfg)[tune.key] for r in runs}))
        tune = dataclasses.replace(tune, values=values, seeds=stage1_seeds(tune, (r.cfg.seed for r in runs)))
    return Sweep(name=name, path=path, method=method, spec=spec, runs=runs, varying=varying, notes=tuple(notes),
                 tune=tune, early=early)


def _named(run: Run, varying: list[str], sweep: str) -> Run:
    title = display_name(run.params, varying, run.cfg.seed, fallback=sweep)
    cfg = dataclasses.replace(run.cfg, run=dataclasses.replace(run.cfg.run, name=title))
    return dataclasses.replace(run, cfg=cfg)


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
        said = str(err).replace(PLUGIN_MISSING, PLUGIN_MISSING_SWEEP)  # named in the file, not on a command line
        raise C.ConfigError(f"{path}: run {index} ({shown}) does not build: {said}") from None
