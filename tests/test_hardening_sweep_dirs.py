"""The folders a sweep uses: a runs folder that is a file is bad input before any work (dry run too),
and a sweep killed with SIGKILL leaves no temporary folders behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ablate import cli

from .hardening_fixtures import TINY


def tiny_sweep(folder: Path, name: str = "tiny", **extra) -> Path:
    params = {k: {"value": yaml.safe_load(v)} for k, v in (item.split("=", 1) for item in TINY)}
    params.update({k: {"value": v} for k, v in extra.items()})
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"],
                                    "method": "grid", "parameters": {**params, "seed": {"values": [0, 1]}}}))
    return path


@pytest.mark.parametrize("dry", [True, False], ids=["dry run", "sweep"])
@pytest.mark.parametrize("which", ["root", "sweep"])
def test_a_runs_folder_that_is_a_file_is_bad_input_before_any_work(dry, which, tmp_path, monkeypatch, capsys):
    root = tmp_path / "runs"
    if which == "root":
        root.write_text("not a folder\n")
        blocked = root
    else:
        root.mkdir()
        blocked = root / "tiny"
        blocked.write_text("not a folder\n")
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(root))
    path = tiny_sweep(tmp_path)
    assert cli.main(["sweep", str(path), *(["--dry-run"] if dry else [])]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (f"ablate: the runs folder {blocked} is a file, not a folder; move it away or set "
                                 "ABLATE_RUNS_DIR to a folder\n")
    assert blocked.read_text() == "not a folder\n"


@pytest.mark.slow
def test_a_sweep_killed_with_sigkill_leaves_no_temporary_folders(tmp_path, short_tmp):
    """The runner's own multiprocessing folder (pymp-*) and the forkserver's (ablate-sweep-*) go even when
    the runner is killed with SIGKILL: the forkserver, which outlives it, removes both."""
    temp = short_tmp  # TMPDIR: the forkserver binds a Unix socket in it
    path = tiny_sweep(tmp_path, "killed", **{"data.n_train": 4096, "trainer.max_epochs": 50})
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    env.update(ABLATE_RUNS_DIR=str(tmp_path / "runs"), TMPDIR=str(temp), ABLATE_PROGRESS="0")
    sweep = subprocess.Popen([sys.executable, "-m", "ablate", "sweep", str(path), "--workers", "1"], env=env,
                             cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list((tmp_path / "runs").glob("killed/*/metrics.csv")):
        time.sleep(0.1)
    assert list((tmp_path / "runs").glob("killed/*/metrics.csv")), "no run started"
    assert {p.name.split("-")[0] for p in temp.iterdir()} >= {"pymp", "ablate"}
    sweep.send_signal(signal.SIGKILL)
    sweep.wait(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and ours(temp):
        time.sleep(0.2)
    assert ours(temp) == []


def ours(temp: Path) -> list[str]:
    """What a sweep leaves in the temporary folder (torch's own cache, torchinductor_<user>, is meant
    to stay: a torch import makes it in a process without TORCHINDUCTOR_CACHE_DIR)."""
    return sorted(p.name for p in temp.iterdir() if p.name.startswith(("ablate-sweep-", "pymp-")))


@pytest.mark.slow
def test_a_sweep_removes_what_a_killed_runner_and_its_server_left(tmp_path, short_tmp):
    """kill -9 of a sweep's process group leaves its folders; the next sweep removes those whose runner
    is gone, never one whose runner still runs (nor a folder it cannot tell the runner of)."""
    temp = short_tmp  # TMPDIR: the forkserver binds a Unix socket in it
    dead = subprocess.Popen(["true"])  # a pid that has ended
    dead.wait()
    from ablate.sweep.worker import pid_namespace

    here = pid_namespace()
    # a runner in another PID namespace (a container sharing this /tmp): its pid, dead here, says nothing
    other = "pid:[1]" if here != "pid:[1]" else "pid:[2]"
    for name, pid, ns in (("ablate-sweep-dead", dead.pid, here), ("ablate-sweep-alive", os.getpid(), here),
                          ("ablate-sweep-elsewhere", dead.pid, other)):
        (temp / name).mkdir()
        (temp / f"pymp-{name}").mkdir()
        (temp / f"pymp-{name}" / "listener-x").write_text("")
        (temp / name / ".runner").write_text(f"{pid}\n{temp / f'pymp-{name}'}\n{ns}\n")
    (temp / "ablate-sweep-unknown").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    env.update(ABLATE_RUNS_DIR=str(tmp_path / "runs"), TMPDIR=str(temp), ABLATE_PROGRESS="0")
    done = subprocess.run([sys.executable, "-m", "ablate", "sweep", str(tiny_sweep(tmp_path))], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert ours(temp) == ["ablate-sweep-alive", "ablate-sweep-elsewhere", "ablate-sweep-unknown",
                          "pymp-ablate-sweep-alive", "pymp-ablate-sweep-elsewhere"]


def test_an_empty_runs_dir_variable_is_unset_not_the_working_directory(tmp_path, monkeypatch, capsys):
    """ABLATE_RUNS_DIR="" wrote runs into the working directory (<group>/<run id> beside the user's files);
    an empty value now means unset, as an empty ABLATE_DATA_DIR already did: ./runs."""
    import json

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ABLATE_RUNS_DIR", "")
    assert cli.main(["train", *TINY, "run.group=empty"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert Path(summary["run_dir"]).resolve().parent == tmp_path / "runs" / "empty"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
