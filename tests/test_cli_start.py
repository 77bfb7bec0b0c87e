"""The newcomer's commands: `ablate train --help`, `--print-config`, and start-up without torch (issue 28)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ablate import config as C
from ablate.cli import main


def test_train_help_exits_0_with_usage(capsys):
    for flag in ("--help", "-h"):
        assert main(["train", flag]) == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: ablate train") and "--print-config" in out


def test_print_config_shows_the_run_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    args = ["data.task=copy", "budget=smoke", "model.n_heads=2", "run.group=g"]
    assert main(["train", "--print-config", *args]) == 0
    out = capsys.readouterr().out
    cfg = C.build(C.parse_overrides(args), machine=False)
    assert f"# run id: {C.run_id(cfg)}" in out
    assert f"# run folder: {tmp_path / 'runs' / 'g' / C.run_id(cfg)} (new)" in out
    assert "n_heads: 2" in out and "# memory: about " in out
    assert not (tmp_path / "runs").exists()  # nothing written


def test_print_config_bad_key_is_one_line_exit_2(capsys):
    assert main(["train", "--print-config", "model.n_head=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ablate: unknown key 'model.n_head'; did you mean model.n_heads?"]


@pytest.mark.parametrize("argv", [["keys"], ["train", "--help"], ["studies"], ["tasks"], ["--version"], ["keys", "--help"],
                                  ["train", "--print-config", "model.n_heads=8"]])
def test_commands_that_need_no_torch_import_none(argv):
    """`ablate keys` imports no torch, Lightning or W&B (~6 s before issue 28); `--print-config` imports torch
    alone, to count the model on the meta device (issue 38: the model is the only statement of its size)."""
    allowed = ("torch",) if "--print-config" in argv else ()
    code = (f"import sys; from ablate.cli import main; code = main({argv!r}); "
            "heavy = sorted(m for m in ('torch', 'pytorch_lightning', 'lightning_fabric', 'wandb') "
            f"if m in sys.modules and m not in {allowed!r}); "
            "sys.exit(f'imported {heavy}' if heavy else code)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_keys_lightning_names_are_lightnings():
    """The names `ablate keys` shows without importing Lightning are names Lightning accepts."""
    for key, text in C.LIGHTNING_COMMON.items():
        shown = [n.strip() for n in text.split("|") if "..." not in n]
        assert shown and set(shown) <= set(C.lightning_names(key)), key
        assert C._common_names(key) == tuple(shown), key  # what the config accepts without Lightning


def test_every_lazy_model_name_loads():
    """ablate.models loads its names on first use (so the config needs no torch): each one is there."""
    import ablate.models as models

    for name, module in models.LAZY.items():
        assert getattr(models, name) is getattr(__import__(f"ablate.models{module}", fromlist=[name]), name)
    assert sorted(models.__all__) == sorted(models.LAZY)


def _catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler of its own for `signum` (Linux: SigCgt in /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as status:
        caught = next(line for line in status if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) >> (signum - 1) & 1)


def _sigint_default() -> None:
    """In the child: SIGINT as an interactive shell's command gets it, whatever this test process inherited (a
    suite started in the background, `make test &` or under nohup, has SIGINT ignored, and so would the child)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(("command", "signum", "code", "said"), [
    (["train", "data.task=copy", "budget=smoke"], "SIGINT", 130, "ablate train: interrupted"),
    (["sweep", "sweeps/heads.yaml", "--budget", "smoke"], "SIGTERM", 143, "ablate sweep: terminated (SIGTERM)"),
])
def test_a_signal_while_starting_is_one_line(tmp_path, command, signum, code, said):
    """Ctrl-C in the first seconds of `ablate train` or `sweep` (torch still importing) printed a 29-94-line
    traceback, and SIGTERM there exited 143 saying nothing (issue 41's rough edges). The signal is sent once
    `ablate` handles SIGTERM (its first step), long before torch has imported."""
    import os
    import signal
    import time

    env = {**os.environ, "ABLATE_RUNS_DIR": str(tmp_path / "runs")}
    started = subprocess.Popen([sys.executable, "-m", "ablate.cli", *command], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_sigint_default)
    deadline = time.monotonic() + 60
    while not _catches(started.pid, signal.SIGTERM) and time.monotonic() < deadline:
        time.sleep(0.01)
    started.send_signal(getattr(signal, signum))
    out, err = started.communicate(timeout=120)
    # Ctrl-C during train's own imports (a slow machine) says where it stopped: still one line, nothing written
    prepared = f"ablate: interrupted while preparing, before anything was written to {tmp_path / 'runs'}"
    assert started.returncode == code and out == "" and (err.strip() == said or (
        signum == "SIGINT" and err.startswith(prepared) and len(err.strip().splitlines()) == 1)), err[-2000:]
    assert not (tmp_path / "runs").exists()


