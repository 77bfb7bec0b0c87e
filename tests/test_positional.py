"""Positional encodings against their papers' closed forms, computed independently here.

Sinusoidal: Vaswani et al. 2017, sec. 3.5, PE(pos, 2i) = sin(pos / 10000^(2i/d)),
PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), evaluated in float64 with plain `math`.
RoPE: Su et al. 2021 (RoFormer), eq. 34: f(x, m) = R_m x with R_m block-diagonal of 2x2 rotations
by m * theta_i, theta_i = 10000^(-2i/d); built explicitly as a matrix and multiplied.
"""

from __future__ import annotations

import math

import pytest
import torch

from ablate.models import Encoder, EncoderConfig, LearnedPE, RoPE, SinusoidalPE, sinusoidal_table

from .tolerance import assert_close, atol, max_abs, max_abs_logit


def angle_atol(max_angle: float, size: float = 1.0) -> float:
    """float32 rounds an angle a to a(1 + eps): sin/cos of it are off by up to eps * a, times the size
    of what they multiply. Twice that; measured here: <= 0.3 eps * a."""
    return atol(max_angle, size, factor=2)


def closed_form_sinusoidal(length: int, d_model: int) -> torch.Tensor:
    rows = []
    for pos in range(length):
        row = []
        for j in range(d_model):
            i2 = j - (j % 2)  # the "2i" of both PE(pos, 2i) and PE(pos, 2i+1)
            angle = pos / 10000 ** (i2 / d_model)
            row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


def rope_matrix(m: int, d: int, base: float = 10000.0) -> torch.Tensor:
    """R^d_{Theta,m} of RoFormer eq. 15/34, float64, (d, d)."""
    R = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        theta = base ** (-2 * i / d)
        c, s = math.cos(m * theta), math.sin(m * theta)
        R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = c, -s
        R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = s, c
    return R


# ---------------------------------------------------------------- sinusoidal


@pytest.mark.parametrize("d_model", [1, 2, 3, 8, 15, 16, 33, 64])
def test_sinusoidal_table_is_the_closed_form(d_model):
    length = 50
    table = sinusoidal_table(length, d_model)
    assert table.shape == (length, d_model)
    expected = closed_form_sinusoidal(length, d_model)
    torch.testing.assert_close(table.double(), expected, atol=angle_atol(length - 1), rtol=0)


def test_sinusoidal_table_long_positions():
    """Up to position 511: float32 angles lose ~pos*eps, still far below any real mistake."""
    table = sinusoidal_table(512, 12)
    expected = closed_form_sinusoidal(512, 12)
    torch.testing.assert_close(table.double(), expected, atol=angle_atol(511), rtol=0)


def test_sinusoidal_table_known_values():
    """Hand-checkable entries: pos 0 is [0, 1, 0, 1, ...]; column 0/1 is sin(pos)/cos(pos)."""
    table = sinusoidal_table(4, 6)
    assert torch.equal(table[0], torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 1.0]))
    torch.testing.assert_close(table[3, 0], torch.tensor(math.sin(3.0)))
    torch.testing.assert_close(table[3, 1], torch.tensor(math.cos(3.0)))
    # the last pair has frequency 10000^(-4/6)
    torch.testing.assert_close(table[2, 5], torch.tensor(math.cos(2 * 10000 ** (-4 / 6))))


@pytest.mark.parametrize("d_model", [6, 7])
def test_sinusoidal_pe_adds_table_and_works_past_max_len(d_model):
    pe = SinusoidalPE(d_model, max_len=8)
    x = torch.randn(2, 20, d_model)  # longer than max_len
    y = pe(x)
    assert y.shape == x.shape
    expected = x.double() + closed_form_sinusoidal(20, d_model)
    torch.testing.assert_close(y.double(), expected, atol=angle_atol(19, max_abs(x)), rtol=0)
    short = torch.randn(2, 5, d_model)
    torch.testing.assert_close(
        pe(short).double(),
        short.double() + closed_form_sinusoidal(5, d_model),
        atol=angle_atol(4, max_abs(short)),
        rtol=0,
    )


def test_sinusoidal_encoder_runs_past_max_len():
    cfg = EncoderConfig(
        d_model=8, n_heads=2, n_layers=1, pos_enc="sinusoidal", max_len=4, dropout=0.0
    )
    y = Encoder(cfg).eval()(torch.randn(2, 9, 8))
    assert y.shape == (2, 9, 8) and torch.isfinite(y).all()


def test_learned_pe_adds_its_rows_and_rejects_long_sequences():
    torch.manual_seed(0)
    pe = LearnedPE(5, max_len=6)
    x = torch.randn(3, 4, 5)
    torch.testing.assert_close(pe(x), x + pe.weight[:4], atol=0, rtol=0)
    pe(torch.randn(1, 6, 5))  # exactly max_len is fine
    with pytest.raises(ValueError, match=r"max_len=6") as info:
        pe(torch.randn(1, 7, 5))
    assert "7" in str(info.value)


def test_learned_encoder_rejects_long_sequences():
    cfg = EncoderConfig(d_model=8, n_heads=2, n_layers=1, pos_enc="learned", max_len=4)
    with pytest.raises(ValueError, match=r"max_len=4"):
        Encoder(cfg)(torch.randn(1, 5, 8))


