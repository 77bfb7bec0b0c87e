"""Screenshots of an explorer page, taken offline in Chromium through Playwright (ablate.browser: the system's
Chromium, every request that is not for a file aborted).

    python -m ablate.explore.screenshot PAGE.html PNG            1400 x 900, the first map hovered (`make explore`)
    python -m ablate.explore.screenshot PAGE.html --demos DIR    each of the nine demos, English and Chinese, at
                                                                 1280 px and at 390 px (a phone): DIR/<lang>-<width>-demo<n>.png,
                                                                 and demo 1's copy part (Q1, word order) twice:
                                                                 DIR/<lang>-<width>-q1.png (learned positions, the
                                                                 sentence in order) and -q1-nope.png (no positions,
                                                                 垫子在猫坐上)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..browser import VIEWPORT, chromium, missing_chromium, offline_screenshot

__all__ = ["VIEWPORT", "chromium", "demo_screenshots", "screenshot"]

WIDTHS = {1280: 900, 390: 844}  # width: height; 390 x 844 is a phone's viewport
LANGS = ("en", "zh")
DEMO_IMAGE, DEMO_QUERY = "7", 9  # the test set's first 7; the row where its top bar meets the stroke
DEMO_MODELS = {5: "sinusoidal", 9: "residual-8"}  # the model each demo's screenshot shows; the tutorial's otherwise


def _hover_first_map(tab) -> None:
    tab.locator("canvas.map").first.scroll_into_view_if_needed()
    box = tab.locator("canvas.map").first.bounding_box()
    tab.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.4)


def screenshot(page: Path, png: Path) -> list[str]:
    """Open `page` from disk with the network blocked, hover the first attention map, write `png`; return the
    URLs it tried to reach beyond the file (an empty list for a self-contained page)."""
    return offline_screenshot(page, png, VIEWPORT, act=_hover_first_map).blocked


def _small_png(png: Path) -> None:
    """Rewrite `png` with a 128-colour palette (a few times smaller; the page's flat colours survive)."""
    try:
        from PIL import Image
    except ImportError:  # Pillow comes with the explore extra; without it the PNG stays as Chromium wrote it
        return
    with Image.open(png) as image:
        small = image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(png, optimize=True)


def _q1_shots(tab, out: Path, stem: str) -> None:
    """Demo 1's copy part: the learned-positions model on 猫坐在垫子上, then the model without positions on
    垫子在猫坐上, the query on the first blank (where the copy begins) in both."""
    for suffix, model, order in (("q1", 0, 0), ("q1-nope", 1, 1)):
        buttons = tab.locator("#q1models button")
        if model >= buttons.count():
            continue
        buttons.nth(model).click()
        tab.click(f"#q1order button[data-order='{order}']")
        png = out / f"{stem}-{suffix}.png"
        tab.locator("#q1").screenshot(path=str(png))
        _small_png(png)


def demo_screenshots(page: Path, out: Path) -> dict[str, float]:
    """Every demo section of `page` in both languages at both widths, as out/<lang>-<width>-demo<n>.png (the
    digit 7, query row 9); returns the page's load times in seconds (DOMContentLoaded to the first render)
    by `<lang>-<width>`. Demo 5 shows the sinusoidal model, demo 9 the 8-layer one, the others the tutorial's. Raises RuntimeError when the page reaches beyond its file or logs an error."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    loads, problems = {}, []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium()), args=["--no-sandbox"])
        try:
            for width, height in WIDTHS.items():
                for lang in LANGS:
                    context = browser.new_context(viewport={"width": width, "height": height}, has_touch=width < 500,
                                                  is_mobile=width < 500)
                    tab = context.new_page()
                    tab.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:"))
                              else (problems.append(r.request.url), r.abort()))
                    tab.on("pageerror", lambda e: problems.append(str(e)))
                    start = time.perf_counter()
                    tab.goto(Path(page).absolute().as_uri() + f"?lang={lang}")
                    tab.wait_for_function("window.ablateExplorer && window.ablateExplorer.last !== null")
                    loads[f"{lang}-{width}"] = time.perf_counter() - start
                    tab.select_option("#image", DEMO_IMAGE)
                    tab.evaluate(f"""() => {{ const q = document.getElementById('query'); q.value = {DEMO_QUERY};
                                   q.dispatchEvent(new Event('input')); }}""")
                    for n in range(1, 10):
                        pick = tab.locator(f"button.pick[data-pick='{DEMO_MODELS.get(n, 'tutorial')}']")
                        if pick.count() and pick.first.is_visible() and pick.first.get_attribute("aria-pressed") != "true":
                            pick.first.click()
                        png = out / f"{lang}-{width}-demo{n}.png"
                        tab.locator(f"#s{n}").screenshot(path=str(png))
                        _small_png(png)
                    if tab.locator("#q1").is_visible():
                        _q1_shots(tab, out, f"{lang}-{width}")
                    context.close()
        finally:
            browser.close()
    if problems:
        raise RuntimeError(f"{page}: {problems[0]} ({len(problems)} problem(s))")
    return loads


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) != 2 and not (len(args) == 3 and args[1] == "--demos"):
        sys.exit("usage: python -m ablate.explore.screenshot PAGE.html PNG | PAGE.html --demos DIR")
    if problem := missing_chromium():
        print(f"ablate: {problem}", file=sys.stderr)
        sys.exit(2)
    if args[1] == "--demos":
        try:
            loads = demo_screenshots(Path(args[0]), Path(args[2]))
        except RuntimeError as err:
            print(f"ablate: {err}; the page must be self-contained and error-free", file=sys.stderr)
            sys.exit(1)
        print(f"{args[2]}: {len(list(Path(args[2]).glob('*.png')))} screenshots of {args[0]}; load "
              + ", ".join(f"{k} {v:.2f} s" for k, v in loads.items()), file=sys.stderr)
        sys.exit(0)
    if blocked := screenshot(Path(args[0]), Path(args[1])):
        print(f"ablate: {args[0]} tried to reach {blocked[0]} ({len(blocked)} request(s), all blocked); "
              "the page must be self-contained", file=sys.stderr)
        sys.exit(1)
    print(f"{args[1]}: screenshot of {args[0]}", file=sys.stderr)
