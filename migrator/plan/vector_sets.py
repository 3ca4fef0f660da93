"""The ``vector_sets:`` structure (mapping/vector_sets.py): one ``VADD`` per row and set.

``VADD key FP32 <vector> <primary key> NOQUANT|Q8|BIN [EF n] [M n] SETATTR <attributes>``:
the vector is the row's value as read (MySQL's VECTOR, or a BLOB of packed float32: the
little-endian float32 bytes FP32 takes), the attributes a JSON object of the mapped columns
(numbers as JSON numbers as MySQL prints them, everything else a JSON string, NULLs left
out; no SETATTR at all for a set without attributes). A row whose
vector is NULL, of another length than the set's dimension, or holds a NaN or an infinity
is left out of the set (counted under "skipped", as a NULL score is for a sorted set).

``sync`` keeps the elements as entries of type ``v`` (plan/delta.py): the entry's value packs
the VADD's options, attributes and vector (``pack``/``unpack``), so an update that changes
any of them writes the element again and a removal is a ``VREM``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

from migrator.mapping.model import Table, VectorSet
from migrator.mapping.vector_sets import NUMBERS, dimension
from migrator.plan.batch import Batch, Command, Row
from migrator.plan.layout import TableLayout
from migrator.plan.structures import Structure

NULL = "NULL vector or key (not in vector set)"
WRONG_SIZE = "vector of another dimension (not in vector set)"
NOT_FINITE = "vector with a NaN or an infinity (not in vector set)"
SEP = b"\x00"  # between the packed parts: options and JSON never hold a raw NUL


@dataclass(frozen=True)
class Item:
    pattern: str
    key_of: Callable[[Row], bytes | None]
    at: int  # the vector's position in the row
    size: int  # bytes of one vector: 4 per dimension
    options: tuple[bytes, ...]  # NOQUANT / Q8 / BIN, EF n, M n
    attributes: Callable[[Row], bytes]


def options(vs: VectorSet) -> tuple[bytes, ...]:
    out = [vs.quant.upper().encode()]
    if vs.ef is not None:
        out += [b"EF", b"%d" % vs.ef]
    if vs.m is not None:
        out += [b"M", b"%d" % vs.m]
    return tuple(out)


def attributes_fn(plan: TableLayout, vs: VectorSet) -> Callable[[Row], bytes]:
    """Row -> its JSON attributes (b"" for a set with none)."""
    if not vs.attributes:
        return lambda row: b""
    schema = plan.resolved.schema
    parts = [
        (json.dumps(c).encode() + b":", plan.pos[c], schema.column(c).kind in NUMBERS)
        for c in vs.attributes
    ]

    def attributes(row: Row) -> bytes:
        out = []
        for name, i, number in parts:
            v = row[i]
            if v is None:
                continue
            if not number:
                v = json.dumps(v.decode("utf-8", "replace"), ensure_ascii=False).encode()
            out.append(name + v)
        return b"{" + b",".join(out) + b"}"

    return attributes


def vadd(key: bytes, element: bytes, value: bytes) -> Command:
    """The VADD of an entry's packed value; without SETATTR for a set without attributes (a
    SETATTR of "" stores an empty text on a new element but removes it from an existing one)."""
    opts, attributes, vector = unpack(value)
    named = (b"SETATTR", attributes) if attributes else ()
    return (b"VADD", key, b"FP32", vector, element, *opts, *named)


def attributes_of(command: Command) -> bytes:
    """The attributes a VADD of ``vadd`` gives its element (b"": none)."""
    return command[-1] if command[-2] == b"SETATTR" else b""


def pack(item: Item, row: Row) -> bytes:
    return b" ".join(item.options) + SEP + item.attributes(row) + SEP + (row[item.at] or b"")


def unpack(value: bytes) -> tuple[list[bytes], bytes, bytes]:
    """(VADD's options, attributes, vector) of a packed entry value."""
    opts, attributes, vector = value.split(SEP, 2)
    return opts.split(), attributes, vector


def finite(vector: bytes) -> bool:
    return all(map(math.isfinite, memoryview(vector).cast("f")))


class VectorSets(Structure):
    """VADD key FP32 vector pk ... (this module's docstring)."""

    name = "vector"

    def __init__(self, plan: TableLayout) -> None:
        super().__init__(plan)
        schema = plan.resolved.schema
        self.items = [
            Item(
                vs.key.text,
                plan.key_fn(vs.key),
                plan.pos[vs.vector],
                4 * dimension(vs, schema.column(vs.vector)),
                options(vs),
                attributes_fn(plan, vs),
            )
            for vs in plan.table.vector_sets
        ]

    @staticmethod
    def wanted(table: Table) -> bool:
        return bool(table.vector_sets)

    def element(self, item: Item, row: Row) -> tuple[bytes, bytes] | str:
        """(key, primary key) of the row's element in the set, or why it has none."""
        key, pk, vector = item.key_of(row), self.plan.pk_text(row), row[item.at]
        if key is None or pk is None or vector is None:
            return NULL
        if len(vector) != item.size:
            return WRONG_SIZE
        if not finite(vector):
            return NOT_FINITE
        return key, pk

    def add(self, row: Row, batch: Batch) -> None:
        for item in self.items:
            got = self.element(item, row)
            if isinstance(got, str):
                batch.stats.skipped[got] += 1
                continue
            key, pk = got
            batch.commands.append(vadd(key, pk, pack(item, row)))
            batch.stats.entries += 1

    def patterns(self) -> list[str]:
        return [item.pattern for item in self.items]
