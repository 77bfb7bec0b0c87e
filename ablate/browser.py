"""Headless Chromium through Playwright, offline: open a page from disk with every request that is not for a
file aborted, optionally act on it, and write a screenshot. A leaf module: the explorer's screenshot and the
report's index screenshots use it.

    offline_screenshot(page, png, viewport=VIEWPORT, act=None, full_page=False) -> Shot(blocked, height)

Chromium is the system's (`$ABLATE_CHROMIUM`, else /usr/bin/chromium: `apt-get install chromium`);
Playwright comes with the explore extra (and the dev extra).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VIEWPORT = {"width": 1400, "height": 900}


def chromium() -> Path:
    return Path(os.environ.get("ABLATE_CHROMIUM") or "/usr/bin/chromium")


def missing_chromium() -> str | None:
    """One line saying how to get Chromium when it is not there, else None."""
    if chromium().exists():
        return None
    return f"no Chromium at {chromium()}; `apt-get install chromium` (or set ABLATE_CHROMIUM) to take the screenshot"


@dataclass(frozen=True)
class Shot:
    blocked: list[str]  # the URLs the page tried to reach beyond the file: empty for a self-contained page
    height: int  # the page's full height in CSS pixels


def offline_screenshot(page: Path, png: Path, viewport: dict[str, int] | None = None,
                       act: Callable[[Any], None] | None = None, full_page: bool = False) -> Shot:
    """Open `page` from disk in headless Chromium with the network blocked, run `act(tab)` if given (hover,
    click), write `png` (the viewport, or the whole page with `full_page`)."""
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
            tab = browser.new_page(viewport=viewport or VIEWPORT)
            tab.route("**/*", route)
            tab.goto(Path(page).absolute().as_uri())
            if act is not None:
                act(tab)
            height = int(tab.evaluate("document.documentElement.scrollHeight"))
            png.parent.mkdir(parents=True, exist_ok=True)
            tab.screenshot(path=str(png), full_page=full_page)
        finally:
            browser.close()
    return Shot(blocked, height)
