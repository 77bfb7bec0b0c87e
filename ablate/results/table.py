"""One row per run: run directories (or W&B runs) -> a pandas DataFrame with a stable column order.

    run_id              the run's id (its folder name; its W&B run id)
    <config keys>       every key of config.yaml, flattened as `ablate train` spells it
                        (model.n_heads, ..., run.group, pooling, budget, tracking), then `seed`
    tuned.<key>, stage  only for a tuned sweep (a `tune KEY on seeds ...` line in its sweep file, see
                        ablate.sweep.tune): the value of KEY chosen for the row's variant (empty until
                        all its stage-1 runs are finished: the runner's choice, by the same rule),
                        and 1 for a row on a tune seed, 2 for the others
    status              completed | diverged | failed | running (as summary.json says), or corrupt:
                        summary.json, config.yaml, probes.json or metrics.csv cannot be read
                        (truncated, binary garbage, empty; see runfiles.py), config.yaml holds a
                        key ablate train does not know, or a completed run has NaN or inf in its
                        summary metrics or metrics.csv. The row keeps what
                        could be read (its config when config.yaml is readable) and `error` says
                        which file and what is wrong; statistics leave it out.
    <metrics>           final metrics under their logged names: test/*, val/*, train/*, then any other
                        (ref/*: the task's reference levels); from metrics.csv also
                        val/gain_last_epoch (what the last epoch added to validation accuracy) and
                        val/step_solved (the first step at >= 99 % validation accuracy), and from the
                        config eval/n_val, eval/n_test (the examples each evaluation split holds:
                        sequences or images; the task registry's eval_examples)
    <probes>            probe scalars: probe/init/*, probe/final/*, then any other point
    params/*            attention, ffn, recurrent, embedding, other, total: recurrent (the LSTM/GRU
                        layers of model.arch=lstm/gru) only when a run of the table has it; a model
                        without a part shows 0 for it (a Transformer's recurrent, an RNN's attention
                        and ffn), not empty: it has no such parameters
    wall_time_s, train_samples_per_s, global_step, attempts, diverged_step
    stopped_epoch       the epoch early termination stopped a run at (status `stopped`; ablate.sweep.hyperband):
                        only in a table that has such a run
    commit, dirty       provenance of the run (git HEAD and whether tracked files were modified)
    commit_mismatch     True where `commit` is known and differs from the reference commit: the most
                        common one among completed runs (ties: the one with more rows, then by name)
    error               last line of the traceback of a failed run; a corrupt run's problems
    run_dir             where the run's files are (probes.npz, metrics.csv); empty for W&B rows

Which config keys are *swept* (`swept_keys(df)`): those whose value differs between runs
(bookkeeping keys such as run.dir or trainer.threads excepted; corrupt rows not counted), and
those listed with more than one value in sweeps/<name>.yaml when that file exists. A key that
budget profiles set (ablate.budgets: trainer.max_epochs, data.train_subset, ...) differs between
the tasks of a sweep because of the profile; it counts only when it differs between runs of the
same budget, task and sweep. `df.attrs` holds the sweep name, the source
and the column groups, so notebooks can ask for them (and `tune`: key, values, seeds, metric, goal).

Rows are sorted by the swept keys, then seed, then run_id.
"""

from __future__ import annotations

import dataclasses
import io
import re
import shutil
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..config import SECTIONS, all_keys, flatten_overrides, with_added_keys
from ..csvcells import safe_frame
from ..fileio import atomic_write
from ..rundir import CONFIG, METRICS, SUMMARY, runs_root
from ..runfiles import (
    RunFileError,
    nonfinite_cell,
    nonfinite_metric,
    read_config_mapping,
    read_json_object,
    read_metrics_rows,
)
from ..sweep.tune import Tune, TuneError, parse_tune, score, stage1_seeds
from ..sweep.tune import choose as choose_value
from ..yamlfile import YamlFileError, read_yaml
from .stats import CORRUPT, METRIC, ResultsError, kept, same, swept_keys  # noqa: F401 - the table's rules, import-clean
from .stats import swept as swept_of

PARAMS = ("attention", "ffn", "recurrent", "embedding", "other", "total")
# Parts a model may lack (ablate.models.parameter_groups): a row with counts shows 0 for them. Recurrent is
# a column only where some run has it (a sweep of Transformers keeps the columns it always had).
PARTS = ("attention", "ffn", "recurrent")
OPTIONAL_PARAMS = ("recurrent",)
BOOKKEEPING = (
    "wall_time_s",
    "train_samples_per_s",
    "global_step",
    "attempts",
    "diverged_step",
    "commit",
    "dirty",
    "commit_mismatch",
    "error",
    "run_dir",
)
MAIN_METRICS = ("val/acc_best",)  # shown by the CLI next to every test/* metric
PROBES = "probes.json"