SWALLOWED = """
import os, signal, sys
from ablate import ctrlc
if sys.argv[1] == "ignored":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
ctrlc.install()
class Finalized:
    def __del__(self):  # as an import's finalizer: the KeyboardInterrupt raised in it is printed and swallowed
        os.kill(os.getpid(), signal.SIGINT)
thing = Finalized()
del thing
print("went on", flush=True)
try:
    ctrlc.check()
except KeyboardInterrupt:
    print("raised again", flush=True)
"""


@pytest.mark.parametrize("disposition", ["default", "ignored"])
def test_a_ctrl_c_a_finalizer_swallowed_is_raised_again_where_work_begins(disposition):
    """The flake behind issue 41's Ctrl-C: a KeyboardInterrupt raised inside a finalizer is swallowed, and the
    command went on (a whole run trained). ablate.ctrlc notes it, and train checks before it writes anything;
    where SIGINT was ignored (a background job of a shell without job control), it stays ignored."""
    done = subprocess.run([sys.executable, "-c", SWALLOWED, disposition], capture_output=True, text=True, timeout=60,
                          preexec_fn=_sigint_default)
    if disposition == "default":
        assert done.stdout == "went on\nraised again\n" and "Exception ignored" in done.stderr, done.stderr
        assert "KeyboardInterrupt" in done.stderr
    else:
        assert done.stdout == "went on\n" and done.stderr == ""


def test_a_closed_pipe_ends_quietly(tmp_path):
    """`ablate keys | head -3` printed a BrokenPipeError's traceback (issue 43, item 8): nothing more is said.
    Whether the reader has gone before the last write is a race (a pipe buffers 64 KiB), so ablate's status
    is checked where it is certain: a pipe whose reader closed before ablate started gives 141, as for a
    command SIGPIPE ended (its output was cut short, not complete)."""
    import os

    piped = subprocess.run(["bash", "-c", f"{sys.executable} -m ablate.cli keys | head -3; echo ${{PIPESTATUS[0]}}"],
                           capture_output=True, text=True, timeout=60)
    lines = piped.stdout.splitlines()
    assert len(lines) == 4 and lines[-1] in ("0", "141") and piped.stderr == "", piped.stderr
    read, write = os.pipe()
    os.close(read)  # the reader has gone before anything is written
    closed = subprocess.run([sys.executable, "-m", "ablate.cli", "keys"], stdout=write, stderr=subprocess.PIPE,
                            text=True, timeout=60)
    os.close(write)
    assert closed.returncode == 141 and closed.stderr == "", closed.stderr


def test_version_and_keys_help(capsys):
    """`ablate --version` and `ablate keys --help` were errors (issue 43, item 8)."""
    from importlib.metadata import version

    assert main(["--version"]) == 0 and capsys.readouterr().out == f"ablate {version('ablate')}\n"
    assert main(["keys", "--help"]) == 0 and capsys.readouterr().out.startswith("usage: ablate keys")
    assert main(["keys", "extra"]) == 2
    assert capsys.readouterr().err.strip() == ("ablate: `ablate keys` takes one section (data, model, optim, run, "
                                               "trainer), plugins=NAMES and --markdown, got 'extra'; run `ablate keys` or "
                                               "`ablate keys model`")


def test_keys_of_one_section_as_markdown(capsys):
    assert main(["keys", "optim", "--markdown"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[:2] == ["| key | default | allowed | what it does |", "| --- | --- | --- | --- |"]
    assert rows[2].startswith("| `optim.name` | `adam` | adam \\| adamw \\| sgd | ")  # a | inside a cell escaped
    assert all(r.startswith("| `optim.") for r in rows[2:])


def test_a_command_whose_extra_is_not_installed_names_the_extra(tmp_path, monkeypatch, capsys):
    """`pip install .` then `ablate report build` ended in a ModuleNotFoundError traceback (issue 43, item 4):
    one line names the package and the extra of ablate's that brings it (read from the installed metadata)."""
    monkeypatch.setitem(sys.modules, "nbclient", None)  # as if not installed: importing it fails
    assert main(["report", "build", "--data", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("ablate: `ablate report` needs the Python package nbclient, which is not installed; "
                   "pip install '.[reports]' in ablate's checkout (`make venv` installs every extra)")


def test_parquet_without_pyarrow_is_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    """pyarrow is the parquet extra's, not a core dependency (issue 43, item 9): without it, `--parquet` is refused
    before the table is built, naming the extra, and nothing is written."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    out = tmp_path / "runs.parquet"
    assert main(["results", "no-such-sweep", "--parquet", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        "ablate: `ablate results --parquet` needs the Python package pyarrow, which is not installed; "
        "pip install '.[parquet]' in ablate's checkout (`make venv` installs every extra)")
    assert not out.exists()
