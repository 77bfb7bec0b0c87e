"""Interrupted runs resume where they stopped and end with the numbers of an uninterrupted run:
kill -9 in the middle of epoch 3, SIGTERM (a scheduler's preemption), and the broken files such an
end can leave (a truncated or crafted last.ckpt, an unreadable summary.json, metrics.csv, config.yaml
or probes.json) are set aside with one line each, never a run that fails forever."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ablate import cli
from ablate.rundir import read_summary
from tests.test_train import StopAt, rows, run

# the copy task, small enough that an epoch (8 steps) takes a fraction of a second; one thread in
# every process so the subprocess and this one compute the same floats
COPY = [
    "data.task=copy", "data.vocab=6", "data.length=4", "data.n_train=256", "data.n_val=64",
    "data.n_test=64", "data.batch_size=32", "model.d_model=16", "model.n_heads=2",
    "trainer.max_epochs=4", "tracking=none", "trainer.threads=1", "trainer.log_every_n_steps=2",
]
EPOCH = 256 // 32  # optimiser steps per epoch

# `ablate train` in a real process that kills itself with `sig` when it reaches global step `step`
KILLER = """
import os, signal, sys
import pytorch_lightning as pl
from ablate import cli, train as T

class KillAt(pl.Callback):
    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == {step}:
            os.kill(os.getpid(), signal.{sig})

