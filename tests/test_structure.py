"""Structural facts of the built modules: which slots exist for each toggle, what the residual
and norm slots compute, the initialisations' distributions, and parameter bookkeeping."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ablate.models import (
    Encoder,
    EncoderConfig,
    FeedForward,
    MultiHeadAttention,
    SequenceClassifier,
    SubLayer,
    TokenModel,
    parameter_groups,
)

from .tolerance import assert_close


def _cfg(**kw) -> EncoderConfig:
    base = dict(d_model=8, n_heads=2, n_layers=2, pos_enc="none", dropout=0.0)
    base.update(kw)
    return EncoderConfig(**base)


# ------------------------------------------------------------------ slots


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
def test_ffn_mult_zero_leaves_no_ffn_parameters(norm):
    enc = Encoder(_cfg(ffn_mult=0, norm=norm))
    names = [n for n, _ in enc.named_parameters()]
    assert names and not [n for n in names if "ffn" in n or "fc1" in n or "fc2" in n]
    assert not any(isinstance(m, FeedForward) for m in enc.modules())
    # each block is exactly its attention sub-layer
    block = enc.blocks[0]
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(block(x)[0], block.attn(x)[0], atol=0, rtol=0)


@pytest.mark.parametrize("ffn_mult", [0, 2])
def test_norm_none_leaves_no_layernorm_anywhere(ffn_mult):
    for model in (
        Encoder(_cfg(norm="none", ffn_mult=ffn_mult)),
        SequenceClassifier(_cfg(norm="none", ffn_mult=ffn_mult), in_features=4, n_classes=3),
        TokenModel(_cfg(norm="none", ffn_mult=ffn_mult), n_tokens=5, n_out=5),
    ):
        assert not any(isinstance(m, nn.LayerNorm) for m in model.modules())
        assert not any("norm" in n for n, _ in model.named_parameters())


def test_pre_norm_has_final_layernorm_and_post_does_not():
    pre, post = Encoder(_cfg(norm="pre")), Encoder(_cfg(norm="post"))
    assert isinstance(pre.final_norm, nn.LayerNorm)
    assert isinstance(post.final_norm, nn.Identity)
    for block in pre.blocks:
        for sub in (block.attn, block.ffn):
            assert isinstance(sub.pre_norm, nn.LayerNorm) and isinstance(sub.post_norm, nn.Identity)
    for block in post.blocks:
        for sub in (block.attn, block.ffn):
            assert isinstance(sub.pre_norm, nn.Identity) and isinstance(sub.post_norm, nn.LayerNorm)
    n_ln = lambda m: sum(isinstance(x, nn.LayerNorm) for x in m.modules())  # noqa: E731
    assert (n_ln(pre), n_ln(post)) == (2 * 2 + 1, 2 * 2)


class Doubler(nn.Module):
    """A stand-in sub-layer with an obvious f(x) = 2x + 1 and the (y, weights) protocol."""

    def forward(self, x, need_weights=False):
        return 2 * x + 1, "w"


def _ln(x):
    return F.layer_norm(x, (x.shape[-1],))


@pytest.mark.parametrize(
    "norm,residual,formula",
    [
        ("none", False, lambda x, f: f(x)),
        ("none", True, lambda x, f: x + f(x)),
        ("post", False, lambda x, f: _ln(f(x))),
        ("post", True, lambda x, f: _ln(x + f(x))),
        ("pre", False, lambda x, f: f(_ln(x))),
        ("pre", True, lambda x, f: x + f(_ln(x))),
    ],
)
def test_sublayer_computes_its_formula(norm, residual, formula):
    sub = SubLayer(Doubler(), _cfg(norm=norm, residual=residual), skip=residual)
    x = torch.randn(3, 4, 8) * 3 + 1
    y, w = sub(x, True)
    assert w == "w"  # the weights are passed through untouched
    # LayerNorm ignores the input's scale, so both round by a few eps of the output's size, up to
    # |2x + 1| ~ 20 here: 32 eps * max|expected| (tests/tolerance.py)
    assert_close(y, formula(x, lambda t: 2 * t + 1))


def test_no_residual_sublayer_is_exactly_f_of_x_for_real_layers():
    torch.manual_seed(0)
    cfg = _cfg(norm="none", residual=False, dropout=0.1)
    x = torch.randn(2, 5, 8)
    for fn in (MultiHeadAttention(cfg), FeedForward(cfg)):
        sub = SubLayer(fn, cfg, skip=False).eval()
        torch.testing.assert_close(sub(x)[0], fn(x)[0], atol=0, rtol=0)


def test_dropout_is_off_in_eval_and_on_in_train():
    torch.manual_seed(1)
    enc = Encoder(_cfg(dropout=0.5))
    x = torch.randn(2, 5, 8)
    enc.eval()
    torch.testing.assert_close(enc(x), enc(x), atol=0, rtol=0)
    enc.train()
    assert (enc(x) - enc(x)).abs().max() > 1e-3


# ------------------------------------------------------------------ initialisation


def _uniform_bound_ok(w: torch.Tensor, bound: float) -> None:
    """w ~ U(-bound, bound): inside the bound, reaching close to it, with std bound/sqrt(3)."""
    assert w.abs().max() <= bound + 1e-7
    assert w.abs().max() >= 0.95 * bound
    assert w.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.1)
    assert abs(w.mean().item()) < 0.1 * bound


def test_default_init_is_nn_linear_fan_in_uniform():
    torch.manual_seed(2)
    d, inner = 64, 96
    enc = Encoder(_cfg(d_model=d, n_heads=2, d_head=48, ffn_mult=2, init="default", n_layers=1))
    attn, ffn = enc.blocks[0].attention, enc.blocks[0].feed_forward
    for lin, fan_in in ((attn.qkv, d), (attn.out, inner), (ffn.fc1, d), (ffn.fc2, 2 * d)):
        _uniform_bound_ok(lin.weight, 1 / math.sqrt(fan_in))
        assert lin.bias.abs().max() <= 1 / math.sqrt(fan_in)
        assert lin.bias.abs().max() > 0


def test_xavier_init_zero_biases_and_per_slice_bounds():
    torch.manual_seed(3)
    d, inner = 64, 96  # fan_in != fan_out, so a whole-matrix Xavier would give another bound
    attn = MultiHeadAttention(_cfg(d_model=d, n_heads=2, d_head=48, init="xavier"))
    assert (attn.qkv.bias == 0).all() and (attn.out.bias == 0).all()
    per_slice = math.sqrt(6 / (d + inner))
    assert per_slice != pytest.approx(math.sqrt(6 / (d + 3 * inner)), rel=0.1)
    for i, name in enumerate("QKV"):
        w = attn.qkv.weight[i * inner : (i + 1) * inner]
        assert w.shape == (inner, d), name
        _uniform_bound_ok(w, per_slice)


def test_small_init_is_gpt2_normal():
    torch.manual_seed(4)
    enc = Encoder(_cfg(d_model=64, n_heads=4, init="small", n_layers=1))
    attn, ffn = enc.blocks[0].attention, enc.blocks[0].feed_forward
    for lin in (attn.qkv, attn.out, ffn.fc1, ffn.fc2):
        assert lin.weight.std().item() == pytest.approx(0.02, rel=0.1)
        assert (lin.bias == 0).all()


# ------------------------------------------------------------------ parameter bookkeeping


@pytest.mark.parametrize("pooling", ["mean", "cls"])
@pytest.mark.parametrize("n_layers", [1, 3])
def test_parameter_groups_ffn_share_is_two_thirds_at_ffn_mult_4(n_layers, pooling):
    d, L, in_features, n_classes, max_len = 32, n_layers, 28, 10, 30
    cfg = EncoderConfig(
        d_model=d,
        n_heads=4,
        n_layers=L,
        ffn_mult=4,
        pos_enc="learned",
        max_len=max_len,
        norm="post",
    )
    model = SequenceClassifier(cfg, in_features=in_features, n_classes=n_classes, pooling=pooling)
    groups = parameter_groups(model)
    assert groups["attention"] == L * (4 * d * d + 4 * d)  # W_QKV (3d x d), W_O (d x d), biases
    assert groups["ffn"] == L * (2 * 4 * d * d + 4 * d + d)  # fc1 (4d x d), fc2 (d x 4d), biases
    cls = d if pooling == "cls" else 0
    embedding = in_features * d + d + max_len * d  # input Linear + learned table
    other = L * 2 * 2 * d + d * n_classes + n_classes  # 2 LayerNorms per layer + head
    # the CLS token is counted once; heads.py files it under "embedding" ("pool.") while the
    # parameter_groups docstring lists it under "other", so either is accepted here
    assert groups["embedding"] in (embedding, embedding + cls)
    assert groups["embedding"] + groups["other"] == embedding + other + cls
    assert groups["total"] == sum(p.numel() for p in model.parameters())
    # the weight matrices alone: attention 4 d^2, FFN 8 d^2 per layer -> FFN share exactly 2/3
    ffn_w = groups["ffn"] - L * (4 * d + d)
    attn_w = groups["attention"] - L * 4 * d
    assert Fraction(ffn_w, ffn_w + attn_w) == Fraction(2, 3)


def test_parameter_groups_token_model_and_ffn_free():
    cfg = EncoderConfig(d_model=16, n_heads=2, n_layers=2, ffn_mult=0, pos_enc="rope", norm="none")
    groups = parameter_groups(TokenModel(cfg, n_tokens=11, n_out=7))
    assert groups["ffn"] == 0
    assert groups["attention"] == 2 * (4 * 16 * 16 + 4 * 16)
    assert groups["embedding"] == 11 * 16
    assert groups["other"] == 16 * 7 + 7


def test_parameter_groups_of_a_bare_encoder_counts_learned_positions_as_embedding():
    """parameter_groups accepts any nn.Module and groups by module type, so a bare Encoder's attention
    is found and its learned table is embedding, as it is inside a SequenceClassifier."""
    cfg = EncoderConfig(
        d_model=16, n_heads=2, n_layers=1, ffn_mult=0, pos_enc="learned", max_len=10
    )
    groups = parameter_groups(Encoder(cfg))
    assert groups["attention"] == 4 * 16 * 16 + 4 * 16
    assert groups["embedding"] == 10 * 16
    assert groups["other"] == 2 * 16  # the one post-norm LayerNorm


def test_unknown_pooling_is_rejected():
    with pytest.raises(ValueError, match=r"pooling='max'.*mean, cls"):
        SequenceClassifier(_cfg(), in_features=4, n_classes=2, pooling="max")
