"""Where a result came from: commit, dirty flag, package versions, device, threads."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGES = ("torch", "torchvision", "pytorch-lightning", "torchmetrics", "wandb", "ablate")


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state() -> dict[str, object]:
    commit = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(dirty) if dirty is not None else None}


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def device_info(accelerator: str) -> dict[str, object]:
    import torch  # here: the commit (git_state, other_code) is read without it, by the sweep runner too

    cuda = torch.cuda.is_available() and accelerator in ("auto", "gpu", "cuda")
    return {
        "device": torch.cuda.get_device_name(0) if cuda else f"cpu ({platform.processor() or platform.machine()})",
        "cuda_devices": torch.cuda.device_count() if cuda else 0,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "host": platform.node(),
    }


def provenance(accelerator: str) -> dict[str, object]:
    """Where and when a run was made: the code's commit, package versions, the device, and the time (UTC,
    ISO 8601: what dates an exported table, never a file's modification time)."""
    from datetime import datetime, timezone

    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {**git_state(), "versions": versions(), **device_info(accelerator), "time": when}


def other_code(summaries: list[dict]) -> tuple[list[str], str | None]:
    """The commits whose package differs from the checkout's now that made these finished runs (their
    summary.json's provenance), and the commit now (None outside git). A finished run is not run again, so a result made
    by older code is kept silently unless someone says so (issue 43)."""
    now = _git("rev-parse", "HEAD")
    made = {(s.get("provenance") or {}).get("commit") for s in summaries}
    # other code: the package differs between the two commits (a commit of the docs or tests changes no run);
    # `git diff --quiet` exits 1 for a difference, 128 for a commit this clone does not have: either way None
    return sorted(c for c in made if isinstance(c, str) and now and c != now
                  and _git("diff", "--quiet", c, now, "--", ".") is None), now


def other_code_note(summaries: list[dict], then: str = "kept, not rerun; --retrain-stale trains them again as "
                    "new attempts") -> str | None:
    """One sentence naming the runs among `summaries` that other code made (another commit of ablate, or another
    source of a plug-in they used, as rundir.retrains counts them: completed or diverged, not a run that early
    termination stopped, which keeps its decision), and `then` what becomes of them; or None."""
    from .plugins import changed
    from .rundir import STALE

    summaries = [s for s in summaries if s.get("status") in STALE]
    others, now = other_code(summaries)
    by_commit = [s for s in summaries if (s.get("provenance") or {}).get("commit") in others]
    plugins = sorted({name for s in summaries for name in changed(s)})
    count = sum(s in by_commit or bool(changed(s)) for s in summaries)
    if not count:
        return None
    said = ([f"commit {', '.join(c[:10] for c in others[:3])}{', ...' if len(others) > 3 else ''}; the code is now at "
             f"{now[:10]}"] if by_commit else []) + [f"plugins={name}, whose source has changed" for name in plugins]
    return f"{count} of them made by other code ({'; '.join(said)}): {then}"
