"""How much memory a configuration needs, from the config alone, and whether this machine has it.

`ablate train model.n_layers=1e30` used to allocate until the kernel's OOM killer ended it, and
`model.d_model=1e5` or `data.n_train=1e9` ended in allocator tracebacks after the run directory
was written. `check_fits(cfg)` refuses such a run first, in `ablate.config.build` (so `ablate sweep
--dry-run` sees it too), with the estimate and the limit in one line. No memory is allocated and CUDA
is not initialised.

The model is the only statement of its architecture: its parameters and buffers are counted on the
model itself, built on torch's meta device (`ablate.models.meta`: shapes only, each distinct model once,
any depth in two small builds; `ablate.models.size` keeps each count on disk, so that a command checking
models counted before imports no torch). What the model cannot say is estimated here, on the generous side:
- memory of the parameters: 4 float32 copies (weights, gradients, Adam's two moments), plus the buffers
  (positional tables, built with about as much again in temporaries);
- activations: what one training batch keeps for the backward pass (every layer's inputs, the
  (B, heads, T, T) scores, softmax and dropout mask, the FFN's hidden units), or one no-grad
  evaluation chunk of the probes, whichever is larger; a recurrent model's (model.arch=lstm/gru) are
  every layer's per-position state and gate buffers (RNN_SAVED: torch's own saved tensors, measured
  on CPU, a test holds the estimate within RNN_TOLERANCE of them);
- data: the in-memory data sets, as the task's registry entry says (`data_bytes`: MNIST's 70,000
  images; a synthetic task's n x seq_len int64 tokens, inputs and targets, with their temporaries).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .registry import spec

Config = Any  # ablate.config.Config (imported by it: no import back)

FLOAT = 4  # bytes of a float32
# What one training step keeps for backward per position of one recurrent layer, in floats per hidden unit
# and per input feature: torch's saved tensors for nn.LSTM/nn.GRU on CPU (the LSTM's oneDNN workspace is
# most of its part), rounded up from measurements at d_in 16..128, h 64..128
RNN_SAVED = {"lstm": (18, 8), "gru": (9, 1)}
# estimate / measured saved activations of a whole recurrent model (a test, batch 1000 on CPU): measured
# 1.38 to 1.63 (dropout masks, the head's share generous), as the Transformer's (1.59 to 1.63 at dropout 0.1)
RNN_TOLERANCE = (1.0, 1.75)
EVAL_CHUNK = 1000  # largest evaluation batch the probes use (ablate.probing); loaders use batch_size
# what one such chunk may take at once: fewer examples per chunk where they are long (a copy of length 255
# needs 13 MB an example, so 1000 of them refused every such run whatever its batch size). The sweeps'
# largest is 3.7 GB (recall_transformer_256), so every sweep keeps chunks of EVAL_CHUNK and its numbers.
EVAL_BYTES = 4 * 10**9
GB = 1e9


@dataclass(frozen=True)
class Estimate:
    parameters: int  # trained parameters of the whole model
    model_bytes: int  # parameters, gradients, optimiser state and buffers
    activation_bytes: int  # one training batch (or one evaluation chunk), the larger
    data_bytes: int  # the in-memory data sets (host memory)

    @property
    def device_bytes(self) -> int:
        """What must fit where the model trains."""
        return self.model_bytes + self.activation_bytes


def _recurrent(cfg: Config) -> bool:
    return cfg.model.arch != "transformer"


def model_size(cfg: Config, sizes: dict[str, int] | None = None):
    """Parameters and buffer elements of the model `ablate.tasks` builds for `cfg`, read from the model
    itself on torch's meta device (ablate.models.meta; nothing allocated, each model built once) or its
    count kept on disk (ablate.models.size). `sizes`: the model sizes (in_features/n_classes or
    n_tokens/n_out) a checkpoint saved, else those `cfg.data` gives. TooLarge (a ValueError) where a tensor's shape overflows torch's 64-bit sizes."""
    from .models.size import model_size as counted  # imports no torch

    sizes = spec(cfg.data.task).model_sizes(cfg.data) if sizes is None else sizes
    return counted(cfg.encoder, sizes, cfg.pooling)


def parameter_count(cfg: Config, sizes: dict[str, int] | None = None) -> int:
    """Parameters of the model `ablate.tasks` builds for `cfg` (model_size)."""
    return model_size(cfg, sizes).parameters


def rnn_hidden(m) -> int:
    """The recurrent stack's hidden size: model.rnn_hidden, else the one the model matches (ablate.models.rnn),
    kept on disk as the model's size is (ablate.models.size)."""
    from .models.size import matched_hidden

    return m.rnn_hidden if m.rnn_hidden is not None else matched_hidden(m)


