"""`ablate compare NAME|sweeps/NAME.yaml [--out DIR] [--baseline key=value,...] [--runs DIR | --data DIR |
--wandb ENTITY/PROJECT]`: the
entry point of the comparison report (ablate.report.comparison). It checks the input, exports the sweep's runs
into a temporary folder as `ablate report export` does (the results layer, imported only when the command runs),
reads each run folder's status and the runs the sweep file defines but nobody ran, then writes the report. With
--data it reads an exported folder instead (reports/data, or any `ablate report export --data DIR`): the runs'
statuses and errors are the table's, and no run folder is needed. With --wandb it reads W&B's runs of the
sweep as `ablate results --wandb` does, exports that table into a temporary folder and reads it likewise.

Exit status: 0; 2 for bad input (an unknown sweep, no finished runs, a baseline that matches no variant),
one line on stderr and nothing written.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..cliparse import OneLineParser
from .comparison import (
    FINISHED,
    REPORT_FILES,
    CompareError,
    Report,
    _finished_runs,
    parse_baseline,
    write,
)
from .data import DataFileError, Sweep


def parser() -> OneLineParser:
    p = OneLineParser(prog="ablate compare", description="the comparison report of any sweep, offline: compare.md, "
                      "a self-contained index.html, variants.csv and figures")
    p.add_argument("name", help="the sweep: its name (sweeps/NAME.yaml, runs in $ABLATE_RUNS_DIR/NAME, default "
                   "./runs) or the path of its file")
    p.add_argument("--out", metavar="DIR", help="where the report goes (default reports/compare/NAME/)")
    p.add_argument("--baseline", metavar="KEY=VALUE,...", help="the variant every other is compared with "
                   "(default: the one that agrees with ablate's defaults on the most swept keys, the first of equals)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--runs", metavar="DIR", help="the runs folder (default $ABLATE_RUNS_DIR, else ./runs)")
    where.add_argument("--data", metavar="DIR", help="an exported folder instead of run folders (e.g. reports/data: "
                       "the committed tables)")
    where.add_argument("--wandb", metavar="ENTITY/PROJECT", help="W&B's runs of the sweep (its group) instead of run "
                       "folders, as `ablate results --wandb` reads them (needs the network and a W&B login)")
    return p


def check_out(out: Path) -> None:
    """`--out` must be a new folder or an earlier report (which is replaced): never a folder of other files."""
    if out.exists() and (not out.is_dir() or not set(p.name for p in out.iterdir()) <= REPORT_FILES
                         or not (out / "compare.md").is_file()):
        raise CompareError(f"--out {out} exists and is not an earlier `ablate compare` report; give a new folder "
                           "(or remove it)")


def states(where: Path, only: set[str] | None = None) -> dict[str, tuple[str, str]]:
    """Each run folder's own status and the last line of its error, from its summary.json (JSON, never a
    pickle); a folder whose summary cannot be read is "unreadable". `only`: these run ids (the sweep file's)."""
    import json

    out = {}
    for run in _finished_runs(where):
        if only is not None and run not in only:
            continue
        try:
            summary = json.loads((where / run / "summary.json").read_text())
            error = [line for line in str(summary.get("error") or "").splitlines() if line.strip()]
            out[run] = (str(summary.get("status") or "unknown"), error[-1].strip() if error else "")
        except (OSError, ValueError, AttributeError) as err:
            out[run] = ("unreadable", f"summary.json: {type(err).__name__}")
    return out


def missing_runs(name: str, sweeps: Path, present: set[str], budget: str, tuned: bool, absent: str = "") -> list[str]:
    """The runs sweeps/<name>.yaml defines at `budget` that have no folder: named (a tuned sweep: counted, since
    its stage 2 runs only at each variant's chosen rate). `absent`: why such a run may be absent, said first."""
    from ..results.export import defined_runs

    defined = defined_runs(name, sweeps).get(budget)
    if not defined:
        return []
    ids, expected = defined
    command = f"`ablate sweep {sweeps / (name + '.yaml')} --budget {budget}`"
    if tuned:
        have = len(ids & present)
        return [f"{expected - have} of the {expected} runs the tuned sweep makes at budget {budget} ({command})"] \
            if have < expected else []
    return [f"`{run}` ({absent}{command} runs it)" for run in sorted(ids - present)]


def table_states(S: Sweep) -> dict[str, tuple[str, str]]:
    """Each exported run's status and the last line of its error, as its table row records them."""
    errors = S.df["error"] if "error" in S.df.columns else [""] * len(S.df)
    out = {}
    for run_id, status, error in zip(S.df["run_id"], S.df["status"], errors):
        lines = [line for line in str(error if isinstance(error, str) else "").splitlines() if line.strip()]
        out[str(run_id)] = (str(status), lines[-1].strip() if lines else "")
    return out


def sweep_metric(name: str, sweeps: Path, S: Sweep) -> tuple[str, str, dict, str]:
    """(the sweep file's metric and goal, its tune entry, the budget) of the exported sweep `S`; CompareError when
    its table lacks the metric."""
    from ..results.table import sweep_file_metric

    metric, goal = sweep_file_metric(sweeps / f"{name}.yaml") or ("val/acc_best", "maximize")
    if metric not in S.df.columns:
        raise CompareError(f"the sweep's metric {metric} is not in its runs' table; name one of its columns "
                           f"(e.g. val/acc_best) under `metric:` in {sweeps / (name + '.yaml')}")
    return metric, goal, S.meta.get("tune") or {}, str(S.meta.get("budget") or "none").split(",")[0].strip()


def from_data(name: str, sweeps: Path, out: Path, data: Path, baseline: str | None,
              log: Callable[[str], None], source: str = "") -> Report:
    """The report from an exported folder: its table, its meta.json entry, the runs its table holds."""

    S = Sweep(name, data)
    if not S.ready:
        raise CompareError(f"no exported table of sweep {name} in {data}; export it first (`ablate report export "
                           f"--sweeps {name} --data {data}`) or give --runs DIR")
    if not S.df["status"].isin(FINISHED).any():
        raise CompareError(f"no finished runs of sweep {name} in {data} (statuses: "
                           f"{', '.join(sorted(set(S.df['status'])))}); rerun the sweep and export it again")
    metric, goal, tune, budget = sweep_metric(name, sweeps, S)
    found = table_states(S)
    absent = ("not among W&B's runs; " if source.startswith("W&B") else
              "not in the exported table: never run, or left out by the export as unreadable; ")
    missing = missing_runs(name, sweeps, set(found), budget, bool(tune.get("key")), absent)
    return write(S, out, metric, goal, baseline, found, missing, [], log=log,
                 source=source or f"the exported table in `{data}`")


def from_wandb(name: str, sweeps: Path, out: Path, path: str, baseline: str | None, log: Callable[[str], None],
               api=None) -> Report:
    """The report from W&B's runs of the sweep (ablate.results.load_wandb; `api`: a wandb.Api), exported into a
    temporary folder (its table only: W&B keeps no run folder) and read as --data reads one."""
    from ..results import load_wandb
    from ..results.export import export_table

    table = load_wandb(name, path, api=api, sweeps=str(sweeps))
    with tempfile.TemporaryDirectory(prefix="ablate-compare-") as tmp:
        export_table(name, table, Path(tmp), sweeps)
        return from_data(name, sweeps, out, Path(tmp), baseline, log, source=f"W&B's runs in `{path}`")


def run(name: str, sweeps: Path, out: Path, runs: Path | None = None, baseline: str | None = None,
        log: Callable[[str], None] = print, data: Path | None = None, wandb: str | None = None, api=None) -> Report:
    """Check, export into a temporary folder (or read the exported folder `data`, or W&B's runs in project
    `wandb`), write the report (ablate.report.comparison.write)."""
    from ..results.export import export
    from ..results.table import sweep_dir

    parse_baseline(baseline)  # a malformed --baseline before any work
    check_out(out)
    if not (sweeps / f"{name}.yaml").is_file():
        raise CompareError(f"no sweep file {sweeps / (name + '.yaml')}; give a sweep's name (sweeps/NAME.yaml) "
                           "or the path of its .yaml file")
    if data is not None:
        return from_data(name, sweeps, out, data, baseline, log)
    if wandb is not None:
        return from_wandb(name, sweeps, out, wandb, baseline, log, api)
    where = sweep_dir(name, runs)
    present = _finished_runs(where)
    if not present:
        raise CompareError(f"no finished runs of sweep {name} under {where}; run `ablate sweep "
                           f"{sweeps / (name + '.yaml')}` first (or give --runs DIR)")
    from ..results.export import defined_runs

    defined = defined_runs(name, sweeps)
    if defined and not any(ids & set(present) for ids, _ in defined.values()):  # the file edited since they ran
        raise CompareError(f"none of the {len(present)} runs under {where} is one {sweeps / (name + '.yaml')} "
                           "defines now (was the file edited since they ran?); run `ablate sweep "
                           f"{sweeps / (name + '.yaml')}` first, or restore the file they ran from")
    with tempfile.TemporaryDirectory(prefix="ablate-compare-") as tmp:
        said: list[str] = []
        export([name], runs=runs, data=Path(tmp), sweeps=sweeps, log=said.append, warn=said.append)
        S = Sweep(name, Path(tmp))
        if not S.ready or not S.df["status"].isin(FINISHED).any():
            raise CompareError(f"no finished runs of sweep {name} under {where} (statuses: "
                               f"{', '.join(sorted(set(S.df['status']))) if S.ready else 'none'}); rerun the sweep")
        metric, goal, tune, budget = sweep_metric(name, sweeps, S)
        at_budget = defined.get(budget)
        found = states(where, at_budget[0] if at_budget else None)
        missing = missing_runs(name, sweeps, set(found), budget, bool(tune.get("key")))
        return write(S, out, metric, goal, baseline, found, missing,
                     [s.removeprefix("ablate report export: ") for s in said], log=log)


def main(argv: list[str] | None = None) -> int:
    from ..results import ResultsError
    from ..results.table import sweep_arg

    args = parser().parse_args(argv)
    out = Path(args.out) if args.out else Path("reports") / "compare"
    try:
        name, sweeps = sweep_arg(args.name)
        out = Path(args.out) if args.out else out / name
        run(name, sweeps, out, runs=Path(args.runs) if args.runs else None, baseline=args.baseline,
            data=Path(args.data) if args.data else None, wandb=args.wandb)
    except (ResultsError, CompareError, DataFileError) as err:
        print(f"ablate: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise
    except OSError as err:  # a full disk, a read-only checkout: one line, not a traceback (issue 41)
        from .cli import cannot_write

        line, code = cannot_write(err, out)
        print(f"ablate: {line}", file=sys.stderr)
        return code
    return 0
