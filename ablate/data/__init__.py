"""Datasets and LightningDataModules: MNIST read row by row, and synthetic token tasks.

`build_datamodule(cfg)` builds the module the task's registry entry names (ablate/registry.py); the
module says which model it needs (`kind`, `seq_len`, and `in_features`/`n_classes` or
`n_tokens`/`n_out`).
No W&B or pandas here; torchvision is imported only when MNIST is read.
"""

from __future__ import annotations

import pytorch_lightning as pl

from ..config import ConfigError, DataConfig
from ..registry import TASKS as REGISTRY
from .common import DataError, InMemory, data_dir, keep_batch
from .copytask import CopyTask, copy_sequences
from .mnist import MnistRows, network_available, row_permutation
from .synthetic import IGNORE, SyntheticTask, split_seed


def build_datamodule(cfg: DataConfig) -> pl.LightningDataModule:
    """The LightningDataModule of cfg.task's registry entry."""
    if cfg.task not in REGISTRY:  # a plug-in's task is there once the config that names it has been built
        raise ConfigError(
            f"data.task={cfg.task!r} is not allowed; expected one of {', '.join(REGISTRY)}"
        )
    return REGISTRY[cfg.task].datamodule_class()(cfg)


__all__ = [
    "IGNORE",
    "CopyTask",
    "DataError",
    "InMemory",
    "MnistRows",
    "SyntheticTask",
    "build_datamodule",
    "copy_sequences",
    "data_dir",
    "keep_batch",
    "network_available",
    "row_permutation",
    "split_seed",
]
