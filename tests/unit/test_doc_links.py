"""Every relative link of README.md and docs/*.md points to a file that exists and, when it
names an anchor, to a heading of that file (anchors as GitHub makes them from headings)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`[^`]*`")


def _prose(path: Path) -> list[tuple[int, str]]:
    """The lines of a page outside fenced code blocks, with their numbers."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings (a repeated heading gets -1, -2, … as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose(path):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """The relative link targets of a page's prose (not in code), with their line numbers."""
    found = []
    for number, line in _prose(path):
        for target in _LINK.findall(_CODE_SPAN.sub("", line)):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: …
                found.append((number, target))
    return found


def test_the_slugs_are_githubs():
    assert slug("The governed table: `memgov.long_term_memory_items`") == (
        "the-governed-table-memgovlong_term_memory_items"
    )
    assert slug("Changing a policy safely") == "changing-a-policy-safely"
    assert slug("memgov in your project's Alembic history") == "memgov-in-your-projects-alembic-history"
    assert slug("The decision log: append-only and sealed") == "the-decision-log-append-only-and-sealed"


def test_the_checker_finds_links_and_skips_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\nSee [a](other.md#x) and `[not](a-link.md)`.\n\n```\n[no](code.md)\n# not a heading\n```\n"
        "[web](https://example.com) [self](#title)\n",
        encoding="utf-8",
    )
    assert links(page) == [(3, "other.md#x"), (9, "#title")]
    assert anchors(page) == {"title"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = []
    for number, target in links(page):
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        where = f"{page.relative_to(REPO)}:{number}: {target}"
        if not destination.exists():
            broken.append(f"{where}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{where}: no heading with anchor #{anchor}")
    assert broken == [], "\n".join(broken)
