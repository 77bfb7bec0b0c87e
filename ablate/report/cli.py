"""`ablate report [export|build|all]`: run directories -> reports/data -> HTML, figures, FINDINGS.md (+ .zh.md).

    ablate report export   [--runs DIR] [--data DIR] [--sweeps a,b] [--budget B] [--replace]
    ablate report build    [--data DIR] [--out DIR] [--source DIR] [--only NB ...]
    ablate report [all]    export, then build (what `make report` runs)

Exit status: 0, 1 when a notebook failed or showed no Answer or export could not write (a full or
read-only disk), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cliparse import OneLineParser


def parser() -> argparse.ArgumentParser:
    # the CLI reaches export (this function runs only for `ablate report`); importing ablate.report does not
    from ..results.export import BUDGET_ORDER

    p = OneLineParser(prog="ablate report", description="Export the sweeps' results to reports/data, then execute "
                "every report notebook on them: reports/build/*.html, index.html and index.zh.html, reports/figures, reports/FINDINGS.md and FINDINGS.zh.md.")
    p.add_argument("step", nargs="?", choices=["export", "build", "all"], default="all",
                   help="export (runs -> data), build (data -> report), or all (default)")
    p.add_argument("--runs", metavar="DIR", help="run directories to export (default $ABLATE_RUNS_DIR, else ./runs)")
    p.add_argument("--data", metavar="DIR", default="reports/data", help="exported tables (default reports/data)")
    p.add_argument("--out", metavar="DIR", default="reports",
                   help="where build/, figures/, FINDINGS.md and FINDINGS.zh.md go (default reports)")
    p.add_argument("--source", metavar="DIR", default="reports", help="the notebook sources and their study manifests (default reports)")
    p.add_argument("--sweeps", metavar="A,B", help="export these sweeps only (default: every sweeps/*.yaml)")
    p.add_argument("--budget", choices=BUDGET_ORDER,
                   help=f"export the runs of this budget (default: the first of {', '.join(BUDGET_ORDER)} "
                   "that has runs)")
    p.add_argument("--replace", "--replace-smaller-budget", dest="replace", action="store_true",
                   help="replace an exported table by runs of a smaller budget (smoke < quick < none < full) or "
                   "by fewer runs than it has (a sweep stopped part way); without it such a table is kept, "
                   "and a line says so")
    p.add_argument("--only", nargs="+", metavar="NB", help="build these notebooks only (no FINDINGS.md or FINDINGS.zh.md)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per notebook cell (default 900)")
    return p


def write_fix(err: OSError, writable: str) -> tuple[str, int]:
    """What to do about an OSError writing somewhere, and the exit status: a folder that cannot be written is
    the user's to fix (2: `writable` says how), a full disk or any other failure the machine's state (1)."""
    import errno

    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space", 1
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return writable, 2
    return "fix that", 1


def cannot_write(err: OSError, where: str | Path) -> tuple[str, int]:
    """The one line, and the exit status (write_fix), for an OSError writing into `where`."""
    what = f"{err.strerror or err}" + (f": {err.filename}" if err.filename else "")
    fix, code = write_fix(err, "make it writable or choose another with --out")
    return f"cannot write into {where} ({what}); {fix}, then run the same command again", code


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.step in ("export", "all"):
        from ..results.export import ExportError, export, sweep_names

        names = [s for s in args.sweeps.split(",") if s] if args.sweeps else None
        unknown = sorted(set(names or ()) - set(sweep_names()))
        if unknown:
            print(f"ablate: --sweeps {','.join(unknown)}: no such sweep; choose from {', '.join(sweep_names())}",
                  file=sys.stderr)
            return 2
        try:
            export(names, runs=args.runs, data=args.data, budget=args.budget, replace=args.replace,
                   studies=args.source)
        except ExportError as err:
            print(f"ablate: {err}", file=sys.stderr)
            return 2
        except OSError as err:  # each sweep's files were written together: all old or all new
            where = Path(err.filename) if err.filename else None
            data = Path(args.data).absolute()
            if where is not None and not where.absolute().is_relative_to(data):  # reading the runs
                print(f"ablate: cannot read the runs to export: {err}; make them readable, then run the "
                      "same command again", file=sys.stderr)
            else:
                print(f"ablate: cannot export into {args.data}: {err}; free some space or make the folder "
                      "writable, then run the same command again", file=sys.stderr)
            return 1
    if args.step in ("build", "all"):
        from .build import BuildError, build

        try:
            built = build(args.source, args.data, args.out, only=args.only, timeout=args.timeout)
        except BuildError as err:
            print(f"ablate: {err}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # `ablate report build | head`: the reader has gone (ablate.cli says so)
            raise
        except OSError as err:  # a full disk, a read-only checkout: one line, not a traceback (issue 41)
            line, code = cannot_write(err, args.out)
            print(f"ablate: {line}", file=sys.stderr)
            return code
        failed = [b for b in built if not b.ok]
        for b in failed:
            print(f"ablate: notebook {b.name} failed: {b.error} (see {b.html})", file=sys.stderr)
        return 1 if failed else 0
    return 0
