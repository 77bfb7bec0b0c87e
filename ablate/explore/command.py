"""`ablate explore SOURCE... --json PATH`: the models of run directories (or last.ckpt files) as JSON.

Every source is checked and exported before anything is written; bad input exits 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..fileio import atomic_write
from .export import ExploreError, export_model


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ablate explore",
                                     description="export trained models (config and float32 weights) for the explorer")
    parser.add_argument("sources", type=Path, nargs="+", metavar="SOURCE", help="a run directory, or its last.ckpt")
    parser.add_argument("--json", type=Path, required=True, metavar="PATH",
                        help="write the models as one JSON list here (atomically)")
    args = parser.parse_args(argv)
    try:
        models = [dict(export_model(source), source=str(source)) for source in args.sources]
    except ExploreError as err:
        print(f"ablate: {err}", file=sys.stderr)
        return 2
    try:
        atomic_write(args.json, json.dumps(models, separators=(",", ":")) + "\n")
    except OSError as err:
        print(f"ablate: cannot write {args.json}: {err.strerror or err}; choose a writable --json path",
              file=sys.stderr)
        return 1
    print(f"{args.json}: {len(models)} model(s), {args.json.stat().st_size} bytes", file=sys.stderr)
    return 0
