"""Every toggle combination builds, runs forward and backward at tiny sizes, and trains every
parameter: norm x residual x pos_enc x qk_scale x causal x activation x init x ffn_mult."""

from __future__ import annotations

import itertools

import pytest
import torch

from ablate.models import POS_ENCODINGS, Encoder, EncoderConfig
from ablate.models.attention import INITS

B, T, D, MAX_LEN = 2, 5, 8, 7

GRID = list(
    itertools.product(
        ["pre", "post", "none"],  # norm
        [True, False],  # residual
        list(POS_ENCODINGS),  # pos_enc: every registered scheme
        [True, False],  # qk_scale
        [False, True],  # causal
        ["relu", "gelu"],  # activation
        list(INITS),  # init: every registered scheme
        [0, 2],  # ffn_mult
    )
)
IDS = [
    f"{n}-{'res' if r else 'nores'}-{p}-{'scale' if s else 'noscale'}-{'causal' if c else 'bidir'}-{a}-{i}-ffn{f}"
    for n, r, p, s, c, a, i, f in GRID
]


@pytest.mark.parametrize(
    "norm,residual,pos_enc,qk_scale,causal,activation,init,ffn_mult", GRID, ids=IDS
)
def test_every_combination_runs_and_trains_every_parameter(
    norm, residual, pos_enc, qk_scale, causal, activation, init, ffn_mult
):
    torch.manual_seed(0)
    cfg = EncoderConfig(
        d_model=D,
        n_heads=2,
        n_layers=2,
        norm=norm,
        residual=residual,
        pos_enc=pos_enc,
        qk_scale=qk_scale,
        causal=causal,
        activation=activation,
        init=init,
        ffn_mult=ffn_mult,
        max_len=MAX_LEN,
        dropout=0.1,
    )
    enc = Encoder(cfg).train()
    x = torch.randn(B, T, D)
    y, maps = enc(x, return_attention=True)
    assert y.shape == (B, T, D)
    assert torch.isfinite(y).all()
    assert len(maps) == 2 and all(m.shape == (B, 2, T, T) for m in maps)
    # a fixed random read-out: sum(y) alone has zero gradient through a final LayerNorm
    loss = (enc(x) * torch.randn(B, T, D)).sum() + (y * torch.randn(B, T, D)).sum()
    loss.backward()

    params = dict(enc.named_parameters())
    assert params, "the encoder has parameters"
    for name, p in params.items():
        assert p.grad is not None, f"{name} got no gradient"
        assert torch.isfinite(p.grad).all(), f"{name} has a non-finite gradient"
        if name == "pos_enc.weight":
            # rows of the learned table past the sequence length are legitimately untouched
            assert p.grad[:T].abs().min(dim=-1).values.gt(0).all(), name
            assert (p.grad[T:] == 0).all(), name
        else:
            assert p.grad.abs().sum() > 0, f"{name} got an all-zero gradient"
    # no stray parameters: the only ones are the ones this configuration should have
    expected = 2 * (4 * D * D + 4 * D)  # qkv + out per layer
    expected += 2 * (2 * ffn_mult * D * D + ffn_mult * D + D) if ffn_mult else 0
    sublayers_per_block = 2 if ffn_mult else 1
    n_norms = {"pre": 2 * sublayers_per_block + 1, "post": 2 * sublayers_per_block, "none": 0}[norm]
    expected += n_norms * 2 * D
    expected += MAX_LEN * D if pos_enc == "learned" else 0
    assert sum(p.numel() for p in params.values()) == expected


def test_the_identity_activation_makes_the_ffn_one_linear_map():
    """model.activation=identity (the tutorial's "唯有激活函数能把空间折弯": without it the FFN cannot fold): the
    FFN is the single affine map x W1ᵀW2ᵀ + (W2 b1 + b2), written out from its weights; with ReLU it is not."""
    from ablate.models.block import FeedForward

    torch.manual_seed(0)
    x = torch.randn(3, 5, D)
    for activation, linear in (("identity", True), ("relu", False)):
        ffn = FeedForward(EncoderConfig(d_model=D, n_heads=2, ffn_mult=4, activation=activation, dropout=0.0)).eval()
        w1, b1, w2, b2 = ffn.fc1.weight, ffn.fc1.bias, ffn.fc2.weight, ffn.fc2.bias
        affine = x @ (w2 @ w1).T + (w2 @ b1 + b2)
        f = lambda v, ffn=ffn: ffn(v)[0]  # noqa: E731  (the sub-layer returns (output, no attention map))
        assert torch.allclose(f(x), affine, atol=1e-6) == linear, activation
        # and a linear map's defining property, on two inputs
        a, b = torch.randn(2, D), torch.randn(2, D)
        additive = f(a + b) - f(b) - f(a) + f(torch.zeros(2, D))
        assert (additive.abs().max().item() < 1e-6) == linear, activation
