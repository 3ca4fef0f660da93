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

from migrator.mapping.kinds import Kind


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
