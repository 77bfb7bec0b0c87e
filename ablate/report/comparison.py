"""The comparison report of any sweep, the tutorial's or a user's own, offline (`ablate compare NAME`, whose
entry point compare_cli exports the sweep's runs first and calls `write` here on the exported tables).

    ablate compare NAME|sweeps/NAME.yaml [--out DIR] [--baseline key=value,...] [--runs DIR]

From the sweep's run directories it writes DIR (default reports/compare/NAME/): `compare.md` (for a pull
request or a paper appendix), `index.html` (self-contained: figures inline, nothing fetched), `variants.csv`
and `figures/*.png`. What it holds:

- what varies, the budget, the seeds, the code commit, and the runs' status: failed, diverged and missing
  runs named, never dropped in silence;
- per variant (the swept values but the seed; a tuned sweep at each variant's chosen rate, with its stage-1
  table) the sweep's metric and every test metric with bounded 95 % intervals, runs that learned (the
  notebooks' rule, St.above_level, said in one line under the table), steps to solve with unsolved runs
  censored, wall time and parameters; a variant of a tuned sweep whose stage 1 has not finished has no
  chosen rate: its row says "tuning unfinished (k of n stage-1 runs)", with no metric;
- every variant against a baseline (`--baseline`; default: the variant whose swept values agree with
  ablate's defaults on the most swept keys, the first of equals; the report says why) on the sweep's metric
  and on test accuracy: paired by seed where both arms share an evaluation set (no data.* key differs), else
  Welch; Holm across the comparisons of a metric; "not testable" where both arms sit at the same floor (the
  reference level) or both solved the task; an unfinished variant is named as not compared;
- learning curves per variant with the seeds' spread, and the probe scalars that differ most between variants.

Every number comes from the question notebooks' statistics (ablate.report.stats, solve) on the runs exported
as `ablate report export` does: a number quoted in both is the same number. The report is written to a
temporary folder beside DIR and moved into place, so a failure leaves nothing half-written. Bad input (an unknown sweep, a sweep with no finished runs, a baseline that matches no
variant or one whose tuning is unfinished) is CompareError: one line, exit status 2, nothing written.
"""

from __future__ import annotations

import base64
import html
import math
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..fileio import usual_mode
from ..results.stats import same
from . import stats as St
from .data import Sweep
from .solve import paired, time_to_solve

REPORT_FILES = {"compare.md", "index.html", "variants.csv", "figures"}  # what a report folder holds

FINISHED = ("completed", "diverged")
RUNNER_FINISHED = ("completed", "diverged", "stopped")  # a stage-1 run the runner counts as done (ablate.rundir)
TOP_PROBES = 6  # the probe scalars shown: those that differ most between variants


class CompareError(ValueError):
    """Bad input to `ablate compare`: one line naming the problem and the fix."""


@dataclass(frozen=True)
class Variant:
    where: dict[str, Any]  # swept key -> value (the seed and a tuned key excluded)

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={_show(v)}" for k, v in self.where.items()) or "all runs"


@dataclass
class Comparison:
    metric: str
    variant: Variant
    effect: St.Effect
    method: str  # "paired by seed" or "Welch"
    note: str = ""  # "not testable: ..." where the arms cannot differ
    p_holm: float | None = None

    @property
    def verdict(self) -> str:
        if self.note:
            return self.note
        if self.p_holm is None or not math.isfinite(self.effect.p):
            a, b = self.effect.a, self.effect.b
            return (f"no test ({a.n} and {b.n} completed runs; a test needs 2 an arm"
                    f"{', and 2 seeds in common when paired' if self.method == 'paired by seed' else ''})")
        if self.p_holm >= 0.05:
            return "no difference shown"
        return "higher than the baseline" if self.effect.diff > self.effect.null else "lower than the baseline"


@dataclass
class Report:
    name: str
    out: Path
    files: list[Path] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # what `ablate compare` prints


def _show(v: Any) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:g}" if isinstance(v, float) else str(v)


