"""best.ckpt: the weights of the epoch with the best val/acc (issue 43), written after that epoch's validation
only when val/acc beat every earlier epoch's, kept exactly through an interruption and a resume, and read
back by `ablate probe` and the task loader as any checkpoint of a run."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from ablate import cli
from ablate.rundir import read_summary
from tests.test_train import StopAt, _whole_set_accuracy, run
from tests.tolerance import assert_accuracy_close

# the copy task at a learning rate high enough that val/acc goes up and down (0.13, 0.20, 0.18 here): an epoch that
# improves and one that does not
EPOCH = 256 // 32
ITEMS = [
    "data.task=copy", "data.vocab=6", "data.length=4", "data.n_train=256", "data.n_val=64", "data.n_test=64",
    "data.batch_size=32", "model.d_model=16", "model.n_heads=2", "optim.lr=0.1", "trainer.max_epochs=3",
    "tracking=none", "trainer.threads=1", "run.probes=false",
]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")


class EpochEnds(pl.Callback):
    """At each epoch's end (after its validation, so after best.ckpt was written; before last.ckpt): the model's
    weights and best.ckpt's bytes' hash."""

    def __init__(self, run_dir: Path):
        self.best = Path(run_dir) / "best.ckpt"
        self.weights: list[dict[str, torch.Tensor]] = []
        self.hashes: list[str | None] = []

    def on_train_epoch_end(self, trainer, pl_module):
        self.weights.append({k: v.detach().clone() for k, v in pl_module.state_dict().items()})
        self.hashes.append(hashlib.sha256(self.best.read_bytes()).hexdigest() if self.best.exists() else None)


def val_accs(run_dir: Path) -> list[float]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return [float(r["val/acc"]) for r in csv.DictReader(f) if r["val/acc"]]


def best_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "best.ckpt", weights_only=True)["state_dict"]


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_best_ckpt_holds_the_best_epochs_weights_written_only_when_val_acc_improved(tmp_path, capsys):
    d = tmp_path / "r"
    seen = EpochEnds(d)
    summary = run(*ITEMS, f"run.dir={d}", callbacks=[seen])
    accs = val_accs(d)
    improved = [acc > max(accs[:i], default=-1.0) for i, acc in enumerate(accs)]
    assert improved[0] and not all(improved), f"the settings must give an epoch that does not improve: {accs}"
    rewritten = [seen.hashes[0] is not None] + [a != b for a, b in zip(seen.hashes, seen.hashes[1:])]
    assert rewritten == improved, (accs, seen.hashes)
    best = accs.index(max(accs))  # the first epoch at the best: a tie keeps the earlier one
    assert same(best_weights(d), seen.weights[best]) and not same(best_weights(d), seen.weights[-1])
    assert summary["metrics"]["val/acc_best"] == max(accs)

    # rebuilt from best.ckpt alone, the model scores the best epoch's val/acc on the whole validation set
    from ablate.tasks import load_task

    task, datamodule = load_task(d / "best.ckpt")
    datamodule.setup("fit")
    acc, ties, total = _whole_set_accuracy(task.eval().model, *datamodule.val_set.tensors())
    assert_accuracy_close(acc, accs[best], ties, total)
    # weights only: no optimiser, RNG or callback states (best.ckpt is never resumed from)
    assert not {"optimizer_states", "callbacks", "rng_states"} & set(torch.load(d / "best.ckpt", weights_only=True))
    # and `ablate probe` takes it by its path
    capsys.readouterr()
    assert cli.main(["probe", str(d / "best.ckpt"), "--no-expensive", "--json"]) == 0
    assert "entropy_l0" in json.loads(capsys.readouterr().out)


def test_an_interrupted_run_resumes_to_the_same_best_ckpt_even_in_a_moved_folder(tmp_path):
    """Stopped in the epoch after the best one, the resumed run must know that best score (Lightning keeps it in
    last.ckpt's callback states): its later, worse epochs leave best.ckpt as the uninterrupted run's. Resumed in
    another folder (a copy, another mount), Lightning alone would forget it and keep a worse epoch."""
    full = tmp_path / "full"
    run(*ITEMS, f"run.dir={full}")
    accs = val_accs(full)
    best = accs.index(max(accs))
    assert best < len(accs) - 1, f"the settings must give a worse epoch after the best: {accs}"
    cut = tmp_path / "cut"
    with pytest.raises(SystemExit):
        run(*ITEMS, f"run.dir={cut}", callbacks=[StopAt(step=(best + 1) * EPOCH + 2)])
    assert read_summary(cut)["status"] == "interrupted" and same(best_weights(cut), best_weights(full))
    moved = tmp_path / "moved"
    shutil.copytree(cut, moved)
    for d in (cut, moved):
        resumed = run(*ITEMS, f"run.dir={d}")
        assert resumed["attempts"] == 2 and val_accs(d) == accs
        assert same(best_weights(d), best_weights(full)), d


def test_a_run_resumed_from_a_checkpoint_without_the_best_score_writes_only_a_better_epoch(tmp_path):
    """A last.ckpt written before best.ckpt existed (or with run.keep_best=false, which leaves the run id as it is)
    holds no best score, but its val/acc_best: the resumed run writes best.ckpt only for an epoch that beats it,
    never a worse one as if it were the best."""
    full = tmp_path / "full"
    run(*ITEMS, f"run.dir={full}", "run.keep_best=false")
    assert not (full / "best.ckpt").exists()
    accs = val_accs(full)
    best = accs.index(max(accs))
    cut = tmp_path / "cut"
    with pytest.raises(SystemExit):
        run(*ITEMS, "run.keep_best=false", f"run.dir={cut}", callbacks=[StopAt(step=(best + 1) * EPOCH + 2)])
    run(*ITEMS, f"run.dir={cut}")
    assert val_accs(cut) == accs and not (cut / "best.ckpt").exists()  # no later epoch beat the best


def test_a_retrain_keeps_the_earlier_attempts_best_ckpt_with_its_files(tmp_path):
    from ablate import config as C
    from ablate.train import train

    d = tmp_path / "r"
    run(*ITEMS, "trainer.max_epochs=1", f"run.dir={d}")
    first = best_weights(d)
    train(C.build(C.parse_overrides([*ITEMS, "trainer.max_epochs=1", f"run.dir={d}"])), log=lambda *a: None,
          retrain="any")
    assert same(torch.load(d / "attempts" / "1" / "best.ckpt", weights_only=True)["state_dict"], first)
    assert (d / "best.ckpt").is_file()


def test_a_linked_best_ckpt_is_refused_before_anything_is_written(tmp_path, capsys):
    d = tmp_path / "r"
    d.mkdir()
    (tmp_path / "elsewhere").write_bytes(b"")
    (d / "best.ckpt").symlink_to(tmp_path / "elsewhere")
    assert cli.main(["train", *ITEMS, f"run.dir={d}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{d / 'best.ckpt'} is a symbolic link" in err
    assert sorted(p.name for p in d.iterdir()) == ["best.ckpt"]
