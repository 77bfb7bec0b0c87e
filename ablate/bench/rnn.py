"""`ablate bench rnn`: the cost of one training step of an LSTM and a Transformer against sequence length n.

Both models are ablate's `TokenModel` on the copy task's batches (vocabulary 10: n token ids, the copy
task's `t_1 .. t_L, SEP, BLANK ...` with L = n/2, cut to n tokens; cross-entropy at the blanks):

    lstm         `model.arch=lstm` at the tutorial's d_model 64, 2 layers and dropout 0.1 (between the
                 layers), no positional encoding (it reads in order), its hidden size matched to the
                 Transformer encoder's parameter count (`ablate.models.matched_hidden`)
    transformer  the tutorial's encoder (d_model 64, 4 heads, FFN 128, 2 layers, learned positions with
                 max_len = n, Post-LN, dropout 0.1)
    transformer_p0   the same at dropout 0. With attention dropout on, torch's CPU
                 scaled_dot_product_attention takes its math path and stores the n x n weights; at
                 dropout 0 its fused (flash) kernel does not: the O(n^2) memory is the kernel's, not
                 attention's

A step is forward + backward + Adam step (lr 1e-3), the same batch for all three. Time: the median over
`--repeats` interleaved rounds (every (model, n) once per round, the order rotating) of `--steps`
steps, after `--warmup` untimed ones.

Memory, said per row in `mem_kind` (the gradients are freed before the measured step, the weights,
Adam's state and the batch are held before it and not counted):

    cpu_peak   the peak of the bytes torch's CPU allocator holds during one step, above what it held
               before: every tensor (activations saved for backward, gradients, temporaries), counted
               from the allocation events torch.profiler records (profile_memory=True). Not the
               process's RSS: no Python objects, no allocator caching, no library code.
    cuda_peak  torch.cuda.max_memory_allocated during one step, minus what was allocated before it

Slopes of log cost against log n are fitted over the upper half of the lengths, as in `bench attention`
(the O(n) LSTM has slope 1; the Transformer tends to 2 as attention's n^2 terms take over). A crossover
is where the LSTM's cost curve crosses a Transformer's, interpolated linearly in log n - log cost between the
two measured lengths around it (exact for power laws); none is reported when the order never changes.

The serial part: the LSTM at a fixed number of tokens per batch (batch x n = the main table's batch
x its largest n), so the arithmetic is the same at every n and only the number of time steps that
must run one after another changes. A slope of 0 means the recurrence costs nothing beyond its
arithmetic; 1 means time grows with the number of serial steps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ablate.data.copytask import IGNORE, copy_sequences
from ablate.fileio import atomic_write
from ablate.models import EncoderConfig, TokenModel

from . import attention
from .attention import slope, to_csv, upper_half
from .speed import resolve_device

# The models, by CSV name: the LSTM, the tutorial's Transformer and the same at dropout 0, where torch's
# fused attention kernel can run without storing the n x n weights (with attention dropout on, torch's CPU
# scaled_dot_product_attention takes its math path, which does).
MODELS = ("lstm", "transformer", "transformer_p0")
LABELS = {"lstm": "LSTM", "transformer": "Transformer", "transformer_p0": "Transformer at dropout 0"}
SHORT = {"lstm": "LSTM", "transformer": "Transf.", "transformer_p0": "Tr. p=0"}
VOCAB = 10
TUTORIAL = EncoderConfig()  # d_model 64, 4 heads, FFN 128, 2 layers, learned positions, Post-LN, dropout 0.1


@dataclass
class Row:
    series: str  # "batch": the main table, fixed batch; "tokens": the serial part, fixed batch x n
    model: str
    n: int
    batch: int
    params: int
    device: str
    threads: int
    torch: str
    time_ms: float
    mem_mb: float
    mem_kind: str
    time_slope: float = math.nan
    mem_slope: float = math.nan
    fit_from_n: int = 0
    time_crossover_n: str = ""  # where the LSTM's and the Transformer's times cross, ";"-joined; "" if none
    mem_crossover_n: str = ""
    time_crossover_p0_n: str = ""  # the same against the Transformer at dropout 0
    mem_crossover_p0_n: str = ""


def parse_lengths(text: str) -> list[int]:
    """`bench attention`'s lengths, each >= 2 (a copy-task batch needs two tokens)."""
    return attention.parse_lengths(text, minimum=2)


def model_config(arch: str, n: int) -> EncoderConfig:
    """The tutorial's encoder config for `arch`. The Transformer's learned table is exactly n long (a
    longer one would add untouched rows that Adam still updates at every step); the LSTM reads in order
    and takes no positional encoding, its hidden size matched to the Transformer's parameters."""
    if arch == "transformer":
        return replace(TUTORIAL, max_len=n)
    if arch == "transformer_p0":
        return replace(TUTORIAL, max_len=n, dropout=0.0)
    return replace(TUTORIAL, arch=arch, pos_enc="none")


