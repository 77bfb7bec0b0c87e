"""MNIST read as a sequence: 28 steps (the pixel rows) of 28 features each.

The 70k images are read once through torchvision from `<data_dir>/MNIST/raw/` and held as one
normalised float32 tensor; the splits are index tensors into it. Before torchvision parses them the
four IDX files are checked (`check_mnist`: header, dimensions, length, matching counts, labels 0..9),
so a truncated or foreign file is one line naming it, not a traceback or a label that fails
mid-training. Nothing is written under the data folder, except by torchvision's download when the
files are missing and the mirror answers.
A fixed permutation of the 28 rows (`data.permute`) asks whether a model relies on row order.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import torch

from ..config import ConfigError, DataConfig
from ..registry import MNIST_MEAN, MNIST_STD
from .common import DataError, InMemory, InMemoryDataModule, data_dir
from .reference import chance

MEAN, STD = MNIST_MEAN, MNIST_STD  # of the 60k training pixels, scaled to [0, 1] (home: ablate.registry)
ROWS = 28
FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
# IDX format (LeCun & Cortes): big-endian uint32 magic (0x08 = unsigned bytes, then the number of
# dimensions), one uint32 per dimension, then the bytes. MNIST's files: what each must hold.
IDX = {
    "images": (2051, (ROWS, ROWS)),  # 3-d: count, 28 rows, 28 columns
    "labels": (2049, ()),  # 1-d: count
}
N_CLASSES = 10
MISSING_HINT = (
    "set ABLATE_DATA_DIR to the folder that holds MNIST/raw/ (e.g. ABLATE_DATA_DIR=~/datasets)"
)
PERMUTE_WHERE = {"none": (), "train": ("train",), "test": ("test",), "both": ("train", "test")}


def row_permutation(seed: int) -> torch.Tensor:
    """A fixed permutation of the 28 rows, the same on every machine (a CPU torch.Generator), never the identity."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        perm = torch.randperm(ROWS, generator=generator)
        if not torch.equal(perm, torch.arange(ROWS)):
            return perm


def network_available(timeout: float = 3.0) -> bool:
    """Whether torchvision's first MNIST mirror accepts a TCP connection within `timeout` seconds."""
    from torchvision.datasets import MNIST

    host = urlsplit(MNIST.mirrors[0]).hostname
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def ensure_mnist(root: Path, has_network: Callable[[], bool] | None = None) -> None:
    """Make sure the four IDX files are under root/MNIST/raw: download them if the mirror answers,
    else raise DataError. `has_network` replaces the mirror probe (tests force it off)."""
    raw = (root / "MNIST" / "raw").absolute()
    if all((raw / name).is_file() for name in FILES):
        return
    if not (has_network or network_available)():
        raise DataError(
            f"MNIST not found in {raw} and its download mirror is unreachable; {MISSING_HINT}"
        )
    from torchvision.datasets import MNIST

    try:
        MNIST(root, train=True, download=True)
    except (RuntimeError, OSError) as err:
        reason = " ".join(str(err).split())[:200]
        raise DataError(
            f"MNIST not found in {raw} and downloading it failed ({reason}); {MISSING_HINT}"
        ) from None


def broken(paths: Path | tuple[Path, ...], problem: str) -> DataError:
    """The one line for MNIST files that are there but cannot be used."""
    if isinstance(paths, Path):
        return DataError(
            f"MNIST file {paths} {problem}; delete it and let torchvision download it again, "
            "or point ABLATE_DATA_DIR at a good copy"
        )
    return DataError(
        f"MNIST files {' and '.join(map(str, paths))} {problem}; delete them and let torchvision "
        "download them again, or point ABLATE_DATA_DIR at a good copy"
    )


def idx_header(path: Path, kind: str) -> tuple[int, int]:
    """(item count, header bytes) of an MNIST IDX file of `kind` ("images" or "labels"), after
    checking its magic number, its dimensions and that its length is what the header declares."""
    magic, item_shape = IDX[kind]
    header_bytes = 4 * (2 + len(item_shape))  # magic, count, item dimensions
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            header = f.read(header_bytes)
    except OSError as err:
        raise DataError(
            f"MNIST file {path} cannot be read ({err.strerror}); make it readable, "
            "or point ABLATE_DATA_DIR at a good copy"
        ) from None
    if len(header) < header_bytes:
        raise broken(path, f"is {size} bytes long, shorter than its {header_bytes}-byte IDX header")
    found, count, *dims = struct.unpack(f">{len(header) // 4}I", header)
    if found != magic:
        raise broken(
            path,
            f"has magic number {found}, expected {magic} (IDX {kind}: "
            f"{1 + len(item_shape)}-d unsigned bytes)",
        )
    if tuple(dims) != item_shape:
        shape = "x".join(map(str, dims))
        raise broken(path, f"holds {shape} images, expected {ROWS}x{ROWS}")
    if count == 0:
        raise broken(path, f"holds no {kind}")
    expected = header_bytes + count * (ROWS * ROWS if item_shape else 1)
    if size != expected:
        what = "truncated" if size < expected else f"{size - expected} bytes too long"
        raise broken(
            path,
            f"is {size} bytes long, but its header declares {count} {kind} "
            f"({expected} bytes): {what}",
        )
    return count, header_bytes


def check_mnist(root: Path) -> None:
    """Raise DataError (one line naming the file) unless root/MNIST/raw holds four well-formed IDX
    files: images 28x28, as many labels as images, each label in 0..9. Reads headers and labels
    only (about 70 kB); torchvision parses the files afterwards."""
    raw = (root / "MNIST" / "raw").absolute()
    for prefix in ("train", "t10k"):
        images, labels = raw / f"{prefix}-images-idx3-ubyte", raw / f"{prefix}-labels-idx1-ubyte"
        n_images, _ = idx_header(images, "images")
        n_labels, offset = idx_header(labels, "labels")
        if n_images != n_labels:
            raise broken((images, labels), f"disagree: {n_images} images but {n_labels} labels")
        values = torch.frombuffer(bytearray(labels.read_bytes()[offset:]), dtype=torch.uint8)
        bad = (values >= N_CLASSES).nonzero().flatten()  # (n_bad,)
        if len(bad):
            first = bad[0].item()
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise broken(
                labels,
                f"holds label {values[first].item()} at item {first}{more}, "
                f"expected 0..{N_CLASSES - 1}",
            )


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
