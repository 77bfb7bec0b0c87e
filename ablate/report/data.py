"""The report's data: the exported tables, arrays and provenance a notebook reads.

    reports/data/<sweep>.csv        one row per run: ablate.results.load(<sweep>) (run_dir dropped,
                                    floats rounded to 6 significant digits)
    reports/data/<sweep>.npz        small arrays per run: `<run_id>/train_loss`, `<run_id>/val_acc`
                                    ((k, 2): step, value), and for a few sweeps first-layer attention
                                    maps `<run_id>/final/attention` (1, H, T, T), and for Q1 the
                                    sentence's maps `<run_id>/final/sentence` (H, 13, 13) (export.py)
    reports/data/attention_cost.csv `ablate bench attention --csv ...`
    reports/data/meta.json          per sweep: commit, budget, machine, date, runs, swept keys, dtypes,
                                    the config defaults, the full budget's cost; Q1's sentence

The folder is $ABLATE_REPORT_DATA (set by `ablate report build`), else ./reports/data, else ./data
(a notebook opened inside reports/). A table that is not there raises `NotRunYet`, whose message is
the one line a report shows in its place: "not run yet — run `make sweep-<name>`".
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..results.exported import (  # noqa: F401 - the data folder's format, re-exported for the notebooks
    META,
    TARGETS,
    DataFileError,
    check_files,
    check_folder,
    make_target,
    read_csv,
    read_curves,
    restore_dtypes,
)
from ..results.exported import read_meta as _read_meta
from ..results.stats import config_columns, kept, swept, swept_keys
from .sentences import language, runs_zh

DATA_ENV = "ABLATE_REPORT_DATA"
FIGURES_ENV = "ABLATE_REPORT_FIGURES"
SHOW_SAVED_ENV = "ABLATE_REPORT_SHOW_SAVED"  # set by the build: a saved figure is shown as its PNG (figures.savefig)
NOT_RUN_LINE = ("not run yet — run", "尚未运行 — 请运行")  # the missing line's words, in each language


def missing_zh(text: str) -> str:
    """A missing line ("not run yet — run `make sweep-x`") in Chinese; any other text is left as it is."""
    return text.replace(*NOT_RUN_LINE)


class NotRunYet(LookupError):
    """The table of `name` is not in the data folder; str() is the line a report shows instead."""

    def __init__(self, name: str, where: Path):
        self.name, self.where, self.target = name, where, make_target(name)
        super().__init__(f"{NOT_RUN_LINE[0]} `make {self.target}`")


def _first_dir(*candidates: str) -> Path:
    for candidate in candidates:
        if Path(candidate).is_dir():
            return Path(candidate)
    return Path(candidates[0])


def data_dir() -> Path:
    """$ABLATE_REPORT_DATA, else reports/data, else data (a notebook run from inside reports/)."""
    env = os.environ.get(DATA_ENV)
    return Path(env) if env else _first_dir("reports/data", "data")


def figure_file(name: str, lang: str = "en") -> str:
    """The file of figure `name` ('q1_copy.png') in a language: 'q1_copy.zh.png' for "zh" (savefig writes
    both)."""
    return name[: -len(".png")] + ".zh.png" if lang == "zh" and name.endswith(".png") else name


def figures_dir() -> Path:
    """$ABLATE_REPORT_FIGURES, else reports/figures, else figures."""
    env = os.environ.get(FIGURES_ENV)
    return Path(env) if env else _first_dir("reports/figures", "figures")


def read_meta(data: Path | str | None = None) -> dict[str, Any]:
    """meta.json of `data` (default: the data folder) ({} when there is none); DataFileError when it
    is not what export writes."""
    return _read_meta(data if data is not None else data_dir())


def config_defaults(data: Path | str | None = None, sweep: str | None = None) -> dict[str, Any]:
    """Every config key with the harness's default ({'model.ffn_mult': 2, ...}), as export recorded it in
    meta.json: `sweep`'s, or (default) the most recently exported sweep's. {} for a folder with no
    exported sweep; DataFileError for one exported before the defaults were recorded (export again)."""
    folder = Path(data if data is not None else data_dir())
    sweeps = read_meta(folder).get("sweeps", {})
    if sweep is not None:
        sweeps = {sweep: sweeps[sweep]} if sweep in sweeps else {}
    recorded = [(str(info.get("date")), name, info["config_defaults"]) for name, info in sweeps.items()
                if isinstance(info.get("config_defaults"), dict)]
    if not recorded:
        if not sweeps:
            return {}
        raise DataFileError(folder / META, f"records no config defaults{f' for {sweep}' if sweep else ''} "
                            "(exported before they were)")
    return dict(max(recorded)[2])


def _column_groups(df: pd.DataFrame, defaults: dict[str, Any]) -> dict[str, list[str]]:
    """df.attrs as ablate.results.load sets them, recovered from the column names: the config columns are
    the keys meta.json's config defaults name, else those the table's column order places before status."""
    plain = df.copy(deep=False)
    plain.attrs = {}
    return {
        "config_keys": [c for c in df.columns if c in defaults] if defaults else config_columns(plain),
        "metrics": [c for c in df.columns if c.split("/")[0] in ("test", "val", "train")],
        "probes": [c for c in df.columns if c.startswith("probe/")],
        "params": [c for c in df.columns if c.startswith("params/")],
    }


def with_levels(df: pd.DataFrame) -> pd.DataFrame:
    """df with a run's missing reference levels (`ref/<split>/<name>`) taken from the runs of the same data
    (every `data.*` key equal). The levels are computed from the evaluation sets alone, before training; a
    run that diverged before ablate recorded them for diverged runs too has none, and the reports count a
    diverged run at chance, so it needs them."""
    refs = [c for c in df.columns if c.startswith("ref/")]
    keys = [c for c in df.columns if c.startswith("data.")]
    if not refs or not keys or not df[refs].isna().any().any():
        return df
    df = df.copy()
    group = df[keys].map(str).agg("\x1f".join, axis=1)  # one id per data setting (NaN-safe, any dtype)
    for c in refs:
        df[c] = df[c].fillna(df.groupby(group)[c].transform("first"))
    return df


def table(name: str, data: Path | str | None = None) -> pd.DataFrame:
    """The per-run table of sweep `name` as exported: the same columns and df.attrs as
    `ablate.results.load(name)`, so `ablate.results.aggregate / best_lr / swept_keys` work on it.
    DataFileError when the CSV is not the one meta.json records (an export stopped part way)."""
    folder = Path(data if data is not None else data_dir())
    path = folder / f"{name}.csv"
    meta = read_meta(folder)
    check_files(folder, meta, [path.name])  # a table of another export than meta.json's: one line, not a mix
    if not path.is_file():
        raise NotRunYet(name, path)
    df = read_csv(path)
    info = meta.get("sweeps", {}).get(name, {})
    # .copy(): one block per dtype instead of one per column, which makes each row selection four times faster
    df = with_levels(restore_dtypes(df, info.get("dtypes", {}))).copy()
    attrs: dict[str, Any] = {"name": name, "source": str(path),
                             **_column_groups(df, info.get("config_defaults") or {})}
    if "swept_keys" in info:
        attrs["swept_keys"] = [k for k in info["swept_keys"] if k in df.columns]
    attrs["reference_commit"] = info.get("commit")
    if info.get("tune"):  # a tuned sweep: which key, on which seeds, chosen by which metric and goal
        attrs["tune"] = info["tune"]
    df.attrs = kept(attrs)
    return df


def arrays(name: str, data: Path | str | None = None) -> dict[str, np.ndarray]:
    """Every array of reports/data/<name>.npz by key (`<run_id>/val_acc`, ...); {} if none; DataFileError
    when it is not the NPZ meta.json records (an export stopped part way)."""
    folder = Path(data if data is not None else data_dir())
    path = folder / f"{name}.npz"
    check_files(folder, read_meta(folder), [path.name])
    if not path.is_file():
        return {}
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


class Sweep:
    """One sweep's data as a notebook uses it. Never raises for a missing table: `ready` says whether
    it is there, and `missing` (str) is the line to show in its place.

        S = R.sweep("scaling")
        if S.ready:
            S.df                      # the table
            S.curves("val/acc")       # long: run_id, step, value + the swept keys
            S.per_layer("probe/init/cosine")   # long: run_id, layer, value + the swept keys
            S.probe_curves()          # probes during training: run_id, step, layer, grad, ... + keys
            S.attention(run_id)       # (L, H, T, T) final attention maps of one run
            S.attention(run_id, "final/sentence")   # Q1: (H, 13, 13) on 猫坐在垫子上
        R.sweeps("pos_enc", "pos_enc_causal")       # several sweeps as one (Sweeps)
    """

    def __init__(self, name: str, data: Path | str | None = None):
        self.name = name
        self.data = Path(data if data is not None else data_dir())
        try:
            self.df: pd.DataFrame | None = table(name, self.data)
            self.missing: str | None = None
        except NotRunYet as err:
            self.df, self.missing = None, str(err)

    @property
    def ready(self) -> bool:
        return self.df is not None

    @property
    def meta(self) -> dict[str, Any]:
        return read_meta(self.data).get("sweeps", {}).get(self.name, {})

    @cached_property
    def arrays(self) -> dict[str, np.ndarray]:
        return arrays(self.name, self.data)

    def keys(self) -> list[str]:
        """The swept keys other than seed (the variant), in column order."""
        return [k for k in swept_keys(self.df) if k != "seed"] if self.ready else []

    def _with_config(self, long: pd.DataFrame) -> pd.DataFrame:
        config = self.df[["run_id", *self.keys(), *(["seed"] if "seed" in self.df else []), "status"]]
        return long.merge(config.drop_duplicates("run_id"), on="run_id", how="inner")

    def curves(self, metric: str = "val/acc") -> pd.DataFrame:
        """A logged curve of every run, long: run_id, step, value, then its swept keys and seed."""
        suffix = "/" + metric.replace("/", "_")
        rows = [
            (key[: -len(suffix)], float(step), float(value))
            for key, curve in self.arrays.items()
            if key.endswith(suffix)
            for step, value in np.asarray(curve, dtype=float).reshape(-1, 2)
        ]
        long = pd.DataFrame(rows, columns=["run_id", "step", metric])
        return self._with_config(long)

    def last_gain(self, metric: str = "val/acc") -> pd.Series:
        """Per run_id: how much `metric` rose over the last logged interval (last value minus the one
        before; NaN with fewer than two points). A run still gaining at its end had not converged."""
        curves = self.curves(metric).sort_values(["run_id", "step"], kind="stable")
        last_two = curves.groupby("run_id")[metric].apply(lambda v: v.iloc[-1] - v.iloc[-2] if len(v) > 1 else np.nan)
        return last_two.astype(float)

    def still_learning(self, df: pd.DataFrame | None = None, what: str = "runs", metric: str = "val/acc",
                       threshold: float = 0.02, lang: str = "en") -> str:
        """A sentence for the Answer (in `lang`, en or zh) when the runs of `df` (default: all) had not converged:
        the median run's `metric` still rose by more than `threshold` over its last logged interval; else ""."""
        zh = language(lang) == "zh"
        df = self.df if df is None else df
        gains = df["run_id"].map(self.last_gain(metric)).dropna()
        if gains.empty or gains.median() <= threshold:
            return ""
        median, low, high = (100 * gains.median(), 100 * gains.min(), 100 * gains.max())
        if zh:
            steps = f"（{int(df['global_step'].max()):,} 个优化步）" if "global_step" in df else ""
            return (f"在这个预算下{steps}，这些{runs_zh(what)}还在学习：最后一轮训练中，中位运行的 {metric} 上升了 "
                    f"{median:.1f} 个百分点（各运行从 {low:.1f} 到 {high:.1f} 个百分点不等），所以比较的是训练早期的模型。")
        steps = f" ({int(df['global_step'].max()):,} optimiser steps)" if "global_step" in df else ""
        return (f"At this budget{steps} the {what} were still learning: over its last epoch the {metric} of the "
                f"median run rose by {median:.1f} points (the gains ranged from {low:.1f} "
                f"to {high:.1f} points across runs), so the comparisons are of models early in training.")

    def probe_curves(self) -> pd.DataFrame | None:
        """The periodic probes during training (<sweep>_curves.csv), long: run_id, the swept keys, step,
        layer, grad, logit_std, rowmax, onehot_frac, entropy, cosine, erank; with each run's seed and
        status. None when the sweep has none."""
        if not self.ready:
            return None
        long = self._probe_long()
        if long is None:
            return None
        own = [c for c in long.columns if c not in ("run_id", "step", "layer") and c in self.df.columns]
        return self._with_config(long.drop(columns=own))

    def _probe_long(self) -> pd.DataFrame | None:
        long = read_curves(self.name, self.data)
        return None if long is None else restore_dtypes(long, self.meta.get("dtypes", {}))

    def per_layer(self, prefix: str) -> pd.DataFrame:
        """A per-layer probe (`probe/init/cosine` -> columns probe/init/cosine_l0, _l1, ...), long:
        run_id, layer, value, last (True at each run's last layer), then its swept keys and seed."""
        import re

        pattern = re.compile(re.escape(prefix) + r"_l(\d+)$")
        columns = {c: int(m.group(1)) for c in self.df.columns if (m := pattern.match(c))}
        long = self.df[["run_id", *columns]].melt("run_id", var_name="column", value_name=prefix)
        long["layer"] = long["column"].map(columns)
        long = long.dropna(subset=[prefix]).drop(columns="column")
        long["last"] = long["layer"] == long.groupby("run_id")["layer"].transform("max")
        return self._with_config(long.sort_values(["run_id", "layer"], kind="stable"))

    @property
    def sentence(self) -> dict[str, Any] | None:
        """Q1's literal example as export recorded it (meta.json `sentence`: words, perm_words, tokens,
        perm_tokens, and `labels`, the 13 positions' axis labels); None when no Q1 sweep is exported.
        Each run's maps: attention(run_id, "final/sentence") and (run_id, "final/sentence_perm")."""
        return read_meta(self.data).get("sentence")

    def attention(self, run: str | dict[str, Any], which: str = "final/attention") -> np.ndarray | None:
        """(1, H, T, T) first-layer attention weights on a run's first probe example (stored as uint8
        x 255, returned as floats in [0, 1]), or None if not exported; `which="final/sentence"` or
        `"final/sentence_perm"`: (H, 13, 13) on Q1's sentence and its reordering (see `sentence`).
        `run`: a run id, or a `where` mapping ({"model.d_head": 512, ...}): the lowest seed among the
        matching runs that has them (pass a run id of R.at_best_lr's rows for a tuned sweep's choice)."""
        if isinstance(run, dict):
            from .stats import rows

            chosen = rows(self.df, run).sort_values(["seed", "run_id"] if "seed" in self.df else ["run_id"])
            run = next((r for r in chosen["run_id"] if f"{r}/{which}" in self.arrays), "")
        out = self.arrays.get(f"{run}/{which}")
        if out is None:
            return None
        return out.astype(np.float32) / 255 if out.dtype == np.uint8 else out.astype(np.float32)

    def __repr__(self) -> str:
        state = f"{len(self.df)} runs" if self.ready else self.missing
        return f"Sweep({self.name!r}: {state})"


