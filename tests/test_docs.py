"""The documentation is the project's own: every link in README.md, docs/ and samples/ points
at a file (and heading) inside the repository, and nothing a user reads cites documents
outside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted([REPO / "README.md", REPO / "samples" / "README.md", *(REPO / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("#") and not fenced:
            text = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_stay_inside_the_repository_and_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "shared/" not in text and "SPEC" not in text
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(REPO), f"{target} leaves the repository"
        assert resolved.exists(), f"{page.name}: {target} does not exist"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: no heading #{anchor} in {path}"


def test_every_docs_page_is_in_the_index() -> None:
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in (REPO / "docs").glob("*.md"):
        if page.name != "README.md":
            assert f"({page.name})" in index, page.name
            assert f"(docs/{page.name})" in readme, page.name


def test_readme_says_how_to_start_and_to_run_from_the_venv() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for needed in ("make demo", "make test", "source .venv/bin/activate", ".venv/bin/pytest"):
        assert needed in readme, needed


def test_shipped_mappings_and_samples_cite_nothing_outside() -> None:
    for path in [*(REPO / "mappings").glob("*.yaml"), *(REPO / "samples").glob("*.sql")]:
        text = path.read_text(encoding="utf-8")
        assert "seed 0" not in text and "seeds 0" not in text and "shared/" not in text, path
