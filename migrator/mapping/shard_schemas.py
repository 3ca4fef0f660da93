"""Whether the shards of a sharded source (``sources:``) hold one schema, as far as the mapping
reads it (docs/sharding.md): every mapped table on every shard, with the same primary key and
the same columns, each of a type whose values print alike. Pure: works on each shard's schema.

The engines may differ (MariaDB and MySQL shards of one schema): what each spells differently
for the same type is not a difference — an integer's display width (MariaDB's ``int(11)``,
MySQL's ``int``), MariaDB's JSON (a LONGTEXT it checks) beside MySQL's, a collation (each
engine has its own default; the text is the same). A type whose values print otherwise is one
(``decimal(10,2)`` and ``decimal(10,3)``, ``datetime`` and ``datetime(6)``, ``float`` and
``double``): the same row would give other bytes on two shards.
"""

from __future__ import annotations

import re
from collections.abc import Mapping as Map

from migrator.mapping.cascades import weighed
from migrator.mapping.model import Mapping, Table
from migrator.mapping.schema import Column, Schema
from migrator.mapping.validate import Problem

_WIDTH = re.compile(r"^(tinyint|smallint|mediumint|int|integer|bigint)\(\d+\)")
FIX = (
    "give every shard the same schema (the same ALTER on each), or map the table from the "
    "shards that have it in a mapping of its own"
)
ORDER_FIX = (
    "give the column one collation on every shard (the same ALTER TABLE ... MODIFY ... COLLATE "
    "on each; utf8mb4_general_ci and utf8mb4_unicode_ci are on both MariaDB and MySQL)"
)


def spelt(column: Column) -> str:
    """The column's type as it decides its values' text, whatever the engine."""
    if column.holds_json:
        return "json"
    text = " ".join(column.column_type.lower().split())
    return _WIDTH.sub(r"\1", text)


def differences(mapping: Mapping, schemas: Map[str, Schema]) -> list[Problem]:
    """An error per way a mapped table is not one same table on every shard (``schemas``: each
    shard's, by name, in the mapping's order)."""
    out = []
    for table in mapping.tables:
        path = f"tables.{table.name}"
        line = mapping.line_of(path)
        out += [Problem("error", message, path, mapping.file, line, FIX)
                for message in table_differences(table.name, schemas)]  # fmt: skip
        out += [Problem("error", message, path, mapping.file, line, ORDER_FIX)
                for message in order_differences(table, schemas)]  # fmt: skip
    return out


def order_differences(table: Table, schemas: Map[str, Schema]) -> list[str]:
    """How the shards' rows of ``table`` cannot be ranked as one for a latest list
    (docs/sharding.md#migrate): its order is each shard's ``ORDER BY order_by DESC, pk DESC``,
    merged by the server's comparison key of a text column under a collation
    (mapping/cascades.py ``weighed``); keys of two collations do not compare, so such a
    column of the order must have one collation on every shard."""
    has = [n for n in schemas if table.name in schemas[n].tables]
    if not table.latest or len(has) < 2:
        return []
    first = schemas[has[0]].tables[table.name]
    pk = table.primary_key or first.primary_key
    out = []
    for column in dict.fromkeys(c for x in table.latest for c in (x.order_by, *pk)):
        seen = {n: _collation(schemas[n], table.name, column) for n in has}
        if any(c is not None for c in seen.values()) and len(set(seen.values())) > 1:
            each = ", ".join(f"{c or 'none'} on {n}" for n, c in seen.items())
            out.append(f"column {table.name}.{column} orders a latest list under collations "
                       f"that rank text otherwise: {each}")  # fmt: skip
    return out


def _collation(schema: Schema, table: str, column: str) -> str | None:
    """The collation the column's text is ranked under (None: by its bytes or value; an ENUM
    or SET by its number: source/shards.py ``rank_of``)."""
    ts = schema.tables[table]
    if column not in ts.column_names:
        return None
    c = ts.column(column)
    return c.collation if weighed(c) and not numbered(c) else None


def numbered(column: Column) -> bool:
    """An ENUM or SET: MySQL orders it by its number, not its text."""
    return column.column_type.split("(")[0].strip().lower() in ("enum", "set")


def table_differences(name: str, schemas: Map[str, Schema]) -> list[str]:
    """How table ``name`` differs between the shards (none: one same table, or on no shard)."""
    has = [n for n in schemas if name in schemas[n].tables]
    if not has:
        return []  # no shard has it: the check of each shard says so
    lacking = [n for n in schemas if n not in has]
    if lacking:
        return [f"table {name} is on {_list(has)} but not on {_list(lacking)}"]
    out = []
    first = schemas[has[0]].tables[name]
    for other in has[1:]:
        ts = schemas[other].tables[name]
        if ts.primary_key != first.primary_key:
            out.append(f"{name}'s primary key is ({', '.join(first.primary_key)}) on {has[0]} "
                       f"but ({', '.join(ts.primary_key)}) on {other}")  # fmt: skip
    columns = dict.fromkeys(c for n in has for c in schemas[n].tables[name].column_names)
    for column in columns:
        types = {n: _type(schemas[n], name, column) for n in has}
        missing = [n for n, t in types.items() if t is None]
        if missing:
            there = [n for n in has if n not in missing]
            out.append(f"column {name}.{column} is on {_list(there)} but not on {_list(missing)}")
        elif len(set(types.values())) > 1:
            seen = ", ".join(f"{t} on {n}" for n, t in types.items())
            out.append(f"column {name}.{column} has types whose values print otherwise: {seen}")
    return out


def _type(schema: Schema, table: str, column: str) -> str | None:
    ts = schema.tables[table]
    return spelt(ts.column(column)) if column in ts.column_names else None


def _list(names: list[str]) -> str:
    return ", ".join(names)
