"""ALiBi (Press et al. 2022, "Train Short, Test Long") against its closed form, computed here.

Slopes: m_h = 2^(-8h/H), h = 1..H, for H a power of two; for other H the reference code's rule
(the slopes for the largest power of two P < H, then every other slope for 2P). Bias: -m_h |i - j|
added to the scaled scores, which with a causal mask leaves the paper's -m_h (i - j) for j <= i.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from ablate.models import Encoder, EncoderConfig, MultiHeadAttention, build_positional
from ablate.models.positional import ALiBi, alibi_slopes

from .tolerance import assert_close, atol, max_abs, max_abs_logit


def test_slopes_for_a_power_of_two_are_geometric_from_2_to_the_minus_8_over_h():
    assert alibi_slopes(8) == [2.0**-1, 2.0**-2, 2.0**-3, 2.0**-4, 2.0**-5, 2.0**-6, 2.0**-7, 2.0**-8]
    assert alibi_slopes(4) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]
    assert alibi_slopes(1) == [2.0**-8]
    for H in (2, 16, 32):
        assert alibi_slopes(H) == pytest.approx([2 ** (-8 * h / H) for h in range(1, H + 1)], rel=1e-12)


def test_slopes_for_other_head_counts_interleave_the_next_power_of_two():
    """H = 6: the four of H = 4, then the 1st and 3rd of H = 8 (2^-1, 2^-3); H = 3: two of H = 2,
    then the 1st of H = 4; H = 12: all eight of H = 8, then the odd-indexed of H = 16."""
    assert alibi_slopes(6) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    assert alibi_slopes(3) == [2.0**-4, 2.0**-8, 2.0**-2]
    sixteen = [2 ** (-8 * h / 16) for h in range(1, 17)]
    assert alibi_slopes(12) == pytest.approx(alibi_slopes(8) + sixteen[0::2][:4], rel=1e-12)
    assert all(len(alibi_slopes(H)) == H and len(set(alibi_slopes(H))) == H for H in range(1, 20))


def test_the_bias_is_minus_slope_times_distance_at_any_length():
    T, H = 700, 4  # longer than the default max_len: ALiBi has no table
    bias = ALiBi(H)(T, torch.empty(0))
    assert bias.shape == (H, T, T)
    i, j = torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij")
    for h, m in enumerate(alibi_slopes(H)):
        torch.testing.assert_close(bias[h], -m * (i - j).abs().float(), atol=0, rtol=0)


def _hand_logits(attn: MultiHeadAttention, x: torch.Tensor, cfg: EncoderConfig) -> torch.Tensor:
    """q k^T * scale - m_h |i - j| (+ causal -inf) from the raw weight rows, float64."""
    B, T, _ = x.shape
    W, b = attn.qkv.weight.double(), attn.qkv.bias.double()
    inner, nh, hs = cfg.inner_dim, cfg.n_heads, cfg.head_dim
    q, k = ((x.double() @ W[i * inner : (i + 1) * inner].T + b[i * inner : (i + 1) * inner])
            .view(B, T, nh, hs).transpose(1, 2) for i in range(2))  # fmt: skip
    scale = (1 / math.sqrt(hs) if cfg.qk_scale else 1.0) / cfg.temperature
    logits = (q @ k.transpose(-2, -1)) * scale  # (B, nh, T, T)
    for h, m in enumerate(alibi_slopes(nh)):
        for i in range(T):
            for j in range(T):
                if cfg.causal and j > i:
                    logits[:, h, i, j] = float("-inf")
                elif cfg.causal:
                    logits[:, h, i, j] -= m * (i - j)  # the paper's causal form
                else:
                    logits[:, h, i, j] -= m * abs(i - j)
    return logits


@pytest.mark.parametrize("n_heads", [2, 3])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("temperature", [0.1, 1.0])
@pytest.mark.parametrize("qk_scale", [True, False])
def test_explicit_logits_are_the_closed_form(qk_scale, temperature, causal, n_heads):
    torch.manual_seed(0)
    cfg = EncoderConfig(d_model=12, n_heads=n_heads, d_head=4, qk_scale=qk_scale,
                        temperature=temperature, causal=causal, pos_enc="alibi", dropout=0.0)  # fmt: skip
    attn = MultiHeadAttention(cfg, build_positional(cfg)).eval()
    x = torch.randn(2, 9, 12)
    with torch.no_grad():
        logits = attn.logits(*attn.project(x)[:2])
        fused, _ = attn(x)
        explicit, weights = attn(x, need_weights=True)
        y64 = copy.deepcopy(attn).double()(x.double())[0]
    expected = _hand_logits(attn, x, cfg)
    scores = max_abs(expected)
    assert_close(logits, expected, math.sqrt(cfg.head_dim))
    assert_close(weights, expected.softmax(-1), scores)
    assert_close(fused, y64, scores)  # the fused path (float attn_mask) computes the same
    assert_close(explicit, y64, scores)


@pytest.mark.parametrize("causal", [False, True])
def test_constant_input_gives_attention_that_depends_on_distance_only(causal):
    """All tokens equal: q.k is one number c, so every score is c - m_h |i - j| and within each row
    the weights are the same function of the distance, exp(-m_h |i - j|) / Z_i."""
    torch.manual_seed(1)
    cfg = EncoderConfig(d_model=16, n_heads=4, n_layers=1, pos_enc="alibi", causal=causal, dropout=0.0)
    enc = Encoder(cfg).eval()
    T = 11
    x = torch.randn(1, 1, 16).expand(3, T, 16)
    with torch.no_grad():
        w = enc(x, return_attention=True)[1][0]  # (B, H, T, T)
    i, j = torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij")
    visible = j <= i if causal else torch.ones(T, T, dtype=torch.bool)
    for h, m in enumerate(alibi_slopes(4)):
        log_w = w[:, h].log()  # (B, T, T)
        relative = log_w - log_w.diagonal(dim1=-2, dim2=-1)[..., :, None]  # log w_ij - log w_ii
        expected = (-m * (i - j).abs()).float().expand(3, T, T)
        assert_close(relative[:, visible], expected[:, visible])
        if not causal:  # symmetric in the distance: w[i, i - d] == w[i, i + d]
            for d in range(1, 4):
                assert_close(w[:, h, 5, 5 - d], w[:, h, 5, 5 + d])
        assert (w[:, h, ~visible] == 0).all()
    # the other schemes do not do this: no positions give a uniform row, RoPE and sinusoidal others
    for pos_enc in ("none", "rope", "sinusoidal"):
        other = Encoder(EncoderConfig(d_model=16, n_heads=4, n_layers=1, pos_enc=pos_enc)).eval()
        with torch.no_grad():
            wo = other(x, return_attention=True)[1][0][0, 0]
        assert (wo.log() - wo.diagonal().log()[:, None] - (-0.25 * (i - j).abs())).abs().max() > 1e-2


@pytest.mark.parametrize("causal", [False, True])
def test_works_past_max_len_and_adds_no_parameters_or_state(causal):
    torch.manual_seed(2)
    cfg = EncoderConfig(d_model=8, n_heads=2, n_layers=2, pos_enc="alibi", max_len=4, causal=causal)
    enc = Encoder(cfg).eval()
    x = torch.randn(2, 13, 8)
    with torch.no_grad():
        fused = enc(x)
        explicit = enc(x, return_attention=True)[0]
    assert_close(fused, explicit, max_abs_logit(enc, x))
    torch.manual_seed(2)
    none = Encoder(EncoderConfig(d_model=8, n_heads=2, n_layers=2, pos_enc="none", max_len=4, causal=causal))
    assert enc.state_dict().keys() == none.state_dict().keys()
    for (name, p), (_, q) in zip(enc.named_parameters(), none.named_parameters(), strict=True):
        assert torch.equal(p, q), name  # same init: ALiBi draws no random numbers


def test_alibi_under_bf16_autocast_passes_a_mask_of_the_query_dtype(monkeypatch):
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, **kw):
        calls.append((q.dtype, kw["attn_mask"].dtype))
        return real(q, k, v, **kw)

    monkeypatch.setattr("ablate.models.attention.F.scaled_dot_product_attention", recording)
    cfg = EncoderConfig(d_model=16, n_heads=4, n_layers=2, pos_enc="alibi", causal=True, dropout=0.0)
    enc = Encoder(cfg).eval()
    x = torch.randn(2, 9, 16)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        fused = enc(x)
        explicit = enc(x, return_attention=True)[0]
    assert calls == [(torch.bfloat16, torch.bfloat16)] * 2
    assert torch.isfinite(fused).all()
    tol = atol(max_abs(explicit), max_abs_logit(enc, x), dtype=torch.bfloat16)
    torch.testing.assert_close(fused, explicit.to(fused.dtype), atol=tol, rtol=0)
