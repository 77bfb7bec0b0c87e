"""The run configuration: one frozen dataclass per concern, dotted overrides, type conversion.

`ablate train model.n_heads=8 optim.lr=3e-4 seed=1` and every sweep file speak the same keys.
Values arrive as strings (command line, W&B agents, which write Python's `True`/`None`) or as
YAML scalars; each is converted by its field's type, and anything unknown or ill-typed raises
`ConfigError` naming the key, the value and what is allowed — before anything runs.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from .models import EncoderConfig


class ConfigError(ValueError):
    """Bad user input: unknown key, wrong type, impossible combination."""


@dataclass(frozen=True)
class DataConfig:
    task: Literal["mnist", "copy"] = "mnist"  # MNIST as 28 rows of 28 pixels, or a synthetic copy task
    seed: int = 0  # fixes the validation split and every evaluation set
    batch_size: int = 64
    train_subset: int | None = None  # train on the first N examples of the training split only
    test_subset: int | None = None  # MNIST: evaluate on the first N official test images only
    # MNIST
    val_size: int = 5000  # held out of the 60k training images
    permute: Literal["none", "train", "test", "both"] = "none"  # where the fixed row permutation applies
    permute_seed: int = 0  # which fixed permutation of the 28 rows
    # copy task: input `tokens, SEP, BLANK * length`, targets at the blanks
    vocab: int = 10  # distinct tokens to copy
    length: int = 8  # tokens per training sequence
    test_length: int | None = None  # tokens per test sequence (None = length): length generalisation
    reverse: bool = False  # emit the tokens in reverse order
    n_train: int = 20000  # training sequences
    n_val: int = 1000
    n_test: int = 2000

    def __post_init__(self) -> None:
        for name in ("batch_size", "val_size", "vocab", "length", "n_train", "n_val", "n_test"):
            if getattr(self, name) < 1:
                raise ConfigError(f"data.{name}={getattr(self, name)!r} is not allowed; expected an integer >= 1")
        for name in ("train_subset", "test_subset", "test_length"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"data.{name}={value!r} is not allowed; expected an integer >= 1 or null")

    @property
    def eval_length(self) -> int:
        return self.test_length or self.length

    def seq_len(self) -> int:
        """Longest sequence the encoder sees (before a CLS token)."""
        return 28 if self.task == "mnist" else 2 * max(self.length, self.eval_length) + 1


@dataclass(frozen=True)
class OptimConfig:
    name: Literal["adam", "adamw"] = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    warmup: float = 0.0  # fraction of all training steps spent warming the lr up linearly from 0
    schedule: Literal["constant", "cosine"] = "constant"  # after warm-up
    grad_clip: float | None = None  # clip the gradient norm to this value

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ConfigError(f"optim.lr={self.lr!r} is not allowed; expected a number > 0")
        if not 0 <= self.warmup < 1:
            raise ConfigError(f"optim.warmup={self.warmup!r} is not allowed; expected a fraction in [0, 1)")
        if self.weight_decay < 0:
            raise ConfigError(f"optim.weight_decay={self.weight_decay!r} is not allowed; expected >= 0")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ConfigError(f"optim.grad_clip={self.grad_clip!r} is not allowed; expected a number > 0 or null")


@dataclass(frozen=True)
class TrainerConfig:
    max_epochs: int = 5
    max_steps: int = -1  # stop after this many optimiser steps (-1: epochs decide)
    accelerator: str = "auto"  # cpu | gpu | cuda | mps | auto (Lightning's names)
    devices: str = "1"  # a count or "auto"; >1 with strategy=ddp trains data-parallel
    strategy: str = "auto"  # auto | ddp | ddp_spawn | ...
    precision: str = "32-true"  # Lightning's precision names, e.g. bf16-mixed on GPUs
    threads: int | None = None  # torch.set_num_threads for this run (None: torch's default)
    # CPU: flush denormal floats to zero. A saturated softmax (unscaled scores) fills the backward
    # pass with them, and each costs the CPU ~100x a normal float: 2.5-3x slower steps, measured.
    # It sets the calling thread's flags: certain with trainer.threads=1 (what sweeps use)
    flush_denormal: bool = True
    limit_val_batches: float = 1.0  # fraction (<=1.0) or count of validation batches per epoch
    log_every_n_steps: int = 25
    ckpt_every_n_steps: int = 0  # also save last.ckpt every N steps (0: end of each epoch only)

    def __post_init__(self) -> None:
        if self.max_epochs < 1:
            raise ConfigError(f"trainer.max_epochs={self.max_epochs!r} is not allowed; expected >= 1")
        if self.devices != "auto" and not (self.devices.isdigit() and int(self.devices) >= 1):
            raise ConfigError(f"trainer.devices={self.devices!r} is not allowed; expected a count >= 1 or auto")


@dataclass(frozen=True)
class RunConfig:
    dir: str | None = None  # run directory (None: $ABLATE_RUNS_DIR/<group>/<run id>)
    group: str = "train"  # sweep name; also the W&B group
    project: str = "ablate"  # W&B project
    probes: bool = True  # cheap probes at step 0 and at the end
    probe_every: int = 0  # also probe every N steps (0: off)
    probe_batch: int = 64  # validation examples in the fixed probe batch
    expensive_probes: bool = True  # head masking and full-test permutation at the end


@dataclass(frozen=True)
class Config:
    model: EncoderConfig = field(default_factory=EncoderConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    run: RunConfig = field(default_factory=RunConfig)
    seed: int = 0  # initialisation and data order
    pooling: Literal["mean", "cls"] = "mean"  # how MNIST classification reads the sequence
    budget: Literal["none", "smoke", "quick", "full"] = "none"  # sweep budget profile (see ablate.budgets)
    tracking: Literal["wandb", "none"] = "wandb"  # W&B (offline without account/network) or nothing

    def __post_init__(self) -> None:
        need = self.data.seq_len() + (1 if self.pooling == "cls" else 0)
        if self.model.pos_enc == "learned" and self.model.max_len < need:
            raise ConfigError(
                f"model.max_len={self.model.max_len} is shorter than the longest sequence ({need}) "
                f"of data.task={self.data.task}; set model.max_len={need} or more"
            )
        if self.data.task == "copy" and self.pooling != "mean":
            raise ConfigError("pooling applies to data.task=mnist only; leave pooling=mean for copy")


SECTIONS = {"model": EncoderConfig, "data": DataConfig, "optim": OptimConfig, "trainer": TrainerConfig, "run": RunConfig}
# Keys that change where or how a run is recorded, never what it computes: not part of the run id.
NOT_IDENTITY = ("run.dir", "run.group", "run.project", "tracking", "trainer.threads", "trainer.log_every_n_steps")


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def all_keys() -> list[str]:
    keys = [f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in fields(cls)]
    return keys + [f.name for f in fields(Config) if f.name not in SECTIONS]


_NULLS = ("null", "none", "~", "")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def _describe(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return "one of " + ", ".join(map(str, args))
    if origin in (typing.Union, types.UnionType):
        parts = [_describe(a) for a in args if a is not type(None)]
        return " or ".join(parts) + " or null"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(tp, str(tp))


def convert(key: str, value: Any, tp: Any) -> Any:
    """Convert a raw value (string or YAML scalar) to the field type `tp`, or raise ConfigError."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    bad = ConfigError(f"{key}={value!r} is not allowed; expected {_describe(tp)}")
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if value is None or (isinstance(value, str) and value.strip().lower() in _NULLS):
            return None
        return convert(key, value, inner[0]) if len(inner) == 1 else value
    if origin is Literal:
        text = str(value).strip() if not isinstance(value, bool) else str(value).lower()
        if text in args:
            return text
        raise bad
    if tp is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise bad
    if tp is int:
        if isinstance(value, bool):
            raise bad
        try:
            number = float(value) if isinstance(value, str) else value
            if isinstance(number, float) and not number.is_integer():
                raise bad
            return int(number)
        except (TypeError, ValueError, OverflowError):
            raise bad from None
    if tp is float:
        if isinstance(value, bool):
            raise bad
        try:
            return float(value)
        except (TypeError, ValueError):
            raise bad from None
    if tp is str:
        if isinstance(value, (dict, list)) or value is None:
            raise bad
        return str(value).strip() if not isinstance(value, bool) else str(value).lower()
    raise bad


