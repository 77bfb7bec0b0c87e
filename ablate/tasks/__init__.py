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


def load_task(checkpoint, map_location="cpu") -> tuple[EncoderTask, object]:
    """(task, datamodule) from a last.ckpt: the config saved in it rebuilds both."""
    import torch

    from ..config import from_dict
    from ..data import build_datamodule

    hparams = torch.load(checkpoint, map_location=map_location, weights_only=False)["hyper_parameters"]
    datamodule = build_datamodule(from_dict(hparams["config"]).data)
    cls = TASKS[datamodule.kind]
    return cls.load_from_checkpoint(checkpoint, map_location=map_location), datamodule


__all__ = ["TASKS", "ClassifyRows", "CopyTokens", "EncoderTask", "build_task", "load_task"]