real = T.train
T.train = lambda cfg, log=print, callbacks=None, retrain=None: real(cfg, log, [KillAt()], retrain)
sys.exit(cli.main(["train", *sys.argv[1:]]))
"""


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    monkeypatch.setenv("WANDB_MODE", "offline")


def _env() -> dict[str, str]:
    root = str(Path(__file__).absolute().parents[1])  # the checkout under test
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}


def _killed_run(tmp_path, run_dir: Path, step: int, sig: str) -> subprocess.CompletedProcess:
    script = tmp_path / "killer.py"
    script.write_text(KILLER.format(step=step, sig=sig))
    return subprocess.run([sys.executable, str(script), *COPY, f"run.dir={run_dir}"], env=_env(),
                          capture_output=True, text=True, timeout=300)


def _ckpt_step(run_dir: Path) -> int:
    return int(torch.load(run_dir / "last.ckpt", weights_only=True)["global_step"])


def _resume(run_dir: Path, capsys) -> tuple[dict, str]:
    assert cli.main(["train", *COPY, f"run.dir={run_dir}"]) == 0
    out = capsys.readouterr()
    return json.loads(out.out.strip().splitlines()[-1]), out.err


def test_kill_9_in_epoch_3_resumes_from_the_end_of_epoch_2_with_identical_numbers(tmp_path, capsys):
    """The issue's demonstration: `ablate train` at its defaults (last.ckpt at epoch ends only),
    killed with SIGKILL in the middle of epoch 3, resumes from the end of epoch 2 (before the fix no
    last.ckpt existed until the run ended, and it started again at step 0) and ends with the
    metrics.csv and the summary metrics of an uninterrupted run."""
    full = run(*COPY, f"run.dir={tmp_path / 'full'}")
    cut = tmp_path / "cut"
    killed = _killed_run(tmp_path, cut, step=2 * EPOCH + 3, sig="SIGKILL")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert read_summary(cut)["status"] == "running"  # kill -9 leaves no word: not finished, so resumed
    assert _ckpt_step(cut) == 2 * EPOCH
    assert max(int(r["step"]) for r in rows(cut)) > 2 * EPOCH  # rows of epoch 3 were written, to be dropped
    first = read_summary(cut)["provenance"]
    line, err = _resume(cut, capsys)
    assert f"ablate: resuming {cut} from last.ckpt (step {2 * EPOCH})" in err.splitlines()
    assert line["status"] == "completed"
    resumed = read_summary(cut)
    assert resumed["attempts"] == 2 and resumed["global_step"] == 4 * EPOCH
    # both attempts' commit, threads and machine, not only the last one's (issue 41's rough edges)
    assert resumed["earlier_provenance"] == [first] and resumed["provenance"]["time"] >= first["time"]
    assert {"commit", "threads", "host"} <= set(first)
    assert rows(cut) == rows(tmp_path / "full")
    assert resumed["metrics"] == full["metrics"]
    assert resumed["probes"] == full["probes"]
    best = [torch.load(d / "best.ckpt", weights_only=True)["state_dict"] for d in (cut, tmp_path / "full")]
    assert best[0].keys() == best[1].keys() and all(torch.equal(best[0][k], best[1][k]) for k in best[0])


def test_sigterm_exits_143_records_interrupted_and_resumes(tmp_path, capsys):
    """A real `ablate train` process that receives SIGTERM in the middle of its second epoch (sent by
    itself at a known step, so no scheduling can move it past the end of the run): exit status 143
    (was 0, so a scheduler read a preempted run as a success), summary.json says interrupted (was
    left "running"), and the same command resumes it from the end of epoch 1 to the numbers of an
    uninterrupted run."""
    full = run(*COPY, f"run.dir={tmp_path / 'full'}")
    cut = tmp_path / "cut"
    killed = _killed_run(tmp_path, cut, step=EPOCH + 2, sig="SIGTERM")
    assert killed.returncode == 143, killed.stderr[-2000:]
    assert killed.stdout == ""  # no JSON line: the run did not finish
    assert killed.stderr.splitlines()[-1] == (
        f"ablate: interrupted by SIGTERM; {cut} is recorded as interrupted: the same command resumes it from its "
        "last.ckpt")
    summary = read_summary(cut)
    assert summary["status"] == "interrupted" and summary["interrupted_by"] == "signal SIGTERM"
    assert summary["wall_time_s"] > 0
    assert _ckpt_step(cut) == EPOCH
    line, err = _resume(cut, capsys)
    assert f"ablate: resuming {cut} from last.ckpt (step {EPOCH})" in err.splitlines()
    assert line["status"] == "completed" and read_summary(cut)["attempts"] == 2
    assert rows(cut) == rows(tmp_path / "full")
    assert read_summary(cut)["metrics"] == full["metrics"]


def _sigterm_after(monkeypatch, name: str, when) -> None:
    """Send this process SIGTERM right after `ablate.train.<name>(...)` returns, when `when(args)`."""
    import ablate.train as T

    real = getattr(T, name)

    def wrapped(*args):
        out = real(*args)
        if when(args):
            os.kill(os.getpid(), signal.SIGTERM)  # handled in this (the main) thread, before the next line
        return out

    monkeypatch.setattr(T, name, wrapped)


def test_sigterm_while_preparing_says_that_nothing_was_recorded(tmp_path, monkeypatch, capsys):
    """SIGTERM while the data and model are prepared, before the run directory is touched: exit 143,
    and the line says nothing was written (it claimed "recorded as interrupted", and nothing was)."""
    _sigterm_after(monkeypatch, "prepare", lambda args: True)
    d = tmp_path / "r"
    assert cli.main(["train", *COPY, f"run.dir={d}"]) == 143
    out = capsys.readouterr()
    assert out.out == "" and out.err.strip().splitlines()[-1] == (
        f"ablate: interrupted by SIGTERM while preparing, before anything was written to {d}; the same command runs it")
    assert not d.exists()
    monkeypatch.undo()
    line, _ = _resume(d, capsys)
    assert line["status"] == "completed" and read_summary(d)["attempts"] == 1


def test_a_second_sigterm_while_the_first_is_recorded_is_dropped(tmp_path, monkeypatch, capsys):
    """A second SIGTERM arriving while the first one's interruption is written raised a new exception
    in the middle of it: summary.json kept "running" and the line claimed nothing was written."""
    import ablate.train as T

    _sigterm_after(monkeypatch, "write_json", lambda args: args[1].get("status") == "running")
    real = T._record

    def record(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # the second one, while the first is being recorded
        return real(*args, **kwargs)

    monkeypatch.setattr(T, "_record", record)
    d = tmp_path / "r"
    assert cli.main(["train", *COPY, f"run.dir={d}"]) == 143
    out = capsys.readouterr()
    assert out.out == "" and f"{d} is recorded as interrupted" in out.err.strip().splitlines()[-1]
    assert read_summary(d)["status"] == "interrupted"
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN  # the handler is back after the run


def test_sigterm_after_the_final_summary_leaves_the_run_completed(tmp_path, monkeypatch, capsys):
    """SIGTERM just after summary.json says completed, before `train` returns: the run stays
    completed (it was overwritten with "interrupted", and the next attempt repeated probes and test)."""
    _sigterm_after(monkeypatch, "write_json", lambda args: args[1].get("status") == "completed")
    d = tmp_path / "r"
    assert cli.main(["train", *COPY, f"run.dir={d}"]) == 143
    out = capsys.readouterr()
    assert out.out == "" and out.err.strip().splitlines()[-1] == (
        f"ablate: interrupted by SIGTERM after {d} had completed; it stays completed (the same command does not run "
        "it again)")
    summary = read_summary(d)
    assert summary["status"] == "completed" and "interrupted_by" not in summary
    assert summary["global_step"] == 4 * EPOCH and "test/acc" in summary["metrics"]
    monkeypatch.undo()
    before = (d / "probes.json").stat().st_mtime_ns
    assert cli.main(["train", *COPY, f"run.dir={d}"]) == 0
    out = capsys.readouterr()
    assert f"ablate: {d} already completed; not run again (rerun it with --retrain)" in out.err
    assert read_summary(d) == summary and (d / "probes.json").stat().st_mtime_ns == before


def test_ctrl_c_is_recorded_as_interrupted_and_exits_130(tmp_path, monkeypatch, capsys):
    import ablate.train as T

    real = T.train
    monkeypatch.setattr(T, "train", lambda cfg, log=print, callbacks=None, retrain=None:
                        real(cfg, log, [StopAt(step=3)], retrain))
    d = tmp_path / "r"
    assert cli.main(["train", *COPY, f"run.dir={d}"]) == 130  # Lightning turned Ctrl-C into exit(1)
    out = capsys.readouterr()
    assert out.out == "" and out.err.splitlines()[-1] == (
        f"ablate: interrupted; {d} is recorded as interrupted: the same command starts it again (no epoch had ended, "
        "so there is no last.ckpt to resume from)")
    assert read_summary(d)["status"] == "interrupted"
    assert not (d / "last.ckpt").exists()  # nothing to resume from before the first epoch end


@pytest.mark.parametrize("content", [b"", b"garbage, not a checkpoint\n", "truncated"])
def test_a_broken_last_ckpt_is_set_aside_and_the_run_starts_afresh(tmp_path, content):
    """A truncated, empty or garbage last.ckpt used to make every later attempt fail."""
    d = tmp_path / "r"
    full = run(*COPY, f"run.dir={tmp_path / 'full'}")
    with pytest.raises(SystemExit):
        run(*COPY, f"run.dir={d}", callbacks=[StopAt(epoch=0)])
    ckpt = d / "last.ckpt"
    if content == "truncated":
        content = ckpt.read_bytes()[: ckpt.stat().st_size // 2]
    ckpt.write_bytes(content)
    said: list[str] = []
    s = run(*COPY, f"run.dir={d}", log=said.append)
    assert s["status"] == "completed" and s["global_step"] == 4 * EPOCH
    asides = sorted(p.name for p in d.glob("last.ckpt.corrupt-*"))
    assert len(asides) == 1 and (d / asides[0]).read_bytes() == content
    notes = [line for line in said if "set aside" in line]
    assert len(notes) == 1 and f"checkpoint {ckpt} " in notes[0] and f"{d} starts afresh" in notes[0]
    assert not any("resuming" in line for line in said)
    assert rows(d) == rows(tmp_path / "full") and s["metrics"] == full["metrics"]


def test_a_completed_run_with_a_truncated_summary_is_finished_again_from_its_last_checkpoint(tmp_path):
    """Its status cannot be read, so it is not 'completed' any more: summary.json is set aside, and
    the run resumes from its final last.ckpt (no step is trained again; probes and test rerun) to the
    same summary metrics."""
    d = tmp_path / "r"
    first = run(*COPY, f"run.dir={d}")
    text = (d / "summary.json").read_text()
    (d / "summary.json").write_text(text[: len(text) // 2])
    said: list[str] = []
    again = run(*COPY, f"run.dir={d}", log=said.append)
    assert any(f"{d / 'summary.json'} is not valid JSON" in line and "set aside as summary.json.corrupt-" in line
               and f"treated as interrupted (resumed from last.ckpt, step {4 * EPOCH})" in line for line in said), said
    assert f"ablate: resuming {d} from last.ckpt (step {4 * EPOCH})" in said
    assert again["status"] == "completed" and again["global_step"] == 4 * EPOCH
    assert again["metrics"] == first["metrics"] and again["probes"] == first["probes"]
    assert len(list(d.glob("summary.json.corrupt-*"))) == 1


def test_a_broken_metrics_csv_on_resume_restarts_the_run(tmp_path):
    """Rows before the checkpoint cannot be recovered from a garbled metrics.csv: the run starts
    afresh (both files set aside, one line) rather than finish with a curve missing its start."""
    d = tmp_path / "r"
    full = run(*COPY, f"run.dir={tmp_path / 'full'}")
    with pytest.raises(SystemExit):
        run(*COPY, f"run.dir={d}", callbacks=[StopAt(epoch=1)])
    (d / "metrics.csv").write_bytes(b"step,train/loss\n3,0.5\n\x00\xff\xfe garbage\n")
    said: list[str] = []
    s = run(*COPY, f"run.dir={d}", log=said.append)
    notes = [line for line in said if "set aside" in line]
    assert len(notes) == 1 and f"{d / 'metrics.csv'} " in notes[0] and f"before step {2 * EPOCH}" in notes[0]
    assert "last.ckpt.corrupt-" in notes[0] and "starts afresh" in notes[0]
    assert not any("resuming" in line for line in said)
    assert rows(d) == rows(tmp_path / "full") and s["metrics"] == full["metrics"]


def test_a_missing_metrics_csv_after_an_epoch_end_restarts_the_run(tmp_path):
    """At an epoch end the validation rows are saved before last.ckpt, so a metrics.csv missing next
    to an epoch-end checkpoint lost rows: the run starts afresh (the checkpoint set aside, one line)
    instead of completing with a curve that lacks its first epochs."""
    d = tmp_path / "r"
    full = run(*COPY, f"run.dir={tmp_path / 'full'}")
    with pytest.raises(SystemExit):
        run(*COPY, f"run.dir={d}", callbacks=[StopAt(epoch=1)])
    (d / "metrics.csv").unlink()
    said: list[str] = []
    s = run(*COPY, f"run.dir={d}", log=said.append)
    notes = [line for line in said if "set aside" in line]
    assert len(notes) == 1 and notes[0].startswith(f"ablate: {d / 'metrics.csv'} is missing, but the rows of the "
                                                   f"validations before step {2 * EPOCH} were saved in it")
    assert "last.ckpt set aside as last.ckpt.corrupt-" in notes[0] and notes[0].endswith(f"{d} starts afresh")
    assert not any("resuming" in line for line in said)
    assert len(list(d.glob("last.ckpt.corrupt-*"))) == 1
    assert rows(d) == rows(tmp_path / "full") and s["metrics"] == full["metrics"]


def test_a_missing_metrics_csv_before_any_validation_still_resumes(tmp_path):
    """A mid-epoch checkpoint before the first validation, with no train row logged yet: nothing was
    lost, so the run resumes from it."""
    items = [*COPY, "trainer.ckpt_every_n_steps=3", "trainer.log_every_n_steps=50"]
    d = tmp_path / "r"
    with pytest.raises(SystemExit):
        run(*items, f"run.dir={d}", callbacks=[StopAt(step=5)])
    (d / "metrics.csv").unlink(missing_ok=True)
    said: list[str] = []
    s = run(*items, f"run.dir={d}", log=said.append)
    assert f"ablate: resuming {d} from last.ckpt (step 3)" in said
    assert not any("set aside" in line for line in said)
    assert s["status"] == "completed" and s["attempts"] == 2 and s["global_step"] == 4 * EPOCH


def test_a_checkpoint_left_by_another_config_is_set_aside_and_the_run_starts_afresh(tmp_path, capsys):
    """The reviewer's case: r1's last.ckpt and metrics.csv copied into r3, trained with another
    model.d_model. The checkpoint loads but was written by another config: it used to reach
    Lightning's load_state_dict (size mismatch, a traceback, the run failed on every retry); now it
    is set aside with one line and the run starts afresh, to the numbers of a clean run."""
    r1, r3, clean = tmp_path / "r1", tmp_path / "r3", tmp_path / "clean"
    first = run(*COPY, f"run.dir={r1}")
    r3.mkdir()
    for name in ("last.ckpt", "metrics.csv"):
        (r3 / name).write_bytes((r1 / name).read_bytes())
    fresh = run(*COPY, "model.d_model=32", f"run.dir={clean}")
    assert cli.main(["train", *COPY, "model.d_model=32", f"run.dir={r3}"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["status"] == "completed"
    notes = [line for line in out.err.splitlines() if "set aside" in line]
    assert len(notes) == 1 and notes[0] == (
        f"ablate: checkpoint {r3 / 'last.ckpt'} was written by the run {first['run_id']}, not this config's "
        f"{fresh['run_id']}; set aside as {notes[0].split('set aside as ')[1].split(';')[0]}; {r3} starts afresh")
    aside = next(r3.glob("last.ckpt.corrupt-*"))
    assert aside.read_bytes() == (r1 / "last.ckpt").read_bytes()
    s = read_summary(r3)
    assert s["status"] == "completed" and s["attempts"] == 1 and s["global_step"] == 4 * EPOCH
    assert rows(r3) == rows(clean) and s["metrics"] == fresh["metrics"]


def test_a_checkpoint_whose_weights_do_not_fit_the_model_is_set_aside(tmp_path):
    """This config's checkpoint with one tensor of the wrong shape (tampered, or written by a version
    that built the model otherwise): set aside with one line naming the tensor, never a failed run."""
    d = tmp_path / "r"
    full = run(*COPY, f"run.dir={tmp_path / 'full'}")
    with pytest.raises(SystemExit):
        run(*COPY, f"run.dir={d}", callbacks=[StopAt(epoch=0)])
    ckpt = torch.load(d / "last.ckpt", weights_only=True)
    key = "model.head.weight"
    shape = list(ckpt["state_dict"][key].shape)
    ckpt["state_dict"][key] = torch.zeros(3, 5)
    torch.save(ckpt, d / "last.ckpt")
    said: list[str] = []
    s = run(*COPY, f"run.dir={d}", log=said.append)
    notes = [line for line in said if "set aside" in line]
    assert len(notes) == 1 and notes[0].startswith(
        f"ablate: checkpoint {d / 'last.ckpt'} does not fit this config's model: its {key} has shape [3, 5], "
        f"the model's {shape}; set aside as last.ckpt.corrupt-")
    assert not any("resuming" in line for line in said)
    assert s["status"] == "completed" and s["attempts"] == 2
    assert rows(d) == rows(tmp_path / "full") and s["metrics"] == full["metrics"]


@pytest.mark.parametrize("name, content, words", [
    ("config.yaml", "model: [unclosed\n", "is not valid YAML"),
    ("probes.json", '{"probe/init/entropy_l0": 0.9', "is not valid JSON"),
    ("summary.json", "\x00\x01", "contains NUL bytes"),
])
def test_a_broken_run_file_is_named_set_aside_and_the_run_goes_on(tmp_path, name, content, words):
    d = tmp_path / "r"
    full = run(*COPY, f"run.dir={tmp_path / 'full'}")
    with pytest.raises(SystemExit):
        run(*COPY, f"run.dir={d}", callbacks=[StopAt(epoch=0)])
    (d / name).write_text(content)
    said: list[str] = []
    s = run(*COPY, f"run.dir={d}", log=said.append)
    notes = [line for line in said if "set aside" in line]
    assert len(notes) == 1 and notes[0].startswith(f"ablate: {d / name} {words}"), said
    assert f"ablate: resuming {d} from last.ckpt (step {EPOCH})" in said
    assert s["status"] == "completed" and s["metrics"] == full["metrics"] and s["probes"] == full["probes"]
    assert json.loads((d / "probes.json").read_text()) == full["probes"]
    assert len(list(d.glob(f"{name}.corrupt-*"))) == 1
