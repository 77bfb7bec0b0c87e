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


# The copy models the page draws (demo 1's Q1 part): the tutorial's sentence 猫坐在垫子上 as token ids 0..5, then
# SEP and six blanks (13 positions), copied in order at the blanks.
SENTENCE_TOKENS = 6


def page_problem(model: dict) -> str | None:
    """Why the page cannot draw an exported model (`is ...; fix`), or None: MNIST-row classifiers, and copy
    models that read the tutorial's six-token sentence (data.vocab >= 6, in order, a learned table long enough)."""
    config, task = model["config"], model["config"].get("data.task")
    if model["kind"] == "classify" and task == "mnist":
        return None
    if model["kind"] != "tokens" or task != "copy":
        return (f"is a model of data.task={task}; the page shows MNIST-row models and copy models only "
                "(export others with --json)")
    seq_len = 2 * SENTENCE_TOKENS + 1  # the sentence, SEP, a blank per token (ablate.data.copytask)
    if config.get("data.vocab", 0) < SENTENCE_TOKENS:
        return (f"is a copy model of data.vocab={config.get('data.vocab')}; the page feeds it the tutorial's "
                f"{SENTENCE_TOKENS}-token sentence (ids 0..{SENTENCE_TOKENS - 1}): give one with data.vocab >= "
                f"{SENTENCE_TOKENS} (or export it with --json)")
    if config.get("data.reverse"):
        return ("is a copy model of data.reverse=true; the page shows in-order copy models only "
                "(export it with --json)")
    if model["model"]["pos_enc"] == "learned" and model["model"]["max_len"] < seq_len:
        return (f"is a copy model with a learned table of model.max_len={model['model']['max_len']}; the page's "
                f"sentence needs {seq_len} positions: give one with model.max_len >= {seq_len} (or export it with --json)")
    return None


def _page(sources: list[Path], models: list[dict]) -> str:
    from .images import mnist_test_images, normalisation
    from .page import build_page, page_model

    for source, model in zip(sources, models):
        if problem := page_problem(model):
            raise ExploreError(f"{source} {problem}")
    if not any(model["kind"] == "classify" for model in models):
        raise ExploreError("the page needs at least one MNIST-row model beside copy models (its demos read digits); "
                           "add one, or export copy models alone with --json")
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
