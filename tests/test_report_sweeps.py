"""`R.sweeps(*names)`: several exported sweeps read as one (issue 14: Q1 reads pos_enc and its causal arm
pos_enc_causal, Q4 residual and residual_deep). The committed fixture holds the two parts as export
writes them; joined by hand into one sweep (both causal arms in one table, as pos_enc was before the
split), they must be what R.sweeps stacks: the same table, arrays, curves and probe curves, with
model.causal swept again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ablate import report as R
from ablate.report.data import Sweeps, sweeps
from ablate.results.stats import best_lr, swept_keys

FIXTURE = Path(__file__).parent / "data" / "reports"
PARTS = {"pos_enc": False, "pos_enc_causal": True}  # model.causal of each part


def _join(data: Path) -> None:
    """pos_enc (causal false) + pos_enc_causal (true) -> one pos_enc with model.causal swept, by hand."""
    tables = [pd.read_csv(data / f"{name}.csv", dtype=str, keep_default_na=False) for name in PARTS]
    curves = [pd.read_csv(data / f"{name}_curves.csv", dtype=str, keep_default_na=False) for name in PARTS]
    arrays = {}
    for name in PARTS:
        with np.load(data / f"{name}.npz") as f:
            arrays.update({k: f[k] for k in f.files})
    meta = json.loads((data / "meta.json").read_text())
    table, curve = pd.concat(tables), pd.concat(curves)
    table.to_csv(data / "pos_enc.csv", index=False, lineterminator="\n")
    curve.to_csv(data / "pos_enc_curves.csv", index=False, lineterminator="\n")
    np.savez(data / "pos_enc.npz", **arrays)
    part = meta["sweeps"]["pos_enc"]
    keys = list(part["swept_keys"])
    keys.insert(keys.index("model.pos_enc") + 1, "model.causal")
    meta["sweeps"]["pos_enc"] = {**part, "runs": len(table), "swept_keys": keys,
                                 "curves": {"file": "pos_enc_curves.csv", "runs": curve["run_id"].nunique(), "rows": len(curve)}}
    del meta["sweeps"]["pos_enc_causal"]
    (data / "pos_enc_causal.csv").unlink()
    (data / "meta.json").write_text(json.dumps(meta))


def _made_by_hand(data: Path) -> None:
    """meta.json without export's `files` record: these folders are edited by hand, not exported (a folder
    exported before files were recorded is read the same way)."""
    meta = json.loads((data / "meta.json").read_text())
    meta.pop("files", None)
    (data / "meta.json").write_text(json.dumps(meta))


@pytest.fixture
def data(tmp_path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "whole")
    shutil.copytree(FIXTURE, tmp_path / "split")
    for folder in ("whole", "split"):
        _made_by_hand(tmp_path / folder)
    _join(tmp_path / "whole")
    return tmp_path


def _by_run(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["run_id", *[c for c in ("step", "layer") if c in df.columns]]).reset_index(drop=True)


def test_the_stacked_parts_are_the_whole_sweep(data):
    whole, split = R.sweep("pos_enc", data / "whole"), data / "split"
    assert set(whole.df["model.causal"]) == {False, True}  # both arms in one table
    parts = [R.sweep(name, split) for name in PARTS]
    assert [swept_keys(p.df) for p in parts] == [["model.pos_enc", "optim.lr", "seed"]] * 2
    S = sweeps(*PARTS, data=split)
    assert isinstance(S, Sweeps) and S.ready and S.missing is None
    assert S.keys() == whole.keys() == ["model.pos_enc", "model.causal", "optim.lr"]  # causal differs between parts
    assert S.df["sweep"].tolist() == ["pos_enc"] * len(parts[0].df) + ["pos_enc_causal"] * len(parts[1].df)
    columns = list(whole.df.columns)
    pd.testing.assert_frame_equal(_by_run(S.df[columns]), _by_run(whole.df), check_dtype=False)
    assert S.df["model.d_head"].dtype == whole.df["model.d_head"].dtype  # nullable ints stay ints
    # the tuned choice per variant is the whole sweep's
    assert sorted(best_lr(S.df)["run_id"]) == sorted(best_lr(whole.df)["run_id"])
    assert S.df.attrs["tune"] == whole.df.attrs["tune"]
    # arrays, curves and probe curves: the whole sweep's
    assert sorted(S.arrays) == sorted(whole.arrays)
    assert all(np.array_equal(S.arrays[k], whole.arrays[k]) for k in whole.arrays)
    pd.testing.assert_frame_equal(_by_run(S.curves("val/acc")), _by_run(whole.curves("val/acc")))
    stacked_probes, whole_probes = S.probe_curves(), whole.probe_curves()
    pd.testing.assert_frame_equal(_by_run(stacked_probes[list(whole_probes.columns)]), _by_run(whole_probes),
                                  check_dtype=False)
    run = whole.df["run_id"].iloc[-1]
    assert np.array_equal(S.attention(run, "final/attention"), whole.attention(run, "final/attention"))
    meta = S.meta
    assert meta["runs"] == len(whole.df) and meta["budget"] == whole.meta["budget"]
    assert meta["swept_keys"] == ["model.pos_enc", "model.causal", "optim.lr", "seed"]
    assert sorted(meta["parts"]) == sorted(PARTS)


def test_a_missing_part_makes_the_stack_not_ready_and_says_which(data):
    split = data / "split"
    (split / "pos_enc_causal.csv").unlink()
    S = R.sweeps("pos_enc", "pos_enc_causal", data=split)
    assert not S.ready and S.df is None
    assert S.missing == "not run yet — run `make sweep-pos_enc_causal`"
    assert S.keys() == [] and S.probe_curves() is None
    (split / "pos_enc.csv").unlink()
    S = R.sweeps("pos_enc", "pos_enc_causal", data=split)
    assert S.missing == "not run yet — run `make sweep-pos_enc sweep-pos_enc_causal`"
    assert repr(S) == "Sweeps('pos_enc', 'pos_enc_causal': not run yet — run `make sweep-pos_enc sweep-pos_enc_causal`)"
    with pytest.raises(ValueError, match="at least one sweep name"):
        R.sweeps(data=split)


def test_a_diverged_run_gets_the_reference_levels_of_the_runs_on_its_data():
    """A run that diverged before train.py recorded its levels has none; the reports count it at chance, so the
    table fills them from the runs on the same data (every data.* key equal), and from no other."""
    import pandas as pd

    from ablate.report.data import with_levels

    df = pd.DataFrame({"data.task": ["copy"] * 4, "data.length": [8, 8, 16, 16], "status": ["completed", "diverged"] * 2,
                       "ref/val/chance": [0.1, None, 0.2, None], "ref/val/order_blind": [0.3, None, 0.236, None]})
    filled = with_levels(df)
    assert filled["ref/val/chance"].tolist() == [0.1, 0.1, 0.2, 0.2]
    assert filled["ref/val/order_blind"].tolist() == [0.3, 0.3, 0.236, 0.236]
    alone = with_levels(df.iloc[[1]])  # no run on its data recorded them: they stay missing, never guessed
    assert alone["ref/val/chance"].isna().all()