def parse_baseline(text: str | None) -> dict[str, str] | None:
    if not text:
        return None
    out = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise CompareError(f"--baseline {text!r}: expected key=value[,key=value...], e.g. model.pos_enc=none")
        out[key.strip()] = value.strip()
    return out


# ------------------------------------------------------------------ the data


def _finished_runs(where: Path) -> list[str]:
    return sorted(p.name for p in where.iterdir() if (p / "summary.json").is_file()) if where.is_dir() else []


def variant_keys(S: Sweep) -> tuple[list[str], str | None]:
    """The keys that make a variant (the swept keys but the seed and a tuned key), and the tuned key."""
    tune = S.meta.get("tune") or {}
    tuned = tune.get("key") if tune.get("key") and f"tuned.{tune['key']}" in S.df.columns else None
    swept = S.meta.get("swept_keys") or S.keys()
    return [k for k in swept if k not in ("seed", tuned) and k in S.df.columns], tuned


def variants_of(df: pd.DataFrame, keys: Sequence[str]) -> list[Variant]:
    if not keys:
        return [Variant({})]
    combos = df[list(keys)].drop_duplicates()
    return [Variant({k: (None if _missing(row[k]) else row[k]) for k in keys}) for _, row in combos.iterrows()]


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


@dataclass(frozen=True)
class Unfinished:
    """A variant of a tuned sweep whose stage 1 has not finished: no rate chosen, so nothing to show or test."""

    variant: Variant
    done: int  # its stage-1 runs that have finished (completed, diverged or stopped)
    total: int  # the stage-1 runs it needs: every value tried on every tune seed

    @property
    def note(self) -> str:
        return f"tuning unfinished ({self.done} of {self.total} stage-1 runs)"


def choose_baseline(variants: list[Variant], asked: dict[str, str] | None, defaults: Mapping[str, Any],
                    unfinished: Sequence[Unfinished] = ()) -> tuple[Variant, str]:
    """The variant every other is compared with, and why it was chosen (for the report's line). `asked`
    (--baseline) must match exactly one variant, and not one whose tuning is unfinished. By default: the
    variant whose swept values agree with ablate's defaults (`defaults`: the config's, `ablate keys`) on the
    most swept keys, ties to the first in the report's order; `variants` are the finished ones only."""
    if asked:
        every = [*variants, *(u.variant for u in unfinished)]
        unknown = [k for k in asked if every and k not in every[0].where]
        if unknown:
            raise CompareError(f"--baseline names {unknown[0]}, which the sweep does not vary; its variants vary "
                               f"{', '.join(every[0].where) or 'nothing'}")
        hits = [v for v in every if all(same(v.where[k], value) for k, value in asked.items())]
        if not hits:
            raise CompareError(f"--baseline {','.join(f'{k}={v}' for k, v in asked.items())} matches no variant; "
                               f"the variants are: {'; '.join(v.label for v in every)}")
        if len(hits) > 1:
            raise CompareError(f"--baseline matches {len(hits)} variants ({'; '.join(v.label for v in hits)}); "
                               "name a value for every key that varies")
        pending = [u for u in unfinished if u.variant == hits[0]]
        if pending:
            raise CompareError(f"--baseline {hits[0].label}: its {pending[0].note}, so it has no chosen rate to "
                               "compare at; choose another variant or finish the sweep")
        return hits[0], "chosen by --baseline"
    if not variants[0].where:
        return variants[0], "the only variant"

    def agree(v: Variant) -> list[str]:
        return [k for k, value in v.where.items() if k in defaults and same(value, defaults[k])]

    best = max(variants, key=lambda v: len(agree(v)))  # max keeps the first of equals
    keys, n = agree(best), len(best.where)
    if not keys:
        return best, "no variant sits at ablate's defaults on any swept key: the first; --baseline to choose"
    on = "every swept key" if len(keys) == n else f"{len(keys)} of {n} swept keys: {', '.join(keys)}"
    return best, f"ablate's default on {on}; --baseline to choose"


