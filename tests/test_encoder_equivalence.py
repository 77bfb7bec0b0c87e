"""Our Encoder against PyTorch's own nn.TransformerEncoder (a reference nobody here wrote).

With pos_enc="none", residuals on, qk_scale on and temperature 1, `norm="post"` must be
`nn.TransformerEncoder` of `nn.TransformerEncoderLayer(norm_first=False)` layers and
`norm="pre"` the same with `norm_first=True` plus a final `nn.LayerNorm`, once the weights are
copied across. Checked in eval mode (outputs and attention maps) and in train mode with dropout 0
(gradients of every copied parameter).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ablate.models import Encoder, EncoderConfig, MultiHeadAttention

from . import tolerance


def assert_close(actual: torch.Tensor, expected: torch.Tensor, n_layers: int) -> None:
    """Within 16 float32 eps of max|expected| per layer (5.7e-6 a layer for LayerNorm outputs of size
    3): a tolerance that follows the values' size and the depth, not the machine (tests/tolerance.py).
    Each layer adds its own rounding, and its LayerNorm keeps the values O(1), so the errors add up
    rather than multiply. Measured here (outputs, maps, gradients; 2 norms x 2 activations x 1 and 4
    heads x 3 seeds): <= 2.9 eps at 1-3 layers, 3.2 at 6, 4.1 at 12."""
    tolerance.assert_close(actual, expected, factor=16 * n_layers)


def _config(n_layers: int, n_heads: int, norm: str, activation: str, **kw) -> EncoderConfig:
    base = dict(
        d_model=16,
        n_heads=n_heads,
        n_layers=n_layers,
        ffn_mult=2,
        activation=activation,
        qk_scale=True,
        temperature=1.0,
        residual=True,
        norm=norm,
        pos_enc="none",
        causal=False,
        init="default",
        dropout=0.0,
    )
    base.update(kw)
    return EncoderConfig(**base)


def _reference(cfg: EncoderConfig) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(
        d_model=cfg.d_model,
        nhead=cfg.n_heads,
        dim_feedforward=cfg.ffn_dim,
        dropout=cfg.dropout,
        activation=cfg.activation,
        batch_first=True,
        norm_first=cfg.norm == "pre",
    )
    final = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else None
    return nn.TransformerEncoder(
        layer, num_layers=cfg.n_layers, norm=final, enable_nested_tensor=False
    )


def _copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    assert dst.shape == src.shape, (dst.shape, src.shape)
    dst.copy_(src)


@torch.no_grad()
def _copy_weights(
    ours: Encoder, ref: nn.TransformerEncoder
) -> list[tuple[nn.Parameter, nn.Parameter]]:
    """Copy ours -> ref (after randomising our norms); return the (ours, theirs) parameter pairs."""
    pairs = []
    for block, layer in zip(ours.blocks, ref.layers, strict=True):
        attn, ffn = block.attention, block.feed_forward
        n1, n2 = block.norms  # pre or post, as torch's norm1 / norm2 with norm_first or not
        for ln in (n1, n2):  # LayerNorm starts at (1, 0): perturb so the copy is really tested
            ln.weight.add_(0.1 * torch.randn_like(ln.weight))
            ln.bias.add_(0.1 * torch.randn_like(ln.bias))
        # written out here on purpose, not taken from ablate.bench.speed: the test's own map is the
        # independent reference that the benchmark's copy is checked against
        pairs += [
            (attn.qkv.weight, layer.self_attn.in_proj_weight),
            (attn.qkv.bias, layer.self_attn.in_proj_bias),
            (attn.out.weight, layer.self_attn.out_proj.weight),
            (attn.out.bias, layer.self_attn.out_proj.bias),
            (ffn.fc1.weight, layer.linear1.weight),
            (ffn.fc1.bias, layer.linear1.bias),
            (ffn.fc2.weight, layer.linear2.weight),
            (ffn.fc2.bias, layer.linear2.bias),
            (n1.weight, layer.norm1.weight),
            (n1.bias, layer.norm1.bias),
            (n2.weight, layer.norm2.weight),
            (n2.bias, layer.norm2.bias),
        ]
    if ours.cfg.norm == "pre":
        ours.final_norm.weight.add_(0.1 * torch.randn_like(ours.final_norm.weight))
        ours.final_norm.bias.add_(0.1 * torch.randn_like(ours.final_norm.bias))
        pairs += [
            (ours.final_norm.weight, ref.norm.weight),
            (ours.final_norm.bias, ref.norm.bias),
        ]
    else:
        assert ref.norm is None
    for mine, theirs in pairs:
        _copy(theirs, mine)
    return pairs


def _pair(n_layers, n_heads, norm, activation, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = _config(n_layers, n_heads, norm, activation, **kw)
    ours, ref = Encoder(cfg), _reference(cfg)
    pairs = _copy_weights(ours, ref)
    return cfg, ours, ref, pairs


def _reference_attention_maps(ref: nn.TransformerEncoder, x: torch.Tensor, norm: str):
    """Each torch layer's head-wise attention weights, from nn.MultiheadAttention itself."""
    maps = []
    h = x
    for layer in ref.layers:
        a_in = layer.norm1(h) if norm == "pre" else h
        _, w = layer.self_attn(a_in, a_in, a_in, need_weights=True, average_attn_weights=False)
        maps.append(w)  # (B, nh, T, T)
        h = layer(h)
    return maps


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("n_heads", [1, 2, 4, 8])
@pytest.mark.parametrize("n_layers", [1, 2, 3])
def test_matches_torch_transformer_encoder_eval(n_layers, n_heads, norm, activation):
    cfg, ours, ref, _ = _pair(n_layers, n_heads, norm, activation)
    ours.eval()
    ref.eval()
    x = torch.randn(3, 7, cfg.d_model)
    with torch.no_grad():
        expected = ref(x)
        fused = ours(x)
        explicit, maps = ours(x, return_attention=True)
        ref_maps = _reference_attention_maps(ref, x, norm)
    assert fused.shape == expected.shape == (3, 7, cfg.d_model)
    assert_close(fused, expected, n_layers)
    assert_close(explicit, expected, n_layers)
    assert len(maps) == len(ref_maps) == n_layers
    for mine, theirs in zip(maps, ref_maps, strict=True):
        assert mine.shape == (3, n_heads, 7, 7)
        assert_close(mine, theirs, n_layers)
    # the comparison is meaningful: the reference output is not trivially the input
    assert (expected - x).abs().max() > 0.1


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("n_heads", [1, 4])
def test_matches_torch_transformer_encoder_eval_deep(n_heads, norm):
    """Six layers: errors would compound with depth."""
    cfg, ours, ref, _ = _pair(6, n_heads, norm, "gelu", seed=1)
    ours.eval()
    ref.eval()
    x = torch.randn(2, 9, cfg.d_model)
    with torch.no_grad():
        expected = ref(x)
        assert_close(ours(x), expected, cfg.n_layers)
        assert_close(ours(x, return_attention=True)[0], expected, cfg.n_layers)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("n_heads", [1, 2, 4])
