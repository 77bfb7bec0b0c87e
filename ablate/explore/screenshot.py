"""A 1400 x 900 screenshot of an explorer page, taken offline in Chromium through Playwright
(ablate.browser: the system's Chromium, every request that is not for a file aborted).

    python -m ablate.explore.screenshot PAGE.html PNG     (what `make explore` runs)
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..browser import VIEWPORT, chromium, missing_chromium, offline_screenshot

__all__ = ["VIEWPORT", "chromium", "screenshot"]


def _hover_first_map(tab) -> None:
    box = tab.locator("canvas.map").first.bounding_box()
    tab.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.4)


def screenshot(page: Path, png: Path) -> list[str]:
    """Open `page` from disk with the network blocked, hover the first attention map, write `png`; return the
    URLs it tried to reach beyond the file (an empty list for a self-contained page)."""
    return offline_screenshot(page, png, VIEWPORT, act=_hover_first_map).blocked


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m ablate.explore.screenshot PAGE.html PNG")
    if problem := missing_chromium():
        print(f"ablate: {problem}", file=sys.stderr)
        sys.exit(2)
    if blocked := screenshot(Path(sys.argv[1]), Path(sys.argv[2])):
        print(f"ablate: {sys.argv[1]} tried to reach {blocked[0]} ({len(blocked)} request(s), all blocked); "
              "the page must be self-contained", file=sys.stderr)
        sys.exit(1)
    print(f"{sys.argv[2]}: screenshot of {sys.argv[1]}", file=sys.stderr)
