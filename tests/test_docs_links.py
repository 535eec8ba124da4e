"""Every relative link in README.md, docs/*.md, benchmarks/README.md, benchmarks/log/*.md and data/README.md
points at a file that exists and, for a .md anchor, at a heading of that file (GitHub's slugs) or an `<a id="...">`
in it (docs/speed.md's rows, which the README's headline table links). Every docs page is linked from another
page. No network: http(s) and mailto links are not followed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
LOG = sorted((ROOT / "benchmarks" / "log").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS, ROOT / "benchmarks" / "README.md", *LOG, ROOT / "data" / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HTML_ANCHOR = re.compile(r"<a (?:id|name)=\"([^\"]+)\"")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found, seen, fenced = set(), {}, False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        found.update(HTML_ANCHOR.findall(line))
        m = re.match(r"#{1,6} (.*)", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(page: Path):
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield from LINK.findall(line)


def test_slug_is_githubs():
    assert slug("`embedtune train`: inputs, tokens") == "embedtune-train-inputs-tokens"
    assert slug("Rare words: the form-context start (issue 14)") == "rare-words-the-form-context-start-issue-14"
    assert slug("train_speed") == "train_speed"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_an_html_anchor_counts(tmp_path):
    page = tmp_path / "p.md"
    page.write_text('# Title\n\n| x |\n|---|\n| <a id="row-one"></a>figure |\n```\n<a id="fenced"></a>\n```\n')
    assert anchors(page) == {"title", "row-one"}


def test_every_docs_page_is_linked_from_another_page():
    """A page nobody links is a page nobody finds (sqlite-utils keeps its docs the same way)."""
    linked = set()
    for page in PAGES:
        for target in links(page):
            path = target.partition("#")[0]
            if path and not re.match(r"[a-z]+:", path):
                file = (page.parent / path).resolve()
                if file != page.resolve():
                    linked.add(file)
    missing = [p.name for p in DOCS if p.resolve() not in linked]
    assert not missing, f"docs pages no other page links: {missing}"
