"""How a MySQL column's value is read and written, by its information_schema type.

A pure classification shared by the mapping (which columns can be scores, keys, ...), the
planner's value encoding (``migrator.plan.values``) and the MySQL reader.
"""

from __future__ import annotations

from enum import Enum


class Kind(str, Enum):
    """How a MySQL column's value is read and written."""

    INTEGER = "integer"
    BIT = "bit"
    DECIMAL = "decimal"
    FLOAT = "float"
    DOUBLE = "double"
    DATE = "date"
    DATETIME = "datetime"
    TIMESTAMP = "timestamp"
    TIME = "time"
    YEAR = "year"
    TEXT = "text"
    BINARY = "binary"
    JSON = "json"
    GEOMETRY = "geometry"

    @property
    def numeric(self) -> bool:
        return self in NUMERIC

    @property
    def temporal(self) -> bool:
        return self in (Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP)

    @property
    def scorable(self) -> bool:
        """Can be a sorted-set score (numbers, and dates as Unix seconds)."""
        return self.numeric or self.temporal


NUMERIC = frozenset({Kind.INTEGER, Kind.BIT, Kind.DECIMAL, Kind.FLOAT, Kind.DOUBLE, Kind.YEAR})
#: the kinds whose zero has two texts: Oracle MySQL keeps a -0 and prints it '-0' (or '-0.00'
#: under a scale), and its = finds it equal to 0 (MariaDB stores 0)
FLOATS = frozenset({Kind.FLOAT, Kind.DOUBLE})


def zero_text(text: bytes) -> bool:
    """``0``, ``-0``, ``0.000``, ``-0.000``: a FLOAT's or DOUBLE's zero as the server prints it."""
    return bool(text) and text.lstrip(b"-").strip(b"0.") == b""


_KINDS_BY_TYPE = {
    **dict.fromkeys(("tinyint", "smallint", "mediumint", "int", "integer", "bigint"), Kind.INTEGER),
    "bit": Kind.BIT,
    **dict.fromkeys(("decimal", "numeric", "dec", "fixed"), Kind.DECIMAL),
    "float": Kind.FLOAT,
    **dict.fromkeys(("double", "real", "double precision"), Kind.DOUBLE),
    "date": Kind.DATE,
    "datetime": Kind.DATETIME,
    "timestamp": Kind.TIMESTAMP,
    "time": Kind.TIME,
    "year": Kind.YEAR,
    "json": Kind.JSON,
    **dict.fromkeys(
        ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"), Kind.BINARY
    ),
    "vector": Kind.BINARY,  # MySQL 9: 4 bytes per dimension, a little-endian float each
    **dict.fromkeys(
        (
            "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
            "multipolygon", "geometrycollection", "geomcollection",
        ),
        Kind.GEOMETRY,
    ),
}  # fmt: skip


def kind_of(data_type: str, charset: str | None = None) -> Kind:
    """Classify an information_schema DATA_TYPE (``varchar``, ``int``, ``point``...)."""
    data_type = data_type.lower()
    kind = _KINDS_BY_TYPE.get(data_type)
    if kind is not None:
        return kind
    if charset == "binary":  # CHAR/VARCHAR/TEXT ... CHARACTER SET binary
        return Kind.BINARY
    return Kind.TEXT  # char, varchar, *text, enum, set, and anything textual we do not know
