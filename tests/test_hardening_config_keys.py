"""A run whose config.yaml holds keys `ablate train` does not know (a section, a key of a section) or a
mapping where a value belongs is `corrupt` with one warning line, never a traceback or a swept column."""

from __future__ import annotations

import pytest
import yaml

from ablate import cli
from ablate.results import load

from .hardening_fixtures import by_status, runs_copy, trained_runs  # noqa: F401 - fixtures


@pytest.mark.parametrize("edit, problem", [
    ({"bogus_section": {"x": 1}}, "config.yaml has bogus_section, not a key of ablate train"),
    ({"model": {"secret_key": 1}}, "config.yaml has model.secret_key, not a key of ablate train"),
    ({"model": {"n_heads": {"a": 1}}}, "config.yaml has model.n_heads = {'a': 1}, not a single value"),
])
def test_a_config_with_unknown_keys_is_corrupt_with_one_warning(edit, problem, runs, capsys):
    good, bad = by_status(runs, "completed")
    cfg = yaml.safe_load((bad / "config.yaml").read_text())
    for section, value in edit.items():
        if section in cfg and isinstance(cfg[section], dict):
            cfg[section].update(value)
        else:
            cfg[section] = value
    (bad / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    table = load("hard")
    row = table.set_index("run_dir").loc[str(bad)]
    assert row["status"] == "corrupt" and row["error"] == problem
    assert not any("secret_key" in k or "bogus" in k for k in table.attrs["swept_keys"])
    assert cli.main(["results", "hard", "--aggregate"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "secret_key" not in out and "bogus" not in out
    assert [line for line in err.splitlines() if "corrupt" in line] == [
        f"ablate: warning: run {bad.name} ({bad}): {problem}; listed with status corrupt, left out of the statistics"]