def unfinished_tuning(df: pd.DataFrame, meta: Mapping[str, Any], keys: Sequence[str], tuned: str) -> list[Unfinished]:
    """The variants of a tuned sweep whose stage 1 has not finished (their `tuned.<key>` is empty: the results
    table's rule, ablate.results.table.tuned_choices), with how many of their stage-1 runs have finished: every
    value tried (meta's tune values) on every tune seed (meta's, else the seeds of the table's stage-1 rows: a
    tune seed none of whose runs has a row yet still counts)."""
    column = f"tuned.{tuned}"
    pending = df[df[column].isna()]
    if pending.empty:
        return []
    tune = meta.get("tune") or {}
    stage1 = pd.to_numeric(df["stage"], errors="coerce") == 1
    seeds = {int(s) for s in tune.get("seeds") or df.loc[stage1, "seed"].dropna()}
    values = list(tune.get("values") or df[tuned].dropna().unique())
    out = []
    for v in variants_of(pending, keys):
        mine = St.rows(pending, v.where) if v.where else pending
        mine = mine[stage1[mine.index] & mine["status"].isin(RUNNER_FINISHED)]
        done = {(i, int(seed)) for x, seed in zip(mine[tuned], mine["seed"]) for i, value in enumerate(values)
                if same(x, value) and int(seed) in seeds}
        out.append(Unfinished(v, len(done), len(values) * len(seeds)))
    return out


# ------------------------------------------------------------------ the statistics


def _n_eval_shared(a: Variant, b: Variant) -> bool:
    """Both arms are scored on one evaluation set: no data.* setting differs between them."""
    return all(same(a.where[k], b.where[k]) for k in a.where if k.startswith("data."))


def _not_testable(df: pd.DataFrame, metric: str, a: Variant, b: Variant, ea: St.Estimate, eb: St.Estimate) -> str:
    if not (St.is_percent(metric) and ea.n and eb.n):
        return ""
    if min(ea.mean, eb.mean) >= St.SOLVED:
        return f"not testable: both solved the task (≥ {100 * St.SOLVED:g} %)"
    split = metric.split("/", 1)[0]
    level = max(St.level(df, a.where, split), St.level(df, b.where, split))
    if math.isfinite(level) and max(ea.mean, eb.mean) <= level + St.LEVEL_MARGIN:
        return f"not testable: both at the reference level ({100 * level:.1f} %), neither learned"
    return ""


def compare_all(df: pd.DataFrame, metric: str, variants: list[Variant], base: Variant) -> list[Comparison]:
    out = []
    for v in variants:
        if v == base:
            continue
        ea, eb = St.estimate(df, metric, v.where), St.estimate(df, metric, base.where)
        eff = paired(df, metric, v.where, base.where) if _n_eval_shared(v, base) else St.effect(ea, eb)
        method = "paired by seed" if eff.method == "paired" else "Welch"
        out.append(Comparison(metric, v, eff, method, _not_testable(df, metric, v, base, ea, eb)))
    adjusted = St.holm([c.effect.p if not c.note else None for c in out])
    for c, p in zip(out, adjusted):
        c.p_holm = p
    return out


def test_metrics(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c.startswith("test/") and pd.to_numeric(df[c], errors="coerce").notna().any()]


LEARNED = "learned (above reference level)"  # the column; St.learned_rule says the rule under the table