def _seq_len(cfg: Config) -> int:
    return cfg.data.seq_len() + (1 if cfg.pooling == "cls" else 0)


def _train_examples(cfg: Config) -> int:
    return spec(cfg.data.task).train_examples(cfg.data)


def _head_floats(cfg: Config, width: int) -> int:
    """The embedding's output and gradient (d_model), what the head reads (width), logits and grads."""
    task = spec(cfg.data.task)
    sizes = task.model_sizes(cfg.data)
    n_out = sizes.get("n_classes", sizes.get("n_out", 0))
    T, d = _seq_len(cfg), cfg.model.d_model
    return T * (2 * d + 2 * width) + 3 * (T if task.kind == "tokens" else 1) * n_out


def _per_example(cfg: Config) -> tuple[int, int]:
    """(floats one training example keeps for backward, floats one evaluation example needs at once)."""
    m = cfg.model
    T, d = _seq_len(cfg), m.d_model
    if _recurrent(cfg):
        from .models.config import RNN_GATES

        h, gates = rnn_hidden(m), RNN_GATES[m.arch]
        per_h, per_in = RNN_SAVED[m.arch]
        layers = T * (per_h * h + per_in * d) + (m.n_layers - 1) * T * (per_h * h + per_in * h)
        layers += (m.n_layers - 1) * T * 2 * h  # dropout between layers: its output and mask
        # evaluation: no graph, one layer at a time (its input, gates, state and output)
        return layers + _head_floats(cfg, h), T * (max(d, h) + (gates + 2) * h) + _head_floats(cfg, h)
    h = m.n_heads
    inner, ffn = h * m.head_dim, m.ffn_mult * m.d_model
    scores = h * T * T  # (heads, T, T) per example
    attention = T * (6 * d + 8 * inner) + 3 * scores  # inputs, q/k/v, output; scores, softmax, mask
    feed_forward = T * (5 * d + 4 * ffn) if m.ffn_mult > 0 else 0
    task = spec(cfg.data.task)
    sizes = task.model_sizes(cfg.data)
    n_out = sizes.get("n_classes", sizes.get("n_out", 0))
    head = T * 4 * d + 3 * (T if task.kind == "tokens" else 1) * n_out  # embedding, logits and grads
    # evaluation: no graph kept, one layer's tensors at a time, plus every layer's attention maps
    # when a probe asks for them
    return m.n_layers * (attention + feed_forward) + head, attention + feed_forward + head + m.n_layers * scores