# ---------------------------------------------------------------- RoPE


@pytest.mark.parametrize("d_head", [2, 4, 8, 16])
def test_rope_is_the_roformer_rotation(d_head):
    torch.manual_seed(1)
    T = 12
    rope = RoPE(d_head, max_len=T)
    x = torch.randn(2, 3, T, d_head)  # (B, nh, T, hs)
    y = rope(x).double()
    assert y.shape == x.shape
    for m in range(T):
        R = rope_matrix(m, d_head)
        expected = x[:, :, m].double() @ R.T  # (R_m x) for each row vector x
        torch.testing.assert_close(y[:, :, m], expected, atol=angle_atol(T - 1, max_abs(x)), rtol=0)


def test_rope_past_max_len_is_still_the_rotation():
    torch.manual_seed(2)
    rope = RoPE(8, max_len=4)
    x = torch.randn(1, 1, 20, 8)
    y = rope(x).double()
    for m in (0, 3, 4, 11, 19):
        torch.testing.assert_close(
            y[0, 0, m], rope_matrix(m, 8) @ x[0, 0, m].double(), atol=angle_atol(19, max_abs(x)), rtol=0
        )


@pytest.mark.parametrize("causal", [False, True])
def test_rope_encoder_past_max_len_fused_equals_explicit(causal):
    torch.manual_seed(6)
    cfg = EncoderConfig(
        d_model=8, n_heads=2, n_layers=2, pos_enc="rope", max_len=4, causal=causal, dropout=0.0
    )
    enc = Encoder(cfg).eval()
    x = torch.randn(2, 11, 8)
    with torch.no_grad():
        fused = enc(x)
        explicit, maps = enc(x, return_attention=True)
    assert fused.shape == (2, 11, 8) and torch.isfinite(fused).all()
    assert_close(fused, explicit, max_abs_logit(enc, x))
    assert maps[0].shape == (2, 2, 11, 11)


def test_rope_position_zero_is_identity_and_rotation_is_not():
    x = torch.randn(1, 1, 3, 8)
    y = RoPE(8, 16)(x)
    torch.testing.assert_close(y[..., 0, :], x[..., 0, :], atol=0, rtol=0)
    assert (y[..., 1, :] - x[..., 1, :]).abs().max() > 1e-2


def test_rope_preserves_norms():
    torch.manual_seed(3)
    x = torch.randn(4, 2, 30, 16)
    y = RoPE(16, 64)(x)
    assert_close(y.norm(dim=-1), x.norm(dim=-1))


def test_rope_dot_product_depends_only_on_offset():
    """<R_m q, R_n k> = q^T R_{n-m} k: rotate the same q at every m and the same k at every n."""
    torch.manual_seed(4)
    d, T = 16, 24
    rope = RoPE(d, T)
    q, k = torch.randn(d), torch.randn(d)
    rq = rope(q.expand(1, 1, T, d))[0, 0]  # row m: q rotated to position m
    rk = rope(k.expand(1, 1, T, d))[0, 0]
    dots = rq @ rk.T  # dots[m, n] = <R_m q, R_n k>
    for offset in range(-(T - 1), T):
        diag = torch.diagonal(dots, offset=-offset)  # entries with m - n = offset
        expected = q.double() @ rope_matrix(-offset, d) @ k.double()  # q^T R_{n-m} k
        torch.testing.assert_close(
            diag.double(), expected.expand_as(diag), atol=angle_atol(T - 1, max_abs(dots)), rtol=0
        )
    # and it does depend on the offset: not all diagonals are equal
    assert (dots.diagonal(0).mean() - dots.diagonal(3).mean()).abs() > 1e-3


def test_rope_is_applied_to_queries_and_keys_not_values():
    from ablate.models import MultiHeadAttention, Positional

    torch.manual_seed(5)
    cfg = EncoderConfig(d_model=8, n_heads=2, n_layers=1, pos_enc="rope", max_len=6, dropout=0.0)
    rope = RoPE(cfg.head_dim, cfg.max_len)
    attn = MultiHeadAttention(cfg, Positional(qk=rope))
    x = torch.randn(2, 6, 8)
    q, k, v = attn.project(x)
    raw = attn.qkv(x).view(2, 6, 3, 2, 4).permute(2, 0, 3, 1, 4)
    torch.testing.assert_close(q, rope(raw[0]), atol=0, rtol=0)
    torch.testing.assert_close(k, rope(raw[1]), atol=0, rtol=0)
    torch.testing.assert_close(v, raw[2], atol=0, rtol=0)


def test_learned_positions_start_as_the_tutorials_randn_and_keep_the_small_option():
    """The tutorial's code: nn.Parameter(torch.randn(max_len, d_model)), i.e. N(0, 1); 0.02 on request."""
    torch.manual_seed(0)
    table = Encoder(EncoderConfig(d_model=64, max_len=512)).positional.input.weight
    assert table.std().item() == pytest.approx(1.0, abs=0.01)  # 32,768 draws: std error ~0.004
    assert table.mean().item() == pytest.approx(0.0, abs=0.02)
    small = Encoder(EncoderConfig(d_model=64, max_len=512, learned_std=0.02)).positional.input.weight
    assert small.std().item() == pytest.approx(0.02, rel=0.02)
