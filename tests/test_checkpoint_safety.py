"""What a run reads and writes cannot be turned against the user: a crafted last.ckpt never runs
code on any loading path, a planted .lock link is never followed, a full disk leaves no temp files
and says so in one line, files get the umask's permissions, and run.dir never overwrites a folder
that is not this run's."""

from __future__ import annotations

import errno
import json
import os
import pickle
import stat
from pathlib import Path

import pytest
import torch

from ablate import cli
from ablate import config as C
from ablate.checkpoint import CheckpointError, load_checkpoint
from ablate.fileio import atomic_write
from ablate.rundir import RunDirError, RunLock, read_summary
from tests.test_train import rows, run

COPY = [
    "data.task=copy", "data.vocab=6", "data.length=4", "data.n_train=256", "data.n_val=64",
    "data.n_test=64", "data.batch_size=32", "model.d_model=16", "model.n_heads=2",
    "trainer.max_epochs=1", "tracking=none",
]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    monkeypatch.setenv("WANDB_MODE", "offline")


# ------------------------------------------------------------------ a crafted checkpoint


class Payload:
    """Unpickling this runs a shell command: what a crafted last.ckpt carries."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch '{self.marker}'",)


def _plant(path: Path, marker: Path, how: str) -> None:
    """A last.ckpt that looks like a run's, with the payload inside (torch's zip format or a bare pickle)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fake = {"global_step": 3, "state_dict": {}, "hyper_parameters": {"config": {}}, "loops": Payload(marker)}
    if how == "torch":
        torch.save(fake, path)
    else:
        path.write_bytes(pickle.dumps(fake, protocol=2))  # torch.save's protocol


@pytest.fixture(params=["torch", "pickle"])
def crafted(request, tmp_path):
    marker = tmp_path / "PWNED"
    ckpt = tmp_path / "r" / "last.ckpt"
    _plant(ckpt, marker, request.param)
    return ckpt, marker


def test_the_payload_runs_when_unpickled(tmp_path):
    """The test's own check: loading the crafted file the old way does run the command."""
    ckpt, marker = tmp_path / "c" / "last.ckpt", tmp_path / "PWNED"
    _plant(ckpt, marker, "torch")
    torch.load(ckpt, weights_only=False)
    assert marker.exists()


def test_resume_refuses_a_crafted_checkpoint_sets_it_aside_and_starts_afresh(crafted):
    ckpt, marker = crafted
    said: list[str] = []
    s = run(*COPY, f"run.dir={ckpt.parent}", log=said.append)
    assert not marker.exists()
    notes = [line for line in said if "set aside" in line]
    assert len(notes) == 1 and notes[0].startswith(f"ablate: checkpoint {ckpt} holds objects other than tensors")
    assert "refused: loading it could run code" in notes[0] and "starts afresh" in notes[0]
    assert s["status"] == "completed" and s["global_step"] == 8
    assert len(list(ckpt.parent.glob("last.ckpt.corrupt-*"))) == 1


def test_probe_refuses_a_crafted_checkpoint_with_one_line(crafted, capsys):
    ckpt, marker = crafted
    assert cli.main(["probe", str(ckpt)]) == 2
    err = capsys.readouterr().err.strip()
    assert not marker.exists()
    assert err.count("\n") == 0 and err.startswith(f"ablate: checkpoint {ckpt} holds objects other than tensors")


def test_load_task_as_export_uses_it_refuses_a_crafted_checkpoint(crafted):
    from ablate.results.export import permuted_maps
    from ablate.tasks import load_task

    ckpt, marker = crafted
    with pytest.raises(CheckpointError, match="refused: loading it could run code"):
        load_task(ckpt)
    with pytest.raises(CheckpointError):
        permuted_maps(ckpt.parent)  # export's caller logs the error and goes on without the maps
    assert not marker.exists()


