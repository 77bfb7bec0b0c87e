"""model.norm_type=rms: RMSNorm (Zhang & Sennrich 2019) in the place of every LayerNorm, in every
placement.

Checked against the paper's formula and torch's module, and counted against arithmetic nobody here
wrote into the model: an RMSNorm has a gain and no bias, so each norm holds d_model parameters where
a LayerNorm holds 2 d_model."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ablate import config as C
from ablate import limits
from ablate.models import EncoderConfig, SequenceClassifier
from ablate.models.encoder import Encoder


def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("norm, per_block, final", [("pre", 2, 1), ("post", 2, 0), ("none", 0, 0)])
def test_every_norm_of_every_placement_is_an_rmsnorm(norm, per_block, final):
    enc = Encoder(EncoderConfig(norm=norm, norm_type="rms", n_layers=3, pos_enc="none"))
    norms = [m for m in enc.modules() if isinstance(m, (nn.LayerNorm, nn.RMSNorm))]
    assert len(norms) == 3 * per_block + final
    assert all(type(m) is nn.RMSNorm and m.eps == 1e-5 and m.weight.shape == (64,) for m in norms)
    assert all(
        len(b.norms) == per_block for b in enc.blocks
    )  # the accessor the probes read finds them


@pytest.mark.parametrize("norm, norms", [("pre", 2 * 3 + 1), ("post", 2 * 3), ("none", 0)])
def test_rmsnorm_holds_d_model_fewer_parameters_per_norm(norm, norms):
    """The count the estimate reads (the model itself, on the meta device) and the built model's
    agree, and each RMSNorm is one d_model-vector short of a LayerNorm: the bias it lacks."""
    layer, rms = (
        C.build({"model.norm": norm, "model.n_layers": 3, "model.norm_type": t})
        for t in ("layer", "rms")
    )
    assert limits.parameter_count(layer) - limits.parameter_count(rms) == norms * 64
    built = SequenceClassifier(rms.encoder, 28, 10)
    assert count(built) == limits.parameter_count(rms)


def test_rmsnorm_is_the_papers_formula():
    """RMSNorm(x) = x / sqrt(mean(x^2) + eps) * g (Zhang & Sennrich 2019, eq. 4), no mean taken
    away."""
    enc = Encoder(
        EncoderConfig(norm="post", norm_type="rms", n_layers=1, pos_enc="none", dropout=0.0)
    ).eval()
    norm = enc.blocks[0].norms[0]
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, 64))
    x = torch.randn(3, 5, 64) * 4 + 2
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight
    torch.testing.assert_close(norm(x), expected, rtol=1e-6, atol=1e-6)
    # LayerNorm would have taken the mean (2) away: the two differ on this input
    assert (nn.functional.layer_norm(x, (64,), eps=1e-5) * norm.weight - expected).abs().max() > 0.1


def test_a_post_rms_model_trains_a_step_and_the_rnn_refuses_it():
    model = SequenceClassifier(EncoderConfig(norm_type="rms", max_len=28), 28, 10)
    x, y = torch.randn(8, 28, 28), torch.randint(0, 10, (8,))
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    with pytest.raises(C.ConfigError, match="norm_type='rms' does not apply to arch='lstm'"):
        C.build({"model.arch": "lstm", "model.norm_type": "rms"})
