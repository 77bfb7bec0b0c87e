"""The mechanisms measured during training (issue 13, item 5): closed forms of the periodic probes,
probes.csv across interruptions, and `ablate report export`'s <sweep>_curves.csv from real runs."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

from ablate.models import EncoderConfig, SequenceClassifier
from ablate.probes import (
    AT_ENDS_ONLY,
    effective_rank,
    mean_token_cosine,
    periodic_part,
    periodic_probes,
    run_probes,
)
from ablate.probes.scores import row_stats
from ablate.probing import CURVE, ProbeRecorder
from tests.test_train import TINY_COPY, StopAt, run


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")


# ------------------------------------------------------------------ closed forms


def test_effective_rank_of_known_singular_values():
    """Singular values (3, 1): p = (3/4, 1/4), erank = exp(-(p log p summed)) (Roy & Vetterli 2007)."""
    h = torch.tensor([[3.0, 0.0, 0.0], [0.0, 1.0, 0.0]])[None]  # (1, T=2, d=3)
    p = torch.tensor([0.75, 0.25], dtype=torch.float64)
    assert effective_rank(h) == pytest.approx(math.exp(-(p * p.log()).sum().item()), rel=1e-12)
    rotated = h @ torch.linalg.qr(torch.randn(3, 3, generator=torch.Generator().manual_seed(0)))[0]
    assert effective_rank(rotated) == pytest.approx(effective_rank(h), rel=1e-6)  # rotation-invariant


def test_token_cosine_of_known_angles():
    sixty = torch.tensor([[1.0, 0.0], [0.5, math.sqrt(3) / 2]], dtype=torch.float64)[None]  # two tokens 60 degrees apart
    assert mean_token_cosine(sixty) == pytest.approx(0.5, rel=1e-12)
    three = torch.tensor([[2.0, 0.0], [0.0, 1.0], [5.0, 0.0]])[None]  # pairs: 0, 1, 0 (twice each)
    assert mean_token_cosine(three) == pytest.approx(1 / 3, rel=1e-12)


def test_one_hot_fraction_largest_weight_and_entropy_of_known_rows():
    """Two rows put a score of 100 on one key (weight 1 - 3e-43), two are uniform over 4 keys."""
    scores = torch.zeros(1, 1, 4, 4)
    scores[0, 0, 0, 1] = scores[0, 0, 1, 3] = 100.0
    stats = row_stats(scores)
    assert stats["onehot"].mean().item() == 0.5
    assert stats["rowmax"].mean().item() == pytest.approx((1 + 1 + 0.25 + 0.25) / 4, rel=1e-6)
    assert stats["entropy"].tolist() == pytest.approx([0.0, 0.0, 1.0, 1.0], abs=1e-6)


def _model(seed: int = 0) -> tuple[SequenceClassifier, tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(seed)
    model = SequenceClassifier(EncoderConfig(d_model=32, n_heads=4, n_layers=3, dropout=0.1), 28, 10)
    x, y = torch.randn(16, 7, 28), torch.randint(0, 10, (16,))
    return model, (x, y)


def test_periodic_probes_are_the_changing_part_of_the_init_probes():
    """What is measured every N steps is exactly what the init probes hold of it (so step 0 of a curve
    is the init measurement), per layer for the seven mechanisms, without the fixed-by-architecture ones."""
    model, batch = _model()
    full, _ = run_probes(model, batch, permutation=torch.arange(7).flip(0))
    periodic = periodic_probes(model, batch)
    assert periodic == periodic_part(full)
    assert not [k for k in periodic if k.startswith(AT_ENDS_ONLY)]
    assert {k for k in full if k.startswith(AT_ENDS_ONLY)} >= {"equiv_error", "share_ffn", "params_total"}
    for quantity in ("grad", "logit_std", "rowmax", "onehot_frac", "entropy", "cosine", "erank"):
        for layer in range(3):
            assert math.isfinite(periodic[f"{quantity}_l{layer}"]), (quantity, layer)


# ------------------------------------------------------------------ probes.csv


def _recorder(tmp_path) -> ProbeRecorder:
    return ProbeRecorder(tmp_path, (torch.zeros(1, 2), torch.zeros(1)), torch.arange(2), every=3)


def test_resume_keeps_only_whole_rows_up_to_the_checkpoint(tmp_path):
    """A row with fewer fields than the header (a disk filled mid-write) is not kept, even at a step
    before the checkpoint, and nothing after it is either: the run measures those steps again."""
    good = "step,a,b\n0,1.0,2.0\n3,1.5,2.5\n"
    (tmp_path / CURVE).write_text(good + "6,1.7\n9,1.0,2.0\n")
    _recorder(tmp_path).restart_curve(9)
    assert (tmp_path / CURVE).read_text() == good
    (tmp_path / CURVE).write_text(good + "6,1.7,2.7\n9,1.0,2.")  # the last line cut short by a kill
    _recorder(tmp_path).restart_curve(9)
    assert (tmp_path / CURVE).read_text() == good + "6,1.7,2.7\n"


def test_a_row_with_new_names_widens_the_header(tmp_path):
    recorder = _recorder(tmp_path)
    recorder._append_curve(0, {"a": 1.0})
    recorder = _recorder(tmp_path)  # a resumed process: the header is read from the file
    recorder._append_curve(3, {"a": 2.0, "b": 0.5})
    recorder._append_curve(6, {"a": 3.0, "b": 0.25})
    assert (tmp_path / CURVE).read_text() == "step,a,b\n0,1.0,\n3,2.0,0.5\n6,3.0,0.25\n"


def test_curve_starts_at_the_init_probes_and_survives_losing_the_file(tmp_path):
    """Step 0 of probes.csv is the init measurement (values as in probes.json); a run resumed after its
    probes.csv was lost starts it again at step 0 (from the init probes in the checkpoint), then the
    steps after the checkpoint."""
    items = [*TINY_COPY, "trainer.max_epochs=2", "run.probe_every=3"]
    run(*items, f"run.dir={tmp_path / 'full'}")
    full = pd.read_csv(tmp_path / "full" / CURVE, float_precision="round_trip")
    init = json.loads((tmp_path / "full" / "probes.json").read_text())
    assert full["step"].tolist() == [0, 3, 6, 9, 12, 15]
    assert {c: full[c][0] for c in full.columns if c != "step"} == {
        k.removeprefix("probe/init/"): v for k, v in init.items()
        if k.startswith("probe/init/") and not k.removeprefix("probe/init/").startswith(AT_ENDS_ONLY)}
    with pytest.raises(SystemExit):
        run(*items, f"run.dir={tmp_path / 'cut'}", callbacks=[StopAt(step=13)])  # checkpoint at step 8
    (tmp_path / "cut" / CURVE).unlink()
    run(*items, f"run.dir={tmp_path / 'cut'}")
    cut = pd.read_csv(tmp_path / "cut" / CURVE, float_precision="round_trip")
    assert cut["step"].tolist() == [0, 9, 12, 15]
    pd.testing.assert_frame_equal(cut, full[full["step"].isin([0, 9, 12, 15])].reset_index(drop=True))
