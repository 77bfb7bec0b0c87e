"""A plain Post-LN encoder written directly, kept beside the benchmark as the speed baseline.

No toggles: one fused qkv projection, `F.scaled_dot_product_attention`, and dropout exactly where
`nn.TransformerEncoderLayer` puts it (attention weights inside SDPA, attention output and FFN
output before their residual adds, FFN hidden after the activation). With the same weights and
dropout 0 it computes `nn.TransformerEncoder` of `nn.TransformerEncoderLayer(norm_first=False)`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ReferenceLayer(nn.Module):
    """x -> LN(x + drop(attn(x))) -> LN(. + drop(fc2(drop(relu(fc1(.))))))  (Vaswani et al. 2017)."""

    def __init__(self, d_model: int, n_heads: int, ffn_dim: int, dropout: float):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)  # rows: [W_Q; W_K; W_V]
        self.out = nn.Linear(d_model, d_model)
        self.fc1 = nn.Linear(d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.p = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        p = self.p if self.training else 0.0
        # (B, T, 3D) -> (3, B, nh, T, hs)
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=p)  # (B, nh, T, hs)
        a = self.out(a.transpose(1, 2).reshape(B, T, D))  # (B, T, D)
        x = self.norm1(x + F.dropout(a, p, self.training))
        h = F.dropout(F.relu(self.fc1(x)), p, self.training)  # (B, T, ffn_dim)
        return self.norm2(x + F.dropout(self.fc2(h), p, self.training))


class ReferenceEncoder(nn.Module):
    """n_layers `ReferenceLayer`s: (B, T, d_model) -> (B, T, d_model)."""

    def __init__(self, d_model: int, n_heads: int, ffn_dim: int, n_layers: int, dropout: float):
        super().__init__()
        self.layers = nn.ModuleList(
            ReferenceLayer(d_model, n_heads, ffn_dim, dropout) for _ in range(n_layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x
