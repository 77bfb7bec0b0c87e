"""How much memory a configuration needs, from the config alone, and whether this machine has it.

`ablate train model.n_layers=1e30` used to allocate until the kernel's OOM killer ended it, and
`model.d_model=1e5` or `data.n_train=1e9` ended in allocator tracebacks after the run directory
was written. `check_fits(cfg)` refuses such a run first, in `ablate.config.build` (so `ablate sweep
--dry-run` sees it too), with the estimate and the limit in one line. It costs a few integer
operations: no torch allocation, no CUDA initialisation.

The estimate is deliberately simple and on the generous side:
- parameters: the closed-form count of the model `ablate.tasks` builds (a test checks it equals
  `sum(p.numel())` of the built model), times 4 float32 copies (weights, gradients, Adam's two
  moments), plus the positional tables kept as buffers;
- activations: what one training batch keeps for the backward pass (every layer's inputs, the
  (B, heads, T, T) scores, softmax and dropout mask, the FFN's hidden units), or one no-grad
  evaluation chunk of the probes, whichever is larger;
- data: the in-memory data sets, as the task's registry entry says (`data_bytes`: MNIST's 70,000
  images; a synthetic task's n x seq_len int64 tokens, inputs and targets, with their temporaries).
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .registry import spec

if TYPE_CHECKING:
    from .config import Config

FLOAT = 4  # bytes of a float32
EVAL_CHUNK = 1000  # largest evaluation batch the probes use (ablate.probing); loaders use batch_size
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


def parameter_count(cfg: Config) -> int:
    """Parameters of the model `ablate.tasks` builds for `cfg`: input embedding, encoder, head."""
    m, data = cfg.model, cfg.data
    d, inner, ffn = m.d_model, m.n_heads * m.head_dim, m.ffn_mult * m.d_model
    norm = 2 * d if m.norm != "none" else 0  # one LayerNorm (weight, bias) per sub-layer
    attention = d * 3 * inner + 3 * inner + inner * d + d + norm  # W_QKV, W_O with biases
    feed_forward = (d * ffn + ffn + ffn * d + d + norm) if m.ffn_mult > 0 else 0
    encoder = m.n_layers * (attention + feed_forward)
    encoder += 2 * d if m.norm == "pre" else 0  # the final LayerNorm of a Pre-LN stack
    encoder += m.max_len * d if m.pos_enc == "learned" else 0
    sizes = spec(data.task).model_sizes(data)
    if "in_features" in sizes:  # Linear(in_features, d) embedding, optional CLS token, Linear(d, n_classes) head
        n_in, n_out = sizes["in_features"], sizes["n_classes"]
        return n_in * d + d + (d if cfg.pooling == "cls" else 0) + encoder + d * n_out + n_out
    # Embedding(n_tokens, d), Linear(d, n_out) head
    return sizes["n_tokens"] * d + encoder + d * sizes["n_out"] + sizes["n_out"]


def _buffer_floats(cfg: Config) -> int:
    """Positional tables held as buffers (built with about as much again in temporaries)."""
    m = cfg.model
    if m.pos_enc == "sinusoidal":
        return 2 * m.max_len * m.d_model
    if m.pos_enc == "rope":
        return 2 * 2 * m.max_len * (m.head_dim // 2)  # cos and sin
    return 0


def _seq_len(cfg: Config) -> int:
    return cfg.data.seq_len() + (1 if cfg.pooling == "cls" else 0)


def _train_examples(cfg: Config) -> int:
    return spec(cfg.data.task).train_examples(cfg.data)


def activation_bytes(cfg: Config) -> int:
    """One training batch kept for backward, or one no-grad evaluation chunk: the larger."""
    m = cfg.model
    T, d, h = _seq_len(cfg), m.d_model, m.n_heads
    inner, ffn = h * m.head_dim, m.ffn_mult * m.d_model
    scores = h * T * T  # (heads, T, T) per example
    attention = T * (6 * d + 8 * inner) + 3 * scores  # inputs, q/k/v, output; scores, softmax, mask
    feed_forward = T * (5 * d + 4 * ffn) if m.ffn_mult > 0 else 0
    task = spec(cfg.data.task)
    sizes = task.model_sizes(cfg.data)
    n_out = sizes.get("n_classes", sizes.get("n_out", 0))
    head = T * 4 * d + 3 * (T if task.kind == "tokens" else 1) * n_out  # embedding, logits and grads
    per_example = m.n_layers * (attention + feed_forward) + head
    batch = min(cfg.data.batch_size, _train_examples(cfg))
    train = batch * per_example
    # evaluation: no graph kept, one layer's tensors at a time, plus every layer's attention maps
    # when a probe asks for them
    evaluate = max(EVAL_CHUNK, cfg.data.batch_size) * (attention + feed_forward + head + m.n_layers * scores)
    return FLOAT * max(train, evaluate)


def data_bytes(cfg: Config) -> int:
    return spec(cfg.data.task).data_bytes(cfg.data)


def estimate(cfg: Config) -> Estimate:
    params = parameter_count(cfg)
    return Estimate(
        parameters=params,
        model_bytes=4 * FLOAT * params + FLOAT * _buffer_floats(cfg),
        activation_bytes=activation_bytes(cfg),
        data_bytes=data_bytes(cfg),
    )


def host_memory() -> int | None:
    """Bytes of memory available to a new allocation now: psutil, else /proc/meminfo."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - psutil missing or unable to read; try the kernel's table
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


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
    import torch

    if accelerator in ("cuda", "gpu"):
        return True
    return accelerator == "auto" and torch.cuda.is_available()


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


def check_fits(cfg: Config, keys: str, host: int | None = None, device: int | None = None) -> str | None:
    """The one-line problem if `cfg` cannot fit in this machine's memory, else None.

    `keys` names the settings that sized it, for the message. `host` and `device` are the limits
    in bytes (None: measured now; the device limit only when training resolves to a GPU)."""
    est = estimate(cfg)
    on_gpu = trains_on_gpu(cfg.trainer.accelerator)
    host = host_memory() if host is None else host
    if on_gpu:
        device = gpu_memory() if device is None else device
        if device is not None and est.device_bytes > device:
            return (f"the model needs about {size(est.device_bytes)} of GPU memory for parameters and "
                    f"activations ({keys}), over the {size(device)} this GPU has; make it smaller")
        need = est.data_bytes + FLOAT * est.parameters  # the model is built on the CPU first
    else:
        need = est.data_bytes + est.device_bytes
    if host is not None and need > host:
        parts = (f"data {size(est.data_bytes)}, model {size(est.model_bytes if not on_gpu else FLOAT * est.parameters)}"
                 + ("" if on_gpu else f", activations {size(est.activation_bytes)}"))
        return (f"the run needs about {size(need)} of memory ({parts}; {keys}), over the "
                f"{size(host)} this machine has available; make it smaller")
    return None

