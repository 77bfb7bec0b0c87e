"""The sort task: read data.length tokens, a separator, then data.length blanks; at each blank emit the next
token of the sorted sequence. The layout is the copy task's (ablate/data/copytask.py): only the target differs,
so a model that copies in order and one that sorts are told apart by the same inputs."""

from __future__ import annotations

import torch

from ablate.data.copytask import copy_sequences
from ablate.data.synthetic import SyntheticTask
from ablate.registry import TaskSpec

LONG = 8


class Sort(SyntheticTask):
    name = "sort"

    def generate(self, n: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = copy_sequences(n, length, self.cfg.vocab, False, generator)
        y[:, length + 1:] = x[:, :length].sort(dim=1).values
        return x, y


def _tokens(cfg) -> int:
    return (cfg.n_train + cfg.n_val) * (2 * cfg.length + 1) + cfg.n_test * (2 * (cfg.test_length or cfg.length) + 1)


SMOKE = {"trainer.max_epochs": 1, "data.n_train": 512, "data.n_val": 128, "data.n_test": 128, "run.probe_batch": 32}

SORT = TaskSpec(
    name="sort",
    title="sort task",
    kind="tokens",
    datamodule="ablate_example.sort:Sort",
    prepare="ablate.data.files:memory_enough",  # a sweep's command checks this before any run, building no data module
    about="read data.length tokens, a separator, then blanks: emit the tokens in sorted order",
    seq_len=lambda cfg: 2 * max(cfg.length, cfg.test_length or cfg.length) + 1,
    model_sizes=lambda cfg: {"n_tokens": cfg.vocab + 2, "n_out": cfg.vocab},
    train_examples=lambda cfg: min(cfg.train_subset or cfg.n_train, cfg.n_train),
    data_bytes=lambda cfg: 3 * LONG * _tokens(cfg),
    eval_examples=lambda cfg: {"val": cfg.n_val, "test": cfg.n_test},
    budgets={"smoke": SMOKE,
             "quick": {"trainer.max_epochs": 6, "data.n_train": 4000, "data.n_val": 500, "data.n_test": 500}},
    references=("chance", "order_blind"),
    check=lambda cfg: None if cfg.vocab >= 2 else f"data.vocab={cfg.vocab} is not allowed for data.task=sort; expected >= 2",
    keys=("vocab", "length", "test_length", "n_train", "n_val", "n_test"),
)
