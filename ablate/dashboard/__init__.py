"""`ablate dashboard NAME --entity E --project P [--report] [--dry-run [PATH]] [--budget B]`: one W&B
dashboard per sweep, built with W&B's own UI library (wandb-workspaces).

The sweep file is read with the sweep loader (ablate.sweep.spec.load, at --budget or the file's
own); the dashboard is first a plain-data spec (ablate.dashboard.spec: filters, grouping, panels and
their keys), which `--dry-run` writes as JSON (stdout, or PATH) without touching the network, and
which is then built into a saved workspace view (ablate.dashboard.wandb_ui) and, with --report, a
W&B report holding the question, its plain answer and its figures (ablate.dashboard.answers).

Creating them needs W&B online (ablate.tracking.wandb_mode, which never blocks): without an API key or
with the host unreachable it exits 2 with one line and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import config as C
from ..budgets import NAMES as BUDGETS
from ..cliparse import OneLineParser, parse
from ..fileio import atomic_write
from ..studies import StudyError
from ..sweep.spec import SweepError, load
from . import spec as S
from .answers import AnswerError, answer

NEEDS = ("ablate: dashboard needs W&B online (an API key from `wandb login` or WANDB_API_KEY, api.wandb.ai "
         "reachable, WANDB_MODE not offline); use --dry-run to write the spec without it")



def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="ablate dashboard", allow_abbrev=False, description="Create a saved W&B workspace view "
                "of one sweep (runs of its group and budget, grouped by its swept keys: parallel coordinates, "
                "validation curves, test accuracy, its question's probes, attention maps); --report adds a W&B "
                "report with the question, the plain answer and the figures.")
    p.add_argument("name", help="a sweep name (sweeps/NAME.yaml) or the path of a sweep .yaml file")
    p.add_argument("--entity", help="W&B entity (user or team) that owns the project; needed to create")
    p.add_argument("--project", help="W&B project of the runs (default: the sweep's run.project)")
    p.add_argument("--budget", choices=BUDGETS, help="the budget whose runs to show (default: the sweep file's)")
    p.add_argument("--report", action="store_true", help="also create a W&B report: question, plain answer, figures")
    p.add_argument("--dry-run", action="store_true",
                   help="write the spec as JSON to stdout (or --out PATH) and create nothing; works offline")
    p.add_argument("--out", metavar="PATH", help="with --dry-run: write the spec to this file instead of stdout")
    return p


def dashboard_spec(name: str, entity: str | None = None, project: str | None = None,
                   budget: str | None = None, report: bool = False) -> dict:
    """The spec of sweep `name` (SweepError, ConfigError, AnswerError or StudyError on bad input)."""
    sweep = load(name, budget=budget)
    spec = S.build(sweep, entity, project)
    if report:
        if spec["question"] is None:
            raise AnswerError(f"sweep {sweep.name!r} answers no question of the report, so it has no report; "
                              "leave out --report")
        spec["report"] = answer(spec["question"])
    return spec


def main(argv: list[str] | None = None) -> int:
    args = parse(parser(), argv)
    if isinstance(args, int):
        return args
    if args.out and not args.dry_run:
        print("ablate: --out is where --dry-run writes the spec; add --dry-run", file=sys.stderr)
        return 2
    if args.out and Path(args.out).is_dir():
        print(f"ablate: --out {args.out} is a folder; give a file path such as {Path(args.out) / 'spec.json'}",
              file=sys.stderr)
        return 2
    try:
        spec = dashboard_spec(args.name, args.entity, args.project, args.budget, args.report)
    except (SweepError, C.ConfigError, AnswerError, StudyError) as err:
        print(f"ablate: {err}" if not str(err).startswith("ablate:") else str(err), file=sys.stderr)
        return 2
    if args.dry_run:
        text = json.dumps(spec, indent=1, ensure_ascii=False) + "\n"
        if not args.out:
            sys.stdout.write(text)
            return 0
        if not Path(args.out).parent.is_dir():
            print(f"ablate: the folder of --out {args.out} does not exist; create it or choose another path",
                  file=sys.stderr)
            return 2
        try:
            atomic_write(Path(args.out), text)
        except OSError as err:
            print(f"ablate: cannot write --out {args.out} ({err.strerror}); choose a writable path", file=sys.stderr)
            return 2
        print(f"ablate dashboard: spec written to {args.out}", file=sys.stderr)
        return 0
    from ..tracking import wandb_mode

    if wandb_mode() != "online":
        print(NEEDS, file=sys.stderr)
        return 2
    if not args.entity:
        print("ablate: dashboard needs --entity (the W&B user or team that owns the project); add --entity E",
              file=sys.stderr)
        return 2
    try:
        import wandb_workspaces  # noqa: F401
    except ImportError:
        print("ablate: dashboard needs wandb-workspaces; pip install '.[dashboards]' in ablate's checkout", file=sys.stderr)
        return 2
    from . import wandb_ui

    print(f"ablate dashboard: workspace {wandb_ui.save_workspace(spec)}")
    if args.report:
        print(f"ablate dashboard: report {wandb_ui.save_report(spec)}")
    return 0
