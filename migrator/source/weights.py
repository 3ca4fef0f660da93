"""The server's comparison keys of text values, for ``sync`` (mapping/cascades.py ``weighed``).

A cascading foreign key on text that MySQL compares under a collation (``'Ken' = 'ken '``
under ``utf8mb4_general_ci``) finds its child rows by the key the server itself compares by:
``WEIGHT_STRING`` of the value under the column's collation, trailing spaces cut first under
PAD SPACE (source/selects.py ``weight_expr``). ``migrate`` and ``verify`` select it with each
row; ``sync`` asks for the keys of the values a group of the binary log brings (its rows, and
the parent's values a rule matches), one query per group, never reimplementing a collation.
Asked with the value as a parameter, converted to the column's character set: the same key
the server gives the stored value.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from migrator.mapping.cascades import charset_of, weighed
from migrator.mapping.schema import TableSchema
from migrator.source.selects import RawRow, weight_expr

#: values asked in one SELECT (one column each)
PER_QUERY = 500
#: comparison keys remembered (a foreign key's values repeat: the same parents)
REMEMBERED = 50_000

Pair = tuple[str, bytes]  # (collation, value)


class Fetches(Protocol):
    def fetch_all(self, stmt: sa.sql.Executable) -> list[RawRow]: ...


def collations_of(
    ts: TableSchema, columns: Sequence[str], child: TableSchema, referencing: Sequence[str]
) -> tuple[str | None, ...]:
    """Per column of ``ts`` (a parent's, referenced by ``child``'s ``referencing``), its
    collation where MySQL's = compares it under one (either side ``weighed``: a VARCHAR
    child's 'a ' references a CHAR parent's 'a' under a PAD SPACE ``_bin``), else None
    (byte equality)."""
    out = []
    for name, theirs in zip(columns, referencing):
        column = ts.column(name)
        mine = child.column(theirs) if theirs in child.column_names else None
        under = weighed(column) or (mine is not None and weighed(mine))
        out.append(column.collation if under else None)
    return tuple(out)


class Weights:
    """Comparison keys per (collation, value), asked of the source and remembered."""

    def __init__(self, source: Fetches) -> None:
        self.source = source
        self.known: OrderedDict[Pair, bytes] = OrderedDict()

    def keys(self, pairs: Iterable[Pair]) -> dict[Pair, bytes]:
        """The comparison key of each (collation, value)."""
        wanted = list(dict.fromkeys(pairs))
        missing = [p for p in wanted if p not in self.known]
        for i in range(0, len(missing), PER_QUERY):
            chunk = missing[i : i + PER_QUERY]
            (row,) = self.source.fetch_all(sa.select(*(_key(c, v) for c, v in chunk)))
            for pair, key in zip(chunk, row, strict=True):
                self.known[pair] = bytes(key or b"")
        out = {}
        for pair in wanted:
            self.known.move_to_end(pair)
            out[pair] = self.known[pair]
        while len(self.known) > REMEMBERED:
            self.known.popitem(last=False)
        return out


def _key(collation: str, value: bytes) -> sa.ColumnElement[bytes]:
    return weight_expr(_text(collation, value), collation)


def space_key(collation: str) -> sa.ColumnElement[bytes]:
    """The comparison key of one space under ``collation`` (not cut: the padding's unit)."""
    return sa.func.weight_string(_text(collation, b" "))


def _text(collation: str, value: bytes) -> sa.ColumnElement[str]:
    if not collation.replace("_", "").isalnum():  # a name the server gave: never pasted raw
        raise ValueError(f"not a collation name: {collation!r}")
    text = sa.cast(sa.literal(value.decode("utf-8", "surrogateescape")),
                   mysql.CHAR(charset=charset_of(collation)))  # fmt: skip
    return sa.collate(text, collation)
