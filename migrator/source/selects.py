"""How reads of MySQL are spelled: which columns a plan selects and how each is fixed up
(``Selector``), the select expression per column kind, keyset ranges along a primary key
spelled out for every MySQL and MariaDB version, primary-key values as parameters that
compare like the column, parameters in the driver's style; and the SQL printed for a person to
run (``shared_keys_query``, names quoted by ``quote_name``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from migrator.mapping.cascades import WEIGH, no_pad
from migrator.mapping.kinds import Kind
from migrator.mapping.schema import Column, TableSchema
from migrator.plan.values import Converter, converter

RawRow = tuple[bytes | None, ...]


@dataclass(frozen=True)
class Selector:
    """How each column of a plan is selected and fixed up, in select order."""

    names: tuple[str, ...]
    columns: tuple[Column, ...]
    converters: tuple[Converter | None, ...]

    @property
    def needs_conversion(self) -> bool:
        return any(c is not None for c in self.converters)


def selector_of(ts: TableSchema, names: Sequence[str]) -> Selector:
    """How ``names`` of the table are selected: its columns, and a ``WEIGH`` pseudo-column
    as the server's comparison key of its column (``weight_column``)."""
    columns = tuple(
        weight_column(ts.column(n[len(WEIGH) :])) if n.startswith(WEIGH) else ts.column(n)
        for n in names
    )
    return Selector(tuple(names), columns, tuple(converter(c.kind) for c in columns))


def weight_column(column: Column) -> Column:
    """The pseudo-column of a text column's comparison key (mapping/cascades.py ``weighed``):
    ``WEIGHT_STRING`` of its value under its collation, trailing spaces cut first under PAD
    SPACE; equal keys are exactly the values the server's ``=`` finds equal."""
    return Column(WEIGH + column.name, Kind.BINARY, True, "varbinary(1024)", column.collation)


def weight_expr(value: Any, collation: str) -> Any:
    """The comparison key of ``value`` (an expression under ``collation``)."""
    return sa.func.weight_string(value if no_pad(collation) else sa.func.rtrim(value))


def shared_keys_query(table: str, columns: Sequence[str]) -> str:
    """The SQL a person runs to list the keys several rows share (``Source.shared_keys``)."""
    cols = ", ".join(quote_name(c) for c in columns)
    return f"SELECT {cols}, COUNT(*) FROM {quote_name(table)} GROUP BY {cols} HAVING COUNT(*) > 1"


def quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def after_key(cols: Sequence[Any], params: Sequence[Any]) -> Any:
    """``(c1, c2, ...) > (p1, p2, ...)`` in the index's order, spelled out so that every
    MySQL and MariaDB version reads it as a range of the index."""
    return sa.or_(
        *(
            sa.and_(*(cols[j] == params[j] for j in range(i)), cols[i] > params[i])
            for i in range(len(cols))
        )
    )


def upto_key(cols: Sequence[Any], params: Sequence[Any]) -> Any:
    """``(c1, c2, ...) <= (p1, p2, ...)``, spelled out like ``after_key``."""
    last = len(cols) - 1
    return sa.or_(
        *(
            sa.and_(*(cols[j] == params[j] for j in range(i)),
                    cols[i] <= params[i] if i == last else cols[i] < params[i])
            for i in range(len(cols))
        )
    )  # fmt: skip


def keyset_value(raw: bytes | None, kind: Kind) -> Any:
    """A primary-key value as a query parameter that compares like the column does."""
    if raw is None:
        return None
    if kind is Kind.INTEGER or kind is Kind.BIT:
        return int(raw)
    if kind is Kind.BINARY:
        return bytes(raw)
    return raw.decode("utf-8", "surrogateescape")


def bindable(value: Any, kind: Kind) -> Any:
    """A value read raw (bytes) as a parameter that compares like the column's own values.
    PyMySQL sends bytes as a hex literal (``X'31'``), which MySQL compares with a number as
    the number 49 (MariaDB as the string '1'): a key of a column that is not binary goes as
    :func:`keyset_value` makes it (an integer, or text)."""
    if isinstance(value, bytes | bytearray) and kind is not Kind.BINARY:
        try:
            return keyset_value(bytes(value), kind)
        except ValueError:  # not a number: compared as text, as the server would
            return bytes(value).decode("utf-8", "surrogateescape")
    return value


def driver_params(compiled: Any, bound: dict[str, Any]) -> Any:
    """Parameters as the driver's paramstyle wants them: a tuple for positional styles
    (``%s``: a mysql+mysqldb:// URL's dialect compiles them so), else the dict (``%(name)s``)."""
    names = getattr(compiled, "positiontup", None)
    return tuple(bound[n] for n in names) if names else bound


def convert_row(row: Sequence[Any], selector: Selector) -> RawRow:
    return tuple(v if f is None or v is None else f(v) for v, f in zip(row, selector.converters))


def column_expr(column: Column, t: Any = None) -> Any:
    if column.name.startswith(WEIGH):  # a comparison key (weight_column)
        base = column.name[len(WEIGH) :]
        col = t.c[base] if t is not None else sa.column(base)
        return weight_expr(col, column.collation or "")
    col = t.c[column.name] if t is not None else sa.column(column.name)
    if column.kind is Kind.BIT:
        return sa.cast(col, mysql.INTEGER(unsigned=True))
    if column.kind is Kind.GEOMETRY:
        return sa.func.ST_AsText(col)
    if column.kind is Kind.FLOAT:
        return sa.type_coerce(col, sa.Float) + sa.literal_column("0e0")
    return col
