"""The two probes behind issue 37's look inside the tutorial's model (reports/inside.py): what a norm layer does to
a token's direction and length (`norm_geometry`), and what a linear readout finds in each layer's tokens
(`layer_readout`). Checked against closed forms, numpy's least squares and torch's own norm functions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ablate.models import EncoderConfig, SequenceClassifier, TokenModel
from ablate.probes import geometry, layer_readout, norm_geometry, periodic_probes, run_probes
from ablate.probes import readout as readout_module

KW = dict(d_model=16, n_heads=2, n_layers=2, max_len=8, dropout=0.0)


def _classifier(**kw) -> SequenceClassifier:
    torch.manual_seed(0)
    return SequenceClassifier(EncoderConfig(**{**KW, **kw}), in_features=6, n_classes=4).eval()


def test_centring_turns_a_token_by_its_mean_alone_closed_form():
    """x = c·1 + z with z ⟂ 1: cos(x, x − mean) = |z| / |x| = |z| / sqrt(c²d + |z|²); a LayerNorm at gain 1 and
    bias 0 turns x exactly that much (dividing by a scalar does not turn), and every token comes out at one length."""
    torch.manual_seed(1)
    d = 16
    z = torch.randn(50, d, dtype=torch.float64)
    z = z - z.mean(-1, keepdim=True)
    c = torch.linspace(-2, 2, 50, dtype=torch.float64)[:, None]
    x = c + z
    y = F.layer_norm(x, (d,), eps=1e-12)
    g = geometry(x, y, centres=True)
    expected = (z.norm(dim=-1) / torch.sqrt(c[:, 0] ** 2 * d + z.norm(dim=-1) ** 2)).mean().item()
    assert g["norm_centre"] == pytest.approx(expected, abs=1e-12)
    assert g["norm_cos"] == pytest.approx(expected, abs=1e-12)
    assert g["norm_cv_out"] < 1e-9 < g["norm_cv_in"]


def test_a_gain_turns_a_token_as_the_closed_form_says():
    """RMSNorm does not centre (norm_centre 1); with gain w its output is w ⊙ x / rms(x), so its cosine with x is
    Σ w x² / (|x| |w ⊙ x|)."""
    torch.manual_seed(2)
    x = torch.randn(40, 8, dtype=torch.float64)
    norm = nn.RMSNorm(8, eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.2, 3.0, 8, dtype=torch.float64))
    w = norm.weight.detach()
    g = geometry(x, norm(x).detach(), centres=False)
    expected = ((w * x * x).sum(-1) / (x.norm(dim=-1) * (w * x).norm(dim=-1))).mean().item()
    assert g["norm_centre"] == 1.0
    assert g["norm_cos"] == pytest.approx(expected, abs=1e-12)
    assert g["norm_cos"] < 0.99


@pytest.mark.parametrize("norm, final", [("post", False), ("pre", True)])
@pytest.mark.parametrize("norm_type", ["layer", "rms"])
def test_every_norm_layer_is_measured_once_and_at_init_only_the_centring_turns(norm, final, norm_type):
    model = _classifier(norm=norm, norm_type=norm_type)
    x = torch.randn(8, 8, 6)
    g = norm_geometry(model, x)
    wheres = [f"l{layer}_{slot}" for layer in range(2) for slot in ("attn", "ffn")] + (["final"] if final else [])
    assert sorted(g) == sorted(f"{m}_{w}" for w in wheres for m in ("norm_cos", "norm_centre", "norm_cv_in", "norm_cv_out"))
    for w in wheres:  # gain 1, bias 0: the turn is the centring's (none for RMSNorm), every length one
        assert g[f"norm_cos_{w}"] == pytest.approx(g[f"norm_centre_{w}"], abs=1e-6)
        assert g[f"norm_cv_out_{w}"] < 1e-3
        if norm_type == "rms":
            assert g[f"norm_centre_{w}"] == 1.0


def test_a_model_without_norm_layers_gets_no_norm_keys_and_a_probe_leaves_the_model_as_found():
    assert norm_geometry(_classifier(norm="none"), torch.randn(4, 8, 6)) == {}
    model = _classifier().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    norm_geometry(model, torch.randn(4, 8, 6))
    assert model.training and all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert not any(m._forward_hooks for m in model.modules())


def test_norm_geometry_is_at_the_ends_only_never_periodic():
    model = _classifier()
    batch = (torch.randn(4, 8, 6), torch.randint(0, 4, (4,)))
    scalars, arrays = run_probes(model, batch)
    assert "norm_cos_l1_ffn" in scalars and arrays["norm_cos"].shape == (4,)
    assert not [k for k in periodic_probes(model, batch) if k.startswith("norm_")]


def test_the_ridge_readout_is_least_squares_when_unpenalised(monkeypatch):
    """With no penalty the readout's predictions are numpy's least squares with an intercept."""
    monkeypatch.setattr(readout_module, "RIDGE", 0.0)
    rng = np.random.default_rng(3)
    features, targets = rng.normal(size=(60, 5)), rng.normal(size=(60, 3))
    fit = torch.arange(60) < 40
    predicted = readout_module._ridge(torch.from_numpy(features), torch.from_numpy(targets), fit).numpy()
    design = np.hstack([features[:40], np.ones((40, 1))])
    coef, *_ = np.linalg.lstsq(design, targets[:40], rcond=None)
    np.testing.assert_allclose(predicted, np.hstack([features, np.ones((60, 1))]) @ coef, atol=1e-9)


def _loader(model_inputs: int, label_in_rows: bool, n: int = 64, batch: int = 16):
    g = torch.Generator().manual_seed(4)
    out = []
    for _ in range(n // batch):
        y = torch.randint(0, 4, (batch,), generator=g)
        x = torch.randn(batch, 8, model_inputs, generator=g)
        if label_in_rows:  # every row carries its image's label: one token is enough to read it
            x[..., :4] = 3 * F.one_hot(y, 4).float()[:, None, :]
        out.append((x, y))
    return out


def test_a_label_every_token_carries_is_read_from_any_token_and_an_unrelated_one_is_not():
    model = _classifier()
    carried = layer_readout(model, _loader(6, label_in_rows=True, n=256))
    assert sorted(carried) == sorted(f"readout_{m}_{w}" for m in ("acc", "r2") for w in ("in", "l0", "l1"))
    assert carried["readout_acc_in"] == 1.0
    assert carried["readout_r2_in"] > 0.99  # embedding + position: the row is a linear image of the state
    unrelated = layer_readout(model, _loader(6, label_in_rows=False, n=256))
    assert unrelated["readout_acc_in"] < 0.45  # chance: 0.25


def test_the_readout_reads_at_most_max_examples_and_skips_what_it_cannot_pair():
    model = _classifier()
    few = layer_readout(model, _loader(6, label_in_rows=True, n=64), max_examples=32)
    assert set(few) and all(math.isfinite(v) for v in few.values())
    assert layer_readout(_classifier(), [(x, y) for x, y in _loader(6, True)], max_examples=2) == {}
    tokens = TokenModel(EncoderConfig(**KW), 8, 6).eval()
    assert layer_readout(tokens, [(torch.randint(0, 8, (4, 8)), torch.randint(0, 6, (4, 8)))]) == {}  # a label per token
    torch.manual_seed(0)
    cls = SequenceClassifier(EncoderConfig(**{**KW, "max_len": 9}), in_features=6, n_classes=4, pooling="cls").eval()
    assert layer_readout(cls, _loader(6, True)) == {}  # an added token the inputs have no row for
