"""The run configuration: one frozen dataclass per concern, dotted overrides, type conversion.

`ablate train model.n_heads=8 optim.lr=3e-4 seed=1` and every sweep file speak the same keys.
Values arrive as strings (command line, W&B agents, which write Python's `True`/`None`) or as
YAML scalars; each is converted by its field's type, and anything unknown or ill-typed raises
`ConfigError` naming the key, the value and what is allowed — before anything runs.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib.util
import json
import math
import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from . import limits
from . import plugins as P
from .budgets import NAMES as BUDGET_NAMES
from .budgets import profile as budget_profile
from .models.config import BOUNDS as MODEL_BOUNDS
from .models.config import PLUGGED, EncoderConfig, option
from .registry import NAMES as TASK_NAMES
from .registry import PLUGIN_MISSING
from .registry import TASKS as TASK_SPECS
from .registry import spec as task_spec
from .yamlfile import YamlFileError, read_yaml


class ConfigError(ValueError):
    """Bad user input: unknown key, wrong type, impossible combination."""


def _shown(value: Any) -> str:
    """repr(value), cut to a readable length (a YAML file can hand over a long list)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Rule:
    """What a numeric key allows: `ok(value)` and the words for it ("an integer >= 1")."""

    ok: Callable[[Any], bool]
    text: str


def at_least(low: int) -> Rule:
    return Rule(lambda v: v >= low, f"an integer >= {low}")


SEED = Rule(lambda v: 0 <= v < 2**32, "an integer in [0, 2**32)")  # numpy's and torch's seed range
POSITIVE = Rule(lambda v: 0 < v < math.inf, "a finite number > 0")
MAX_LAYERS = 10_000

# Every numeric key's bounds, checked by its section's __post_init__. The model's are stated once, in
# ablate/models/config.py (BOUNDS, checked there first); the harness adds only its caps (MAX_LAYERS).
RULES: dict[str, Rule] = {
    **{f"model.{name}": Rule(b.ok, b.text) for name, b in MODEL_BOUNDS.items()},
    "model.n_layers": Rule(lambda v: MODEL_BOUNDS["n_layers"].ok(v) and v <= MAX_LAYERS,
                           f"an integer in [1, {MAX_LAYERS}]"),
    "data.seed": SEED,
    "data.batch_size": at_least(1),
    "data.train_subset": at_least(1),
    "data.test_subset": at_least(1),
    "data.val_size": at_least(1),
    "data.permute_seed": SEED,
    "data.vocab": at_least(1),
    "data.length": at_least(1),
    "data.test_length": at_least(1),
    "data.n_train": at_least(1),
    "data.n_val": at_least(1),
    "data.n_test": at_least(1),
    "optim.lr": POSITIVE,
    "optim.weight_decay": Rule(lambda v: 0 <= v < math.inf, "a finite number >= 0"),
    "optim.warmup": Rule(lambda v: 0 <= v < 1, "a fraction in [0, 1)"),
    "optim.grad_clip": POSITIVE,
    "trainer.max_epochs": at_least(1),
    "trainer.max_steps": Rule(lambda v: v >= -1, "-1 (epochs decide), 0 (init probes only) or an integer >= 1"),
    "trainer.threads": at_least(1),
    "trainer.num_nodes": Rule(lambda v: 1 <= v <= MAX_DEVICES, "an integer in [1, 1024]"),
    "trainer.limit_val_batches": Rule(lambda v: 0 < v <= 1 or (v > 1 and float(v).is_integer()),
                                      "a fraction in (0, 1] or a count > 1"),
    "trainer.log_every_n_steps": at_least(1),
    "trainer.ckpt_every_n_steps": at_least(0),
    "trainer.accumulate_grad_batches": at_least(1),
    "run.probe_every": at_least(0),
    "run.probe_batch": at_least(1),
    "seed": SEED,
}


@functools.cache
def _ruled(cls: type, section: str) -> tuple[tuple[str, str, Any], ...]:
    """(field, key, its rule) for each field of `cls` that has one, in field order: its RULES entry, or the
    bound a plug-in's option declares with it (`option(default, help, bound)`)."""
    keys = ((f, f"{section}.{f.name}" if section else f.name) for f in fields(cls))
    return tuple((f.name, key, RULES.get(key) or f.metadata.get("bound")) for f, key in keys
                 if key in RULES or f.metadata.get("bound") is not None)


