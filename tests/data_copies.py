"""Copies of exported data folders for tests that edit them."""

from __future__ import annotations


def edited_copy(src, dst) -> None:
    """A copy of an exported data folder that a test then edits by hand: its meta.json loses export's
    `files` record (SHA-256 per file), so the readers take it as a folder exported before records existed
    instead of refusing the edited files as a half-finished export."""
    import json
    import shutil
    from pathlib import Path

    shutil.copytree(src, dst)
    meta_path = Path(dst) / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta.pop("files", None)
    meta_path.write_text(json.dumps(meta))
