"""What the stages ask of a table besides its batches: counts, the values of a column, keys
and unique values several rows share, the newest rows, rows by value, pages and random keys.
Each is one statement read whole through ``Source.fetch_all`` (retried as it says)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from migrator.mapping.kinds import FLOATS, Kind, zero_text
from migrator.mapping.schema import Column, Schema
from migrator.plan.values import converter
from migrator.source.selects import (
    RawRow,
    Selector,
    after_key,
    bindable,
    column_expr,
    convert_row,
    weight_expr,
)


class Lookups:
    """The look-ups of ``Source`` (source/mysql.py), which gives them ``fetch_all`` and
    ``schema``."""

    def fetch_all(self, stmt: sa.sql.Executable) -> list[RawRow]:
        raise NotImplementedError

    def schema(self, only: list[str] | None = None) -> Schema:
        raise NotImplementedError

    def count(self, table: str, where: Any = None) -> int:
        """The table's rows (``where``: those a row filter keeps, source/where.py)."""
        stmt = sa.select(sa.func.count()).select_from(sa.table(table))
        if where is not None:
            stmt = stmt.where(where)
        row = self.fetch_all(stmt)[0]
        return int(row[0] or 0)

    def left_out(
        self,
        table: str,
        columns: Sequence[str],
        values: Sequence[tuple[bytes, ...]],
        kept: Any,
        collations: Sequence[str | None] = (),
    ) -> set[tuple[bytes, ...]]:
        """Of ``values`` (of ``columns``, as text), those of rows the table holds but its row
        filter ``kept`` leaves out (a NULL of the filter leaves a row out, as it does there;
        None: any row), as MySQL's ``=`` finds them: a column with a collation in
        ``collations`` by the server's comparison key (source/weights.py). With no filter,
        a value spelt as a row's own is left out: that row is no left-out one."""
        from migrator.source.weights import Weights

        collated = tuple(collations) or (None,) * len(columns)
        t = sa.table(table, *(sa.column(c) for c in columns))
        kinds = [self.schema().tables[table].column(c).kind for c in columns]
        exprs = [t.c[c] if k is None else weight_expr(t.c[c], k) for c, k in zip(columns, collated)]
        pairs = [(k, x) for v in values for k, x in zip(collated, v) if k is not None]
        keys = Weights(self).keys(pairs) if pairs else {}
        out: set[tuple[bytes, ...]] = set()
        for at in range(0, len(values), 500):
            part = values[at : at + 500]
            matches = [
                sa.and_(*(t.c[c] == bindable(x, k) for c, x, k in zip(columns, v, kinds)))
                for v in part
            ]
            stmt = sa.select(*exprs, *(t.c[c] for c in columns)).where(sa.or_(*matches))
            if kept is not None:
                stmt = stmt.where(sa.not_(sa.func.coalesce(kept, sa.false())))
            rows = [tuple(_text(x) for x in row) for row in self.fetch_all(stmt)]
            found = {unsigned(row[: len(columns)], kinds) for row in rows}
            spelt = {row[len(columns) :] for row in rows} if kept is None else set()
            for v in part:
                key = unsigned(tuple(x if k is None else keys[k, x] for k, x in zip(collated, v)),
                               kinds)  # fmt: skip
                if key in found and v not in spelt:
                    out.add(v)
        return out

    def value_counts(self, table: str, column: str, where: Any = None) -> list[tuple[Any, int]]:
        """(value, rows) per value of the column, NULL left out, grouped by the column's own
        collation (a search index's TAG counts are compared with them)."""
        t = sa.table(table, sa.column(column))
        c = t.c[column]
        stmt = (
            sa.select(sa.func.min(c), sa.func.count())
            .where(c.is_not(None), *([] if where is None else [where]))
            .group_by(c)
        )
        return [(v, int(n or 0)) for v, n in self.fetch_all(stmt)]

    def shared_keys(
        self, table: str, columns: Sequence[Column], where: Any = None
    ) -> tuple[int, int]:
        """For key columns MySQL does not keep unique: (keys that several rows share, rows
        beyond one per such key, which Redis does not hold as they are). Rows with a NULL in
        the key are left out (migrate rejects them); text compares byte for byte, as Redis
        keys do."""
        t = sa.table(table, *(sa.column(c.name) for c in columns))
        group = [
            sa.cast(column_expr(c, t), mysql.BINARY()) if c.kind is Kind.TEXT else column_expr(c, t)
            for c in columns
        ]
        shared = (
            sa.select(sa.func.count().label("n"))
            .select_from(t)
            .where(*(t.c[c.name].is_not(None) for c in columns))
            .where(*([] if where is None else [where]))
            .group_by(*group)
            .having(sa.func.count() > 1)
            .subquery()
        )
        stmt = sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(shared.c.n), 0))
        keys, rows = self.fetch_all(stmt.select_from(shared))[0]
        return int(keys or 0), int(rows or 0) - int(keys or 0)

    def max_of(self, table: str, column: Column) -> bytes | None:
        stmt = sa.select(sa.func.max(column_expr(column)))
        stmt = stmt.select_from(sa.table(table, sa.column(column.name)))
        return self.fetch_all(stmt)[0][0]

    def latest(
        self, table: str, pk: Sequence[Column], order_by: Column, limit: int, where: Any = None
    ) -> list[RawRow]:
        """The primary keys of the newest ``limit`` rows by ``order_by`` (NULLs never), of
        the rows ``where`` (a row filter) keeps."""
        t = sa.table(table, *(sa.column(c.name) for c in pk), sa.column(order_by.name))
        o = t.c[order_by.name]
        stmt = (
            sa.select(*(column_expr(c, t) for c in pk))
            .where(o.is_not(None), *([] if where is None else [where]))
            .order_by(o.desc(), *(t.c[c.name].desc() for c in pk))
            .limit(limit)
        )
        sel = Selector(tuple(c.name for c in pk), tuple(pk), tuple(converter(c.kind) for c in pk))
        return [convert_row(r, sel) for r in self.fetch_all(stmt)]

    def sharing_rows(
        self,
        table: str,
        selector: Selector,
        columns: Sequence[Column],
        limit: int,
        where: Any = None,
    ) -> list[RawRow]:
        """The rows (selected as ``batches`` does), at most ``limit``, whose ``columns`` hold
        values several rows share (a ``unique:`` MySQL does not enforce; NULLs left out, text
        compared byte for byte, as ``shared_keys`` counts them). Used by verify."""
        names = {*selector.names, *(c.name for c in columns)}
        t = sa.table(table, *(sa.column(n) for n in names))
        inner = sa.table(table, *(sa.column(c.name) for c in columns)).alias("shared")

        def group(c: Column, of: Any) -> Any:
            return (
                sa.cast(column_expr(c, of), mysql.BINARY())
                if c.kind is Kind.TEXT
                else column_expr(c, of)
            )

        labels = [f"v{i}" for i in range(len(columns))]  # grouped by alias: only_full_group_by
        shared = (
            sa.select(*(group(c, inner).label(n) for c, n in zip(columns, labels)))
            .where(*(inner.c[c.name].is_not(None) for c in columns))
            .where(*([] if where is None else [where]))  # the row filter: bare names, inner
            .group_by(*(sa.literal_column(n) for n in labels))
            .having(sa.func.count() > 1)
            .subquery("d")
        )
        values = sa.select(*(shared.c[n] for n in labels))
        mine = [group(c, t) for c in columns]
        cond = (mine[0] if len(mine) == 1 else sa.tuple_(*mine)).in_(values)
        stmt = sa.select(*(column_expr(c, t) for c in selector.columns)).where(cond)
        stmt = stmt.where(*([] if where is None else [where])).limit(limit)
        found = self.fetch_all(stmt)
        return [convert_row(r, selector) for r in found] if selector.needs_conversion else found

    def rows_where(
        self,
        table: str,
        selector: Selector,
        columns: Sequence[str],
        values: Sequence[Any],
        where: Any = None,
    ) -> list[RawRow]:
        """The rows (selected as ``batches`` does) whose ``columns`` equal one of ``values``
        (tuples for several columns): ``WHERE (c1, c2) IN ((...), ...)``. Used by verify."""
        if not values:
            return []
        t = sa.table(table, *(sa.column(n) for n in {*selector.names, *columns}))
        exprs = [column_expr(c, t) for c in selector.columns]
        ts = self.schema().tables[table]
        kinds = [ts.column(c).kind for c in columns]
        # one bound parameter per value (no "expanding" IN, which the raw cursor cannot render)
        if len(columns) == 1:
            items = [
                sa.literal(bindable(v[0] if isinstance(v, tuple) else v, kinds[0])) for v in values
            ]
            cond = t.c[columns[0]].in_(items)
        else:
            rows = [
                sa.tuple_(*(sa.literal(bindable(x, k)) for x, k in zip(v, kinds))) for v in values
            ]
            cond = sa.tuple_(*(t.c[c] for c in columns)).in_(rows)
        stmt = sa.select(*exprs).where(cond)
        if where is not None:
            stmt = stmt.where(where)
        found = self.fetch_all(stmt)
        return [convert_row(r, selector) for r in found] if selector.needs_conversion else found

    def page(
        self, table: str, selector: Selector, pk: Sequence[str], n: int,
        after: Sequence[Any] | None = None, where: Any = None,
    ) -> list[RawRow]:  # fmt: skip
        """Up to ``n`` rows after the primary key ``after`` (in primary-key order), read whole:
        the connection is free for other reads between pages (source/nesting.py)."""
        t = sa.table(table, *(sa.column(c) for c in {*selector.names, *pk}))
        cols = [t.c[c] for c in pk]
        stmt = sa.select(*(column_expr(c, t) for c in selector.columns)).order_by(*cols).limit(n)
        if after is not None:
            stmt = stmt.where(after_key(cols, [sa.literal(v) for v in after]))
        if where is not None:
            stmt = stmt.where(where)
        found = self.fetch_all(stmt)
        return [convert_row(r, selector) for r in found] if selector.needs_conversion else found

    def sampled_rows(
        self, table: str, selector: Selector, pk: Sequence[str], values: Sequence[Any],
        where: Any = None,
    ) -> Iterator[list[RawRow]]:  # fmt: skip
        """``rows_where`` of the primary keys ``values``, as ``batches`` yields rows (a sharded
        source's, source/shards.py: each shard's in turn, its owner known). Used by verify."""
        rows = self.rows_where(table, selector, pk, values, where)
        if rows:
            yield rows

    def random_keys(self, table: str, pk: Sequence[str], n: int, where: Any = None) -> list[RawRow]:
        """The primary keys of ``n`` random rows (``ORDER BY RAND() LIMIT n``). Used by verify."""
        t = sa.table(table, *(sa.column(c) for c in pk))
        stmt = sa.select(*(t.c[c] for c in pk)).order_by(sa.func.rand()).limit(n)
        if where is not None:
            stmt = stmt.where(where)
        return self.fetch_all(stmt)


def _text(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def unsigned(values: tuple[Any, ...], kinds: Sequence[Kind]) -> tuple[Any, ...]:
    """``values`` with a FLOAT's or DOUBLE's zero as ``0`` (mapping/kinds.py ``FLOATS``), as
    MySQL's ``=`` compares them."""
    return tuple(
        b"0" if k in FLOATS and isinstance(v, bytes) and zero_text(v) else v
        for v, k in zip(values, kinds, strict=True)
    )
