"""Where in the sequence a token task's errors sit (issue 17): `accuracy_by_position`, the test accuracy
at each emitted position, recorded by every new token-task run in probes.npz and, for the RNN table's
copy sweeps, exported per run (from probes.npz, else computed from the run's checkpoint)."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ablate import report as R
from ablate import studies
from ablate.probes import NotApplicable, accuracy_by_position
from ablate.results.export import BY_POSITION, export, position_accuracy
from ablate.tasks import load_task

from .sweep_fixtures import train_arch_sweep

I = -100  # noqa: E741 - IGNORE, short enough to write the targets out by hand
LENGTH = 6
FIXED = {"data.task": "copy", "data.vocab": 6, "data.length": LENGTH, "data.n_train": 64, "data.n_val": 32,
         "data.n_test": 48, "data.batch_size": 32, "model.d_model": 16, "trainer.max_epochs": 1,
         "trainer.threads": 1, "tracking": "none", "run.probe_batch": 8, "run.expensive_probes": False}


class Echo(nn.Module):
    """Predicts, at each position, the token id its input holds there: predictions written by hand."""

    def __init__(self, classes: int = 5):
        super().__init__()
        self.classes = classes
        self.weight = nn.Parameter(torch.zeros(()))  # a device to run on

    def forward(self, x):
        return F.one_hot(x, self.classes).float() + self.weight


def test_accuracy_by_position_hand_computed():
    """The k-th emitted token is each sequence's k-th counted position, wherever it sits; sequences with
    fewer emitted tokens count only where they have them; batches of different widths add up."""
    y = torch.tensor([[I, I, 1, 2, 3],   # emitted: 1 2 3
                      [I, 4, 4, I, 4],   # emitted: 4 4 4 (a gap)
                      [I, I, I, 2, 2]])  # emitted: 2 2 (only two)
    x = torch.tensor([[0, 0, 1, 0, 3],   # right, wrong, right
                      [0, 4, 0, 0, 4],   # right, wrong, right
                      [0, 0, 0, 0, 2]])  # wrong, right
    expected = np.array([2 / 3, 1 / 3, 2 / 2])
    assert np.allclose(accuracy_by_position(Echo(), [(x, y)]), expected, atol=0, rtol=1e-15)
    # the short sequence alone first (K = 2), then the other two (K = 3): the same totals
    got = accuracy_by_position(Echo(), [(x[2:], y[2:]), (x[:2], y[:2])])
    assert got.dtype == np.float64 and np.allclose(got, expected, atol=0, rtol=1e-15)


def test_accuracy_by_position_refuses_what_it_cannot_measure():
    class PerSequence(Echo):
        def forward(self, x):
            return super().forward(x)[:, 0]  # (B, C): one output per sequence

    x, y = torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(NotApplicable, match="one output per position"):
        accuracy_by_position(PerSequence(), [(x, y[:, 0])])
    with pytest.raises(ValueError, match="no counted targets"):
        accuracy_by_position(Echo(), [(x, torch.full_like(y, I))])


def quiet(_line: str) -> None:
    pass


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A sweep named like one of the RNN table's (so export keeps its accuracy by position): copy at 6
    tokens, LSTM and Transformer, one seed each, trained for real."""
    root = tmp_path_factory.mktemp("positions")
    name = next(n for s in studies.load() for n, wanted in s.exports.items() if "by_position" in wanted)
    train_arch_sweep(root, name, FIXED, ["lstm", "transformer"])
    return root, name


def recorded(run_dir) -> np.ndarray:
    with np.load(run_dir / "probes.npz") as f:
        return f[BY_POSITION]


def test_a_token_run_records_its_accuracy_by_position(trained):
    """probes.npz's final/acc_by_position: one value per emitted token; every sequence emits LENGTH, so
    their mean is the run's test accuracy; and it is the trained model's own, position by position."""
    root, name = trained
    for run_dir in sorted((root / "runs" / name).iterdir()):
        by_position = recorded(run_dir)
        summary = json.loads((run_dir / "summary.json").read_text())
        assert by_position.shape == (LENGTH,) and ((0 <= by_position) & (by_position <= 1)).all()
        assert by_position.mean() == pytest.approx(summary["metrics"]["test/acc"], abs=1e-6)
        task, datamodule = load_task(run_dir / "last.ckpt")
        datamodule.setup("test")
        x, y = datamodule.test_set.tensors()
        task.model.eval()
        with torch.no_grad():
            right = (task.model(x).argmax(-1) == y)[:, LENGTH + 1:]  # the blanks: the emitted tokens in order
        assert np.allclose(by_position, right.double().mean(0).numpy(), atol=1e-12)


def _drop(path, key: str) -> None:
    """Rewrite probes.npz without `key` (a run trained before the probe existed)."""
    with np.load(path) as f:
        kept = {k: f[k] for k in f.files if k != key}
    np.savez_compressed(path, **kept)


def test_export_keeps_it_and_computes_it_for_runs_that_lack_it(trained, tmp_path):
    """Per run in the sweep's npz (float32), from probes.npz; for a run whose probes.npz lacks it, computed
    from last.ckpt with the same values, named in meta.json and in the export's line; reproducible."""
    root, name = trained
    runs = root / "runs"
    run_dirs = sorted((runs / name).iterdir())
    truth = {d.name: recorded(d) for d in run_dirs}
    lines: list[str] = []
    export([name], runs=runs, data=tmp_path / "a", sweeps=root / "sweeps", log=lines.append, warn=lines.append)
    arrays = R.arrays(name, tmp_path / "a")
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())["sweeps"][name]
    assert meta["acc_by_position"] == {"runs": 2, "computed_from_checkpoint": []}
    for run_id, values in truth.items():
        stored = arrays[f"{run_id}/{BY_POSITION}"]
        assert stored.dtype == np.float32 and np.array_equal(stored, values.astype(np.float32))
    old = run_dirs[0]
    _drop(old / "probes.npz", BY_POSITION)
    assert position_accuracy(old)[1] is True and position_accuracy(run_dirs[1])[1] is False
    lines.clear()
    export([name], runs=runs, data=tmp_path / "b", sweeps=root / "sweeps", log=lines.append, warn=lines.append)
    meta = json.loads((tmp_path / "b" / "meta.json").read_text())["sweeps"][name]
    assert meta["acc_by_position"] == {"runs": 2, "computed_from_checkpoint": [old.name]}
    assert any(f"computed from the checkpoint for 1: {old.name}" in line for line in lines), lines
    again = R.arrays(name, tmp_path / "b")
    for run_id, values in truth.items():
        assert np.allclose(again[f"{run_id}/{BY_POSITION}"], values, atol=1e-6), run_id
    export([name], runs=runs, data=tmp_path / "c", sweeps=root / "sweeps", log=quiet, warn=quiet)
    assert {p.name: p.read_bytes() for p in (tmp_path / "c").iterdir()} == \
        {p.name: p.read_bytes() for p in (tmp_path / "b").iterdir()}
    # neither a probes.npz nor a checkpoint: no array, no error
    (old / "last.ckpt").unlink()
    assert position_accuracy(old) == ({}, False)


def test_a_damaged_probes_file_loses_only_that_array(trained, tmp_path):
    root, name = trained
    run_dir = sorted((root / "runs" / name).iterdir())[1]
    (run_dir / "probes.npz").write_bytes(b"not a zip")
    with pytest.raises(Exception, match="probes.npz"):
        position_accuracy(run_dir)
    assert not zipfile.is_zipfile(run_dir / "probes.npz")