def variant_rows(df: pd.DataFrame, variants: list[Variant], metric: str, tests: list[str],
                 unfinished: Sequence[Unfinished] = (), tuned: str | None = None) -> pd.DataFrame:
    """One row per variant: its runs, the sweep's metric and each test metric (mean and interval), runs that
    learned (St.learned: the notebooks' rule), steps to solve (median, solved of all), wall time, parameters.
    A tuned sweep: each variant's chosen value, then a row per unfinished variant saying so, with no metric."""
    rows = []
    for v in variants:
        chosen = St.rows(df, v.where) if v.where else df
        row: dict[str, Any] = {k: _show(x) for k, x in v.where.items()}
        if tuned:
            row[f"chosen {tuned}"] = _show(chosen[f"tuned.{tuned}"].dropna().iloc[0]) \
                if chosen[f"tuned.{tuned}"].notna().any() else ""
        row["runs"] = int(chosen["status"].isin(FINISHED).sum())
        for m in [metric, *[t for t in tests if t != metric]]:
            e = St.estimate(df, m, v.where)
            row[m], row[f"{m} lo"], row[f"{m} hi"], row[f"{m} (95 % CI)"] = e.mean, e.lo, e.hi, e.fmt()
        if "val/acc_best" in df.columns and any(c.startswith("ref/val/") for c in df.columns):
            try:
                row[LEARNED] = St.learned(df, v.where).fmt()
            except ValueError:
                row[LEARNED] = ""
        if "val/step_solved" in df.columns and "global_step" in df.columns:
            solve = time_to_solve(df, v.where)
            row["steps to solve"] = solve.fmt()
        if "wall_time_s" in df.columns:
            row["wall time (s, median)"] = float(pd.to_numeric(chosen["wall_time_s"], errors="coerce").median())
        if "params/total" in df.columns:
            row["parameters"] = int(pd.to_numeric(chosen["params/total"], errors="coerce").median())
        rows.append(row)
    for u in unfinished:  # no rate chosen: nothing measured at one yet
        rows.append({**{k: _show(x) for k, x in u.variant.where.items()}, f"chosen {tuned}": u.note})
    out = pd.DataFrame(rows)
    for count in ("runs", "parameters"):  # counts stay whole beside an unfinished variant's empty cell
        if count in out.columns:
            out[count] = out[count].astype("Int64")
    return out


def probe_spread(df: pd.DataFrame, variants: list[Variant], top: int = TOP_PROBES) -> pd.DataFrame:
    """The probe scalars (probe/init/*, probe/final/*) that differ most between variants: the range of the
    variant means over the pooled within-variant standard deviation, largest first, with each variant's mean."""
    if len(variants) < 2:
        return pd.DataFrame()
    scores = []
    for col in (c for c in df.columns if c.startswith("probe/")):
        values = pd.to_numeric(df[col], errors="coerce")
        if values.notna().sum() < 2:
            continue
        groups = [values[St.rows(df, v.where).index].dropna() for v in variants]
        means = [g.mean() for g in groups if len(g)]
        if len(means) < 2:
            continue
        within = float(np.sqrt(np.nanmean([g.var(ddof=1) for g in groups if len(g) > 1]))) \
            if any(len(g) > 1 for g in groups) else math.nan
        if not math.isfinite(within) or within <= 1e-9 * max(1.0, abs(float(np.mean(means)))):
            continue  # the same in every run of a variant: arithmetic of the configuration, not a measurement
        spread = (max(means) - min(means)) / within
        scores.append((spread, col, [g.mean() if len(g) else math.nan for g in groups]))
    scores.sort(key=lambda s: (-s[0], s[1]))
    return pd.DataFrame([{"probe": col, "spread (range / within-variant sd)": s,
                          **{v.label: m for v, m in zip(variants, means)}} for s, col, means in scores[:top]])


# ------------------------------------------------------------------ the figures


