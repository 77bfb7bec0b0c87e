"""Which GPUs each concurrent run of a sweep gets: several runs per GPU, disjoint GPU groups per run.

The tutorial-size models use a sliver of a data-centre GPU, so a sweep packs several runs onto each
one: every run is still its own process with its own CUDA context (`CUDA_VISIBLE_DEVICES` set per
worker), so a crash or an out-of-memory error ends one run, not its neighbours. A run of K GPUs
(`--gpus-per-run K`, DDP) gets a group of K GPUs that no other group shares; N runs per GPU then
means N runs per group.

Everything here is a pure function of the visible devices, the sizes and the counts it is given,
so the assignment is tested on machines without a GPU.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from dataclasses import dataclass

from .spec import SweepError

# Default runs per GPU: what fits in this share of the GPU's free memory, each run counted with its
# CUDA context, at most one run per CPU core, and never more than MAX_DEFAULT.
HEADROOM = 0.8
CONTEXT_BYTES = 600 * 2**20  # a CUDA context with PyTorch's kernels loaded: ~0.3-0.6 GB, taken generously
MAX_DEFAULT = 16
GB = 1e9


def groups(gpus: list[str], per_run: int) -> list[str]:
    """Disjoint CUDA_VISIBLE_DEVICES values, one per GPU group: 8 GPUs, 2 per run -> '0,1' .. '6,7'."""
    if per_run < 1:
        raise SweepError(f"--gpus-per-run={per_run} is not allowed; expected an integer >= 1")
    if per_run > len(gpus):
        raise SweepError(f"--gpus-per-run={per_run} but only {len(gpus)} GPUs are visible "
                         f"({','.join(gpus) or 'none'}); lower it")
    return [",".join(gpus[i:i + per_run]) for i in range(0, len(gpus) - per_run + 1, per_run)]


def assign(gpus: list[str], runs_per_gpu: int, gpus_per_run: int = 1) -> list[str]:
    """CUDA_VISIBLE_DEVICES of every worker slot: each GPU group `runs_per_gpu` times, round-robin
    (the first slots spread over every group, so a sweep with fewer runs than slots still uses every
    GPU). 2 GPUs, 3 runs per GPU -> ['0', '1', '0', '1', '0', '1']."""
    if isinstance(runs_per_gpu, bool) or not isinstance(runs_per_gpu, int) or runs_per_gpu < 1:
        raise SweepError(f"--runs-per-gpu={runs_per_gpu} is not allowed; expected an integer >= 1")
    base = groups(gpus, gpus_per_run)
    return [group for _ in range(runs_per_gpu) for group in base]


def describe(slots: list[str | None]) -> str:
    """'0 x4 | 1 x4' for the slots above (in the order groups first appear); '0 | 1' one run each."""
    counts = Counter(s for s in slots if s)
    return " | ".join(g if n == 1 else f"{g} x{n}" for g, n in counts.items())


@dataclass(frozen=True)
class Choice:
    runs_per_gpu: int
    why: str  # the sentence the sweep prints


def default_runs_per_gpu(need_bytes: int, free_bytes: int | None, cores: int, n_groups: int,
                         processes_per_run: int = 1, threads: int = 1) -> Choice:
    """How many runs to put on each GPU group when --runs-per-gpu is not given: as many as fit in
    HEADROOM of the smallest free memory (`need_bytes` per run plus its CUDA context), at most one
    run per `threads` cores per process, at most MAX_DEFAULT; at least 1."""
    per_run = need_bytes + CONTEXT_BYTES
    by_cores = max(1, cores // max(1, n_groups * processes_per_run * threads))
    limits = [f"{cores} cores for {n_groups} GPU group(s) allow {by_cores}", f"at most {MAX_DEFAULT}"]
    n = min(by_cores, MAX_DEFAULT)
    if free_bytes is None:
        n = 1
        limits = ["the GPUs' free memory is unknown (nvidia-smi did not answer, or the GPUs are MIG slices, which "
                  "its table shows as whole GPUs); pass --runs-per-gpu N"]
    else:
        by_memory = int(HEADROOM * free_bytes // per_run)
        limits.insert(0, f"a run needs about {per_run / GB:.2f} GB with its CUDA context, "
                         f"{HEADROOM:.0%} of the {free_bytes / GB:.1f} GB free fits {by_memory}")
        n = max(1, min(n, by_memory))
    return Choice(n, f"{n} run(s) per GPU ({'; '.join(limits)})")


def check_fits(runs_per_gpu: int, need_bytes: int, free_bytes: int | None) -> None:
    """--runs-per-gpu N whose runs cannot all fit in the GPU's free memory is refused (SweepError)."""
    if free_bytes is None:
        return
    per_run = need_bytes + CONTEXT_BYTES
    if runs_per_gpu * per_run > free_bytes:
        most = max(1, free_bytes // per_run)
        raise SweepError(f"--runs-per-gpu={runs_per_gpu} needs about {runs_per_gpu * per_run / GB:.1f} GB per GPU "
                         f"({per_run / GB:.2f} GB a run with its CUDA context) but {free_bytes / GB:.1f} GB are free; "
                         f"use --runs-per-gpu {most} or fewer")


def free_memory(gpus: list[str]) -> int | None:
    """Free bytes of the fullest of the visible GPUs, from nvidia-smi (this process never creates a
    CUDA context: it would hold ~0.5 GB of the first GPU for the whole sweep). Visible GPUs are
    matched by index or UUID; if none matches, the fullest of all. None if nvidia-smi does not answer."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,memory.free", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=True,
                             env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_free(out, gpus)


def parse_free(table: str, gpus: list[str]) -> int | None:
    """nvidia-smi's 'index, uuid, free MiB' lines -> free bytes of the fullest visible GPU; None for MIG slices
    (CUDA_VISIBLE_DEVICES=MIG-...), whose memory the table does not give."""
    rows = []
    for line in table.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            continue
        try:
            rows.append((parts[0], parts[1], int(float(parts[2]) * 2**20)))
        except ValueError:
            continue
    if not rows or any(g.startswith("MIG-") for g in gpus):  # nvidia-smi's row is the whole GPU, not the slice
        return None
    visible = [free for index, uuid, free in rows if index in gpus or uuid in gpus]
    return min(visible or [free for _, _, free in rows])