def build_model(name: str, n: int) -> nn.Module:
    """`name` in MODELS: a TokenModel reading VOCAB + 2 token ids (tokens, SEP, BLANK), predicting VOCAB."""
    return TokenModel(model_config(name, n), VOCAB + 2, VOCAB)


def batch_of(batch: int, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Copy-task token ids x (batch, n) and targets y (batch, n): L = n // 2 tokens, SEP, blanks, cut to n."""
    x, y = copy_sequences(batch, n // 2, VOCAB, False, torch.Generator().manual_seed(seed))  # (batch, 2L+1)
    return x[:, :n].contiguous(), y[:, :n].contiguous()


class Step:
    """One model, its Adam and its batch; calling it runs one training step."""

    def __init__(self, name: str, n: int, batch: int, device: torch.device, seed: int = 0):
        torch.manual_seed(seed)
        self.model = build_model(name, n).to(device).train()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.x, self.y = (t.to(device) for t in batch_of(batch, n, seed))
        self.params = sum(p.numel() for p in self.model.parameters())

    def __call__(self) -> None:
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(self.x)  # (B, n, VOCAB)
        F.cross_entropy(logits.reshape(-1, VOCAB), self.y.reshape(-1), ignore_index=IGNORE).backward()
        self.opt.step()


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence the profiler's C++ start/stop lines (written to file descriptor 2, not sys.stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def running_peak(events: list[tuple[float, int]]) -> int:
    """The largest running sum of byte deltas (+ allocation, - free) taken in time order, and 0 if it
    never rises above the start."""
    total = peak = 0
    for _, delta in sorted(events, key=lambda e: e[0]):
        total += delta
        peak = max(peak, total)
    return peak


def cpu_peak_bytes(work: Callable[[], object]) -> int:
    """Peak bytes held by torch's CPU allocator while `work()` runs, above the level before it: the
    running sum of the allocation (+) and free (-) events torch.profiler records. A block allocated
    before and freed during `work` has no recorded size and is left out."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    with tempfile.TemporaryDirectory() as tmp, _quiet_stderr():
        with torch.profiler.profile(activities=activities, profile_memory=True) as prof:
            work()
        trace = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
    return running_peak([(e["ts"], e["args"]["Bytes"]) for e in events if e.get("name") == "[memory]"])


def cuda_peak_bytes(step: Step) -> int:
    """torch.cuda.max_memory_allocated during one step, above what was allocated before it."""
    device = step.x.device
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - base


def timed(steps: dict[tuple, Step], n_steps: int, repeats: int, warmup: int, device: torch.device) -> dict[tuple, float]:
    """Median seconds per step of every entry, over `repeats` rounds in a rotating order."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    keys = list(steps)
    for key in keys:  # kernel selection, allocator, Adam state: never timed
        for _ in range(warmup):
            steps[key]()
    times: dict[tuple, list[float]] = {k: [] for k in keys}
    for r in range(repeats):
        for key in keys[r % len(keys):] + keys[: r % len(keys)]:
            sync()
            t0 = time.perf_counter()
            for _ in range(n_steps):
                steps[key]()
            sync()
            times[key].append((time.perf_counter() - t0) / n_steps)
    return {k: statistics.median(v) for k, v in times.items()}


def measure(lengths: list[int], batch: int = 8, n_steps: int = 1, repeats: int = 3, warmup: int = 1,
            device: torch.device | str = "cpu", seed: int = 0,
            progress: Callable[[str], None] = lambda s: None) -> list[Row]:
    """The main table (both models, fixed batch) and the serial part (the LSTM at batch x n =
    batch x max(lengths)), slopes and crossovers filled in."""
    device = torch.device(device)
    tokens = batch * max(lengths)
    plan = [("batch", m, n, batch) for n in lengths for m in MODELS]
    plan += [("tokens", "lstm", n, max(1, round(tokens / n))) for n in lengths]
    rows = []
    for series in ("batch", "tokens"):
        keys = [k for k in plan if k[0] == series]
        steps = {k: Step(k[1], k[2], k[3], device, seed) for k in keys}
        progress(f"timing {len(keys)} {'(model, n)' if series == 'batch' else 'LSTM fixed-token'} points ...")
        seconds = timed(steps, n_steps, repeats, warmup, device)
        for key in keys:
            step = steps[key]
            step.model.zero_grad(set_to_none=True)  # the gradients are the step's to allocate
            if device.type == "cuda":
                mem, kind = cuda_peak_bytes(step), "cuda_peak"
            else:
                mem, kind = cpu_peak_bytes(step), "cpu_peak"
            rows.append(Row(series, key[1], key[2], key[3], step.params, str(device), torch.get_num_threads(),
                            torch.__version__, 1e3 * seconds[key], mem / 2**20, kind))
        del steps
    return fit(rows)


def crossovers(ns: list[int], a: list[float], b: list[float]) -> list[float]:
    """The lengths where a and b cross: a measured n where they are equal, or between two measured lengths
    where a - b changes sign, interpolated linearly in (log n, log a - log b)."""
    r = np.log(np.asarray(a, dtype=float)) - np.log(np.asarray(b, dtype=float))
    x = np.log(np.asarray(ns, dtype=float))
    out = [float(ns[i]) for i in range(len(ns)) if r[i] == 0]
    for i in range(len(ns) - 1):
        if r[i] * r[i + 1] < 0:
            t = r[i] / (r[i] - r[i + 1])
            out.append(float(np.exp(x[i] + t * (x[i + 1] - x[i]))))
    return sorted(out)


def _joined(values: list[float]) -> str:
    return ";".join(f"{v:.4g}" for v in values)


def fit(rows: list[Row]) -> list[Row]:
    """Fill each (series, model)'s slopes over the upper half of its lengths, and the main table's
    crossovers (the same on every row)."""
    for series in ("batch", "tokens"):
        for m in MODELS:
            mine = sorted((r for r in rows if r.series == series and r.model == m), key=lambda r: r.n)
            if len(mine) < 2:
                continue
            upper = upper_half([r.n for r in mine])
            chosen = [r for r in mine if r.n in upper]
            ts = slope([r.n for r in chosen], [r.time_ms for r in chosen])
            ms = slope([r.n for r in chosen], [r.mem_mb for r in chosen])
            for r in mine:
                r.time_slope, r.mem_slope, r.fit_from_n = ts, ms, upper[0]
    main = {(r.model, r.n): r for r in rows if r.series == "batch"}
    ns = sorted({n for _, n in main})
    for other, suffix in (("transformer", ""), ("transformer_p0", "_p0")):
        if not all((m, n) in main for m in ("lstm", other) for n in ns):
            continue
        for what, field in (("time_ms", "time"), ("mem_mb", "mem")):
            found = _joined(crossovers(ns, *[[getattr(main[m, n], what) for n in ns] for m in ("lstm", other)]))
            for r in rows:
                setattr(r, f"{field}_crossover{suffix}_n", found)
    return rows


def _crossing_sentence(what: str, name: str, ns: list[int], a: list[float], b: list[float]) -> str:
    """One line: where the LSTM (a) and the Transformer called `name` (b) cross in `what`, or that they
    never do."""
    found = crossovers(ns, a, b)
    if not found:
        lower = "LSTM" if a[0] < b[0] else name
        return (f"{what}, LSTM vs {name}: no crossover in [{ns[0]}, {ns[-1]}]; the {lower} is lower throughout "
                f"(ratio {min(x / y for x, y in zip(a, b)):.2f} ... {max(x / y for x, y in zip(a, b)):.2f})")
    first = "LSTM" if a[0] > b[0] else name  # the one that costs more below the first crossing
    other = name if first == "LSTM" else "LSTM"
    where = ", ".join(f"n = {v:.0f}" for v in found)
    return (f"{what}, LSTM vs {name}: crossover at {where} (interpolated in log-log between the measured "
            f"lengths); below {found[0]:.0f} the {first} costs more, above {found[0]:.0f} the {other}"
            + ("" if len(found) == 1 else " (the order changes again later: noise or a real bend, see the table)"))


CPU_CAVEAT = (
    "What this machine can and cannot show: the tutorial's claim is that an RNN must wait for the previous "
    "step while a Transformer computes all positions at once, so on parallel hardware (a GPU with "
    "thousands of lanes) the Transformer's wall time per step stays nearly flat in n until the device "
    "fills, while the RNN's grows with n whatever the hardware. With {threads} CPU thread(s) there is "
    "almost no parallel hardware to leave idle: both models' times follow their arithmetic (the "
    "Transformer's O(n^2) attention, the LSTM's O(n) cells), so the table shows the complexity claim, not "
    "the parallelism one. What the CPU does show is the price of the recurrence itself: at a fixed number "
    "of tokens the LSTM does the same arithmetic at every n, and any rise of its time with n (slope > 0 "
    "above) is the cost of n steps that must run one after another, each too small to use the machine "
    "well. The parallel half of the claim needs --device cuda."
)


def report(rows: list[Row]) -> list[str]:
    main = {(r.model, r.n): r for r in rows if r.series == "batch"}
    ns = sorted({n for _, n in main})
    col = {m: [main[m, n] for n in ns] for m in MODELS}
    lines = [f"{'n':>6}" + "".join(f"{SHORT[m] + ' ms':>12}" for m in MODELS) + f"{'LSTM/Tr.':>10}"
             + "".join(f"{SHORT[m] + ' MB':>12}" for m in MODELS) + f"{'LSTM/Tr.':>10}"]
    for i, n in enumerate(ns):
        a, b = col["lstm"][i], col["transformer"][i]
        lines.append(f"{n:>6}" + "".join(f"{col[m][i].time_ms:>12.2f}" for m in MODELS) + f"{a.time_ms / b.time_ms:>10.2f}"
                     + "".join(f"{col[m][i].mem_mb:>12.2f}" for m in MODELS) + f"{a.mem_mb / b.mem_mb:>10.2f}")
    lines += ["", f"log-log slope over n >= {col['lstm'][0].fit_from_n} (the upper half; O(n) has slope 1, O(n^2) slope 2):"]
    for m in MODELS:
        lines.append(f"  {LABELS[m]:<25} time {col[m][0].time_slope:.2f}, memory {col[m][0].mem_slope:.2f}")
    lines += ["", "crossover, measured:"]
    for m in MODELS[1:]:
        for what, field in (("time", "time_ms"), ("memory", "mem_mb")):
            lines.append("  " + _crossing_sentence(what, LABELS[m], ns, [getattr(r, field) for r in col["lstm"]],
                                                   [getattr(r, field) for r in col[m]]))
    serial = sorted((r for r in rows if r.series == "tokens"), key=lambda r: r.n)
    if serial:
        tokens = serial[-1].batch * serial[-1].n
        lines += ["", f"serial part: the LSTM at a fixed {tokens} tokens per step (batch x n), the same arithmetic at every n:",
                  f"{'n':>6}{'batch':>8}{'ms/step':>12}{'us/token':>12}"]
        for r in serial:
            lines.append(f"{r.n:>6}{r.batch:>8}{r.time_ms:>12.2f}{1e3 * r.time_ms / (r.batch * r.n):>12.3f}")
        lines.append(f"  slope of time against n over n >= {serial[0].fit_from_n}: {serial[0].time_slope:.2f} "
                     "(0: the recurrence costs nothing beyond its arithmetic; 1: time grows with the serial steps)")
    lines += ["", CPU_CAVEAT.format(threads=rows[0].threads) if rows[0].device == "cpu" else
              "On a GPU the Transformer can compute all n positions at once while the LSTM's n steps run one after "
              "another: the time columns and the serial part above are the serial-vs-parallel claim, measured."]
    return lines


def run(args: argparse.Namespace) -> int:
    """`ablate bench rnn`: measure, print the table, slopes, crossovers and the serial part; --csv."""
    try:
        lengths = parse_lengths(args.lengths)
    except ValueError as err:
        print(f"ablate: {err}", file=sys.stderr)
        return 2
    if args.csv and Path(args.csv).is_dir():
        print(f"ablate: --csv {args.csv} is a folder; give a file path such as {Path(args.csv) / 'rnn_cost.csv'}",
              file=sys.stderr)
        return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    params = {m: sum(p.numel() for p in build_model(m, lengths[0]).parameters()) for m in MODELS}
    print(
        f"ablate bench rnn: one training step (forward+backward+Adam) of a TokenModel on copy-task batches, "
        f"batch {args.batch_size}, d_model {TUTORIAL.d_model}, {TUTORIAL.n_layers} layers, dropout "
        f"{TUTORIAL.dropout:g} (Tr. p=0: 0); LSTM {params['lstm']:,} parameters (hidden "
        f"{build_model('lstm', 2).encoder.hidden}, no positions), Transformer {params['transformer']:,} at n = "
        f"{lengths[0]} (+{TUTORIAL.d_model} per position of its learned table)\ndevice {device}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}; median of {args.repeats} interleaved "
        f"rounds x {args.steps} steps after {args.warmup} warm-up; memory: "
        + ("torch's CPU allocator peak during one step (torch.profiler allocation events), above the "
           "weights, Adam state and batch" if device.type == "cpu" else
           "torch.cuda.max_memory_allocated during one step, above the weights, Adam state and batch"),
        flush=True,
    )
    rows = measure(lengths, args.batch_size, args.steps, args.repeats, args.warmup, device,
                   progress=lambda s: print(s, file=sys.stderr, flush=True))
    print("\n".join(report(rows)), flush=True)
    if args.csv:
        try:
            atomic_write(Path(args.csv), to_csv(rows))
        except OSError as err:
            print(f"ablate: cannot write {args.csv}: {err.strerror}; choose a writable path (the table is printed above)",
                  file=sys.stderr)
            return 1
        print(f"wrote {args.csv}")
    return 0