def _figures(S: Sweep, df: pd.DataFrame, variants: list[Variant], metric: str, tests: list[str],
             folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    from .figures import DPI, setup

    setup()
    folder.mkdir(parents=True, exist_ok=True)
    label = {}
    for v in variants:
        for run in (St.rows(df, v.where) if v.where else df)["run_id"]:
            label[run] = v.label
    order = [v.label for v in variants]
    saved = []
    shown = [m for m in [metric, *tests[:1]] if m in df.columns]
    fig, axes = plt.subplots(1, len(shown), figsize=(6 * len(shown), 0.5 * len(variants) + 2.2), squeeze=False,
                             layout="constrained")
    for ax, m in zip(axes[0], shown):
        runs = df[(df["status"] == "completed") & df["run_id"].isin(label)].assign(variant=lambda d: d["run_id"].map(label))
        sns.pointplot(runs, x=m, y="variant", order=order, errorbar=St.errorbar, linestyle="none", ax=ax)
        sns.stripplot(runs, x=m, y="variant", order=order, color="grey", size=3, alpha=0.6, ax=ax)
        ax.set(title=m, ylabel="")
    fig.suptitle("each variant's mean with its seeds' 95 % bootstrap interval; dots: its completed runs")
    saved.append(_save(fig, folder / "metrics.png", DPI))
    curves = S.curves("val/acc") if "val/acc" in df.columns else pd.DataFrame()
    if len(curves):
        curves = curves[curves["run_id"].isin(label)].assign(variant=lambda d: d["run_id"].map(label))
        fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
        sns.lineplot(curves, x="step", y="val/acc", hue="variant", hue_order=order, errorbar=("pi", 100), ax=ax)
        ax.set(title="validation accuracy during training (mean over seeds; band: every seed)",
               xlabel="optimiser step", ylabel="validation accuracy")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0, fontsize="small")
        saved.append(_save(fig, folder / "curves.png", DPI))
    plt.close("all")
    return saved