def eval_chunk(cfg: Config) -> int:
    """Examples per chunk of the probes' passes over a whole split: EVAL_CHUNK, or fewer where one chunk would
    take more than EVAL_BYTES (at least one)."""
    _, evaluate = _per_example(cfg)
    return max(1, min(EVAL_CHUNK, EVAL_BYTES // (FLOAT * evaluate)))


def activation_bytes(cfg: Config) -> int:
    """One training batch kept for backward, or one no-grad evaluation chunk: the larger."""
    train, evaluate = _per_example(cfg)
    batch = min(cfg.data.batch_size, _train_examples(cfg))
    return FLOAT * max(batch * train, max(eval_chunk(cfg), cfg.data.batch_size) * evaluate)


def data_bytes(cfg: Config) -> int:
    return spec(cfg.data.task).data_bytes(cfg.data)


_ESTIMATES: dict[tuple, Estimate] = {}  # (model, data, pooling) -> its estimate: a sweep's seeds share one


def estimate(cfg: Config) -> Estimate:
    """TooLarge (a ValueError, one line) where the model's shapes overflow torch's sizes. It depends on the
    model, the data and the pooling alone, so it is computed once for the configurations that share them (a
    sweep expands to many: it was a fifth of building each)."""
    key = (cfg.model, cfg.data, cfg.pooling)
    found = _ESTIMATES.get(key)
    if found is None:
        built = model_size(cfg)
        found = Estimate(
            parameters=built.parameters,
            model_bytes=4 * FLOAT * built.parameters + FLOAT * 2 * built.buffers,  # tables built with temporaries
            activation_bytes=activation_bytes(cfg),
            data_bytes=data_bytes(cfg),
        )
        if len(_ESTIMATES) >= 4096:
            _ESTIMATES.clear()
        _ESTIMATES[key] = found
    return found


@dataclass(frozen=True)
class HostLimit:
    available: int  # bytes a new allocation may still take
    where: str  # what sets it, as the message names it: "this machine has available", "... (ulimit -v N)"
    raisable: bool = False  # a limit put on this process (ulimit, cgroup), not the machine's memory


def _kb_field(path: Path, name: str) -> int | None:
    """`name:  N kB` of a /proc table, in bytes."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _int_file(path: Path) -> int | None:
    """A cgroup file holding one number; None for "max", a missing or unreadable file."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _stat_field(path: Path, name: str) -> int:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


NO_CGROUP_LIMIT = 2**62  # cgroup v1's "unlimited" is 9223372036854771712 (LONG_MAX rounded to a page)
# (cgroup version: files of the limit, the usage, and the reclaimable page cache in memory.stat)
CGROUP_FILES = {2: ("memory.max", "memory.current", "inactive_file"),
                1: ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")}


def _cgroup_limits(cgroup: Path, root: Path) -> list[HostLimit]:
    """What the memory limit of this process's cgroup, and of each one above it, leaves: the limit less the
    usage, the inactive page cache (reclaimed before an allocation fails) not counted as used."""
    try:
        lines = cgroup.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hierarchy == "0" and controllers == "":
            version, base = 2, root
        elif "memory" in controllers.split(","):
            version, base = 1, root / "memory"
        else:
            continue
        limit_file, usage_file, cache = CGROUP_FILES[version]
        relative = Path(path.lstrip("/"))
        for folder in (base / d for d in (relative, *relative.parents)):  # a container sees its own at the mount
            limit = _int_file(folder / limit_file)
            if limit is None or limit >= NO_CGROUP_LIMIT:
                continue
            used = max(0, (_int_file(folder / usage_file) or 0) - _stat_field(folder / "memory.stat", cache))
            out.append(HostLimit(max(0, limit - used), f"its cgroup may still use (the {size(limit)} "
                                 f"{limit_file} of {folder})", raisable=True))
    return out


def _address_limit() -> int | None:
    """The soft RLIMIT_AS (`ulimit -v`, in bytes), None where unlimited or unknown (no `resource`: Windows)."""
    try:
        import resource
    except ImportError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def host_limit(*, meminfo: Path | str = "/proc/meminfo", status: Path | str = "/proc/self/status",
               cgroup: Path | str = "/proc/self/cgroup", cgroup_root: Path | str = "/sys/fs/cgroup",
               address_limit: int | None = None) -> HostLimit | None:
    """The tightest of the limits on a new allocation now, and what sets it: the machine's MemAvailable (psutil
    where /proc/meminfo is not there), this process's address-space limit (`ulimit -v`: the soft RLIMIT_AS less
    the VmSize already mapped) and its cgroup's memory limit (v2 memory.max or v1 memory.limit_in_bytes, less
    the usage). None when nothing says. The paths and `address_limit` (bytes; negative: unlimited; None: this
    process's) are the kernel's, for tests to point elsewhere."""
    candidates: list[HostLimit] = []
    available = _kb_field(Path(meminfo), "MemAvailable")
    if available is None:
        try:
            import psutil

            available = int(psutil.virtual_memory().available)
        except Exception:  # noqa: BLE001 - psutil missing or unable to read
            available = None
    if available is not None:
        candidates.append(HostLimit(available, "this machine has available"))
    soft = _address_limit() if address_limit is None else (address_limit if address_limit >= 0 else None)
    if soft is not None:
        mapped = _kb_field(Path(status), "VmSize") or 0
        candidates.append(HostLimit(max(0, soft - mapped), "this process may still map under its address-space "
                                    f"limit (ulimit -v {soft // 1024})", raisable=True))
    candidates += _cgroup_limits(Path(cgroup), Path(cgroup_root))
    return min(candidates, key=lambda c: c.available, default=None)


HOST_FRESH_S = 1.0  # an answer of host_limit() younger than this is used again (check_fits, for each config)
_host_seen: tuple | None = None  # (the host_limit asked, when, its answer)


def recent_host_limit() -> HostLimit | None:
    """host_limit() as it was at most HOST_FRESH_S ago: a sweep's expansion checks every configuration, and
    reading /proc and the cgroup files for each was a quarter of building one."""
    global _host_seen
    now = time.monotonic()
    if _host_seen is not None and _host_seen[0] is host_limit and now - _host_seen[1] < HOST_FRESH_S:
        return _host_seen[2]
    answer = host_limit()
    _host_seen = (host_limit, now, answer)
    return answer


def host_memory() -> int | None:
    """Bytes of memory available to a new allocation now (the tightest limit of `host_limit`)."""
    limit = host_limit()
    return None if limit is None else limit.available


@functools.cache  # a sweep builds every configuration: ask once
def gpu_memory() -> int | None:
    """Total memory of the smallest visible GPU, without initialising CUDA in this process
    (Lightning's ddp_fork and ddp_notebook refuse to start after that): torch's own numbers if
    CUDA is already initialised, else nvidia-smi; None if neither answers."""
    import torch

    if torch.cuda.is_initialized():
        return min(torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count()))
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout
        sizes = [int(float(line)) * 2**20 for line in out.split() if line.strip()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return min(sizes) if sizes else None


def trains_on_gpu(accelerator: str) -> bool:
    """Whether `trainer.accelerator` resolves to a GPU here (auto picks CUDA when it is there)."""
    if accelerator in ("cuda", "gpu"):
        return True
    if accelerator != "auto" or (sys.platform.startswith("linux") and not gpu_device_files()):
        return False  # known without torch, which costs seconds to import (a sweep's command need not)
    import torch

    return torch.cuda.is_available()


GPU_DRIVER_FILES = ("/proc/driver/nvidia", "/sys/module/nvidia", "/dev/nvidiactl", "/dev/nvhost-ctrl-gpu", "/dev/nvgpu",
                    "/dev/kfd", "/dev/dxg")  # NVIDIA's driver (loaded, or Jetson's), ROCm's, WSL 2's


@functools.cache  # asked for every configuration a sweep builds, each a glob of /dev
def gpu_device_files() -> bool:
    """Whether this machine has a GPU driver's files: NVIDIA's (its module loaded, /dev/nvidia0.., Jetson's
    /dev/nvhost-*), ROCm's /dev/kfd, WSL 2's /dev/dxg. On Linux, without any torch finds no GPU. Looked at
    once per process (a driver loaded, or its /dev files made, after the first look is not seen by it)."""
    return any(Path(p).exists() for p in GPU_DRIVER_FILES) or any(Path("/dev").glob("nvidia[0-9]*"))


def size(n: float) -> str:
    """1234567890 -> '1.23 GB', 2.9e12 -> '2,900 GB'; astronomically large numbers as 1.2e+09 GB."""
    if n >= 1e6 * GB:
        return f"{n / GB:.2g} GB"
    if n >= 1e3 * GB:
        return f"{n / GB:,.0f} GB"
    for unit, scale in (("GB", GB), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} bytes"


# What one more DDP rank on this machine holds before any data: the interpreter with torch, Lightning and the
# data loaders imported (1.1 GB resident per rank measured on CPU, 4 ranks: 4.4 GB; issue 41)
RANK_PROCESS_BYTES = 1_100_000_000


def cores() -> int:
    """The cores this process may run on (its CPU affinity, which a cgroup or taskset narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_ranks(cfg: Config) -> int:
    """How many processes a run starts on this machine's CPU: trainer.devices on one CPU node, else 1."""
    t = cfg.trainer
    if trains_on_gpu(t.accelerator) or t.num_nodes != 1 or not t.devices.isdigit():
        return 1
    return int(t.devices)


def check_fits(cfg: Config, keys: str, host: int | None = None, device: int | None = None,
               limit: HostLimit | None = None) -> str | None:
    """The one-line problem if `cfg` cannot fit in this machine's memory, else None.

    `keys` names the settings that sized it, for the message. `host` and `device` are the limits
    in bytes (None: measured now; the device limit only when training resolves to a GPU); `limit`, a
    HostLimit, says what sets the host's (None: `host_limit()` now, unless `host` is given)."""
    try:
        est = estimate(cfg)
    except ValueError as err:  # models.size.TooLarge
        return f"{err} ({keys}); make it smaller"
    on_gpu = trains_on_gpu(cfg.trainer.accelerator)
    if host is not None:
        limit = HostLimit(host, "this machine has available")
    elif limit is None:
        limit = recent_host_limit()
    if on_gpu:
        device = gpu_memory() if device is None else device
        if device is not None and est.device_bytes > device:
            return (f"the model needs about {size(est.device_bytes)} of GPU memory for parameters and "
                    f"activations ({keys}), over the {size(device)} this GPU has; make it smaller")
        need = est.data_bytes + FLOAT * est.parameters  # the model is built on the CPU first
    else:
        need = est.data_bytes + est.device_bytes
    ranks = cpu_ranks(cfg)
    if ranks > 1:  # each rank a process of its own: its own data, model, activations, and interpreter
        need = ranks * need + (ranks - 1) * RANK_PROCESS_BYTES
    if limit is not None and need > limit.available:
        parts = (f"data {size(est.data_bytes)}, model {size(est.model_bytes if not on_gpu else FLOAT * est.parameters)}"
                 + ("" if on_gpu else f", activations {size(est.activation_bytes)}"))
        if ranks > 1:
            parts = f"{ranks} processes, each {parts} and about {size(RANK_PROCESS_BYTES)} of Python, torch and Lightning"
        return (f"the run needs about {size(need)} of memory ({parts}; {keys}), over the "
                f"{size(limit.available)} {limit.where}; make it smaller" + (", or raise the limit" if limit.raisable else ""))
    return None


def checkpoint_problem(cfg: Config, sizes: dict[str, int], keys: str, limit: HostLimit | None = None) -> str | None:
    """Why the model of a checkpoint's config `cfg` and model `sizes` (in_features/n_classes or n_tokens/n_out,
    saved beside it) must not be built here, in one line, else None: its weights and buffers (float32, what
    building it allocates) over the tightest host limit. Integer arithmetic only: nothing is allocated. `keys`
    names the settings that sized it; `limit`: None, `host_limit()` now."""
    try:
        built = model_size(cfg, sizes)
    except ValueError as err:  # models.size.TooLarge
        return f"{err} ({keys})"
    params, need = built.parameters, FLOAT * (built.parameters + 2 * built.buffers)
    limit = host_limit() if limit is None else limit
    if limit is not None and need > limit.available:
        return (f"its config builds a model of about {size(need)} ({params:,} parameters; {keys}), over the "
                f"{size(limit.available)} {limit.where}")
    return None
