"""Probes inside training runs and `ablate probe`: recorded under stable names, never perturbing training."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ablate import cli
from tests.test_train import TINY_COPY, StopAt, rows, run  # noqa: F401  (fixtures below)


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")


def test_training_metrics_identical_with_probes_on_or_off(tmp_path):
    on = run(*TINY_COPY, "run.probe_every=5", f"run.dir={tmp_path / 'on'}")
    off = run(*TINY_COPY, "run.probes=false", f"run.dir={tmp_path / 'off'}")
    assert rows(tmp_path / "on") == rows(tmp_path / "off")
    assert on["metrics"] == off["metrics"]
    assert "probes" in on and "probes" not in off
    assert not (tmp_path / "off" / "probes.json").exists()


def test_probe_scalars_and_arrays_are_written_under_stable_names(tmp_path):
    s = run(*TINY_COPY, "run.probe_every=4", f"run.dir={tmp_path / 'r'}")
    d = tmp_path / "r"
    scalars = json.loads((d / "probes.json").read_text())
    assert scalars == s["probes"]
    assert 0 < s["probe_time_s"] < s["wall_time_s"]
    for point in ("init", "final"):
        for name in ("entropy_l0", "entropy_l1", "logit_std_l0", "grad_ratio", "cosine_l1", "erank_l0",
                     "resid_norm_l0_attn", "share_ffn", "equiv_error"):
            assert np.isfinite(scalars[f"probe/{point}/{name}"]), (point, name)
    for name in ("head_drop_l0_h0", "head_drop_l1_h1", "acc"):  # expensive: at the end only
        assert f"probe/final/{name}" in scalars and f"probe/init/{name}" not in scalars
    # the expensive probe's accuracy is measured on validation data: a real number, not a copy
    assert 0 <= scalars["probe/final/acc"] <= 1
    with np.load(d / "probes.npz") as f:
        assert f["init/attention"].shape == (2, 2, 9, 9)  # L, H, T, T for the first probe example
        np.testing.assert_allclose(f["init/attention"].sum(-1), 1, atol=1e-5)
        assert f["final/head_drop"].shape == (2, 2)
        assert f["final/entropy"].tolist() == [scalars["probe/final/entropy_l0"], scalars["probe/final/entropy_l1"]]
    curve = (d / "probes.csv").read_text().splitlines()
    assert curve[0].startswith("step,") and [int(r.split(",")[0]) for r in curve[1:]] == [0, 4, 8, 12, 16]


def test_init_probes_survive_resume(tmp_path):
    items = [*TINY_COPY, "trainer.max_epochs=2"]
    full = run(*items, f"run.dir={tmp_path / 'full'}")
    with pytest.raises(SystemExit):
        run(*items, f"run.dir={tmp_path / 'cut'}", callbacks=[StopAt(epoch=0)])
    said: list[str] = []
    resumed = run(*items, f"run.dir={tmp_path / 'cut'}", log=said.append)
    assert f"ablate: resuming {tmp_path / 'cut'} from last.ckpt (step 8)" in said
    assert resumed["probes"] == full["probes"]


def test_probe_curve_after_a_resume_equals_the_uninterrupted_one(tmp_path):
    """Rows measured after the checkpoint are measured again on resume, not appended twice."""
    items = [*TINY_COPY, "trainer.max_epochs=2", "run.probe_every=3"]
    run(*items, f"run.dir={tmp_path / 'full'}")
    with pytest.raises(SystemExit):
        run(*items, f"run.dir={tmp_path / 'cut'}", callbacks=[StopAt(step=13)])  # rows 3..12 written
    run(*items, f"run.dir={tmp_path / 'cut'}")
    curve = (tmp_path / "full" / "probes.csv").read_text()
    assert [int(r.split(",")[0]) for r in curve.splitlines()[1:]] == [0, 3, 6, 9, 12, 15]
    assert (tmp_path / "cut" / "probes.csv").read_text() == curve


def test_probe_command_prints_every_family(tmp_path, capsys):
    run(*TINY_COPY, "trainer.max_epochs=1", "run.probes=false", f"run.dir={tmp_path / 'r'}")
    assert cli.main(["probe", str(tmp_path / "r"), "--batch", "16", "--json"]) == 0
    scalars = json.loads(capsys.readouterr().out)
    assert {"entropy_l0", "grad_ratio", "cosine_l1", "head_drop_l1_h1", "share_ffn"} <= set(scalars)
    assert not (tmp_path / "r" / "probes.json").exists()  # probing a checkpoint writes nothing
    assert cli.main(["probe", str(tmp_path / "r"), "--no-expensive"]) == 0
    out = capsys.readouterr().out
    assert "[scores]" in out and "[gradients]" in out and "head_drop" not in out
    assert cli.main(["probe", str(tmp_path / "missing")]) == 2
    assert "no checkpoint" in capsys.readouterr().err