def test_lightnings_own_loading_is_weights_only(crafted, tmp_path):
    """Trainer.fit(ckpt_path=...) loads through the CheckpointIO plugin, whatever it is asked."""
    from ablate.train import _trainer, prepare

    ckpt, marker = crafted
    cfg = C.build(C.parse_overrides([*COPY, f"run.dir={tmp_path / 'x'}"]))
    datamodule, task = prepare(cfg)
    trainer = _trainer(cfg, tmp_path / "x", [], [])
    with pytest.raises(CheckpointError):
        trainer.fit(task, datamodule=datamodule, ckpt_path=str(ckpt), weights_only=False)
    assert not marker.exists()


def test_a_real_checkpoint_loads_weights_only_and_probes(tmp_path, capsys):
    """Everything a run saves (hyper-parameters, loops, Adam and a cosine schedule with warm-up, RNG
    states, callback states) is tensors and plain values."""
    from ablate.tasks import load_task

    d = tmp_path / "r"
    s = run(*COPY, "optim.schedule=cosine", "optim.warmup=0.1", "run.probe_every=4", f"run.dir={d}")
    ckpt = load_checkpoint(d / "last.ckpt")
    assert ckpt["global_step"] == s["global_step"] == 8
    assert {"loops", "optimizer_states", "lr_schedulers", "rng_states", "callbacks"} <= set(ckpt)
    task, datamodule = load_task(d / "last.ckpt")
    assert task.cfg == C.build(C.parse_overrides([*COPY, "optim.schedule=cosine", "optim.warmup=0.1",
                                                   "run.probe_every=4", f"run.dir={d}"]))
    assert sum(p.numel() for p in task.parameters()) == s["params"]["total"]
    assert cli.main(["probe", str(d), "--json", "--no-expensive"]) == 0
    assert json.loads(capsys.readouterr().out)["entropy_l0"] == pytest.approx(s["probes"]["probe/final/entropy_l0"])


def test_probe_and_load_task_refuse_weights_that_do_not_fit_with_one_line(tmp_path, capsys):
    """A checkpoint whose state_dict does not fit the model its config builds (a tampered tensor):
    `ablate probe` printed Lightning's RuntimeError traceback; now one line and exit 2, and load_task
    raises CheckpointError naming the tensor."""
    from ablate.tasks import load_task

    d = tmp_path / "r"
    run(*COPY, f"run.dir={d}")
    ckpt = torch.load(d / "last.ckpt", weights_only=True)
    key = "model.head.weight"
    ckpt["state_dict"][key] = torch.zeros(3, 5)
    bad = tmp_path / "bad_shape.ckpt"
    torch.save(ckpt, bad)
    with pytest.raises(CheckpointError, match=f"checkpoint {bad} does not fit the model its config builds "
                                              f"\\(size mismatch for {key}"):
        load_task(bad)
    assert cli.main(["probe", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"ablate: checkpoint {bad} does not fit the model its config")
    assert err.endswith("; give a last.ckpt or best.ckpt written by `ablate train`")
    del ckpt["state_dict"][key]
    torch.save(ckpt, bad)
    with pytest.raises(CheckpointError, match=f"Missing key\\(s\\) in state_dict: \"{key}\""):
        load_task(bad)


def test_load_checkpoint_names_each_kind_of_broken_file(tmp_path):
    torch.save([1, 2], tmp_path / "list.ckpt")
    torch.save({"global_step": 1, "state_dict": {"w": torch.zeros(1000)}, "hyper_parameters": {}}, tmp_path / "ok")
    cases = [(b"", "is empty"), (b"\x00garbage", "truncated, garbage or not a plain checkpoint"),
             ((tmp_path / "ok").read_bytes()[:-200], "is truncated or not a checkpoint"),
             ((tmp_path / "list.ckpt").read_bytes(), "not a checkpoint of an ablate run")]
    assert load_checkpoint(tmp_path / "ok")["global_step"] == 1
    for content, words in cases:
        (tmp_path / "c.ckpt").write_bytes(content)
        with pytest.raises(CheckpointError, match=words):
            load_checkpoint(tmp_path / "c.ckpt")
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "none.ckpt")


# ------------------------------------------------------------------ the lock file


