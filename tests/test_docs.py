"""The manual: README.md is its front door (at most 250 lines), docs/ its pages, and both build into a
static site with MkDocs (mkdocs.yml, docs/repo_links.py) in which every warning is an error, so a link to a
page, an anchor or a repository file that is not there fails the build."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, timeout=120)


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail into a page under docs/"


def test_the_manual_builds_with_every_link_checked(tmp_path):
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "Your own ablation in three steps" in home and 'href="install.html"' in home  # the README, its links
    # a link to a repository file outside docs/ points at that file from the page's place in the site
    page = tmp_path / "site" / "reports.html"
    href = re.search(r'href="([^"]*FINDINGS\.md)"', page.read_text(encoding="utf-8"))[1]
    assert (page.parent / href).resolve() == ROOT / "reports" / "FINDINGS.md", href


@pytest.mark.parametrize(("link", "said"), [
    ("[a page](missing.md)", "'missing.md', but the target is not found among documentation files"),
    ("[an anchor](b.md#no-such-heading)", "does not contain an anchor '#no-such-heading'"),
    ("[a file](../no-such-file.txt)", "a.md links to '../no-such-file.txt': no such file in the repository"),
    ("[outside](../../elsewhere.txt)", "a.md links to '../../elsewhere.txt': no such file in the repository"),
])
def test_a_broken_link_fails_the_build(tmp_path, link, said):
    """The same configuration and hook on a two-page manual: every kind of broken link is an error."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config.update(nav=["index.md", "a.md", "b.md"], hooks=[str(ROOT / "docs" / "repo_links.py")])
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (repo / "README.md").write_text("# Home\n\n[a](docs/a.md), [a again](./docs/a.md) and [a file](present.txt)\n\n"
                                    "```python\nprint('[code](not-a-link)')\n```\n", encoding="utf-8")
    (repo / "present.txt").write_text("here\n", encoding="utf-8")
    (repo / "docs" / "b.md").write_text("# B\n\n## A heading\n", encoding="utf-8")
    (repo / "docs" / "a.md").write_text("# A\n\n[b](b.md#a-heading), [a file](../present.txt), `[code](../nowhere.md)`\n",
                                        encoding="utf-8")
    fine = _build(repo / "mkdocs.yml", tmp_path / "site")  # the links that are there pass, and code is not a link
    assert fine.returncode == 0, fine.stderr
    assert "[code](../nowhere.md)" in (tmp_path / "site" / "a.html").read_text(encoding="utf-8")
    (repo / "docs" / "a.md").write_text(f"# A\n\n{link}\n", encoding="utf-8")
    done = _build(repo / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and said in done.stderr, done.stderr
