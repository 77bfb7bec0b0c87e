"""`ablate sync NAME`: every offline W&B run of a sweep found and handed to `wandb sync` in one
command; offline it says so in one line and changes nothing. Real offline runs, no network."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from ablate import cli
from ablate.sweep import sync

from .sweep_fixtures import forkserver, isolated  # noqa: F401 - the forkserver, isolated runs folder

TINY = {
    "data.task": {"value": "copy"}, "data.vocab": {"value": 6}, "data.length": {"value": 4},
    "data.n_train": {"value": 64}, "data.n_val": {"value": 32}, "data.n_test": {"value": 32},
    "data.batch_size": {"value": 32}, "model.d_model": {"value": 16}, "model.n_layers": {"value": 1},
    "trainer.max_epochs": {"value": 1}, "run.probes": {"value": False},
}


def _files(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_sync_finds_every_offline_run_says_offline_in_one_line_and_changes_nothing(tmp_path, capsys):
    path = tmp_path / "sy.yaml"
    path.write_text(yaml.safe_dump({"program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"],
                                    "method": "grid", "parameters": {**TINY, "model.n_heads": {"values": [1, 2]},
                                                                     "tracking": {"value": "wandb"}}}))
    assert cli.main(["sweep", str(path), "--workers", "1"]) == 0
    # and a run of the same folder that logged nothing to W&B: not listed
    (tmp_path / "runs" / "sy" / "0000notwandb").mkdir()
    runs = sorted((tmp_path / "runs" / "sy").glob("*/wandb/offline-run-*"))
    assert len(runs) == 2
    assert sync.offline_runs(tmp_path / "runs" / "sy") == runs
    capsys.readouterr()

    assert cli.main(["sync", "sy", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[-1] == "2 of 2 offline runs of sy to upload"
    assert [Path(line.split()[1]).name for line in out[:2]] == [r.name for r in runs]
    assert all(line.startswith("offline ") for line in out[:2])

    # W&B's own CLI, as ablate sync calls it, finds exactly these runs (its --dry-run is local)
    listed = subprocess.run([*sync.command(sync.offline_runs(Path("runs/sy"))), "--dry-run"], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "WANDB_MODE": "offline"})
    assert listed.returncode == 0 and "Would sync 2 run(s)" in listed.stderr + listed.stdout
    for r in runs:
        assert r.name in listed.stderr + listed.stdout

    before = _files(tmp_path / "runs")
    assert cli.main(["sync", "sy"]) == 2  # WANDB_MODE=offline (isolated)
    err = capsys.readouterr().err.strip()
    assert err.startswith("ablate: W&B is offline: 2 runs of sy stay offline") and "\n" not in err
    assert "wandb login" in err
    assert _files(tmp_path / "runs") == before  # nothing written, nothing marked

    # W&B's marker of an uploaded run (what `wandb sync` leaves): that run is skipped from now on
    record = next(runs[0].glob("run-*.wandb"))
    record.with_suffix(".wandb.synced").touch()
    assert cli.main(["sync", str(path), "--dry-run"]) == 0  # the sweep file names the folder too
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("uploaded ") and out[1].startswith("offline ") and out[-1].startswith("1 of 2 ")
    runs[1].joinpath(next(runs[1].glob("run-*.wandb")).name).with_suffix(".wandb.synced").touch()
    assert cli.main(["sync", "sy"]) == 0  # all uploaded: nothing to do, offline or not
    assert "all 2 offline runs are uploaded already" in capsys.readouterr().err


def test_a_missing_or_empty_runs_folder_and_bad_options_exit_2_with_one_line(tmp_path, capsys):
    (tmp_path / "runs" / "quiet" / "abc").mkdir(parents=True)  # a run with tracking=none
    for argv, expected in [(["sync", "nope"], "no runs folder"), (["sync", "quiet"], "no offline W&B runs"),
                           (["sync"], "the following arguments are required: name"),
                           (["sync", "quiet", "--upload-all"], "unrecognized arguments: --upload-all")]:
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("ablate: ") and "\n" not in err and expected in err, err
    assert cli.main(["sync", "nope"]) == 2 and "one of: quiet" in capsys.readouterr().err


def test_a_linked_offline_run_is_never_listed_and_one_line_names_it(tmp_path, capsys):
    """An `offline-run-*` entry that is a symlink (here to /etc), or a run's `wandb` folder that is one,
    is not a run of this sweep: never listed, never handed to `wandb sync`; one warning line names what
    was skipped. The real folder beside it is listed."""
    folder = tmp_path / "runs" / "ln"
    real = folder / "0000real" / "wandb" / "offline-run-20260101_000000-0000real"
    real.mkdir(parents=True)
    (real / "run-0000real.wandb").write_bytes(b"")
    (folder / "0000real" / "wandb" / "offline-run-20260101_000001-etc").symlink_to("/etc")
    (folder / "0000link").mkdir()
    (folder / "0000link" / "wandb").symlink_to(real.parent)  # the same runs again, through a link
    skipped: list[Path] = []
    assert sync.offline_runs(folder, skipped.append) == [real]
    assert skipped == [folder / "0000link" / "wandb", folder / "0000real" / "wandb" / "offline-run-20260101_000001-etc"]

    assert cli.main(["sync", "ln", "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"offline   {real}", "1 of 1 offline runs of ln to upload"]
    err = captured.err.splitlines()
    assert len(err) == 1 and err[0].startswith("ablate sync ln: skipped 2 symbolic link(s), not runs of this sweep: ")
    assert "offline-run-20260101_000001-etc" in err[0] and "0000link/wandb" in err[0], err
    assert "/etc" not in captured.out


def test_a_run_whose_wandb_is_a_file_is_named_not_skipped_silently(tmp_path, capsys):
    """`ablate sync` passed over a run whose `wandb` was a file without a word (issue 41's rough edges)."""
    folder = tmp_path / "runs" / "odd"
    real = folder / "0000real" / "wandb" / "offline-run-20260101_000000-0000real"
    real.mkdir(parents=True)
    (real / "run-0000real.wandb").write_bytes(b"")
    (folder / "0000file").mkdir()
    (folder / "0000file" / "wandb").write_text("not W&B's folder")
    assert cli.main(["sync", "odd", "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"offline   {real}", "1 of 1 offline runs of odd to upload"]
    assert captured.err.splitlines() == [f"ablate sync odd: skipped 1 run(s) whose wandb is a file, not W&B's "
                                         f"folder: {folder / '0000file' / 'wandb'}"]


def test_a_missing_runs_folder_says_run_the_sweep_first(tmp_path, capsys):
    assert cli.main(["sync", "nope"]) == 2  # no runs folder at all
    err = capsys.readouterr().err.strip()
    assert err == f"ablate: no runs folder {tmp_path / 'runs' / 'nope'}; run the sweep first (with tracking=wandb)"
