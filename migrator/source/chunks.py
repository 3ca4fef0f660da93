"""Chunks of a table by its primary key: contiguous key ranges of about ``chunk_rows`` rows.

A plan is a list of ``Chunk(after, until)``: the rows with ``after < pk <= until`` (``after``
None: from the table's first row), compared by MySQL as the key's own index orders them
(tuple order for composite keys, the column's collation for text). Boundaries are primary
keys of the table as MySQL returns them (raw text, like a checkpoint's ``after``); they are
never compared or computed in Python, except for a single integer key spread evenly over its
range, which is cut by arithmetic. The chunks cover the key range up to its maximum as of the
plan, the last one closed there: rows inserted later are not read (``sync``'s business).

Cost of planning (one query per chunk, on the primary key's index, never a full scan per
query nor a growing ``OFFSET``):

* a single integer key whose span MAX - MIN + 1 is at most ``EVEN_UP_TO`` times the row
  estimate: MIN and MAX (two index dives), then ranges of ``chunk_rows * span / estimate``
  keys, so that no chunk holds more than ``EVEN_UP_TO * chunk_rows`` rows;
* any other key (text, binary, composite, sparse integers): per chunk a seek
  ``WHERE pk > :last ORDER BY pk LIMIT 1 OFFSET :chunk_rows - 1``, which walks
  ``chunk_rows`` entries of the index from ``:last``: over the whole plan, one ordered pass
  over the primary key (InnoDB: the clustered index, so about one read of the table).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from migrator.mapping.kinds import Kind
from migrator.mapping.schema import Column
from migrator.plan.values import converter
from migrator.source.mysql import Source
from migrator.source.selects import (
    RawRow,
    Selector,
    after_key,
    column_expr,
    convert_row,
    keyset_value,
)

#: default rows per chunk (--chunk-rows)
CHUNK_ROWS = 50_000
#: an integer key spanning at most this many times its rows is cut by arithmetic
EVEN_UP_TO = 2.0

Key = tuple[bytes, ...]


@dataclass(frozen=True)
class Chunk:
    after: Key | None  # the rows after this key (None: from the first row)
    until: Key  # up to and including this key


def plan_chunks(
    src: Source, table: str, pk: Sequence[Column], chunk_rows: int, estimate: int | None
) -> list[Chunk]:
    """The chunks of ``table`` (see the module's docstring); [] for an empty table."""
    if chunk_rows < 1:
        raise ValueError("chunk_rows must be positive")
    t = sa.table(table, *(sa.column(c.name) for c in pk))
    cols = [t.c[c.name] for c in pk]
    selector = Selector(tuple(c.name for c in pk), tuple(pk), tuple(converter(c.kind) for c in pk))
    exprs = [column_expr(c, t) for c in pk]

    def one(stmt: Any) -> Key | None:
        rows = src.fetch_all(stmt)
        if not rows:
            return None
        row: RawRow = convert_row(rows[0], selector) if selector.needs_conversion else rows[0]
        return tuple(v if v is not None else b"" for v in row)

    high = one(sa.select(*exprs).order_by(*(c.desc() for c in cols)).limit(1))
    if high is None:
        return []
    if len(pk) == 1 and pk[0].kind is Kind.INTEGER:
        low = one(sa.select(*exprs).order_by(*cols).limit(1))
        assert low is not None
        even = _even(int(low[0]), int(high[0]), chunk_rows, estimate)
        if even is not None:
            return even
    kinds = [c.kind for c in pk]
    params: list[Any] = [sa.bindparam(f"_k{i}") for i in range(len(pk))]
    first = sa.select(*exprs).order_by(*cols).offset(chunk_rows - 1).limit(1)
    seek = first.where(after_key(cols, params))
    out: list[Chunk] = []
    last: Key | None = None
    while True:
        if last is None:
            edge = one(first)
        else:
            bound = {f"_k{i}": keyset_value(v, k) for i, (v, k) in enumerate(zip(last, kinds))}
            edge = one(seek.params(bound))
        if edge is None or edge == high:
            out.append(Chunk(last, high))
            return out
        out.append(Chunk(last, edge))
        last = edge


def _even(low: int, high: int, chunk_rows: int, estimate: int | None) -> list[Chunk] | None:
    """Arithmetic chunks of an integer key spread evenly over low..high, or None."""
    span = high - low + 1
    if not estimate or span > EVEN_UP_TO * estimate:
        return None
    # a chunk of `step` consecutive integers holds at most `step` rows of a unique key
    step = max(chunk_rows, math.ceil(chunk_rows * span / estimate))
    out: list[Chunk] = []
    after: int | None = None
    edge = low - 1
    while edge < high:
        edge = min(high, edge + step)
        out.append(Chunk(None if after is None else (str(after).encode(),), (str(edge).encode(),)))
        after = edge
    return out
