"""The results table: columns and their order, swept keys, seed statistics checked against numpy
and Student's t, best-lr selection, commit flags, failed/running rows, the CLI (print, CSV and
Parquet round trips, one-line errors), atomic writes, and the same table from recorded W&B API data."""

from __future__ import annotations

import io
import json
import math
import shutil
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from ablate.cli import main
from ablate.registry import MNIST_FILES, data_dir
from ablate.results import (
    ResultsError,
    aggregate,
    best_lr,
    load,
    load_wandb,
    swept_keys,
    t_quantile_975,
    write,
)
from ablate.results.table import BOOKKEEPING

DATA = Path(__file__).parent / "data"
TINY = ["data.task=copy", "data.n_train=128", "data.n_val=64", "data.n_test=64", "model.d_model=16",
        "trainer.max_epochs=1", "tracking=none", "run.group=mysweep", "run.expensive_probes=false"]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """Six real tiny runs of sweep `mysweep`: model.n_heads in {1, 2} x seed in {0, 1, 2}."""
    from ablate import config as C
    from ablate.train import train

    runs = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLATE_RUNS_DIR", str(runs))
        for heads in (1, 2):
            for seed in (0, 1, 2):
                cfg = C.build(C.parse_overrides([*TINY, f"model.n_heads={heads}", f"seed={seed}"]))
                assert train(cfg, log=lambda *a: None)["status"] == "completed"
    return runs


@pytest.fixture(scope="module")
def table(root) -> pd.DataFrame:
    return load("mysweep", root=root)


def clone(src: Path, dst: Path, config: dict | None = None, **summary) -> Path:
    """A copy of run folder `src` at `dst` with some config keys and summary fields changed."""
    dst.mkdir(parents=True)
    cfg = yaml.safe_load((src / "config.yaml").read_text())
    for key, value in (config or {}).items():
        section, _, name = key.partition(".")
        if name:
            cfg[section][name] = value
        else:
            cfg[key] = value
    (dst / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    data = json.loads((src / "summary.json").read_text())
    data.update(summary, run_id=dst.name)
    (dst / "summary.json").write_text(json.dumps(data))
    return dst


def run_dirs(root: Path, name: str = "mysweep") -> list[Path]:
    return sorted(p for p in (root / name).iterdir() if p.is_dir())


# ------------------------------------------------------------------ the table


def test_one_row_per_run_with_every_column_in_order(root, table):
    dirs = run_dirs(root)
    assert len(table) == 6 and sorted(table["run_id"]) == [d.name for d in dirs]
    cols = list(table.columns)
    config = yaml.safe_load((dirs[0] / "config.yaml").read_text())
    flat = [f"{s}.{k}" for s, v in config.items() if isinstance(v, dict) for k in v]
    flat += [k for k, v in config.items() if not isinstance(v, dict) and k != "seed"]
    status = cols.index("status")
    assert cols[: status + 1] == ["run_id", *flat, "seed", "status"]  # every config key, seed, status
    metrics = ["test/acc", "test/seq_acc", "val/acc", "val/acc_best", "val/acc_mean", "val/loss", "val/seq_acc", "train/loss"]
    assert cols[status + 1 : status + 1 + len(metrics)] == metrics
    metrics += sorted(c for c in cols if c.startswith(("eval/", "ref/")))  # then the evaluation sets' sizes and the task's reference levels
    probes = [c for c in cols if c.startswith("probe/")]
    assert cols[status + 1 + len(metrics) : status + 1 + len(metrics) + len(probes)] == probes
    init, final = [p.startswith("probe/init/") for p in probes], [p.startswith("probe/final/") for p in probes]
    assert sum(init) > 10 and sum(final) > 10 and init.index(False) == sum(init)  # init first, then final
    assert "probe/init/entropy_l0" in probes and probes.index("probe/final/entropy_l1") < probes.index("probe/final/grad_ratio")
    params = ["params/attention", "params/ffn", "params/embedding", "params/other", "params/total"]
    assert cols[-len(BOOKKEEPING) - 5 :] == [*params, *BOOKKEEPING]
    assert "commit_mismatch" in BOOKKEEPING and "error" in BOOKKEEPING and "diverged_step" in BOOKKEEPING

    # values are those of the run folders
    for _, row in table.iterrows():
        summary = json.loads((root / "mysweep" / row["run_id"] / "summary.json").read_text())
        cfg = yaml.safe_load((root / "mysweep" / row["run_id"] / "config.yaml").read_text())
        assert row["model.n_heads"] == cfg["model"]["n_heads"] and row["seed"] == cfg["seed"]
        assert row["status"] == "completed" and row["test/acc"] == summary["metrics"]["test/acc"]
        assert row["probe/final/entropy_l0"] == summary["probes"]["probe/final/entropy_l0"]
        assert row["params/total"] == summary["params"]["total"] == sum(summary["params"][k] for k in ("attention", "ffn", "embedding", "other"))
        assert row["commit"] == summary["provenance"]["commit"] and row["global_step"] == summary["global_step"]
        assert row["wall_time_s"] == summary["wall_time_s"] and row["run_dir"] == str(root / "mysweep" / row["run_id"])
    assert not table["commit_mismatch"].any()
    # sorted by the swept keys, then seed
    assert list(zip(table["model.n_heads"], table["seed"])) == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]


def test_swept_keys_vary_or_are_listed_in_the_sweep_file(root, table, tmp_path):
    assert swept_keys(table) == ["model.n_heads", "seed"]
    (tmp_path / "mysweep.yaml").write_text(
        "method: grid\nparameters:\n  model.ffn_mult: {values: [2, 4]}\n  budget: {value: quick}\n"
        "  model.n_heads: {values: [1, 2]}\n  seed: {values: [0, 1, 2]}\n"
    )
    listed = load("mysweep", root=root, sweeps=tmp_path)  # ffn_mult 4 has not run yet: still swept
    assert swept_keys(listed) == ["model.n_heads", "model.ffn_mult", "seed"]
    plain = pd.DataFrame(table.to_dict("list"))  # no attrs (a CSV read back): what varies
    assert plain.attrs == {} and swept_keys(plain) == ["model.n_heads", "seed"]


