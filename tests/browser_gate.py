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
