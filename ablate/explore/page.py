"""The explorer page: one self-contained HTML file that runs trained ablate models in the browser.

`build_page(models, images, mean, std)` fills page.html (the markup) with page.css, forward.js (the model),
i18n.js (every label in English and Chinese) and page.js (the nine demos), the exported models (JSON, from
`export_model`) and a few MNIST test images as raw pixels; nothing is fetched (no server, no CDN, no other
file), so the page opens offline from disk. `page_model(exported, name)` strips what must not travel with the
page: absolute paths (`run.dir`, `source`).

What the page keeps for tests (window.ablateExplorer) is described at the top of page.js.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from . import FORWARD_JS

HERE = Path(__file__).parent
MARKER = re.compile(r"/\*(STYLE|FORWARD|I18N|PAGE|MODELS|IMAGES)\*/")
PARTS = {"STYLE": "page.css", "FORWARD": FORWARD_JS.name, "I18N": "i18n.js", "PAGE": "page.js"}


def page_model(exported: dict[str, Any], name: str) -> dict[str, Any]:
    """An exported model as the page carries it: named, without the run's absolute paths."""
    model = {k: v for k, v in exported.items() if k != "source"}
    model["config"] = {k: v for k, v in exported["config"].items()
                       if k != "run.dir" and not (isinstance(v, str) and v.startswith("/"))}
    model["name"] = name
    return model


# Inside <script> the HTML parser still reads `<!--`, `<script` and `</script`: a run named `<!--<script>` put it
# in the "double-escaped" state and the page went blank. JSON's \u003c escapes say the same characters to JSON.parse.
SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                             "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _script_json(value: Any) -> str:
    """`value` as JSON that holds no character the HTML parser acts on inside a <script> block."""
    return json.dumps(value, separators=(",", ":")).translate(SCRIPT_SAFE)


def build_page(models: list[dict], images: list[dict], mean: float, std: float) -> str:
    """The page's HTML: `models` as page_model returns them, `images` as images.mnist_test_images does."""
    fills = {name: (HERE / file).read_text() for name, file in PARTS.items()}
    fills["MODELS"] = _script_json(models)
    fills["IMAGES"] = _script_json({"mean": mean, "std": std, "images": images})
    html = (HERE / "page.html").read_text()
    # one pass over the template: a filled text (a model named "/*PAGE*/") is never searched again
    return MARKER.sub(lambda m: fills[m.group(1)], html)
