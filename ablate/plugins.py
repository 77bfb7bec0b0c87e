"""Plug-ins: your own components, tasks and whole models, from your own module, with every tool of ablate.

A plug-in is a Python module that defines `register(plugin)`. ablate imports it only when a run's config names
it (`plugins=my_module`, on the command line, in a sweep file, or as the name of an entry point of the group
`ablate.plugins` in an installed package's pyproject.toml), and calls `register` with a `Plugin`, through which
it adds

    plugin.component(key, value, build, options)  a new value of model.arch's parts: model.norm_type,
                                                  model.pos_enc, model.block or model.activation
    plugin.task(spec)                             a new data.task: an ablate.registry.TaskSpec, the entry the
                                                  built-in tasks have, its data module by import path
    plugin.model(name, task, options, datamodule) a whole model: model.arch=<name> builds the plug-in's
                                                  LightningModule (and, if it gives one, its data module)

`options` is a frozen dataclass whose fields (declared with ablate.models.config.option(default, help)) become
the keys of a section of the run's config named after the value: `scalenorm.g_init=2`. Everything is checked
before anything is registered: a module that fails to import, defines no `register`, or registers a name ablate
or another plug-in has already is one line (PluginError), and registers nothing.

Below the config: at import time it imports only the leaf ablate.checkpoint, and no torch; it writes the values it
registers into ablate.models.config.PLUGGED and ablate.registry.TASKS, where the model and the data read them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata
import os
import re
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .checkpoint import first_line

GROUP = "ablate.plugins"  # the entry-point group an installed package names its plug-ins in
COMPONENT_KEYS = ("norm_type", "pos_enc", "attention", "ffn", "block", "activation")  # model.* keys a component extends
# components whose module the probes cannot read (they read ablate's attention and blocks): a run with one records
# its curves and says, in one line, that the encoder's probes are not available
OPAQUE = ("arch", "attention", "ffn", "block")
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")  # a value (and its section): lower case, a folder-safe key part
MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# what ablate.config.convert reads a key's value as: an option's type must be one of these (or Optional of one)
SCALARS = (bool, int, float, str)


class PluginError(ValueError):
    """A plug-in that cannot be used: one line naming the module and the problem."""


@dataclass(frozen=True)
class WholeModel:
    """What model.arch=<name> builds: `task(cfg, options, datamodule)` a LightningModule, `datamodule(cfg,
    options)` its data (None: data.task's); `check(cfg)` what in a config it cannot train, in words (None: fine),
    asked when the config is built, before any work."""

    task: Callable[..., Any]
    datamodule: Callable[..., Any] | None
    check: Callable[[Any], str | None] | None = None


@dataclass(frozen=True)
class Loaded:
    """A plug-in ablate has imported and registered."""

    name: str  # as the config names it
    module: str  # the module whose register() ran
    version: str  # its __version__, or its package's version ("" when neither says)
    sha256: str  # of its source files: provenance, so that a run says which code made it
    sections: dict[str, type]  # config section -> its options dataclass
    owns: dict[str, tuple[str, str]]  # section -> (the model.* key, the value) that reads it
    registered: tuple[str, ...]  # what it added, in words ("model.norm_type=scalenorm", "data.task=parity")


@dataclass
class Plugin:
    """What a plug-in's register() receives: each call records one addition, applied once register() returns
    and every addition has been checked."""

    name: str
    components: list[tuple[str, str, Any, type | None]] = field(default_factory=list)
    tasks: list[Any] = field(default_factory=list)

    def component(self, key: str, value: str, build: Callable[..., Any], options: type | None = None) -> None:
        """`model.<key>=<value>` builds with `build`, whose arguments are the key's own: norm_type
        build(d_model, eps, options) -> nn.Module (a class: the norm probes find it); pos_enc build(cfg,
        options) -> ablate.models.positional.Positional; attention build(cfg, positional, options) and ffn
        build(cfg, options) -> nn.Module with forward(h, need_weights) -> (output, weights or None), placed in
        ablate's norm, residual and dropout slots; block build(cfg, positional, options) -> nn.Module with
        forward(x, need_weights) -> (x, weights or None); activation build(options) -> nn.Module."""
        key = key.removeprefix("model.")
        if key not in COMPONENT_KEYS:
            raise PluginError(f"plugin.component({key!r}, ...): ablate's components are "
                              f"{', '.join('model.' + k for k in COMPONENT_KEYS)}; register a whole model "
                              "with plugin.model for anything else")
        self.components.append((key, value, build, options))

    def model(self, name: str, task: Callable[..., Any], options: type | None = None,
              datamodule: Callable[..., Any] | None = None, check: Callable[[Any], str | None] | None = None) -> None:
        """`model.arch=<name>` trains `task(cfg, options, datamodule)`, any LightningModule logging train/loss,
        val/acc, val/acc_best and test/acc; `datamodule(cfg, options)` builds its data (None: the data module of
        data.task); `check(cfg)` says what it cannot train (a one-line ConfigError before any work), or None."""
        self.components.append(("arch", name, WholeModel(task, datamodule, check), options))

    def task(self, spec: Any) -> None:
        """A new data.task: an ablate.registry.TaskSpec whose `datamodule` is "package.module:Class"."""
        self.tasks.append(spec)


LOADED: dict[str, Loaded] = {}  # name -> the plug-in, once registered (imported and registered once per process)


def names(text: str) -> tuple[str, ...]:
    """`plugins`' value -> the names it lists, in order, once each."""
    return tuple(dict.fromkeys(n.strip() for n in str(text).split(",") if n.strip()))


def load(text: str) -> tuple[Loaded, ...]:
    """Import and register each plug-in `text` names (comma-separated), once per process."""
    return tuple(LOADED[n] if n in LOADED else _load(n) for n in names(text))


def loaded_sections() -> dict[str, type]:
    """Every section of every plug-in registered in this process."""
    return {s: cls for p in LOADED.values() for s, cls in p.sections.items()}


def owner(section: str) -> tuple[str, str] | None:
    """(model.* key, value) whose selection a plug-in section configures, or None."""
    return next((p.owns[section] for p in LOADED.values() if section in p.owns), None)


def provenance(text: str) -> dict[str, dict[str, str]]:
    """{name: {module, version, sha256}} of the plug-ins `text` names (for summary.json)."""
    return {p.name: {"module": p.module, "version": p.version, "sha256": p.sha256} for p in load(text)}


def changed(summary: dict[str, Any] | None) -> list[str]:
    """The plug-ins, loaded in this process, whose source differs from the one that made the run of `summary` (its
    provenance's sha256): that run was made by other code, as one of another commit of ablate is."""
    made = ((summary or {}).get("provenance") or {}).get("plugins") or {}
    return [name for name, record in made.items() if isinstance(record, dict) and name in LOADED
            and LOADED[name].sha256 and record.get("sha256") != LOADED[name].sha256]


def versions(text: str) -> dict[str, str]:
    """{name: version} of the named plug-ins that declare one: part of a run's id."""
    return {p.name: p.version for p in load(text) if p.version}


def _entry_point(name: str):
    found = [ep for ep in importlib.metadata.entry_points(group=GROUP) if ep.name == name]
    return found[0] if found else None


def _load(name: str) -> Loaded:
    where = f"plugins={name}"
    ep = _entry_point(name)
    if ep is None and not MODULE.fullmatch(name):
        raise PluginError(f"{where}: not a module name nor an entry point of {GROUP}; name an importable module "
                          "(e.g. my_package.ablate_plugin) or an installed entry point")
    try:
        if ep is not None:
            target = ep.load()
        else:
            target = import_user(name)
    except ModuleNotFoundError as err:
        if err.name is not None and (name == err.name or name.startswith(err.name + ".")):
            raise PluginError(f"{where}: no module {err.name!r} on this Python's path (nor in the current folder) and "
                              f"no entry point {name!r} of {GROUP}; install its package (pip install -e <its folder>) "
                              "or run from the folder that holds it") from None
        raise PluginError(f"{where}: importing it failed ({first_line(err)}); fix the plug-in or what it imports") from None
    except Exception as err:  # noqa: BLE001 - the user's module: whatever it raises is one line, before any work
        raise PluginError(f"{where}: importing it failed ({first_line(err)}); fix the plug-in") from None
    module = target if isinstance(target, types.ModuleType) else sys.modules.get(getattr(target, "__module__", ""))
    register = getattr(target, "register", None) if isinstance(target, types.ModuleType) else target
    if not callable(register):
        raise PluginError(f"{where}: {getattr(target, '__name__', name)} defines no register(plugin) function; "
                          "add one (docs/plugins.md)")
    plugin = Plugin(name)
    try:
        register(plugin)
    except PluginError as err:
        raise PluginError(f"{where}: {err}") from None
    except Exception as err:  # noqa: BLE001
        raise PluginError(f"{where}: its register() failed ({first_line(err)}); fix the plug-in") from None
    done = _apply(plugin, module, ep)
    LOADED[name] = done
    return done


def import_user(name: str) -> types.ModuleType:
    """Import a module of the user's (a plug-in, a callback's): from the path, or from the current folder, as
    `python -m` would find it (the `ablate` command's path does not hold the folder it runs in)."""
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    return importlib.import_module(name)


def _builtin_names() -> dict[str, tuple[str, ...]]:
    from .models.config import (
        ACTIVATION_NAMES,
        ARCH_NAMES,
        ATTENTION_NAMES,
        BLOCK_NAMES,
        FFN_NAMES,
        NORM_TYPE_NAMES,
        POS_ENC_NAMES,
    )

    return {"arch": ARCH_NAMES, "norm_type": NORM_TYPE_NAMES, "pos_enc": POS_ENC_NAMES, "block": BLOCK_NAMES,
            "activation": ACTIVATION_NAMES, "attention": ATTENTION_NAMES, "ffn": FFN_NAMES}


def _apply(plugin: Plugin, module: types.ModuleType | None, ep) -> Loaded:
    """Check every addition of `plugin`, then register them all (or none)."""
    from . import registry
    from .models.config import PLUGGED, Plugged

    where = f"plugins={plugin.name}"
    builtin, taken = _builtin_names(), _taken_sections()
    sections, owns, said = {}, {}, []
    for key, value, build, options in plugin.components:
        what = f"model.{key}={value}"
        if not isinstance(value, str) or not NAME.fullmatch(value):
            raise PluginError(f"{where}: registers {what!r}; a value is 1-40 lower-case letters, digits or _, "
                              "starting with a letter")
        if value in builtin[key]:
            raise PluginError(f"{where}: registers {what}, which is ablate's own; give it another name")
        if value in PLUGGED[key] or any(k == key and v == value for k, v, *_ in plugin.components[:len(said)]):
            other = PLUGGED[key][value].plugin if value in PLUGGED[key] else plugin.name
            raise PluginError(f"{where}: registers {what}, which plugins={other} has registered already; "
                              "rename one of them")
        if not callable(build) and not isinstance(build, WholeModel):
            raise PluginError(f"{where}: {what}'s build is {build!r}, not callable; give a class or a function")
        if options is not None:
            if value in taken or value in sections:
                raise PluginError(f"{where}: {what}'s options would be the config section {value!r}, which "
                                  f"{taken.get(value, 'this plug-in')} has already; rename it")
            _check_options(where, what, options)
            sections[value], owns[value] = options, (key, value)
        said.append(what)
    for spec in plugin.tasks:
        if not isinstance(spec, registry.TaskSpec):
            raise PluginError(f"{where}: plugin.task() takes an ablate.registry.TaskSpec, got {type(spec).__name__}")
        if spec.name in registry.TASKS or f"data.task={spec.name}" in said:
            other = registry.TASKS[spec.name].plugin if spec.name in registry.TASKS else plugin.name
            raise PluginError(f"{where}: registers data.task={spec.name}, which "
                              f"{'is ablate' + chr(39) + 's own' if not other else 'plugins=' + other + ' has registered already'}"
                              "; give it another name")
        if not NAME.fullmatch(spec.name) or ":" not in spec.datamodule:
            raise PluginError(f"{where}: data.task={spec.name!r} needs a name of lower-case letters, digits or _ "
                              "and a datamodule 'package.module:Class'")
        if spec.prepare and ":" not in spec.prepare:
            raise PluginError(f"{where}: data.task={spec.name}'s prepare={spec.prepare!r} is not "
                              "'package.module:function'; name a function, or leave it out")
        if unknown := [k for k in spec.keys if k not in _data_keys()]:
            raise PluginError(f"{where}: data.task={spec.name} reads data.{unknown[0]}, not a key of ablate's data "
                              f"section; use the data keys there are ({', '.join(_data_keys())}) or give a model its "
                              "own options")
        said.append(f"data.task={spec.name}")
    for key, value, build, options in plugin.components:
        PLUGGED[key][value] = Plugged(build, options, plugin.name)
    for spec in plugin.tasks:
        registry.TASKS[spec.name] = dataclasses.replace(spec, plugin=plugin.name)
    return Loaded(plugin.name, getattr(module, "__name__", plugin.name), _version(module, ep), _sha256(module),
                  sections, owns, tuple(said))


def _taken_sections() -> dict[str, str]:
    """Names a plug-in's section may not have: the config's own keys and sections, other plug-ins' sections."""
    from . import config

    out = {name: "ablate's config" for name in config.builtin_names()}
    out.update({s: f"plugins={p.name}" for p in LOADED.values() for s in p.sections})
    return out


def _data_keys() -> tuple[str, ...]:
    from . import config

    return tuple(f.name for f in dataclasses.fields(config.DataConfig) if f.name != "task")


def _check_options(where: str, what: str, options: type) -> None:
    if not (dataclasses.is_dataclass(options) and isinstance(options, type)
            and options.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise PluginError(f"{where}: {what}'s options must be a frozen dataclass (@dataclass(frozen=True)), "
                          f"got {options!r}")
    try:
        hints = typing.get_type_hints(options)
        made = options()  # its __post_init__ on the defaults
    except Exception as err:  # noqa: BLE001
        raise PluginError(f"{where}: {what}'s options cannot be made with their defaults ({first_line(err)})") from None
    for f in dataclasses.fields(options):
        if not _scalar_type(hints[f.name]):
            raise PluginError(f"{where}: {what}'s option {f.name} has type {hints[f.name]}; a key holds bool, int, "
                              "float, str, a Literal of strings, or one of these or None")
        bound = f.metadata.get("bound")
        if bound is None:
            continue
        kind = [a for a in (typing.get_args(hints[f.name]) or (hints[f.name],)) if a is not type(None)]
        if kind != [bound.kind]:
            raise PluginError(f"{where}: {what}'s option {f.name} has type {hints[f.name]} and a bound for "
                              f"{bound.kind.__name__} ({bound.text}); give it a bound of its own type")
        default = getattr(made, f.name)
        if default is not None and not bound.ok(default):
            raise PluginError(f"{where}: {what}'s option {f.name} defaults to {default!r}, outside its own bound "
                              f"({bound.text}); change the default or the bound")


def _scalar_type(tp: Any) -> bool:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return all(isinstance(a, str) for a in args)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return len(inner) == 1 and _scalar_type(inner[0])
    return tp in SCALARS


def _version(module: types.ModuleType | None, ep) -> str:
    version = getattr(module, "__version__", None)
    if version is None and ep is not None and ep.dist is not None:
        version = ep.dist.version
    return "" if version is None else str(version)


def _sha256(module: types.ModuleType | None) -> str:
    """Of the module's source: every .py file of its package's folder (or its one file), by relative path."""
    path = Path(getattr(module, "__file__", "") or "")
    if not path.is_file():
        return ""
    files = sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]
    digest = hashlib.sha256()
    for f in files:
        digest.update(str(f.relative_to(path.parent)).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


def unload(name: str) -> None:
    """Remove what the plug-in `name` registered (tests; a process that named it once keeps it otherwise)."""
    from . import registry
    from .models.config import PLUGGED

    LOADED.pop(name, None)
    for registered in PLUGGED.values():
        for value in [v for v, p in registered.items() if p.plugin == name]:
            del registered[value]
    for task in [t for t, spec in registry.TASKS.items() if spec.plugin == name]:
        del registry.TASKS[task]
