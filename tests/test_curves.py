"""The mechanisms measured during training (issue 13, item 5): closed forms of the periodic probes,
probes.csv across interruptions, and `ablate report export`'s <sweep>_curves.csv from real runs."""

from __future__ import annotations

import json
import math
import shutil

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
from ablate.results.export import CURVE_QUANTITIES, SIGNIFICANT, export
from ablate.results.exported import DataFileError, check_folder, curves_file, read_curves
from tests.test_train import TINY_COPY, StopAt, run


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")


def quiet(_line: str) -> None:
    pass


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
    model = SequenceClassifier(EncoderConfig(d_model=32, n_heads=4, n_layers=3, dropout=0.1, max_len=28), 28, 10)
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
    for quantity in CURVE_QUANTITIES:
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


# ------------------------------------------------------------------ export


def _round(x: float) -> float:
    return float(f"{x:.{SIGNIFICANT}g}")


def test_export_writes_probe_curves_of_the_runs_that_have_them(tmp_path):
    runs, data, sweeps = tmp_path / "runs", tmp_path / "data", tmp_path / "sweeps"
    sweeps.mkdir()  # no sweep file: every run of the group is exported
    tiny = [*TINY_COPY, "trainer.max_epochs=1", "run.group=tiny", "run.expensive_probes=false",
            "run.probe_batch=16"]
    for seed in (1, 0):
        run(*tiny, f"seed={seed}", "run.probe_every=4")
    run(*tiny, "seed=2")  # no periodic probes: contributes nothing
    lines: list[str] = []
    export(["tiny"], runs=runs, data=data, sweeps=sweeps, log=lines.append)
    meta = json.loads((data / "meta.json").read_text())["sweeps"]["tiny"]
    assert meta["curves"] == {"file": "tiny_curves.csv", "runs": 2, "rows": 2 * 3 * 2}  # runs x steps x layers
    assert lines == ["ablate report export: tiny: 3 runs (none); probe curves of 2 run(s)"]
    check_folder(data)
    curves = read_curves("tiny", data)
    table = pd.read_csv(data / "tiny.csv")
    assert list(curves.columns) == ["run_id", *meta["swept_keys"], "step", "layer", *CURVE_QUANTITIES]
    assert set(meta["swept_keys"]) == {"seed", "run.probe_every"}
    with_curves = sorted(table.loc[table["run.probe_every"] == 4, "run_id"])
    assert curves["run_id"].unique().tolist() == with_curves  # sorted by run, and seed 2 is not there
    for run_id, points in curves.groupby("run_id"):
        assert points["step"].tolist() == [0, 0, 4, 4, 8, 8] and points["layer"].tolist() == [0, 1] * 3
        assert (points["seed"] == table.set_index("run_id").loc[run_id, "seed"]).all()
        probes = json.loads((runs / "tiny" / run_id / "probes.json").read_text())
        start = points[points["step"] == 0].set_index("layer")
        end = points[points["step"] == 8].set_index("layer")  # the last step: the model the final probes see
        for quantity in CURVE_QUANTITIES:
            for layer in (0, 1):
                for point, at in (("init", start), ("final", end)):
                    expected = _round(probes[f"probe/{point}/{quantity}_l{layer}"])
                    assert at.loc[layer, quantity] == pytest.approx(expected, rel=1e-12), (point, quantity, layer)
    first = {p.name: p.read_bytes() for p in data.iterdir()}
    export(["tiny"], runs=runs, data=data, sweeps=sweeps, log=quiet)
    assert {p.name: p.read_bytes() for p in data.iterdir()} == first  # byte for byte
    (data / "tiny_curves.csv").write_bytes(first["tiny_curves.csv"][:-5])  # a copy cut short
    with pytest.raises(DataFileError, match="tiny_curves.csv ends in the middle of a line"):
        check_folder(data)
    export(["tiny"], runs=runs, data=data, sweeps=sweeps, log=quiet)
    assert (data / "tiny_curves.csv").read_bytes() == first["tiny_curves.csv"]

    # a damaged probes.csv: that run's curves are left out, with one line naming it
    damaged = runs / "tiny" / with_curves[0] / CURVE
    damaged.write_text(damaged.read_text()[:-3])
    said: list[str] = []
    export(["tiny"], runs=runs, data=data, sweeps=sweeps, log=quiet, warn=said.append)
    assert len(said) == 1 and with_curves[0] in said[0] and "probes.csv ends in the middle of a line" in said[0]
    assert read_curves("tiny", data)["run_id"].unique().tolist() == with_curves[1:]

    # no run has periodic probes any more: the curves file goes with the rest of the export
    for run_id in with_curves:
        (runs / "tiny" / run_id / CURVE).unlink()
    export(["tiny"], runs=runs, data=data, sweeps=sweeps, log=quiet)
    assert not (data / curves_file("tiny")).exists() and read_curves("tiny", data) is None
    assert "curves" not in json.loads((data / "meta.json").read_text())["sweeps"]["tiny"]
    shutil.rmtree(runs)
