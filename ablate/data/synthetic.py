"""What every synthetic token task shares: seeded splits built in memory, the memory check, the
model sizes from the task's registry entry, and its reference levels on its own evaluation sets.

A task subclasses `SyntheticTask` and writes `generate(n, length, generator) -> (x, y)`: token ids
(n, T) and targets (n, T), IGNORE where a position carries no target. Every set depends on data.seed
alone, through one CPU generator per split (see `split_seed`); the run's own seed only changes the
order in which training batches are drawn. Train and validation are built at data.length, test at
data.test_length (or data.length): length generalisation when they differ.
"""

from __future__ import annotations

import hashlib

import torch

from ..config import DataConfig
from ..registry import spec as task_spec
from .common import DataError, InMemory, InMemoryDataModule, memory_bytes
from .files import MEMORY_SHARE, memory_problem  # noqa: F401 - MEMORY_SHARE: the task modules import it from here
from .reference import IGNORE, reference_levels  # noqa: F401 - IGNORE: the task modules import it from here


def split_seed(seed: int, split: str, task: str = "copy") -> int:
    """Generator seed of one split: sha256 of "ablate.<task>/<seed>/<split>", first 8 bytes, big-endian,
    top bit cleared. Splits of one data.seed are independent; the same data.seed gives the same sets;
    different tasks draw from different streams."""
    digest = hashlib.sha256(f"ablate.{task}/{seed}/{split}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class SyntheticTask(InMemoryDataModule):
    """Batches: x int64 (B, T) token ids, y int64 (B, T) targets. `n_tokens` (embedding rows) and
    `n_out` (output classes) come from the registry entry `name` names."""

    kind = "tokens"
    name = ""  # the registry entry (data.task); set by each subclass
    levels: dict = {}  # a task's own exact computation of a reference level (name -> f(x, y)), if any

    def __init__(self, cfg: DataConfig):
        super().__init__()
        self.cfg = cfg
        self.spec = task_spec(self.name)
        self.check_memory(cfg)
        sizes = self.spec.model_sizes(cfg)
        self.n_tokens, self.n_out = sizes["n_tokens"], sizes["n_out"]
        self.seq_len = self.spec.seq_len(cfg)
        self.train_set = self.val_set = self.test_set = None

    def generate(self, n: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def check_memory(self, cfg: DataConfig) -> None:
        if problem := memory_problem(self.spec, cfg, memory_bytes()):
            raise DataError(problem)

    def _make(self, split: str, n: int, length: int) -> InMemory:
        generator = torch.Generator().manual_seed(split_seed(self.cfg.seed, split, self.name))
        return InMemory(*self.generate(n, length, generator))

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        cfg = self.cfg
        train = self._make("train", cfg.n_train, cfg.length)
        if cfg.train_subset is not None:
            train = InMemory(train.x[: cfg.train_subset], train.y[: cfg.train_subset])
        self.train_set = train
        self.val_set = self._make("val", cfg.n_val, cfg.length)
        self.test_set = self._make("test", cfg.n_test, cfg.eval_length)

    def reference_levels(self) -> dict[str, float]:
        """The task's reference levels on its validation and test sets, `ref/<split>/<name>`."""
        self.setup()
        out = {}
        for split, data in (("val", self.val_set), ("test", self.test_set)):
            levels = reference_levels(*data.tensors(), self.spec.references, self.levels)
            out.update({f"ref/{split}/{name}": value for name, value in levels.items()})
        return out
