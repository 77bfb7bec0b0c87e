"""The report's index in headless Chromium (issue 26): both languages render offline, link to each other,
open with the answers table and keep the evidence folded; `python -m ablate.report.shots` writes the two
screenshots. On the fixture report build."""

from __future__ import annotations

import os

import pytest
from PIL import Image

from ablate.browser import chromium, offline_screenshot
from ablate.report.build import INDEX, TEXT
from ablate.report.shots import VIEWPORT, shots

HOW = "`apt-get install chromium fonts-noto-cjk` (or set ABLATE_CHROMIUM) and `pip install pytest-playwright`"


def _problem() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed"
    return None if chromium().exists() else f"no Chromium at {chromium()}"


PROBLEM = _problem()
if PROBLEM and os.environ.get("ABLATE_REQUIRE_BROWSER") == "1":
    pytest.fail(f"ABLATE_REQUIRE_BROWSER=1 but {PROBLEM}; {HOW}", pytrace=False)
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(PROBLEM is not None, reason=f"{PROBLEM}: {HOW} to run the browser tests")]


def test_the_index_in_each_language_opens_with_the_answers_and_folds_the_evidence(fixture_build, tmp_path):
    out, results, _ = fixture_build
    seen = {}

    def read(lang):
        def act(tab):
            seen[lang] = tab.evaluate("""() => ({
                first: document.querySelector('h2').textContent,
                rows: document.querySelectorAll('section:first-of-type tr').length,
                open: [...document.querySelectorAll('details')].filter(d => d.open).length,
                folded: document.querySelectorAll('details').length,
                other: document.querySelector('p.other a').getAttribute('href'),
                lang: document.documentElement.lang,
            })""")
        return act

    for lang in INDEX:
        shot = offline_screenshot(out / "build" / INDEX[lang], tmp_path / f"{lang}.png", act=read(lang))
        assert shot.blocked == [] and shot.height > 0
    answers = sum(len(b.answers) for b in results)
    for lang, other in (("en", "zh"), ("zh", "en")):
        page = seen[lang]
        assert page["first"] == TEXT["summary"][0 if lang == "en" else 1]
        assert page["rows"] == answers + 1 and page["open"] == 0 and page["folded"] >= answers
        assert page["other"] == INDEX[other]
    assert seen["zh"]["lang"] == "zh-Hans" and seen["en"]["lang"] == "en"


def test_shots_writes_both_screenshots_and_refuses_without_the_pages(fixture_build, tmp_path, capsys):
    out, _, _ = fixture_build
    assert shots(out / "build", tmp_path / "shots") == 0
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 2 and all("px tall" in line for line in said)
    images = [Image.open(tmp_path / "shots" / f"{name[:-5]}.png") for name in INDEX.values()]
    assert [im.size for im in images] == [(VIEWPORT["width"], VIEWPORT["height"])] * 2
    assert images[0].tobytes() != images[1].tobytes()
    assert shots(tmp_path / "nothing", tmp_path / "none") == 2
    assert "run `make report`" in capsys.readouterr().err and not (tmp_path / "none").exists()
