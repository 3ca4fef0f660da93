"""Vector sets (``vector_sets:``, docs/mapping.md#vector-sets): a table's rows as the elements of
Redis 8 vector sets, searched with ``VSIM``.

Each entry names the set's ``key`` (a template), the ``vector`` column — MySQL 9's
``VECTOR(n)`` (read as n little-endian float32, the bytes ``VADD ... FP32`` takes) or a
BLOB/VARBINARY a user packs floats into, whose ``dim`` the mapping declares — the
``attributes`` given to ``VSIM ... FILTER`` (a JSON object of those columns), the
quantization (``noquant`` by default: the floats stay exact, so ``verify`` can compare them)
and HNSW's ``m`` and ``ef``. The element is the row's primary key, as index sets hold it.

This module checks an entry against the table's schema (``check``) and gives the dimension
a column holds (``dimension``); plan/vector_sets.py writes the elements.
"""

from __future__ import annotations

import re

from migrator.mapping.kinds import Kind
from migrator.mapping.model import Table, VectorSet
from migrator.mapping.schema import Column, TableSchema

FIX = "a VECTOR(n) column, or a BLOB/VARBINARY of packed little-endian float32 with dim: n"
_VECTOR = re.compile(r"^\s*vector\s*\(\s*(\d+)\s*\)", re.I)
_FIXED = re.compile(r"^\s*binary\s*\(\s*(\d+)\s*\)", re.I)
#: attribute kinds a JSON number holds as MySQL prints them
NUMBERS = frozenset({Kind.INTEGER, Kind.DECIMAL, Kind.FLOAT, Kind.DOUBLE, Kind.YEAR})


def declared(column: Column) -> int | None:
    """n of a ``VECTOR(n)`` column (None: not a VECTOR)."""
    m = _VECTOR.match(column.column_type)
    return int(m.group(1)) if m else None


def dimension(vs: VectorSet, column: Column) -> int:
    """The number of floats each vector holds (validate made sure there is one)."""
    n = vs.dim if vs.dim is not None else declared(column)
    assert n is not None, "validate requires dim: for a column that is not a VECTOR"
    return n


def check(table: Table, ts: TableSchema) -> list[tuple[str, str, str | None]]:
    """(where, message, fix) for each way ``table.vector_sets`` cannot be written."""
    out: list[tuple[str, str, str | None]] = []
    path = f"tables.{table.name}.vector_sets"
    if table.vector_sets and table.expire is not None:
        out.append((
            f"{path}[0]", "a table with expire: cannot have vector sets (an element would "
            "outlive its row: Redis 8 expires keys, not elements)",
            "drop expire: from this table, or its vector_sets",
        ))  # fmt: skip
    for i, vs in enumerate(table.vector_sets):
        at = f"{path}[{i}]"
        if vs.vector in ts.column_names:
            out += _vector(vs, ts.column(vs.vector), at)
        for name in vs.attributes:
            if name in ts.column_names and ts.column(name).kind in (Kind.BINARY, Kind.GEOMETRY):
                col = ts.column(name)
                out.append((
                    f"{at}.attributes", f"column '{name}' ({col.column_type}) holds bytes, "
                    "which a JSON attribute cannot", "give attributes of numbers, text or dates",
                ))  # fmt: skip
    return out


def _vector(vs: VectorSet, col: Column, at: str) -> list[tuple[str, str, str | None]]:
    n = declared(col)
    if col.kind is not Kind.BINARY:
        return [(f"{at}.vector", f"column '{col.name}' ({col.column_type}) holds no vectors", FIX)]
    if n is not None:
        if vs.dim is not None and vs.dim != n:
            return [(
                f"{at}.dim", f"dim: {vs.dim}, but column '{col.name}' is {col.column_type}",
                f"drop dim: (a VECTOR column gives its own), or make it {n}",
            )]  # fmt: skip
        return []
    if vs.dim is None:
        return [(
            f"{at}.dim", f"column '{col.name}' ({col.column_type}) is not a VECTOR: how many "
            "floats each value packs must be declared", "add dim: N (values of 4*N bytes)",
        )]  # fmt: skip
    fixed = _FIXED.match(col.column_type)
    if fixed and int(fixed.group(1)) != 4 * vs.dim:
        return [(
            f"{at}.dim", f"dim: {vs.dim} needs values of {4 * vs.dim} bytes, but column "
            f"'{col.name}' is {col.column_type}", f"dim: {int(fixed.group(1)) // 4}",
        )]  # fmt: skip
    return []
