"""A plug-in for the tests (tests/test_plugins.py): each component slot filled with a copy of ablate's own part, so
that a model built through the plug-in can be compared with the built-in one, weight for weight and output for
output; and a whole model that brings its own data module."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ablate.data.copytask import CopyTask
from ablate.models.attention import MultiHeadAttention
from ablate.models.block import BLOCKS, FeedForward
from ablate.models.config import option
from ablate.models.positional import POS_ENCODINGS
from ablate.tasks.copy import CopyTokens


@dataclass(frozen=True)
class Copies:
    vocab: int = option(6, "tokens of its own copy task")


def own_data(cfg, options: Copies) -> CopyTask:
    """Its own copy task, whatever data.task says: seed and batch size from data.*, the rest its own."""
    from ablate.config import DataConfig

    return CopyTask(DataConfig(task="copy", seed=cfg.data.seed, batch_size=cfg.data.batch_size, vocab=options.vocab,
                               n_train=256, n_val=64, n_test=64))


class PerToken(CopyTokens):
    """A whole model of the simplest kind: each position's token, embedded, to a linear read-out."""

    def build_model(self, cfg, n_tokens: int, n_out: int) -> nn.Module:
        return _Lookup(n_tokens, n_out)


class _Lookup(nn.Module):
    def __init__(self, n_tokens: int, n_out: int):
        super().__init__()
        self.embed, self.out = nn.Embedding(n_tokens, 16), nn.Linear(16, n_out)

    def forward(self, x, return_attention: bool = False):
        return self.out(self.embed(x))


def register(plugin) -> None:
    plugin.component("model.attention", "mha_copy", lambda cfg, positional, options: MultiHeadAttention(cfg, positional))
    plugin.component("model.ffn", "mlp_copy", lambda cfg, options: FeedForward(cfg))
    plugin.component("model.block", "sequential_copy", lambda cfg, positional, options: BLOCKS["sequential"](cfg, positional))
    plugin.component("model.pos_enc", "sinusoidal_copy", lambda cfg, options: POS_ENCODINGS["sinusoidal"](cfg))
    plugin.component("model.activation", "gelu_copy", lambda options: nn.GELU())
    plugin.model("copies", lambda cfg, options, dm: PerToken(cfg, n_tokens=dm.n_tokens, n_out=dm.n_out),
                 options=Copies, datamodule=own_data)
