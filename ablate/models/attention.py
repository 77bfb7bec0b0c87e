"""Multi-head self-attention with one score scale shared by the fused and the explicit path."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import skip_init

from .config import INIT_NAMES, QKV_TIE_NAMES, registry_names
from .positional import Positional

if TYPE_CHECKING:  # at run time cfg is duck-typed
    from .config import EncoderConfig


def _default(attn: MultiHeadAttention) -> None:
    """nn.Linear's fan-in init: score variance grows in proportion to d_head without scaling."""


def _xavier(attn: MultiHeadAttention) -> None:
    """Xavier-uniform W_Q, W_K, W_V, each with its own fans, and zero biases: nn.MultiheadAttention's
    choice when it keeps separate projections (q/k/v_proj_weight). Its fused in_proj_weight would get one
    bound over all three; per projection keeps the score variance independent of d_head."""
    inner = attn.inner_dim
    with torch.no_grad():
        for i in range(attn.qkv.out_features // inner):  # each matrix once: 3, or 2 with model.qkv_tie
            nn.init.xavier_uniform_(attn.qkv.weight[i * inner : (i + 1) * inner])
        attn.qkv.bias.zero_()
        attn.out.bias.zero_()


def _small(attn: MultiHeadAttention) -> None:
    """N(0, 0.02) weights and zero biases for Q/K/V/O (GPT-2, Radford et al. 2019)."""
    for lin in (attn.qkv, attn.out):
        nn.init.normal_(lin.weight, std=0.02)
        nn.init.zeros_(lin.bias)


def _unit(attn: MultiHeadAttention) -> None:
    """W_Q and W_K entries N(0, 1/d_model), zero q and k biases; W_V and W_O keep nn.Linear's init.

    This realises the premise of the tutorial's case for 1/sqrt(d_k) (Vaswani et al. 2017, footnote 4:
    "assume the components of q and k are independent random variables with mean 0 and variance 1.
    Then their dot product has mean 0 and variance d_k"): for inputs whose components have unit
    variance, q_i = sum_j W_ij x_j has variance d_model * (1/d_model) * 1 = 1, and an unscaled q.k
    has std sqrt(d_k) (2.8 at d_k 8, 22.6 at 512). nn.Linear's default gives q variance 1/3 instead.

    What attention receives at init decides how far that holds. With norm='pre', every layer gets a
    LayerNorm output: each token's components have mean 0 and mean square 1, the premise itself (MNIST's
    many similar rows measure a component variance of 0.8-0.95 there). With norm='post' (the default)
    or 'none', layer 0 gets the embedded input as it is, and q and k inherit its variance: copy tokens
    (nn.Embedding, N(0, 1)) alone 1, with learned positions (N(0, 1)) 2; MNIST rows (RowEmbedding of
    normalised pixels) about 0.25, with learned positions 1.1-1.2. Post-LN layers >= 1 get the
    previous block's LayerNorm output. The probes report what each layer measures (`q_var_l<i>`,
    `k_var_l<i>`, beside `logit_std_l<i>`).
    """
    rows = slice(0, attn.rows["wk"].stop)  # [W_Q; W_K], or with model.qkv_tie the one matrix both are
    with torch.no_grad():
        nn.init.normal_(attn.qkv.weight[rows], std=attn.qkv.in_features**-0.5)
        attn.qkv.bias[rows].zero_()


INITS = {"default": _default, "xavier": _xavier, "small": _small, "unit": _unit}  # model.init's names
registry_names(INITS, INIT_NAMES, "models/attention.py:INITS")


# model.qkv_tie: which of qkv's row blocks (of inner rows each) W_Q, W_K and W_V read.
TIES = {"none": (0, 1, 2), "kv": (0, 1, 1), "qk": (0, 0, 1)}
registry_names(TIES, QKV_TIE_NAMES, "models/attention.py:TIES")


def lr_factors(model: nn.Module) -> list[tuple[nn.Parameter, float]]:
    """Every attention layer's `lr_factors` in `model`: parameters the optimiser steps at factor x lr."""
    return [pf for m in model.modules() if isinstance(m, MultiHeadAttention) for pf in m.lr_factors()]


class SplitQKV(nn.Module):
    """The fused qkv projection as three Linears `q`, `k`, `v` (model.qk_reparam), computing the same
    (B, T, 3 * inner) layout, [q | k | v], heads contiguous. W_Q, W_K and their biases are the fused
    layer's rows times c: its init drew the random numbers, so a seed gives what it gives the scaled
    model. They are tensors of their own so that an optimiser's parameter group can step them at lr * c."""

    def __init__(self, fused: nn.Linear, inner: int, c: float):
        super().__init__()
        self.c = c
        # skip_init: no init of its own (it would draw random numbers the scaled model does not); on the
        # fused layer's device (the meta device when ablate.models.meta counts the model)
        self.q, self.k, self.v = (skip_init(nn.Linear, fused.in_features, inner, device=fused.weight.device)
                                  for _ in range(3))
        with torch.no_grad():
            for i, (lin, factor) in enumerate(((self.q, c), (self.k, c), (self.v, 1.0))):
                lin.weight.copy_(fused.weight[i * inner : (i + 1) * inner] * factor)
                lin.bias.copy_(fused.bias[i * inner : (i + 1) * inner] * factor)

    def lr_factors(self) -> list[tuple[nn.Parameter, float]]:
        return [(p, self.c) for p in (*self.q.parameters(), *self.k.parameters())]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, 3 * inner)
        return torch.cat((self.q(x), self.k(x), self.v(x)), dim=-1)


