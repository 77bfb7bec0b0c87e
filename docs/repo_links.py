"""MkDocs hooks (mkdocs.yml: `hooks`): the README is the site's home page, and a page's links to files of
the repository outside docs/ (reports, sweep files) are checked here, since MkDocs knows docs/ alone.

Such a link must name a file that exists, or the build fails naming the page and the link; it stays
relative, so it works where the Markdown is read (a forge, an editor) and in the site built into site/
beside docs/ (`use_directory_urls: false`: docs/x.md is site/x.html, one folder deep as before)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

LINK = re.compile(r"(\]\()([^)\s]+)(\))")
KEEP = re.compile(r"^([a-z][a-z0-9+.-]*:|#|/)")  # a URL, an anchor on the page, an absolute path
REPO = "repo-file:"  # what a checked link is while MkDocs validates the rest: a scheme it leaves alone
CODE = re.compile(r"^(```|~~~).*?^\1[^\n]*$|(`+)(?!`).+?(?<!`)\2(?!`)", re.M | re.S)  # fenced blocks, code spans


def _prose(text: str, change) -> str:
    """`LINK.sub(change, text)` outside code: a `[x](y)` in a code block or span is code, not a link."""
    out, at = [], 0
    for code in CODE.finditer(text):
        out += [LINK.sub(change, text[at:code.start()]), code[0]]
        at = code.end()
    return "".join([*out, LINK.sub(change, text[at:])])


def _root(config) -> Path:
    return Path(config.config_file_path).resolve().parent


def on_files(files, config):
    """The README, its links made relative to docs/, as index.md."""
    text = (_root(config) / "README.md").read_text(encoding="utf-8")

    def moved(m: re.Match) -> str:
        target = m[2] if KEEP.match(m[2]) else m[2].removeprefix("./")
        if not KEEP.match(target):
            target = target.removeprefix("docs/") if target.startswith("docs/") else "../" + target
        return m[1] + target + m[3]

    home = _prose(text, moved)
    files.append(File.generated(config, "index.md", content=home))
    return files


def on_page_markdown(markdown, page, config, files):
    docs, root = Path(config.docs_dir).resolve(), _root(config)
    here = (docs / page.file.src_uri).parent

    def check(m: re.Match) -> str:
        target = m[2]
        path, _, anchor = target.partition("#")
        if KEEP.match(target) or (here / path).resolve().is_relative_to(docs):
            return m[0]  # MkDocs checks links within docs/, anchors included
        full = (here / path).resolve()
        if not full.is_relative_to(root) or not full.exists():
            raise PluginError(f"{page.file.src_uri} links to {target!r}: no such file in the repository")
        return m[1] + REPO + full.relative_to(root).as_posix() + (f"#{anchor}" if anchor else "") + m[3]

    return _prose(markdown, check)


def on_page_content(html, page, config, files):
    """A checked link back to a path relative to the page's place in the site."""
    root, site = _root(config), Path(config.site_dir).resolve()
    where = (site / page.file.dest_uri).parent
    return re.sub(rf'(href|src)="{REPO}([^"#]*)',
                  lambda m: f'{m[1]}="{Path(os.path.relpath(root / m[2], where)).as_posix()}', html)
