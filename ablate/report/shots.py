"""Screenshots of the report's HTML index in each language, taken offline in headless Chromium
(ablate.browser): what a reader sees first, the answers table at the top of the page.

    python -m ablate.report.shots [BUILD] [OUT]      (what `make report-shots` runs)

BUILD (default reports/build) holds index.html and index.zh.html (`ablate report build`); OUT (default
reports/screenshots) gets each page's top at a phone's width and a desktop's (VIEWPORTS: index.390.png,
index.1280.png, index.zh.390.png, index.zh.1280.png). The Chinese page
needs a CJK font (Debian: fonts-noto-cjk), else its characters are empty boxes. Prints each page's full
height. Exit status 2 without Chromium or without the pages, 1 when a page tried to reach the network.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..browser import missing_chromium, offline_screenshot
from .build import INDEX

VIEWPORTS = {"390": {"width": 390, "height": 844}, "1280": {"width": 1280, "height": 1600}}  # a phone, a desktop


def shots(build: Path, out: Path) -> int:
    pages = {lang: build / name for lang, name in INDEX.items()}
    if missing := [str(p) for p in pages.values() if not p.is_file()]:
        print(f"ablate: no {missing[0]}; run `make report` (or `ablate report build`) first", file=sys.stderr)
        return 2
    if problem := missing_chromium():
        print(f"ablate: {problem}", file=sys.stderr)
        return 2
    for lang, page in pages.items():
        for width, viewport in VIEWPORTS.items():
            png = out / f"{Path(INDEX[lang]).stem}.{width}.png"
            shot = offline_screenshot(page, png, viewport)
            if shot.blocked:
                print(f"ablate: {page} tried to reach {shot.blocked[0]} ({len(shot.blocked)} request(s), all "
                      "blocked); the page must be self-contained", file=sys.stderr)
                return 1
            print(f"{png}: the top {viewport['height']} px of {page} at {width} px wide ({shot.height:,} px tall)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 3:
        sys.exit("usage: python -m ablate.report.shots [BUILD] [OUT]")
    args = [Path(a) for a in sys.argv[1:]]
    sys.exit(shots(args[0] if args else Path("reports/build"), args[1] if len(args) > 1 else Path("reports/screenshots")))
