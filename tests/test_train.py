"""`ablate train` end to end on tiny settings: run directory, determinism, exact resume,
divergence, bad input (exit 2, nothing written), W&B offline fallback, real MNIST rows."""

from __future__ import annotations

import csv
import json
import os
import re
import socket
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from ablate import cli
from ablate import config as C
from ablate.rundir import read_summary
from ablate.train import train
from tests.conftest import needs_mnist

from .tolerance import (
    assert_accuracy_close,
    atol,
    max_abs,
    max_abs_logit,
    near_tie_mask,
    near_ties,
    output_atol,
)

TINY_COPY = [
    "data.task=copy", "data.vocab=6", "data.length=4", "data.n_train=256", "data.n_val=64",
    "data.n_test=64", "data.batch_size=32", "model.d_model=16", "model.n_heads=2",
    "trainer.max_epochs=2", "tracking=none",
]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    monkeypatch.setenv("WANDB_SILENT", "true")


def run(*items, callbacks=None, log=None):
    return train(C.build(C.parse_overrides(list(items))), log=log or (lambda *a: None), callbacks=callbacks)


def rows(run_dir) -> list[dict]:
    with open(Path(run_dir) / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_run_says_it_is_alive_where_there_is_no_progress_bar(tmp_path, monkeypatch):
    """A first epoch of 12 minutes printed nothing in a log (issue 43, item 2): a line as training starts
    (where, on what, how many steps) and then one at least every ProgressLines.every_s seconds (0 here: every
    step) with the step, the epoch's share and the time left, besides the epoch lines."""
    from ablate.callbacks import ProgressLines

    monkeypatch.setattr(ProgressLines, "every_s", 0.0)
    monkeypatch.setattr(ProgressLines, "warm_up", 3)
    monkeypatch.setattr(ProgressLines, "estimate_after", 5)
    said: list[str] = []
    run(*TINY_COPY, f"run.dir={tmp_path / 'r'}", log=said.append)
    assert said[0] == f"ablate: training {tmp_path / 'r'} on cpu: 2 epoch(s) of 8 steps"
    beats = [line for line in said if "of this epoch" in line]
    assert len(beats) == 16 and beats[0].startswith("ablate: epoch 1/2  step 1/16 (1/8 of this epoch)")
    assert "s left" in beats[1] and beats[-1].startswith("ablate: epoch 2/2  step 16/16 (8/8 of this epoch)")
    assert sum(line.startswith("ablate: epoch ") and "val/acc" in line for line in said) == 2
    estimate = [line for line in said if "at this pace" in line]  # once: the pace after the warm-up steps
    assert len(estimate) == 1 and re.fullmatch(r"ablate: steps 3-8 took \d+\.\d s: about \d+ s for the other 8 at "
                                               r"this pace, validation and probes not counted", estimate[0]), estimate


def test_a_run_finished_by_other_code_is_kept_and_named(tmp_path):
    """A finished run is not run again; one made by another commit was kept silently (issue 43, item 5): the
    line says which commit made it and which the code is at now."""
    from ablate.provenance import git_state
    from ablate.rundir import write_json

    now = git_state()["commit"]
    if now is None:
        pytest.skip("not a git checkout: no commit to compare")
    d = tmp_path / "r"
    run(*TINY_COPY, f"run.dir={d}")
    said: list[str] = []
    run(*TINY_COPY, f"run.dir={d}", log=said.append)
    assert said == [f"ablate: {d} already completed; not run again (rerun it with --retrain)"]
    summary = read_summary(d)
    summary["provenance"]["commit"] = "0" * 40
    write_json(d / "summary.json", summary)
    said.clear()
    run(*TINY_COPY, f"run.dir={d}", log=said.append)
    assert said == [f"ablate: {d} already completed; not run again; it was made by other code (commit 0000000000; "
                    f"the code is now at {now[:10]}): rerun it with --retrain"]


def _offline_wandb(tmp_path, monkeypatch) -> None:
    """W&B offline, its own folders inside tmp_path."""
    for var, name in (("WANDB_CONFIG_DIR", "wandb-config"), ("WANDB_CACHE_DIR", "wandb-cache"),
                      ("WANDB_DATA_DIR", "wandb-data"), ("WANDB_DIR", "wandb-dir")):
        monkeypatch.setenv(var, str(tmp_path / name))
    monkeypatch.setenv("WANDB_MODE", "offline")


def test_retrain_trains_a_run_of_other_code_again_as_a_new_attempt_and_keeps_the_earlier(tmp_path, monkeypatch,
                                                                                           capsys):
    """A finished run made by other code was kept, with "move the folder aside to rerun it" (issue 43): --retrain
    trains it again from scratch as a new attempt, a W&B run of its own, its wall time its own; the earlier
    attempt's files are kept in attempts/1/, where the results table does not look: the table has one row for
    the run, with the new numbers."""
    from ablate import results
    from ablate.provenance import git_state
    from ablate.rundir import write_json

    now = git_state()["commit"]
    if now is None:
        pytest.skip("not a git checkout: no commit to compare")
    _offline_wandb(tmp_path, monkeypatch)
    args = ["train", *TINY_COPY, "trainer.max_epochs=1", "tracking=wandb", "run.group=again"]
    assert cli.main(args) == 0
    d = next((tmp_path / "runs" / "again").iterdir())
    first_id = (d / "wandb_id").read_text().strip()
    old = read_summary(d)
    old["provenance"]["commit"] = "0" * 40  # a commit this clone lacks: other code
    old["metrics"]["test/acc"], old["wall_time_s"] = -1.0, 1e6  # told apart from the new attempt's
    write_json(d / "summary.json", old)
    capsys.readouterr()

    assert cli.main(args) == 0  # without the flag: kept, and the line names the flag
    assert (f"ablate: {d} already completed; not run again; it was made by other code (commit 0000000000; the "
            f"code is now at {now[:10]}): rerun it with --retrain") in capsys.readouterr().err.splitlines()
    assert read_summary(d) == old

    assert cli.main([*args, "--retrain"]) == 0
    assert (f"ablate: {d} is trained again from scratch as a new attempt; the earlier one (completed, commit "
            f"0000000000) is kept in {d / 'attempts' / '1'}") in capsys.readouterr().err.splitlines()
    new = read_summary(d)
    assert new["status"] == "completed" and new["provenance"]["commit"] == now and new["retrained"] == "attempts/1"
    assert new["earlier_provenance"] == [old["provenance"]] and new["attempts"] == 2
    assert 0 <= new["metrics"]["test/acc"] <= 1 and new["wall_time_s"] < 1e6
    kept = d / "attempts" / "1"
    assert read_summary(kept) == old and (kept / "wandb_id").read_text().strip() == first_id
    assert sorted(p.name for p in kept.iterdir()) == ["best.ckpt", "config.yaml", "last.ckpt", "metrics.csv",
                                                      "probes.json", "probes.npz", "summary.json", "wandb_id"]
    assert (d / "wandb_id").read_text().strip() not in ("", first_id)  # a W&B run of its own
    assert len(list((d / "wandb").glob("offline-run-*"))) == 2  # both attempts' W&B runs, for `ablate sync`
    table = results.load("again")
    assert list(table["run_id"]) == [d.name] and table["test/acc"].iloc[0] == new["metrics"]["test/acc"]


def test_a_retrain_whose_move_is_cut_short_never_leaves_a_half_moved_finished_run(tmp_path, monkeypatch):
    """keep_attempt moves the earlier attempt's files one by one (review of c8acd85: a move cut after two files
    left summary.json saying completed beside a folder without config.yaml, read as corrupt and never retrained).
    An error puts every file back, the run as it was; a kill leaves summary.json marked (interrupted, and where
    the attempt goes), so no reader takes it for finished, and the next train of the run finishes the move and
    trains it afresh."""
    from ablate import rundir
    from ablate.rundir import RETRAINING, keep_attempt

    d = tmp_path / "r"
    run(*TINY_COPY, f"run.dir={d}")
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    real, calls = os.replace, []

    def fails_third(src, dst):
        calls.append(src)
        if len(calls) == 3:
            raise OSError(5, "Input/output error")
        real(src, dst)

    monkeypatch.setattr(rundir.os, "replace", fails_third)
    with pytest.raises(OSError, match="Input/output error"):
        keep_attempt(d)
    monkeypatch.setattr(rundir.os, "replace", real)
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()} == before  # as it was
    assert rundir.is_finished(d) and not (d / "attempts" / "1" / "summary.json").exists()

    # a kill after two files: the mark, then two files moved, then nothing
    summary = read_summary(d)
    rundir.write_json(d / "summary.json", {**summary, "status": "interrupted", rundir.WAS: "completed",
                                           RETRAINING: "attempts/1"})
    for name in ("config.yaml", "metrics.csv"):
        real(d / name, d / "attempts" / "1" / name)
    assert not rundir.is_finished(d)  # a sweep trains it, and a table reads it as interrupted, not completed
    said: list[str] = []
    run(*TINY_COPY, f"run.dir={d}", log=said.append)  # a plain train, no flag: it finishes the retrain
    assert any("is trained again from scratch as a new attempt; the earlier one (completed" in s for s in said), said
    assert read_summary(d / "attempts" / "1") == summary and read_summary(d)["status"] == "completed"
    kept = {p.name: p.read_bytes() for p in (d / "attempts" / "1").iterdir()}
    assert {k: v for k, v in kept.items() if k != "summary.json"} == {
        k: v for k, v in before.items() if k in rundir.ATTEMPT_FILES and k != "summary.json"}


