"""The model a config builds, on torch's meta device (every tensor a shape, no memory): what
ablate.models.size counts when its cache has no entry, so that no count restates the architecture
(issue 38).

`counted(cfg, sizes, pooling)` counts parameters and buffers of the whole model `build_model` makes. A model of any depth costs two small builds: every block after the first is built the same
way as the second (the encoder's blocks are identical, a recurrent stack's layers past the first all
read the hidden size), so a stack of L blocks holds size(1) + (L - 1) * (size(2) - size(1)); a test
checks it against full builds. A crafted config (`model.n_layers=1e30`, `model.d_model=1e20`) is
counted in milliseconds, or refused with TooLarge where a tensor's shape does not fit torch's 64-bit
sizes."""

from __future__ import annotations

import functools
from dataclasses import replace

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .config import EncoderConfig
from .heads import SequenceClassifier, TokenModel
from .rnn import RNN_CELLS, matched_hidden
from .size import Size, TooLarge


def build_model(cfg: EncoderConfig, sizes: dict[str, int], pooling: str = "mean") -> nn.Module:
    """The whole model for the task's model sizes: in_features/n_classes (SequenceClassifier, rows
    of real values) or n_tokens/n_out (TokenModel, token ids); the tasks build these two
    (ablate.tasks)."""
    if "in_features" in sizes:
        return SequenceClassifier(cfg, sizes["in_features"], sizes["n_classes"], pooling)
    return TokenModel(cfg, sizes["n_tokens"], sizes["n_out"])


class _ShapesOnly(TorchFunctionMode):
    """normal_ (torch.nn.init's or the Tensor's) on a meta tensor returns it as it is. torch has no
    meta kernel for it: its Python decomposition imports torch._dynamo (2-3 s), and a draw changes
    no shape."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.normal_, nn.init.normal_):
            tensor = args[0] if args else kwargs.get("tensor", kwargs.get("self"))
            if isinstance(tensor, torch.Tensor) and tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


def meta_model(cfg: EncoderConfig, sizes: dict[str, int], pooling: str = "mean") -> nn.Module:
    """`build_model` on the meta device: every parameter and buffer a shape, nothing allocated or
    drawn. TooLarge where a shape overflows torch's 64-bit sizes."""
    try:
        with torch.device("meta"), _ShapesOnly():
            return build_model(cfg, sizes, pooling)
    except (
        TypeError,
        RuntimeError,
        OverflowError,
    ) as err:  # torch: "Overflow when unpacking long long", ...
        if "verflow" not in str(err) and not isinstance(err, OverflowError):
            raise
        raise TooLarge("a tensor of the model is larger than torch's 64-bit sizes allow") from None


@functools.lru_cache(
    maxsize=256
)  # a sweep checks every run's config: each distinct model is built once
def _built(cfg: EncoderConfig, sizes: tuple[tuple[str, int], ...], pooling: str) -> Size:
    model = meta_model(cfg, dict(sizes), pooling)
    return Size(sum(p.numel() for p in model.parameters()), sum(b.numel() for b in model.buffers()))


def counted(cfg: EncoderConfig, sizes: dict[str, int], pooling: str = "mean") -> Size:
    """Parameters and buffer elements of `build_model(cfg, sizes, pooling)`, counted on the meta
    device; `cfg.max_len` must be set (ablate.config sizes it from the task). TooLarge where a shape
    overflows."""
    if cfg.arch in RNN_CELLS and cfg.rnn_hidden is None:  # the size matched at the real depth
        cfg = replace(cfg, rnn_hidden=matched_hidden(cfg))
    key = tuple(sorted(sizes.items()))
    if cfg.n_layers <= 2:
        return _built(cfg, key, pooling)
    one, two = (_built(replace(cfg, n_layers=k), key, pooling) for k in (1, 2))
    return one + (two - one) * (cfg.n_layers - 1)


def encoder_parameters(cfg: EncoderConfig) -> int:
    """Parameters of the Transformer encoder `cfg` builds (its blocks, a Pre-LN stack's final norm,
    the positional slots' own), counted on the meta device at any depth, as model_size."""
    from .encoder import Encoder

    def built(n_layers: int) -> int:
        with torch.device("meta"), _ShapesOnly():
            return sum(p.numel() for p in Encoder(replace(cfg, n_layers=n_layers)).parameters())

    if cfg.n_layers <= 2:
        return built(cfg.n_layers)
    one, two = built(1), built(2)
    return one + (two - one) * (cfg.n_layers - 1)
