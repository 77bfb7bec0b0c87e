"""A few MNIST test images for the explorer page, read from the official IDX files without torch or Lightning.

`test_images(root)` returns one image of each digit (the first of each in the 10k test set) as raw pixels
(28 x 28 bytes, 0-255) with its label; the page normalises them as training did, with `normalisation()`.

The files' names, their IDX format, the data folder, MEAN and STD have one home, the registry (a leaf module,
which ablate/data reads too). The explorer may not import ablate.data (its rule in tests/layering.py).
"""

from __future__ import annotations

import struct
from pathlib import Path

from ..registry import (
    MNIST_CLASSES,
    MNIST_FILES,
    MNIST_IDX,
    MNIST_MEAN,
    MNIST_ROWS,
    MNIST_STD,
    data_dir,
)
from .export import ExploreError

IMAGES, LABELS = MNIST_FILES[2:]  # the 10k test set's
MAGIC = {IMAGES: MNIST_IDX["images"], LABELS: MNIST_IDX["labels"]}


def mnist_raw_dir() -> Path:
    """Where `ablate train` keeps MNIST: <data folder>/MNIST/raw (ablate.registry.data_dir)."""
    return data_dir() / "MNIST" / "raw"


def normalisation() -> tuple[float, float]:
    """(MEAN, STD) of the training pixels, as training normalises them (ablate.registry)."""
    return MNIST_MEAN, MNIST_STD


def _read(path: Path) -> tuple[int, bytes]:
    magic, dims = MAGIC[path.name]
    header = 4 * (2 + len(dims))
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ExploreError(f"MNIST test file {path} cannot be read ({err.strerror}); point ABLATE_DATA_DIR at "
                           "the MNIST files (`ablate train` downloads them)") from None
    found, count, *shape = struct.unpack(f">{2 + len(dims)}I", data[:header]) if len(data) >= header else (0, 0)
    size = 1
    for d in dims:
        size *= d
    if found != magic or tuple(shape) != dims or len(data) != header + count * size:
        raise ExploreError(f"MNIST test file {path} is not a whole IDX file of {path.name.split('-')[1]}; "
                           "delete it and let `ablate train` download it again")
    return count, data[header:]


def mnist_test_images(root: Path | None = None) -> list[dict]:
    """One test image of each digit, in digit order: [{"index", "label", "pixels": 784 ints 0-255}]."""
    root = Path(root) if root is not None else mnist_raw_dir()
    if not (root / IMAGES).is_file() or not (root / LABELS).is_file():
        raise ExploreError(f"MNIST test files ({IMAGES}, {LABELS}) not found in {root}; point ABLATE_DATA_DIR "
                           "at the MNIST files (`ablate train` downloads them)")
    n_images, pixels = _read(root / IMAGES)
    n_labels, labels = _read(root / LABELS)
    if n_images != n_labels:
        raise ExploreError(f"MNIST test files in {root} hold {n_images} images but {n_labels} labels; "
                           "delete them and let `ablate train` download them again")
    first: dict[int, int] = {}
    for i, label in enumerate(labels):
        first.setdefault(label, i)
        if len(first) == MNIST_CLASSES:
            break
    size = MNIST_ROWS * MNIST_ROWS
    return [{"index": i, "label": label, "pixels": list(pixels[i * size:(i + 1) * size])}
            for label, i in sorted(first.items())]
