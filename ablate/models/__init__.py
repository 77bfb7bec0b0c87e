"""Pure-PyTorch models: no Lightning, W&B or pandas here, so notebooks can use them alone."""

from .attention import MultiHeadAttention, SplitQKV, lr_factors
from .block import Block, FeedForward, SubLayer
from .config import EncoderConfig
from .encoder import Encoder
from .positional import (
    POS_ENCODINGS,
    ALiBi,
    LearnedPE,
    NoScoreBias,
    Positional,
    RoPE,
    SinusoidalPE,
    build_positional,
    sinusoidal_table,
)

__all__ = [
    "ALiBi",
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
    "SplitQKV",
    "SubLayer",
    "build_positional",
    "lr_factors",
    "sinusoidal_table",
]

from .heads import (  # noqa: E402
    EMBEDDINGS,
    POOLINGS,
    RowEmbedding,
    SequenceClassifier,
    TokenModel,
    build_encoder,
    parameter_groups,
)
from .rnn import RNN_CELLS, RecurrentEncoder, RecurrentLayer, matched_hidden, rnn_params  # noqa: E402

__all__ += ["EMBEDDINGS", "POOLINGS", "RNN_CELLS", "RecurrentEncoder", "RecurrentLayer", "RowEmbedding",
            "SequenceClassifier", "TokenModel", "build_encoder", "matched_hidden", "parameter_groups", "rnn_params"]
