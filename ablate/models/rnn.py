"""The recurrent baseline (`model.arch=lstm` or `gru`): a stack of torch's own LSTM or GRU layers in the
encoder's place, between the same input embedding (and positional input slot) and the same task heads.

Uni-directional: layer l reads its input in order, position 0 first, and its output at t depends on
positions 0..t only, like a causal Transformer. The copy task's layout (tokens, SEP, a blank per
token) lets it answer at every blank from what it has already read.

Each layer is one `nn.LSTM` / `nn.GRU` of `num_layers=1`, followed (except the last) by dropout on its
outputs: exactly what `nn.LSTM(num_layers=L, dropout=p)` computes (a test copies the weights into one
and compares), but with every layer's output sequence reachable, so the collapse and norm probes
measure each layer as they measure each Transformer block.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from .config import RNN_CELL_NAMES, RNN_GATES, RNN_INIT_NAMES, registry_names
from .positional import build_positional

if TYPE_CHECKING:  # at run time cfg is duck-typed
    from .config import EncoderConfig

# model.arch's recurrent names: the torch module and its gate count (LSTM: input, forget, cell, output
# gates, Hochreiter & Schmidhuber 1997; GRU: reset, update, new, Cho et al. 2014)
RNN_CELLS: dict[str, tuple[type[nn.RNNBase], int]] = {"lstm": (nn.LSTM, RNN_GATES["lstm"]), "gru": (nn.GRU, RNN_GATES["gru"])}
registry_names(RNN_CELLS, RNN_CELL_NAMES, "models/rnn.py:RNN_CELLS")


def rnn_layer_params(arch: str, d_in: int, hidden: int) -> int:
    """Parameters of one torch LSTM/GRU layer: gates * (W_ih (h, d_in) + W_hh (h, h) + b_ih + b_hh)."""
    gates = RNN_CELLS[arch][1]
    return gates * (hidden * (d_in + hidden) + 2 * hidden)


def rnn_params(arch: str, d_model: int, hidden: int, n_layers: int) -> int:
    """Parameters of the recurrent stack: layer 0 reads d_model, the others read the hidden size (torch's
    documented count for nn.LSTM/nn.GRU; tests/test_rnn.py checks it on built stacks)."""
    return rnn_layer_params(arch, d_model, hidden) + (n_layers - 1) * rnn_layer_params(arch, hidden, hidden)


@functools.lru_cache(maxsize=64)  # EncoderConfig is frozen (hashable); the limits check and the model both ask
def transformer_params(cfg: EncoderConfig) -> int:
    """Parameters of the Transformer encoder of the same d_model and n_layers (every other toggle at
    its default; positional table left out: the RNN gets the same one), counted on the model itself
    (ablate.models.meta: the meta device, nothing allocated, any depth)."""
    from dataclasses import replace

    from .meta import encoder_parameters

    return encoder_parameters(replace(cfg, arch="transformer", rnn_hidden=None, rnn_init="default",
                                      pos_enc="none", n_heads=1))


def matched_hidden(cfg: EncoderConfig) -> int:
    """The hidden size whose recurrent stack (`rnn_params`) is closest in parameters to the Transformer
    encoder of the same config (`transformer_params`); the smaller size on a tie. The embedding, the
    positional table and the output head are not counted: the first two are the same for both, and
    the head's input width is the hidden size (d_model for the Transformer).

    With n_heads=1 standing in for the default heads: with d_head unset, only n_heads * d_head =
    d_model enters the count, so any n_heads that divides d_model gives the same number. Solved as
    the root of rnn_params(h) = target (gates * (a h^2 + b h), a = 2L - 1, b = d_model + 2L), then
    settled by counting: a few integer operations at any size."""
    target, arch, d, n = transformer_params(cfg), cfg.arch, cfg.d_model, cfg.n_layers
    a, b, gates = 2 * n - 1, d + 2 * n, RNN_CELLS[arch][1]
    hidden = max(1, (math.isqrt(b * b + 4 * a * (target // gates)) - b) // (2 * a))
    while hidden > 1 and rnn_params(arch, d, hidden, n) > target:
        hidden -= 1
    while rnn_params(arch, d, hidden + 1, n) <= target:
        hidden += 1
    above, below = rnn_params(arch, d, hidden + 1, n), rnn_params(arch, d, hidden, n)
    return hidden + 1 if above - target < target - below else hidden


def _forget_bias(rnn: nn.LSTM, forget: torch.Tensor, input_gate: torch.Tensor | None = None) -> None:
    """Set the LSTM's forget-gate bias (and the input gate's) to these values: torch adds bias_ih and bias_hh,
    so the value goes in bias_ih and that gate's part of bias_hh is zeroed. Gate order: i, f, g, o."""
    h = rnn.hidden_size
    with torch.no_grad():
        rnn.bias_ih_l0[h:2 * h].copy_(forget)
        rnn.bias_hh_l0[h:2 * h].zero_()
        if input_gate is not None:
            rnn.bias_ih_l0[:h].copy_(input_gate)
            rnn.bias_hh_l0[:h].zero_()


