"""`ablate bench gpus`: aggregate training steps/s of 1, 4 and 16 runs at once on one GPU.

What `ablate sweep --runs-per-gpu N` relies on: a tutorial-size model leaves a data-centre GPU mostly
idle, so N runs side by side should finish more steps per second in all than one. Each run here is
what a sweep worker is: its own process with its own CUDA context, training the tutorial's model
(ablate's SequenceClassifier, d_model 64, 4 heads, 2 layers, 28 x 28 inputs, Adam 1e-3) on random
batches held on the GPU (no data loading: the GPU's side only). Every process warms up, then waits;
all are released at once, each times `--steps` steps, and the aggregate is all their steps over the
span from the first start to the last end.

Without CUDA there is nothing to measure: one line says so and the command exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

COUNTS = (1, 4, 16)  # runs at once on the GPU
READY_TIMEOUT_S = 600  # building the model and warming up, per batch of runs
RUN_TIMEOUT_S = 3600  # the timed steps of one run


@dataclass(frozen=True)
class Result:
    runs: int
    steps_per_s: float  # all runs' steps over the span from the first start to the last end
    per_run: float  # the median run's own steps/s
    memory_mb: float  # the largest run's peak reserved memory (torch's allocator), MB
    error: str = ""  # why the measurement failed (e.g. out of memory at 16 runs)


def _worker(steps: int, warmup: int, batch_size: int, device: str, threads: int) -> None:
    """One run: build, warm up, say 'ready', wait for a line on stdin, time `steps` steps, print JSON."""
    import torch
    import torch.nn.functional as F

    from .speed import Shape, _ablate_model

    torch.set_num_threads(threads)
    dev = torch.device(device)
    shape = Shape()
    torch.manual_seed(0)
    model = _ablate_model(shape, 0.1).to(dev).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [(torch.randn(batch_size, shape.seq_len, shape.in_features, device=dev),
                torch.randint(shape.n_classes, (batch_size,), device=dev)) for _ in range(8)]

    def train(n: int) -> None:
        for i in range(n):
            x, y = batches[i % len(batches)]
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    train(warmup)
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    train(steps)
    end = time.monotonic()
    memory = torch.cuda.max_memory_reserved(dev) / 1e6 if dev.type == "cuda" else 0.0
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print(json.dumps({"start": start, "end": end, "steps": steps, "memory_mb": memory, "device": name}), flush=True)


def measure_once(n: int, steps: int, warmup: int, batch_size: int, device: str = "cuda",
                 threads: int = 1) -> tuple[Result, list[dict]]:
    """`n` runs at once, each its own process; their aggregate and per-run steps/s."""
    from ..sweep.worker import die_with_parent

    command = [sys.executable, "-m", "ablate.bench.packing", "--worker", str(steps), str(warmup), str(batch_size),
               device, str(threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    procs = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, preexec_fn=die_with_parent) for _ in range(n)]
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S  # a worker stuck before warm-up ends (CUDA init) must not hang us
        ready = []
        for p in procs:
            waiting, _, _ = select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))
            ready.append(bool(waiting) and p.stdout.readline().strip() == "ready")
        if not all(ready):  # the finally below ends them all
            return Result(n, 0.0, 0.0, 0.0, error=f"{ready.count(False)} of {n} runs not ready within "
                                                  f"{READY_TIMEOUT_S} s (or ended before)"), []
        for p in procs:  # released together: the timed windows overlap
            p.stdin.write("go\n")
            p.stdin.flush()
        reports = []
        errors = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                errors.append(f"no report within {RUN_TIMEOUT_S} s")
                continue
            line = out.strip().splitlines()[-1] if out.strip() else ""
            if p.returncode != 0 or not line.startswith("{"):
                last = [x for x in err.strip().splitlines() if x.strip()]
                errors.append(last[-1] if last else f"exited with status {p.returncode}")
            else:
                reports.append(json.loads(line))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if errors:
        return Result(n, 0.0, 0.0, 0.0, error=errors[0]), reports
    return aggregate(n, reports), reports


def aggregate(n: int, reports: list[dict]) -> Result:
    """All runs' steps over the span from the first start to the last end; the median run's rate."""
    span = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    total = sum(r["steps"] for r in reports)
    per_run = statistics.median(r["steps"] / (r["end"] - r["start"]) for r in reports)
    return Result(n, total / span, per_run, max(r["memory_mb"] for r in reports))


def table(results: list[Result]) -> list[str]:
    base = next((r.steps_per_s for r in results if r.runs == 1 and not r.error), None)
    lines = [f"{'runs on the GPU':<16}{'steps/s, all runs':>20}{'steps/s, one run':>20}{'x one run alone':>18}"
             f"{'peak MB a run':>16}"]
    for r in results:
        if r.error:
            lines.append(f"{r.runs:<16}failed: {r.error}")
            continue
        gain = f"{r.steps_per_s / base:.2f}" if base else "n/a"
        lines.append(f"{r.runs:<16}{r.steps_per_s:>20.0f}{r.per_run:>20.0f}{gain:>18}{r.memory_mb:>16.0f}")
    return lines


def run(args: argparse.Namespace) -> int:
    """`ablate bench gpus`: exit 0 measured, 1 a count failed (its error shown), 2 no CUDA here."""
    import torch

    if not torch.cuda.is_available():
        print("ablate: bench gpus needs a CUDA GPU and torch sees none here; run it on a GPU machine "
              "(docs/sweeps.md: On GPU machines)", file=sys.stderr)
        return 2
    threads = args.threads or 1
    results, device = [], "cuda"
    for n in COUNTS:
        tries = []
        for _ in range(max(1, args.repeats)):
            result, reports = measure_once(n, args.steps, args.warmup, args.batch_size, "cuda", threads)
            device = reports[0]["device"] if reports else device
            tries.append(result)
            if result.error:
                break
        good = [t for t in tries if not t.error]
        results.append(max(good, key=lambda t: t.steps_per_s) if len(good) == len(tries) else tries[-1])
        print(f"  {n} runs: {results[-1].steps_per_s:.0f} steps/s" if not results[-1].error
              else f"  {n} runs: failed: {results[-1].error}", file=sys.stderr, flush=True)
    print(f"ablate bench gpus: {device}, torch {torch.__version__}; the tutorial's model (d_model 64, 4 heads, "
          f"2 layers, 28x28 inputs), batch {args.batch_size}, Adam; each run its own process and CUDA context, "
          f"{threads} thread(s); {args.steps} timed steps a run after {args.warmup} warm-up steps, best of "
          f"{max(1, args.repeats)}")
    print("\n".join(table(results)), flush=True)
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--worker":
        _worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
    else:
        sys.exit("usage: python -m ablate.bench.packing --worker STEPS WARMUP BATCH DEVICE THREADS")
