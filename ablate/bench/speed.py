"""Training speed of three encoders that compute the same function, measured in one process.

`torch`  : `nn.TransformerEncoder` of `nn.TransformerEncoderLayer` (batch_first, no nested tensor)
`plain`  : `ReferenceEncoder`, the same Post-LN layer written directly (see reference.py)
`ablate` : `SequenceClassifier` with `EncoderConfig(pos_enc="none")`, every other toggle at its default

All three sit in the tutorial's model (Linear(28->64) embedding, encoder, mean pooling,
Linear(64->10)), start from the same weights (copied from the torch model), and train with Adam
1e-3 and cross-entropy on random data generated once. Each round runs every (encoder, dropout)
variant for `steps` timed steps, in an order that rotates from round to round, so drift and noise
on the machine hit every variant alike. The table reports each variant's median samples/s over
rounds, and each ratio is the median over rounds of the ratio within a round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ablate.models import Encoder, EncoderConfig, SequenceClassifier

from .reference import ReferenceEncoder, ReferenceLayer

ENCODERS = ("torch", "plain", "ablate")
DROPOUTS = (0.1, 0.0)


@dataclass(frozen=True)
class Shape:
    """The tutorial's MNIST model: 28 rows of 28 pixels, read as 28 tokens of 28 features."""

    seq_len: int = 28
    in_features: int = 28
    d_model: int = 64
    n_heads: int = 4
    ffn_mult: int = 2
    n_layers: int = 2
    n_classes: int = 10


class Classifier(nn.Module):
    """embed -> encoder -> mean over tokens -> head; the attribute names match SequenceClassifier."""

    def __init__(self, shape: Shape, encoder: nn.Module):
        super().__init__()
        self.embed = nn.Linear(shape.in_features, shape.d_model)
        self.encoder = encoder
        self.head = nn.Linear(shape.d_model, shape.n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, in) -> (B, n_classes)
        return self.head(self.encoder(self.embed(x)).mean(dim=1))


def _torch_model(shape: Shape, dropout: float) -> nn.Module:
    layer = nn.TransformerEncoderLayer(
        shape.d_model,
        shape.n_heads,
        dim_feedforward=shape.ffn_mult * shape.d_model,
        dropout=dropout,
        batch_first=True,
    )
    encoder = nn.TransformerEncoder(layer, shape.n_layers, enable_nested_tensor=False)
    return Classifier(shape, encoder)


def _plain_model(shape: Shape, dropout: float) -> nn.Module:
    encoder = ReferenceEncoder(
        shape.d_model, shape.n_heads, shape.ffn_mult * shape.d_model, shape.n_layers, dropout
    )
    return Classifier(shape, encoder)


def _ablate_model(shape: Shape, dropout: float) -> nn.Module:
    cfg = EncoderConfig(
        d_model=shape.d_model,
        n_heads=shape.n_heads,
        n_layers=shape.n_layers,
        ffn_mult=shape.ffn_mult,
        pos_enc="none",
        dropout=dropout,
    )
    return SequenceClassifier(cfg, shape.in_features, shape.n_classes)


BUILDERS: dict[str, Callable[[Shape, float], nn.Module]] = {
    "torch": _torch_model,
    "plain": _plain_model,
    "ablate": _ablate_model,
}

def _layer_pairs(src: nn.TransformerEncoderLayer, dst: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(destination, source) parameters of one layer, found through modules: `dst` is a ReferenceLayer
    or an ablate Block (its `attention`, `feed_forward` and `norms` accessors)."""
    if isinstance(dst, ReferenceLayer):
        attn, ffn, (norm1, norm2) = dst, dst, (dst.norm1, dst.norm2)
    else:
        attn, ffn, (norm1, norm2) = dst.attention, dst.feed_forward, dst.norms
    return [
        (attn.qkv.weight, src.self_attn.in_proj_weight),
        (attn.qkv.bias, src.self_attn.in_proj_bias),
        (attn.out.weight, src.self_attn.out_proj.weight),
        (attn.out.bias, src.self_attn.out_proj.bias),
        (ffn.fc1.weight, src.linear1.weight),
        (ffn.fc1.bias, src.linear1.bias),
        (ffn.fc2.weight, src.linear2.weight),
        (ffn.fc2.bias, src.linear2.bias),
        (norm1.weight, src.norm1.weight),
        (norm1.bias, src.norm1.bias),
        (norm2.weight, src.norm2.weight),
        (norm2.bias, src.norm2.bias),
    ]


def _layers(encoder: nn.Module) -> list[nn.Module]:
    return list(encoder.blocks if isinstance(encoder, Encoder) else encoder.layers)


@torch.no_grad()
def copy_from_torch(torch_model: nn.Module, model: nn.Module) -> None:
    """Copy the torch variant's weights into a "plain" or "ablate" variant; every parameter of `model`
    must receive one (strict, like load_state_dict)."""
    pairs = [
        (d, s)
        for part in ("embed", "head")
        for d, s in zip(getattr(model, part).parameters(), getattr(torch_model, part).parameters(), strict=True)
    ]
    for src, dst in zip(_layers(torch_model.encoder), _layers(model.encoder), strict=True):
        pairs += _layer_pairs(src, dst)
    missing = {id(p) for p in model.parameters()} - {id(d) for d, _ in pairs}
    if missing or len(pairs) != len({id(d) for d, _ in pairs}):
        raise ValueError(f"copy_from_torch: {len(missing)} parameters of {type(model).__name__} not mapped")
    for dst, src in pairs:
        dst.copy_(src)


def build_variants(shape: Shape, dropout: float, seed: int = 0) -> dict[str, nn.Module]:
    """The three encoders' models at `dropout`, all holding the torch model's initial weights."""
    torch.manual_seed(seed)
    models = {name: BUILDERS[name](shape, dropout) for name in ENCODERS}
    for name in ("plain", "ablate"):
        copy_from_torch(models["torch"], models[name])
    return models


class BenchInputError(ValueError):
    """A benchmark option that cannot be run as given: `ablate bench` prints its one line and exits 2."""


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise BenchInputError("--device cuda was asked for but CUDA is not available here; use --device cpu "
                              "(or auto), or run on a machine with a GPU")
    return torch.device(name)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Trainer:
    """One variant's model, optimiser and a cursor over the shared batches."""

    def __init__(self, model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]):
        self.model = model.train()
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.batches = batches
        self.i = 0

    def run(self, steps: int) -> None:
        for _ in range(steps):
            x, y = self.batches[self.i % len(self.batches)]
            self.i += 1
            self.opt.zero_grad(set_to_none=True)
            F.cross_entropy(self.model(x), y).backward()
            self.opt.step()