def _forget1(rnn: nn.LSTM, t_max: int) -> None:
    _forget_bias(rnn, torch.ones(rnn.hidden_size))  # Gers et al. 2000; Jozefowicz et al. 2015


def _chrono(rnn: nn.LSTM, t_max: int) -> None:
    """Tallec & Ollivier 2018, "Can recurrent neural networks warp time?", sec. 4: b_f ~ log(U(1, T_max - 1)),
    b_i = -b_f, so each unit starts with a memory time drawn up to the longest dependency T_max."""
    if t_max < 3:
        raise ValueError(f"rnn_init='chrono' draws memory times up to max_len - 1 and needs max_len >= 3, got "
                         f"{t_max or None}; set max_len (ablate.config.Config sets it to the task's longest sequence)")
    forget = torch.log(torch.empty(rnn.hidden_size).uniform_(1.0, t_max - 1.0))
    _forget_bias(rnn, forget, -forget)


# model.rnn_init: what is done to a freshly built (torch-initialised) LSTM layer, given T_max = model.max_len
RNN_INITS = {"default": lambda rnn, t_max: None, "forget1": _forget1, "chrono": _chrono}
registry_names(RNN_INITS, RNN_INIT_NAMES, "models/rnn.py:RNN_INITS")


class RecurrentLayer(nn.Module):
    """One uni-directional LSTM/GRU layer, then dropout on its outputs (none after the last layer).

    Shaped like a `Block` for the probes: `forward(x, need_weights)` returns (y, None) (no attention
    weights), and `sublayers` is {"rnn": self}, whose output[0] is the layer's hidden state (B, T, h).
    Public parts: `rnn` (the torch module: weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0)."""

    def __init__(self, arch: str, d_in: int, hidden: int, dropout: float, init: str = "default", t_max: int = 0):
        super().__init__()
        cell = RNN_CELLS[arch][0]
        self.rnn = cell(d_in, hidden, num_layers=1, batch_first=True)
        RNN_INITS[init](self.rnn, t_max)
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    @property
    def sublayers(self) -> dict[str, nn.Module]:
        return {"rnn": self}

    def forward(self, x: torch.Tensor, need_weights: bool = False) -> tuple[torch.Tensor, None]:
        """(B, T, d_in) -> ((B, T, hidden), None); the state starts at zero for every sequence."""
        y, _ = self.rnn(x)  # (B, T, h); the final state (h_T, c_T) is y[:, -1] for the last layer
        return self.drop(y), None


class RecurrentEncoder(nn.Module):
    """(B, T, d_model) -> (B, T, hidden): the positional input slot (as the Transformer's), then
    n_layers uni-directional LSTM or GRU layers. `forward(x, return_attention=True)` gives (y, []):
    there are no attention maps.

    Public parts: `blocks` (the RecurrentLayers, in order), `positional`, `hidden`, `d_out` (= hidden,
    the width the task head reads)."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        if cfg.arch not in RNN_CELLS:
            raise ValueError(f"arch={cfg.arch!r} is not a recurrent arch; choose one of {', '.join(RNN_CELLS)}")
        self.cfg = cfg
        self.hidden = cfg.rnn_hidden if cfg.rnn_hidden is not None else matched_hidden(cfg)
        self.d_out = self.hidden
        self.positional = build_positional(cfg)  # input slot only: the config refuses rope and alibi
        self.pos_enc = self.positional.input
        widths = [cfg.d_model] + [self.hidden] * (cfg.n_layers - 1)
        last = cfg.n_layers - 1
        self.blocks = nn.ModuleList(
            RecurrentLayer(cfg.arch, d_in, self.hidden, cfg.dropout if i < last else 0.0, cfg.rnn_init, cfg.max_len or 0)
            for i, d_in in enumerate(widths)
        )

    def forward(self, x: torch.Tensor, return_attention: bool = False):
        """Returns y (B, T, hidden), or (y, []) with return_attention."""
        x = self.pos_enc(x)
        for layer in self.blocks:
            x, _ = layer(x)
        return (x, []) if return_attention else x
