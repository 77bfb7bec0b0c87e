"""MNIST read as a sequence: 28 steps (the pixel rows) of 28 features each.

The 70k images are read once through torchvision from `<data_dir>/MNIST/raw/` and held as one
normalised float32 tensor; the splits are index tensors into it. Before torchvision parses them the
four IDX files are checked (`check_mnist`: header, dimensions, length, matching counts, labels 0..9),
so a truncated or foreign file is one line naming it, not a traceback or a label that fails
mid-training (the checks live in ablate.data.files, which a sweep's command runs without torch). Nothing
is written under the data folder, except by torchvision's download when the files are missing and the
mirror answers.
A fixed permutation of the 28 rows (`data.permute`) asks whether a model relies on row order.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ..config import ConfigError, DataConfig
from ..registry import MNIST_MEAN, MNIST_STD
from .common import InMemory, InMemoryDataModule, data_dir
from .files import (  # noqa: F401  (the files' checks, which need no torch: their home is files)
    FILES,
    IDX,
    MISSING_HINT,
    N_CLASSES,
    ROWS,
    DataError,
    broken,
    check_mnist,
    ensure_mnist,
    idx_header,
    network_available,
)
from .reference import chance

MEAN, STD = MNIST_MEAN, MNIST_STD  # of the 60k training pixels, scaled to [0, 1] (home: ablate.registry)
PERMUTE_WHERE = {"none": (), "train": ("train",), "test": ("test",), "both": ("train", "test")}


def row_permutation(seed: int) -> torch.Tensor:
    """A fixed permutation of the 28 rows, the same on every machine (a CPU torch.Generator), never the identity."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        perm = torch.randperm(ROWS, generator=generator)
        if not torch.equal(perm, torch.arange(ROWS)):
            return perm


def read_mnist(root: Path) -> tuple[torch.Tensor, torch.Tensor, int]:
    """All 70k images as one normalised float32 tensor (N, 28, 28), labels (N,) int64, and how many
    of them (the first ones) are training images; the rest are the official test set.
    The files are checked first (`check_mnist`), then parsed by torchvision."""
    from torchvision.datasets import MNIST

    check_mnist(root)

    train, test = (MNIST(root, train=flag, download=False) for flag in (True, False))
    images = (
        torch.cat((train.data, test.data)).float().div_(255).sub_(MEAN).div_(STD)
    )  # (N, 28, 28)
    labels = torch.cat((train.targets, test.targets)).long()  # (N,)
    return images, labels, len(train.data)


def split_indices(n: int, val_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, val) indices of n training images: a randperm seeded by data.seed; val takes the first val_size."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return order[val_size:], order[:val_size]


class MnistRows(InMemoryDataModule):
    """MNIST as 28 steps of 28 pixels. Batches: x float32 (B, 28, 28), y int64 (B,).

    Train and validation follow one distribution (both row-permuted for permute=train|both);
    the test set is the official 10k (row-permuted for permute=test|both).
    """

    kind = "classify"
    in_features = ROWS  # pixels per step
    n_classes = N_CLASSES
    seq_len = ROWS

    def __init__(
        self,
        cfg: DataConfig,
        root: Path | str | None = None,
        has_network: Callable[[], bool] | None = None,
    ):
        super().__init__()
        self.cfg = cfg
        self.root = Path(root) if root is not None else data_dir()
        self.has_network = has_network  # None: probe the download mirror when the files are missing
        self.permutation = row_permutation(cfg.permute_seed)
        self.images: torch.Tensor | None = None
        self.train_set = self.val_set = self.test_set = None

    def prepare_data(self) -> None:
        """The four files are there (downloaded if they can be) and well formed: a sweep calls this
        once before any run, so a broken file is one line and exit 2, not one failed run each."""
        ensure_mnist(self.root, self.has_network)
        check_mnist(self.root)

    def setup(self, stage: str | None = None) -> None:
        if self.images is not None:
            return
        ensure_mnist(self.root, self.has_network)
        images, labels, n_train = read_mnist(self.root)
        cfg = self.cfg
        if cfg.val_size >= n_train:
            raise ConfigError(
                f"data.val_size={cfg.val_size} is not allowed; MNIST has {n_train} training images, "
                f"expected fewer than {n_train}"
            )
        train_idx, val_idx = split_indices(n_train, cfg.val_size, cfg.seed)
        if cfg.train_subset is not None:
            if cfg.train_subset > len(train_idx):
                raise ConfigError(
                    f"data.train_subset={cfg.train_subset} is not allowed; the training split holds "
                    f"{len(train_idx)} images, expected at most that or null"
                )
            train_idx = train_idx[: cfg.train_subset]
        test_idx = torch.arange(n_train, len(images))
        if cfg.test_subset is not None:
            if cfg.test_subset > len(test_idx):
                raise ConfigError(
                    f"data.test_subset={cfg.test_subset} is not allowed; the test set holds "
                    f"{len(test_idx)} images, expected at most that or null"
                )
            test_idx = test_idx[: cfg.test_subset]  # the first N official test images
        where = PERMUTE_WHERE[cfg.permute]
        train_perm = self.permutation if "train" in where else None
        test_perm = self.permutation if "test" in where else None
        self.images = images
        self.train_set = InMemory(images, labels, train_idx, train_perm)
        self.val_set = InMemory(images, labels, val_idx, train_perm)
        self.test_set = InMemory(images, labels, test_idx, test_perm)

    def reference_levels(self) -> dict[str, float]:
        """Chance on the validation and test sets (the most frequent digit), `ref/<split>/chance`."""
        self.setup()
        return {f"ref/{split}/chance": chance(data.y[data.index])
                for split, data in (("val", self.val_set), ("test", self.test_set))}
