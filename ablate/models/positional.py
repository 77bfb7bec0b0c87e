"""Positional encodings. Each scheme is one `Positional` bundle built from the config, acting wherever
the scheme acts: on the input tokens, on queries and keys, on the attention scores.

`POS_ENCODINGS` is the one registry: its keys are the allowed `pos_enc` names (EncoderConfig takes
them from here), its values build the bundle. A slot a scheme does not use is `nn.Identity` (input,
q/k) or `NoScoreBias` (scores), so the encoder and attention never branch on `pos_enc`; a new
scheme is a class and one registry entry in this file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import nn

from .config import PLUGGED, POS_ENC_NAMES, registry_names

if TYPE_CHECKING:  # at run time cfg is duck-typed
    from .config import EncoderConfig


class NoScoreBias(nn.Module):
    """The score slot of a scheme that adds nothing to the logits: attention then takes its plain
    fused call (`is_causal=`, no mask), exactly as without a bias slot."""

    def forward(self, length: int, like: torch.Tensor) -> None:
        return None


@dataclass(frozen=True)
class Positional:
    """One positional scheme's three slots, passed down from the encoder to every attention as one thing.

    input:  (B, T, d_model) -> (B, T, d_model), applied to the tokens before the first block
    qk:     (B, nh, T, hs) -> (B, nh, T, hs), applied to queries and keys in every attention layer
    scores: (T, like) -> an additive bias (nh, T, T) in like's dtype and device, or None

    Each module is registered where it acts (the encoder's `pos_enc`, each attention's `rotary` and
    `score_bias`); the state-dict keys are those of the slot pair this bundle replaced.
    """

    input: nn.Module = field(default_factory=nn.Identity)
    qk: nn.Module = field(default_factory=nn.Identity)
    scores: nn.Module = field(default_factory=NoScoreBias)

    def modules(self) -> tuple[nn.Module, ...]:
        return (self.input, self.qk, self.scores)


def sinusoidal_table(length: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...) (Vaswani et al. 2017, sec. 3.5)."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]  # (T, 1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(pos * div)
    table[:, 1::2] = torch.cos(pos * div[: d_model // 2])
    return table  # (T, d_model)


class SinusoidalPE(nn.Module):
    """Fixed sin/cos table added to the input (Vaswani et al. 2017); any length works."""

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.d_model = d_model
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, T, d)
        T = x.shape[1]
        table = self.table if T <= self.table.shape[0] else sinusoidal_table(T, self.d_model).to(x.device)
        return x + table[:T].to(x.dtype)


class LearnedPE(nn.Module):
    """One trained vector per position, added to the input (Gehring et al. 2017; BERT)."""

    def __init__(self, d_model: int, max_len: int, std: float = 1.0):
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.normal_(self.weight, std=std)  # the tutorial's torch.randn: N(0, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, T, d)
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(
                f"sequence length {T} exceeds the learned positional table (max_len={self.max_len}); "
                f"raise model.max_len to at least {T}"
            )
        return x + self.weight[:T]


def rope_angles(length: int, d_head: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of theta_{pos,i} = pos * base^(-2i/d_head), each (T, d_head/2) (Su et al. 2021)."""
    inv_freq = base ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)  # (d/2,)
    angles = torch.arange(length, dtype=torch.float32)[:, None] * inv_freq  # (T, d/2)
    return angles.cos(), angles.sin()


