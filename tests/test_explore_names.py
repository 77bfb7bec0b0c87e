"""A run name the HTML parser would read as markup (`<!--<script>`, `</script>`, U+2028) leaves the explorer page's
embedded JSON intact: the script blocks hold no `<`, `>` or `&`, and parse back to exactly the data; in Chromium the
page renders and lists the model under that name."""

from __future__ import annotations

import json
import re

import pytest

from ablate.explore.page import build_page

# the browser half: Chromium via Playwright, gated as the other browser modules are (tests/browser_gate.py)
from tests.browser_gate import browser_type_launch_args, gate  # noqa: F401 - a fixture used by name
from tests.test_explore_browser import _model, _opened, browser_context_args  # noqa: F401 - fixtures

NAMES = ["<!--<script>", "</script><script>alert(1)</script>", "a&b>c", "line\u2028sep\u2029para", "plain"]


def _blocks(html: str) -> dict[str, str]:
    return dict(re.findall(r'<script type="application/json" id="(\w+)">(.*?)</script>', html, re.S))


def test_embedded_json_escapes_markup_and_parses_back():
    models = [{"name": name, "params": 3, "weights": {"w": {"shape": [1], "b64": "AAAAAA=="}}} for name in NAMES]
    images = [{"index": 0, "label": 7, "pixels": [0, 255]}]
    html = build_page(models, images, 0.13, 0.31)
    blocks = _blocks(html)
    assert set(blocks) == {"models", "images"}
    for text in blocks.values():
        assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}, text[:200]
    assert json.loads(blocks["models"]) == models
    assert json.loads(blocks["images"]) == {"mean": 0.13, "std": 0.31, "images": images}


@gate()
@pytest.mark.slow
def test_page_renders_a_model_named_like_markup(tmp_path, page):
    runs = (_model(tmp_path, "<!--<script>", {}, seed=0), _model(tmp_path, "plain", {}, seed=1))
    for opened in _opened(page, tmp_path, runs):  # afterwards: no console error, no request left the file
        p = opened["page"]
        p.wait_for_function("window.ablateExplorer && window.ablateExplorer.last !== null")
        options = p.eval_on_selector_all("#model option", "os => os.map(o => o.textContent)")
        assert [o.split(" (")[0] for o in options] == ["<!--<script>", "plain"]
        assert len(p.evaluate("window.ablateExplorer.last.probabilities")) == 10
