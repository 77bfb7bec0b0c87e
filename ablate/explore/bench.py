"""The explorer's speed in Chromium (offline, headless): the load (navigation to the first drawing) and one redraw
after a control moves (a step of the τ slider: the forward pass with its trace and every demo drawn again), on
the tutorial's model and on the 8-layer one; for one page, or for two side by side with their ratio (`--before`:
both measured in the same run on the same machine, interleaved round by round, medians over the rounds).

    python -m ablate.explore.bench reports/explorer.html [--before OLD.html] [--repeats 5] [--steps 20]

`make explore-bench` measures the committed page against the one of the previous commit. A figure is a
wall-clock time on this machine: compare the two columns of one run, not runs of different machines.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from ..browser import chromium, missing_chromium
from ..cliparse import OneLineParser

MODELS = {"tutorial": "#s8", "residual-8": "#s9"}  # the model, and a demo section that has its button
WIDTH, HEIGHT = 1280, 900

# τ steps, timed inside the page: each input event runs the page's whole redraw synchronously
STEP = """(n) => {
  const tau = document.getElementById('tau'), start = performance.now();
  for (let i = 0; i < n; i++) { tau.value = (1 + 0.05 * ((i % 10) + 1)).toFixed(2); tau.dispatchEvent(new Event('input')); }
  const each = (performance.now() - start) / n;
  tau.value = '1'; tau.dispatchEvent(new Event('input'));
  return each;
}"""


def measure(browser, page: Path, steps: int) -> dict[str, float]:
    """One round on `page`: its load in seconds and the mean redraw per τ step in ms on each model."""
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        tab = context.new_page()
        tab.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:")) else r.abort())
        start = time.perf_counter()
        tab.goto(page.absolute().as_uri())
        tab.wait_for_function("window.ablateExplorer && window.ablateExplorer.last !== null")
        out = {"load_s": time.perf_counter() - start}
        for name, section in MODELS.items():
            tab.click(f"{section} button.pick[data-pick='{name}']")
            tab.evaluate(STEP, 2)  # warm: the first redraw of a model compiles its code paths
            out[f"redraw_ms_{name}"] = tab.evaluate(STEP, steps)
        return out
    finally:
        context.close()


def run(pages: dict[str, Path], repeats: int, steps: int) -> dict[str, dict[str, float]]:
    """Medians over `repeats` rounds, the pages interleaved within each round."""
    from playwright.sync_api import sync_playwright

    rounds: dict[str, list[dict[str, float]]] = {label: [] for label in pages}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium()), args=["--no-sandbox"])
        try:
            for _ in range(repeats):
                for label, page in pages.items():
                    rounds[label].append(measure(browser, page, steps))
        finally:
            browser.close()
    return {label: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for label, rs in rounds.items()}


def table(result: dict[str, dict[str, float]]) -> str:
    heads = ["page", "load (s)", *(f"redraw, {m} (ms)" for m in MODELS)]
    keys = ["load_s", *(f"redraw_ms_{m}" for m in MODELS)]
    rows = [[label, *(f"{v[k]:.2f}" if k == "load_s" else f"{v[k]:.1f}" for k in keys)] for label, v in result.items()]
    if len(result) == 2:
        (_, before), (_, after) = result.items()
        rows.append(["after / before", *(f"×{after[k] / before[k]:.2f}" for k in keys)])
    widths = [max(len(str(r[i])) for r in [heads, *rows]) for i in range(len(heads))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [heads, *rows])


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m ablate.explore.bench",
                           description="the explorer's load and redraw times in headless Chromium")
    parser.add_argument("page", type=Path, help="the explorer page (reports/explorer.html)")
    parser.add_argument("--before", type=Path, help="an earlier page, measured in the same run: the ratio is printed")
    parser.add_argument("--repeats", type=int, default=5, help="rounds (medians are printed; default 5)")
    parser.add_argument("--steps", type=int, default=20, help="τ steps timed per model and round (default 20)")
    args = parser.parse_args(argv)
    pages = {**({f"before: {args.before}": args.before} if args.before else {}), f"{args.page}": args.page}
    for page in pages.values():
        if not page.is_file():
            print(f"ablate: no page at {page}; give an explorer page (`make explore` writes reports/explorer.html)",
                  file=sys.stderr)
            return 2
    if args.repeats < 1 or args.steps < 1:
        print("ablate: --repeats and --steps must be at least 1", file=sys.stderr)
        return 2
    if problem := missing_chromium():
        print(f"ablate: {problem}", file=sys.stderr)
        return 2
    print(table(run(pages, args.repeats, args.steps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