@pytest.mark.parametrize("n_layers", [1, 3])
def test_gradients_match_torch_in_train_mode(n_layers, n_heads, norm, activation):
    cfg, ours, ref, pairs = _pair(n_layers, n_heads, norm, activation, seed=2)
    ours.train()
    ref.train()
    x = torch.randn(2, 6, cfg.d_model)
    target = torch.randn(2, 6, cfg.d_model)  # fixed random read-out: sum(LN(x)) would have 0 grad
    for return_attention in (False, True):
        ours.zero_grad()
        ref.zero_grad()
        y_ref = ref(x)
        y = ours(x, return_attention=True)[0] if return_attention else ours(x)
        assert_close(y, y_ref, n_layers)
        (y * target).sum().backward()
        (y_ref * target).sum().backward()
        for mine, theirs in pairs:
            assert mine.grad is not None and theirs.grad is not None
            assert theirs.grad.abs().max() > 0
            assert_close(mine.grad, theirs.grad, n_layers)


def _torch_mha(attn: MultiHeadAttention, d_model: int, n_heads: int) -> nn.MultiheadAttention:
    mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
    with torch.no_grad():
        _copy(mha.in_proj_weight, attn.qkv.weight)
        _copy(mha.in_proj_bias, attn.qkv.bias)
        _copy(mha.out_proj.weight, attn.out.weight)
        _copy(mha.out_proj.bias, attn.out.bias)
    return mha


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_heads", [1, 2, 4, 8])
def test_attention_matches_nn_multihead_attention(n_heads, causal):
    torch.manual_seed(3)
    cfg = _config(1, n_heads, "post", "relu", d_model=32, causal=causal)
    attn = MultiHeadAttention(cfg).eval()
    mha = _torch_mha(attn, cfg.d_model, n_heads).eval()
    x = torch.randn(3, 8, cfg.d_model)
    mask = torch.ones(8, 8, dtype=torch.bool).triu(1) if causal else None
    with torch.no_grad():
        y_ref, w_ref = mha(x, x, x, attn_mask=mask, need_weights=True, average_attn_weights=False)
        y_fused, none = attn(x)
        y_explicit, w = attn(x, need_weights=True)
    assert none is None
    assert w.shape == w_ref.shape == (3, n_heads, 8, 8)
    assert_close(w, w_ref, 1)
    assert_close(y_fused, y_ref, 1)
    assert_close(y_explicit, y_ref, 1)
