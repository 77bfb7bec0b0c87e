"""The configurable encoder: positional encoding, n_layers blocks, and (Pre-LN only) a final norm."""

from __future__ import annotations

import torch
from torch import nn

from .block import make_block, make_norm
from .config import EncoderConfig
from .positional import build_positional


class Encoder(nn.Module):
    """(B, T, d_model) -> (B, T, d_model). At defaults with pos_enc='none', numerically
    `nn.TransformerEncoder` of `nn.TransformerEncoderLayer`s (norm='pre' adds the final LayerNorm
    that every Pre-LN model ends with).

    Public parts: `blocks` (the Blocks, in order), `positional` (the Positional bundle), `final_norm`,
    `d_out` (= d_model, the width the task head reads).
    """

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        if cfg.arch != "transformer":
            raise ValueError(f"arch={cfg.arch!r} builds a RecurrentEncoder, not an Encoder; use "
                             "ablate.models.build_encoder(cfg)")
        self.cfg = cfg
        self.d_out = cfg.d_model
        self.positional = build_positional(cfg)  # one bundle: input, q/k and score slots
        self.pos_enc = self.positional.input  # registered here; the q/k and score slots in attention
        self.blocks = nn.ModuleList(make_block(cfg, self.positional) for _ in range(cfg.n_layers))
        self.final_norm = make_norm(cfg) if cfg.norm == "pre" else nn.Identity()

    def forward(self, x: torch.Tensor, return_attention: bool = False):
        """Returns y, or (y, [weights of layer l: (B, n_heads, T, T) post-softmax]) with return_attention."""
        x = self.pos_enc(x)
        maps = []
        for block in self.blocks:
            x, weights = block(x, return_attention)
            maps.append(weights)
        y = self.final_norm(x)
        return (y, maps) if return_attention else y