@dataclass
class RunRecord:
    """One run, whatever its source, before it becomes a row."""

    run_id: str
    config: dict[str, Any]  # flat dotted keys, in config.yaml's order
    status: str
    metrics: dict[str, float] = field(default_factory=dict)
    probes: dict[str, float] = field(default_factory=dict)
    params: dict[str, float] = field(default_factory=dict)
    bookkeeping: dict[str, Any] = field(default_factory=dict)  # any of BOOKKEEPING


def natural_key(name: str) -> tuple:
    """'entropy_l10' after 'entropy_l2'."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def last_line(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else None


def _problem(err: RunFileError) -> str:
    return f"{err.file} {err.problem}"


SOLVED = 0.99  # a task counts as solved at this validation accuracy (issue 13: >= 99 % token accuracy)


def convergence(rows: list[dict[str, str]]) -> dict[str, float]:
    """From the validation accuracy of each epoch (metrics.csv): `val/gain_last_epoch`, what the last
    epoch added (a run has converged or plateaued when that is small), and `val/step_solved`, the
    first step whose validation accuracy reached SOLVED (absent if none did: never solved)."""
    history = [(float(r["step"]), float(r["val/acc"])) for r in rows if r.get("val/acc")]
    out: dict[str, float] = {}
    if len(history) >= 2:
        out["val/gain_last_epoch"] = history[-1][1] - history[-2][1]
    solved = [step for step, acc in history if acc >= SOLVED]
    if solved:
        out["val/step_solved"] = solved[0]
    return out


EVAL = "eval/n_"  # eval/n_val, eval/n_test: the number of examples each evaluation split holds


def eval_sizes(config: dict[str, Any]) -> dict[str, int]:
    """{"eval/n_val": n, "eval/n_test": n} of a run's flat config: the examples (sequences, images) its
    validation and test sets hold, from its task's registry entry (a key the config file lacks takes
    its default); {} when the config cannot say (no or an unknown task: a corrupt run's)."""
    from types import SimpleNamespace

    from ..config import DataConfig
    from ..registry import TASKS

    task = config.get("data.task")
    if task not in TASKS:
        return {}
    data = {f.name: None if f.default is dataclasses.MISSING else f.default for f in dataclasses.fields(DataConfig)}
    data.update({k.split(".", 1)[1]: v for k, v in config.items() if k.startswith("data.")})
    try:
        sizes = TASKS[task].eval_examples(SimpleNamespace(**data))
    except (TypeError, ValueError, AttributeError):
        return {}
    return {f"{EVAL}{split}": int(n) for split, n in sizes.items() if isinstance(n, int) and not isinstance(n, bool)}


KNOWN_KEYS = frozenset(all_keys())


def config_keys_problem(config: dict[str, Any]) -> str | None:
    """Why a run's flat config is not one `ablate train` wrote: a key it does not know (a section, a
    key of a section), or a mapping or list where a value belongs; None when it is fine."""
    plugged = bool(config.get("plugins"))  # a plug-in's section: its keys are its own (read without importing it)
    for key, value in config.items():
        if key not in KNOWN_KEYS and not (plugged and "." in key and key.split(".", 1)[0] not in SECTIONS):
            return f"has {key}, not a key of ablate train"
        if isinstance(value, (dict, list)):
            return f"has {key} = {value!r}, not a single value"
    return None


def read_run(run_dir: Path) -> RunRecord | None:
    """A run directory -> RunRecord; None when it holds no summary.json (not started). A run whose
    summary.json, config.yaml, probes.json or metrics.csv cannot be read is a record with status
    `corrupt` (its config when config.yaml is readable, the problems in `error`), never an exception."""
    problems: list[str] = []

    def attempt(reader, path: Path):
        try:
            return reader(path)
        except RunFileError as err:
            problems.append(_problem(err))
            return None

    summary = attempt(read_json_object, run_dir / SUMMARY)
    if summary is None and not problems:
        return None  # no summary.json: not started
    raw_config = attempt(read_config_mapping, run_dir / CONFIG)
    if raw_config is None and not any(p.startswith(CONFIG) for p in problems):
        problems.append(f"{CONFIG} is missing")
    probes_file = attempt(read_json_object, run_dir / PROBES) or {}
    logged = attempt(read_metrics_rows, run_dir / METRICS)  # curves are read by the report export
    summary = summary or {}
    if logged is not None and summary.get("status") == "completed":  # cut at a line end: rows are missing
        have = {k for row in logged for k, v in row.items() if v}
        lost = [k for k in (summary.get("metrics") or {}) if k.startswith("test/") and k not in have]
        if lost:
            problems.append(f"{METRICS} has no {lost[0]} though summary.json says completed (truncated?)")
        if (bad := nonfinite_cell(logged)) is not None:
            problems.append(f"{METRICS} {bad}")
    if summary.get("status") == "completed" and (bad := nonfinite_metric(summary.get("metrics"))) is not None:
        problems.append(f"{SUMMARY} {bad}")
    provenance = summary.get("provenance") if isinstance(summary.get("provenance"), dict) else {}
    # a run that failed early has no probes in its summary; probes.json holds the init ones
    probes = summary.get("probes") if isinstance(summary.get("probes"), dict) else probes_file
    try:  # {'model.n_heads': 4, ..., 'seed': 0}, with the keys added since the run at their defaults
        config = with_added_keys(flatten_overrides(raw_config, load=False)) if raw_config else {}
    except ValueError as err:  # a config.yaml giving a key both nested and dotted
        problems.append(f"{CONFIG} {err}")
        config = {}
    if (bad := config_keys_problem(config)) is not None:
        problems.append(f"{CONFIG} {bad}")
        config = {k: v for k, v in config.items() if k in KNOWN_KEYS and not isinstance(v, (dict, list))}

    def mapping(key: str) -> dict:
        value = summary.get(key)
        return dict(value) if isinstance(value, dict) else {}

    return RunRecord(
        run_id=str(summary.get("run_id") or run_dir.name),
        config=config,
        status=CORRUPT if problems else str(summary.get("status", "unknown")),
        metrics={**mapping("metrics"), **convergence(logged or []), **eval_sizes(config)},
        probes={k: v for k, v in probes.items() if isinstance(v, (int, float))},
        params=mapping("params"),
        bookkeeping={
            **{k: summary.get(k) for k in ("wall_time_s", "train_samples_per_s", "global_step", "attempts", "diverged_step")},
            **({"stopped_epoch": summary["early_terminate"].get("band")}
               if isinstance(summary.get("early_terminate"), dict) else {}),
            "commit": provenance.get("commit"),
            "dirty": provenance.get("dirty"),
            "error": "; also ".join(problems) if problems else last_line(summary.get("error")),
            "run_dir": str(run_dir),
        },
    )


def sweep_dir(name: str, root: Path | str | None = None) -> Path:
    """root/name, the folder of sweep `name` (root: $ABLATE_RUNS_DIR, default ./runs). A name that is not
    one folder of root (empty, `.`, `..`, a path: `../x`, `/abs`) is refused (ResultsError): the table
    reads only the runs folder."""
    root = Path(root if root is not None else runs_root())
    if not name or name in (".", "..") or any(c in name for c in "/\\\0"):
        raise ResultsError(f"{name!r} is not a sweep name; give a sweep's name (a folder of the runs folder "
                           f"{root}) or its file sweeps/NAME.yaml")
    return root / name


def sweep_arg(text: str) -> tuple[str, Path]:
    """The sweep `ablate results TEXT` names: (its name, the folder of its sweep file). NAME is itself,
    with sweeps/NAME.yaml; a path to a sweep file is its stem (as `ablate sweep` names it), with the file's
    folder. A name that leaves the runs folder is refused (sweep_dir)."""
    if text.endswith((".yaml", ".yml")):
        try:
            there = Path(text).is_file()
        except OSError as err:  # a name longer than the file system allows: no such file can exist
            raise ResultsError(f"no sweep file {text!r} ({err.strerror}); give a shorter name") from None
        if not there:
            raise ResultsError(f"no sweep file {text!r}; give a sweep's name or the path of its .yaml file")
        name, sweeps = Path(text).stem, Path(text).parent
    else:
        name, sweeps = text, Path("sweeps")
    sweep_dir(name)  # one folder of the runs folder, W&B's group too (its sweep file is sweeps/<name>.yaml)
    return name, sweeps


def no_runs(where: str, name: str) -> ResultsError:
    return ResultsError(f"no runs under {where}; run `make sweep-{name}` (or ablate sweep sweeps/{name}.yaml) first")


def load(
    name: str, root: Path | str | None = None, sweeps: Path | str = "sweeps", only: Collection[str] | None = None
) -> pd.DataFrame:
    """The table of sweep `name`: one row per folder of root/name holding a summary.json
    (root: $ABLATE_RUNS_DIR, default ./runs). `sweeps`: where <name>.yaml may list swept keys.
    `only`: keep these run ids only (swept keys and the reference commit are computed on them)."""
    where = sweep_dir(name, root)
    records: list = []
    copies: list[str] = []
    if where.is_dir():
        for run_dir in sorted(p for p in where.iterdir() if p.is_dir()):
            if only is not None and run_dir.name not in only:
                continue
            record = read_run(run_dir)
            if record is not None:
                records.append((run_dir.name, record))
        # Two folders holding one run (`cp -r <id> <id>.bak`): the one named as the runner names it is the run,
        # the other a copy, not another seed
        named = {record.run_id for folder, record in records if folder == record.run_id}
        seen: set[str] = set()
        for folder, record in records:
            if record.run_id in seen or (record.run_id in named and folder != record.run_id):
                copies.append(folder)
            else:
                seen.add(record.run_id)
        records = [record for folder, record in records if folder not in copies]
    if not records:
        raise no_runs(str(where), name)
    df = from_records(records, name=name, source=str(where), sweep_file=Path(sweeps) / f"{name}.yaml")
    df.attrs["copies"] = copies
    return df


# ------------------------------------------------------------------ records -> DataFrame


def _union(groups) -> list[str]:
    seen: dict[str, None] = {}
    for keys in groups:
        seen.update(dict.fromkeys(keys))
    return list(seen)


def config_columns(records: list[RunRecord]) -> list[str]:
    """Config keys section by section (config.yaml's order within a section), seed last."""
    keys = _union(r.config for r in records)
    first_seen = {k: i for i, k in enumerate(keys)}

    def rank(key: str) -> tuple:
        section = key.split(".", 1)[0] if "." in key else None
        group = list(SECTIONS).index(section) if section in SECTIONS else len(SECTIONS)
        return (key == "seed", group, first_seen[key])

    return sorted(keys, key=rank)


def metric_columns(names) -> list[str]:
    def rank(name: str) -> tuple:
        m = METRIC.match(name)
        return (("test", "val", "train").index(m.group(1)) if m else 3, natural_key(name))

    return sorted(set(names), key=rank)


def probe_columns(names) -> list[str]:
    def rank(name: str) -> tuple:
        point = name.split("/")[1] if name.count("/") >= 2 else ""
        return ({"init": 0, "final": 2}.get(point, 1), natural_key(name))

    return sorted(set(names), key=rank)


def param_columns(names) -> list[str]:
    names = set(names)
    extra = sorted(names - set(PARAMS), key=natural_key)
    shown = [p for p in PARAMS if p not in OPTIONAL_PARAMS or p in names]
    return [f"params/{p}" for p in (*shown, *extra)]


def param_cells(params: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    """A row's params/* cells: its counts, and 0 for a part its model lacks (PARTS) when it has counts
    at all (a failed or corrupt run without any stays empty)."""
    cells = {f"params/{k}": v for k, v in params.items()}
    if params:
        cells.update({c: 0 for c in (f"params/{p}" for p in PARTS) if c in columns and c not in cells})
    return cells


def sweep_file_keys(path: Path) -> list[str]:
    """Keys a W&B sweep file varies: `values` with more than one entry, or a distribution."""
    try:
        spec = read_yaml(path, "sweep file") if Path(path).is_file() else {}
    except YamlFileError:  # `ablate sweep` names the problem; the table just cannot use the file
        return []
    params = spec.get("parameters") if isinstance(spec, dict) else None
    out = []
    for key, value in (params or {}).items():
        if isinstance(value, dict) and (
            len(value.get("values") or []) > 1 or "distribution" in value or {"min", "max"} <= set(value)
        ):
            out.append(str(key))
    return out


def sweep_file_metric(path: Path | str) -> tuple[str, str] | None:
    """The metric a sweep file optimises, (name, goal), e.g. ("val/acc_best", "maximize"); None without one."""
    try:
        spec = read_yaml(Path(path), "sweep file") if Path(path).is_file() else {}
    except YamlFileError:
        return None
    metric = spec.get("metric") if isinstance(spec, dict) else None
    if not isinstance(metric, dict) or not metric.get("name"):
        return None
    return str(metric["name"]), str(metric.get("goal") or "maximize")


def sweep_file_tune(path: Path | str) -> Tune | None:
    """The tuning a sweep file asks for (None: none, or no usable file; `ablate sweep` names a bad one)."""
    try:
        spec = read_yaml(Path(path), "sweep file") if Path(path).is_file() else {}
        return parse_tune(path, spec) if isinstance(spec, dict) else None
    except (YamlFileError, TuneError):
        return None


def tune_seeds(tune: Tune, budget: Any) -> tuple[int, ...]:
    """The stage-1 seeds of runs at `budget`: the tune seeds, or what budget smoke keeps of them."""
    from ..budgets import SMOKE_SEEDS

    return stage1_seeds(tune, SMOKE_SEEDS) if str(budget) == "smoke" else tune.seeds


def variant_keys(df: pd.DataFrame, key: str, swept: list[str]) -> list[str]:
    return [k for k in swept if k not in ("seed", key) and k in df.columns]


def _seed(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):  # a corrupt row without its config
        return None


def tuned_choices(df: pd.DataFrame, tune: Tune, swept: list[str]) -> tuple[pd.Series, pd.Series]:
    """(the chosen value of each row's variant, NaN until its stage 1 is finished; each row's stage: 1 on
    a tune seed, else 2), by the runner's rule (ablate.sweep.tune): every value on every tune seed has
    a finished row (completed or diverged; a diverged one scores worst), then `choose`."""
    from ..rundir import FINISHED

    budgets = df["budget"] if "budget" in df.columns else pd.Series([None] * len(df), index=df.index)
    seeds = df["seed"].map(_seed)
    stage = pd.Series([pd.NA if s is None else 1 if s in tune_seeds(tune, b) else 2 for s, b in zip(seeds, budgets)],
                      index=df.index, dtype="Int64")
    chosen = pd.Series([None] * len(df), index=df.index, dtype=object)
    keys = variant_keys(df, tune.key, swept)
    groups = df.groupby([df[k].astype(object).map(repr) for k in keys], sort=False).groups if keys else {0: df.index}
    for index in groups.values():
        rows = df.loc[index]
        scores: dict[Any, list[float]] = {}
        passed: dict[Any, bool] = {}
        for value in tune.values:
            at = rows[[same(v, value) for v in rows[tune.key]]]
            for seed in tune_seeds(tune, budgets[index[0]]):
                run = at[seeds[at.index] == seed]
                if run.empty or run["status"].iloc[0] not in FINISHED:
                    break
                metric = run[tune.metric].iloc[0] if tune.metric in run.columns else None
                scores.setdefault(value, []).append(score(metric, run["status"].iloc[0], tune.maximize))
                if tune.gate is not None:
                    gated = run[tune.gate.metric].iloc[0] if tune.gate.metric in run.columns else None
                    passed[value] = passed.get(value, True) and tune.gate.passes(gated, run["status"].iloc[0])
            else:
                continue
            break  # a stage-1 run is missing or unfinished: no choice yet
        else:
            chosen.loc[index] = [choose_value(scores, tune.maximize, passed if tune.gate else None)] * len(index)
    if chosen.notna().any() and all(isinstance(v, (int, float)) for v in chosen.dropna()):
        chosen = chosen.astype(float)
    return chosen, stage


def _tidy_config(column: pd.Series) -> pd.Series:
    """Integers with some nulls (model.d_head: 8, 32, null) stay integers (Int64), not 8.0."""
    values = [v for v in column if v is not None and not (isinstance(v, float) and pd.isna(v))]
    if values and len(values) < len(column) and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return column.astype("Int64")
    return column


def reference_commit(df: pd.DataFrame) -> str | None:
    known = df["commit"].notna()
    pool = df.loc[known & (df["status"] == "completed"), "commit"]
    if pool.empty:
        pool = df.loc[known, "commit"]
    if pool.empty:
        return None
    counts, overall = pool.value_counts(), df.loc[known, "commit"].value_counts()
    tied = counts[counts == counts.max()].index
    return sorted(tied, key=lambda c: (-overall[c], str(c)))[0]


def _sort_rows(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    order = [k for k in keys if k != "seed"] + [k for k in ("seed", "run_id") if k in df.columns]
    try:
        return df.sort_values(order, na_position="last", kind="stable").reset_index(drop=True)
    except TypeError:  # a key column mixing types that do not compare
        return df.sort_values("run_id", kind="stable").reset_index(drop=True)


def from_records(
    records: list[RunRecord], name: str, source: str, sweep_file: Path | str | None = None
) -> pd.DataFrame:
    """RunRecords -> the table (columns in the documented order, rows sorted, commits flagged)."""
    config_keys = config_columns(records)
    metrics = metric_columns(k for r in records for k in r.metrics)
    probes = probe_columns(k for r in records for k in r.probes)
    params = param_columns(k for r in records for k in r.params)
    stopped = ["stopped_epoch"] if any("stopped_epoch" in r.bookkeeping for r in records) else []
    columns = ["run_id", *config_keys, "status", *metrics, *probes, *params, *BOOKKEEPING[:5], *stopped,
               *BOOKKEEPING[5:]]
    rows = []
    for r in records:
        row = {"run_id": r.run_id, "status": r.status, **r.config, **r.metrics, **r.probes}
        row.update(param_cells(r.params, params))
        row.update(r.bookkeeping)
        rows.append(row)
    df = pd.DataFrame.from_records(rows, columns=columns)
    for key in config_keys:
        df[key] = _tidy_config(df[key])
    for column in (*metrics, *probes):
        numbers = pd.to_numeric(df[column], errors="coerce")
        df[column] = numbers.astype("Int64" if column.startswith(EVAL) else float)  # counts stay whole

    listed = set(sweep_file_keys(Path(sweep_file))) if sweep_file else set()
    swept = swept_of(df, config_keys, listed)

    reference = reference_commit(df)
    df["commit_mismatch"] = df["commit"].notna() & (df["commit"] != reference) if reference else False
    df["commit_mismatch"] = df["commit_mismatch"].astype(bool)
    tune = sweep_file_tune(sweep_file) if sweep_file else None
    if tune is not None and tune.key in df.columns and "seed" in df.columns:
        chosen, stage = tuned_choices(df, tune, swept)
        df = df.copy()  # one block: the rows were assembled column by column
        at = df.columns.get_loc("status")
        df.insert(at, tune.column, chosen)
        df.insert(at + 1, "stage", stage)
    else:
        tune = None
    df = _sort_rows(df, swept)
    df.attrs = kept({
        "name": name,
        "source": source,
        "swept_keys": swept,
        "config_keys": config_keys,
        "metrics": metrics,
        "probes": probes,
        "params": params,
        "reference_commit": reference,
        "corrupt": dict(zip(df.loc[df["status"] == CORRUPT, "run_id"], df.loc[df["status"] == CORRUPT, "error"])),
        **({"tune": tune.as_dict()} if tune is not None else {}),
    })
    return df


# ------------------------------------------------------------------ queries


def corrupt_warnings(df: pd.DataFrame) -> list[str]:
    """One line per run whose files cannot be read: its id, folder, the file and the problem."""
    if "status" not in df.columns:
        return []
    bad = df[df["status"] == CORRUPT]
    where = bad["run_dir"] if "run_dir" in bad.columns else pd.Series("", index=bad.index)
    return [f"run {run_id}{f' ({d})' if isinstance(d, str) and d else ''}: {error}; listed with status "
            f"{CORRUPT}, left out of the statistics" for run_id, d, error in zip(bad["run_id"], where, bad["error"])]


def commit_warnings(df: pd.DataFrame) -> list[str]:
    """Lines for the CLI's stderr: runs whose files are broken (corrupt_warnings), rows at another
    commit than the rest, rows from a modified tree."""
    out = corrupt_warnings(df)
    if df.attrs.get("copies"):
        copies = df.attrs["copies"]
        out.append(f"{len(copies)} folder(s) of {df.attrs.get('source', 'the sweep')} hold a run whose id is not "
                   f"the folder's name ({', '.join(copies[:3])}{', ...' if len(copies) > 3 else ''}): copies, left "
                   "out of the table; remove them or move them out of the runs folder")
    if "commit_mismatch" in df.columns and df["commit_mismatch"].any():
        n = int(df["commit_mismatch"].sum())
        ref = df.attrs.get("reference_commit") or reference_commit(df)
        others = ", ".join(sorted({str(c)[:8] for c in df.loc[df["commit_mismatch"], "commit"]}))
        out.append(
            f"{n} of {len(df)} runs ran at another commit ({others}) than the others ({str(ref)[:8]}); "
            "see the commit_mismatch column"
        )
    if "dirty" in df.columns:
        dirty = int(df["dirty"].eq(True).sum())
        if dirty:
            out.append(f"{dirty} of {len(df)} runs ran with uncommitted changes (dirty=True)")
    return out


table_warnings = commit_warnings  # the same lines, under the name that says what they are


def _main_metrics(metrics: list[str]) -> list[str]:
    return [m for m in metrics if m.startswith("test/") or m in MAIN_METRICS]


def _is_aggregate(df: pd.DataFrame) -> bool:
    return "by" in df.attrs and "status" not in df.columns


def display_columns(df: pd.DataFrame) -> list[str]:
    """The CLI's short view. Runs: swept keys, seed, (tuned.<key>,) status, test metrics and
    val/acc_best, wall time, commit. An aggregate: its groups, (tuned.<key>,) then mean (printed with
    its interval, `format_table`) and n of those metrics, n_diverged (and a tuned sweep's stage-1 curve)."""
    tuned = [c for c in df.columns if isinstance(c, str) and c.startswith("tuned.")]
    if _is_aggregate(df):
        stats = [f"{m}_{s}" for m in _main_metrics(df.attrs["metrics"]) for s in ("mean", "n")]
        wanted = [*df.attrs["by"], *tuned, *stats, "n_diverged", *df.attrs.get("curve", [])]
    else:
        metrics = df.attrs.get("metrics") or [c for c in df.columns if METRIC.match(c)]
        keys = [k for k in swept_keys(df) if k != "seed"]
        wanted = [*keys, "seed", *tuned, "status", "stopped_epoch", *_main_metrics(metrics), "wall_time_s", "commit"]
    return [c for c in dict.fromkeys(wanted) if c in df.columns]


def _droppable(df: pd.DataFrame, columns: list[str]) -> list[list[str]]:
    """Groups of the short view's columns to hide, first to last, when it is wider than the terminal:
    never the swept keys, seed, status or the first metric."""
    if _is_aggregate(df):
        metrics = [m for m in _main_metrics(df.attrs["metrics"]) if f"{m}_mean" in columns]
        curve = [c for c in df.attrs.get("curve", []) if c in columns]  # a tuned sweep's stage 1: first to go
        groups = [[f"{m}_{s}" for s in ("mean", "n")] for m in reversed(metrics[1:])]
        return [g for g in [[c for c in g if c in columns] for g in groups] + [curve] if g]
    metrics = [c for c in columns if METRIC.match(c)]
    later = [m for m in reversed(metrics[1:]) if m not in MAIN_METRICS]
    return [[c] for c in ("commit", "wall_time_s", *[m for m in metrics[1:] if m in MAIN_METRICS], *later) if c in columns]


def _render(view: pd.DataFrame) -> str:
    with pd.option_context("display.max_columns", None, "display.width", 10_000, "display.max_colwidth", 60):
        return view.to_string(index=False, float_format=lambda x: f"{x:.4g}")


def _width(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _short_names(columns: list[str]) -> dict[str, str]:
    """model.n_heads -> n_heads, where that leaves every header distinct."""
    short = {c: c.split(".", 1)[1] if c.split(".", 1)[0] in SECTIONS else c for c in columns}
    counts = pd.Series(list(short.values())).value_counts()
    return {c: s for c, s in short.items() if s != c and counts[s] == 1}


INTERVAL = " [lo, hi]"  # an aggregate's short view: the <metric>_mean column, headed <metric>_mean [lo, hi]


def _interval_cell(mean: float, lo: float, hi: float) -> str:
    """An aggregate's mean with its 95 % interval as the short view prints it, 4 significant digits:
    '0.9828 [0.9412, 1]'; the mean alone where there is no interval (n < 2), NaN where there is no mean."""
    if pd.isna(mean):
        return "NaN"
    return f"{mean:.4g}" if pd.isna(lo) or pd.isna(hi) else f"{mean:.4g} [{lo:.4g}, {hi:.4g}]"


def _with_intervals(view: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """The aggregate's short view with each <metric>_mean column holding 'mean [lo, hi]' (its header says so)."""
    for metric in df.attrs.get("metrics", []):
        column = f"{metric}_mean"
        if column in view.columns and f"{metric}_lo" in df.columns and f"{metric}_hi" in df.columns:
            view[column] = [_interval_cell(*cell) for cell in zip(df[column], df[f"{metric}_lo"], df[f"{metric}_hi"])]
            view = view.rename(columns={column: column + INTERVAL})
    return view


def _interval_note(df: pd.DataFrame) -> str | None:
    """Why an aggregate has no interval somewhere: fewer than two seeds in that variant."""
    if not _is_aggregate(df):
        return None
    for metric in df.attrs.get("metrics", []):
        lo, n = df.get(f"{metric}_lo"), df.get(f"{metric}_n")
        if lo is not None and n is not None and (lo.isna() & (n < 2)).any():
            return "no [lo, hi] where n < 2: a 95 % interval needs >= 2 seeds per variant (run more seeds)"
    return None


def format_table(df: pd.DataFrame, all_columns: bool = False, width: int | None = None) -> str:
    """The table as text: every column with all_columns, else the short view (display_columns) fitted
    to `width` characters (default: the terminal's, shutil.get_terminal_size): config keys lose their
    section prefix, then the least needed columns are hidden; notes under the table say what was
    shortened or hidden, and why an aggregate has no interval somewhere. An aggregate's metric shows as
    `<metric>_mean [lo, hi]`: its mean with the 95 % interval (`aggregate`'s _mean, _lo, _hi)."""
    if all_columns:
        return _render(df)
    width = width or shutil.get_terminal_size().columns
    columns = display_columns(df)
    view = df[columns].copy()
    if "commit" in view.columns:  # short hash, "!" where it is not the reference
        short = view["commit"].map(lambda c: str(c)[:8] if isinstance(c, str) else "")
        if "commit_mismatch" in df.columns:
            short = short + df["commit_mismatch"].map(lambda f: "!" if f else "")
        view["commit"] = short
    if _is_aggregate(df):
        view = _with_intervals(view, df)
    notes = []
    curve = [c for c in df.attrs.get("curve", []) if c in view.columns] if _is_aggregate(df) else []
    if curve:  # tune/val/acc_best@optim.lr=0.001 -> lr=0.001, said once in a note
        tune = df.attrs.get("tune") or {}
        key = str(tune.get("key", ""))
        short = key.split(".", 1)[1] if key.split(".", 1)[0] in SECTIONS else key
        view = view.rename(columns={c: f"{short}={c.rsplit('=', 1)[1]}" for c in curve})
        seeds = " ".join(map(str, tune.get("seeds", [])))
        curve_note = (f"{short}=V: stage 1, mean {tune.get('metric')} over tune seeds {seeds} at {key}=V "
                     "(-inf/inf: a run diverged or was stopped early; empty: not finished); tuned.{key}: the value chosen".replace("{key}", key))
        renamed_curve = [f"{short}={c.rsplit('=', 1)[1]}" for c in curve]
    text = _render(view)
    renamed = _short_names(columns)
    if _width(text) > width and renamed:
        view = view.rename(columns=renamed)
        text = _render(view)
        shown = ", ".join(f"{s} = {c}" for c, s in list(renamed.items())[:2])
        notes.append(f"{shown}{', ...' if len(renamed) > 2 else ''}: config keys shown without their section")
    hidden: list[str] = []
    shown = dict(zip(columns, view.columns)) if len(columns) == len(view.columns) else {}
    for group in _droppable(df, columns):
        if _width(text) <= width:
            break
        view = view.drop(columns=[renamed.get(c, shown.get(c, c)) for c in group])
        hidden.append(group[0] if len(group) == 1 else "the stage-1 curve (tune/*)" if group[0].startswith("tune/")
                      else group[0].rsplit("_", 1)[0] + "_mean/lo/hi/n")
        text = _render(view)
    if curve and any(c in view.columns for c in renamed_curve):
        notes.insert(0, curve_note)
    if hidden:
        notes.append(f"hidden to fit {width} columns: {', '.join(hidden)}; --all-columns shows every column")
    interval = _interval_note(df)
    if interval:
        notes.append(interval)
    return "\n".join([text, *(f"({note})" for note in notes)])


def write(df: pd.DataFrame, path: Path | str) -> Path:
    """Write the table to .csv or .parquet atomically (temp file in the same folder + rename):
    a reader, or another writer of the same path, sees the old file or the new one, never half.
    In the CSV, text a spreadsheet would run as a formula starts with `'` (ablate.csvcells); parquet
    keeps every value as it is (its cells are typed, never evaluated)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":  # a cell a spreadsheet would run as a formula (a run named =...) is written as text
        data: str | bytes = safe_frame(df).to_csv(index=False)
    elif suffix in (".parquet", ".pq"):
        buffer = io.BytesIO()
        try:
            df.to_parquet(buffer, index=False)
        except ImportError as err:
            raise ResultsError(f"cannot write parquet ({err}); pip install pyarrow") from None
        data = buffer.getvalue()
    else:
        raise ResultsError(f"cannot write {str(path)!r}: give a path ending in .csv or .parquet")
    try:
        atomic_write(path, data)
    except OSError as err:
        raise ResultsError(f"cannot write {str(path)!r}: {err.strerror or err}; choose a writable path") from None
    return path
