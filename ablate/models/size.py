"""How large the model a config builds is: its parameters and buffer elements, read from the model itself
(ablate.models.meta builds it on torch's meta device), so that no count restates the architecture (issue 38).

Counting needs torch (2.5 s to import on the 2-core CI machine), and the sweep command and each of its jobs
check every run's config before any run trains (ablate.limits): the command on a login node, or a job
that hands its runs to a forked trainer, imported torch for nothing else. So each count is kept on disk,
one small JSON file per model, under a key of everything it depends on: the model's config, the task's
model sizes, the pooling, the source of every module of this package and torch's version file. A command
whose models were all counted before imports no torch (a sweep command's --dry-run: 5.6 s -> 0.6 s here).
A model with a plug-in's component (ablate/plugins.py) is counted afresh each time, its code lying outside
this package. The folder: $ABLATE_CACHE_DIR/model-sizes, else ablate/model-sizes in the user's cache folder
(XDG_CACHE_HOME, else ~/.cache); one subfolder per version of the code, those of the CACHE_VERSIONS
versions that wrote one most recently kept. A file that cannot be read or written is passed by; what is
read is checked (two counts, non-negative integers), never unpickled."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..fileio import atomic_write
from .config import PLUGGED, EncoderConfig

CACHE_VERSIONS = 4  # subfolders of counts kept: the code versions that wrote one most recently


class TooLarge(ValueError):
    """A tensor of the model has a dimension or a size beyond torch's 64-bit integers."""


@dataclass(frozen=True)
class Size:
    parameters: int  # trained parameters
    buffers: int  # elements of the buffers (positional tables, ALiBi's slopes)

    def __add__(self, other: Size) -> Size:
        return Size(self.parameters + other.parameters, self.buffers + other.buffers)

    def __sub__(self, other: Size) -> Size:
        return Size(self.parameters - other.parameters, self.buffers - other.buffers)

    def __mul__(self, k: int) -> Size:
        return Size(self.parameters * k, self.buffers * k)


def cache_root() -> Path:
    """$ABLATE_CACHE_DIR/model-sizes, else ablate/model-sizes in the user's cache folder."""
    base = os.environ.get("ABLATE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "ablate")
    return Path(base) / "model-sizes"


@functools.cache
def code_version() -> str | None:
    """A digest of what a count depends on besides the config: this package's source and torch's version
    file (None where torch cannot be found: nothing is kept)."""
    found = importlib.util.find_spec("torch")
    if found is None or not found.submodule_search_locations:
        return None
    digest = hashlib.sha256()
    try:
        digest.update((Path(next(iter(found.submodule_search_locations))) / "version.py").read_bytes())
        for path in sorted(Path(__file__).parent.glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    except OSError:
        return None
    return digest.hexdigest()[:16]


def _plugged(cfg: EncoderConfig) -> bool:
    return bool(cfg.plugged) or any(getattr(cfg, key, None) in values for key, values in PLUGGED.items())


def cache_file(cfg: EncoderConfig, sizes: dict[str, int], pooling: str) -> Path | None:
    """Where the count of this model is kept; None where it is not kept (a plug-in's component, no torch)."""
    version = code_version()
    if version is None or _plugged(cfg):
        return None
    key = hashlib.sha256(repr((cfg, sorted(sizes.items()), pooling)).encode()).hexdigest()[:32]
    return cache_root() / version / f"{key}.json"


def _read(path: Path) -> Size | None:
    try:
        data = json.loads(path.read_text())
        parameters, buffers = data["parameters"], data["buffers"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not all(type(n) is int and n >= 0 for n in (parameters, buffers)):
        return None
    return Size(parameters, buffers)


def _keep(path: Path, size: Size) -> None:
    try:
        fresh = not path.parent.is_dir()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps({"parameters": size.parameters, "buffers": size.buffers}) + "\n")
        if fresh:  # a new version of the code: the oldest versions' counts go
            versions = sorted((p for p in path.parent.parent.iterdir() if p.is_dir()),
                              key=lambda p: p.stat().st_mtime, reverse=True)
            for old in versions[CACHE_VERSIONS:]:
                shutil.rmtree(old, ignore_errors=True)
    except OSError:
        pass


def model_size(cfg: EncoderConfig, sizes: dict[str, int], pooling: str = "mean") -> Size:
    """Parameters and buffer elements of the whole model `ablate.models.meta.build_model(cfg, sizes,
    pooling)` makes, from the cache or counted on the meta device; `cfg.max_len` must be set (ablate.config
    sizes it from the task). TooLarge where a shape overflows torch's 64-bit sizes (never kept)."""
    path = cache_file(cfg, sizes, pooling)
    found = _read(path) if path is not None else None
    if found is not None:
        return found
    from .meta import counted

    size = counted(cfg, sizes, pooling)
    if path is not None:
        _keep(path, size)
    return size
