"""`ablate bench attention`: how the cost of one attention layer grows with sequence length n.

One `ablate.models.MultiHeadAttention` (d_model 64, 4 heads of 16, dropout 0, no positional
encoding) runs forward + backward on random input of n = 32, 64, ..., 8192 tokens, on two paths
that compute the same function:

    fused     F.scaled_dot_product_attention (training's path; on CPU and CUDA a flash /
              memory-efficient kernel that never stores the n x n weights when one applies)
    explicit  softmax(Q K^T * scale) V with the weights materialised (need_weights=True, the path
              the probes use)

Time: the median over `--repeats` interleaved rounds (every (n, path) once per round, the order
rotating) of `--steps` forward+backward passes, after `--warmup` untimed ones.

Memory, said per row in `mem_kind`:
    cuda_peak           torch.cuda.max_memory_allocated during one forward+backward, minus what was
                        allocated before it (CUDA only)
    saved_for_backward  bytes of the distinct tensors autograd keeps for the backward pass, counted
                        with torch.autograd.graph.saved_tensors_hooks during one forward: the
                        activation memory, which is what grows with n (CPU has no allocator peak
                        counter); also given on CUDA as `saved_mb`

Work, counted (issue 37): `flops`, the floating-point operations of one forward+backward as torch's own
counter (torch.utils.flop_counter.FlopCounterMode) counts them, on the explicit path only: the counter has
no formula for the CPU's fused attention kernel, so there it would count the projections and miss
attention (the fused rows leave it empty; both paths compute the same function); `weights_mb`, the bytes
of the n x n attention weights the explicit path returns (batch x heads x n x n).

The slope of log cost against log n is fitted over the upper half of the lengths (n >= the
geometric middle of the range), where the n^2 terms dominate the O(n) ones; an O(n^2) cost has
slope 2. The time slope also gets a 95 % interval (`time_slope_lo`, `time_slope_hi`): the rounds
resampled with replacement at each n (2,000 draws, a fixed seed), the median refitted each time,
percentiles of the slopes. `--csv PATH` writes one row per (path, n) with the slopes repeated on every row.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ablate.fileio import atomic_write
from ablate.models import EncoderConfig, MultiHeadAttention

from .speed import BenchInputError, resolve_device

PATHS = ("fused", "explicit")
D_MODEL, N_HEADS = 64, 4


@dataclass
class Row:
    path: str
    n: int
    batch: int
    d_model: int
    n_heads: int
    device: str
    threads: int
    torch: str
    time_ms: float
    mem_mb: float
    mem_kind: str
    saved_mb: float
    time_slope: float = math.nan
    mem_slope: float = math.nan
    fit_from_n: int = 0
    flops: float = math.nan  # counted on the explicit path only (see the module's docstring)
    weights_mb: float = math.nan  # the n x n weights (explicit path)
    flops_slope: float = math.nan
    time_slope_lo: float = math.nan  # 95 % bootstrap interval of time_slope over the rounds
    time_slope_hi: float = math.nan


def parse_lengths(text: str, minimum: int = 1) -> list[int]:
    """'32:2048' -> [32, 64, ..., 2048] (doubling from MIN); '32,100,300' -> as listed. At least two lengths (a
    slope needs two), each >= `minimum`; BenchInputError with one line otherwise."""
    problem = (f"--lengths={text!r} is not allowed; give MIN:MAX (doubling from MIN) or N,N,... with at least "
               f"two lengths >= {minimum}")
    try:
        if ":" in text:
            low, high = (int(v) for v in text.split(":"))
            out = [low * 2**k for k in range(64) if low >= 1 and low * 2**k <= high]
        else:
            out = sorted({int(v) for v in text.split(",")})
    except ValueError:
        raise BenchInputError(problem) from None
    if len(out) < 2 or out[0] < minimum:
        raise BenchInputError(problem)
    return out


def layer(device: torch.device) -> MultiHeadAttention:
    cfg = EncoderConfig(d_model=D_MODEL, n_heads=N_HEADS, pos_enc="none", dropout=0.0)
    return MultiHeadAttention(cfg).to(device).train()


def step(module: MultiHeadAttention, x: torch.Tensor, path: str) -> None:
    """One forward + backward; gradients reach the input and every weight."""
    y, _ = module(x, need_weights=path == "explicit")  # (B, n, d_model)
    y.square().mean().backward()


def saved_bytes(module: MultiHeadAttention, x: torch.Tensor, path: str) -> int:
    """Bytes of the distinct storages autograd saves for backward during one forward."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(x, need_weights=path == "explicit")
    return sum(storages.values())


