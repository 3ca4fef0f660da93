"""``migrator init``: draft a mapping from the live schema."""

from __future__ import annotations

from migrator.mapping.scaffold import Draft, draft
from migrator.source.mysql import Source


def init(source: str, tables: list[str] | None = None) -> Draft:
    """Read the live schema at ``source`` and draft its mapping."""
    with Source(source) as src:
        return draft(src.schema(), source=source, tables=tables)