class RoPE(nn.Module):
    """Rotary position embedding: rotate each pair (x_{2i}, x_{2i+1}) of q and k by pos * theta_i.

    Su et al. 2021, RoFormer, eq. 34. Then q_m . k_n depends on m - n only. Any length works.
    """

    def __init__(self, d_head: int, max_len: int):
        super().__init__()
        self.d_head = d_head
        cos, sin = rope_angles(max_len, d_head)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, nh, T, hs)
        T = x.shape[-2]
        cos, sin = (self.cos, self.sin) if T <= self.cos.shape[0] else (
            t.to(x.device) for t in rope_angles(T, self.d_head)
        )
        cos, sin = cos[:T].to(x.dtype), sin[:T].to(x.dtype)  # (T, hs/2)
        x1, x2 = x[..., 0::2], x[..., 1::2]  # (B, nh, T, hs/2) each
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def alibi_slopes(n_heads: int) -> list[float]:
    """m_h = 2^(-8h/H) for h = 1..H when H is a power of two; otherwise the slopes for the largest power
    of two P < H followed by every other slope for 2P, the first H - P of them. As the reference code
    computes them (Press et al. 2022, github.com/ofirpress/attention_with_linear_biases,
    fairseq/models/transformer.py, get_slopes)."""
    if n_heads & (n_heads - 1) == 0:
        return [2.0 ** (-8.0 * h / n_heads) for h in range(1, n_heads + 1)]
    p = 2 ** math.floor(math.log2(n_heads))
    return alibi_slopes(p) + alibi_slopes(2 * p)[0::2][: n_heads - p]


class ALiBi(nn.Module):
    """Attention with Linear Biases (Press et al. 2022): no position embedding; head h adds -m_h * |i - j|
    to the score of query i for key j, after the scale (the bias is not divided by tau).

    Causal, the future is masked and what is left is the paper's -m_h * (i - j), j <= i; bidirectional,
    the same distance penalty on both sides. Any length works: there is no table and no max_len.
    """

    def __init__(self, n_heads: int):
        super().__init__()
        self.register_buffer("slopes", torch.tensor(alibi_slopes(n_heads)), persistent=False)  # (nh,)

    def forward(self, length: int, like: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(length, device=self.slopes.device)
        distance = (pos[None, :] - pos[:, None]).abs()  # (T, T): |i - j|
        bias = -self.slopes[:, None, None] * distance  # (nh, T, T)
        return bias.to(device=like.device, dtype=like.dtype)


def _none(cfg: EncoderConfig) -> Positional:
    return Positional()


def _sinusoidal(cfg: EncoderConfig) -> Positional:
    return Positional(input=SinusoidalPE(cfg.d_model, cfg.max_len or 0))  # None: each length computed when met


def _learned(cfg: EncoderConfig) -> Positional:
    if cfg.max_len is None:
        raise ValueError("pos_enc='learned' needs max_len, the rows of its table (ablate.config.Config sets it "
                         "to the task's longest sequence); set max_len")
    return Positional(input=LearnedPE(cfg.d_model, cfg.max_len, cfg.learned_std))


def _rope(cfg: EncoderConfig) -> Positional:
    return Positional(qk=RoPE(cfg.head_dim, cfg.max_len or 0))


def _alibi(cfg: EncoderConfig) -> Positional:
    return Positional(scores=ALiBi(cfg.n_heads))


POS_ENCODINGS: dict[str, Callable[[EncoderConfig], Positional]] = {
    "none": _none,
    "sinusoidal": _sinusoidal,
    "learned": _learned,
    "rope": _rope,
    "alibi": _alibi,
}
registry_names(POS_ENCODINGS, POS_ENC_NAMES, "models/positional.py:POS_ENCODINGS")


def build_positional(cfg: EncoderConfig) -> Positional:
    """The bundle for `cfg.pos_enc` (a plug-in's: build(cfg, options) -> Positional)."""
    if cfg.pos_enc in PLUGGED["pos_enc"]:
        return PLUGGED["pos_enc"][cfg.pos_enc].build(cfg, cfg.options(cfg.pos_enc))
    if cfg.pos_enc not in POS_ENCODINGS:
        raise ValueError(f"pos_enc={cfg.pos_enc!r} is not allowed; choose one of {', '.join(POS_ENCODINGS)}")
    return POS_ENCODINGS[cfg.pos_enc](cfg)
