"""The shards of a sharded source (``sources:``) read as one: the union of their rows.

``Union`` stands where verify, dry-run and the ends of migrate's tables (counter, latest lists)
read one ``Source``: rows come from each shard in turn (each in its own snapshot), and what
is computed over the rows is computed over all of them. The counter's ``MAX(pk)`` is the
highest over the shards (compared as numbers for a numeric column); a latest list's newest N
are each shard's newest N (the query one source runs) merged in the same order: the order
column descending, then the primary key descending, each value's ``order_key``
(source/order.py, which sync's candidates use too): numbers by value, an ENUM by its number,
text under a collation by the server's comparison key (``rank_of``), the rest as bytes.

While a shard's rows are read, ``CURRENT`` (plan/owners.py) names it: the owner hash's
expected entries (``Owners`` of a table resolved for the union, ``UNION``) are that shard's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Sequence
from typing import Any

import sqlalchemy as sa

from migrator.mapping.cascades import weighed
from migrator.mapping.kinds import Kind
from migrator.mapping.schema import Column
from migrator.mapping.shard_schemas import numbered
from migrator.plan.owners import CURRENT
from migrator.plan.values import converter
from migrator.retry import Retrying
from migrator.source.mysql import Source
from migrator.source.order import order_key, rank_of
from migrator.source.overlaps import Overlaps
from migrator.source.selects import RawRow, Selector, column_expr, convert_row
from migrator.source.snapshot import Snapshot


def highest(values: Sequence[bytes | None], kind: Kind) -> bytes | None:
    """The greatest of each shard's ``MAX``, None when every shard's table is empty."""
    held = [v for v in values if v is not None]
    return max(held, key=lambda v: order_key(v, kind)) if held else None


class Union:
    """The named shards' ``Source`` objects, read as one (see the module docstring)."""

    def __init__(
        self,
        sources: Sequence[tuple[str, Source]],
        uniques: dict[str, list[tuple[str, ...]]] | None = None,
    ) -> None:
        self.sources = list(sources)
        self.first = self.sources[0][1]
        self.snapshots: dict[str, Snapshot] = {}
        #: per table, the columns of its ``unique:`` entries: a value two shards hold in two
        #: rows is a collision (source/overlaps.py), as is a primary key
        self.uniques = uniques or {}
        self.overlaps = Overlaps()

    # -- what is the same on every shard (the schema: checked equal), or the first's -------
    def __getattr__(self, name: str) -> Any:
        return getattr(self.first, name)

    @property
    def retrying(self) -> Retrying:
        return self.first.retrying

    @retrying.setter
    def retrying(self, value: Retrying) -> None:
        for _, src in self.sources:
            src.retrying = value

    @property
    def shown_url(self) -> str:
        return ", ".join(f"{name}: {src.shown_url}" for name, src in self.sources)

    @property
    def retaken(self) -> list[Snapshot]:
        return [s for _, src in self.sources for s in src.retaken]

    def close(self) -> None:
        for _, src in self.sources:
            src.close()

    def snapshot(self, what: str = "starting a snapshot on MySQL") -> Snapshot:
        """A snapshot on every shard (``snapshots``: each one's); returns the first's. The
        collisions found are those of the rows read since."""
        self.overlaps.clear()
        for name, src in self.sources:
            self.snapshots[name] = src.snapshot(f"{what} (shard {name})")
        return self.snapshots[self.sources[0][0]]

    # -- rows: each shard's in turn --------------------------------------------------------
    def batches(
        self, table: str, selector: Selector, pk: Sequence[str], *args: Any, **kwargs: Any
    ) -> Generator[list[RawRow], None, None]:
        """Each shard's rows in turn, less those colliding with an earlier shard's."""
        uniques = self.uniques.get(table, [])
        for k, (name, src) in enumerate(self.sources):
            token = CURRENT.set(name)
            try:
                for rows in src.batches(table, selector, pk, *args, **kwargs):
                    if k:
                        rows = self.overlaps.apart(self.sources[:k], name, table, selector, pk,
                                                   uniques, rows, kwargs.get("where"))  # fmt: skip
                    CURRENT.set(name)  # (the consumer ran in between)
                    if rows:
                        yield rows
            finally:
                CURRENT.reset(token)

    def _rows(self, method: str, *args: Any, **kwargs: Any) -> list[RawRow]:
        out: list[RawRow] = []
        for _, src in self.sources:
            out += getattr(src, method)(*args, **kwargs)
        return out

    def rows_where(self, *args: Any, **kwargs: Any) -> list[RawRow]:
        return self._rows("rows_where", *args, **kwargs)

    def sampled_rows(
        self, table: str, selector: Selector, pk: Sequence[str], values: Sequence[Any],
        where: Any = None,
    ) -> Generator[list[RawRow], None, None]:  # fmt: skip
        """The rows of the primary keys ``values`` (``verify --sample``), each shard's in turn
        as ``batches`` yields them: while a shard's are consumed, ``CURRENT`` names it (the
        owner their fields must name), and a later shard's rows colliding with an earlier
        shard's are left out (and reported as collisions)."""
        uniques = self.uniques.get(table, [])
        for k, (name, src) in enumerate(self.sources):
            token = CURRENT.set(name)
            try:
                rows = src.rows_where(table, selector, pk, values, where)
                if k and rows:
                    rows = self.overlaps.apart(self.sources[:k], name, table, selector, pk,
                                               uniques, rows, where)  # fmt: skip
                if rows:
                    yield rows
            finally:
                CURRENT.reset(token)

    def sharing_rows(self, *args: Any, **kwargs: Any) -> list[RawRow]:
        return self._rows("sharing_rows", *args, **kwargs)

    def random_keys(self, *args: Any, **kwargs: Any) -> list[RawRow]:
        return self._rows("random_keys", *args, **kwargs)

    def left_out(self, *args: Any, **kwargs: Any) -> set[tuple[bytes, ...]]:
        out: set[tuple[bytes, ...]] = set()
        for _, src in self.sources:
            out |= src.left_out(*args, **kwargs)
        return out

    # -- what is computed over the rows: over all of them ------------------------------------
    def count(self, table: str, where: Any = None) -> int:
        return sum(src.count(table, where) for _, src in self.sources)

    def shared_keys(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        got = [src.shared_keys(*args, **kwargs) for _, src in self.sources]
        return sum(k for k, _ in got), sum(r for _, r in got)

    def value_counts(self, *args: Any, **kwargs: Any) -> list[tuple[Any, int]]:
        total: dict[Any, int] = {}
        for _, src in self.sources:
            for value, n in src.value_counts(*args, **kwargs):
                total[value] = total.get(value, 0) + n
        return list(total.items())

    def collided(
        self, table: str, pk: Sequence[str], columns: Sequence[str], where: Any = None,
        batch_size: int = 1000,
    ) -> tuple[int, dict[str, Counter[bytes]]]:  # fmt: skip
        """The rows ``migrate`` leaves out as collisions (a later shard's row whose primary key
        or unique value an earlier shard holds; source/overlaps.py): how many, and per column
        of ``columns`` how many of them hold each value (NULL left out). Each later shard's
        rows are read once more (key, unique and those columns), a batch at a time; memory:
        a batch and the values of the rows left out. Not counted as ``overlaps``."""
        uniques = self.uniques.get(table, [])
        names = list(dict.fromkeys([*pk, *(c for u in uniques for c in u), *columns]))
        left, values = 0, {c: Counter[bytes]() for c in columns}
        for k, (name, src) in enumerate(self.sources):
            if not k:
                continue
            selector = src.selector(table, names)
            at = [selector.names.index(c) for c in columns]
            for rows in src.batches(table, selector, pk, batch_size, where=where):
                kept = Overlaps().apart(self.sources[:k], name, table, selector, pk, uniques,
                                        rows, where)  # fmt: skip
                ids = {id(row) for row in kept}
                for row in rows:
                    if id(row) not in ids:
                        left += 1
                        for c, i in zip(columns, at, strict=True):
                            value = row[i]
                            if value is not None:
                                values[c][value] += 1
        return left, values

    def max_of(self, table: str, column: Column) -> bytes | None:
        return highest([src.max_of(table, column) for _, src in self.sources], column.kind)

    def latest(
        self, table: str, pk: Sequence[Column], order_by: Column, limit: int, where: Any = None
    ) -> list[RawRow]:
        """The primary keys of the newest ``limit`` rows over every shard (see above); a key
        two shards hold (a collision) is the earlier shard's row, which Redis keeps."""
        rows: list[tuple[RawRow, bytes]] = []
        for k, (name, src) in enumerate(self.sources):
            asked = limit
            while True:
                got = ordered_latest(src, table, pk, order_by, asked, where)
                if not k or not got:
                    break
                # less the rows migrate leaves out as collisions, then as many more as it left
                kept = self._apart(k, name, table, [c.name for c in pk], got, where)
                fetched = len(got)
                got = [(key, rank) for key, rank in got if tuple(key) in kept]
                if len(got) >= limit or fetched < asked:
                    break
                asked *= 2
            rows += got
        rows.sort(key=lambda r: r[1], reverse=True)
        return [key for key, _ in rows[:limit]]

    def _apart(
        self, k: int, name: str, table: str, pk: list[str], got: list[tuple[RawRow, bytes]],
        where: Any,
    ) -> set[tuple[Any, ...]]:  # fmt: skip
        """The primary keys among ``got`` (shard ``k``'s rows: key, rank) that no earlier
        shard's row collides with (source/overlaps.py; not counted again)."""
        uniques = self.uniques.get(table, [])
        src = self.sources[k][1]
        selector = src.selector(table, list(dict.fromkeys([*pk, *(c for u in uniques for c in u)])))
        full = src.rows_where(table, selector, pk, [tuple(key) for key, _ in got], where)
        kept = Overlaps().apart(self.sources[:k], name, table, selector, pk, uniques, full, where)
        return {tuple(r[: len(pk)]) for r in kept}


def ordered_latest(
    src: Source, table: str, pk: Sequence[Column], order_by: Column, limit: int, where: Any
) -> list[tuple[RawRow, bytes]]:
    """``Source.latest``'s rows (``ORDER BY order_by DESC, pk DESC``), each as its primary key
    and its rank: bytes whose order is the query's order, to merge shards by
    (source/order.py ``rank_of``)."""
    names = [c.name for c in pk]
    t = sa.table(table, *(sa.column(n) for n in {*names, order_by.name}))
    o = t.c[order_by.name]
    ranks = [rank_of(c, t) for c in (order_by, *pk)]
    stmt = (
        sa.select(*(column_expr(c, t) for c in pk), *(e for exprs, _ in ranks for e in exprs))
        .where(o.is_not(None), *([] if where is None else [where]))
        .order_by(o.desc(), *(t.c[n].desc() for n in names))
        .limit(limit)
    )
    sel = Selector(tuple(names), tuple(pk), tuple(converter(c.kind) for c in pk))
    out = []
    for r in src.fetch_all(stmt):
        key, at, rank = convert_row(r[: len(pk)], sel), len(pk), b""
        for exprs, ranked in ranks:
            rank += ranked(*r[at : at + len(exprs)])
            at += len(exprs)
        out.append((key, rank))
    return out


def by_the_server(column: Column) -> bool:
    """Whether ``rank_of`` ranks the column by what the server gives besides its value (a
    number or a comparison key), where migrator before ranked its text's bytes."""
    return numbered(column) or weighed(column)
