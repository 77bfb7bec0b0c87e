"""Runs resumed from a mid-epoch checkpoint (`trainer.ckpt_every_n_steps`) end with the numbers of an
uninterrupted run, or start afresh saying why: never `completed` with other numbers (issue 23, items
1 and 2). Each run is a real `ablate train` process killed with SIGKILL at a known point."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import torch

from ablate import cli
from ablate.rundir import read_summary
from tests.test_resume import COPY, EPOCH, _env
from tests.test_train import rows, run

# `ablate train` in a real process that kills itself with SIGKILL at global step {step} (after the
# step's optimiser update, before that step's checkpoint) or in the validation of epoch {val_epoch}
KILLER = """
import os, signal, sys
import pytorch_lightning as pl
from ablate import cli, train as T

class KillAt(pl.Callback):
    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == {step}:
            os.kill(os.getpid(), signal.SIGKILL)

    def on_validation_batch_start(self, trainer, *args):
        if not trainer.sanity_checking and trainer.current_epoch == {val_epoch}:
            os.kill(os.getpid(), signal.SIGKILL)

real = T.train
T.train = lambda cfg, log=print, callbacks=None, retrain=None: real(cfg, log, [KillAt()], retrain)
sys.exit(cli.main(["train", *sys.argv[1:]]))
"""


def _killed(tmp_path, items, run_dir, step=-1, val_epoch=-1) -> None:
    script = tmp_path / "killer.py"
    script.write_text(KILLER.format(step=step, val_epoch=val_epoch))
    done = subprocess.run([sys.executable, str(script), *items, f"run.dir={run_dir}"], env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert read_summary(run_dir)["status"] == "running"


def _ckpt(run_dir) -> dict:
    return torch.load(run_dir / "last.ckpt", weights_only=True)


def _resume(items, run_dir, capsys) -> tuple[dict, str]:
    assert cli.main(["train", *items, f"run.dir={run_dir}"]) == 0
    out = capsys.readouterr()
    return json.loads(out.out.strip().splitlines()[-1]), out.err


def _same_as_uninterrupted(cut, full) -> None:
    resumed = read_summary(cut)
    assert resumed["status"] == "completed" and resumed["attempts"] == 2
    assert resumed["global_step"] == full["global_step"]
    assert rows(cut) == rows(full["run_dir"])  # every train and validation row, epoch by epoch
    assert resumed["metrics"] == full["metrics"]  # val/acc_best, val/acc_mean, test/acc: to the bit
    assert resumed["probes"] == full["probes"]


def test_killed_in_the_last_validation_after_a_step_checkpoint_resumes_exactly(tmp_path, capsys):
    """The issue's case: a step checkpoint falls on an epoch's last batch (step 32 of 4 epochs of 8
    with ckpt_every_n_steps=4), the run is killed in that epoch's validation. Before the fix it resumed
    from the step-32 checkpoint, skipped the validation and was recorded `completed` with the val/acc,
    val/acc_best and val/acc_mean of epoch 3 and no validation row for epoch 4. Now no step checkpoint
    is written on an epoch's last batch (the epoch's own checkpoint follows its validation), so the run
    resumes from step 28 and ends with every number of the uninterrupted run."""
    items = [*COPY, "trainer.ckpt_every_n_steps=4"]
    full = run(*items, f"run.dir={tmp_path / 'full'}")
    cut = tmp_path / "cut"
    _killed(tmp_path, items, cut, val_epoch=3)
    assert _ckpt(cut)["global_step"] == 4 * EPOCH - 4
    line, err = _resume(items, cut, capsys)
    assert f"ablate: resuming {cut} from last.ckpt (step {4 * EPOCH - 4})" in err.splitlines()
    assert line["status"] == "completed"
    assert len([r for r in rows(cut) if r.get("val/acc")]) == 4  # epoch 4's validation too
    _same_as_uninterrupted(cut, full)


def test_a_mid_epoch_resume_continues_that_epochs_data_order_exactly(tmp_path, capsys):
    """Killed in the middle of epoch 3 (at step 21; last.ckpt at step 18, two batches into the epoch):
    the resumed run sees the rest of epoch 3's shuffled order and the dropout masks of the uninterrupted
    run (the loader's place in its epoch is part of the checkpoint; before the fix the epoch began a new
    order, Lightning warned "not resumable" into train.log only, and test/acc differed)."""
    items = [*COPY, "trainer.ckpt_every_n_steps=3", "model.dropout=0.1"]
    full = run(*items, f"run.dir={tmp_path / 'full'}")
    cut = tmp_path / "cut"
    _killed(tmp_path, items, cut, step=2 * EPOCH + 5)
    saved = _ckpt(cut)
    assert saved["global_step"] == 2 * EPOCH + 2
    (place,) = saved["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    assert place["taken"] == 2 * 32  # two batches of epoch 3 done
    line, err = _resume(items, cut, capsys)
    assert "not resumable" not in err
    _same_as_uninterrupted(cut, full)


def test_a_mid_epoch_checkpoint_without_the_data_position_starts_afresh(tmp_path, capsys):
    """A mid-epoch last.ckpt written before the loader's place was saved cannot be resumed exactly:
    it is set aside with one line and the run starts afresh (and so ends with the uninterrupted run's
    numbers), never resumed into other numbers."""
    items = [*COPY, "trainer.ckpt_every_n_steps=3"]
    full = run(*items, f"run.dir={tmp_path / 'full'}")
    cut = tmp_path / "cut"
    _killed(tmp_path, items, cut, step=EPOCH + 5)
    saved = _ckpt(cut)
    del saved["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    torch.save(saved, cut / "last.ckpt")
    line, err = _resume(items, cut, capsys)
    said = [x for x in err.splitlines() if "mid-epoch" in x]
    assert len(said) == 1 and f"(step {EPOCH + 4})" in said[0] and "starts afresh" in said[0], err
    assert list(cut.glob("last.ckpt.corrupt-*"))
    resumed = read_summary(cut)
    assert resumed["status"] == "completed" and rows(cut) == rows(full["run_dir"])
    assert resumed["metrics"] == full["metrics"]


# the command line (`cli.main()` reading sys.argv), with a SIGTERM sent to itself at interpreter exit:
# after the JSON line, while W&B's and Lightning's exit hooks would run
LATE_SIGTERM = """
import atexit, os, signal, sys, time
from ablate import cli
atexit.register(lambda: (os.kill(os.getpid(), signal.SIGTERM), time.sleep(5)))
sys.argv = ["ablate", "train", *sys.argv[1:]]
sys.exit(cli.main())
"""


def test_sigterm_after_the_json_line_exits_0_with_a_line(tmp_path):
    """SIGTERM once the run is recorded and its JSON line printed: exit 0 and a last line saying the
    run stays completed (it was 143 with no word, read by a scheduler as a preempted run)."""
    script = tmp_path / "late.py"
    script.write_text(LATE_SIGTERM)
    d = tmp_path / "r"
    done = subprocess.run([sys.executable, str(script), *COPY, "trainer.max_epochs=1", f"run.dir={d}"], env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["status"] == "completed"
    assert done.stderr.strip().splitlines()[-1] == f"ablate: SIGTERM after {d} had completed; it stays so (nothing was lost)"
    assert read_summary(d)["status"] == "completed"


def test_data_lost_after_the_run_started_is_a_failed_run_not_bad_input(tmp_path, capsys, monkeypatch):
    """Data that goes missing once the run has started (Lightning calls prepare_data again in fit: a
    data folder removed meanwhile fails there) is recorded as failed and exits 1; exit 2 is for bad
    input before any work, and a scheduler retries neither alike."""
    import ablate.data.copytask as copytask
    from ablate.data import DataError

    calls = []
    real = copytask.CopyTask.prepare_data

    def vanishing(self):
        calls.append(1)
        if len(calls) > 1:  # the folder is gone by the time the Trainer asks again
            raise DataError("the data folder /gone is missing; put the data back")
        return real(self)

    monkeypatch.setattr(copytask.CopyTask, "prepare_data", vanishing)
    d = tmp_path / "r"
    assert cli.main(["train", *COPY, f"run.dir={d}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"ablate: the data folder /gone is missing; put the data back (after {d} had started: it is "
                   "recorded as failed; the same command runs it again once that is fixed)")
    assert read_summary(d)["status"] == "failed"


def test_the_resumable_sampler_draws_torchs_random_sampler_order_index_for_index():
    """ResumableSampler is torch's RandomSampler (the reference) to the index, epoch after epoch, from
    the same global RNG state, and leaves that state where RandomSampler does: runs trained before it
    keep their numbers. Resumed at a place, it hands out the rest of that epoch's order."""
    from torch.utils.data import RandomSampler

    from ablate.data.common import ResumableSampler

    data = list(range(37))
    torch.manual_seed(5)
    ours = ResumableSampler(data)
    mine = [list(ours) for _ in range(3)]
    after_ours = torch.get_rng_state()
    torch.manual_seed(5)
    theirs = RandomSampler(data)
    assert mine == [list(theirs) for _ in range(3)]
    assert torch.equal(after_ours, torch.get_rng_state())
    torch.manual_seed(5)
    first = iter(ours)
    head = [next(first) for _ in range(10)]
    place = ours.state_dict()
    assert place["taken"] == 10
    again = ResumableSampler(data)
    again.load_state_dict(place)
    assert head + list(again) == mine[0]
    again.load_state_dict({**place, "taken": len(data)})  # an epoch's end: a new order, not an empty epoch
    assert len(list(again)) == len(data)


def test_mid_epoch_checkpoints_under_ddp_are_refused_before_any_work(tmp_path, capsys):
    """Under DDP Lightning swaps in its DistributedSampler, so a mid-epoch checkpoint cannot hold its place
    and, having overwritten the epoch's checkpoint, could only restart the run: refused in one line."""
    code = cli.main(["train", *COPY, "trainer.ckpt_every_n_steps=4", "trainer.strategy=ddp",
                     f"run.dir={tmp_path / 'r'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "trainer.ckpt_every_n_steps=0" in err
    assert not (tmp_path / "r").exists()
