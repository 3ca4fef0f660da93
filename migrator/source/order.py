"""MySQL's order of a column's values as bytes, where rows of several shards are merged
(docs/sharding.md): ``migrate`` and ``verify``'s counter and latest lists over the shards
(source/shards.py) and ``sync``'s latest-list candidates (sync/shard_latest.py) compare the
same keys, so the three agree on which rows are newest.

Numbers compare by value (fixed-width text or the bits of a double, so that byte order is
numeric order), every other value byte for byte: an ENUM is ranked by its number and a text
column under a collation by the server's comparison key of its value (source/shards.py
``rank_of``). Each key is a prefix of no other, so the keys of several columns, joined,
compare column by column."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from migrator.mapping.cascades import no_pad, weighed
from migrator.mapping.kinds import Kind
from migrator.mapping.schema import Column
from migrator.mapping.shard_schemas import numbered
from migrator.source.selects import column_expr, weight_column
from migrator.source.weights import charset_of, space_key

#: character sets whose comparison keys are units of one width, the space's (each character's
#: weights a whole number of units), where ``padded`` reads them unit by unit
UNITS = frozenset({"utf8mb4", "utf8mb3", "utf8", "ucs2", "utf16", "utf16le", "utf32", "latin1",
                   "latin2", "ascii", "cp1250", "cp1251", "cp1256", "cp1257"})  # fmt: skip


def order_key(raw: bytes | None, kind: Kind) -> bytes:
    """A value's key (the text the server prints for it, BIT as its number): bytes whose
    order is MySQL's order of the values, NULL first (the lists read no NULL)."""
    if raw is None:
        return b""
    if kind in (Kind.INTEGER, Kind.YEAR, Kind.BIT):  # up to 2**64 - 1, down to -2**63
        return b"%021d" % (int(raw) + 2**64)
    if kind is Kind.DECIMAL:  # the server's text has the column's scale: count its units
        return b"%067d" % (int(raw.replace(b".", b"")) + 10**66)
    if kind in (Kind.FLOAT, Kind.DOUBLE):
        (bits,) = struct.unpack(">Q", struct.pack(">d", float(raw)))
        return b"%016x" % (bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | 1 << 63)
    return raw.replace(b"\0", b"\0\xff") + b"\0\0"  # byte for byte, a prefix first


def rank_of(column: Column, t: Any) -> tuple[list[Any], Callable[..., bytes]]:
    """What ranks a column's values as MySQL's ``ORDER BY`` does: the expressions to select
    (of table ``t``) and what makes their values the rank's bytes. An ENUM or SET by its number
    (the order of its definition); text that MySQL compares under a collation (``weighed``) by
    the server's comparison key of the value (``WEIGHT_STRING``: source/selects.py
    ``weight_column``), never reimplementing a collation — under PAD SPACE read with the
    space's key (``padded``); any other value by itself."""
    if numbered(column):
        return [t.c[column.name] + 0], lambda v: order_key(v, Kind.INTEGER)
    if weighed(column):
        collation = column.collation or ""
        key = column_expr(weight_column(column), t)
        if no_pad(collation) or charset_of(collation) not in UNITS:
            return [key], lambda w: order_key(w, Kind.BINARY)
        return [key, space_key(collation)], padded
    return [column_expr(column, t)], lambda v: order_key(v, column.kind)


def padded(weight: bytes | None, space: bytes | None) -> bytes:
    """A comparison key under a PAD SPACE collation (trailing spaces cut) as bytes whose order
    is the collation's, which compares two values as if the shorter had spaces added: a value
    ending in a character that sorts below the space (a tab) comes before the value without
    it. The key's units (the space's width) after the last that is not the space's are read as
    runs of space units each ended by another unit ``y``: ``01`` + the run + ``y`` for a ``y``
    below the space (a longer run of spaces is greater), ``03`` + the run's complement + ``y``
    above it (a longer run is smaller), and ``02`` for the spaces that pad the value for ever,
    between the two; runs compare unit by unit as the padded values do."""
    weight, space = weight or b"", space or b""
    u = len(space)
    if not u:
        return order_key(weight, Kind.BINARY)
    units = [weight[i : i + u].ljust(u, b"\0") for i in range(0, len(weight), u)]
    while units and units[-1] == space:
        units.pop()
    out, run = [], 0
    for y in units:
        if y == space:
            run += 1
        else:
            below = y < space
            count = run if below else 0xFFFFFFFF - run
            out.append((b"\x01" if below else b"\x03") + count.to_bytes(4, "big") + y)
            run = 0
    return b"".join(out) + b"\x02"
