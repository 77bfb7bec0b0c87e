"""Writing a file whole or not at all: the one primitive every layer that writes shares.

A leaf module (it imports nothing of ablate), so the run directory, the results export and the
report build all use the same atomic write without importing each other.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    """The process umask, read without changing it where Linux allows (threads may be creating files)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)  # restrictive while it is read
    os.umask(mask)
    return mask


def usual_mode(mode: int) -> int:
    """`mode` as open() or mkdir() would give it under the process umask (mkstemp and mkdtemp give 0600, 0700)."""
    return mode & ~_umask()


def atomic_write(path: Path, text: str | bytes) -> None:
    """Write `path` as a whole or not at all. On failure the temp file is removed and the OSError
    (ENOSPC, EROFS, ...) is raised again naming `path`."""
    path = Path(path)
    data = text if isinstance(text, bytes) else text.encode()
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # mkstemp's 0600 -> what open() would give
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
