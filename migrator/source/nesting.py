"""The rows of a nesting tree (plan/nesting.py) read from MySQL: for a batch of top rows,
their children, then the children's children, each level by ``WHERE (by) IN (...)`` on the
parents' values, on the source's reading connection -- inside its snapshot when one is
open, so that the documents of a batch come from one consistent read. A ``whole`` table's rows
are read without its filter, and a ``roots`` table's rows with a NULL key after the top's
(``all_roots``): the rows kept beside the documents (plan/nesting.py's ``keeping``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from migrator.mapping.kinds import Kind
from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Command, Row
from migrator.plan.nesting import Groups, Level, commands, group
from migrator.plan.nesting_side import side_commands, walk
from migrator.plan.search import Hop
from migrator.source.expiry import alive
from migrator.source.mysql import Source
from migrator.source.selects import keyset_value
from migrator.source.where import clause

IN_LIST = 1000  # parent values per query
Keep = Callable[[Level, list[Any]], list[Any]]  # a level's page of rows -> those wanted


def children(
    src: Source, level: Level, parents: Sequence[Row], groups: Groups, keep: Keep | None = None
) -> None:
    """Read each child level of ``level`` for the ``parents`` rows, recursively, into
    ``groups`` (``keep``: as in ``all_trees``, the rows of each level wanted; a row left out
    takes its own children with it)."""
    for child in level.children:
        lay = child.layout
        schema = lay.resolved.schema
        by = [lay.select[i] for i in child.by]
        kinds = [schema.column(c).kind for c in by]
        values = {tuple(p[i] for i in child.refs) for p in parents}
        bound = [tuple(keyset_value(v, k) for v, k in zip(vs, kinds)) for vs in values]
        wanted = sorted((vs for vs in bound if None not in vs), key=repr)
        selector = src.selector(child.name, lay.select)
        where = reading(child)
        rows: list[Row] = []
        for i in range(0, len(wanted), IN_LIST):
            rows += src.rows_where(child.name, selector, by, wanted[i : i + IN_LIST], where)
        if keep is not None and rows:
            rows = keep(child, rows)
        groups[id(child)] = group(child, rows)
        if child.children and rows:
            children(src, child, rows, groups, keep)


def documents(src: Source, top: Level, rows: Sequence[Row]) -> list[Command]:
    """The writes of the whole documents of ``rows`` (rows of the top table)."""
    groups: Groups = {}
    children(src, top, rows, groups)
    return commands(top, rows, groups)


def all_documents(src: Source, top: Level, size: int) -> Iterator[list[Command]]:
    """The writes of every top row's document, ``size`` rows at a time (each page read
    whole, then its children), in the current snapshot of ``src``."""
    for rows, groups in all_trees(src, top, size):
        yield commands(top, rows, groups)


def all_written(
    src: Source, top: Level, size: int, keep: Keep | None = None
) -> Iterator[list[Command]]:
    """``all_documents``' writes followed, page by page, by the rows' side structure
    (plan/nesting_side.py): what migrate and sync's first load write (``keep``: as in
    ``all_trees``)."""
    for rows, groups in all_trees(src, top, size, keep):
        yield commands(top, rows, groups) + side_commands(top, rows, groups)
    for level, rows, groups in all_roots(src, top, size):
        yield side_commands(top, rows, groups, level)


def reading(level: Level) -> Any:
    """The condition a level's rows are read with: its filter, but for a ``whole`` table's."""
    return alive(level.layout.resolved) if level.whole else clause(level.layout.resolved)


def all_roots(src: Source, top: Level, size: int) -> Iterator[tuple[Level, list[Row], Groups]]:
    """The rows with a NULL foreign key of each ``roots`` level of the tree, with their
    descendants, ``size`` at a time (over a union of shards: each shard's in turn, as its
    children are on it)."""
    shards = [s for _, s in getattr(src, "sources", [])] or [src]
    for level in walk(top)[1:]:
        if not level.roots:
            continue
        lay = level.layout
        selector = src.selector(level.name, lay.select)
        pk = lay.resolved.primary_key
        kinds = [lay.resolved.schema.column(c).kind for c in pk]
        null = sa.or_(*(sa.column(lay.select[i]).is_(None) for i in level.by))
        where = reading(level)
        where = null if where is None else sa.and_(null, where)
        for shard in shards:
            after = None
            while True:
                rows = shard.page(level.name, selector, pk, size, after, where)
                if not rows:
                    break
                groups: Groups = {}
                children(shard, level, rows, groups)
                yield level, list(rows), groups
                if len(rows) < size:
                    break
                after = [keyset_value(rows[-1][lay.pos[c]], k) for c, k in zip(pk, kinds)]


def all_trees(
    src: Source, top: Level, size: int, keep: Keep | None = None
) -> Iterator[tuple[list[Row], Groups]]:
    """Every top row with its descendants, ``size`` top rows at a time (each page read
    whole, then its children), in the current snapshot of ``src``. ``keep``: the rows of a
    level's page wanted (a sharded source's: the top rows, and nested children, the shard
    owns), before their children are read."""
    lay = top.layout
    selector = src.selector(top.name, lay.select)
    pk = lay.resolved.primary_key
    kinds = [lay.resolved.schema.column(c).kind for c in pk]
    where = reading(top)
    after = None
    while True:
        rows = src.page(top.name, selector, pk, size, after, where)
        if not rows:
            return
        kept = list(rows) if keep is None else keep(top, list(rows))
        groups: Groups = {}
        children(src, top, kept, groups, keep)
        yield kept, groups
        if len(rows) < size:
            return
        after = [keyset_value(rows[-1][lay.pos[c]], k) for c, k in zip(pk, kinds)]


def nested_value_counts(
    src: Source, top: Resolved, hops: Sequence[Hop], column: str
) -> list[tuple[Any, int]]:
    """(value, documents) per value of a nested child's ``column`` (the table of the last of
    ``hops``, nested down from ``top``): how many of the top table's documents hold a child
    with that value, each document once, values grouped by the column's collation -- a search
    index's TAG counts of a nested path are compared with them. A child belongs to the
    parent whose key its ``by`` columns hold byte for byte, as in the documents
    (plan/nesting.py); each table's row filter applies; NULL is left out."""
    levels = [top, *(h.table for h in hops)]
    subs = []
    for i, r in enumerate(levels):
        need = list(r.primary_key) if i == 0 else list(hops[i - 1].by)
        need += list(hops[i].refs) if i < len(hops) else [column]
        need = list(dict.fromkeys(need))
        t = sa.table(r.name, *(sa.column(c) for c in need))
        stmt = sa.select(*(t.c[c] for c in need)).select_from(t)
        where = clause(r)
        subs.append((stmt if where is None else stmt.where(where)).subquery(f"level{i}"))
    joined: Any = subs[0]
    for i, hop in enumerate(hops):
        parent, child = subs[i], subs[i + 1]
        kinds = [hop.table.schema.column(c).kind for c in hop.by]
        same = [
            binary(child.c[b], k) == binary(parent.c[ref], k)
            for b, ref, k in zip(hop.by, hop.refs, kinds, strict=True)
        ]
        joined = joined.join(child, sa.and_(*same))
    value = subs[-1].c[column]
    keys = [subs[0].c[c].label(f"k{n}") for n, c in enumerate(top.primary_key)]
    pairs = (  # each document once per value (as the collation compares values)
        sa.select(value.label("value"), *keys)
        .select_from(joined)
        .where(value.is_not(None))
        .distinct()
        .subquery("pairs")
    )
    stmt = sa.select(sa.func.min(pairs.c.value), sa.func.count()).group_by(pairs.c.value)
    return [(v, int(n or 0)) for v, n in src.fetch_all(stmt)]


def binary(col: Any, kind: Kind) -> Any:
    return sa.cast(col, mysql.BINARY()) if kind is Kind.TEXT else col
