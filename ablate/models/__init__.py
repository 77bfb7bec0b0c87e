"""Pure-PyTorch models: no Lightning, W&B or pandas here, so notebooks can use them alone.

Names load on first use (PEP 562): `ablate.models.config` (the encoder's keys) imports no torch, so
`ablate keys` and `ablate train --print-config` start without it."""

from __future__ import annotations

from ..lazy import exports

LAZY = {
    "MultiHeadAttention": ".attention",
    "SplitQKV": ".attention",
    "lr_factors": ".attention",
    "INITS": ".attention",
    "Block": ".block",
    "FeedForward": ".block",
    "SubLayer": ".block",
    "EncoderConfig": ".config",
    "Encoder": ".encoder",
    "POS_ENCODINGS": ".positional",
    "ALiBi": ".positional",
    "LearnedPE": ".positional",
    "NoScoreBias": ".positional",
    "Positional": ".positional",
    "RoPE": ".positional",
    "SinusoidalPE": ".positional",
    "build_positional": ".positional",
    "sinusoidal_table": ".positional",
    "EMBEDDINGS": ".heads",
    "POOLINGS": ".heads",
    "RowEmbedding": ".heads",
    "SequenceClassifier": ".heads",
    "TokenModel": ".heads",
    "build_encoder": ".heads",
    "parameter_groups": ".heads",
    "RNN_CELLS": ".rnn",
    "RecurrentEncoder": ".rnn",
    "RecurrentLayer": ".rnn",
    "matched_hidden": ".rnn",
    "rnn_params": ".rnn",
}

__all__ = sorted(LAZY)


__getattr__, __dir__ = exports(__name__, globals(), LAZY)
