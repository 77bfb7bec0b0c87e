"""The explorer: trained ablate models run in the browser (issue 15).

`export_model` turns a run's checkpoint into plain data (config and float32 or float16 weights); `forward.js`,
beside this file, computes the same encoder from that data in JavaScript; page.html, page.css, i18n.js and
page.js, beside it too, are the page that `page.build_page` fills with them. Layer: reads ablate.config,
ablate.models, ablate.checkpoint, ablate.registry and ablate.fileio; never training, sweeps, results or
reports.
"""

from pathlib import Path

from .export import ExploreError, checkpoint_path, export_model

FORWARD_JS = Path(__file__).with_name("forward.js")  # the page's forward pass, inlined into it

__all__ = ["FORWARD_JS", "ExploreError", "checkpoint_path", "export_model", "main"]


def main(argv: list[str]) -> int:
    from .command import main as run

    return run(argv)
