"""Nested documents (``nest:``) over a sharded source (docs/sharding.md#nested-documents).

A sharded schema keeps a parent's children on the parent's shard (Vitess's keyspace ID,
Citus's co-located tables): a document is built from its top row's shard alone, its children
and theirs read from that shard (``shard_trees``: each shard's top rows in turn, ``CURRENT``
naming it, a later shard's top rows, and nested children, less those colliding with an
earlier shard's, as ``Union.batches`` leaves them out).

A child whose parent row is on another shard than its own (a *cross-shard child*) is in no
document: ``cross_shard`` finds them, per shard and nesting, by the children whose parent the
shard does not hold (``NOT EXISTS``, at most ``SCANNED`` per table and shard), then looks those
parents up on the other shards.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import sqlalchemy as sa

from migrator.plan.batch import Row
from migrator.plan.nesting import Groups, Level
from migrator.plan.nesting_side import walk
from migrator.plan.owners import CURRENT
from migrator.source.mysql import Source
from migrator.source.nesting import all_trees, binary, reading
from migrator.source.overlaps import Overlaps
from migrator.source.selects import column_expr, convert_row, keyset_value
from migrator.source.shards import Union
from migrator.source.where import clause

#: children without their parent on their shard read per table and shard
SCANNED = 10000


def one_source(src: Source) -> Source:
    """The source a sample's children are read from: a union's first shard (its rows)."""
    return src.first if isinstance(src, Union) else src


def shard_trees(src: Source, top: Level, size: int) -> Iterator[tuple[list[Row], Groups]]:
    """``all_trees`` over one source, or over each shard of a union in turn (see above)."""
    if not isinstance(src, Union):
        yield from all_trees(src, top, size)
        return
    for k, (name, shard) in enumerate(src.sources):
        token = CURRENT.set(name)
        apart = partial(_apart, src, k)
        try:
            for rows, groups in all_trees(shard, top, size, apart if k else None):
                CURRENT.set(name)  # (the consumer ran in between)
                yield rows, groups
        finally:
            CURRENT.reset(token)


def _apart(union: Union, k: int, level: Level, rows: list[Any]) -> list[Any]:
    """The rows of ``level`` read from the ``k``-th shard less those colliding with an earlier
    shard's (a top row, or a nested child whose primary key an earlier shard's child holds:
    ``migrate`` claims each as any row, store/claims.py)."""
    lay = level.layout
    name, shard = union.sources[k]
    selector = shard.selector(level.name, lay.select)
    return Overlaps().apart(union.sources[:k], name, level.name, selector,
                            lay.resolved.primary_key, union.uniques.get(level.name, []),
                            rows, reading(level))  # fmt: skip


@dataclass(frozen=True)
class CrossChild:
    """A child row on ``shard`` whose parent row is on ``other``: in no document."""

    table: str
    parent: str
    shard: str
    other: str
    key: str  # the child's primary key, as text: ``id=5``
    columns: tuple[str, ...]  # the child's columns naming the parent
    values: str  # their values, as text
    sql: str  # lists, on ``shard``, the children whose parent it does not hold

    def describe(self) -> str:
        return (
            f"{self.table} ({self.key}) is on shard {self.shard}, its parent {self.parent} "
            f"({self.values}) on shard {self.other}: a document is built from its top row's "
            f"shard, so this child is in none; find such rows on shard {self.shard} with: "
            f"{self.sql}"
        )


def cross_shard(
    sources: Sequence[tuple[str, Source]], top: Level, only: str | None = None
) -> Iterator[CrossChild]:
    """The cross-shard children of every nesting under ``top`` on each shard (``only``: on
    that one), each parent looked up on the other shards."""
    for level in walk(top):
        for child in level.children:
            for name, src in sources:
                if only is None or name == only:
                    others = [(n, s) for n, s in sources if n != name]
                    yield from _crossing(src, name, others, level, child)


def orphans(src: Source, parent: Level, child: Level) -> list[Row]:
    """``child``'s rows on ``src`` (as its layout selects them) whose parent row ``src`` does
    not hold, their foreign key not NULL and their row filter keeping them: at most
    ``SCANNED``, in primary-key order."""
    lay, play = child.layout, parent.layout
    by = [lay.select[i] for i in child.by]
    refs = [play.select[i] for i in child.refs]
    sel = src.selector(child.name, lay.select)
    c = sa.table(child.name, *(sa.column(n) for n in {*sel.names, *by})).alias("c")
    p = sa.table(parent.name, *(sa.column(n) for n in refs)).alias("p")
    kinds = [lay.resolved.schema.column(b).kind for b in by]
    same = [binary(p.c[r], k) == binary(c.c[b], k) for b, r, k in zip(by, refs, kinds)]
    where = clause(lay.resolved)
    stmt = (
        sa.select(*(column_expr(col, c) for col in sel.columns))
        .where(*(c.c[b].is_not(None) for b in by), ~sa.exists().where(*same))
        .where(*([] if where is None else [where]))
        .order_by(*(c.c[n] for n in lay.resolved.primary_key))
        .limit(SCANNED)
    )
    return [convert_row(r, sel) for r in src.fetch_all(stmt)]


def describe(row: Row, child: Level, parent: Level) -> tuple[str, str, str]:
    """A child row's primary key and its parent's key, as text (``id=5``), and the SQL that
    lists such children (``orphans_sql``)."""
    lay = child.layout
    by = [lay.select[i] for i in child.by]
    refs = [parent.layout.select[i] for i in child.refs]
    key = _text([(n, row[lay.pos[n]]) for n in lay.resolved.primary_key])
    return (
        key,
        _text([(r, row[i]) for r, i in zip(refs, child.by)]),
        orphans_sql(child.name, parent.name, by, refs),
    )


def _crossing(
    src: Source, name: str, others: list[tuple[str, Source]], parent: Level, child: Level
) -> Iterator[CrossChild]:
    found = orphans(src, parent, child)
    if not found:
        return
    refs = [parent.layout.select[i] for i in child.refs]
    pkinds = [parent.layout.resolved.schema.column(r).kind for r in refs]
    wanted = {tuple(r[i] for i in child.by) for r in found}
    bound = sorted({tuple(keyset_value(v, k) for v, k in zip(vs, pkinds)) for vs in wanted},
                   key=repr)  # fmt: skip
    held: dict[tuple[Any, ...], str] = {}
    for other, osrc in others:
        osel = osrc.selector(parent.name, refs)
        for got in osrc.rows_where(parent.name, osel, refs, bound):
            held.setdefault(tuple(got), other)
    by = tuple(child.layout.select[i] for i in child.by)
    for row in found:
        value = tuple(row[i] for i in child.by)
        if value in held:
            key, values, sql = describe(row, child, parent)
            yield CrossChild(child.name, parent.name, name, held[value], key, by, values, sql)


def _text(pairs: list[tuple[str, Any]]) -> str:
    return ", ".join(f"{n}={(v or b'NULL').decode('utf-8', 'replace')}" for n, v in pairs)


def orphans_sql(child: str, parent: str, by: list[str], refs: list[str]) -> str:
    """The SQL that lists, on a shard, the children whose parent that shard does not hold."""
    same = " AND ".join(f"p.`{r}` = c.`{b}`" for b, r in zip(by, refs))
    held = " AND ".join(f"c.`{b}` IS NOT NULL" for b in by)
    return (
        f"SELECT c.* FROM `{child}` AS c WHERE {held} AND NOT EXISTS "
        f"(SELECT 1 FROM `{parent}` AS p WHERE {same})"
    )
