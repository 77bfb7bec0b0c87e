"""Datasets and LightningDataModules: MNIST read row by row, and a synthetic copy task.

`build_datamodule(cfg)` picks the module for `data.task`; the module says which model it needs
(`kind`, `seq_len`, and `in_features`/`n_classes` or `n_tokens`/`n_out`).
No W&B or pandas here; torchvision is imported only when MNIST is read.
"""

from __future__ import annotations

import pytorch_lightning as pl

from ..config import ConfigError, DataConfig
from .common import DataError, InMemory, data_dir, keep_batch
from .copytask import IGNORE, CopyTask, copy_sequences, split_seed
from .mnist import MnistRows, network_available, row_permutation

TASKS = {"mnist": MnistRows, "copy": CopyTask}


def build_datamodule(cfg: DataConfig) -> pl.LightningDataModule:
    """The LightningDataModule for cfg.task."""
    if cfg.task not in TASKS:
        raise ConfigError(
            f"data.task={cfg.task!r} is not allowed; expected one of {', '.join(TASKS)}"
        )
    return TASKS[cfg.task](cfg)


__all__ = [
    "IGNORE",
    "TASKS",
    "CopyTask",
    "DataError",
    "InMemory",
    "MnistRows",
    "build_datamodule",
    "copy_sequences",
    "data_dir",
    "keep_batch",
    "network_available",
    "row_permutation",
    "split_seed",
]