def _check_rules(obj: Any, section: str) -> None:
    """Raise ConfigError for the first field of `obj` outside its RULES entry (None passes: the
    field's type decides whether it may be null)."""
    for name, key, rule in _ruled(type(obj), section):
        value = getattr(obj, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not rule.ok(value):
            nullable = type(None) in typing.get_args(_hints(type(obj))[name])
            raise ConfigError(f"{key}={_shown(value)} is not allowed; expected {rule.text}{' or null' if nullable else ''}")


NAME_FORBIDDEN = '/\\#?%:'  # W&B's project-name rule; '/' and '\\' also keep it one folder
NAME_MAX = 128  # W&B's longest project and group name
# A name becomes a folder and file names (runs/<group>/, reports/data/<group>_curves.csv, compare/<group>/):
# 255 bytes each at most on every common file system, so a name leaves room for the longest suffix
NAME_BYTES = 200
RUN_NAME_TEXT = f"one line of at most {NAME_MAX} printable characters (empty: derived)"
SWEEP_ID_TEXT = f"a W&B sweep id: at most {NAME_MAX} letters, digits, - or _ (empty: none)"


def _check_name(key: str, value: str, what: str) -> None:
    """run.group and run.project name a folder under the runs directory and a W&B group/project."""
    problem = name_problem(value)
    if problem:
        raise ConfigError(f"{key}={_shown(value)} is not allowed; expected {what}: {problem}")


def name_problem(value: str) -> str | None:
    """What a run group, project or sweep name must be, where `value` is not it; None where it is."""
    bad = (not value or len(value) > NAME_MAX or len(value.encode()) > NAME_BYTES or value in (".", "..")
           or value != value.strip() or any(c in NAME_FORBIDDEN or not c.isprintable() for c in value))
    return (f"1-{NAME_MAX} printable characters ({NAME_BYTES} bytes in UTF-8: a Chinese character is 3), "
            f"none of {' '.join(NAME_FORBIDDEN)}, not . or .., no space at either end") if bad else None


def _check_path(key: str, value: str | None) -> None:
    if value is None:
        return
    parts = Path(value).parts
    if (not value.isprintable() or len(value.encode()) > 4096
            or any(len(p.encode()) > 255 for p in parts)):
        raise ConfigError(
            f"{key}={_shown(value)} is not allowed; expected a path of printable characters, at most "
            "4096 bytes and 255 per folder name"
        )


# Lightning's defaults; anything else is checked against Lightning's own lists (importing it costs
# about 2 s, so only then).
LIGHTNING_DEFAULTS = {"trainer.accelerator": "auto", "trainer.strategy": "auto", "trainer.precision": "32-true"}
# What `ablate keys` shows for them without importing Lightning, and accepts without it (a test checks each is
# Lightning's name): a sweep's command that sets trainer.accelerator=cpu needs no Lightning
LIGHTNING_COMMON = {"trainer.accelerator": "auto | cpu | gpu | cuda | mps | ... (Lightning's)",
                    "trainer.strategy": "auto | ddp | ddp_spawn | fsdp | ... (Lightning's)",
                    "trainer.precision": "32-true | bf16-mixed | 16-mixed | ... (Lightning's)"}


@functools.cache
def lightning_names(key: str) -> tuple[str, ...]:
    """The names Lightning accepts for trainer.accelerator, trainer.strategy or trainer.precision."""
    if key == "trainer.accelerator":
        from pytorch_lightning.accelerators import AcceleratorRegistry

        return ("auto", "gpu", *sorted(AcceleratorRegistry.available_accelerators()))
    if key == "trainer.strategy":
        from pytorch_lightning.strategies import StrategyRegistry

        return ("auto", *StrategyRegistry.available_strategies())
    try:  # Lightning keeps this list in a type alias of its connector
        from lightning_fabric.connector import _PRECISION_INPUT_STR, _PRECISION_INPUT_STR_ALIAS

        names = typing.get_args(_PRECISION_INPUT_STR) + typing.get_args(_PRECISION_INPUT_STR_ALIAS)
        return tuple(sorted(names, key=lambda n: n.startswith("transformer")))  # those need a package
    except ImportError:  # its list in Lightning 2.0-2.6
        return ("transformer-engine", "transformer-engine-float16", "16-true", "16-mixed", "bf16-true",
                "bf16-mixed", "32-true", "64-true", "64", "32", "16", "bf16")


@functools.cache
def _common_names(key: str) -> tuple[str, ...]:
    """The names LIGHTNING_COMMON shows for `key`: accepted without importing Lightning."""
    return tuple(n.strip() for n in LIGHTNING_COMMON[key].split("|") if "..." not in n)


def _check_lightning_name(key: str, value: str) -> None:
    if value == LIGHTNING_DEFAULTS[key] or value in _common_names(key):
        return
    names = lightning_names(key)
    if value not in names:
        raise ConfigError(f"{key}={_shown(value)} is not allowed; choose one of {', '.join(names)} (Lightning's names)")


@dataclass(frozen=True)
class DataConfig:
    task: Literal[TASK_NAMES] = option("mnist", "what to learn: MNIST rows or a synthetic task (ablate/registry.py)")
    seed: int = option(0, "fixes the validation split and every evaluation set")
    batch_size: int = option(64, "examples per optimiser step (and per evaluation batch)")
    train_subset: int | None = option(None, "train on the first N examples of the training split only")
    test_subset: int | None = option(None, "MNIST: evaluate on the first N official test images only")
    # MNIST
    val_size: int = option(5000, "held out of the 60k training images")
    permute: Literal["none", "train", "test", "both"] = option("none", "where the fixed row permutation applies")
    permute_seed: int = option(0, "which fixed permutation of the 28 rows")
    # synthetic token tasks (copy: input `tokens, SEP, BLANK * length`, targets at the blanks)
    vocab: int = option(10, "distinct tokens")
    length: int = option(8, "tokens per training sequence")
    test_length: int | None = option(None, "tokens per test sequence (None = length): length generalisation")
    reverse: bool = option(False, "emit the tokens in reverse order")
    n_train: int = option(20000, "training sequences")
    n_val: int = option(1000, "validation sequences")
    n_test: int = option(2000, "test sequences (at test_length)")

    def __post_init__(self) -> None:
        _check_rules(self, "data")
        if self.task not in TASK_SPECS:  # the built-in tasks and those of the plug-ins the config names
            raise ConfigError(f"data.task={_shown(self.task)} is not allowed; expected one of {', '.join(TASK_SPECS)}")
        if problem := task_spec(self.task).check(self):
            raise ConfigError(problem)
        own = task_spec(self.task).keys
        for f in fields(self):  # another task's key set here would be silently ignored
            if f.name in TASK_KEYS and f.name not in own and getattr(self, f.name) != f.default:
                users = ", ".join(t.name for t in TASK_SPECS.values() if f.name in t.keys)
                raise ConfigError(f"data.{f.name}={_shown(getattr(self, f.name))} does not apply to "
                                  f"data.task={self.task} (only to {users}); leave it at its default "
                                  f"({f.default}) or choose that task")

    @property
    def eval_length(self) -> int:
        return self.test_length or self.length

    def seq_len(self) -> int:
        """Longest sequence the encoder sees (before a CLS token)."""
        return task_spec(self.task).seq_len(self)


@dataclass(frozen=True)
class OptimConfig:
    # plain SGD has no momentum: a step is then lr times the gradient itself, which Adam's
    # per-parameter normalisation hides (the SGD arms of Q2 and Q4)
    name: Literal["adam", "adamw", "sgd"] = option("adam", "optimiser: Adam (L2 weight decay), AdamW (decoupled) or plain SGD")
    lr: float = option(1e-3, "learning rate (its peak, after any warm-up)")
    weight_decay: float = option(0.0, "weight decay of the optimiser")
    warmup: float = option(0.0, "fraction of all training steps spent warming the lr up linearly from 0")
    schedule: Literal["constant", "cosine"] = option("constant", "after warm-up")
    grad_clip: float | None = option(None, "clip the gradient norm to this value")

    def __post_init__(self) -> None:
        _check_rules(self, "optim")


MAX_DEVICES = 1024
DEVICES_TEXT = f"a count in [1, {MAX_DEVICES}] or auto"


@dataclass(frozen=True)
class TrainerConfig:
    max_epochs: int = option(5, "passes over the training set")
    max_steps: int = option(-1, "stop after this many optimiser steps (-1: epochs decide; 0: the init probes only, nothing trained)")
    accelerator: str = option("auto", "where to train, by Lightning's name (auto: a GPU if there is one)")
    devices: str = option("1", "a count or \"auto\"; >1 with strategy=ddp trains data-parallel")
    num_nodes: int = option(1, "machines the run trains on, devices each (srun starts their ranks: docs/scaling-out.md)")
    strategy: str = option("auto", "how to spread training over devices, by Lightning's name (e.g. ddp)")
    precision: str = option("32-true", "number format, by Lightning's name, e.g. bf16-mixed on GPUs")
    threads: int | None = option(None, "torch.set_num_threads for this run (None: torch's default)")
    # A saturated softmax (unscaled scores) fills the backward pass with denormal floats, and each costs the CPU ~100x a normal float: 2.5-3x slower steps, measured.
    # It sets the calling thread's flags: certain with trainer.threads=1 (what sweeps use)
    flush_denormal: bool = option(True, "CPU: flush denormal floats to zero (torch.set_flush_denormal)")
    limit_val_batches: float = option(1.0, "validation batches per epoch: a fraction (<= 1.0) or a count (> 1)")
    log_every_n_steps: int = option(25, "log train/loss every N optimiser steps")
    ckpt_every_n_steps: int = option(0, "also save last.ckpt every N steps (0: end of each epoch only)")
    accumulate_grad_batches: int = option(1, "optimiser step every N batches, their gradients summed (Lightning's): an "
                                             "effective batch of N * data.batch_size")
    callbacks: str = option("", "your own Lightning callbacks, comma-separated import paths (package.module:Class, "
                                "made with no arguments), added to ablate's")

    def __post_init__(self) -> None:
        _check_rules(self, "trainer")
        if self.devices != "auto" and not (self.devices.isdigit() and 1 <= int(self.devices) <= MAX_DEVICES):
            raise ConfigError(f"trainer.devices={_shown(self.devices)} is not allowed; expected {DEVICES_TEXT}")
        for key in LIGHTNING_DEFAULTS:
            _check_lightning_name(key, getattr(self, key.partition(".")[2]))
        if self.ckpt_every_n_steps and self.accumulate_grad_batches > 1:
            # a checkpoint between the batches of one step would lose the gradients summed so far
            raise ConfigError(f"trainer.ckpt_every_n_steps={self.ckpt_every_n_steps} is not allowed with "
                              f"trainer.accumulate_grad_batches={self.accumulate_grad_batches} (a checkpoint inside a "
                              "step cannot resume exactly); set trainer.ckpt_every_n_steps=0")
        if self.callbacks:
            object.__setattr__(self, "callbacks", ",".join(P.names(self.callbacks)))
            for path in P.names(self.callbacks):
                callback_class(path)
        if self.ckpt_every_n_steps and "ddp" in self.strategy:
            # Lightning's DistributedSampler replaces ablate's resumable one: a mid-epoch checkpoint cannot hold
            # the place in the epoch's order, and one that overwrote the epoch's checkpoint could only restart
            raise ConfigError(f"trainer.ckpt_every_n_steps={self.ckpt_every_n_steps} is not allowed with "
                              f"trainer.strategy={self.strategy} (a mid-epoch checkpoint under DDP cannot resume "
                              "exactly); set trainer.ckpt_every_n_steps=0 (a checkpoint at each epoch end)")


@dataclass(frozen=True)
class RunConfig:
    dir: str | None = option(None, "run directory (None: $ABLATE_RUNS_DIR/<group>/<run id>)")
    group: str = option("train", "sweep name; also the W&B group")
    project: str = option("ablate", "W&B project")
    probes: bool = option(True, "cheap probes at step 0 and at the end")
    probe_every: int = option(0, "also probe every N steps (0: off)")
    probe_batch: int = option(64, "validation examples in the fixed probe batch")
    expensive_probes: bool = option(True, "head masking and full-test permutation at the end")
    name: str = option("", "the W&B display name (empty: derived from the non-default keys and the seed)")
    sweep_id: str = option("", "the W&B sweep this run belongs to (empty: none)")
    keep_best: bool = option(True, "also keep best.ckpt: the weights of the epoch with the highest val/acc (the model "
                             "val/acc_best reports)")
    init_from: str | None = option(None, "start from the model weights of a completed run (its folder: its last.ckpt) "
                                   "or of a .ckpt file; null: a fresh initialisation")

    def __post_init__(self) -> None:
        _check_rules(self, "run")
        _check_path("run.dir", self.dir)
        _check_path("run.init_from", self.init_from)
        if self.init_from is not None:  # part of the run id: the same words name the same file from any folder
            object.__setattr__(self, "init_from", os.path.abspath(os.path.expanduser(self.init_from)))
        _check_name("run.group", self.group, "a group name (a folder of the runs directory)")
        _check_name("run.project", self.project, "a W&B project name")
        if len(self.name) > NAME_MAX or not self.name.isprintable():
            raise ConfigError(f"run.name={_shown(self.name)} is not allowed; expected {RUN_NAME_TEXT}")
        if len(self.sweep_id) > NAME_MAX or not all(c.isascii() and (c.isalnum() or c in "-_") for c in self.sweep_id):
            raise ConfigError(f"run.sweep_id={_shown(self.sweep_id)} is not allowed; expected {SWEEP_ID_TEXT}")


def _plugin_check(whole: Any, cfg: Config) -> str | None:
    try:
        return whole.build.check(cfg)
    except Exception as err:  # noqa: BLE001 - the plug-in's code: its failure is one line too
        return f"plugins={whole.plugin}: model.arch={cfg.model.arch}'s check failed ({P.first_line(err)}); fix the plug-in"


def _reparam_problem(o: OptimConfig) -> str:
    """What in `o` breaks model.qk_reparam's equality with the 1/sqrt(d_head) scale (its W_Q, W_K are
    d_head^(1/4) smaller, their gradients d_head^(1/4) larger), or ''."""
    if o.name not in ("adam", "adamw"):
        return f"optim.name=adam or adamw (got {o.name}: its step grows with the gradient; Adam's does not)"
    if o.weight_decay:
        return f"optim.weight_decay=0 (got {o.weight_decay}: the smaller W_Q, W_K would need a decay rate of their own)"
    if o.grad_clip is not None:
        return f"optim.grad_clip=null (got {o.grad_clip}: the global norm it clips by sees the larger gradients)"
    return ""


@dataclass(frozen=True)
class Config:
    model: EncoderConfig = field(default_factory=EncoderConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    run: RunConfig = field(default_factory=RunConfig)
    seed: int = option(0, "initialisation and data order")
    pooling: Literal["mean", "cls"] = option("mean", "how MNIST classification reads the sequence")
    budget: Literal[BUDGET_NAMES] = option("none", "sweep budget profile (see ablate.budgets)")
    tracking: Literal["wandb", "none"] = option("wandb", "W&B (offline without account/network) or nothing")
    plugins: str = option("", "your own modules (or entry points of ablate.plugins), comma-separated: the components, "
                              "tasks and models they register become values of these keys (docs/plugins.md)")
    # the sections of the plug-ins `plugins` names, (section, its options) in order: their keys are section.field
    ext: tuple[tuple[str, Any], ...] = field(default=(), repr=False, metadata={"internal": True})

    def __post_init__(self) -> None:
        _check_rules(self, "")
        for section, opts in self.ext:  # a component's keys set while another is chosen would be silently ignored
            key, value = P.owner(section) or ("", "")
            if getattr(self.model, key, value) != value and opts != type(opts)():
                changed = next(f"{section}.{f.name}={_shown(getattr(opts, f.name))}" for f in fields(opts)
                               if getattr(opts, f.name) != f.default)
                raise ConfigError(f"{changed} does not apply: model.{key} is {getattr(self.model, key)}, not "
                                  f"{value}; leave it at its default or set model.{key}={value}")
        _check_rules(self.model, "model")
        if len(f"{self.run.group}-{self.budget}") > NAME_MAX:  # the W&B group (ablate.tracking.run_fields)
            raise ConfigError(f"run.group is {len(self.run.group)} characters, too long for its W&B group "
                              f"'<group>-{self.budget}' (at most {NAME_MAX}); use at most "
                              f"{NAME_MAX - len(self.budget) - 1} characters")
        need = self.longest
        if self.model.pos_enc == "learned" and self.model.arch not in PLUGGED["arch"] and self.encoder.max_len < need:
            raise ConfigError(
                f"model.max_len={self.model.max_len} is shorter than the longest sequence ({need}) "
                f"of data.task={self.data.task}; set model.max_len={need} or more"
            )
        if self.model.qk_reparam and (problem := _reparam_problem(self.optim)):
            raise ConfigError(f"model.qk_reparam=true needs {problem}; change it or set model.qk_reparam=false")
        whole = PLUGGED["arch"].get(self.model.arch)  # a plug-in's model: what it cannot train, in its words
        if whole is not None and whole.build.check is not None and (problem := _plugin_check(whole, self)):
            raise ConfigError(problem)
        if task_spec(self.data.task).kind != "classify" and self.pooling != "mean":
            raise ConfigError(f"pooling applies to tasks with one label per sequence (data.task=mnist) only; "
                              f"leave pooling=mean for data.task={self.data.task}")

    def __reduce_ex__(self, protocol):
        """Pickled (to a sweep's worker process) as its saved form where it names plug-ins: the process that reads it
        imports and registers them first, as from_dict does, and their option classes are theirs."""
        if not self.plugins:
            return object.__reduce_ex__(self, protocol)
        return from_dict, (to_dict(self),)

    def options(self, section: str) -> Any:
        """The options of a plug-in's section (its component's or model's), or None."""
        return dict(self.ext).get(section)

    @property
    def longest(self) -> int:
        """The longest sequence the encoder reads: the task's, and a CLS token with pooling=cls."""
        return self.data.seq_len() + (1 if self.pooling == "cls" else 0)

    @functools.cached_property  # asked several times per configuration a sweep builds: made and checked once
    def encoder(self) -> EncoderConfig:
        """The model the task builds: `model`, with max_len=None sized to `longest` (a learned table of
        exactly the positions the task reads, as the tutorial's torch.randn(1, 28, 64))."""
        model = self.model if not self.ext else replace(self.model, plugged=self.ext)
        plugged = model.arch in PLUGGED["arch"]  # a plug-in's model sizes itself
        return model if model.max_len is not None or plugged else replace(model, max_len=self.longest)


# data.* keys that belong to some task (the registry's `keys`); the rest (seed, batch_size,
# train_subset) apply to every task
TASK_KEYS = frozenset(k for t in TASK_SPECS.values() for k in t.keys)
SECTIONS = {"model": EncoderConfig, "data": DataConfig, "optim": OptimConfig, "trainer": TrainerConfig, "run": RunConfig}
# Lightning's names for keys ablate has under another: each fact has one key, the alias is read as it
ALIASES = {"trainer.gradient_clip_val": "optim.grad_clip"}


def builtin_names() -> tuple[str, ...]:
    """The config's own sections and top-level keys (a plug-in's section may not take one of these names)."""
    return (*SECTIONS, *(f.name for f in fields(Config)))


def callback_class(path: str) -> type:
    """The Lightning callback class (or factory) trainer.callbacks names, imported; ConfigError when it cannot be."""
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    where = f"trainer.callbacks={path}"
    if not (P.MODULE.fullmatch(module) and name.isidentifier()):
        raise ConfigError(f"{where} is not allowed; expected import paths package.module:Class, comma-separated")
    try:
        found = getattr(P.import_user(module), name)
    except Exception as err:  # noqa: BLE001 - the user's module: one line, before any work
        raise ConfigError(f"{where}: importing it failed ({P.first_line(err)}); check the path, or install its package") from None
    if not callable(found):
        raise ConfigError(f"{where}: {name} is {type(found).__name__}, not a class or function; name a Callback class")
    return found
# Keys that change where or how a run is recorded, never what it computes: not part of the run id.
NOT_IDENTITY = ("run.dir", "run.group", "run.project", "run.name", "run.sweep_id", "tracking", "trainer.threads",
                "trainer.log_every_n_steps", "run.keep_best")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A dataclass's resolved field types; cached, since resolving them was most of a sweep's expansion."""
    return typing.get_type_hints(cls)


def sections(plugins: str | None = None) -> dict[str, type]:
    """The config's sections: its own, then those of the plug-ins `plugins` names (None: every one loaded)."""
    extra = P.loaded_sections() if plugins is None else {s: c for p in P.load(plugins) for s, c in p.sections.items()}
    return {**SECTIONS, **extra}


def all_keys(plugins: str | None = "") -> list[str]:
    """Every key, in `ablate keys` order; with the sections of the plug-ins `plugins` names (None: all loaded)."""
    every = sections(plugins)
    keys = [f"{s}.{name}" for s in SECTIONS for name in _names(SECTIONS[s])]
    keys += [f.name for f in fields(Config) if f.name not in SECTIONS and not f.metadata.get("internal")]
    return keys + [f"{s}.{f.name}" for s, cls in every.items() if s not in SECTIONS for f in fields(cls)]


_NULLS = ("null", "none", "~", "")
INT_LIMIT = 2**63
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
    bad = ConfigError(f"{key}={_shown(value)} is not allowed; expected {_describe(tp)}")
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if value is None or (isinstance(value, str) and value.strip().lower() in _NULLS):
            return None
        return convert(key, value, inner[0]) if len(inner) == 1 else value
    if origin is Literal:
        text = str(value).strip() if not isinstance(value, bool) else str(value).lower()
        extra = plugged_values(key)
        if text in args or text in extra:
            return text
        if pluggable(key):  # the value may be a plug-in's, and the plug-in not named
            raise ConfigError(f"{key}={_shown(value)} is not allowed; expected one of "
                              f"{', '.join(map(str, args + extra))}; {PLUGIN_MISSING}")
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
        try:  # "12345678901234567890" exactly; "1e3" and 8.0 through a float
            number = int(value.strip()) if isinstance(value, str) and value.strip().lstrip("+-").isdigit() else value
            number = float(number) if isinstance(number, str) else number
            if isinstance(number, float) and not number.is_integer():
                raise bad
            number = int(number)
        except (TypeError, ValueError, OverflowError):
            raise bad from None
        if not -INT_LIMIT <= number < INT_LIMIT:  # no setting can use more; torch's int64 cannot hold it
            raise ConfigError(f"{key}={_shown(value)} is not allowed; expected an integer below 2**63")
        return number
    if tp is float:
        if isinstance(value, bool):
            raise bad
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            raise bad from None
        if not math.isfinite(number):  # nan and inf reach Lightning and torch as nonsense
            raise ConfigError(f"{key}={_shown(value)} is not allowed; expected a finite number")
        return number
    if tp is str:
        if isinstance(value, (dict, list)) or value is None:
            raise bad
        return str(value).strip() if not isinstance(value, bool) else str(value).lower()
    raise bad


def pluggable(key: str) -> bool:
    """Whether plug-ins can add values to `key`: the model.* keys of PLUGGED, and data.task."""
    section, _, name = key.partition(".")
    return (section == "model" and name in PLUGGED) or key == "data.task"


def plugged_values(key: str) -> tuple[str, ...]:
    """The values plug-ins registered for a key (model.norm_type, data.task, ...), or ()."""
    if not pluggable(key):
        return ()
    if key == "data.task":
        return tuple(t for t, spec in TASK_SPECS.items() if spec.plugin)
    return tuple(PLUGGED[key.partition(".")[2]])


def _unknown(key: str, section_unknown: bool = False) -> ConfigError:
    """`section_unknown`: the key's section is neither ablate's nor a named plug-in's: it may be the section of a
    plug-in the config does not name, and the line says so."""
    close = difflib.get_close_matches(key[:100], [*all_keys(None), *ALIASES], n=1)
    hint = f"did you mean {close[0]}?" if close else "run `ablate keys` for the list"
    if section_unknown:  # after a question a sentence of its own: "did you mean model.n_layers? If it comes ..."
        hint += f" {PLUGIN_MISSING[0].upper()}{PLUGIN_MISSING[1:]}" if close else f"; {PLUGIN_MISSING}"
    return ConfigError(f"unknown key {_shown(key)}; {hint}")


def flatten_overrides(mapping: dict, prefix: str = "", load: bool = True) -> dict[str, Any]:
    """{'model': {'n_heads': 8}} -> {'model.n_heads': 8}; dotted keys pass through. The sections of the plug-ins
    the mapping's `plugins` names nest too: imported and registered for it, or, with load=False (a table reading
    runs: no user code runs to read them), every mapping under a name that is not one of the config's own keys."""
    nested = set(SECTIONS)
    named = not prefix and isinstance(mapping.get("plugins"), str) and mapping["plugins"].strip()
    if named and not load:
        nested.update(k for k, v in mapping.items() if isinstance(v, dict) and k not in _names(Config))
    elif named:
        try:
            nested.update(s for p in P.load(mapping["plugins"]) for s in p.sections)
        except P.PluginError as err:
            raise ConfigError(str(err)) from None
    out: dict[str, Any] = {}
    for k, v in mapping.items():
        key = f"{prefix}{k}"
        inner = flatten_overrides(v, key + ".") if isinstance(v, dict) and key in nested else {key: v}
        for name, value in inner.items():
            if name in out:  # `model: {n_heads: 2}` and `model.n_heads: 4`: neither may silently win
                raise ConfigError(f"{name} is given twice, nested under {name.split('.')[0]}: and dotted; keep one")
            out[name] = value
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
    try:
        data = read_yaml(path, "override file")
    except YamlFileError as err:
        raise ConfigError(str(err)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"override file {str(path)!r} must hold a mapping of key: value")
    try:
        return flatten_overrides(data)
    except ConfigError as err:
        raise ConfigError(f"override file {str(path)!r}: {err}") from None


# What the machine of a W&B agent sets without editing the sweep file (whose values make the agent's command
# line): read only under an agent (WANDB_SWEEP_ID set, as `wandb agent` sets it for its runs), where they win
# over the file's budget and threads.
AGENT_ENV = {"ABLATE_BUDGET": "budget", "ABLATE_THREADS": "trainer.threads"}


def agent_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """{key: value} from AGENT_ENV under a W&B agent, each value checked (ConfigError names the variable)."""
    if not environ.get("WANDB_SWEEP_ID"):
        return {}
    out = {}
    for var, key in AGENT_ENV.items():
        if environ.get(var):
            section, _, name = key.rpartition(".")
            try:
                convert(key, environ[var], _hints(SECTIONS[section] if section else Config)[name])
            except ConfigError as err:
                raise ConfigError(f"{var}={_shown(environ[var])} (the W&B agent's environment): {err}") from None
            out[key] = environ[var]
    return out


def with_budget(overrides: dict[str, Any], base: Config) -> dict[str, Any]:
    """Insert the budget profile's settings under the explicit overrides (explicit ones win)."""
    if "budget" not in overrides:
        return overrides
    budget = convert("budget", overrides["budget"], _hints(Config)["budget"])
    task = convert("data.task", overrides.get("data.task", base.data.task), _hints(DataConfig)["task"])
    group = overrides.get("run.group", base.run.group)
    return {**budget_profile(budget, task, None if group is None else str(group)), **overrides}


def build(overrides: dict[str, Any] | None = None, base: Config | None = None, machine: bool = True,
          profile: bool = True) -> Config:
    """Apply dotted overrides (strings or typed values) to `base` (defaults), converting and checking.
    A `budget` override first fills in its profile (see ablate.budgets); explicit keys win over it.
    `machine`: also check that this machine can run it (accelerator, packages, memory); off for a
    saved config that is only read (`from_dict`). `profile`: off for a config whose every key is
    already resolved (`from_dict`): its budget's profile was applied when it was built."""
    try:
        cfg = _build(overrides, base, profile)
    except ConfigError as err:  # a value given under Lightning's name is named so
        used = [(alias, key) for alias, key in ALIASES.items() if alias in (overrides or {})]
        if used and str(err).startswith(f"{used[0][1]}="):
            raise ConfigError(used[0][0] + str(err)[len(used[0][1]):]) from None
        raise
    if machine:
        check_machine(cfg)
    return cfg


def _with_plugins(overrides: dict[str, Any], base: Config) -> tuple[str, dict[str, type]]:
    """The `plugins` the overrides (or the base) name, canonical, each imported and registered; and their
    sections. A plug-in that cannot be used is ConfigError, one line, before any other key is read."""
    raw = overrides.get("plugins", base.plugins)
    text = ",".join(P.names(convert("plugins", raw, str)))
    try:
        return text, {s: c for p in P.load(text) for s, c in p.sections.items()}
    except P.PluginError as err:
        raise ConfigError(str(err)) from None


def _build(overrides: dict[str, Any] | None, base: Config | None, profile: bool = True) -> Config:
    base = base or Config()
    overrides = dict(overrides or {})
    for alias, key in ALIASES.items():  # Lightning's name for one of ablate's keys: read as that key
        if alias in overrides:
            if key in overrides:
                raise ConfigError(f"{alias} and {key} are one setting ({alias} is Lightning's name for it); give one")
            overrides[key] = overrides.pop(alias)
    plugins, ext_types = _with_plugins(overrides, base)
    overrides = with_budget(overrides, base) if profile else overrides
    per_section: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    per_ext: dict[str, dict[str, Any]] = {s: {} for s in ext_types}
    top: dict[str, Any] = {}
    top_hints = _hints(Config)
    for key, raw in (overrides or {}).items():
        section, _, name = key.partition(".")
        if name and (section in SECTIONS or section in ext_types):
            hints = _hints(SECTIONS.get(section) or ext_types[section])
            if name not in hints:
                raise _unknown(key)
            (per_section if section in SECTIONS else per_ext)[section][name] = convert(key, raw, hints[name])
        elif not name and key in top_hints and key not in SECTIONS and key != "ext":
            top[key] = plugins if key == "plugins" else convert(key, raw, top_hints[key])
        elif key in SECTIONS:
            raise ConfigError(f"{key}={_shown(raw)} is not allowed; give its keys, e.g. {key}.{fields(SECTIONS[key])[0].name}=...")
        else:
            raise _unknown(key, section_unknown=bool(name))
    sections = {}
    for section, values in per_section.items():
        try:
            sections[section] = replace(getattr(base, section), **values)
        except ConfigError:
            raise
        except (ValueError, TypeError) as err:  # EncoderConfig's own checks name the field
            raise ConfigError(f"{section}.{err}") from None
    held = dict(base.ext)
    ext = []
    for section, values in per_ext.items():  # a plug-in's own checks (its __post_init__, its bounds) in one line
        try:
            made = replace(held.get(section) or ext_types[section](), **values)
        except Exception as err:  # noqa: BLE001
            text = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ConfigError(f"{section}: {text}") from None
        _check_rules(made, section)
        ext.append((section, made))
    try:
        return replace(base, **sections, **top, ext=tuple(ext))
    except ConfigError:
        raise
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None


# The keys that size a run, named in the message when it does not fit.
SIZE_KEYS = ("model.d_model", "model.n_heads", "model.d_head", "model.n_layers", "model.ffn_mult", "model.max_len",
             "data.batch_size", "data.vocab", "data.length", "data.test_length", "data.n_train", "data.n_val",
             "data.n_test", "data.train_subset")
# What each accelerator needs, checked without initialising it (Lightning's fork-based DDP needs that).
ACCELERATORS: dict[str, Callable[[], bool]] = {
    "cuda": lambda: _torch().cuda.is_available(),
    "gpu": lambda: _torch().cuda.is_available() or _torch().backends.mps.is_available(),
    "mps": lambda: _torch().backends.mps.is_available(),
    "tpu": lambda: importlib.util.find_spec("torch_xla") is not None,
}
PACKAGES = {"deepspeed": "deepspeed", "xla": "torch_xla", "single_xla": "torch_xla", "single_tpu": "torch_xla",
            "transformer-engine": "transformer_engine"}  # name prefix -> the package it needs


def _torch():
    import torch

    return torch


def check_machine(cfg: Config) -> None:
    """Raise ConfigError if this machine cannot run `cfg`: an accelerator it lacks, more GPUs than it
    has, a strategy or precision whose package is missing, or more memory than it has."""
    t = cfg.trainer
    if t.accelerator in ACCELERATORS and not ACCELERATORS[t.accelerator]():
        raise ConfigError(f"trainer.accelerator={t.accelerator!r} is not available on this machine; "
                          "use trainer.accelerator=auto (or cpu)")
    if limits.trains_on_gpu(t.accelerator) and t.devices.isdigit():
        count = _torch().cuda.device_count()
        if int(t.devices) > count:
            raise ConfigError(f"trainer.devices={t.devices} is more than the {count} GPU(s) this machine has; "
                              f"use trainer.devices={count} or auto")
    ranks = limits.cpu_ranks(cfg)
    if ranks > limits.cores():  # every rank a process busy on a core of its own: more only contend
        raise ConfigError(f"trainer.devices={t.devices} on the CPU starts {ranks} processes on the "
                          f"{limits.cores()} core(s) this process may use; use trainer.devices={limits.cores()} or fewer")
    for key, name in (("trainer.strategy", t.strategy), ("trainer.precision", t.precision)):
        package = next((p for prefix, p in PACKAGES.items() if name.startswith(prefix)), None)
        if package and importlib.util.find_spec(package) is None:
            raise ConfigError(f"{key}={name!r} needs the {package} package, which is not installed; "
                              "install it or choose another")
    if t.strategy.startswith("fsdp") and not limits.trains_on_gpu(t.accelerator):
        raise ConfigError(f"trainer.strategy={t.strategy!r} runs on GPUs only; choose another strategy")
    if cfg.model.arch in PLUGGED["arch"]:
        return  # a plug-in's model: its size is its own (the closed forms of ablate.limits are the encoder's)
    values, defaults = flat(cfg), _default_values()
    named = [f"{k}={values[k]}" for k in SIZE_KEYS if values[k] != defaults[k]]
    problem = limits.check_fits(cfg, ", ".join(named) or "the default sizes")
    if problem:
        raise ConfigError(problem)


@functools.cache
def _default_values() -> dict[str, Any]:
    return flat(Config())


def field_help(cls: type) -> dict[str, str]:
    """{field: its one-line description}: the `help` each field declares with `option(default, help)`."""
    return {f.name: f.metadata["help"] for f in fields(cls) if "help" in f.metadata}


def allowed(key: str) -> str:
    """What `key` accepts, in words: its choices, bounds or form."""
    section, _, name = key.rpartition(".")
    tp = _hints(sections(None)[section] if section else Config)[name]
    nullable = type(None) in typing.get_args(tp)
    if key in LIGHTNING_DEFAULTS:  # the common ones; the full list (Lightning imported, ~2 s) names a bad value
        return LIGHTNING_COMMON[key]
    special = {"trainer.devices": DEVICES_TEXT, "run.dir": "a path or null",
               "run.init_from": "a run folder, a .ckpt file or null",
               "run.group": f"a name without {' '.join(NAME_FORBIDDEN)}",
               "run.project": f"a name without {' '.join(NAME_FORBIDDEN)}",
               "run.name": RUN_NAME_TEXT, "run.sweep_id": SWEEP_ID_TEXT,
               "trainer.callbacks": "package.module:Class, comma-separated, or empty",
               "plugins": "modules or entry points, comma-separated, or empty"}
    if key in special:
        return special[key]
    rule = {k: r for _, k, r in _ruled(sections(None)[section] if section else Config, section)}.get(key)
    if rule is not None:
        return rule.text + (" or null" if nullable else "")
    if typing.get_origin(tp) is Literal:
        return " | ".join(typing.get_args(tp) + plugged_values(key))
    return _describe(tp).replace("true or false", "true | false")


def key_table(plugins: str = "") -> list[tuple[str, str, str, str]]:
    """(key, default, allowed, description) for every key, in `ablate keys` order; with the keys of the plug-ins
    `plugins` names (ConfigError when one cannot be used)."""
    cfg = build({"plugins": plugins}, machine=False) if plugins else Config()
    helps = {s: field_help(cls) for s, cls in sections(cfg.plugins).items()}
    helps[""] = field_help(Config)
    defaults = {**flat(cfg), "plugins": Config().plugins}  # the row shows the key's default, not the value asked
    rows = []
    for key in all_keys(cfg.plugins):
        section, _, name = key.rpartition(".")
        default = defaults[key]
        shown = "null" if default is None else str(default).lower() if isinstance(default, bool) else str(default) or '""'
        rows.append((key, shown, allowed(key), helps[section].get(name, "")))
    return rows + [(alias, f"({key})", f"as {key}", f"Lightning's name for {key}, read as it")
                   for alias, key in ALIASES.items()]


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    """A dataclass's keys: its fields but the internal ones (EncoderConfig.plugged, Config.ext)."""
    return tuple(f.name for f in fields(cls) if not f.metadata.get("internal"))


def to_dict(cfg: Config) -> dict[str, Any]:
    """{section: {field: value}, top-level field: value}. Every value is a plain scalar, so a shallow walk
    equals dataclasses.asdict, whose deep copies were most of a sweep's expansion."""
    out: dict[str, Any] = {}
    for name in _names(type(cfg)):
        value = getattr(cfg, name)
        out[name] = {k: getattr(value, k) for k in _names(type(value))} if name in SECTIONS else value
    for section, opts in cfg.ext:  # the plug-ins' sections, after ablate's own keys
        out[section] = {k: getattr(opts, k) for k in _names(type(opts))}
    return out


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
    """Inverse of to_dict (as saved in a run directory's config.yaml); no machine checks: a saved
    config is read here, whichever machine trained it."""
    if not isinstance(data, dict):
        raise ConfigError(f"a saved config must be a mapping of sections, got {type(data).__name__}")
    return build(flatten_overrides(data), machine=False, profile=False)


# The keys run ids were first made of (written once, never extended). A key added since is left out of a run's
# identity at its default, and read as its default from a run made before it: every run made before a key came
# keeps its id (a sweep finds it again instead of running it twice), and adding a toggle touches nothing here.
# The rule every new key keeps: its default computes what runs made before it computed.
ORIGINAL_KEYS = frozenset(
    [f"model.{k}" for k in ("d_model", "n_heads", "d_head", "n_layers", "ffn_mult", "activation", "qk_scale",
                            "temperature", "residual", "norm", "pos_enc", "causal", "init", "max_len", "learned_std",
                            "dropout")]
    + [f"data.{k}" for k in ("task", "seed", "batch_size", "train_subset", "test_subset", "val_size", "permute",
                             "permute_seed", "vocab", "length", "test_length", "reverse", "n_train", "n_val", "n_test")]
    + [f"optim.{k}" for k in ("name", "lr", "weight_decay", "warmup", "schedule", "grad_clip")]
    + [f"trainer.{k}" for k in ("max_epochs", "max_steps", "accelerator", "devices", "strategy", "precision", "threads",
                                "flush_denormal", "limit_val_batches", "log_every_n_steps", "ckpt_every_n_steps")]
    + [f"run.{k}" for k in ("dir", "group", "project", "probes", "probe_every", "probe_batch", "expensive_probes",
                            "name", "sweep_id")]
    + ["seed", "pooling", "budget", "tracking"])


@functools.cache
def added_defaults() -> dict[str, Any]:
    """{key added after ORIGINAL_KEYS: its default}, in key order (model.arch, model.rnn_hidden, ...)."""
    return {k: v for k, v in flat(Config()).items() if k not in ORIGINAL_KEYS}


def with_added_keys(config: dict[str, Any]) -> dict[str, Any]:
    """A run's flat config as it would be written today: a key added after the run was made (added_defaults)
    and absent from its config holds its default, which is what the run computed. So everywhere runs are read
    (the table, W&B's runs, compare, export) an old run and a new one of one configuration are one variant."""
    missing = {k: v for k, v in added_defaults().items() if k not in config}
    if not missing:
        return config
    merged, order = {**config, **missing}, _key_order()
    return {k: merged[k] for k in sorted(merged, key=lambda k: order.get(k, len(order)))}  # as written today


@functools.cache
def _key_order() -> dict[str, int]:
    return {k: i for i, k in enumerate(flat(Config()))}


def plugged_in_use(cfg: Config) -> list[str]:
    """The plug-in values `cfg` selects ("model.norm_type=scalenorm", "data.task=sort"), in key order."""
    used = [f"model.{key}={getattr(cfg.model, key)}" for key in PLUGGED if getattr(cfg.model, key) in PLUGGED[key]]
    return used + ([f"data.task={cfg.data.task}"] if TASK_SPECS[cfg.data.task].plugin else [])


def _plugin_identity(cfg: Config, identity: dict[str, Any]) -> dict[str, Any]:
    """A run's identity where `plugins` names some: the keys of the plug-in sections its selected components read,
    the plug-ins and their versions (a new version computes anew); where it selects none of their values, none of
    that, so that naming a plug-in alone changes no run's id."""
    selected = {section for section, _ in cfg.ext
                if (owned := P.owner(section)) and getattr(cfg.model, owned[0], None) == owned[1]}
    unused = {section for section, _ in cfg.ext} - selected
    out = {k: v for k, v in identity.items() if k.split(".", 1)[0] not in unused}
    if not plugged_in_use(cfg):
        out.pop("plugins", None)
        return out
    if versions := P.versions(cfg.plugins):
        out["plugins.versions"] = versions
    return out


def run_id(cfg: Config) -> str:
    """A stable id from the type-converted config (budget included; where/how it is recorded excluded)."""
    resolved = cfg if cfg.encoder is cfg.model else replace(cfg, model=cfg.encoder)  # max_len=None: the table built
    added = added_defaults()
    identity = {k: v for k, v in flat(resolved).items()
                if k not in NOT_IDENTITY and not (k in added and v == added[k])}
    if cfg.plugins:
        identity = _plugin_identity(cfg, identity)
    blob = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
