"""A 1400 x 900 screenshot of an explorer page, taken offline in Chromium through Playwright.

    python -m ablate.explore.screenshot PAGE.html PNG     (what `make explore` runs)

Chromium is the system's (`$ABLATE_CHROMIUM`, else /usr/bin/chromium: `apt-get install chromium`); Playwright
comes with the dev extra (pytest-playwright). Every request that is not for a file is aborted.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

VIEWPORT = {"width": 1400, "height": 900}


def chromium() -> Path:
    return Path(os.environ.get("ABLATE_CHROMIUM") or "/usr/bin/chromium")


def screenshot(page: Path, png: Path) -> list[str]:
    """Open `page` from disk with the network blocked, hover the first attention map, write `png`; return the
    URLs it tried to reach beyond the file (an empty list for a self-contained page)."""
    from playwright.sync_api import sync_playwright

    blocked: list[str] = []

    def route(r):
        if r.request.url.startswith(("file:", "data:")):
            return r.continue_()
        blocked.append(r.request.url)
        return r.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium()), args=["--no-sandbox"])
        try:
            tab = browser.new_page(viewport=VIEWPORT)
            tab.route("**/*", route)
            tab.goto(Path(page).absolute().as_uri())
            box = tab.locator("canvas.map").first.bounding_box()
            tab.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.4)
            png.parent.mkdir(parents=True, exist_ok=True)
            tab.screenshot(path=str(png))
        finally:
            browser.close()
    return blocked


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m ablate.explore.screenshot PAGE.html PNG")
    if not chromium().exists():
        print(f"ablate: no Chromium at {chromium()}; `apt-get install chromium` (or set ABLATE_CHROMIUM) "
              "to take the screenshot", file=sys.stderr)
        sys.exit(2)
    if blocked := screenshot(Path(sys.argv[1]), Path(sys.argv[2])):
        print(f"ablate: {sys.argv[1]} tried to reach {blocked[0]} ({len(blocked)} request(s), all blocked); "
              "the page must be self-contained", file=sys.stderr)
        sys.exit(1)
    print(f"{sys.argv[2]}: screenshot of {sys.argv[1]}", file=sys.stderr)
