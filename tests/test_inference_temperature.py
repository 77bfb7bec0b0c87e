"""The temperature-at-inference probe (issue 37; the tutorial's "推理采样时调它"): a trained model with its
attention at f times the trained τ must be the model built with temperature τ × f and the same weights
(`model.temperature`, the config's own path: a different construction of the same number), and the
output softmax's τ must move the loss and never the accuracy.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ablate.models import EncoderConfig, TokenModel
from ablate.probes import FACTORS, attention_temperature, factor_name, inference_temperature
from ablate.probes.common import accuracy

KW = dict(d_model=16, n_heads=2, n_layers=2, max_len=8, dropout=0.0)


def _pair(factor: float, tau: float = 1.0, **kw):
    torch.manual_seed(0)
    trained = TokenModel(EncoderConfig(**KW, temperature=tau, **kw), 8, 6)
    built = TokenModel(EncoderConfig(**KW, temperature=tau * factor, **kw), 8, 6)
    built.load_state_dict(trained.state_dict())
    return trained.eval(), built.eval()


def _loader(n_batches: int = 3):
    g = torch.Generator().manual_seed(1)
    return [(torch.randint(0, 8, (5, 8), generator=g), torch.randint(0, 6, (5, 8), generator=g))
            for _ in range(n_batches)]


@pytest.mark.parametrize("kw", [{}, {"pos_enc": "alibi"}, {"qk_scale": False}], ids=["learned", "alibi", "unscaled"])
@pytest.mark.parametrize("factor", [0.1, 3.0])
def test_a_factor_at_inference_is_the_model_built_with_that_temperature(factor, kw):
    trained, built = _pair(factor, tau=0.5, **kw)
    x = _loader()[0][0]
    base = trained(x)
    with attention_temperature(trained, factor):
        torch.testing.assert_close(trained(x), built(x), rtol=1e-5, atol=1e-6)
        assert not torch.allclose(trained(x), base)
    torch.testing.assert_close(trained(x), base, rtol=0, atol=0)  # restored


def test_the_scale_is_restored_when_the_block_raises():
    trained, _ = _pair(1.0)
    scales = [b.attention.scale for b in trained.encoder.blocks]
    with pytest.raises(RuntimeError), attention_temperature(trained, 10.0):
        raise RuntimeError("inside")
    assert [b.attention.scale for b in trained.encoder.blocks] == scales
    with pytest.raises(ValueError, match="factor=0"):
        with attention_temperature(trained, 0):
            pass


def test_the_probe_reads_accuracy_and_loss_at_every_factor():
    trained, _ = _pair(1.0)
    loader = _loader()
    out = inference_temperature(trained, loader)
    assert set(out) == {f"{k}_{factor_name(f)}" for f in FACTORS for k in ("tau_acc", "tau_loss", "out_tau_loss")}
    assert factor_name(0.1) == "0p1" and factor_name(10.0) == "10"
    x = torch.cat([b[0] for b in loader])
    y = torch.cat([b[1] for b in loader])
    for f in FACTORS:
        _, built = _pair(f)
        logits, trained_logits = built(x), trained(x)
        assert out[f"tau_acc_{factor_name(f)}"] == pytest.approx(accuracy(built, loader))
        assert out[f"tau_loss_{factor_name(f)}"] == pytest.approx(F.cross_entropy(logits.flatten(0, 1), y.flatten()).item())
        assert out[f"out_tau_loss_{factor_name(f)}"] == pytest.approx(
            F.cross_entropy(trained_logits.flatten(0, 1) / f, y.flatten()).item())
    assert out["tau_acc_1"] == pytest.approx(accuracy(trained, loader))
    assert math.isclose(out["tau_loss_1"], out["out_tau_loss_1"], rel_tol=1e-6)
    assert out["out_tau_loss_10"] != out["out_tau_loss_1"]


def test_the_final_probes_of_a_run_with_expensive_probes_carry_it(tmp_path):
    """`ablate train` with run.expensive_probes=true (the default): the final probes hold the factors;
    without the expensive probes, none."""
    import json

    from tests.test_resume import COPY
    from tests.test_train import run

    run(*COPY, "trainer.max_epochs=1", f"run.dir={tmp_path / 'r'}")
    probes = json.loads((tmp_path / "r" / "probes.json").read_text())
    keys = [k for k in probes if "tau_acc_" in k]
    assert sorted(keys) == sorted(f"probe/final/tau_acc_{factor_name(f)}" for f in FACTORS), keys
    assert all(0 <= probes[k] <= 1 for k in keys)
    run(*COPY, "trainer.max_epochs=1", "run.expensive_probes=false", f"run.dir={tmp_path / 'cheap'}")
    assert not [k for k in json.loads((tmp_path / "cheap" / "probes.json").read_text()) if "tau_" in k]