def test_retrain_resumes_an_interrupted_run_of_this_code_and_starts_one_of_other_code_afresh(tmp_path):
    """--retrain on an interrupted run: one this code started resumes (the same command after an interruption goes
    on with it); one other code started is set aside like a finished one and trained from scratch (resuming it
    would mix two codes in one result)."""
    from ablate.provenance import git_state
    from ablate.rundir import write_json

    if git_state()["commit"] is None:
        pytest.skip("not a git checkout: no commit to compare")
    d = tmp_path / "r"
    cfg = C.build(C.parse_overrides([*TINY_COPY, "run.probes=false", f"run.dir={d}"]))
    train(cfg, log=lambda line: None)
    for commit, resumed in ((None, True), ("0" * 40, False)):
        cut = read_summary(d)
        cut["status"] = "interrupted"  # as if stopped in its final test, after its last checkpoint
        cut["provenance"]["commit"] = commit or cut["provenance"]["commit"]
        write_json(d / "summary.json", cut)
        said: list[str] = []
        summary = train(cfg, log=said.append, retrain="any")
        assert summary["status"] == "completed"
        assert (f"ablate: resuming {d} from last.ckpt (step 16)" in said) == resumed, said
        assert (d / "attempts").exists() != resumed and summary.get("retrained") == (None if resumed else "attempts/1")
    assert read_summary(d / "attempts" / "1") == cut


