"""verify's check of a table's search index (plan/search.py, store/search_index.py).

Indexing is waited out first (FT.INFO ``indexing``); then the index the alias names must be
this definition's version, hold as many documents as MySQL has rows (those a ``where:``
keeps), and, for each TAG attribute of a text column, match as many documents per value as
MySQL's ``GROUP BY`` counts (``FT.SEARCH alias "@field:{value}" LIMIT 0 0``; values grouped by
the column's collation, as the TAG's case rule follows it); for a nested child's column, the
documents holding a child of each value (each document once; source/nesting.py). Differences
are counted in the table's check as ``search index`` problems (exit 1).

Over a sharded source (source/shards.py ``Union``) the rows are every shard's less those
``migrate`` leaves out as collisions (a later shard's row whose primary key or unique value an
earlier shard holds: reported as collisions already), and so are each value's: the shards'
groups of a value are one (the same text, but for case when the TAG ignores it, as it matches
them), less the collided rows of that value.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from migrator.mapping.kinds import Kind
from migrator.mapping.resolve import Resolved
from migrator.plan.search import Attribute, SearchIndex
from migrator.source.mysql import Source
from migrator.source.nesting import nested_value_counts
from migrator.source.where import clause
from migrator.store import search_index
from migrator.verify.report import TableCheck

MAX_VALUES = 100_000  # TAG values compared per attribute; beyond, a note says so


def check(src: Source, client: Any, r: Resolved, index: SearchIndex, out: TableCheck) -> None:
    alias = index.alias
    if not search_index.has_search(client):
        out.add("search index missing", alias, mysql=index.version, redis="no search on target")
        return
    now = search_index.current(client, alias)
    if now is None:
        out.add("search index missing", alias, mysql=index.version)
        return
    if now != index.version:
        out.add("search index definition", alias, mysql=index.version, redis=now)
    search_index.wait_indexed(client, alias)
    found = search_index.info(client, alias) or {}
    docs = int(found.get("num_docs", 0))
    where = clause(r)
    tags = [a for a in index.tags() if _compared(r, a)]
    collided = getattr(src, "collided", None)  # a sharded source's (source/shards.py)
    left, gone = (0, {}) if collided is None else collided(
        r.name, r.primary_key, list(dict.fromkeys(a.column for a in tags if not a.via)), where
    )  # fmt: skip
    rows = src.count(r.name, where) - left
    if docs != rows:
        out.add("search index documents", alias, mysql=rows, redis=docs)
    for attr in tags:
        if attr.via:
            values = _nested_counts(src, r, attr)
        else:
            values = src.value_counts(r.name, attr.column, where)
            if collided is not None:
                values = _merged(values, gone.get(attr.column, Counter()), attr.case_sensitive)
        if len(values) > MAX_VALUES:
            out.notes.append(
                f"search index {alias}: {attr.field} has {len(values):,} values; the first "
                f"{MAX_VALUES:,} were compared"
            )
            values = values[:MAX_VALUES]
        texts = [v.decode() if isinstance(v, bytes) else str(v) for v, _ in values]
        # the engine does not index an empty TAG (INDEXEMPTY is 2.10+): left out
        pairs = [(t, n) for t, (_, n) in zip(texts, values, strict=True) if t != ""]
        queries = [search_index.tag_query(attr.field, t) for t, _ in pairs]
        for (text, n), got in zip(pairs, search_index.counts(client, alias, queries), strict=True):
            if got != n:
                out.add("search index tag count", alias, f"{attr.field}={text}", n, got)


def _nested_counts(src: Source, r: Resolved, attr: Attribute) -> list[tuple[Any, int]]:
    """``nested_value_counts`` of the source, or of each shard of a sharded one (its
    ``sources``: a document is built from its top row's shard, its children read there),
    merged as the TAG matches them. A later shard's documents that collide with an earlier
    shard's are counted too (a limit: verify reports those collisions themselves)."""
    shards = getattr(src, "sources", None)
    if not shards:
        return nested_value_counts(src, r, attr.via, attr.column)
    values = [v for _, s in shards for v in nested_value_counts(s, r, attr.via, attr.column)]
    return _merged(values, Counter(), attr.case_sensitive)


def _compared(r: Resolved, attr: Attribute) -> bool:
    """A TAG attribute of a text column without ``formats:``: its counts are compared."""
    owner = attr.via[-1].table if attr.via else r  # a nested child's table
    column = owner.schema.column(attr.column)
    return column.kind is Kind.TEXT and attr.column not in dict(owner.table.formats)


def _merged(
    values: list[tuple[Any, int]], gone: Counter[bytes], case_sensitive: bool
) -> list[tuple[Any, int]]:
    """Every shard's (value, rows) as the TAG matches them: the groups of the same value
    (ignoring case unless ``case_sensitive``) as one, less the rows ``gone`` holds per value;
    emptied groups left out."""

    def key(v: Any) -> str:
        t = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
        return t if case_sensitive else t.casefold()

    groups: dict[str, list[Any]] = {}
    for v, n in values:
        groups.setdefault(key(v), [v, 0])[1] += n
    for v, n in gone.items():
        if key(v) in groups:
            groups[key(v)][1] -= n
    return [(v, n) for v, n in groups.values() if n > 0]