def _unknown(key: str) -> ConfigError:
    close = difflib.get_close_matches(key, all_keys(), n=1)
    hint = f"did you mean {close[0]}?" if close else "run `ablate keys` for the list"
    return ConfigError(f"unknown key {key!r}; {hint}")


def flatten_overrides(mapping: dict, prefix: str = "") -> dict[str, Any]:
    """{'model': {'n_heads': 8}} -> {'model.n_heads': 8}; dotted keys pass through."""
    out: dict[str, Any] = {}
    for k, v in mapping.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and key in SECTIONS:
            out.update(flatten_overrides(v, key + "."))
        else:
            out[key] = v
    return out


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """['model.n_heads=8', 'overrides.yaml', '--seed=1'] -> {'model.n_heads': '8', ...} (raw strings)."""
    out: dict[str, Any] = {}
    for item in items:
        text = item[2:] if item.startswith("--") else item  # W&B's ${args} spells keys --key=value
        if "=" not in text:
            path = Path(text)
            if text.endswith((".yaml", ".yml")):
                out.update(load_yaml_overrides(path))
                continue
            raise ConfigError(f"{item!r} is not key=value; write e.g. model.n_heads=8 (or give a .yaml file)")
        key, value = text.split("=", 1)
        out[key.strip()] = value
    return out


