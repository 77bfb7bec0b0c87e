"""LightningModules: loss, metrics and optimiser around the encoder, one per task."""

from .base import EncoderTask
from .classify import ClassifyRows
from .copy import CopyTokens

TASKS = {"classify": ClassifyRows, "tokens": CopyTokens}


def build_task(config: dict, datamodule) -> EncoderTask:
    """The LightningModule for a datamodule's `kind`, sized from its attributes."""
    if datamodule.kind == "classify":
        return ClassifyRows(config, in_features=datamodule.in_features, n_classes=datamodule.n_classes)
    return CopyTokens(config, n_tokens=datamodule.n_tokens, n_out=datamodule.n_out)


__all__ = ["TASKS", "ClassifyRows", "CopyTokens", "EncoderTask", "build_task"]
