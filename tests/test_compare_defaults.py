"""`ablate compare`'s defaults (issue 43): the default baseline is the variant nearest ablate's defaults, a variant
whose tuning has not finished is shown as unfinished and never compared, and "learned" is the notebooks' rule
(ablate.report.stats.above_level), said under the table. On the committed tables (reports/data), no training."""

from __future__ import annotations

import math
import stat
from pathlib import Path

import pandas as pd
import pytest

from ablate import cli
from ablate.report.comparison import CompareError, Unfinished, Variant, choose_baseline

ROOT = Path(__file__).resolve().parents[1]
DEFAULTS = {"model.qk_scale": True, "model.d_head": None, "model.pos_enc": "learned"}


def _compare(*args: str) -> int:
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        return cli.main(["compare", *args])


def test_the_default_baseline_agrees_with_ablates_defaults_on_the_most_swept_keys():
    """No variant of Q2's scaling sits at every default (model.d_head's is none); ablate scales, so the default is
    the first variant with qk_scale=True, not the first variant (unscaled), which it was."""
    grid = [Variant({"model.d_head": d, "model.qk_scale": s}) for d in (8, 64) for s in (False, True)]
    base, why = choose_baseline(grid, None, DEFAULTS)
    assert base == grid[1] and why == "ablate's default on 1 of 2 swept keys: model.qk_scale; --baseline to choose"
    at_every = [Variant({"model.pos_enc": p}) for p in ("none", "learned", "rope")]
    assert choose_baseline(at_every, None, DEFAULTS) == (at_every[1], "ablate's default on every swept key; "
                                                         "--baseline to choose")
    nowhere = [Variant({"model.pos_enc": p}) for p in ("none", "rope")]
    assert choose_baseline(nowhere, None, DEFAULTS)[0] == nowhere[0]
    asked = {"model.qk_scale": "false", "model.d_head": "64"}
    assert choose_baseline(grid, asked, DEFAULTS) == (grid[2], "chosen by --baseline")


def test_compare_of_the_scaling_sweep_says_why_its_baseline_was_chosen(tmp_path, capsys):
    out = tmp_path / "scaling"
    assert _compare("scaling", "--data", str(ROOT / "reports" / "data"), "--out", str(out)) == 0
    printed = capsys.readouterr().out
    why = "ablate's default on 1 of 2 swept keys: model.qk_scale"
    assert f"baseline model.d_head=8, model.qk_scale=True ({why}; --baseline to choose)" in printed
    md = (out / "compare.md").read_text()
    assert f"baseline: **model.d_head=8, model.qk_scale=True** ({why}; `--baseline` to choose)" in md
    from ablate.fileio import usual_mode

    assert stat.S_IMODE(out.stat().st_mode) == usual_mode(0o777)  # as mkdir gives, not mkdtemp's 0700 (trial)
    assert "| model.d_head=8, model.qk_scale=False |" in md  # compared with the baseline, no longer it
    # the learned column counts what the notebooks' rule counts, and the rule is said in one line under the table
    table = pd.read_csv(out / "variants.csv")
    from ablate.report import stats as St
    from ablate.report.comparison import LEARNED
    from ablate.report.data import table as exported

    df = exported("scaling", ROOT / "reports" / "data")
    df = df[[math.isclose(a, b) for a, b in zip(df["optim.lr"], df["tuned.optim.lr"])]]
    for _, row in table.iterrows():
        where = {"model.d_head": int(row["model.d_head"]), "model.qk_scale": bool(row["model.qk_scale"])}
        assert row[LEARNED] == St.learned(df, where).fmt()
    assert f"*{LEARNED}*: {St.learned_rule()[len('learned: '):]}." in md


def _unfinished_facts(tmp_path: Path, ffn_mult: int) -> Path:
    """facts_4096 (tuned: 4 rates on seed 0, then seeds 1 and 2 at the chosen one) as exported while variant
    `ffn_mult`'s stage 1 has 3 of its 4 runs: one stage-1 run not finished yet, so no stage 2 either; the chosen
    values recomputed by the results table's own rule."""
    from ablate.report.data import table as exported
    from ablate.results.export import export_table
    from ablate.results.table import tuned_choices
    from ablate.sweep.tune import Tune

    df = exported("facts_4096", ROOT / "reports" / "data")
    mine = df["model.ffn_mult"] == ffn_mult
    running = df.index[mine & (df["stage"] == 1)][-1]
    df = df[~(mine & (df["stage"] == 2)) & (df.index != running)].reset_index(drop=True)
    info = df.attrs["tune"]
    tune = Tune(info["key"], tuple(info["values"]), tuple(info["seeds"]), info["metric"], info["goal"] == "maximize")
    df["tuned.optim.lr"] = tuned_choices(df, tune, list(df.attrs["swept_keys"]))[0]
    assert df.loc[df["model.ffn_mult"] == ffn_mult, "tuned.optim.lr"].isna().all()
    assert df.loc[df["model.ffn_mult"] != ffn_mult, "tuned.optim.lr"].notna().all()
    export_table("facts_4096", df, tmp_path / "data", ROOT / "sweeps")
    return tmp_path / "data"