def load_yaml_overrides(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"override file {str(path)!r} does not exist; give an existing .yaml file")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        line = getattr(getattr(err, "problem_mark", None), "line", None)
        where = f" at line {line + 1}" if line is not None else ""
        raise ConfigError(f"override file {str(path)!r} is not valid YAML{where}; fix its syntax") from None
    if not isinstance(data, dict):
        raise ConfigError(f"override file {str(path)!r} must hold a mapping of key: value")
    return flatten_overrides(data)


def with_budget(overrides: dict[str, Any], base: Config) -> dict[str, Any]:
    """Insert the budget profile's settings under the explicit overrides (explicit ones win)."""
    from .budgets import profile

    if "budget" not in overrides:
        return overrides
    budget = convert("budget", overrides["budget"], _hints(Config)["budget"])
    task = convert("data.task", overrides.get("data.task", base.data.task), _hints(DataConfig)["task"])
    group = overrides.get("run.group", base.run.group)
    return {**profile(budget, task, None if group is None else str(group)), **overrides}


def build(overrides: dict[str, Any] | None = None, base: Config | None = None) -> Config:
    """Apply dotted overrides (strings or typed values) to `base` (defaults), converting and checking.
    A `budget` override first fills in its profile (see ablate.budgets); explicit keys win over it."""
    base = base or Config()
    overrides = with_budget(dict(overrides or {}), base)
    per_section: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    top: dict[str, Any] = {}
    top_hints = _hints(Config)
    for key, raw in (overrides or {}).items():
        section, _, name = key.partition(".")
        if name and section in SECTIONS:
            hints = _hints(SECTIONS[section])
            if name not in hints:
                raise _unknown(key)
            per_section[section][name] = convert(key, raw, hints[name])
        elif not name and key in top_hints and key not in SECTIONS:
            top[key] = convert(key, raw, top_hints[key])
        else:
            raise _unknown(key)
    sections = {}
    for section, values in per_section.items():
        try:
            sections[section] = replace(getattr(base, section), **values)
        except ConfigError:
            raise
        except (ValueError, TypeError) as err:  # EncoderConfig's own checks name the field
            raise ConfigError(f"{section}.{err}") from None
    try:
        return replace(base, **sections, **top)
    except ConfigError:
        raise
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None


def to_dict(cfg: Config) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def flat(cfg: Config) -> dict[str, Any]:
    """{'model.n_heads': 4, ..., 'seed': 0}: the form W&B groups and filters by."""
    out: dict[str, Any] = {}
    for key, value in to_dict(cfg).items():
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def from_dict(data: dict[str, Any]) -> Config:
    """Inverse of to_dict (as saved in a run directory's config.yaml)."""
    return build(flatten_overrides(data))


def run_id(cfg: Config) -> str:
    """A stable id from the type-converted config (budget included; where/how it is recorded excluded)."""
    identity = {k: v for k, v in flat(cfg).items() if k not in NOT_IDENTITY}
    blob = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
