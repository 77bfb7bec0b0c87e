"""The folders a sweep uses: a runs folder that is a file is bad input before any work (dry run too)."""

from __future__ import annotations

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
