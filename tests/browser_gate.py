"""The explorer's browser tests' gate, one home for the three modules that drive Chromium through
pytest-playwright: Playwright and Debian's Chromium must be there, else every test of the module skips with
one line saying what to install, and under ABLATE_REQUIRE_BROWSER=1 (CI) the module fails with that line."""

from __future__ import annotations

import os

import pytest

from ablate.explore.screenshot import chromium

HOW = "`apt-get install chromium` (or set ABLATE_CHROMIUM) and `pip install pytest-playwright`"
REQUIRED = os.environ.get("ABLATE_REQUIRE_BROWSER") == "1"


def browser_problem() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed"
    if not chromium().exists():
        return f"no Chromium at {chromium()}"
    return None


PROBLEM = browser_problem()


def gate() -> pytest.MarkDecorator:
    """A module's pytestmark: skip with the line, or fail it under ABLATE_REQUIRE_BROWSER=1."""
    if PROBLEM and REQUIRED:
        pytest.fail(f"ABLATE_REQUIRE_BROWSER=1 but {PROBLEM}; {HOW}", pytrace=False)
    return pytest.mark.skipif(PROBLEM is not None, reason=f"{PROBLEM}: {HOW} to run the browser tests")


@pytest.fixture(scope="session")
def browser_type_launch_args():
    """pytest-playwright's launch: Debian's Chromium, not a downloaded browser."""
    return {"executable_path": str(chromium()), "args": ["--no-sandbox"]}


def open_tab(context, html, query: str = ""):
    """A tab on the page `html` (a path) with the network blocked: the page must need nothing outside its
    file. Its console errors and blocked requests are collected in `tab.errors` and `tab.requests`."""
    tab = context.new_page()
    tab.requests, tab.errors = [], []

    def route(r):
        if r.request.url.startswith(("file:", "data:")):
            return r.continue_()
        tab.requests.append(r.request.url)
        return r.abort()

    tab.route("**/*", route)
    tab.on("console", lambda m: tab.errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: tab.errors.append(str(e)))
    tab.goto(html.as_uri() + query)
    return tab


@pytest.fixture(scope="module")
def desk(browser, built):
    """One 1280 x 900 tab on the module's page (its `built` fixture's "html") for its desktop tests; at the
    end it must have asked for nothing outside the file and logged no error."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    tab = open_tab(context, built["html"])
    yield tab
    assert tab.requests == [] and tab.errors == [], (tab.requests, tab.errors)
    context.close()


@pytest.fixture
def page(desk):
    """The desktop tab, reloaded: each test starts from the page as it loads."""
    desk.reload()
    return desk
