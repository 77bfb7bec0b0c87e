"""The report's index in headless Chromium (issue 26): both languages render offline, link to each other,
open with the answers table and keep the evidence folded; `python -m ablate.report.shots` writes the two
screenshots. On the fixture report build."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image

from ablate.browser import chromium
from ablate.report.build import INDEX, TEXT
from ablate.report.shots import VIEWPORTS, shots

HOW = "`apt-get install chromium fonts-noto-cjk` (or set ABLATE_CHROMIUM) and `pip install pytest-playwright`"


def _problem() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed"
    return None if chromium().exists() else f"no Chromium at {chromium()}"


PROBLEM = _problem()

# Chromium is driven in a child process, as `make report-shots` runs it: Playwright's sync API refuses to run
# inside the asyncio loop pytest-playwright's fixtures leave in this one (tests/test_explore_browser.py)
BROWSE = """
import json, sys
from pathlib import Path
from ablate.browser import offline_screenshot
seen = {}
shot = offline_screenshot(Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[4]) or None,
                          act=lambda tab: seen.update(tab.evaluate(sys.argv[3])))
print(json.dumps({"blocked": shot.blocked, "height": shot.height, "seen": seen}))
"""


def browse(page, png, script: str, viewport: dict | None = None) -> dict:
    """Open `page` offline in headless Chromium (ablate.browser), evaluate the JavaScript `script` (an arrow
    function returning an object), write `png`: {"blocked": [...], "height": px, "seen": what it returned}."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", BROWSE, str(page), str(png), script, json.dumps(viewport)],
                         capture_output=True,
                         text=True, timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
if PROBLEM and os.environ.get("ABLATE_REQUIRE_BROWSER") == "1":
    pytest.fail(f"ABLATE_REQUIRE_BROWSER=1 but {PROBLEM}; {HOW}", pytrace=False)
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(PROBLEM is not None, reason=f"{PROBLEM}: {HOW} to run the browser tests")]


def test_the_index_in_each_language_opens_with_the_answers_and_folds_the_evidence(fixture_build, tmp_path):
    """The four questions answered first (issue 39), then the answers table, the evidence folded."""
    out, results, _ = fixture_build
    seen = {}
    for lang in INDEX:
        got = browse(out / "build" / INDEX[lang], tmp_path / f"{lang}.png", """() => ({
            first: document.querySelector('h2').textContent,
            second: document.querySelectorAll('h2')[1].textContent,
            briefs: document.querySelectorAll('section:first-of-type p').length,
            rows: document.querySelectorAll('section:nth-of-type(2) tr').length,
            open: [...document.querySelectorAll('details')].filter(d => d.open).length,
            folded: document.querySelectorAll('details').length,
            other: document.querySelector('p.other a').getAttribute('href'),
            lang: document.documentElement.lang,
        })""")
        assert got["blocked"] == [] and got["height"] > 0
        seen[lang] = got["seen"]
    answers = sum(len(b.answers) for b in results)
    for lang, other in (("en", "zh"), ("zh", "en")):
        page = seen[lang]
        i = 0 if lang == "en" else 1
        assert (page["first"], page["second"]) == (TEXT["briefs"][i], TEXT["summary"][i])
        assert page["briefs"] == sum(1 for b in results for a in b.answers if (a.get("brief") or {}).get(lang)) == 4
        assert page["rows"] == answers + 1 and page["open"] == 0 and page["folded"] >= answers
        assert page["other"] == INDEX[other]
    assert seen["zh"]["lang"] == "zh-Hans" and seen["en"]["lang"] == "en"


def test_the_index_fits_a_phone_and_links_the_explorer(fixture_build, tmp_path):
    """At 390 CSS pixels (a phone) the page is laid out at the phone's width, its text at a readable size, and
    nothing but a wide table scrolls sideways (issue 39: without a viewport it was laid out 980 px wide)."""
    out, _, _ = fixture_build
    for lang in INDEX:
        got = browse(out / "build" / INDEX[lang], tmp_path / f"{lang}.png", """() => ({
            width: document.documentElement.scrollWidth,
            font: parseFloat(getComputedStyle(document.querySelector('p')).fontSize),
            explorer: [...document.querySelectorAll('p.other a')].map(a => a.getAttribute('href')),
        })""", VIEWPORTS["390"])
        assert got["seen"]["width"] <= VIEWPORTS["390"]["width"], (lang, got["seen"])
        assert got["seen"]["font"] >= 14, (lang, got["seen"])
        assert got["seen"]["explorer"][1] == f"../explorer.html?lang={lang}"


def test_shots_writes_both_screenshots_and_refuses_without_the_pages(fixture_build, tmp_path, capsys):
    import subprocess
    import sys

    out, _, _ = fixture_build
    run = subprocess.run([sys.executable, "-m", "ablate.report.shots", str(out / "build"), str(tmp_path / "shots")],
                         capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert run.returncode == 0, run.stderr[-2000:]
    said = run.stdout.splitlines()
    assert len(said) == 2 * len(VIEWPORTS) and all("px tall" in line for line in said)
    for width, viewport in VIEWPORTS.items():
        images = [Image.open(tmp_path / "shots" / f"{name[:-5]}.{width}.png") for name in INDEX.values()]
        assert [im.size for im in images] == [(viewport["width"], viewport["height"])] * 2
        assert images[0].tobytes() != images[1].tobytes()
    assert shots(tmp_path / "nothing", tmp_path / "none") == 2
    assert "run `make report`" in capsys.readouterr().err and not (tmp_path / "none").exists()
