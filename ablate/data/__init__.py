"""Datasets and LightningDataModules: MNIST read row by row, and synthetic token tasks.

`build_datamodule(cfg)` builds the module the task's registry entry names (ablate/registry.py); the
module says which model it needs (`kind`, `seq_len`, and `in_features`/`n_classes` or
`n_tokens`/`n_out`). `files.ready(cfg)` is what a sweep checks of a data config before any run.
No W&B or pandas here; torchvision is imported only when MNIST is read. Lightning and torch are imported
with the data modules, not with this package: the names below are looked up when first used, so that
`ablate.data.files` (and a sweep's command, which runs it) needs neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import ConfigError, DataConfig
from ..lazy import exports
from ..registry import TASKS as REGISTRY
from .files import DataError, data_dir  # noqa: F401  (exported: __all__)

if TYPE_CHECKING:
    import pytorch_lightning as pl

# name -> the module of this package that defines it, imported when the name is first used (PEP 562, as
# ablate.results does; tests/layering.py reads LAZY)
LAZY = {
    "IGNORE": ".synthetic", "SyntheticTask": ".synthetic", "split_seed": ".synthetic",
    "CopyTask": ".copytask", "copy_sequences": ".copytask",
    "InMemory": ".common", "keep_batch": ".common",
    "MnistRows": ".mnist", "row_permutation": ".mnist", "network_available": ".files",
}


__getattr__, __dir__ = exports(__name__, globals(), LAZY)


def build_datamodule(cfg: DataConfig) -> pl.LightningDataModule:
    """The LightningDataModule of cfg.task's registry entry."""
    if cfg.task not in REGISTRY:  # a plug-in's task is there once the config that names it has been built
        raise ConfigError(
            f"data.task={cfg.task!r} is not allowed; expected one of {', '.join(REGISTRY)}"
        )
    return REGISTRY[cfg.task].datamodule_class()(cfg)


__all__ = sorted(["DataError", "build_datamodule", "data_dir", *LAZY])
