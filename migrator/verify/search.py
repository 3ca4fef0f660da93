"""verify's check of a table's search index (plan/search.py, store/search_index.py).

Indexing is waited out first (FT.INFO ``indexing``); then the index the alias names must be
this definition's version, hold as many documents as MySQL has rows (those a ``where:``
keeps), and, for each TAG attribute of a text column, match as many documents per value as
MySQL's ``GROUP BY`` counts (``FT.SEARCH alias "@field:{value}" LIMIT 0 0``; values grouped by
the column's collation, as the TAG's case rule follows it); for a nested child's column, the
documents holding a child of each value (each document once; source/nesting.py). Differences
are counted in the table's check as ``search index`` problems (exit 1).
"""

from __future__ import annotations

from typing import Any

from migrator.mapping.kinds import Kind
from migrator.mapping.resolve import Resolved
from migrator.plan.search import SearchIndex
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
    rows = src.count(r.name, where)
    if docs != rows:
        out.add("search index documents", alias, mysql=rows, redis=docs)
    for attr in index.tags():
        owner = attr.via[-1].table if attr.via else r  # a nested child's table
        column = owner.schema.column(attr.column)
        if column.kind is not Kind.TEXT or attr.column in dict(owner.table.formats):
            continue
        if attr.via:
            values = nested_value_counts(src, r, attr.via, attr.column)
        else:
            values = src.value_counts(r.name, attr.column, where)
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
