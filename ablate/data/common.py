"""What every data module shares: the data folder, the error for missing data, in-memory datasets
that hand out whole batches, and the loaders built on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from .files import DataError, data_dir, memory_bytes  # noqa: F401  (their home: files, which needs no torch)


class InMemory(Dataset):
    """(x, y) tensors held in memory, served a batch at a time.

    `index` selects this split's rows of shared tensors (no copy); `row_perm` reorders dim 1 of
    every x (the sequence steps, e.g. MNIST's 28 pixel rows). `__getitems__` gathers a whole batch
    with one indexing op, and `keep_batch` passes it through the DataLoader unchanged, so no
    per-item collation happens; any sampler (Lightning's DistributedSampler included) still works.
    """

    def __init__(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        index: torch.Tensor | None = None,
        row_perm: torch.Tensor | None = None,
    ):
        if len(x) != len(y):
            raise ValueError(f"x has {len(x)} rows but y has {len(y)}")
        self.x, self.y, self.index, self.row_perm = x, y, index, row_perm

    def __len__(self) -> int:
        return len(self.index) if self.index is not None else len(self.x)

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        i = torch.as_tensor(indices, dtype=torch.long)
        if self.index is not None:
            i = self.index[i]
        x = self.x[i]  # (B, T, ...)
        if self.row_perm is not None:
            x = x[:, self.row_perm]
        return x, self.y[i]

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.__getitems__([i])
        return x[0], y[0]

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole split as two tensors (x, y), in order."""
        return self.__getitems__(list(range(len(self))))


def keep_batch(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """collate_fn for `InMemory`: the batch is already stacked. Module-level so it pickles (spawn)."""
    return batch


class ResumableSampler(RandomSampler):
    """torch's RandomSampler, index for index (each epoch's order from a seed drawn from torch's global
    RNG when the epoch starts), that also knows its place: the epoch's seed and how many indices it has
    handed out. A run resumed from a mid-epoch checkpoint goes on with the rest of that epoch's order,
    as the uninterrupted run did; a new sampler (or one at an epoch's end) draws a new order."""

    def __init__(self, data_source: Dataset) -> None:
        super().__init__(data_source)
        self.seed: int | None = None  # this epoch's
        self.taken = 0  # indices handed out in this epoch
        self.resume: dict[str, int] | None = None  # a mid-epoch place to go on from at the next epoch start

    def __iter__(self) -> Iterator[int]:
        place, self.resume = self.resume, None
        if place is None:
            self.seed, skip = int(torch.empty((), dtype=torch.int64).random_().item()), 0  # as RandomSampler
        else:
            self.seed, skip = place["seed"], place["taken"]
        self.taken = skip
        self.generator = torch.Generator().manual_seed(self.seed)
        try:
            for index in islice(super().__iter__(), skip, None):
                self.taken += 1
                yield index
        finally:
            self.generator = None

    def state_dict(self) -> dict[str, int]:
        return {"seed": self.seed, "taken": self.taken} if self.seed is not None else {}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """A place inside an epoch is kept for the next epoch start; an epoch's end (or nothing) is not."""
        if state and 0 < state["taken"] < len(self.data_source):
            self.resume = {"seed": int(state["seed"]), "taken": int(state["taken"])}


class ResumableLoader(DataLoader):
    """A DataLoader whose state (Lightning's `state_dict`/`load_state_dict` for loaders, kept in every
    checkpoint) is its ResumableSampler's place. Making the iterator draws a seed from torch's global
    RNG; the uninterrupted run drew it when the epoch began, before its checkpoint saved the RNG, so a
    resumed epoch makes its iterator without drawing (the dropout masks after it stay the same). Under
    DDP Lightning swaps in its DistributedSampler: the state is then empty, and a mid-epoch checkpoint
    is not resumed (ablate.train starts it afresh)."""

    def state_dict(self) -> dict[str, Any]:
        return self.sampler.state_dict() if isinstance(self.sampler, ResumableSampler) else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if isinstance(self.sampler, ResumableSampler):
            self.sampler.load_state_dict(state)

    def __iter__(self):
        if not (isinstance(self.sampler, ResumableSampler) and self.sampler.resume):
            return super().__iter__()
        rng = torch.get_rng_state()
        try:
            return super().__iter__()
        finally:
            torch.set_rng_state(rng)


def loader(dataset: InMemory, batch_size: int, shuffle: bool, pin: bool = False) -> DataLoader:
    """An in-process DataLoader. A shuffled one has no generator of its own: its order is drawn from
    torch's global RNG, which the training harness seeds, checkpoints and restores, and it can go on
    from the middle of an epoch (ResumableLoader). An evaluation loader of a DDP run gives each rank its
    share of the examples without repeating any (Lightning's own DistributedSampler pads the last ranks with
    repeated examples: 3 ranks on 101 sequences recorded 0.11520 for a true 0.11262); the ranks may then see
    one batch more or fewer, which evaluation allows (torchmetrics and sync_dist reduce once, at epoch end).
    `pin`: each batch in page-locked host memory (training on CUDA: see `pins`)."""
    if not shuffle:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            from pytorch_lightning.overrides.distributed import UnrepeatedDistributedSampler

            return DataLoader(dataset, batch_size=batch_size, sampler=UnrepeatedDistributedSampler(dataset, shuffle=False),
                              num_workers=0, collate_fn=keep_batch, pin_memory=pin)
        return DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=0, collate_fn=keep_batch,
                          pin_memory=pin)
    return ResumableLoader(dataset, batch_size=batch_size, sampler=ResumableSampler(dataset), num_workers=0,
                           collate_fn=keep_batch, pin_memory=pin)


def pins(device: torch.device | None) -> bool:
    """Whether batches for a model on `device` are pinned: on CUDA only. A page-locked batch is copied to the
    GPU asynchronously (Lightning moves batches with non_blocking=True there): the host queues the copy and
    goes on instead of waiting for it; elsewhere pinning would only cost (and needs a CUDA build with a device)."""
    return device is not None and device.type == "cuda"


class InMemoryDataModule(pl.LightningDataModule):
    """Loaders over the `train_set`, `val_set` and `test_set` that a subclass's `setup` builds;
    only training data is shuffled."""

    def _pin(self) -> bool:
        trainer = getattr(self, "trainer", None)  # set once a Trainer uses this module
        return pins(trainer.strategy.root_device if trainer is not None else None)

    def train_dataloader(self) -> DataLoader:
        return loader(self.train_set, self.cfg.batch_size, shuffle=True, pin=self._pin())

    def val_dataloader(self) -> DataLoader:
        return loader(self.val_set, self.cfg.batch_size, shuffle=False, pin=self._pin())

    def test_dataloader(self) -> DataLoader:
        return loader(self.test_set, self.cfg.batch_size, shuffle=False, pin=self._pin())
