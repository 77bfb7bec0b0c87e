"""Synthetic copy task: read L tokens, a separator, then L blanks; at each blank emit the next token
(in order, or reversed) (the copy task of Graves et al. 2014, "Neural Turing Machines").

Input `t_1 .. t_L, SEP, BLANK x L` (length 2L+1) with tokens uniform in [0, vocab), SEP = vocab,
BLANK = vocab + 1. Targets: the tokens at the blank positions, IGNORE (-100) elsewhere.
Every set depends on data.seed alone, through one CPU generator per split (see `split_seed`);
the run's own seed only changes the order in which training batches are drawn.
"""

from __future__ import annotations

import hashlib

import torch

from ..config import ConfigError, DataConfig
from .common import DataError, InMemory, InMemoryDataModule, memory_bytes

IGNORE = -100  # F.cross_entropy's default ignore_index
MAX_VOCAB = 2**62  # token ids vocab and vocab + 1 (SEP, BLANK) stay far inside int64
BYTES_PER_TOKEN = 3 * 8  # int64 x and y, and the int64 pieces x is concatenated from, at the peak
# the sets may take this share of the machine's memory; the model and the trainer need the rest
MEMORY_SHARE = 0.5


def copy_bytes(cfg: DataConfig) -> int:
    """Peak memory of building the three sets: (n_train + n_val) sequences of 2 * length + 1 tokens
    and n_test of 2 * eval_length + 1, BYTES_PER_TOKEN each."""
    tokens = (cfg.n_train + cfg.n_val) * (2 * cfg.length + 1) + cfg.n_test * (
        2 * cfg.eval_length + 1
    )
    return BYTES_PER_TOKEN * tokens


def check_copy(cfg: DataConfig) -> None:
    """Refuse copy-task settings that cannot be built: fewer than 2 tokens (every target the same,
    nothing to copy), ids past int64, or sets larger than MEMORY_SHARE of this machine's memory."""
    if cfg.vocab < 2:
        raise ConfigError(
            f"data.vocab={cfg.vocab!r} is not allowed for data.task=copy; expected an integer >= 2 "
            "(with one token every target is the same and there is nothing to copy)"
        )
    if cfg.vocab > MAX_VOCAB:
        raise ConfigError(
            f"data.vocab={cfg.vocab!r} is not allowed; expected at most 2**62 (token ids are int64)"
        )
    need, have = copy_bytes(cfg), memory_bytes()
    if have is not None and need > MEMORY_SHARE * have:
        raise DataError(
            f"the copy task's sets need about {need / 2**30:.3g} GiB ({cfg.n_train} + {cfg.n_val} "
            f"sequences of {2 * cfg.length + 1} tokens, {cfg.n_test} of {2 * cfg.eval_length + 1}), "
            f"more than {MEMORY_SHARE:.0%} of this machine's {have / 2**30:.3g} GiB; lower data.n_train, "
            "data.n_val, data.n_test, data.length or data.test_length"
        )


def split_seed(seed: int, split: str) -> int:
    """Generator seed of one split: sha256 of "ablate.copy/<seed>/<split>", first 8 bytes, big-endian,
    top bit cleared. Splits of one data.seed are independent; the same data.seed gives the same sets."""
    digest = hashlib.sha256(f"ablate.copy/{seed}/{split}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def copy_sequences(
    n: int, length: int, vocab: int, reverse: bool, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """n sequences: x (n, 2L+1) token ids, y (n, 2L+1) targets (IGNORE except at the blanks)."""
    tokens = torch.randint(0, vocab, (n, length), generator=generator)  # (n, L)
    sep = torch.full((n, 1), vocab)  # (n, 1)
    blanks = torch.full((n, length), vocab + 1)  # (n, L)
    x = torch.cat((tokens, sep, blanks), dim=1)  # (n, 2L+1)
    y = torch.full_like(x, IGNORE)
    y[:, length + 1 :] = tokens.flip(1) if reverse else tokens
    return x, y


class CopyTask(InMemoryDataModule):
    """Batches: x int64 (B, 2L+1) token ids, y int64 (B, 2L+1). Train and validation at data.length,
    test at data.test_length (or data.length): length generalisation when they differ."""

    kind = "tokens"

    def __init__(self, cfg: DataConfig):
        super().__init__()
        check_copy(cfg)
        self.cfg = cfg
        self.sep, self.blank = cfg.vocab, cfg.vocab + 1
        self.n_tokens = cfg.vocab + 2  # embedding rows: vocab, SEP, BLANK
        self.n_out = cfg.vocab  # output classes
        self.seq_len = 2 * max(cfg.length, cfg.eval_length) + 1
        self.train_set = self.val_set = self.test_set = None

    def _make(self, split: str, n: int, length: int) -> InMemory:
        generator = torch.Generator().manual_seed(split_seed(self.cfg.seed, split))
        return InMemory(*copy_sequences(n, length, self.cfg.vocab, self.cfg.reverse, generator))

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        cfg = self.cfg
        train = self._make("train", cfg.n_train, cfg.length)
        if cfg.train_subset is not None:
            if cfg.train_subset > cfg.n_train:
                raise ConfigError(
                    f"data.train_subset={cfg.train_subset} is not allowed; expected at most "
                    f"data.n_train={cfg.n_train} or null"
                )
            train = InMemory(train.x[: cfg.train_subset], train.y[: cfg.train_subset])
        self.train_set = train
        self.val_set = self._make("val", cfg.n_val, cfg.length)
        self.test_set = self._make("test", cfg.n_test, cfg.eval_length)
