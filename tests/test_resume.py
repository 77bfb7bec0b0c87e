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
T.train = lambda cfg, log=print, callbacks=None: real(cfg, log, [KillAt()])
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
    line, err = _resume(cut, capsys)
    assert f"ablate: resuming {cut} from last.ckpt (step {2 * EPOCH})" in err.splitlines()
    assert line["status"] == "completed"
    resumed = read_summary(cut)
    assert resumed["attempts"] == 2 and resumed["global_step"] == 4 * EPOCH
    assert rows(cut) == rows(tmp_path / "full")
    assert resumed["metrics"] == full["metrics"]
    assert resumed["probes"] == full["probes"]


def test_sigterm_exits_143_records_interrupted_and_resumes(tmp_path, capsys):
    """A real `ablate train` process sent SIGTERM once its first epoch is done: exit status 143 (was 0,
    so a scheduler read a preempted run as a success), summary.json says interrupted (was left
    "running"), and the same command resumes it to the numbers of an uninterrupted run."""
    full = run(*COPY, f"run.dir={tmp_path / 'full'}")
    cut = tmp_path / "cut"
    cmd = [sys.executable, "-m", "ablate", "train", *COPY, f"run.dir={cut}"]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:  # progress lines: one per epoch when stderr is not a terminal
        seen.append(line)
        if line.startswith("ablate: epoch 1/4"):
            proc.send_signal(signal.SIGTERM)
            break
    out, err = proc.communicate(timeout=300)
    err = "".join(seen) + err
    assert proc.returncode == 143, err[-2000:]
    assert out == ""  # no JSON line: the run did not finish
    assert f"ablate: interrupted by SIGTERM; {cut} is recorded as interrupted" in err
    summary = read_summary(cut)
    assert summary["status"] == "interrupted" and summary["interrupted_by"] == "signal SIGTERM"
    assert summary["wall_time_s"] > 0
    step = _ckpt_step(cut)
    assert step % EPOCH == 0 and step >= EPOCH  # an epoch end: the one before the signal, or later
    line, err = _resume(cut, capsys)
    assert f"ablate: resuming {cut} from last.ckpt (step {step})" in err.splitlines()
    assert line["status"] == "completed" and read_summary(cut)["attempts"] == 2
    assert rows(cut) == rows(tmp_path / "full")
    assert read_summary(cut)["metrics"] == full["metrics"]


def test_ctrl_c_is_recorded_as_interrupted_and_exits_130(tmp_path, monkeypatch, capsys):
    import ablate.train as T

    real = T.train
    monkeypatch.setattr(T, "train", lambda cfg, log=print, callbacks=None: real(cfg, log, [StopAt(step=3)]))
    d = tmp_path / "r"
    assert cli.main(["train", *COPY, f"run.dir={d}"]) == 130  # Lightning turned Ctrl-C into exit(1)
    out = capsys.readouterr()
    assert out.out == "" and out.err.splitlines()[-1] == (
        f"ablate: interrupted; {d} is recorded as interrupted: the same command resumes it from its last.ckpt")
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


@pytest.mark.parametrize("name, content, words", [
    ("config.yaml", "model: [unclosed\n", "is not valid YAML"),
    ("probes.json", '{"probe/init/entropy_l0": 0.9', "is not valid JSON"),
    ("summary.json", "\x00\x01", "is not valid JSON"),
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