def test_folders_without_a_summary_are_skipped(root, tmp_path):
    for d in run_dirs(root)[:2]:
        shutil.copytree(d, tmp_path / "s" / d.name)
    (tmp_path / "s" / "queued").mkdir()
    (tmp_path / "s" / "half").mkdir()
    shutil.copy(run_dirs(root)[0] / "config.yaml", tmp_path / "s" / "half")
    (tmp_path / "s" / "notes.txt").write_text("not a run")
    assert len(load("s", root=tmp_path)) == 2


def test_a_copied_run_folder_is_no_extra_seed_and_is_named(root, tmp_path):
    """`cp -r <id> <id>.bak` made a third seed of a two-seed variant in `results --aggregate` (issue 41,
    item 9): a folder whose run is not its name is a copy, left out of the table with a warning."""
    from ablate.results import aggregate, commit_warnings

    dirs = run_dirs(root)
    for d in dirs:
        shutil.copytree(d, tmp_path / "c" / d.name)
    shutil.copytree(dirs[0], tmp_path / "c" / f"{dirs[0].name}.bak")
    df = load("c", root=tmp_path)
    assert len(df) == 6 and df.attrs["copies"] == [f"{dirs[0].name}.bak"]
    assert aggregate(df, by=["model.n_heads"])["test/acc_n"].tolist() == [3, 3]
    assert any(f"{dirs[0].name}.bak" in line and "copies" in line for line in commit_warnings(df))