def test_run_directory_holds_everything(tmp_path):
    s = run(*TINY_COPY, f"run.dir={tmp_path / 'r'}")
    d = tmp_path / "r"
    assert sorted(p.name for p in d.iterdir() if not p.name.startswith(".")) == [
        "best.ckpt", "config.yaml", "last.ckpt", "metrics.csv", "probes.json", "probes.npz", "summary.json"]
    assert s["status"] == "completed" and s == read_summary(d)
    for key in ("train/loss", "val/acc", "val/acc_best", "test/acc", "test/seq_acc"):
        assert 0 <= s["metrics"][key] < 10, key
    assert s["params"]["total"] == sum(p.numel() for p in _model(d).parameters())
    assert set(s["params"]) == {"attention", "ffn", "embedding", "other", "total"}
    assert s["global_step"] == 2 * 8 and s["train_samples_per_s"] > 0 and s["wall_time_s"] > 0
    prov = s["provenance"]
    assert prov["versions"]["torch"] == torch.__version__.split("+")[0] and "threads" in prov
    assert "commit" in prov and "dirty" in prov
    # the saved config rebuilds the same config
    saved = C.from_dict(__import__("yaml").safe_load((d / "config.yaml").read_text()))
    assert saved == C.build(C.parse_overrides([*TINY_COPY, f"run.dir={d}"]))


def _model(run_dir):
    from ablate.tasks import CopyTokens

    return CopyTokens.load_from_checkpoint(Path(run_dir) / "last.ckpt").model


def _whole_set_accuracy(model, x, y) -> tuple[float, int, int]:
    """(accuracy, near ties, counted) of model on the whole split in one forward pass. The trainer
    saw it in batches (and shards under DDP): other matmul shapes round apart, so a prediction whose
    top-2 margin is within that rounding (tests/tolerance.py) may go either way."""
    with torch.no_grad():
        logits = model(x)
        tol = output_atol(model, x)
    mask = y != -100
    right = (logits.argmax(-1)[mask] == y[mask]).sum().item()
    total = int(mask.sum())
    return right / total, near_ties(logits, tol, mask), total


