"""Pure-PyTorch models: no Lightning, W&B or pandas here, so notebooks can use them alone."""

from .attention import MultiHeadAttention
from .block import Block, FeedForward, SubLayer
from .config import EncoderConfig
from .encoder import Encoder
from .positional import (
    POS_ENCODINGS,
    LearnedPE,
    NoScoreBias,
    Positional,
    RoPE,
    SinusoidalPE,
    build_positional,
    sinusoidal_table,
)

__all__ = [
    "Block",
    "Encoder",
    "EncoderConfig",
    "FeedForward",
    "LearnedPE",
    "MultiHeadAttention",
    "NoScoreBias",
    "POS_ENCODINGS",
    "Positional",
    "RoPE",
    "SinusoidalPE",
    "SubLayer",
    "build_positional",
    "sinusoidal_table",
]

from .heads import POOLINGS, SequenceClassifier, TokenModel, parameter_groups  # noqa: E402

__all__ += ["POOLINGS", "SequenceClassifier", "TokenModel", "parameter_groups"]
