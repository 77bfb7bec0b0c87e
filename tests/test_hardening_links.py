"""Nothing of a run is written or read outside its folder: a run file or folder that is a symbolic
link is refused before anything is written, and `ablate results` takes a sweep name (or its file),
never a path out of the runs folder."""

from __future__ import annotations

import shutil

import pytest
import yaml

from ablate import cli
from ablate.rundir import RUN_FILES

from .hardening_fixtures import TINY, runs_copy, trained_runs  # noqa: F401 - fixtures


@pytest.mark.parametrize("name", sorted(RUN_FILES))
def test_a_run_file_that_is_a_link_is_refused_before_anything_is_written(name, tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / ("folder" if name == "wandb" else "file")
    if name == "wandb":
        target.mkdir()
    else:
        target.write_text("keep me\n")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / name).symlink_to(target)
    assert cli.main(["train", *TINY, "tracking=wandb", f"run.dir={folder}"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (f"ablate: {folder / name} is a symbolic link (to {target}); remove it (a run "
                                 "writes its files only inside its folder)\n")
    assert sorted(p.name for p in folder.iterdir()) == [name] and (folder / name).is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == [target.name]
    assert list(target.iterdir()) == [] if name == "wandb" else target.read_text() == "keep me\n"


@pytest.mark.parametrize("name", ["../elsewhere", "ABSOLUTE", "hard/..", ".", "..", "a/b", ""])
def test_results_refuses_a_name_that_leaves_the_runs_folder(name, runs, tmp_path, capsys):
    shutil.copytree(runs / "hard", tmp_path / "elsewhere")  # a readable sweep outside the runs folder
    name = str(tmp_path / "elsewhere") if name == "ABSOLUTE" else name
    assert cli.main(["results", name]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (f"ablate: {name!r} is not a sweep name; give a sweep's name (a folder of the runs "
                                 f"folder {runs}) or its file sweeps/NAME.yaml\n")


def test_results_takes_a_sweep_file_as_well_as_its_name(runs, tmp_path, capsys):
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "hard.yaml").write_text(yaml.safe_dump({
        "program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"], "method": "grid",
        "parameters": {"seed": {"values": [0, 1, 2]}, "optim.lr": {"values": [1e-3, 1e12]}}}))
    assert cli.main(["results", "hard"]) == 0
    by_name = capsys.readouterr().out
    assert cli.main(["results", str(sweeps / "hard.yaml")]) == 0
    assert capsys.readouterr().out == by_name and len(by_name.splitlines()) == 4
    assert cli.main(["results", str(sweeps / "nothere.yaml")]) == 2
    assert capsys.readouterr().err == (f"ablate: no sweep file {str(sweeps / 'nothere.yaml')!r}; give a sweep's "
                                       "name or the path of its .yaml file\n")
