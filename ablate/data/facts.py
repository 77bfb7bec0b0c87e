"""Synthetic key→value facts task (issue 25, "the FFN stores facts"): a fixed random table that only the
weights can hold.

Keys are pairs (a, b) with a in [0, K) and b in [K, 2K) (disjoint ranges, so the pair is known from
its tokens whatever their order), K = data.vocab; each of the K² keys has one value, uniform in [0, K),
drawn once from data.seed: the facts. Input `a, b` (length 2); target: the value at b, IGNORE at a.
Nothing in a sequence gives its answer: a model can only score above chance by storing the table, one
fact per key, which is what Geva et al. 2021 read the feed-forward layers as doing (key→value
memories). Without an FFN, the encoder's output at b is close to additive in a and b (embeddings, one
softmax over two tokens, LayerNorm), which a random table is not; the FFN's width is the capacity the
question is about.

Sets: the training set cycles through the K² facts in a seeded order, data.n_train sequences (every
fact data.n_train / K² times when data.n_train >= K²); validation and test are min(data.n_val, K²) and
min(data.n_test, K²) distinct facts from their own seeded orders: all of them at the budgets' sizes, so
test accuracy is the share of the facts recalled. The table depends on data.seed alone, never on the
split. Reference levels: chance (the most frequent value) and `one_key` (the best prediction from one
of the two key tokens alone, the better of a and b; `one_key_level`). Its registry entry:
ablate/registry.py.
"""

from __future__ import annotations

import torch

from ..config import DataConfig
from .common import InMemory
from .synthetic import IGNORE, SyntheticTask, split_seed

__all__ = ["Facts", "fact_table", "fact_sequences", "one_key_level"]


def fact_table(vocab: int, seed: int) -> torch.Tensor:
    """The facts: values (K, K) int64, value[a, b - K] of key (a, b), uniform in [0, K), from `seed` alone."""
    generator = torch.Generator().manual_seed(split_seed(seed, "table", "facts"))
    return torch.randint(0, vocab, (vocab, vocab), generator=generator)


def fact_sequences(keys: torch.Tensor, table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of the facts with flat key ids `keys` (n,) in [0, K²): x (n, 2) `a, b` with b offset by
    K, y (n, 2) IGNORE then the value."""
    vocab = table.shape[0]
    a, b = keys // vocab, keys % vocab
    x = torch.stack((a, b + vocab), dim=1)  # (n, 2)
    y = torch.stack((torch.full_like(a, IGNORE), table[a, b]), dim=1)  # (n, 2)
    return x, y


def one_key_level(x: torch.Tensor, y: torch.Tensor) -> float:
    """The best accuracy of a prediction from one key token alone on these facts: for each a (or each b)
    the most frequent value among its facts; the better of the two tokens."""
    value = y[:, -1]
    n_values = int(value.max().item()) + 1 if value.numel() else 0
    if n_values == 0:
        return float("nan")
    best = 0.0
    for column in (0, 1):
        token = torch.unique(x[:, column], return_inverse=True)[1]  # (n,) compact ids
        counts = torch.zeros(int(token.max().item()) + 1, n_values, dtype=torch.long)
        counts.index_put_((token, value), torch.ones_like(value), accumulate=True)
        best = max(best, counts.max(dim=1).values.sum().item() / len(value))
    return best


class Facts(SyntheticTask):
    """Batches: x int64 (B, 2) key tokens, y int64 (B, 2) (IGNORE, value)."""

    name = "facts"
    levels = {"one_key": one_key_level}

    def __init__(self, cfg: DataConfig):
        super().__init__(cfg)
        self.table = fact_table(cfg.vocab, cfg.seed)

    def _order(self, split: str) -> torch.Tensor:
        generator = torch.Generator().manual_seed(split_seed(self.cfg.seed, split, self.name))
        return torch.randperm(self.cfg.vocab**2, generator=generator)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        cfg, facts = self.cfg, self.cfg.vocab**2
        train_keys = self._order("train").repeat(-(-cfg.n_train // facts))[: cfg.n_train]
        n_train = cfg.n_train if cfg.train_subset is None else cfg.train_subset
        self.train_set = InMemory(*fact_sequences(train_keys[:n_train], self.table))
        self.val_set = InMemory(*fact_sequences(self._order("val")[: cfg.n_val], self.table))
        self.test_set = InMemory(*fact_sequences(self._order("test")[: cfg.n_test], self.table))
