"""Bad configurations fail at construction with a ValueError naming the field, the value and what
is allowed (STYLE.md: x-transformers' "unrecognized kwargs", lightning-hydra-template's checks)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from ablate.models import Encoder, EncoderConfig

# (overrides, substrings the message must contain: field, value, what is allowed)
BAD = {
    "n_heads_not_dividing": (
        dict(d_model=64, n_heads=3),
        ["n_heads", "3", "d_model=64", "divide", "d_head"],
    ),
    "rope_odd_d_head": (
        dict(d_model=16, n_heads=2, d_head=3, pos_enc="rope"),
        ["d_head=3", "rope", "even"],
    ),
    "rope_odd_derived_d_head": (
        dict(d_model=6, n_heads=2, pos_enc="rope"),
        ["d_head=3", "rope", "even"],
    ),
    "activation": (dict(activation="tanh"), ["activation", "'tanh'", "relu", "gelu"]),
    "activation_case": (dict(activation="ReLU"), ["activation", "'ReLU'", "relu", "gelu"]),
    "norm": (dict(norm="sandwich"), ["norm", "'sandwich'", "pre", "post", "none"]),
    "norm_none_object": (dict(norm=None), ["norm", "None", "pre", "post", "none"]),
    "pos_enc": (
        dict(pos_enc="alibi"),
        ["pos_enc", "'alibi'", "none", "sinusoidal", "learned", "rope"],
    ),
    "init": (dict(init="kaiming"), ["init", "'kaiming'", "default", "xavier", "small"]),
    "temperature_zero": (dict(temperature=0.0), ["temperature", "0.0", "> 0"]),
    "temperature_zero_int": (dict(temperature=0), ["temperature", "0", "> 0"]),
    "temperature_negative": (dict(temperature=-1.0), ["temperature", "-1.0", "> 0"]),
    "temperature_nan": (dict(temperature=float("nan")), ["temperature", "nan", "> 0"]),
    "temperature_str": (dict(temperature="1"), ["temperature", "'1'", "number"]),
    "temperature_bool": (dict(temperature=True), ["temperature", "True", "number"]),
    "dropout_one": (dict(dropout=1.0), ["dropout", "1.0", "[0, 1)"]),
    "dropout_negative": (dict(dropout=-0.1), ["dropout", "-0.1", "[0, 1)"]),
    "dropout_str": (dict(dropout="0.1"), ["dropout", "'0.1'", "[0, 1)"]),
    "qk_scale_str": (dict(qk_scale="yes"), ["qk_scale", "'yes'", "true or false"]),
    "qk_scale_int": (dict(qk_scale=1), ["qk_scale", "1", "true or false"]),
    "residual_str": (dict(residual="no"), ["residual", "'no'", "true or false"]),
    "causal_none": (dict(causal=None), ["causal", "None", "true or false"]),
    "n_heads_float": (dict(n_heads=2.5), ["n_heads", "2.5", "integer"]),
    "n_heads_bool": (dict(n_heads=True), ["n_heads", "True", "integer"]),
    "n_heads_zero": (dict(n_heads=0), ["n_heads", "0", ">= 1"]),
    "n_layers_zero": (dict(n_layers=0), ["n_layers", "0", ">= 1"]),
    "n_layers_float": (dict(n_layers=2.0), ["n_layers", "2.0", "integer"]),
    "d_model_zero": (dict(d_model=0), ["d_model", "0", ">= 1"]),
    "d_head_zero": (dict(d_head=0), ["d_head", "0", ">= 1"]),
    "d_head_bool": (dict(d_head=True), ["d_head", "True", "integer"]),
    "ffn_mult_negative": (dict(ffn_mult=-1), ["ffn_mult", "-1", ">= 0"]),
    "ffn_mult_float": (dict(ffn_mult=1.5), ["ffn_mult", "1.5", "integer"]),
    "max_len_zero": (dict(max_len=0), ["max_len", "0", ">= 1"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_config_raises_value_error_naming_field_value_and_allowed(case):
    overrides, needles = BAD[case]
    with pytest.raises(ValueError) as info:
        EncoderConfig(**overrides)
    message = str(info.value)
    for needle in needles:
        assert needle in message, f"{needle!r} missing from {message!r}"


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(d_model=16, n_heads=3, d_head=5),  # n_heads need not divide d_model once d_head is set
        dict(d_model=16, n_heads=2, d_head=24, pos_enc="rope"),
        dict(temperature=2),  # an int is a number
        dict(temperature=1e-3),
        dict(dropout=0),
        dict(dropout=0.999),
        dict(ffn_mult=0),
        dict(n_layers=1, n_heads=1, d_model=1, max_len=1),
    ],
)
def test_good_configs_build(overrides):
    cfg = EncoderConfig(**overrides)
    assert Encoder(cfg) is not None
    for key, value in overrides.items():
        assert getattr(cfg, key) == value


def test_derived_sizes():
    cfg = EncoderConfig(
        d_model=16, n_heads=2, d_head=24, ffn_mult=3, qk_scale=True, temperature=2.0
    )
    assert (cfg.head_dim, cfg.inner_dim, cfg.ffn_dim) == (24, 48, 48)
    assert cfg.score_scale == pytest.approx(24**-0.5 / 2)
    cfg = EncoderConfig(d_model=64, n_heads=4, qk_scale=False, temperature=0.5)
    assert (cfg.head_dim, cfg.inner_dim) == (16, 64)
    assert cfg.score_scale == pytest.approx(2.0)


def test_config_is_frozen_and_rejects_unknown_fields():
    cfg = EncoderConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.n_heads = 8
    with pytest.raises(TypeError, match=re.escape("n_head")):
        EncoderConfig(n_head=8)


def test_replace_revalidates():
    with pytest.raises(ValueError, match="temperature"):
        dataclasses.replace(EncoderConfig(), temperature=-2.0)


def test_tutorial_defaults():
    cfg = EncoderConfig()
    assert (cfg.d_model, cfg.n_heads, cfg.ffn_dim, cfg.n_layers) == (64, 4, 128, 2)
    assert (cfg.pos_enc, cfg.norm, cfg.activation, cfg.dropout) == ("learned", "post", "relu", 0.1)
    assert (cfg.qk_scale, cfg.temperature, cfg.residual, cfg.causal) == (True, 1.0, True, False)
