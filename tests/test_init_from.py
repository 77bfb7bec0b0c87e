"""run.init_from (issue 43): a run that starts from the model weights of another run's checkpoint (fine-tuning,
warm starts), the checkpoint named in the summary's provenance, an interruption resumed from the run's own
last.ckpt; and every checkpoint that cannot be used refused with exit 2 and one line before anything is written."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from ablate import cli
from ablate import config as C
from ablate.rundir import read_summary
from tests.test_train import StopAt, rows, run

COPY = [
    "data.task=copy", "data.vocab=6", "data.length=4", "data.n_train=256", "data.n_val=64", "data.n_test=64",
    "data.batch_size=32", "model.d_model=16", "model.n_heads=2", "trainer.max_epochs=2", "tracking=none",
    "trainer.threads=1",
]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A completed run to start from."""
    d = tmp_path_factory.mktemp("source") / "run"
    run(*COPY, f"run.dir={d}")
    return d


class StartWeights(pl.Callback):
    def on_train_start(self, trainer, pl_module):
        self.weights = {k: v.detach().clone() for k, v in pl_module.model.state_dict().items()}


def model_weights(ckpt: Path) -> dict[str, torch.Tensor]:
    saved = torch.load(ckpt, weights_only=True)["state_dict"]
    return {k.removeprefix("model."): v for k, v in saved.items() if k.startswith("model.")}


def test_a_run_starts_from_the_weights_of_the_run_it_names(source, tmp_path):
    d = tmp_path / "warm"
    start = StartWeights()
    s = run(*COPY, "trainer.max_epochs=1", f"run.init_from={source}", f"run.dir={d}", callbacks=[start])
    end = model_weights(source / "last.ckpt")
    assert start.weights.keys() == end.keys() and all(torch.equal(start.weights[k], end[k]) for k in end)
    # its probes at step 0 measure the first run's final model
    first = read_summary(source)["probes"]
    init = {k.removeprefix("probe/init/"): v for k, v in s["probes"].items() if k.startswith("probe/init/")}
    final = {k.removeprefix("probe/final/"): v for k, v in first.items() if k.startswith("probe/final/")}
    shared = init.keys() & final.keys()
    assert len(shared) > 5 and {k: init[k] for k in shared} == pytest.approx({k: final[k] for k in shared})
    # the model's weights only: its val/acc_best is its own epochs' (not the first run's best)
    first_val = next(r for r in rows(d) if r["val/acc"])
    assert first_val["val/acc_best"] == first_val["val/acc"]
    # the provenance names the checkpoint: its file, hash, run and step
    assert s["provenance"]["init_from"] == {
        "path": str(source / "last.ckpt"), "sha256": hashlib.sha256((source / "last.ckpt").read_bytes()).hexdigest(),
        "run_id": read_summary(source)["run_id"], "global_step": 16}
    # another experiment: another run id than the same config started afresh, recorded in config.yaml
    assert s["run_id"] != C.run_id(C.build(C.parse_overrides([*COPY, "trainer.max_epochs=1"])))
    assert f"init_from: {source}" in (d / "config.yaml").read_text()


def test_a_checkpoint_file_is_taken_as_it_is(source, tmp_path):
    start = StartWeights()
    run(*COPY, "trainer.max_epochs=1", f"run.init_from={source / 'best.ckpt'}", f"run.dir={tmp_path / 'w'}",
        callbacks=[start])
    best = model_weights(source / "best.ckpt")
    assert all(torch.equal(start.weights[k], best[k]) for k in best)


def test_an_interrupted_run_resumes_from_its_own_last_ckpt(source, tmp_path):
    items = [*COPY, "run.probes=false", f"run.init_from={source}"]
    full = run(*items, f"run.dir={tmp_path / 'full'}")
    with pytest.raises(SystemExit):
        run(*items, f"run.dir={tmp_path / 'cut'}", callbacks=[StopAt(step=11)])
    said: list[str] = []
    resumed = run(*items, f"run.dir={tmp_path / 'cut'}", log=said.append)
    assert f"ablate: resuming {tmp_path / 'cut'} from last.ckpt (step 8)" in said
    assert rows(tmp_path / "cut") == rows(tmp_path / "full") and resumed["metrics"] == full["metrics"]


def _interrupted_run(tmp_path) -> Path:
    d = tmp_path / "cut"
    with pytest.raises(SystemExit):
        run(*COPY, "run.probes=false", f"run.dir={d}", callbacks=[StopAt(step=11)])
    return d


def _garbage(tmp_path) -> Path:
    (tmp_path / "x.ckpt").write_bytes(b"garbage, not a checkpoint\n")
    return tmp_path / "x.ckpt"


@pytest.mark.parametrize("where, extra, words", [
    (lambda src, tmp: tmp / "nowhere", [], "run.init_from={}: no such file or folder; give the folder of a "
     "completed `ablate train` run or a .ckpt file one wrote"),
    (lambda src, tmp: _garbage(tmp), [], "run.init_from={}: checkpoint {} is truncated, garbage or not a plain checkpoint"),
    (lambda src, tmp: tmp, [], "run.init_from={}: the folder holds no last.ckpt; give the folder of a completed "
     "`ablate train` run or a .ckpt file one wrote"),
    (lambda src, tmp: _interrupted_run(tmp), [], "run.init_from={}: the run there is interrupted, not completed, and "
     "its last.ckpt may still change; finish it first, or give {}/last.ckpt to start from it as it is now"),
    (lambda src, tmp: src, ["model.d_model=32"], "run.init_from={}: the model in {}/last.ckpt does not fit the one "
     "this config builds: its "),
    (lambda src, tmp: src, ["model.n_layers=3"], "run.init_from={}: the model in {}/last.ckpt does not fit the one "
     "this config builds: it lacks "),
], ids=["missing", "not-a-checkpoint", "no-last-ckpt", "unfinished-run", "other-shapes", "other-layers"])
def test_a_checkpoint_that_cannot_be_used_exits_2_with_one_line_before_anything_is_written(
        source, tmp_path, capsys, where, extra, words):
    path = where(source, tmp_path)
    capsys.readouterr()
    assert cli.main(["train", *COPY, *extra, f"run.init_from={path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("ablate: " + words.format(path, path)), err
    assert not (tmp_path / "runs").exists()


def test_a_sweep_whose_checkpoint_cannot_be_used_exits_2_before_any_run(tmp_path, capsys):
    """A sweep checks each run.init_from once before any run starts, as it checks data: one line and exit 2, not
    one failed run per configuration."""
    sweep = tmp_path / "warm.yaml"
    params = "\n".join(f"  {k}: {{value: {v}}}" for k, v in (item.split("=", 1) for item in COPY))
    sweep.write_text("program: ablate\nmethod: grid\nmetric: {name: val/acc_best, goal: maximize}\nparameters:\n"
                     f"{params}\n  run.init_from: {{value: {tmp_path / 'nowhere'}}}\n  seed: {{values: [0, 1]}}\n")
    capsys.readouterr()
    assert cli.main(["sweep", str(sweep), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"ablate: run.init_from={tmp_path / 'nowhere'}: no such file or folder; give the folder of a "
                       "completed `ablate train` run or a .ckpt file one wrote"), err
    assert not (tmp_path / "runs" / "warm").exists()