def test_checkpoint_rebuilds_the_task_and_its_numbers(tmp_path):
    s = run(*TINY_COPY, f"run.dir={tmp_path / 'r'}")
    from ablate.data import build_datamodule
    from ablate.tasks import CopyTokens

    task = CopyTokens.load_from_checkpoint(tmp_path / "r" / "last.ckpt").eval()
    dm = build_datamodule(task.cfg.data)
    dm.setup("test")
    x, y = dm.test_set.tensors()
    acc, ties, total = _whole_set_accuracy(task.model, x, y)
    assert_accuracy_close(s["metrics"]["test/acc"], acc, ties, total)


def test_same_seed_same_metrics_other_seed_other(tmp_path):
    a = run(*TINY_COPY, f"run.dir={tmp_path / 'a'}")
    b = run(*TINY_COPY, f"run.dir={tmp_path / 'b'}")
    c = run(*TINY_COPY, f"run.dir={tmp_path / 'c'}", "seed=1")
    assert rows(tmp_path / "a") == rows(tmp_path / "b")
    assert a["metrics"] == b["metrics"]
    assert a["metrics"]["train/loss"] != c["metrics"]["train/loss"]


class StopAt(pl.Callback):
    """Simulate Ctrl-C: just after epoch `epoch` ended (its last.ckpt written, the next epoch begun)
    or after a given step."""

    def __init__(self, epoch=None, step=None):
        self.epoch, self.step = epoch, step

    def on_train_epoch_start(self, trainer, pl_module):
        if self.epoch is not None and trainer.current_epoch == self.epoch + 1:
            raise KeyboardInterrupt

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            raise KeyboardInterrupt


def test_resume_from_end_of_epoch_equals_uninterrupted_run(tmp_path):
    """Lightning's test_restart_parity, with RNG states restored: every logged number is equal.
    Stopped in the middle of epoch 2 (8 steps per epoch), the run resumes from the end of epoch 1."""
    items = [*TINY_COPY, "trainer.max_epochs=3"]
    full = run(*items, f"run.dir={tmp_path / 'full'}")
    with pytest.raises(SystemExit):  # Lightning turns KeyboardInterrupt into exit(1)
        run(*items, f"run.dir={tmp_path / 'cut'}", callbacks=[StopAt(step=11)])
    cut = read_summary(tmp_path / "cut")
    assert cut["status"] == "interrupted" and cut["interrupted_by"] == "SystemExit"
    assert torch.load(tmp_path / "cut" / "last.ckpt", weights_only=True)["global_step"] == 8
    said: list[str] = []
    resumed = run(*items, f"run.dir={tmp_path / 'cut'}", log=said.append)
    assert f"ablate: resuming {tmp_path / 'cut'} from last.ckpt (step 8)" in said
    assert resumed["attempts"] == 2 and resumed["global_step"] == 24
    assert rows(tmp_path / "cut") == rows(tmp_path / "full")
    assert resumed["metrics"] == full["metrics"]


def test_resume_mid_epoch_completes_the_run(tmp_path):
    items = [*TINY_COPY, "trainer.ckpt_every_n_steps=3"]
    with pytest.raises(SystemExit):
        run(*items, f"run.dir={tmp_path / 'r'}", callbacks=[StopAt(step=4)])
    step = torch.load(tmp_path / "r" / "last.ckpt", weights_only=True)["global_step"]
    assert step == 3
    s = run(*items, f"run.dir={tmp_path / 'r'}")
    assert s["status"] == "completed" and s["global_step"] == 16
    assert "test/acc" in s["metrics"]


def test_finished_run_is_not_repeated(tmp_path):
    first = run(*TINY_COPY, f"run.dir={tmp_path / 'r'}")
    mtime = (tmp_path / "r" / "last.ckpt").stat().st_mtime_ns
    again = run(*TINY_COPY, f"run.dir={tmp_path / 'r'}")
    assert again == first and (tmp_path / "r" / "last.ckpt").stat().st_mtime_ns == mtime