def counted_work(module: MultiHeadAttention, x: torch.Tensor) -> tuple[float, float]:
    """(FLOPs of one explicit forward+backward as torch's FlopCounterMode counts them, MB of the n x n weights)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        y, weights = module(x, need_weights=True)
        y.square().mean().backward()
    module.zero_grad(set_to_none=True)
    x.grad = None
    return float(counter.get_total_flops()), weights.numel() * weights.element_size() / 2**20


def cuda_peak_bytes(module: MultiHeadAttention, x: torch.Tensor, path: str) -> int:
    torch.cuda.synchronize(x.device)
    module.zero_grad(set_to_none=True)
    x.grad = None
    base = torch.cuda.memory_allocated(x.device)
    torch.cuda.reset_peak_memory_stats(x.device)
    step(module, x, path)
    torch.cuda.synchronize(x.device)
    return torch.cuda.max_memory_allocated(x.device) - base


def measure(lengths: list[int], batch: int = 1, steps: int = 2, repeats: int = 5, warmup: int = 2,
            device: torch.device | str = "cpu", seed: int = 0) -> list[Row]:
    device = torch.device(device)
    torch.manual_seed(seed)
    module = layer(device)
    inputs = {n: torch.randn(batch, n, D_MODEL, device=device, requires_grad=True) for n in lengths}
    keys = [(n, p) for n in lengths for p in PATHS]

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for n, p in keys:  # kernel selection, allocator: never timed
        for _ in range(warmup):
            step(module, inputs[n], p)
    times: dict[tuple[int, str], list[float]] = {k: [] for k in keys}
    for r in range(repeats):
        for n, p in keys[r % len(keys):] + keys[: r % len(keys)]:
            sync()
            t0 = time.perf_counter()
            for _ in range(steps):
                step(module, inputs[n], p)
            sync()
            times[n, p].append((time.perf_counter() - t0) / steps)
    rows = []
    for n, p in keys:
        saved = saved_bytes(module, inputs[n], p)
        if device.type == "cuda":
            mem, kind = cuda_peak_bytes(module, inputs[n], p), "cuda_peak"
        else:
            mem, kind = saved, "saved_for_backward"
        flops, weights = counted_work(module, inputs[n]) if p == "explicit" else (math.nan, math.nan)
        rows.append(Row(p, n, batch, D_MODEL, N_HEADS, str(device), torch.get_num_threads(), torch.__version__,
                        1e3 * statistics.median(times[n, p]), mem / 2**20, kind, saved / 2**20,
                        flops=flops, weights_mb=weights))
    return fit(rows, {k: [1e3 * t for t in v] for k, v in times.items()})


def upper_half(lengths: list[int]) -> list[int]:
    """The lengths at or above the geometric middle of the range (at least the two largest)."""
    lengths = sorted(set(lengths))
    middle = math.sqrt(lengths[0] * lengths[-1])
    upper = [n for n in lengths if n >= middle - 1e-9]
    return upper if len(upper) >= 2 else lengths[-2:]


def slope(ns: list[int], values: list[float]) -> float:
    x, y = np.log(np.asarray(ns, dtype=float)), np.log(np.asarray(values, dtype=float))
    if len(x) < 2 or not np.all(np.isfinite(y)):
        return math.nan
    return float(np.polyfit(x, y, 1)[0])


def slope_interval(ns: list[int], rounds: list[list[float]], draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile interval of the log-log slope of the median time: at each n its rounds resampled with
    replacement, the median taken, the slope refitted. NaN where a length has no rounds."""
    if len(ns) < 2 or any(not r for r in rounds):
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    x = np.log(np.asarray(ns, dtype=float))
    medians = np.stack([np.median(rng.choice(np.asarray(r, dtype=float), size=(draws, len(r))), axis=1)
                        for r in rounds], axis=1)  # (draws, len(ns))
    if not np.all(medians > 0):
        return math.nan, math.nan
    slopes = np.polyfit(x, np.log(medians).T, 1)[0]
    lo, hi = np.percentile(slopes, [2.5, 97.5])
    return float(lo), float(hi)


