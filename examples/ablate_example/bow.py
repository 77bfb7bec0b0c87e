"""A whole model of its own: a bag-of-tokens MLP. Each position sees its own token and the mean embedding of
every token of the sequence, never their order: what it can learn is bounded by the order-blind reference level
ablate computes for each task. Its LightningModule is ablate's token task (loss, val/acc, test/acc, the
optimiser from optim.*) with the encoder swapped: any LightningModule that logs train/loss, val/acc,
val/acc_best and test/acc would do."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ablate.models.config import Bound, option
from ablate.registry import TASKS
from ablate.tasks.copy import CopyTokens

SIZE = Bound(int, lambda v: 1 <= v <= 4096, "an integer in [1, 4096]")
MAX_WEIGHTS = 2**26


@dataclass(frozen=True)
class BowOptions:
    hidden: int = option(64, "width of the embedding and of each hidden layer", bound=SIZE)
    layers: int = option(2, "hidden layers of the MLP", bound=SIZE)

    def __post_init__(self) -> None:  # a check across fields, which no one field's bound can state
        weights = self.hidden * self.hidden * self.layers
        if weights > MAX_WEIGHTS:
            raise ValueError(f"hidden={self.hidden} with layers={self.layers} is {weights:,} weights in the hidden "
                             f"layers, more than {MAX_WEIGHTS:,}; lower one of them")


class BagOfTokens(nn.Module):
    def __init__(self, n_tokens: int, n_out: int, options: BowOptions):
        super().__init__()
        h = options.hidden
        self.embed = nn.Embedding(n_tokens, h)
        layers: list[nn.Module] = []
        for i in range(options.layers):
            layers += [nn.Linear(2 * h if i == 0 else h, h), nn.ReLU()]
        self.mlp = nn.Sequential(*layers, nn.Linear(h, n_out))

    def forward(self, x: torch.Tensor, return_attention: bool = False) -> torch.Tensor:
        e = self.embed(x)  # (B, T, h)
        bag = e.mean(dim=1, keepdim=True).expand_as(e)
        return self.mlp(torch.cat((e, bag), dim=-1))


class BowTask(CopyTokens):
    def build_model(self, cfg, n_tokens: int, n_out: int) -> nn.Module:
        return BagOfTokens(n_tokens, n_out, cfg.options("bow"))


def bow_task(cfg, options: BowOptions, datamodule) -> BowTask:
    return BowTask(cfg, n_tokens=datamodule.n_tokens, n_out=datamodule.n_out)


def bow_check(cfg) -> str | None:
    """Asked when a config is built: what this model cannot train, in one line."""
    if TASKS[cfg.data.task].kind != "tokens":
        return (f"model.arch=bow predicts a token at each position; data.task={cfg.data.task} has one label per "
                "sequence: choose a token task (e.g. data.task=sort)")
    return None
