"""`ablate explore SOURCE... --out PAGE.html [--json PATH]`: trained models (run directories or last.ckpt
files) as one self-contained HTML page that runs them in the browser, and/or as JSON.

Every source is checked and exported, and the MNIST test images read, before anything is written; bad input
exits 2 with one line, and a file is written whole or not at all.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..cliparse import OneLineParser
from ..fileio import atomic_write
from .export import PRECISIONS, ExploreError, export_model


def _name(source: Path, taken: set[str]) -> str:
    """The model's name on the page: its run directory's name (never a path), made unique."""
    source = Path(source)
    base = (source if source.is_dir() else source.parent).resolve().name or "model"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def _page(sources: list[Path], models: list[dict]) -> str:
    from .images import mnist_test_images, normalisation
    from .page import build_page, page_model

    for source, model in zip(sources, models):
        if model["kind"] != "classify" or model["config"].get("data.task") != "mnist":
            raise ExploreError(f"{source} is a model of data.task={model['config'].get('data.task')}; the page shows "
                               "MNIST-row models only (export others with --json)")
    taken: set[str] = set()
    named = [page_model(model, _name(source, taken)) for source, model in zip(sources, models)]
    mean, std = normalisation()
    return build_page(named, mnist_test_images(), mean, std)


def main(argv: list[str]) -> int:
    parser = OneLineParser(prog="ablate explore",
                                     description="trained models in the browser: one self-contained HTML page "
                                                 "(--out) and/or their config and weights as JSON (--json)")
    parser.add_argument("sources", type=Path, nargs="+", metavar="SOURCE", help="a run directory, or its last.ckpt")
    parser.add_argument("--out", type=Path, metavar="PAGE.html",
                        help="write the explorer page here (atomically): opens offline from the file")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the models as one JSON list here (atomically)")
    parser.add_argument("--precision", choices=list(PRECISIONS), default=None,
                        help="the weights' number format; default float16 on the page (half its size; the tests "
                             "measure the cost in logits), float32 in --json")
    args = parser.parse_args(argv)
    if args.out is None and args.json is None:
        print("ablate: explore has nothing to write; give --out PAGE.html and/or --json PATH", file=sys.stderr)
        return 2
    try:
        json_precision, page_precision = args.precision or "float32", args.precision or "float16"
        models = [dict(export_model(source, json_precision), source=str(source)) for source in args.sources]
        page = None
        if args.out is not None:
            same = page_precision == json_precision
            page = _page(args.sources, models if same else [export_model(s, page_precision) for s in args.sources])
    except ExploreError as err:
        print(f"ablate: {err}", file=sys.stderr)
        return 2
    for path, text in ((args.json, lambda: json.dumps(models, separators=(",", ":")) + "\n"), (args.out, lambda: page)):
        if path is None:
            continue
        try:
            atomic_write(path, text())
        except OSError as err:
            print(f"ablate: cannot write {path}: {err.strerror or err}; choose a writable path", file=sys.stderr)
            return 1
        print(f"{path}: {len(models)} model(s), {path.stat().st_size:,} bytes", file=sys.stderr)
    return 0
