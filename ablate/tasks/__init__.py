"""LightningModules: loss, metrics and optimiser around the encoder, one per task."""

from .. import limits
from ..checkpoint import CheckpointError, load_checkpoint
from ..config import Config
from .base import EncoderTask
from .classify import ClassifyRows
from .copy import CopyTokens

TASKS = {"classify": ClassifyRows, "tokens": CopyTokens}


def build_task(config: Config, datamodule) -> EncoderTask:
    """The LightningModule for a datamodule's `kind`, sized from its attributes; a plug-in's model (model.arch)
    builds its own."""
    from ..models.config import PLUGGED

    if (plugged := PLUGGED["arch"].get(config.model.arch)) is not None:
        return plugged.build.task(config, config.options(config.model.arch), datamodule)
    if datamodule.kind == "classify":
        return ClassifyRows(config, in_features=datamodule.in_features, n_classes=datamodule.n_classes)
    return CopyTokens(config, n_tokens=datamodule.n_tokens, n_out=datamodule.n_out)


class PluginModel(CheckpointError):
    """A checkpoint of a plug-in's whole model (model.arch): its plug-in's LightningModule, not ablate's."""


def load_task(checkpoint, map_location="cpu") -> tuple[EncoderTask, object]:
    """(task, datamodule) from a last.ckpt: the config saved in it rebuilds both. Loaded weights-only
    (tensors and plain values: a crafted pickle is refused, never run); CheckpointError (a
    ValueError, one line) for a missing, truncated, garbage or unsafe checkpoint, one whose config
    this version cannot build, or one whose weights do not fit the model that config builds."""
    from ..config import ConfigError, from_dict
    from ..data import build_datamodule
    from ..models.config import PLUGGED

    saved = load_checkpoint(checkpoint, map_location)
    try:
        cfg = from_dict(saved["hyper_parameters"]["config"])
        if cfg.model.arch in PLUGGED["arch"]:
            raise PluginModel(f"checkpoint {checkpoint} is of a plug-in's model (model.arch={cfg.model.arch}): the "
                              "probes and the explorer read ablate's encoder and are not available for it")
        sizes = {k: int(v) for k, v in saved["hyper_parameters"].items() if k != "config"}
        if bad := [f"{k}={v}" for k, v in sizes.items() if v < 1]:
            raise ValueError(f"model sizes must be integers >= 1, got {', '.join(bad)}")
        datamodule = build_datamodule(cfg.data)
    except PluginModel:
        raise
    except (ConfigError, KeyError, TypeError, ValueError, OverflowError) as err:  # int(inf): OverflowError
        raise CheckpointError(f"checkpoint {checkpoint} holds a config this version cannot build "
                              f"({str(err).splitlines()[0] if str(err) else type(err).__name__})") from None
    cls = TASKS[datamodule.kind]
    # before the model is built: a few small tensors may come with the config of a 9 TB model (the fit of
    # the weights is load_from_checkpoint's strict load, on a model known to fit memory)
    if problem := limits.checkpoint_problem(cfg, sizes, size_keys(cfg)):
        raise CheckpointError(f"checkpoint {checkpoint}: {problem}")
    try:
        task = cls.load_from_checkpoint(checkpoint, map_location=map_location, weights_only=True)
    except CheckpointError:
        raise
    except (RuntimeError, KeyError, TypeError, ValueError) as err:  # load_state_dict: missing, unexpected, mis-shaped
        if isinstance(err, RuntimeError) and "state_dict" not in str(err):
            raise  # not a mismatch (e.g. out of memory on the device): say what it really is
        raise CheckpointError(f"checkpoint {checkpoint} does not fit the model its config builds "
                              f"({_detail(err)})") from None
    return task, datamodule


def size_keys(cfg: Config) -> str:
    """The settings that sized the model, as a message names them: those off their defaults."""
    from ..config import SIZE_KEYS, flat

    values, defaults = flat(cfg), flat(Config())
    return ", ".join(f"{k}={values[k]}" for k in SIZE_KEYS if values[k] != defaults[k]) or "the default sizes"


def _detail(err: BaseException) -> str:
    """The telling line of a load error: torch's "Error(s) in loading state_dict for X:" heads a list."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("Error(s) in loading"):
        return lines[1].rstrip(".")
    return lines[0] if lines else type(err).__name__


__all__ = ["TASKS", "CheckpointError", "ClassifyRows", "CopyTokens", "EncoderTask", "build_task", "load_task"]
