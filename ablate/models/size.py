"""How large the model a config builds is: its parameters and buffer elements, read from the model itself
(ablate.models.meta builds it on torch's meta device), so that no count restates the architecture (issue 38).

Counting needs torch (2.5 s to import on the 2-core CI machine), and the sweep command and each of its jobs
check every run's config before any run trains (ablate.limits): the command on a login node, or a job
that hands its runs to a forked trainer, imported torch for nothing else. So each count is kept on disk,
one small JSON file per model, under a key of everything it depends on: the model's config, the task's
model sizes, the pooling, the source of every module of this package and torch's version file; likewise a
recurrent model's hidden size matched to the Transformer's parameters. A command
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
from dataclasses import dataclass, fields
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


def cache_root() -> Path | None:
    """$ABLATE_CACHE_DIR/model-sizes, else ablate/model-sizes in the user's cache folder; None without a home
    (no folder is made in the working directory)."""
    base = os.environ.get("ABLATE_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME")
    if not os.environ.get("ABLATE_CACHE_DIR"):
        home = os.path.expanduser("~")
        if not base and home.startswith("~"):
            return None
        base = os.path.join(base or os.path.join(home, ".cache"), "ablate")
    return Path(base) / "model-sizes"


@functools.cache
def code_version() -> str | None:
    """A digest of what a count depends on besides the config: this package's source and torch's version
    file (None where torch cannot be found: nothing is kept)."""
    found = importlib.util.find_spec("torch")
    if found is None or not found.submodule_search_locations:
        return None
    digest = hashlib.sha256()
    sources = sorted(Path(__file__).parent.glob("*.py"))
    if not sources:  # an install without its source: nothing to key the counts on
        return None
    try:
        digest.update((Path(next(iter(found.submodule_search_locations))) / "version.py").read_bytes())
        for path in sources:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    except OSError:
        return None
    return digest.hexdigest()[:16]


def _plugged(cfg: EncoderConfig) -> bool:
    return bool(cfg.plugged) or any(getattr(cfg, key, None) in values for key, values in PLUGGED.items())


def cache_file(cfg: EncoderConfig, sizes: dict[str, int], pooling: str) -> Path | None:
    """Where the count of this model is kept; None where it is not kept (a plug-in's component, no torch, no
    home). The key holds every field of the config (repr=False ones too) by name."""
    version, root = code_version(), cache_root()
    if version is None or root is None or _plugged(cfg):
        return None
    config = [(f.name, getattr(cfg, f.name)) for f in fields(cfg)]
    key = hashlib.sha256(repr((config, sorted(sizes.items()), pooling)).encode()).hexdigest()[:32]
    return root / version / f"{key}.json"


def _read(path: Path | None, names: tuple[str, ...]) -> tuple[int, ...] | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text())
        found = tuple(data[name] for name in names)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not all(type(n) is int and n >= 0 for n in found):
        return None
    return found


def _keep(path: Path | None, values: dict[str, int]) -> None:
    if path is None:
        return
    try:
        fresh = not path.parent.is_dir()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(values) + "\n")
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
    found = _read(path, ("parameters", "buffers"))
    if found is not None:
        return Size(*found)
    from .meta import counted

    size = counted(cfg, sizes, pooling)
    _keep(path, {"parameters": size.parameters, "buffers": size.buffers})
    return size


def matched_hidden(cfg: EncoderConfig) -> int:
    """ablate.models.rnn.matched_hidden(cfg), the recurrent stack's hidden size matched to the Transformer's
    parameters (counted on the meta device), kept on disk beside the counts (under the pooling "rnn_hidden")."""
    path = cache_file(cfg, {}, "rnn_hidden")
    found = _read(path, ("rnn_hidden",))
    if found is not None and found[0] > 0:
        return found[0]
    from .rnn import matched_hidden as computed

    hidden = computed(cfg)
    _keep(path, {"rnn_hidden": hidden})
    return hidden
