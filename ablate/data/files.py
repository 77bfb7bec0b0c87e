"""What a sweep checks of its data before any run, without Lightning (and without torch unless MNIST has to be
downloaded: torchvision does that): the data folder, MNIST's four IDX files (there, downloaded if they can be, well
formed), the memory a synthetic task's sets need, and the error for data that is missing or cannot be built
(`DataError`).

`ready(cfg)` is that check for one data config; a task's registry entry names its part (`TaskSpec.prepare`),
and a task that names none (a plug-in's may) is checked by its own data module's `prepare_data` (Lightning is
imported then). The sweep's command runs it once per distinct data config, so a missing data set is one line
and exit 2, not one failed run per configuration; the command itself never imports Lightning for it (a driver
on a login node stays small, and the forkserver it starts imports it alone).
"""

from __future__ import annotations

import importlib
import os
import socket
import struct
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from ..config import DataConfig
from ..registry import MNIST_CLASSES, MNIST_FILES, MNIST_IDX, MNIST_ROWS, TaskSpec, data_dir
from ..registry import spec as task_spec


class DataError(Exception):
    """Data that should be on disk is not (and cannot be fetched), is broken, or cannot be built on
    this machine; the message is one line: the problem, then after "; " the fix."""


def memory_bytes() -> int | None:
    """This machine's physical memory in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows), or the name is unknown
        return None


def ready(cfg: DataConfig) -> None:
    """Raise DataError (one line) unless the data of `cfg` can be built here: the registry entry's check
    (`TaskSpec.prepare`), else, for a plug-in's task, its data module's own prepare_data."""
    spec = task_spec(cfg.task)
    if spec.prepare:
        module, _, function = spec.prepare.partition(":")
        try:
            check = getattr(importlib.import_module(module), function)
        except (ImportError, AttributeError) as err:
            raise DataError(f"its prepare {spec.prepare!r} cannot be loaded ({err}); name a function "
                            "'package.module:function', or leave it out") from None
        check(cfg)
        return
    from . import build_datamodule

    build_datamodule(cfg).prepare_data()


# ---- the synthetic tasks: memory ----

# the sets may take this share of the machine's memory; the model and the trainer need the rest
MEMORY_SHARE = 0.5


def memory_problem(spec: TaskSpec, cfg: DataConfig, have: int | None) -> str | None:
    """Why the sets of a synthetic task do not fit in `have` bytes (MEMORY_SHARE of them), in one line with
    the keys to lower; None where they fit or the OS does not say."""
    need = spec.data_bytes(cfg)
    if have is None or need <= MEMORY_SHARE * have:
        return None

    def tokens(length: int) -> int:  # of one sequence built at `length`
        return spec.seq_len(replace(cfg, length=length, test_length=None))

    keys = ["data.n_train", "data.n_val", "data.n_test"]  # the lengths too where the sequences grow with them
    keys += [f"data.{k}" for k in ("length", "test_length") if k in spec.keys]
    return (f"the {spec.title}'s sets need about {need / 2**30:.3g} GiB ({cfg.n_train} + {cfg.n_val} sequences of "
            f"{tokens(cfg.length)} tokens, {cfg.n_test} of {tokens(cfg.eval_length)}), more than "
            f"{MEMORY_SHARE:.0%} of this machine's {have / 2**30:.3g} GiB; lower {', '.join(keys[:-1])} or {keys[-1]}")


def memory_enough(cfg: DataConfig) -> None:
    """A synthetic task's check before any run: its sets fit in this machine's memory."""
    if problem := memory_problem(task_spec(cfg.task), cfg, memory_bytes()):
        raise DataError(problem)


# ---- MNIST: the four IDX files ----

# their names, the IDX format and the data folder: ablate.registry (the explorer reads them too)
ROWS, N_CLASSES, FILES, IDX = MNIST_ROWS, MNIST_CLASSES, MNIST_FILES, MNIST_IDX
MISSING_HINT = (
    "set ABLATE_DATA_DIR to the folder that holds MNIST/raw/ (e.g. ABLATE_DATA_DIR=~/datasets)"
)


def mnist_ready(cfg: DataConfig) -> None:
    """MNIST's check before any run: the four files are under the data folder (downloaded if the mirror
    answers) and well formed."""
    ensure_mnist(data_dir())
    check_mnist(data_dir())


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
    for images, labels in ((raw / FILES[0], raw / FILES[1]), (raw / FILES[2], raw / FILES[3])):  # train, test
        n_images, _ = idx_header(images, "images")
        n_labels, offset = idx_header(labels, "labels")
        if n_images != n_labels:
            raise broken((images, labels), f"disagree: {n_images} images but {n_labels} labels")
        values = labels.read_bytes()[offset:]
        if max(values) >= N_CLASSES:
            bad = [i for i, v in enumerate(values) if v >= N_CLASSES]
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise broken(
                labels,
                f"holds label {values[bad[0]]} at item {bad[0]}{more}, expected 0..{N_CLASSES - 1}",
            )