def test_a_planted_lock_link_is_refused_and_its_target_survives(tmp_path, capsys):
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    d = tmp_path / "r"
    d.mkdir()
    (d / ".lock").symlink_to(precious)
    with pytest.raises(RunDirError, match="is a symbolic link"):
        RunLock(d).acquire()
    assert cli.main(["train", *COPY, f"run.dir={d}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"ablate: {d / '.lock'} is a symbolic link")
    assert precious.read_text() == "keep me\n"
    assert sorted(p.name for p in d.iterdir()) == [".lock"]  # nothing written


def test_a_lock_that_is_not_a_regular_file_is_refused(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    os.mkfifo(d / ".lock")
    with pytest.raises(RunDirError, match="is not a regular file"):
        RunLock(d).acquire()


# ------------------------------------------------------------------ full disks, permissions


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_atomic_write_on_a_full_disk_keeps_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    path.write_text("old\n")
    monkeypatch.setattr(os, "fsync", _no_space)
    with pytest.raises(OSError) as info:
        atomic_write(path, "new\n")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_full_disk_during_training_is_recorded_and_exits_1_with_one_line(tmp_path, monkeypatch, capsys):
    """The checkpoint cannot be written (ENOSPC, simulated in-process: tests run as root, which a
    read-only folder does not stop); the summary still can: the run is recorded as failed with the
    OS error, no temp file is left, and `ablate train` says it in one line and exits 1."""
    real_fsync = os.fsync

    def fsync(fd):
        if "/.last.ckpt." in os.readlink(f"/proc/self/fd/{fd}"):
            _no_space()
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    d = tmp_path / "r"
    assert cli.main(["train", *COPY, f"run.dir={d}"]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    last = out.err.strip().splitlines()[-1]
    assert last == (f"ablate: cannot write the run into {d}: [Errno 28] No space left on device: '{d / 'last.ckpt'}'; "
                    "free some space, then run the same command again")  # a full disk: not the folder's fault
    summary = read_summary(d)
    assert summary["status"] == "failed" and "No space left on device" in summary["error"]
    assert not [p.name for p in d.iterdir() if p.name.endswith(".tmp")]


def test_files_get_the_umasks_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "a.txt", "x")
        assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644
        os.umask(0o027)
        atomic_write(tmp_path / "b.txt", b"x")
        assert stat.S_IMODE((tmp_path / "b.txt").stat().st_mode) == 0o640
        os.umask(0o022)
        d = tmp_path / "r"
        run(*COPY, "run.probe_every=4", f"run.dir={d}")
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in d.iterdir()}
        assert {"config.yaml", "summary.json", "metrics.csv", "last.ckpt", "probes.json", "probes.npz",
                "probes.csv"} <= set(modes)
        assert set(modes.values()) == {0o644}, modes
    finally:
        os.umask(old)


# ------------------------------------------------------------------ run.dir


def _train_exits_2(capsys, *items) -> str:
    assert cli.main(["train", *COPY, *items]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("ablate: ")
    return err


def test_run_dir_that_is_a_file_is_refused_before_anything_is_written(tmp_path, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("mine\n")
    err = _train_exits_2(capsys, f"run.dir={f}")
    assert f"run.dir='{f}' is an existing file" in err
    assert f.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_run_dir_that_is_a_folder_of_other_files_is_refused(tmp_path, capsys):
    d = tmp_path / "project"
    d.mkdir()
    (d / "metrics.csv").write_text("my,own\n1,2\n")
    (d / "paper.tex").write_text("draft\n")
    err = _train_exits_2(capsys, f"run.dir={d}")
    assert f"run.dir='{d}' is a folder of other files (paper.tex)" in err
    assert sorted(p.name for p in d.iterdir()) == ["metrics.csv", "paper.tex"]
    assert (d / "metrics.csv").read_text() == "my,own\n1,2\n"


def test_run_dir_of_another_config_is_refused_and_its_own_config_resumes(tmp_path, capsys):
    d = tmp_path / "r"
    first = run(*COPY, f"run.dir={d}")
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    err = _train_exits_2(capsys, "seed=1", f"run.dir={d}")
    assert f"holds the run {first['run_id']}, not this config's" in err
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()} == before
    assert run(*COPY, f"run.dir={d}") == first  # its own config: finished, not run again


def test_run_group_cannot_leave_the_runs_folder(tmp_path, capsys):
    """The config refuses such a group on input; run_dir_for is the second line of defence, for a
    config built by code past that check."""
    from ablate.train import run_dir_for

    cfg = C.build(C.parse_overrides(COPY))
    assert run_dir_for(cfg) == tmp_path / "runs" / "train" / C.run_id(cfg)
    for group in ("../../escaped", "/tmp/elsewhere", "..", "a/../../b"):
        object.__setattr__(cfg.run, "group", group)  # frozen dataclass: what only code can do
        with pytest.raises(RunDirError, match="outside the runs folder"):
            run_dir_for(cfg)
    assert cli.main(["train", *COPY, "run.group=../../escaped"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "runs").exists()


# ------------------------------------------------------------------ what a newcomer sees


def test_train_says_what_it_does_and_where_the_wandb_run_went(tmp_path, capfd):
    d = tmp_path / "r"
    items = [*COPY[:-1], "trainer.max_epochs=2", "tracking=wandb", f"run.dir={d}"]
    assert cli.main(["train", *items]) == 0
    out, err = capfd.readouterr()
    line = json.loads(out)  # stdout: the JSON line alone
    assert line["status"] == "completed" and line["run_dir"] == str(d)
    lines = err.splitlines()
    epochs = [x for x in lines if x.startswith("ablate: epoch ")]
    assert [x.split()[2] for x in epochs] == ["1/2", "2/2"] and "step 16" in epochs[1] and "val/acc" in epochs[1]
    assert "ablate: probing the final model (with head masking)" in lines
    offline = list((d / "wandb").glob("offline-run-*"))
    assert len(offline) == 1
    assert lines[-1] == f"ablate: W&B run saved offline in {offline[0]}; upload it with: wandb sync {offline[0]}"
    assert "anonymous" not in err  # wandb's "The anonymous setting has no effect" (Lightning passed None)
    assert len(rows(d)) > 0


@pytest.mark.parametrize("config", [None, "text", [1, 2], 3], ids=["none", "str", "list", "int"])
def test_a_checkpoint_whose_config_is_not_a_mapping_is_refused_everywhere(tmp_path, capsys, config):
    """A stored config that is not a mapping escaped as AttributeError: a traceback from `ablate probe`
    and from a resume, which then failed on every retry. Now: CheckpointError, one line, exit 2 for
    probe; the resume sets the checkpoint aside and trains afresh to the same numbers."""
    from ablate.tasks import load_task

    d = tmp_path / "r"
    first = run(*COPY, f"run.dir={d}")
    ckpt = torch.load(d / "last.ckpt", weights_only=True)
    ckpt["hyper_parameters"]["config"] = config
    torch.save(ckpt, d / "last.ckpt")
    with pytest.raises(CheckpointError, match="holds a config this version cannot build"):
        load_task(d / "last.ckpt")
    assert cli.main(["probe", str(d)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("ablate: checkpoint ")
    summary = read_summary(d)
    (d / "summary.json").write_text(json.dumps({**summary, "status": "interrupted"}))  # as if killed at the end
    lines: list[str] = []
    again = run(*COPY, f"run.dir={d}", log=lines.append)
    assert again["status"] == "completed" and again["metrics"] == first["metrics"]
    assert any("holds no config this version can read" in line and "set aside" in line for line in lines), lines
    assert len(list(d.glob("last.ckpt.corrupt-*"))) == 1


def test_load_task_names_only_real_mismatches_as_not_fitting(tmp_path, monkeypatch):
    """A RuntimeError that is not about the state_dict (out of memory on the device) is not reported
    as "does not fit the model": it is raised as it is."""
    from ablate.tasks import TASKS, load_task

    d = tmp_path / "r"
    run(*COPY, f"run.dir={d}")

    def oom(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(TASKS["tokens"], "load_from_checkpoint", oom)
    with pytest.raises(RuntimeError, match="CUDA out of memory") as err:
        load_task(d / "last.ckpt")
    assert not isinstance(err.value, CheckpointError)