def measure(
    steps: int = 10,
    repeats: int = 50,
    warmup: int = 10,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    shape: Shape | None = None,
    n_batches: int = 8,
    seed: int = 0,
) -> dict[tuple[str, float], list[float]]:
    """samples/s of every (encoder, dropout) for each of `repeats` interleaved rounds."""
    shape = shape or Shape()
    device = torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    batches = [
        (
            torch.randn(batch_size, shape.seq_len, shape.in_features, generator=gen).to(device),
            torch.randint(shape.n_classes, (batch_size,), generator=gen).to(device),
        )
        for _ in range(n_batches)
    ]
    trainers = {}
    for p in DROPOUTS:
        for name, model in build_variants(shape, p, seed).items():
            trainers[name, p] = Trainer(model.to(device), batches)
    keys = list(trainers)
    for key in keys:  # warm-up: allocator, kernel selection, Adam state; never timed
        trainers[key].run(warmup)
    _sync(device)
    rates: dict[tuple[str, float], list[float]] = {key: [] for key in keys}
    for r in range(repeats):
        for key in keys[r % len(keys) :] + keys[: r % len(keys)]:  # rotate who goes first
            _sync(device)
            t0 = time.perf_counter()
            trainers[key].run(steps)
            _sync(device)
            rates[key].append(steps * batch_size / (time.perf_counter() - t0))
    return rates


def paired_ratio(rates: dict[tuple[str, float], list[float]], a: str, b: str, p: float) -> float:
    """Median over rounds of a's samples/s over b's in the same round: noise that lasts a round
    or longer cancels, a burst that hits one variant's slot moves one of the many ratios."""
    return statistics.median(x / y for x, y in zip(rates[a, p], rates[b, p]))


def report(rates: dict[tuple[str, float], list[float]], header: str) -> list[str]:
    """The table, the ratios and, last, `ratio ablate/torch: <x>` at dropout 0."""
    med = {key: statistics.median(v) for key, v in rates.items()}
    cols = "".join(f"{f'dropout {p:g}':>24}" for p in DROPOUTS)
    lines = [header, "", f"{'samples/s: median [min-max]':<34}{cols}"]
    for name in ENCODERS:
        cells = "".join(
            f"{f'{med[name, p]:.0f} [{min(rates[name, p]):.0f}-{max(rates[name, p]):.0f}]':>24}"
            for p in DROPOUTS
        )
        lines.append(f"{name:<34}{cells}")
    lines += ["", f"{'ratio: median of per-round ratios':<34}{cols}"]
    for a, b in (("plain", "torch"), ("ablate", "torch"), ("ablate", "plain")):
        cells = "".join(f"{paired_ratio(rates, a, b, p):>24.3f}" for p in DROPOUTS)
        lines.append(f"{a + '/' + b:<34}{cells}")
    lines += ["", f"ratio ablate/torch: {paired_ratio(rates, 'ablate', 'torch', 0.0):.3f}"]
    return lines


def _load() -> str:
    return "n/a" if not hasattr(os, "getloadavg") else f"{os.getloadavg()[0]:.2f}"


def run(args: argparse.Namespace) -> int:
    """`ablate bench train`: measure, then print the table; the last line is the dropout-0 ratio."""
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    shape = Shape()
    load_before = _load()
    rates = measure(args.steps, args.repeats, args.warmup, args.batch_size, device, shape)
    header = (
        f"ablate bench train: device {device}, {torch.get_num_threads()} threads, torch {torch.__version__}\n"
        f"batch {args.batch_size}, {shape.seq_len}x{shape.in_features} inputs, d_model {shape.d_model}, "
        f"{shape.n_heads} heads, ffn {shape.ffn_mult * shape.d_model}, {shape.n_layers} layers, "
        "mean pooling, Adam 1e-3; forward+backward+optimizer step\n"
        f"{args.repeats} interleaved rounds x {args.steps} timed steps per variant "
        f"(after {args.warmup} warm-up steps each); 1-min load average {load_before} before, "
        f"{_load()} after (other work on the machine makes the numbers noisy)"
    )
    print("\n".join(report(rates, header)), flush=True)
    return 0
