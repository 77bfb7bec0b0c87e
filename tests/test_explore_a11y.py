"""The committed explorer page (reports/explorer.html) under axe-core, the accessibility engine of Deque
(a reference nobody here wrote): no violation of impact serious or critical in English or Chinese, on a
desktop and on a 390 px phone (issue 40). axe-core comes from npm (`.ci/run` installs it into .ci/axe;
ABLATE_AXE names another axe.min.js); without it these tests skip saying so, and under
ABLATE_REQUIRE_BROWSER=1 (CI) they fail instead."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import browser_gate
from tests.browser_gate import browser_type_launch_args, gate, open_tab  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "reports" / "explorer.html"
AXE = Path(os.environ.get("ABLATE_AXE", ROOT / ".ci" / "axe" / "node_modules" / "axe-core" / "axe.min.js"))
HOW = "npm install --prefix .ci/axe axe-core@4.14.1 (what .ci/run does), or set ABLATE_AXE to an axe.min.js"
SERIOUS = ("serious", "critical")

pytestmark = gate()
if not AXE.is_file() and browser_gate.REQUIRED:
    pytest.fail(f"ABLATE_REQUIRE_BROWSER=1 but no axe-core at {AXE}; {HOW}", pytrace=False)
needs_axe = pytest.mark.skipif(not AXE.is_file(), reason=f"no axe-core at {AXE}: {HOW}")


def _violations(tab) -> list[dict]:
    tab.add_script_tag(path=str(AXE))
    found = tab.evaluate("""async () => {
        const r = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']},
                                           resultTypes: ['violations']});
        return r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
                                         targets: v.nodes.slice(0, 5).map((n) => n.target.join(' '))}));
    }""")
    return [v for v in found if v["impact"] in SERIOUS]


@needs_axe
@pytest.mark.parametrize("width", [1440, 390])
def test_the_explorer_has_no_serious_accessibility_violation(context, width):
    """English, then Chinese after the language switch, on one load of the page at each width."""
    tab = open_tab(context, PAGE)
    tab.set_viewport_size({"width": width, "height": 900})
    tab.wait_for_function("window.ablateExplorer && window.ablateExplorer.state")
    for lang in ("en", "zh"):
        if lang == "zh":
            tab.click("#lang")
            assert tab.evaluate("document.documentElement.lang") == "zh-CN"
        serious = _violations(tab)
        assert serious == [], lang + "\n" + "\n".join(
            f"{v['impact']} {v['id']}: {v['help']} at {v['targets']}" for v in serious)
    assert tab.errors == [] and tab.requests == []
