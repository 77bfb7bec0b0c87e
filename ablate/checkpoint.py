"""Loading a checkpoint a run wrote, safely: weights-only (tensors and plain values), so a crafted
pickle is refused, never run; every way it can fail is one CheckpointError line.

A leaf module (it imports nothing of ablate), so the tasks below the run directory and everything
above it share the one loader without importing each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded safely: missing, truncated, garbage, or holding objects
    other than tensors and plain values (whose unpickling could run code)."""


def load_checkpoint(path: Path, map_location: Any = "cpu") -> dict[str, Any]:
    """A Lightning checkpoint written by a run, loaded weights-only: tensors and plain values, never
    an arbitrary object (a crafted pickle is refused, not run). CheckpointError says why not."""
    import pickle

    import torch

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist or is not a file")
    if path.stat().st_size == 0:
        raise CheckpointError(f"checkpoint {path} is empty")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        if blocked := [line for line in lines if "GLOBAL" in line]:  # "unsupported GLOBAL posix.system ..."
            raise CheckpointError(f"checkpoint {path} holds objects other than tensors and plain values "
                                  f"({blocked[0].rstrip('.')}; refused: loading it could run code)") from None
        detail = next((line for line in lines if line.startswith("Unsupported")), first_line(err))
        raise CheckpointError(f"checkpoint {path} is truncated, garbage or not a plain checkpoint ({detail}; "
                              "refused by the weights-only loader)") from None
    except Exception as err:  # torch.load's many ways to fail on a truncated or garbage file
        raise CheckpointError(f"checkpoint {path} is truncated or not a checkpoint ({first_line(err)})") from None
    if not isinstance(ckpt, dict) or not {"state_dict", "global_step", "hyper_parameters"} <= set(ckpt):
        raise CheckpointError(f"checkpoint {path} is not a checkpoint of an ablate run")
    return ckpt


def first_line(err: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def fit_problem(saved: dict[str, Any], expected: dict[str, Any]) -> str | None:
    """Why the state_dict `saved` cannot be loaded into a model whose state_dict is `expected` (None
    when every key is there with its shape): the first missing, unexpected or mis-shaped tensor."""
    if missing := [k for k in expected if k not in saved]:
        return f"it lacks {missing[0]}" + (f" and {len(missing) - 1} more tensors" if len(missing) > 1 else "")
    if unexpected := [k for k in saved if k not in expected]:
        return f"it holds {unexpected[0]}, which the model has not" + (
            f" (and {len(unexpected) - 1} more)" if len(unexpected) > 1 else "")
    for key, tensor in expected.items():
        have, want = tuple(getattr(saved[key], "shape", ())), tuple(getattr(tensor, "shape", ()))
        if have != want:
            return f"its {key} has shape {list(have)}, the model's {list(want)}"
    return None