def sweep(name: str, data: Path | str | None = None) -> Sweep:
    return Sweep(name, data)


class Sweeps(Sweep):
    """Several sweeps read as one (`R.sweeps("pos_enc", "pos_enc_causal")`): the same API as a Sweep.

    `df` is the tables stacked (columns in first-seen order, a `sweep` column naming each row's table);
    its swept keys are every part's plus the config keys that differ between the parts (model.causal:
    false in one table, true in the other). Arrays, curves and probe curves are the parts' together.
    `ready` only when every part is there; `missing` then names the missing ones in one line."""

    def __init__(self, names: tuple[str, ...], data: Path | str | None = None):
        if not names:
            raise ValueError("R.sweeps() needs at least one sweep name")
        self.names = tuple(names)
        self.name = "+".join(self.names)
        self.data = Path(data if data is not None else data_dir())
        self.parts = [Sweep(n, self.data) for n in self.names]
        absent = [p for p in self.parts if not p.ready]
        if absent:
            targets = " ".join(make_target(p.name) for p in absent)
            self.df, self.missing = None, f"{NOT_RUN_LINE[0]} `make {targets}`"
        else:
            self.df, self.missing = self._stack(), None

    def _stack(self) -> pd.DataFrame:
        df = pd.concat([p.df for p in self.parts], ignore_index=True, sort=False)
        df = pd.concat([df, pd.Series([p.name for p in self.parts for _ in range(len(p.df))], name="sweep")], axis=1)
        listed = [k for p in self.parts for k in swept_keys(p.df)]
        config = list(dict.fromkeys(k for p in self.parts for k in p.df.attrs.get("config_keys", [])))
        config = [c for c in df.columns if c in config]
        attrs: dict[str, Any] = {
            "name": self.name, "sweeps": list(self.names), "source": [p.df.attrs.get("source") for p in self.parts],
            "config_keys": config,
            "swept_keys": swept(df, config, listed),
        }
        for group in ("metrics", "probes", "params"):
            attrs[group] = list(dict.fromkeys(k for p in self.parts for k in p.df.attrs.get(group, [])))
        for key in ("reference_commit", "tune"):  # kept where the parts agree
            values = [p.df.attrs.get(key) for p in self.parts]
            if all(v == values[0] for v in values) and values[0] is not None:
                attrs[key] = values[0]
        df.attrs = kept(attrs)
        return df

    @property
    def meta(self) -> dict[str, Any]:
        """The parts' meta.json entries as one: what they agree on, runs summed, dtypes together, the
        budgets joined ('quick' or 'quick, smoke'), and each part's own entry under `parts`."""
        metas = [p.meta for p in self.parts]
        keys = dict.fromkeys(k for m in metas for k in m)
        out: dict[str, Any] = {k: metas[0][k] for k in keys if all(k in m and m[k] == metas[0][k] for m in metas)}
        out["runs"] = sum(int(m.get("runs") or 0) for m in metas)
        out["dtypes"] = {k: v for m in metas for k, v in (m.get("dtypes") or {}).items()}
        budgets = dict.fromkeys(b.strip() for m in metas for b in str(m.get("budget", "unknown")).split(","))
        out["budget"] = ", ".join(budgets)
        if self.ready:
            out["swept_keys"] = self.df.attrs["swept_keys"]
        out["parts"] = dict(zip(self.names, metas))
        return out

    @cached_property
    def arrays(self) -> dict[str, np.ndarray]:
        return {k: v for p in self.parts for k, v in p.arrays.items()}

    def _probe_long(self) -> pd.DataFrame | None:
        parts = [long for p in self.parts if (long := p._probe_long()) is not None]
        return pd.concat(parts, ignore_index=True, sort=False) if parts else None

    def __repr__(self) -> str:
        state = f"{len(self.df)} runs" if self.ready else self.missing
        return f"Sweeps({', '.join(map(repr, self.names))}: {state})"


def sweeps(*names: str, data: Path | str | None = None) -> Sweeps:
    """Several sweeps as one Sweep (their tables stacked): `R.sweeps("pos_enc", "pos_enc_causal")`."""
    return Sweeps(names, data)