def _save(fig, path: Path, dpi: int) -> Path:
    fig.savefig(path, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    return path


# ------------------------------------------------------------------ the report


def _md_table(df: pd.DataFrame) -> list[str]:
    if df.empty:
        return []
    cells = [[_cell(x) for x in row] for row in df.itertuples(index=False)]
    return ["| " + " | ".join(map(str, df.columns)) + " |", "| " + " | ".join("---" for _ in df.columns) + " |",
            *("| " + " | ".join(r) + " |" for r in cells)]


def _cell(x: Any) -> str:
    if x is pd.NA:
        return ""
    if isinstance(x, float):
        return "" if not math.isfinite(x) else (f"{x:.4g}" if abs(x) < 1e5 else f"{x:,.0f}")
    return str(x).replace("|", "\\|")


def _status_lines(S: Sweep, states: Mapping[str, tuple[str, str]], missing: list[str], said: list[str]) -> list[str]:
    df = S.df
    counts: dict[str, int] = {}
    for status, _ in states.values():
        counts[status] = counts.get(status, 0) + 1
    lines = [f"- runs: {len(states)} ({', '.join(f'{n} {s}' for s, n in sorted(counts.items()))}); "
             f"{len(df)} in the tables below"]
    exported = set(df["run_id"])
    for run, (status, error) in sorted(states.items()):
        if status != "completed" or run not in exported:
            why = f": `{error.replace('`', chr(39))}`" if error else ""
            left = "" if run in exported else " (left out: its files cannot be read)" if status == "completed" else ""
            lines.append(f"- {status}: `{run}`{why}{left}")
    lines += [f"- missing: {m}" for m in missing]
    lines += [f"- export: {s}" for s in said if "left out" in s or "cannot" in s]
    return lines


def _stage1(S: Sweep, keys: list[str], tuned: str) -> pd.DataFrame:
    df, tune = S.df, S.meta.get("tune") or {}
    metric = tune.get("metric", "val/acc_best")
    if "stage" not in df.columns or metric not in df.columns:
        return pd.DataFrame()
    first = df[pd.to_numeric(df["stage"], errors="coerce") == 1]
    if first.empty:
        return pd.DataFrame()
    table = first.pivot_table(index=keys or None, columns=tuned, values=metric, aggfunc="mean") if keys else \
        first.groupby(tuned)[metric].mean().to_frame().T
    table = table.reset_index() if keys else table
    table.columns = [(_show(c) if not isinstance(c, str) else c) for c in table.columns]
    chosen = df.groupby(keys)[f"tuned.{tuned}"].first().reset_index() if keys else None
    if chosen is not None:
        table = table.merge(chosen.rename(columns={f"tuned.{tuned}": f"chosen {tuned}"}), on=keys, how="left")
        table[f"chosen {tuned}"] = [_show(x) if not _missing(x) else "unfinished" for x in table[f"chosen {tuned}"]]
    return table


def _comparison_table(comparisons: list[Comparison], base: Variant) -> pd.DataFrame:
    return pd.DataFrame([{"variant": c.variant.label, f"− baseline ({c.metric})": c.effect.fmt(), "test": c.method,
                          "p (Holm)": _p(c.p_holm), "verdict": c.verdict} for c in comparisons])


def _p(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def write(S: Sweep, out: Path, metric: str, goal: str, baseline: str | None, states: Mapping[str, tuple[str, str]],
          missing: Sequence[str], said: Sequence[str], log: Callable[[str], None] = print,
          source: str = "the sweep's run folders") -> Report:
    """The comparison report of the exported sweep `S` into `out` (see the module); `states`: each run folder's
    status and error (`states`), `missing`: the runs the sweep file defines that are not there, `said`: the
    export's own lines. Checks the baseline before writing anything."""
    asked = parse_baseline(baseline)
    df, meta, name = S.df, S.meta, S.name
    keys, tuned = variant_keys(S)
    unfinished = unfinished_tuning(df, meta, keys, tuned) if tuned else []
    runs_df = df if not tuned else _at_chosen(df[df[f"tuned.{tuned}"].notna()], meta)
    variants = variants_of(runs_df[runs_df["status"].isin(FINISHED)], keys)
    if not variants:
        raise CompareError(f"no variant of sweep {name} has finished its tuning ("
                           f"{'; '.join(f'{u.variant.label}: {u.note}' for u in unfinished)}); finish the sweep's "
                           "stage 1 first")
    base, why = choose_baseline(variants, asked, meta.get("config_defaults") or {}, unfinished)
    tests = test_metrics(runs_df)
    table = variant_rows(runs_df, variants, metric, tests, unfinished, tuned)
    families = [m for m in dict.fromkeys([metric, "test/acc"]) if m in runs_df.columns]
    comparisons = {m: compare_all(runs_df, m, variants, base) for m in families}
    probes = probe_spread(runs_df, variants)
    stage1 = _stage1(S, keys, tuned) if tuned else pd.DataFrame()
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=_parent(out)))
    try:
        staging.chmod(usual_mode(0o777))  # mkdtemp's 0700 -> what mkdir gives: the report is to be shared and served
        figures = _figures(S, runs_df, variants, metric, tests, staging / "figures")
        md = _markdown(name, S, keys, tuned, metric, goal, (base, why), table, comparisons, probes, stage1,
                       _status_lines(S, states, list(missing), list(said)), figures, staging, source, unfinished)
        (staging / "compare.md").write_text(md)
        (staging / "index.html").write_text(_html(name, md, figures))
        table.to_csv(staging / "variants.csv", index=False)
        old = None
        if out.exists():  # an earlier report (compare_cli.check_out refused anything else): moved aside first
            old = out.with_name(f".{out.name}-old-{staging.name[-8:]}")
            out.rename(old)
        staging.rename(out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    report = Report(name, out, sorted(p for p in out.rglob("*") if p.is_file()))
    waiting = f" (and {len(unfinished)} with tuning unfinished, not compared)" if unfinished else ""
    report.lines = [f"ablate compare: {name}: {len(variants)} variants{waiting}, {len(df)} runs, baseline {base.label} "
                    f"({why}) -> {out}"]
    for line in report.lines:
        log(line)
    return report


def _parent(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    return out.parent


def _at_chosen(df: pd.DataFrame, meta: Mapping[str, Any]) -> pd.DataFrame:
    """Each variant's runs at its chosen rate (the runner's choice in `tuned.<key>`; `df` holds only variants
    whose stage 1 has finished: an unfinished one has no choice to be shown at, see `unfinished_tuning`)."""
    from ..results.stats import best_lr

    tune = meta.get("tune") or {}
    out = best_lr(df, metric=tune.get("metric", "val/acc_best"), lr_key=tune["key"],
                  maximize=tune.get("goal", "maximize") != "minimize")
    out.attrs = dict(df.attrs)
    return out


def _markdown(name, S, keys, tuned, metric, goal, chosen, table, comparisons, probes, stage1, status, figures,
              where: Path, source: str = "the sweep's run folders", unfinished: Sequence[Unfinished] = ()) -> str:
    meta = S.meta
    base, why = chosen
    seeds = sorted({int(s) for s in S.df["seed"].dropna()}) if "seed" in S.df.columns else []
    lines = [f"# Comparison: sweep `{name}`", "",
             f"Generated by `ablate compare` from {source}; every interval is a 95 % interval over "
             "seeds (accuracies: a bootstrap over seeds and evaluation examples, bounded to 0–100 %).", "",
             "## What was run", "",
             f"- varies: {', '.join(f'`{k}`' for k in keys) or 'nothing but the seed'}"
             + (f"; `{tuned}` tuned per variant on `{(meta.get('tune') or {}).get('metric')}` "
                "(each variant at its chosen value)" if tuned else ""),
             f"- budget: {meta.get('budget', '?')}; seeds: {', '.join(map(str, seeds)) or '?'}; "
             f"code commit: `{str(meta.get('commit') or '?')[:12]}`{' (uncommitted changes)' if meta.get('dirty') else ''}",
             f"- machine: {meta.get('machine') or 'unknown'}; wall time: "
             + (f"{meta['wall_s']} s" if isinstance(meta.get("wall_s"), int) else "unknown"),
             f"- the sweep's metric: `{metric}` ({goal}); baseline: **{base.label}** "
             f"({why.replace('--baseline', '`--baseline`')})",
             *(f"- {u.note}: {u.variant.label}; shown without metrics and not compared (no rate chosen yet)"
               for u in unfinished),
             *status, ""]
    raw = {c[: -len(" (95 % CI)")] for c in table.columns if c.endswith(" (95 % CI)")}  # shown by their CI twins
    shown = table[[c for c in table.columns if c not in raw and not c.endswith((" lo", " hi"))]]
    lines += ["## Per variant", "", *_md_table(shown), ""]
    if LEARNED in table.columns:
        lines += [f"{St.learned_rule('val/acc_best').replace('learned:', f'*{LEARNED}*:', 1)}.", ""]
    if not stage1.empty:
        lines += [f"## Stage 1: `{(meta.get('tune') or {}).get('metric')}` per `{tuned}`", "", *_md_table(stage1), ""]
    left_out = "; ".join(f"{u.variant.label}, {u.note}" for u in unfinished)
    for m, cs in comparisons.items():
        if cs or unfinished:
            lines += [f"## Against the baseline: `{m}`", "",
                      "Holm's adjustment across the comparisons below: \"higher\" or \"lower than the baseline\" where "
                      "p (Holm) < 0.05; \"not testable\" where both arms sit at the reference level or both solved the "
                      "task.", "", *_md_table(_comparison_table(cs, base)), ""]
            if unfinished:
                lines += [f"Not compared (no rate chosen yet): {left_out}.", ""]
    if not probes.empty:
        lines += ["## The probe scalars that differ most between variants", "", *_md_table(probes), ""]
    lines += [f"![{p.stem}]({p.relative_to(where).as_posix()})" for p in figures]
    return "\n".join(lines).rstrip() + "\n"


def _html(name: str, md: str, figures: Sequence[Path]) -> str:
    import mistune

    body = mistune.html(md)
    for p in figures:
        data = base64.b64encode(p.read_bytes()).decode()
        body = body.replace(f'src="{html.escape("figures/" + p.name)}"', f'src="data:image/png;base64,{data}"')
    style = ("body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;line-height:1.45}"
             "table{border-collapse:collapse;font-size:.85rem}td,th{border:1px solid #ccc;padding:.15rem .4rem}"
             "img{max-width:100%}code{background:#f4f4f4}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>ablate compare — {html.escape(name)}"
            f"</title><style>{style}</style></head><body>\n{body}</body></html>\n")