def test_a_variant_whose_tuning_has_not_finished_is_shown_so_and_never_compared(tmp_path, capsys):
    """Before: shown and tested at its best rate so far, as if chosen, and (at ablate's default ffn_mult=2) taken
    as the baseline."""
    data = _unfinished_facts(tmp_path, ffn_mult=2)
    out = tmp_path / "out"
    assert _compare("facts_4096", "--data", str(data), "--out", str(out)) == 0
    printed = capsys.readouterr().out
    note = "tuning unfinished (3 of 4 stage-1 runs)"
    assert "4 variants (and 1 with tuning unfinished, not compared)" in printed
    assert "baseline model.ffn_mult=0 (no variant sits at ablate's defaults on any swept key: the first" in printed
    table = pd.read_csv(out / "variants.csv")
    [row] = table[table["model.ffn_mult"] == 2].to_dict("records")
    assert row["chosen optim.lr"] == note
    assert all(pd.isna(row[c]) for c in ("runs", "val/acc_best", "test/acc", "val/acc_best (95 % CI)"))
    assert table.loc[table["model.ffn_mult"] != 2, "chosen optim.lr"].tolist() == ["0.01"] * 4
    md = (out / "compare.md").read_text()
    assert f"- {note}: model.ffn_mult=2; shown without metrics and not compared (no rate chosen yet)" in md
    assert "| model.ffn_mult=2 |" not in md  # no comparison row
    assert md.count(f"Not compared (no rate chosen yet): model.ffn_mult=2, {note}.") == 2  # val/acc_best, test/acc
    assert "| 8 | 0.01 | 3 | 78.9 % [75.9, 81.4] |" in md and "| 27232 |" in md  # counts stay whole
    stage1 = md.split("## Stage 1")[1].split("##")[0]
    assert [line.split(" | ")[-1] for line in stage1.splitlines() if line.startswith("| 2 |")] == ["unfinished |"]
    # asked for by name, it is refused in one line
    assert _compare("facts_4096", "--data", str(data), "--out", str(tmp_path / "never"), "--baseline",
                    "model.ffn_mult=2") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"ablate: --baseline model.ffn_mult=2: its {note}, so it has no chosen rate to compare at; "
                   "choose another variant or finish the sweep"]
    assert not (tmp_path / "never").exists()


def test_an_unfinished_variant_is_never_the_default_baseline():
    grid = [Variant({"model.qk_scale": s}) for s in (False, True)]
    waiting = [Unfinished(grid[1], 3, 4)]
    assert choose_baseline(grid[:1], None, DEFAULTS, waiting)[0] == grid[0]
    with pytest.raises(CompareError, match=r"tuning unfinished \(3 of 4 stage-1 runs\)"):
        choose_baseline(grid[:1], {"model.qk_scale": "true"}, DEFAULTS, waiting)


def test_an_unfinished_tuning_counts_every_tune_seed_even_one_without_rows():
    """The stage-1 runs a variant needs are every value on every tune seed of the sweep (meta's `tune`), not only
    the seeds that already have rows (review: a tune seed with no run yet made "2 of 2" out of 2 of 4)."""
    from ablate.report.comparison import unfinished_tuning

    df = pd.DataFrame({"model.dropout": [0.1, 0.1], "optim.lr": [1e-3, 3e-3], "seed": [0, 0], "stage": [1, 1],
                       "status": ["completed", "completed"], "tuned.optim.lr": [math.nan, math.nan]})
    tune = {"key": "optim.lr", "seeds": [0, 1], "values": [1e-3, 3e-3]}
    (only,) = unfinished_tuning(df, {"tune": tune}, ["model.dropout"], "optim.lr")
    assert (only.done, only.total) == (2, 4)
    (old,) = unfinished_tuning(df, {"tune": {**tune, "seeds": []}}, ["model.dropout"], "optim.lr")
    assert (old.done, old.total) == (2, 2)  # without meta's seeds: the stage-1 rows' seeds, as before