def future_mask(length: int, device: torch.device) -> torch.Tensor:
    """(T, T) bool, True where key j lies after query i: what the causal mask hides."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(1)


class MultiHeadAttention(nn.Module):
    """softmax(Q K^T * scale [+ score bias] [+ causal mask]) V over n_heads heads of width d_head
    (Vaswani et al. 2017).

    `scale` = (1/sqrt(d_head) if qk_scale else 1) / temperature is computed once by the config and
    handed to both paths: the fused `F.scaled_dot_product_attention` used for training and the
    explicit path that also returns the post-softmax weights. The positional bundle's `qk` slot
    rotates q and k, and its `scores` slot may add a bias to the scaled logits (not divided by tau):
    the explicit path adds it, the fused path receives it as a float `attn_mask` with the causal
    -inf folded in. Without a bias the fused call is the plain `is_causal=` one.

    `qk_reparam` (unscaled scores only) is the scale's equal under Adam with the scale taken out of the
    forward pass. With c = d_head^(-1/4), W_Q' = c W_Q and W_K' = c W_K (biases too) give the scores
    (x W_Q' + b_Q')(x W_K' + b_K')^T = c^2 q k^T = q k^T / sqrt(d_head), and gradients g / c. Adam's
    step m / (sqrt(v) + eps) ignores that 1/c, so for W' to stay c W those tensors must step at lr * c
    (and eps / c, to keep eps's ratio to sqrt(v)). A parameter group has one lr per tensor, and the
    fused `qkv` holds W_V's rows too; a gradient hook cannot help either, as Adam undoes any scale of
    the gradient. So with qk_reparam `qkv` is a SplitQKV, whose W_Q, W_K are tensors of their own
    (`lr_factors`, read by ablate.tasks.base.configure_optimizers); the default path keeps the one fused
    tensor, its state_dict keys and nn.MultiheadAttention's in_proj layout.

    `value_skipinit` mixes (alpha I + beta A) V, two learned scalars from alpha = 1, beta = 0 (He et al. 2023's
    Value-SkipInit): at initialisation every token keeps its own value, so a stack without skips starts with
    no token mixing (and so no collapse by attention) while its stream still passes W_V, W_O and the FFN.
    `shaped_attention` mixes (alpha I + beta A - gamma C) V (`centre`), the identity at initialisation too, with W_Q
    learning from 0 (Noci et al. 2023; He & Hofmann 2024).

    `qkv_tie` shares one matrix between two projections (the tutorial's three cards made two): kv, W_V = W_K
    (biases too), so a token is fetched by what it is found by; qk, W_Q = W_K, so the scores before the
    positional rotation are symmetric, q_i.k_j = q_j.k_i. `qkv` then holds two row blocks, the tied one once
    (one tensor, one gradient: the sum of both uses'), and `rows` says where each projection reads.

    Public parts (what probes use): `qkv` ([W_Q; W_K; W_V], heads contiguous, `rows` per projection; with qk_reparam a SplitQKV of
    the same output), `out` (W_O), `alpha`, `beta`, `gamma` (value_skipinit, shaped_attention; else None),
    `n_heads`, `d_head`, `inner_dim`, `scale`, `project(x)`, `logits(q, k)`, `projections()`, `lr_factors()`.
    """

    def __init__(self, cfg: EncoderConfig, positional: Positional | None = None):
        super().__init__()
        if positional is None:
            positional = Positional()
        if not isinstance(positional, Positional):
            raise TypeError(
                f"positional={type(positional).__name__} is not allowed; pass a Positional bundle "
                "(ablate.models.build_positional(cfg)) or None"
            )
        self.n_heads, self.d_head, self.inner_dim = cfg.n_heads, cfg.head_dim, cfg.inner_dim
        self.blocks = TIES[cfg.qkv_tie]  # the row block of W_Q, W_K, W_V: (0, 1, 2), or two shared ones when tied
        inner = self.inner_dim
        self.rows = {name: slice(b * inner, (b + 1) * inner) for name, b in zip(("wq", "wk", "wv"), self.blocks)}
        # rows: [W_Q; W_K; W_V], heads contiguous; with qkv_tie=kv [W_Q; W_K = W_V], with qk [W_Q = W_K; W_V]
        self.qkv = nn.Linear(cfg.d_model, (max(self.blocks) + 1) * inner)
        self.out = nn.Linear(self.inner_dim, cfg.d_model)  # W_O
        self.rotary = positional.qk  # RoPE or nn.Identity
        self.score_bias = positional.scores  # T -> (nh, T, T) additive bias, or None
        self.scale = cfg.score_scale
        self.causal = cfg.causal
        self.dropout = cfg.dropout
        INITS[cfg.init](self)
        if cfg.shaped_attention:  # W_Q and its bias from 0 (see gamma below); before qk_reparam splits the rows
            with torch.no_grad():
                self.qkv.weight[: self.inner_dim].zero_()
                self.qkv.bias[: self.inner_dim].zero_()
        if cfg.qk_reparam:  # after the draw: the same seed gives the scaled model's numbers, W_Q, W_K times c
            self.qkv = SplitQKV(self.qkv, self.inner_dim, cfg.qk_rate)
        # Value-SkipInit (He et al. 2023, "Deep Transformers without Shortcuts"): (alpha I + beta A) V with learned
        # scalars from alpha = 1, beta = 0, so each token keeps its own value at initialisation and no tokens mix.
        # No random draw: a seed gives every other weight what it gives the softmax-only model.
        self.alpha = nn.Parameter(torch.ones(())) if cfg.value_skipinit or cfg.shaped_attention else None
        self.beta = (nn.Parameter(torch.full((), 1.0 if cfg.shaped_attention else 0.0))
                     if cfg.value_skipinit or cfg.shaped_attention else None)
        # Shaped attention (Noci et al. 2023; He & Hofmann 2024): (alpha I + beta A - gamma C) V, C the mixing that zero
        # scores give (uniform over the allowed keys, or the softmax of the positional bias alone), all three from 1,
        # and W_Q (with its bias) from 0: A = C at initialisation, so the mixing is the identity, while W_Q gets a
        # gradient (the scores' derivative in q is k), which Value-SkipInit's beta = 0 withholds from W_Q and W_K.
        self.gamma = nn.Parameter(torch.ones(())) if cfg.shaped_attention else None

    def lr_factors(self) -> list[tuple[nn.Parameter, float]]:
        """(parameter, factor): parameters to be stepped at factor x the learning rate. With qk_reparam,
        W_Q, W_K and their biases at c = d_head^(-1/4); else none."""
        return self.qkv.lr_factors() if isinstance(self.qkv, SplitQKV) else []

    def projections(self) -> dict[str, list[tuple[nn.Parameter, slice]]]:
        """{"wq", "wk", "wv"}: the (parameter, rows) holding W_Q, W_K, W_V and their biases, in either layout
        of `qkv` (the fused Linear's row slices, or SplitQKV's own q, k, v)."""
        if isinstance(self.qkv, SplitQKV):
            return {name: [(p, slice(None)) for p in lin.parameters()]
                    for name, lin in zip(("wq", "wk", "wv"), (self.qkv.q, self.qkv.k, self.qkv.v))}
        return {name: [(self.qkv.weight, r), (self.qkv.bias, r)] for name, r in self.rows.items()}

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v, each (B, nh, T, hs), with the positional rotation applied to q and k (with model.qkv_tie two
        of them are one tensor before the rotation)."""
        B, T, _ = x.shape
        parts = self.qkv(x).view(B, T, -1, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        q, k, v = (parts[b] for b in self.blocks)
        return self.rotary(q), self.rotary(k), v

    def logits(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Pre-softmax scores (B, nh, T, T), scaled, biased and masked exactly as the fused kernel does."""
        scores = (q @ k.transpose(-2, -1)) * self.scale
        T = scores.shape[-1]
        bias = self.score_bias(T, scores)  # (nh, T, T) or None
        if bias is not None:
            scores = scores + bias
        if self.causal:
            scores = scores.masked_fill(future_mask(T, scores.device), float("-inf"))
        return scores

    def mix(self, y: torch.Tensor, v: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The heads' output from y = A V: y itself; with model.value_skipinit alpha V + beta y; with
        model.shaped_attention alpha V + beta y - gamma C V (`centre`)."""
        if self.alpha is None:
            return y
        out = self.alpha * v + self.beta * y
        return out if self.gamma is None else out - self.gamma * self.centre(k, v)

    def centre(self, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """C V: the mixing that zero scores give (uniform over the allowed keys, or the softmax of the positional
        bias alone), computed by the fused kernel with a zero query; no dropout."""
        return self.fused(torch.zeros_like(k), k, v, 0.0)

    def merge(self, y: torch.Tensor) -> torch.Tensor:
        B, _, T, _ = y.shape  # (B, nh, T, hs) -> (B, T, nh*hs) -> (B, T, d_model)
        return self.out(y.transpose(1, 2).reshape(B, T, self.inner_dim))

    def fused(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: float) -> torch.Tensor:
        """F.scaled_dot_product_attention with this layer's scale, bias and mask: (B, nh, T, hs)."""
        T = q.shape[-2]
        bias = self.score_bias(T, q)  # (nh, T, T) or None
        if bias is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=self.causal, scale=self.scale)
        if self.causal:
            bias = bias.masked_fill(future_mask(T, bias.device), float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p, scale=self.scale)

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        """(B, T, d_model) -> ((B, T, d_model), weights (B, nh, T, T) or None)."""
        q, k, v = self.project(x)
        p = self.dropout if self.training else 0.0
        if not need_weights:
            return self.merge(self.mix(self.fused(q, k, v, p), v, k)), None
        weights = self.logits(q, k).softmax(dim=-1)  # A; value_skipinit and shaped_attention mix more (`mix`)
        y = F.dropout(weights, p=p, training=self.training) @ v
        return self.merge(self.mix(y, v, k)), weights