def fit(rows: list[Row], rounds: dict[tuple[int, str], list[float]] | None = None) -> list[Row]:
    """Fill time_slope / mem_slope / flops_slope of each path, fitted over the upper half of its lengths, and the
    time slope's 95 % interval from the rounds' times (ms, by (n, path)) where given."""
    for p in PATHS:
        mine = [r for r in rows if r.path == p]
        if not mine:
            continue
        upper = upper_half([r.n for r in mine])
        chosen = [r for r in mine if r.n in upper]
        ns = [r.n for r in chosen]
        ts = slope(ns, [r.time_ms for r in chosen])
        ms = slope(ns, [r.mem_mb for r in chosen])
        fs = slope(ns, [r.flops for r in chosen])
        lo, hi = slope_interval(ns, [rounds.get((n, p), []) for n in ns]) if rounds else (math.nan, math.nan)
        for r in mine:
            r.time_slope, r.mem_slope, r.fit_from_n, r.flops_slope = ts, ms, upper[0], fs
            r.time_slope_lo, r.time_slope_hi = lo, hi
    return rows


def to_csv(rows: list) -> str:
    """Dataclass rows as CSV, floats to 6 significant digits (bench attention's and bench rnn's --csv), each
    row ending with the code's commit and whether it had uncommitted changes: the provenance every sweep's
    table has (meta.json), which the report reads."""
    from ..provenance import git_state

    code = git_state()
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[*asdict(rows[0]), "commit", "dirty"], lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({**{k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in asdict(r).items()},
                         "commit": code["commit"] or "", "dirty": "" if code["dirty"] is None else code["dirty"]})
    return buffer.getvalue()


def report(rows: list[Row]) -> list[str]:
    lengths = sorted({r.n for r in rows})
    by = {(r.n, r.path): r for r in rows}
    kind = rows[0].mem_kind
    lines = [f"{'n':>6}" + "".join(f"{p + ' ms':>14}" for p in PATHS) + "".join(f"{p + ' MB':>14}" for p in PATHS)]
    for n in lengths:
        lines.append(f"{n:>6}" + "".join(f"{by[n, p].time_ms:>14.3f}" for p in PATHS)
                     + "".join(f"{by[n, p].mem_mb:>14.3f}" for p in PATHS))
    first = {p: next(r for r in rows if r.path == p) for p in PATHS}
    lines.append("")
    lines.append(f"log-log slope over n >= {first[PATHS[0]].fit_from_n} (the upper half, where the n^2 terms dominate; "
                 "O(n^2) has slope 2):")
    for p in PATHS:
        counted = f", counted FLOPs {first[p].flops_slope:.2f}" if math.isfinite(first[p].flops_slope) else ""
        lines.append(f"slope {p}: time {first[p].time_slope:.2f} [{first[p].time_slope_lo:.2f}, "
                     f"{first[p].time_slope_hi:.2f}] (95 % over the rounds), memory ({kind}) "
                     f"{first[p].mem_slope:.2f}{counted}")
    return lines


def run(args: argparse.Namespace) -> int:
    """`ablate bench attention`: measure, print the table and the slopes, write --csv if asked."""
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    lengths = parse_lengths(args.lengths)
    rows = measure(lengths, args.batch_size, args.steps, args.repeats, args.warmup, device)
    print(
        f"ablate bench attention: one attention layer, d_model {D_MODEL}, {N_HEADS} heads, batch "
        f"{args.batch_size}, forward+backward; device {device}, {torch.get_num_threads()} threads, torch "
        f"{torch.__version__}\nmedian of {args.repeats} interleaved rounds x {args.steps} steps; memory: "
        f"{rows[0].mem_kind.replace('_', ' ')}",
        flush=True,
    )
    print("\n".join(report(rows)), flush=True)
    if args.csv:
        atomic_write(Path(args.csv), to_csv(rows))
        print(f"wrote {args.csv}")
    return 0
