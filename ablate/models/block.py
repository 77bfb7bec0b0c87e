"""One encoder block: attention and FFN sub-layers, each wrapped in norm / residual / dropout slots.

Norm placement and residuals are decided here, once, when the block is built (torchtune style):
a slot that is switched off holds `nn.Identity` (or `NoSkip`), so `forward` has no flag branches.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import MultiHeadAttention
from .config import (
    ACTIVATION_NAMES,
    ATTENTION_NAMES,
    BLOCK_NAMES,
    FFN_NAMES,
    NORM_TYPE_NAMES,
    PLUGGED,
    EncoderConfig,
    registry_names,
)
from .positional import Positional

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "identity": nn.Identity}
registry_names(ACTIVATIONS, ACTIVATION_NAMES, "models/block.py:ACTIVATIONS")
# model.residual_around -> the sub-layers that get the identity skip when residual=True
SKIPS = {"both": ("attention", "ffn"), "attention": ("attention",), "ffn": ("ffn",)}


class NoSkip(nn.Module):
    """The residual slot with residuals off: the sub-layer output alone goes on (adds zero)."""

    def forward(self, x: torch.Tensor) -> int:
        return 0


# model.norm_type -> the norm layer a block (and a Pre-LN stack's end) is built with: every norm of the model
# comes from make_norm. LayerNorm centres and scales, with a gain and a bias (Ba et al. 2016); RMSNorm only
# divides by the root mean square, with a gain (Zhang & Sennrich 2019). Both torch's, eps 1e-5 (LayerNorm's,
# nn.TransformerEncoderLayer's): the two differ in the centring and the bias alone.
NORMS: dict[str, type[nn.Module]] = {"layer": nn.LayerNorm, "rms": nn.RMSNorm}
registry_names(NORMS, NORM_TYPE_NAMES, "models/block.py:NORMS")
EPS = 1e-5


def make_norm(cfg: EncoderConfig) -> nn.Module:
    """One norm layer over d_model, of the kind model.norm_type names (a plug-in's: build(d_model, eps, options))."""
    if cfg.norm_type in NORMS:
        return NORMS[cfg.norm_type](cfg.d_model, eps=EPS)
    return PLUGGED["norm_type"][cfg.norm_type].build(cfg.d_model, EPS, cfg.options(cfg.norm_type))


def norm_classes() -> tuple[type, ...]:
    """The classes a norm layer of a block is: the built-in ones and those plug-ins registered as classes."""
    return (*NORMS.values(), *(p.build for p in PLUGGED["norm_type"].values() if isinstance(p.build, type)))


def make_activation(cfg: EncoderConfig) -> nn.Module:
    """The FFN's non-linearity model.activation names (a plug-in's: build(options))."""
    if cfg.activation in ACTIVATIONS:
        return ACTIVATIONS[cfg.activation]()
    return PLUGGED["activation"][cfg.activation].build(cfg.options(cfg.activation))


def _dropout(p: float) -> nn.Module:
    return nn.Dropout(p) if p > 0 else nn.Identity()


class FeedForward(nn.Module):
    """Linear(d, m*d) -> activation -> dropout -> Linear(m*d, d), as in nn.TransformerEncoderLayer."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.fc1 = nn.Linear(cfg.d_model, cfg.ffn_dim)
        self.act = make_activation(cfg)
        self.drop = _dropout(cfg.dropout)
        self.fc2 = nn.Linear(cfg.ffn_dim, cfg.d_model)
        if cfg.init == "small":
            for lin in (self.fc1, self.fc2):
                nn.init.normal_(lin.weight, std=0.02)
                nn.init.zeros_(lin.bias)

    def forward(self, x: torch.Tensor, need_weights: bool = False) -> tuple[torch.Tensor, None]:
        return self.fc2(self.drop(self.act(self.fc1(x)))), None


# model.attention -> the attention sub-layer; model.ffn -> the FFN sub-layer (a plug-in's: ablate/plugins.py)
ATTENTIONS: dict[str, type[nn.Module]] = {"mha": MultiHeadAttention}
registry_names(ATTENTIONS, ATTENTION_NAMES, "models/block.py:ATTENTIONS")
FFNS: dict[str, type[nn.Module]] = {"mlp": FeedForward}
registry_names(FFNS, FFN_NAMES, "models/block.py:FFNS")


def make_attention(cfg: EncoderConfig, positional: Positional | None) -> nn.Module:
    """The attention sub-layer model.attention names (a plug-in's: build(cfg, positional, options), a module whose
    forward(h, need_weights) gives (output, weights or None))."""
    if cfg.attention in ATTENTIONS:
        return ATTENTIONS[cfg.attention](cfg, positional)
    return PLUGGED["attention"][cfg.attention].build(cfg, positional, cfg.options(cfg.attention))


def make_ffn(cfg: EncoderConfig) -> nn.Module:
    """The FFN sub-layer model.ffn names (a plug-in's: build(cfg, options), forward(h, need_weights) -> (out, None))."""
    if cfg.ffn in FFNS:
        return FFNS[cfg.ffn](cfg)
    return PLUGGED["ffn"][cfg.ffn].build(cfg, cfg.options(cfg.ffn))


class SubLayer(nn.Module):
    """x -> post_norm(skip(x) + dropout(f(pre_norm(x)))).

    norm=pre:  x + f(LN(x))          (Pre-LN, Xiong et al. 2020)
    norm=post: LN(x + f(x))          (Post-LN, Vaswani et al. 2017)
    skip=False replaces skip(x) by 0 (the "gradient highway" removed, He et al. 2016); the Block decides
    it per sub-layer from residual and residual_around (SKIPS).
    """

    def __init__(self, fn: nn.Module, cfg: EncoderConfig, skip: bool):
        super().__init__()
        self.pre_norm = make_norm(cfg) if cfg.norm == "pre" else nn.Identity()
        self.fn = fn
        self.drop = _dropout(cfg.dropout)
        self.skip = nn.Identity() if skip else NoSkip()
        self.post_norm = make_norm(cfg) if cfg.norm == "post" else nn.Identity()

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        y, weights = self.fn(self.pre_norm(x), need_weights)
        return self.post_norm(self.skip(x) + self.drop(y)), weights


class Removed(nn.Module):
    """A sub-layer that was switched off entirely (ffn_mult=0): passes x through."""

    def forward(self, x: torch.Tensor, need_weights: bool = False) -> tuple[torch.Tensor, None]:
        return x, None


class Block(nn.Module):
    """Attention sub-layer, then FFN sub-layer. Probes and tools reach the parts through the accessors
    `attention`, `feed_forward`, `norms` and `sublayers`, never through attribute names."""

    def __init__(self, cfg: EncoderConfig, positional: Positional | None = None):
        super().__init__()
        skips = SKIPS[cfg.residual_around] if cfg.residual else ()
        self.attn = SubLayer(make_attention(cfg, positional), cfg, skip="attention" in skips)
        self.ffn = SubLayer(make_ffn(cfg), cfg, skip="ffn" in skips) if cfg.ffn_mult > 0 else Removed()

    @property
    def attention(self) -> MultiHeadAttention:
        """The block's MultiHeadAttention (its W_Q/W_K/W_V `qkv`, W_O `out`, `project`, `logits`)."""
        return self.attn.fn

    @property
    def feed_forward(self) -> FeedForward | None:
        """The block's FeedForward, or None when the FFN is removed (ffn_mult=0)."""
        return self.ffn.fn if isinstance(self.ffn, SubLayer) else None

    @property
    def norms(self) -> tuple[nn.Module, ...]:
        """The block's norm layers in order: the attention sub-layer's, then the FFN's (pre or post, per
        `norm`); nn.TransformerEncoderLayer's norm1, norm2. Empty with norm='none'."""
        return tuple(m for m in self.modules() if isinstance(m, norm_classes()))

    @property
    def sublayers(self) -> dict[str, nn.Module]:
        """{"attn": ..., "ffn": ...}: modules whose output[0] is the hidden state (B, T, d) after that
        sub-layer, norm and residual included (a removed FFN passes its input on)."""
        return {"attn": self.attn, "ffn": self.ffn}

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        """(B, T, d) -> ((B, T, d), attention weights (B, nh, T, T) or None)."""
        x, weights = self.attn(x, need_weights)
        x, _ = self.ffn(x)
        return x, weights


class _Branch(nn.Module):
    """The attention branch of a parallel block added to the stream: (x, h) -> (skip(x) + dropout(attn(h)),
    weights), h the normalised input both branches read. Its output is the `attn` slot's state."""

    def __init__(self, fn: nn.Module, cfg: EncoderConfig):
        super().__init__()
        self.fn = fn
        self.drop = _dropout(cfg.dropout)
        self.skip = nn.Identity() if cfg.residual else NoSkip()

    def forward(self, x: torch.Tensor, h: torch.Tensor, need_weights: bool = False):
        y, weights = self.fn(h, need_weights)
        return self.skip(x) + self.drop(y), weights


class _Join(nn.Module):
    """The FFN branch of a parallel block added, then the post norm: (s, h) -> (post_norm(s + dropout(ffn(h))),
    None). Its output is the block's, the `ffn` slot's state."""

    def __init__(self, fn: nn.Module, cfg: EncoderConfig):
        super().__init__()
        self.fn = fn
        self.drop = _dropout(cfg.dropout)
        self.post_norm = make_norm(cfg) if cfg.norm == "post" else nn.Identity()

    def forward(self, s: torch.Tensor, h: torch.Tensor):
        y, _ = self.fn(h)
        return self.post_norm(s + self.drop(y)), None


class ParallelBlock(nn.Module):
    """x -> post_norm(skip(x) + dropout(attn(n(x))) + dropout(ffn(n(x)))), n the one norm both read with
    norm=pre (GPT-J, Wang & Komatsuzaki 2021; PaLM, Chowdhery et al. 2022, sec. 2: one LayerNorm, the two
    sub-layers computed from the same input). norm=post normalises the sum once; none adds them plain;
    residual=False drops x. The accessors are Block's: `sublayers` names the stream with the attention branch
    added (attn) and the block's output (ffn)."""

    def __init__(self, cfg: EncoderConfig, positional: Positional | None = None):
        super().__init__()
        self.pre_norm = make_norm(cfg) if cfg.norm == "pre" else nn.Identity()
        self.attn = _Branch(make_attention(cfg, positional), cfg)
        self.ffn = _Join(make_ffn(cfg), cfg)

    @property
    def attention(self) -> MultiHeadAttention:
        return self.attn.fn

    @property
    def feed_forward(self) -> FeedForward:
        return self.ffn.fn

    @property
    def norms(self) -> tuple[nn.Module, ...]:
        """The block's one norm layer (pre or post), or none with norm='none'."""
        return tuple(m for m in self.modules() if isinstance(m, norm_classes()))

    @property
    def sublayers(self) -> dict[str, nn.Module]:
        return {"attn": self.attn, "ffn": self.ffn}

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        h = self.pre_norm(x)
        s, weights = self.attn(x, h, need_weights)
        y, _ = self.ffn(s, h)
        return y, weights


# model.block -> the block every layer of the stack is
BLOCKS: dict[str, type[nn.Module]] = {"sequential": Block, "parallel": ParallelBlock}
registry_names(BLOCKS, BLOCK_NAMES, "models/block.py:BLOCKS")


def make_block(cfg: EncoderConfig, positional: Positional | None = None) -> nn.Module:
    """One encoder block, of the kind model.block names: every block of the stack comes from here (a plug-in's:
    build(cfg, positional, options))."""
    if cfg.block in BLOCKS:
        return BLOCKS[cfg.block](cfg, positional)
    return PLUGGED["block"][cfg.block].build(cfg, positional, cfg.options(cfg.block))