def test_runs_made_before_a_key_was_added_are_the_same_variant(root, tmp_path):
    """Runs whose config.yaml predates model.arch, rnn_hidden, residual_around, qk_reparam and
    trainer.num_nodes: the runner reuses them (their id is kept), and the table reads the missing keys
    as their defaults, so `results --aggregate` shows 2 variants of 3 seeds, not 4 of 1 or 2 (issue 41)."""
    from ablate import config as C

    added = C.added_defaults()
    assert set(added) >= {  # the keys added since the first runs (and any added later)
        "model.arch", "model.qk_reparam", "model.residual_around", "model.value_skipinit", "model.shaped_attention",
        "model.rnn_hidden", "model.rnn_init", "trainer.num_nodes"}
    for i, d in enumerate(run_dirs(root)):
        shutil.copytree(d, tmp_path / "o" / d.name)
        if i % 2:  # every other run, as a sweep resumed after the keys came
            cfg = yaml.safe_load((d / "config.yaml").read_text())
            for key in added:
                section, _, name = key.rpartition(".")
                del (cfg[section] if section else cfg)[name]
            (tmp_path / "o" / d.name / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    df = load("o", root=tmp_path)
    assert swept_keys(df) == ["model.n_heads", "seed"] and set(df["model.arch"]) == {"transformer"}
    assert aggregate(df)["test/acc_n"].tolist() == [3, 3]


def test_failed_running_and_other_commit_rows(root, tmp_path):
    dirs = run_dirs(root)
    for d in dirs[:4]:
        shutil.copytree(d, tmp_path / "e" / d.name)
    clone(dirs[4], tmp_path / "e" / "failed", {"seed": 7}, status="failed", metrics={}, probes={},
          error="Traceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: out of memory\n\n")
    clone(dirs[5], tmp_path / "e" / "running", {"seed": 8}, status="running", metrics={}, provenance=None)
    other = json.loads((dirs[0] / "summary.json").read_text())["provenance"]
    clone(dirs[5], tmp_path / "e" / "old", {"seed": 9}, provenance={**other, "commit": "0" * 40, "dirty": True})
    df = load("e", root=tmp_path).set_index("run_id")
    assert df.loc["failed", "status"] == "failed" and df.loc["failed", "error"] == "RuntimeError: out of memory"
    assert math.isnan(df.loc["failed", "test/acc"]) and df.loc["failed", "params/total"] > 0
    assert df.loc["running", "status"] == "running" and pd.isna(df.loc["running", "commit"])
    assert pd.isna(df.loc["old", "error"]) and df.loc["old", "dirty"]
    # flagged: the one completed run at another commit; the run without a commit is not
    assert df["commit_mismatch"].to_dict() == {k: k == "old" for k in df.index}
    assert df.attrs["reference_commit"] == other["commit"]


def test_no_runs_is_a_clear_error(tmp_path):
    with pytest.raises(ResultsError, match=r"no runs under .*nope; run `make sweep-nope` \(or ablate sweep sweeps/nope.yaml\) first"):
        load("nope", root=tmp_path)
    (tmp_path / "empty" / "queued").mkdir(parents=True)
    with pytest.raises(ResultsError, match="no runs under"):
        load("empty", root=tmp_path)


# A run's files damaged after it ended: (file, how) -> the bytes written over it.
GARBAGE = bytes(range(128, 256)) * 4  # not UTF-8


def damage(run_dir: Path, file: str, how: str) -> None:
    path = run_dir / file
    text = path.read_bytes()
    path.write_bytes({"truncated": text[: len(text) // 2], "garbage": GARBAGE, "empty": b""}[how])


DAMAGES = [("summary.json", "truncated"), ("summary.json", "empty"), ("config.yaml", "garbage"),
           ("config.yaml", "empty"), ("metrics.csv", "truncated"), ("metrics.csv", "empty"),
           ("probes.json", "truncated"), ("probes.json", "empty")]


@pytest.mark.parametrize(("file", "how"), DAMAGES)
def test_a_run_with_a_broken_file_is_a_corrupt_row_and_named_once(root, tmp_path, monkeypatch, capsys, file, how):
    """One damaged file of one run: the table still has every run, that one with status corrupt (and its
    config while config.yaml is readable), the statistics leave it out, and the CLI names it in one line."""
    dirs = run_dirs(root)
    for d in dirs[:3]:
        shutil.copytree(d, tmp_path / "b" / d.name)
    broken = tmp_path / "b" / dirs[1].name
    cfg = yaml.safe_load((broken / "config.yaml").read_text())
    damage(broken, file, how)
    df = load("b", root=tmp_path).set_index("run_id")
    assert len(df) == 3 and df["status"].to_dict() == {d.name: "corrupt" if d == dirs[1] else "completed"
                                                        for d in dirs[:3]}
    assert df.loc[broken.name, "error"].startswith(file) and df.attrs["corrupt"] == {broken.name: df.loc[broken.name, "error"]}
    if file == "config.yaml":
        assert pd.isna(df.loc[broken.name, "model.n_heads"])
    else:
        assert df.loc[broken.name, "model.n_heads"] == cfg["model"]["n_heads"] and df.loc[broken.name, "seed"] == cfg["seed"]
    good = df[df["status"] == "completed"]
    # the corrupt row's missing values do not count as varying
    assert swept_keys(df) == [k for k in ("model.n_heads", "seed") if good[k].nunique() > 1]
    stats = aggregate(load("b", root=tmp_path), by=[], metrics=["test/acc"])
    assert stats.loc[0, "test/acc_n"] == 2 and stats.loc[0, "test/acc_mean"] == pytest.approx(good["test/acc"].mean())

    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["results", "b"]) == 0
    out, err = capsys.readouterr()
    named = [line for line in err.splitlines() if broken.name in line]
    assert len(named) == 1 and file in named[0] and "corrupt" in named[0], err
    assert named[0].startswith("ablate: warning: run ") and len(err.splitlines()) <= 2  # (+ a dirty-tree line)
    assert [line.split()[2] for line in out.splitlines()[1:]].count("corrupt") == 1


def test_corrupt_problems_say_what_is_wrong(root, tmp_path):
    d = tmp_path / "w" / "r1"
    shutil.copytree(run_dirs(root)[0], d)
    (d / "summary.json").write_text('{"status": "completed", "metrics": {"test/acc": 0.9')
    (d / "metrics.csv").write_text((d / "metrics.csv").read_text().replace(",", ";", 3))
    error = load("w", root=tmp_path).loc[0, "error"]
    assert error.startswith("summary.json is not valid JSON at line 1 column") and "truncated?" in error
    assert "; also metrics.csv " in error
    for name in ("summary.json", "metrics.csv"):
        shutil.copy(run_dirs(root)[0] / name, d / name)
    assert load("w", root=tmp_path).loc[0, "status"] == "completed"
    lines = (d / "metrics.csv").read_text().splitlines(keepends=True)
    (d / "metrics.csv").write_text("".join(lines[:2]))  # cut at a line end: the test row is gone
    assert "metrics.csv has no test/acc though summary.json says completed (truncated?)" in load("w", root=tmp_path).loc[0, "error"]
    (d / "summary.json").write_text("[1, 2]")
    assert load("w", root=tmp_path).loc[0, "error"].startswith("summary.json holds a JSON list, not an object")


# ------------------------------------------------------------------ the printed table


def profiled(root: Path, base: Path) -> Path:
    """Sweep `prof` at budget smoke, both tasks: n_heads {1, 2} x data.task {copy, mnist}, seed 0, each
    run with its task's smoke profile (what `ablate sweep --budget smoke` gives): the profile keys
    differ between the tasks without being swept."""
    from ablate.budgets import profile

    src = run_dirs(base)[0]
    for heads in (1, 2):
        for task in ("copy", "mnist"):
            clone(src, root / "prof" / f"h{heads}-{task}",
                  {"model.n_heads": heads, "data.task": task, "budget": "smoke", "seed": 0, **profile("smoke", task)})
    return root


def test_budget_profile_keys_are_not_swept(root, tmp_path):
    df = load("prof", root=profiled(tmp_path, root))
    assert swept_keys(df) == ["model.n_heads", "data.task"]
    assert swept_keys(pd.DataFrame(df.to_dict("list"))) == ["model.n_heads", "data.task"]  # a CSV read back
    # a profile key set by hand to different values within one task and budget is swept
    clone(run_dirs(tmp_path, "prof")[0], tmp_path / "prof" / "more-data", {"data.n_train": 1024})
    assert "data.n_train" in swept_keys(load("prof", root=tmp_path))


def test_cli_fits_the_terminal_and_says_what_it_hid_and_why_an_interval_is_missing(root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(profiled(tmp_path, root)))
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["results", "prof"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if not line.startswith("(")]
    assert len(rows) == 5 and max(map(len, rows)) <= 80
    assert rows[0].split()[:4] == ["n_heads", "task", "seed", "status"] and "test/acc" in rows[0]
    notes = [line for line in out if line.startswith("(")]
    assert any("--all-columns" in n and "commit" in n for n in notes), out

    monkeypatch.setenv("COLUMNS", "250")  # wide: nothing hidden, full names, no notes
    assert main(["results", "prof"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["model.n_heads", "data.task", "seed", "status", "test/acc", "test/seq_acc",
                              "val/acc_best", "wall_time_s", "commit"] and len(out) == 5

    monkeypatch.setenv("COLUMNS", "80")
    assert main(["results", "prof", "--aggregate"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(map(len, out[:5])) <= 80 and out[0].split()[:6] == ["n_heads", "task", "test/acc_mean", "[lo,", "hi]",
                                                                     "test/acc_n"]
    assert all("[" not in line and line.split()[3] == "1" for line in out[1:5])  # one seed each: the mean alone
    assert "(no [lo, hi] where n < 2: a 95 % interval needs >= 2 seeds per variant (run more seeds))" in out


# ------------------------------------------------------------------ statistics


def test_t_quantiles_match_closed_forms_and_the_integrated_density():
    assert t_quantile_975(1) == pytest.approx(math.tan(math.pi * 0.475), abs=1e-6)
    assert t_quantile_975(2) == pytest.approx(0.95 / math.sqrt(2 * 0.975 * 0.025), abs=1e-6)  # 4.303
    assert round(t_quantile_975(2), 3) == 4.303 and math.isnan(t_quantile_975(0))

    def cdf(t: float, v: int, steps: int = 4000) -> float:  # 0.5 + Simpson's rule on the density
        c = math.exp(math.lgamma((v + 1) / 2) - math.lgamma(v / 2)) / math.sqrt(v * math.pi)
        x = np.linspace(0.0, t, steps + 1)
        f = c * (1 + x**2 / v) ** (-(v + 1) / 2)
        return 0.5 + (t / steps / 3) * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())

    for v in [*range(1, 41), 60, 120, 1000]:
        q = t_quantile_975(v)
        density = math.exp(math.lgamma((v + 1) / 2) - math.lgamma(v / 2)) / math.sqrt(v * math.pi) * (1 + q * q / v) ** (-(v + 1) / 2)
        assert abs(cdf(q, v) - 0.975) / density < 2e-6, v  # the quantile is off by < 2e-6
    assert t_quantile_975(10**6) == pytest.approx(1.959964, abs=1e-5)


def test_aggregate_matches_numpy_by_hand(table):
    """mean and std by numpy; the interval: Student's t for a linear metric (val/loss), and for accuracies
    the reports' own (`ablate.report.stats.estimate` of the same rows), inside [0, 1]."""
    from ablate.report import stats as S

    agg = aggregate(table)
    assert list(agg["model.n_heads"]) == [1, 2] and list(agg.columns[:1]) == ["model.n_heads"]
    assert list(agg.columns[1:6]) == ["test/acc_mean", "test/acc_lo", "test/acc_hi", "test/acc_std", "test/acc_n"]
    assert not any(c.endswith("_ci95") for c in agg.columns)
    for heads, row in agg.set_index("model.n_heads").iterrows():
        for metric in ("test/acc", "val/acc_best", "val/loss"):
            x = table.loc[table["model.n_heads"] == heads, metric].to_numpy()
            assert len(x) == 3
            assert row[f"{metric}_mean"] == pytest.approx(np.mean(x))
            assert row[f"{metric}_std"] == pytest.approx(np.std(x, ddof=1))
            assert row[f"{metric}_n"] == 3
            if metric == "val/loss":  # linear: mean -+ t_{0.975, 2} s / sqrt(3)
                half = 4.303 * np.std(x, ddof=1) / np.sqrt(3)
                assert (row[f"{metric}_lo"], row[f"{metric}_hi"]) == pytest.approx((np.mean(x) - half, np.mean(x) + half),
                                                                                    rel=1e-4)
            else:
                e = S.estimate(table, metric, {"model.n_heads": heads})
                assert e.kind == "accuracy" and e.n_eval == 64  # the bootstrap carries the 64 examples' own error
                assert (row[f"{metric}_lo"], row[f"{metric}_hi"]) == (e.lo, e.hi)
                assert 0.0 <= row[f"{metric}_lo"] <= row[f"{metric}_mean"] <= row[f"{metric}_hi"] <= 1.0
        assert row["n_runs"] == 3 and row["n_diverged"] == 0
    whole = aggregate(table, by=[], metrics=["test/acc"])
    assert len(whole) == 1 and whole.loc[0, "test/acc_n"] == 6
    assert whole.loc[0, "test/acc_mean"] == pytest.approx(table["test/acc"].mean())
    everything = S.estimate(table, "test/acc")
    assert (whole.loc[0, "test/acc_lo"], whole.loc[0, "test/acc_hi"]) == (everything.lo, everything.hi)
    with pytest.raises(ResultsError, match="no column 'test/nope'"):
        aggregate(table, metrics=["test/nope"])


def synthetic(root: Path, base: Path) -> Path:
    """Sweep `lrs`: n_heads {1, 2} x lr {1e-3, 3e-4} x seed {0, 1, 2} with chosen metrics. On
    validation, heads=1 is best at 1e-3 and heads=2 at 3e-4; on test it is the other way round.
    heads=2, lr=1e-3, seed 2 diverged."""
    src = run_dirs(base)[0]
    val = {(1, 1e-3): 0.9, (1, 3e-4): 0.8, (2, 1e-3): 0.7, (2, 3e-4): 0.75}
    test = {(1, 1e-3): 0.5, (1, 3e-4): 0.6, (2, 1e-3): 0.65, (2, 3e-4): 0.55}
    for (heads, lr), v in val.items():
        for seed in (0, 1, 2):
            metrics = {"val/acc_best": v + 0.01 * seed, "test/acc": test[heads, lr] + 0.02 * seed}
            extra = {"status": "diverged", "metrics": {}, "diverged_step": 3} if (heads, lr, seed) == (2, 1e-3, 2) else {}
            clone(src, root / "lrs" / f"h{heads}-lr{lr}-s{seed}", {"model.n_heads": heads, "optim.lr": lr, "seed": seed},
                  **{"metrics": metrics, **extra})
    return root


def test_best_lr_selects_on_validation_and_keeps_every_row(table, root, tmp_path):
    df = load("lrs", root=synthetic(tmp_path, root))
    assert swept_keys(df) == ["model.n_heads", "optim.lr", "seed"]
    chosen = best_lr(df)
    assert sorted(set(zip(chosen["model.n_heads"], chosen["optim.lr"]))) == [(1, 1e-3), (2, 3e-4)]
    assert len(chosen) == 6 and chosen.attrs["swept_keys"] == df.attrs["swept_keys"]
    compared = aggregate(chosen, metrics=["test/acc"])
    assert list(compared["optim.lr"]) == [1e-3, 3e-4]
    assert compared["test/acc_mean"].to_numpy() == pytest.approx([0.52, 0.57])
    # with the diverged run counted as chance, heads=2 at 1e-3 still loses on validation
    assert sorted(set(zip(*[best_lr(df, diverged_as=0.1)[k] for k in ("model.n_heads", "optim.lr")]))) == [(1, 1e-3), (2, 3e-4)]
    # selecting on the test metric instead picks the other learning rates
    on_test = best_lr(df, metric="test/acc")
    assert sorted(set(zip(on_test["model.n_heads"], on_test["optim.lr"]))) == [(1, 3e-4), (2, 1e-3)]
    assert set(best_lr(df, metric="val/acc_best", maximize=False)["optim.lr"]) == {3e-4, 1e-3}
    assert best_lr(table).equals(table)  # no swept lr: nothing to choose


def test_diverged_runs_are_left_out_or_counted_as_a_value(root, tmp_path):
    df = load("lrs", root=synthetic(tmp_path, root))
    x = df.loc[(df["model.n_heads"] == 2) & (df["optim.lr"] == 1e-3), "test/acc"].to_numpy()
    assert np.isnan(x).sum() == 1
    out = aggregate(df, metrics=["test/acc"]).set_index(["model.n_heads", "optim.lr"]).loc[(2, 1e-3)]
    assert out["test/acc_n"] == 2 and out["n_runs"] == 2 and out["n_diverged"] == 1
    assert out["test/acc_mean"] == pytest.approx(np.nanmean(x))
    # the interval of the two completed runs: the reports' for the same rows (a diverged run is not one of them)
    from ablate.report import stats as S

    e = S.estimate(df, "test/acc", {"model.n_heads": 2, "optim.lr": 1e-3})
    assert e.n == 2 and e.n_diverged == 1 and (out["test/acc_lo"], out["test/acc_hi"]) == (e.lo, e.hi)
    chance = aggregate(df, metrics=["test/acc"], diverged_as=0.1).set_index(["model.n_heads", "optim.lr"]).loc[(2, 1e-3)]
    filled = np.where(np.isnan(x), 0.1, x)
    assert chance["test/acc_n"] == 3 and chance["test/acc_mean"] == pytest.approx(filled.mean())
    counted = S.from_values("test/acc", filled, n_eval=64)  # the diverged run as chance: three values
    assert (chance["test/acc_lo"], chance["test/acc_hi"]) == (counted.lo, counted.hi)
    assert chance["test/acc_lo"] < out["test/acc_lo"]  # a run at 0.1 pulls the interval down
    # a variant whose every run diverged still has its row, with n = 0
    for d in (tmp_path / "lrs").glob("h2-lr0.001-s*"):
        s = json.loads((d / "summary.json").read_text())
        (d / "summary.json").write_text(json.dumps({**s, "status": "diverged", "metrics": {}}))
    gone = aggregate(load("lrs", root=tmp_path), metrics=["test/acc"]).set_index(["model.n_heads", "optim.lr"]).loc[(2, 1e-3)]
    assert gone["test/acc_n"] == 0 and gone["n_diverged"] == 3 and math.isnan(gone["test/acc_mean"])


# ------------------------------------------------------------------ CLI and files


def test_cli_prints_the_table_and_writes_csv_and_parquet(root, table, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(root))
    monkeypatch.setenv("COLUMNS", "250")  # a wide terminal: the whole short view
    csv, parquet = tmp_path / "out" / "t.csv", tmp_path / "out" / "t.parquet"
    assert main(["results", "mysweep", "--csv", str(csv), "--parquet", str(parquet)]) == 0
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    assert lines[0].split() == ["model.n_heads", "seed", "status", "test/acc", "test/seq_acc", "val/acc_best", "wall_time_s", "commit"]
    assert len(lines) == 7 and all("completed" in line for line in lines[1:])
    assert "another commit" not in err  # (a dirty working tree may add a warning line of its own)
    assert lines[1].split()[-1] == table.loc[0, "commit"][:8]

    fresh = load("mysweep", root=root)
    back = pd.read_parquet(parquet)
    pd.testing.assert_frame_equal(back, fresh)  # values, dtypes and attrs (swept keys) survive
    assert back.attrs["swept_keys"] == ["model.n_heads", "seed"]
    assert csv.read_text() == fresh.to_csv(index=False)  # CSV keeps no types ('1' vs 1), so: the text,
    as_read = pd.read_csv(csv)  # and every number read back
    numbers = [c for c in fresh.columns if c.startswith(("test/", "val/", "train/", "probe/", "params/"))]
    assert list(as_read.columns) == list(fresh.columns) and len(numbers) > 40
    pd.testing.assert_frame_equal(as_read[numbers], fresh[numbers], check_dtype=False)
    assert sorted(p.name for p in csv.parent.iterdir()) == ["t.csv", "t.parquet"]  # no temp files left

    assert main(["results", "mysweep", "--all-columns"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header[:2] == ["run_id", "model.arch"] and header[-1] == "run_dir" and "probe/final/grad_ratio" in header

    assert main(["results", "mysweep", "--aggregate", "--csv", str(csv)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["model.n_heads", "test/acc_mean", "[lo,", "hi]", "test/acc_n", "test/seq_acc_mean", "[lo,",
                              "hi]", "test/seq_acc_n", "val/acc_best_mean", "[lo,", "hi]", "val/acc_best_n", "n_diverged"]
    assert len(out) == 3
    written = pd.read_csv(csv)
    assert list(written["test/acc_n"]) == [3, 3]
    for line, (_, row) in zip(out[1:], written.iterrows()):  # each metric printed as mean [lo, hi]
        assert f"{row['test/acc_mean']:.4g} [{row['test/acc_lo']:.4g}, {row['test/acc_hi']:.4g}]" in line


def test_cli_warns_about_rows_from_another_commit(root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "250")
    dirs = run_dirs(root)
    for d in dirs[:3]:
        shutil.copytree(d, tmp_path / "c" / d.name)
    prov = json.loads((dirs[0] / "summary.json").read_text())["provenance"]
    clone(dirs[3], tmp_path / "c" / "x", {"seed": 5}, provenance={**prov, "commit": "abcdef1234" + "0" * 30})
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path))
    assert main(["results", "c"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines()[0].startswith("ablate: warning: 1 of 4 runs ran at another commit (abcdef12)")
    assert [line.split()[-1] for line in out.splitlines()[1:]].count("abcdef12!") == 1


def test_cli_bad_name_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path))
    assert main(["results", "nope"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        f"ablate: no runs under {tmp_path / 'nope'}; run `make sweep-nope` (or ablate sweep sweeps/nope.yaml) first\n"
    )
    assert main(["results", "nope", "--wandb", "no-slash"]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_writes_are_atomic_and_replace_the_old_file(table, tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("an older, longer file\n" * 1000)
    write(table, path)
    assert pd.read_csv(path)["run_id"].tolist() == table["run_id"].tolist()
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]
    with pytest.raises(ResultsError, match=r"\.csv or \.parquet"):
        write(table, tmp_path / "t.xlsx")

    # two writers and a reader at once: the reader only ever sees a whole table
    big = pd.concat([table] * 50, ignore_index=True)
    stop, seen, errors = threading.Event(), [], []

    def writer(df):
        for _ in range(15):
            write(df, path)

    def reader():
        while not stop.is_set():
            try:
                seen.append(len(pd.read_csv(io.StringIO(path.read_text()))))
            except Exception as err:  # a torn file would fail to parse or have a short row count
                errors.append(err)

    threads = [threading.Thread(target=writer, args=(d,)) for d in (table, big)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    assert not errors and seen and set(seen) <= {len(table), len(big)}
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


# ------------------------------------------------------------------ W&B


class FakeApi:
    """wandb.Api's `runs(path, filters=...)`, serving public-API Run objects built from recorded
    GraphQL nodes (tests/data/wandb_runs.json) as the real client builds them, with no server."""

    def __init__(self, nodes: list[dict]):
        self.nodes, self.calls = nodes, []

    def runs(self, path, filters=None, per_page=50, order=None, include_sweeps=True, lazy=True):
        from wandb.apis.public.runs import Run

        self.calls.append((path, filters, lazy))
        entity, project = path.split("/")
        wanted = (filters or {}).get("group")
        names = wanted["$in"] if isinstance(wanted, dict) else [wanted]
        return [Run(None, entity, project, n["name"], attrs=dict(n), lazy=lazy) for n in self.nodes if n["group"] in names]


@pytest.fixture
def wandb_api(tmp_path, monkeypatch) -> FakeApi:
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))  # public-API Runs make a folder there
    return FakeApi(json.loads((DATA / "wandb_runs.json").read_text()))


def test_wandb_table_equals_the_run_folders_table(wandb_api):
    local = load("wbsweep", root=DATA / "wandb_runs")
    remote = load_wandb("wbsweep", "team/ablate-test", api=wandb_api)
    from ablate.results.wandb_runs import groups

    assert wandb_api.calls == [("team/ablate-test", {"group": {"$in": groups("wbsweep")}}, False)]
    # W&B's train/loss is its last *logged* value (every 25 steps), so it is not a column there
    assert list(remote.columns) == [c for c in local.columns if c != "train/loss"]
    assert swept_keys(remote) == swept_keys(local) == ["model.n_heads", "model.norm", "optim.lr", "seed"]
    assert list(remote["run_id"]) == list(local["run_id"])
    assert list(remote["status"]) == list(local["status"])
    assert sorted(remote["status"]) == ["completed"] * 4 + ["diverged", "failed"]
    # every config key, metric, probe scalar and parameter count agrees, and so do the commits
    same = [c for c in remote.columns if c.startswith(("model.", "data.", "optim.", "trainer.", "run.", "probe/", "params/", "test/", "val/"))]
    same += ["seed", "pooling", "budget", "tracking", "commit", "commit_mismatch"]
    ok = local["status"] != "failed"  # a failed run's summary.json holds neither metrics nor commit
    pd.testing.assert_frame_equal(remote.loc[ok, same], local.loc[ok, same], check_dtype=False)
    failed = remote["status"] == "failed"
    assert remote.loc[failed, "val/acc"].notna().all() and local.loc[failed, "val/acc"].isna().all()
    assert remote["dirty"].isna().all() and remote["run_dir"].isna().all()


def test_wandb_states_config_forms_and_summary_names():
    from types import SimpleNamespace as Run

    wrapped = {"model.n_heads": {"value": 2, "desc": None}, "seed": {"value": 0}, "_wandb": {"value": {"t": 1}}, "n_out": 3}
    runs = [
        Run(id="a", state="finished", config=wrapped, commit="c1",
            summary={"status": "completed", "test/acc": 0.5, "params/total": 10, "probe/final/x": 1.0,
                     "probe/final/attention": {"_type": "images/separated"}, "epoch": 1, "_runtime": 3}),
        Run(id="b", state="finished", config={"model": {"n_heads": 4}, "seed": 1}, commit="c1",
            summary={"status": "diverged", "total": 12, "diverged_step": 7}),
        Run(id="c", state="crashed", config={"config": {"model": {"n_heads": 8}, "seed": 2}}, summary={}),
        Run(id="d", state="killed", config={"model.n_heads": 2, "seed": 3}, summary={"val/acc": 0.2}),
        Run(id="e", state="running", config={"model.n_heads": 2, "seed": 4}, summary={}),
        Run(id="f", state="finished", config={"model.n_heads": 2, "seed": 5}, summary={"test/acc": 0.7}, commit="c2"),
        # held at an early-termination band (its W&B run closed there, "finished"): never read as completed
        Run(id="g", state="finished", config={"model.n_heads": 2, "seed": 6}, summary={"status": "paused",
                                                                                       "val/acc_best": 0.3}, commit="c2"),
    ]
    df = load_wandb("g", "team/p", api=ListApi(runs)).set_index("run_id")
    assert df["status"].to_dict() == {"a": "completed", "b": "diverged", "c": "failed", "d": "failed", "e": "running",
                                      "f": "completed", "g": "paused"}
    assert df["model.n_heads"].to_dict() == {"a": 2, "b": 4, "c": 8, "d": 2, "e": 2, "f": 2, "g": 2}
    # W&B's and Lightning's keys dropped; the keys added since these runs at their defaults (issue 41)
    from ablate import config as C

    order = list(C.flat(C.Config()))
    keys = sorted({*C.added_defaults(), "model.n_heads"}, key=order.index)  # in the config's order
    assert keys[:3] == ["model.arch", "model.n_heads", "model.qk_reparam"] and "trainer.num_nodes" in keys
    assert list(df.columns[:len(keys)]) == keys
    assert list(df.columns[len(keys):len(keys) + 2]) == ["seed", "status"] and set(df["model.arch"]) == {"transformer"}
    assert df.loc["a", "params/total"] == 10 and df.loc["b", "params/total"] == 12 and df.loc["b", "diverged_step"] == 7
    assert df.loc["a", "probe/final/x"] == 1.0 and "probe/final/attention" not in df.columns and "epoch" not in df.columns
    assert df.loc["a", "wall_time_s"] == 3 and df["commit_mismatch"].to_dict() == {k: k in "fg" for k in df.index}


class ListApi:
    """An Api whose runs() takes no `lazy` argument, as in wandb before 0.21."""

    def __init__(self, runs: list):
        self._runs = runs

    def runs(self, path, filters=None):
        from ablate.results.wandb_runs import groups

        assert filters == {"group": {"$in": groups("g")}}
        return self._runs


def test_wandb_errors_are_one_line():
    class Down:
        def runs(self, path, filters=None, lazy=True):
            raise ConnectionError("Max retries exceeded with url: /graphql\nmore detail")

    with pytest.raises(ResultsError, match=r"^could not list the W&B runs of group 'g' in t/p: Max retries exceeded with url: /graphql$"):
        load_wandb("g", "t/p", api=Down())
    with pytest.raises(ResultsError, match=r"no runs under W&B t/p \(group g\)"):
        load_wandb("g", "t/p", api=ListApi([]))
    with pytest.raises(ResultsError, match="is not ENTITY/PROJECT"):
        load_wandb("g", "just-a-project")


def test_convergence_columns_come_from_the_validation_accuracy_of_each_epoch():
    """val/gain_last_epoch: last epoch's val/acc minus the one before; val/step_solved: the first step
    at >= 99 % (rows without val/acc, e.g. train-loss rows, are skipped; never solved: absent)."""
    from ablate.results.table import convergence

    rows = [{"step": "25", "val/acc": "", "train/loss": "2.1"}, {"step": "62", "val/acc": "0.41"},
            {"step": "125", "val/acc": "0.995"}, {"step": "188", "val/acc": "0.985"}]
    out = convergence(rows)
    assert out == {"val/gain_last_epoch": pytest.approx(-0.01), "val/step_solved": 125.0}
    assert convergence(rows[:2]) == {}  # one epoch: no gain to measure, not solved
    assert convergence([{"step": "62", "val/acc": "0.5"}, {"step": "125", "val/acc": "0.7"}]) == {
        "val/gain_last_epoch": pytest.approx(0.2)}


# ------------------------------------------------------------------ the evaluation sets' sizes

MNIST_ONLY = {"data.n_train": 20000, "data.n_val": 1000, "data.n_test": 2000}  # copy's keys back at their defaults
EVAL_CONFIGS = {  # task -> config changes; what each split then holds (sequences, images)
    "copy": ({"data.task": "copy", "data.n_val": 48, "data.n_test": 80}, 48, 80),
    "lookup": ({"data.task": "lookup", "data.vocab": 4, "data.n_val": 40, "data.n_test": 24}, 40, 24),
    "histogram": ({"data.task": "histogram", "data.n_val": 16, "data.n_test": 32}, 16, 32),
    "mnist": ({"data.task": "mnist", **MNIST_ONLY, "data.val_size": 300, "data.test_subset": None}, 300, 10_000),
    "mnist-subset": ({"data.task": "mnist", **MNIST_ONLY, "data.val_size": 256, "data.test_subset": 512}, 256, 512),
}


def test_eval_columns_hold_the_examples_each_split_evaluates(root, tmp_path):
    """eval/n_val and eval/n_test (issue 14: the evaluation set's own sampling error enters the reports'
    intervals): synthetic tasks' data.n_val / data.n_test, MNIST's data.val_size and data.test_subset
    (all 10,000 test images when unset); the same numbers as the sets the data modules build."""
    from ablate.config import from_dict
    from ablate.data import build_datamodule

    src = run_dirs(root)[0]
    for name, (changes, _, _) in EVAL_CONFIGS.items():
        clone(src, tmp_path / "evals" / name, changes)
    df = load("evals", root=tmp_path).set_index("run_id")
    assert ["eval/n_test", "eval/n_val"] == [c for c in df.columns if c.startswith("eval/")]
    assert table_columns_after_metrics(df)
    mnist = data_dir() / "MNIST" / "raw" / MNIST_FILES[2]
    for name, (changes, n_val, n_test) in EVAL_CONFIGS.items():
        assert (df.loc[name, "eval/n_val"], df.loc[name, "eval/n_test"]) == (n_val, n_test), name
        if changes["data.task"] == "mnist" and not mnist.is_file():
            continue  # the config's numbers are checked above; the images are not on this machine
        cfg = from_dict(yaml.safe_load((tmp_path / "evals" / name / "config.yaml").read_text()))
        data = build_datamodule(cfg.data)
        data.setup("fit")
        data.setup("test")
        assert (len(data.val_set), len(data.test_set)) == (n_val, n_test), name
    # the original runs: copy with data.n_val=64, data.n_test=64
    assert load("mysweep", root=root)[["eval/n_val", "eval/n_test"]].drop_duplicates().values.tolist() == [[64, 64]]


def table_columns_after_metrics(df: pd.DataFrame) -> bool:
    """eval/* stand with the other recorded numbers (after test/, val/, train/), before the probes."""
    cols = list(df.columns)
    last_metric = max(i for i, c in enumerate(cols) if c.startswith(("test/", "val/", "train/")))
    first_probe = min(i for i, c in enumerate(cols) if c.startswith("probe/"))
    return all(last_metric < cols.index(c) < first_probe for c in ("eval/n_val", "eval/n_test"))


def test_the_import_clean_rules_are_the_harness_rules():
    """ablate.results.stats may not import the config or the sweep runner (the reports use it), so it
    keeps copies of two of their rules: the keys that are no part of a run's identity, and the tuning
    score. They must stay the same."""
    import itertools

    from ablate.config import NOT_IDENTITY
    from ablate.results import stats
    from ablate.sweep.tune import score

    assert stats.NOT_IDENTITY == NOT_IDENTITY
    values = (0.5, 1, "0.25", None, "x", math.nan, math.inf, -math.inf, True)
    for value, status, maximize in itertools.product(values, ("completed", "diverged", "failed", None), (True, False)):
        assert stats.score(value, status, maximize) == score(value, status, maximize), (value, status, maximize)


def test_the_sweeps_wall_time_is_first_start_to_last_end():
    """meta.json's wall_s: each run's start (provenance.time) plus its wall time, the latest end minus the
    earliest start, by hand; runs that record neither are left out, and none at all gives None."""
    from ablate.results.export import wall_span

    def run(time, wall):
        return {"provenance": {"time": time}, "wall_time_s": wall}

    summaries = [run("2026-12-01T10:00:00+00:00", 30.0), run("2026-12-01T10:00:05+00:00", 40.4),  # ends 10:00:45.4
                 run("2026-12-01T10:00:30+00:00", 10.0), None, {"status": "running"}, run("not a time", 5.0),
                 run("2026-12-01T09:00:00+00:00", float("nan"))]
    assert wall_span(summaries) == 45
    assert wall_span([None, {"provenance": {}}]) is None


def test_the_primary_runs_summary_counts_the_chosen_rate_only():
    """meta.json's primary: a tuned sweep's runs at each variant's chosen rate (here lr 0.01 for `a`: seed-mean
    0.995 against 0.5), their median last-epoch gain and the share at >= 99 %, by hand; a sweep that trained
    nothing has no summary."""
    import pandas as pd

    from ablate.results.export import primary_runs

    rows = [("a", 0.001, 0, 0.5, 0.02), ("a", 0.01, 0, 0.995, 0.0), ("a", 0.01, 1, 0.98, 0.01), ("a", 0.01, 2, 1.0, 0.0),
            ("b", 0.001, 0, 0.7, 0.1)]
    df = pd.DataFrame(rows, columns=["model.pos_enc", "optim.lr", "seed", "val/acc_best", "val/gain_last_epoch"])
    df["status"] = "completed"
    df.attrs["swept_keys"] = ["model.pos_enc", "optim.lr", "seed"]
    got = primary_runs(df)
    # a: the three runs at 0.01 (mean 0.9917 > 0.5); b: its one run
    assert got == {"runs": 4, "median_gain": 0.005, "solved": 0.5}
    assert primary_runs(df.drop(columns=["val/gain_last_epoch"])) is None


@pytest.mark.parametrize(("a", "b", "equal"), [
    (1, True, False), (0, False, False), (True, np.True_, True), ("true", True, True),  # a bool is no number
    ("0.001", 0.001, True), ("1e-3", np.float64(0.001), True), (0.0003, 0.00030000000000000003, True),
    (8, 8.0, True), (np.int64(8), 8, True), ("8", 8, True), (0.001, 0.0011, False),
    ("none", "none", True), ("rope", "sinusoidal", False),  # names stay names: pos_enc=none is no null
    (None, float("nan"), True), (pd.NA, None, True), ("null", None, True), (None, 0, False), (None, "none", False),
])
def test_same_is_one_rule_for_a_value_from_a_table_a_config_or_a_command_line(a, b, equal):
    """The one `same` that the results, the comparison report and the figures match values with (four
    private copies disagreed on `same(1, True)` and `same('0.001', 0.001)`); symmetric."""
    from ablate.results.stats import same

    assert same(a, b) is equal and same(b, a) is equal