def test_divergence_stops_at_once_and_is_recorded(tmp_path):
    s = run(*TINY_COPY, "model.norm=none", "optim.lr=1e12", "trainer.max_epochs=5", f"run.dir={tmp_path / 'r'}")
    assert s["status"] == "diverged"
    assert 1 <= s["diverged_step"] < 5 * 8  # stopped well before the end
    assert s["global_step"] == s["diverged_step"]
    assert read_summary(tmp_path / "r")["status"] == "diverged"
    assert "test/acc" not in s["metrics"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["model.n_head=8"], "unknown key 'model.n_head'"),
        (["model.n_heads=x"], "model.n_heads='x'"),
        (["model.max_len=10"], "model.max_len=10"),
        (["model.pos_enc=rope", "model.d_head=5"], "even d_head"),
        (["trainer.devices=zero"], "trainer.devices='zero'"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys, args, words):
    assert cli.main(["train", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and words in err and err.startswith("ablate: ")
    assert not (tmp_path / "runs").exists()


def test_missing_data_exits_2_before_writing(tmp_path, capsys, monkeypatch):
    import ablate.data.files as files

    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setattr(files, "network_available", lambda timeout=3.0: False)
    assert cli.main(["train", "tracking=none"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nowhere" in err and "ABLATE_DATA_DIR" in err
    assert not (tmp_path / "runs").exists()


def test_wandb_mode_never_waits_for_the_network(monkeypatch):
    from ablate.tracking import wandb_mode

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent")
    assert wandb_mode() == "offline"  # no key
    monkeypatch.setenv("WANDB_API_KEY", "f" * 40)
    with socket.socket() as s:  # a port that refuses at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{port}")
    assert wandb_mode(timeout=1) == "offline"  # key, but the host does not answer
    with socket.socket() as server:  # a host that answers
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert wandb_mode(timeout=1) == "online"
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert wandb_mode() == "offline"


def test_wandb_offline_run_with_a_fake_key_and_no_network(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "0123456789abcdef" * 2 + "01234567")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    items = [*TINY_COPY, "trainer.max_epochs=1", "tracking=wandb", "run.group=wb", f"run.dir={tmp_path / 'r'}"]
    s = run(*items)
    assert s["status"] == "completed"
    offline = list((tmp_path / "r" / "wandb").glob("offline-run-*"))
    wandb_id = (tmp_path / "r" / "wandb_id").read_text().strip()  # this attempt's W&B id: the run id and 6 hex digits
    assert wandb_id.startswith(f"{s['run_id']}-") and len(offline) == 1 and offline[0].name.endswith(wandb_id)
    assert list(offline[0].glob("run-*.wandb"))


@needs_mnist
def test_short_real_run_on_mnist_rows(tmp_path):
    s = run("data.train_subset=2048", "trainer.max_epochs=1", "data.val_size=1000", "tracking=none",
            "trainer.limit_val_batches=4", "model.pos_enc=none", f"run.dir={tmp_path / 'r'}")
    m = s["metrics"]
    assert s["status"] == "completed" and s["global_step"] == 32
    assert m["test/acc"] > 0.3  # 10 % is chance; 32 steps on real rows get far above it (0.43 here)
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["metrics"] == m
    from ablate.tasks import ClassifyRows, load_task

    task, datamodule = load_task(tmp_path / "r" / "last.ckpt")  # weights-only, as `ablate probe` loads it
    assert isinstance(task, ClassifyRows) and datamodule.kind == "classify"
    assert sum(p.numel() for p in task.parameters()) == s["params"]["total"]
    # no positional encoding + mean pooling: a bag of rows, so permuting them changes no prediction
    # but a near tie, which the reordered sums (and the trainer's batches) may round either way
    datamodule.setup("test")
    x, y = datamodule.test_set.tensors()
    model = task.model.eval()
    with torch.no_grad():
        logits, logits_perm = model(x), model(x[:, task.perm])
        # output_atol's allowance from these logits: the permuted rows' scores are the same scores, reordered
        tol = atol(max_abs(logits), max_abs(logits_perm), max_abs_logit(model, x))
    either = near_tie_mask(logits, tol) | near_tie_mask(logits_perm, tol)
    print(f"test/acc {m['test/acc']} acc_perm {m['test/acc_perm']}; max|logit diff| of the orders "
          f"{(logits - logits_perm).abs().max():.1e}, tol {tol:.1e}, near ties {int(either.sum())}")
    assert_accuracy_close(m["test/acc_perm"], m["test/acc"], int(either.sum()), len(y))


def test_ddp_two_cpu_processes_sync_metrics_and_make_one_wandb_run(tmp_path):
    """`ablate train trainer.devices=2 trainer.strategy=ddp` (gloo): Lightning re-launches the CLI for
    rank 1; the logged validation accuracy is the one of the whole validation set."""
    import subprocess
    import sys

    from ablate.data import build_datamodule
    from ablate.tasks import CopyTokens

    d = tmp_path / "ddp"
    env = {**os.environ, "WANDB_MODE": "offline", "ABLATE_PROGRESS": "0"}
    items = [a for a in TINY_COPY if not a.startswith("tracking")]
    cmd = [sys.executable, "-m", "ablate", "train", *items, "data.n_val=96", "trainer.accelerator=cpu",
           "trainer.devices=2", "trainer.strategy=ddp", f"run.dir={d}", "trainer.threads=1"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count('"status": "completed"') == 1  # rank 1 prints nothing
    s = read_summary(d)
    assert s["status"] == "completed" and s["global_step"] == 2 * 4  # 256 / 32 / 2 ranks per epoch
    assert len(list((d / "wandb").glob("offline-run-*"))) == 1
    task = CopyTokens.load_from_checkpoint(d / "last.ckpt").eval()
    dm = build_datamodule(task.cfg.data)
    dm.setup("fit")
    x, y = dm.val_set.tensors()
    whole, ties, total = _whole_set_accuracy(task.model, x, y)
    assert_accuracy_close(s["metrics"]["val/acc"], whole, ties, total)
    best = CopyTokens.load_from_checkpoint(d / "best.ckpt").eval()  # the best epoch's weights, the ranks agreeing
    whole, ties, total = _whole_set_accuracy(best.model, x, y)
    assert_accuracy_close(s["metrics"]["val/acc_best"], whole, ties, total)


def test_ddp_evaluates_every_example_once_when_the_ranks_do_not_divide_the_sets(tmp_path):
    """65 validation and 65 test sequences on 2 ranks (33 and 32: two batches of 32 on one rank, one on the
    other): Lightning's sampler padded rank 1 with a repeated example, so the recorded accuracies were not
    the sets' (3 ranks on 101 sequences: 0.11520 recorded, 0.11262 true; issue 41, item 3, and issue 42)."""
    import subprocess
    import sys

    from ablate.data import build_datamodule
    from ablate.tasks import CopyTokens

    d = tmp_path / "uneven"
    env = {**os.environ, "ABLATE_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "ablate", "train", *TINY_COPY, "data.n_val=65", "data.n_test=65",
           "trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp", f"run.dir={d}", "trainer.threads=1"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    s = read_summary(d)
    task = CopyTokens.load_from_checkpoint(d / "last.ckpt").eval()
    dm = build_datamodule(task.cfg.data)
    dm.setup("fit")
    dm.setup("test")
    for split, data in (("val", dm.val_set), ("test", dm.test_set)):
        x, y = data.tensors()
        assert len(x) == 65
        whole, ties, total = _whole_set_accuracy(task.model, x, y)
        assert_accuracy_close(s["metrics"][f"{split}/acc"], whole, ties, total)


def test_a_ddp_run_closes_the_process_group_it_opened(tmp_path):
    """Lightning closes only NCCL's process group (at exit); gloo's, left open, can abort a rank while it
    exits ("terminate called without an active exception", exit 134, after its run was recorded). A run
    closes the group it opened; a group the caller opened is the caller's and stays."""
    import torch.distributed as dist

    from ablate import config as C
    from ablate.train import train

    items = [*TINY_COPY, "trainer.max_epochs=1", "run.probes=false", "trainer.accelerator=cpu",
             "trainer.devices=1", "trainer.strategy=ddp", "trainer.threads=1"]
    cfg = C.build(C.parse_overrides([*items, f"run.dir={tmp_path / 'a'}"]))
    assert not dist.is_initialized()
    assert train(cfg, log=lambda _: None)["status"] == "completed"
    assert not dist.is_initialized()

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        cfg = C.build(C.parse_overrides([*items, f"run.dir={tmp_path / 'b'}"]))
        assert train(cfg, log=lambda _: None)["status"] == "completed"
        assert dist.is_initialized()
    finally:
        dist.destroy_process_group()
