"""EncoderConfig: the one place where every ablation toggle of the encoder is declared and checked."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

ACTIVATION_NAMES = ("relu", "gelu", "identity")  # block.ACTIVATIONS; identity: a linear FFN (issue 37)
NORM_NAMES = ("pre", "post", "none")
NORM_TYPE_NAMES = ("layer", "rms")  # block.NORMS
BLOCK_NAMES = ("sequential", "parallel")  # block.BLOCKS
ATTENTION_NAMES = ("mha",)  # block.ATTENTIONS: ablate's own; a plug-in adds others (ablate/plugins.py)
FFN_NAMES = ("mlp",)  # block.FFNS
RESIDUAL_AROUND = ("both", "attention", "ffn")
QKV_TIE_NAMES = ("none", "kv", "qk")  # which projections share one matrix (attention.TIES)  # which sub-layers get the identity skip (block.SKIPS)
# The registries' names, spelled here so that the config imports no torch (`ablate keys` in a fraction of a
# second); each registry checks at import that its keys are these (registry_names below).
POS_ENC_NAMES = ("none", "sinusoidal", "learned", "rope", "alibi")  # positional.POS_ENCODINGS
INIT_NAMES = ("default", "xavier", "small", "unit")  # attention.INITS
RNN_CELL_NAMES = ("lstm", "gru")  # rnn.RNN_CELLS
RNN_GATES = {"lstm": 4, "gru": 3}  # gates of each cell (rnn.RNN_CELLS); ablate.limits reads it without torch
ARCH_NAMES = ("transformer", *RNN_CELL_NAMES)
RNN_INIT_NAMES = ("default", "forget1", "chrono")  # rnn.RNN_INITS
# Positional schemes an RNN can take: those added to the input; rope and alibi act on attention scores.
RNN_POS_ENC = ("none", "sinusoidal", "learned")


# Values of model.* keys that plug-ins added (ablate/plugins.py fills it, nothing else): key -> {value: Plugged}.
# Each builder of the model (block.make_norm, positional.build_positional, ...) looks a value up in its own registry
# first, here second; the config allows a key's built-in names and these.
PLUGGED: dict[str, dict[str, Plugged]] = {"arch": {}, "activation": {}, "norm_type": {}, "pos_enc": {}, "block": {},
                                          "attention": {}, "ffn": {}}


@dataclass(frozen=True)
class Plugged:
    """A component a plug-in registered under a new value of a model.* key: `build` makes it (the arguments
    are the key's own: docs/plugins.md), `options` its options' dataclass (a section of the run's config
    named after the value), `plugin` the module that registered it."""

    build: Callable[..., Any]
    options: type | None
    plugin: str


def names(key: str, builtin: tuple) -> tuple:
    """A model.* key's allowed values: its built-in names, then the ones plug-ins added."""
    return builtin + tuple(PLUGGED[key])


def registry_names(registry: dict, names: tuple, where: str) -> None:
    """A registry (POS_ENCODINGS, INITS, RNN_CELLS) and the config's names for it must agree."""
    if tuple(registry) != names:
        raise ImportError(f"{where}'s keys {tuple(registry)} differ from ablate/models/config.py's {names}; "
                          "add the new name to both")


def option(default, help: str, bound: Bound | None = None):
    """A config field and its one-line description (`ablate keys` prints it): the key's one home. A plug-in's
    numeric option may state its `bound` here, once: the config checks a value against it (one line, exit 2) and
    `ablate keys` shows its words."""
    return field(default=default, metadata={"help": help, **({"bound": bound} if bound is not None else {})})


def _choice(field: str, value, allowed: tuple) -> None:
    allowed = names(field, allowed) if field in PLUGGED else allowed
    if value not in allowed:
        raise ValueError(f"{field}={value!r} is not allowed; choose one of {', '.join(allowed)}")


def _typed(field: str, value, kind: type, what: str) -> None:
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok:
        raise ValueError(f"{field}={value!r} is not allowed; expected {what}")


@dataclass(frozen=True)
class Bound:
    """What a numeric field allows: its type, `ok(value)` and the words for it. The one statement of each
    bound: EncoderConfig checks it, and ablate.config's RULES (what `ablate keys` shows) read it from here."""

    kind: type  # int or float
    ok: Callable[[Any], bool]
    text: str


def at_least(low: int) -> Bound:
    return Bound(int, lambda v: v >= low, f"an integer >= {low}")


POSITIVE = Bound(float, lambda v: 0 < v < math.inf, "a finite number > 0")
# Every numeric field of EncoderConfig (None passes where the field may be null: d_head, max_len, rnn_hidden).
BOUNDS: dict[str, Bound] = {
    "d_model": at_least(1),
    "n_heads": at_least(1),
    "d_head": at_least(1),
    "n_layers": at_least(1),
    "ffn_mult": at_least(0),
    "temperature": POSITIVE,
    "max_len": at_least(1),
    "learned_std": POSITIVE,
    "dropout": Bound(float, lambda v: 0 <= v < 1, "a number in [0, 1)"),
    "rnn_hidden": at_least(1),
}


def _bounded(field: str, value, bound: Bound) -> None:
    _typed(field, value, bound.kind, bound.text)
    if not bound.ok(value):
        raise ValueError(f"{field}={value!r} is not allowed; expected {bound.text}")


# Toggles of the Transformer's parts: with arch=lstm/gru each must stay at its default (why, in words).
ATTENTION_ONLY = {
    **dict.fromkeys(("n_heads", "d_head", "qk_scale", "qk_reparam", "temperature", "init", "value_skipinit",
                     "shaped_attention", "qkv_tie"),
                    "an RNN has no attention"),
    **dict.fromkeys(("ffn_mult", "activation"), "an RNN has no FFN"),
    **dict.fromkeys(("residual", "residual_around"), "an RNN has no residual connections"),
    "block": "an RNN has no Transformer blocks",
    "attention": "an RNN has no attention",
    "ffn": "an RNN has no FFN",
    **dict.fromkeys(("norm", "norm_type"), "an RNN has no norm layers"),
    "causal": "an RNN reads in order: it is causal already",
}


@dataclass(frozen=True)
class EncoderConfig:
    """A Transformer encoder, every component of which can be switched off or swapped.

    The defaults are the tutorial's MNIST model (d_model 64, 4 heads, FFN 128, 2 layers,
    learned positions, Post-LN, ReLU, dropout 0.1); with `pos_enc="none"` one block is exactly
    `torch.nn.TransformerEncoderLayer`.

    `arch="lstm"` or `"gru"` puts a uni-directional recurrent stack in the encoder's place (models/rnn.py),
    with the same embedding, positional input slot and task heads: d_model, n_layers, dropout (between
    layers, as torch's nn.LSTM applies it), pos_enc (none, sinusoidal, learned), max_len and learned_std
    keep their meaning; rnn_hidden sets the hidden size (None: `rnn.matched_hidden`, the size whose
    parameter count is closest to the Transformer's); the Transformer-only toggles (ATTENTION_ONLY)
    must stay at their defaults.
    """

    arch: Literal[ARCH_NAMES] = option("transformer", "what sits between the input embedding and the task head: the Transformer, or a "
                                                       "uni-directional stack of n_layers torch LSTM/GRU layers (models/rnn.py)")
    d_model: int = option(64, "width of the residual stream")
    n_heads: int = option(4, "attention heads per layer")
    d_head: int | None = option(None, "d_k = d_v per head; null: d_model / n_heads (set it for one head of d_k 512 at d_model 64)")
    n_layers: int = option(2, "encoder blocks")
    ffn_mult: int = option(2, "FFN hidden = ffn_mult * d_model; 0 removes the FFN sub-layer")
    activation: Literal[ACTIVATION_NAMES] = option("relu", "FFN non-linearity; identity: none, the FFN a linear map")
    qk_scale: bool = option(True, "divide scores by sqrt(d_head) (Vaswani et al. 2017, sec. 3.2.1)")
    qk_reparam: bool = option(False, "qk_scale=false only: W_Q, W_K start and step d_head^(1/4) smaller, in an "
                                       "optimiser group of their own: with Adam it trains as the scaled model does, to "
                                       "float64 rounding (tested); needs adam/adamw, no weight decay, no grad_clip")
    temperature: float = option(1.0, "tau: scores are also divided by tau")
    qkv_tie: Literal[QKV_TIE_NAMES] = option(
        "none", "none: W_Q, W_K, W_V three matrices (the tutorial's three cards); kv: W_V = W_K, what is found is "
                "what is fetched; qk: W_Q = W_K, symmetric scores q_i.k_j = q_j.k_i (models/attention.py)")
    residual: bool = option(True, "skip connections around the sub-layers residual_around names (He et al. 2016)")
    residual_around: Literal[RESIDUAL_AROUND] = option("both", "with residual: skip around both sub-layers, the attention only (the FFN's output "
                                                                  "replaces the stream) or the FFN only")
    block: Literal[BLOCK_NAMES] = option(
        "sequential", "sequential: attention, then the FFN on its output; parallel: both read the same input "
                      "and add to the stream together, one norm before them (GPT-J; PaLM)")
    attention: Literal[ATTENTION_NAMES] = option(
        "mha", "the attention sub-layer of every block: mha, ablate's multi-head attention (models/attention.py, every "
               "attention toggle above); a plug-in adds others (docs/plugins.md)")
    ffn: Literal[FFN_NAMES] = option(
        "mlp", "the FFN sub-layer of every block: mlp, Linear(d, ffn_mult d), activation, Linear back "
               "(nn.TransformerEncoderLayer's); a plug-in adds others (docs/plugins.md)")
    norm: Literal["pre", "post", "none"] = option("post", "norm placement: pre, x + f(N(x)), a final norm ending the stack; post, N(x + f(x)), "
                                                         "the tutorial's; none (Xiong et al. 2020)")
    norm_type: Literal[NORM_TYPE_NAMES] = option(
        "layer", "the norm layer in every placement: layer, LayerNorm (Ba et al. 2016); rms, RMSNorm "
                 "(Zhang & Sennrich 2019): no centring, no bias; eps 1e-5 both")
    pos_enc: Literal[POS_ENC_NAMES] = option("learned", "positional encoding: learned holds max_len rows; rope rotates q, k; alibi adds "
                                                        "-m_h |i - j| to the scores (each scheme: models/positional.py)")
    causal: bool = option(False, "each position attends only to itself and earlier ones")
    value_skipinit: bool = option(False, "attention's mixing (alpha I + beta A) V, alpha 1 and beta 0 learned from there: "
                                         "no token mixing at init (He et al. 2023's Value-SkipInit)")
    shaped_attention: bool = option(False, "attention's mixing (alpha I + beta A - gamma C) V, C the mixing of zero scores, "
                                           "all three learned from 1, W_Q from 0: identity at init, with gradient for "
                                           "W_Q (Noci et al. 2023; He & Hofmann 2024)")
    init: Literal[INIT_NAMES] = option("default", "Q/K/V/O init: nn.Linear's fan-in, Xavier, N(0, 0.02), or unit: W_Q, W_K ~ "
                                                    "N(0, 1/d_model), unit-variance q, k, the premise of the case for sqrt(d_k) "
                                                    "(models/attention.py)")
    max_len: int | None = option(None, "rows of the positional table; null: the task's longest sequence (28 MNIST rows, 29 "
                                           "with pooling=cls), as the tutorial's torch.randn(1, 28, 64)")
    learned_std: float = option(1.0, "learned positions start N(0, learned_std^2): the tutorial's torch.randn; 0.02 is BERT's")
    dropout: float = option(0.1, "PyTorch's placement: attention weights, both sub-layer outputs, FFN hidden; RNN: between layers")
    rnn_hidden: int | None = option(None, "arch=lstm/gru: hidden size; null: the size whose parameter count is closest to the "
                                              "Transformer encoder's (models/rnn.py matched_hidden)")
    rnn_init: Literal[RNN_INIT_NAMES] = option("default", "arch=lstm: gate biases; forget1: forget bias 1 (Gers et al. 2000), "
                                                           "chrono: b_f ~ log U(1, max_len - 1), b_i = -b_f (Tallec & Ollivier 2018)")

    # the options of the plug-in components this config selects, (value, its options) pairs: set by the run's
    # config (ablate.config.Config.encoder) from its plug-in sections; not a key of its own
    plugged: tuple[tuple[str, Any], ...] = field(default=(), repr=False, metadata={"internal": True})

    def options(self, value: str) -> Any:
        """The options of the plug-in component registered as `value` (None: it has none, or is not set)."""
        return dict(self.plugged).get(value)

    def __post_init__(self) -> None:
        _choice("arch", self.arch, ARCH_NAMES)
        if self.arch in PLUGGED["arch"]:
            self._check_plugged_arch()
            return
        for name, bound in BOUNDS.items():
            if getattr(self, name) is not None:
                _bounded(name, getattr(self, name), bound)
        if self.d_head is None:
            if self.d_model % self.n_heads and self.arch == "transformer":  # an RNN has no heads
                raise ValueError(
                    f"n_heads={self.n_heads} does not divide d_model={self.d_model}; "
                    "choose n_heads that divides d_model or set d_head explicitly"
                )
        _choice("activation", self.activation, ACTIVATION_NAMES)
        for name in ("qk_scale", "qk_reparam", "residual", "causal", "value_skipinit", "shaped_attention"):
            _typed(name, getattr(self, name), bool, "true or false")
        self._check_residual_around()
        _choice("block", self.block, BLOCK_NAMES)
        _choice("attention", self.attention, ATTENTION_NAMES)
        _choice("ffn", self.ffn, FFN_NAMES)
        if self.ffn != FFN_NAMES[0] and self.ffn_mult == 0:
            raise ValueError(f"ffn={self.ffn!r} needs an FFN sub-layer, but ffn_mult=0 removes it; set ffn_mult >= 1 "
                             f"or leave ffn={FFN_NAMES[0]}")
        if self.block == "parallel" and (self.residual_around != "both" or self.ffn_mult == 0):
            raise ValueError("block='parallel' adds attention and the FFN to one stream with one skip: it needs "
                             "residual_around='both' and an FFN (ffn_mult >= 1); change those or use "
                             "block='sequential'")
        self._check_qkv_tie()
        if self.value_skipinit and self.shaped_attention:
            raise ValueError("shaped_attention=True and value_skipinit=True are two mixings of attention's output; "
                             "choose one (set the other false)")
        _choice("norm", self.norm, NORM_NAMES)
        _choice("norm_type", self.norm_type, NORM_TYPE_NAMES)
        _choice("pos_enc", self.pos_enc, POS_ENC_NAMES)
        if self.pos_enc == "rope" and self.head_dim % 2:
            raise ValueError(
                f"pos_enc='rope' needs an even d_head, got d_head={self.head_dim}; "
                "choose an even d_head (or d_model / n_heads) or another pos_enc"
            )
        _choice("init", self.init, INIT_NAMES)
        self._check_arch()
        if self.qk_reparam and self.qk_scale:  # after the arch's check: an RNN has neither
            raise ValueError("qk_reparam=True needs qk_scale=False (it stands in for the 1/sqrt(d_head) scale, "
                             "it does not add to it); set qk_scale=false or leave qk_reparam=false")

    def _check_plugged_arch(self) -> None:
        """A plug-in's whole model reads its own section: an encoder key set away from its default would be
        silently ignored, so it is refused."""
        for f in fields(self):
            if f.name not in ("arch", "plugged") and getattr(self, f.name) != f.default:
                raise ValueError(f"{f.name}={getattr(self, f.name)!r} does not apply to arch={self.arch!r} (a "
                                 f"plug-in's model, configured by its own keys {self.arch}.*); leave it at its "
                                 f"default ({f.default!r}) or choose arch=transformer")

    def _check_qkv_tie(self) -> None:
        """Tied projections are one tensor: qk_reparam's own W_Q, W_K groups and shaped attention's zero W_Q
        would act on the tied one too."""
        _choice("qkv_tie", self.qkv_tie, QKV_TIE_NAMES)
        if self.qkv_tie == "none":
            return
        if self.qk_reparam:
            raise ValueError(f"qkv_tie={self.qkv_tie!r} and qk_reparam=True: the reparametrisation steps W_Q and "
                             "W_K as tensors of their own; set qkv_tie=none or qk_reparam=false")
        if self.qkv_tie == "qk" and self.shaped_attention:
            raise ValueError("qkv_tie='qk' and shaped_attention=True: shaped attention starts W_Q at 0, which "
                             "would zero the tied W_K too; set qkv_tie=none or kv, or shaped_attention=false")

    def _check_residual_around(self) -> None:
        """Skips around one sub-layer only need skips on (residual=False is "neither") and that sub-layer."""
        _choice("residual_around", self.residual_around, RESIDUAL_AROUND)
        if self.residual_around == "both":
            return
        if not self.residual:
            raise ValueError(f"residual_around={self.residual_around!r} needs residual=True (residual=False "
                             "has no skips to place); leave residual_around='both' or set residual=true")
        if self.residual_around == "ffn" and self.ffn_mult == 0:
            raise ValueError("residual_around='ffn' needs an FFN sub-layer, but ffn_mult=0 removes it; "
                             "choose residual_around='both' or 'attention', or ffn_mult >= 1")

    def _check_arch(self) -> None:
        """An RNN has no attention, FFN, norms or residuals: a toggle of those set away from its default
        would be silently ignored, so it is refused; so are score-level positions (rope, alibi) and
        rnn_hidden on a Transformer."""
        _choice("rnn_init", self.rnn_init, RNN_INIT_NAMES)
        if self.rnn_init != "default" and self.arch != "lstm":  # the forget gate is the LSTM's
            raise ValueError(f"rnn_init={self.rnn_init!r} sets an LSTM's forget gate and does not apply to "
                             f"arch={self.arch!r}; leave rnn_init=default or choose arch=lstm")
        if self.arch == "transformer":
            if self.rnn_hidden is not None:
                raise ValueError(f"rnn_hidden={self.rnn_hidden!r} does not apply to arch='transformer'; "
                                 "leave it null or choose arch=lstm or gru")
            return
        defaults = {f.name: f.default for f in fields(self)}
        for name, why in ATTENTION_ONLY.items():
            if getattr(self, name) != defaults[name]:
                raise ValueError(f"{name}={getattr(self, name)!r} does not apply to arch={self.arch!r} ({why}); "
                                 f"leave it at its default ({defaults[name]!r}) or choose arch=transformer")
        if self.pos_enc not in RNN_POS_ENC:
            raise ValueError(f"pos_enc={self.pos_enc!r} does not apply to arch={self.arch!r} (it acts on "
                             f"attention scores); choose one of {', '.join(RNN_POS_ENC)}")

    @property
    def head_dim(self) -> int:
        """d_k = d_v of one head."""
        return self.d_head if self.d_head is not None else self.d_model // self.n_heads

    @property
    def inner_dim(self) -> int:
        """Width of the concatenated heads (n_heads * d_head)."""
        return self.n_heads * self.head_dim

    @property
    def ffn_dim(self) -> int:
        return self.ffn_mult * self.d_model

    @property
    def qk_rate(self) -> float:
        """c = d_head^(-1/4) with qk_reparam, else 1: the factor W_Q, W_K (and their biases) start at, after
        the init's draw, and the factor of the learning rate they step at (MultiHeadAttention.lr_factors)."""
        return self.head_dim**-0.25 if self.qk_reparam else 1.0

    @property
    def score_scale(self) -> float:
        """The one factor every attention path multiplies QK^T by: 1/sqrt(d_head) (if on) / tau."""
        base = self.head_dim**-0.5 if self.qk_scale else 1.0
        return base / self.temperature
