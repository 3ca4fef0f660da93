"""A row as one JSON document (``as: json`` / ``as: json-string``; docs/values.md#json-documents).

The document is an object of the table's written columns (``columns:``, named by ``fields:``)
in one canonical serialisation, the same bytes in ``migrate``, ``sync``, ``verify``, ``dry-run``
and the memory estimate: keys sorted by their UTF-8 bytes, no whitespace, UTF-8 text (no
``\\u`` escapes but those JSON requires). Each value starts from its text of docs/values.md
(the column's format applied, ``formats:``) and is typed:

* NULL (and a format that gives no value: a zero date's ``epoch``) -> ``null``;
* integers, BIT, YEAR -> a number (beyond 64-bit signed, a BIGINT UNSIGNED or BIT(64) value
  is a string: RedisJSON and most readers hold integers in 64 bits);
* FLOAT, DOUBLE -> a number, the text of docs/values.md;
* DECIMAL -> a string, exactly (``"1234.50"``); ``formats: {col: number}`` -> a number, which
  ``validate`` allows for a precision of at most 15 digits (what a 64-bit float holds exactly);
* ``epoch``, ``epoch_ms``, ``number`` formats -> a number; ``boolean`` -> ``true``/``false``;
* a MySQL JSON column -> embedded as JSON (the server's text, which must parse; a text that
  does not -- a MariaDB JSON column without its CHECK -- is a string);
* MySQL's VECTOR, and a BLOB/VARBINARY the table's ``search.vector`` names (packed float32)
  -> an array of numbers, each float32 (4 bytes, little-endian) written with 9 significant
  digits (``%.9g``: ``-0.483928263``), which every reader that rounds to float32 reads back
  as the same bytes (the query engine indexes them; ``verify`` compares them so); a value
  that is no whole number of finite float32 is base64 as other binary strings;
* binary strings (BINARY, VARBINARY, BLOBs, ``CHARACTER SET binary``) -> a string of their
  bytes in standard base64 (with padding);
* everything else (text, ENUM, SET, dates and times, GEOMETRY as WKT) -> a string.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from migrator.mapping.kinds import Kind
from migrator.plan.batch import Row

Encode = Callable[[bytes], bytes]  # a non-NULL value's text -> its JSON text

#: formats whose text is a JSON number / literal (plan/values.py: FORMATS)
_NUMBER_FORMATS = ("epoch", "epoch_ms", "number")
_INT64 = (-(2**63), 2**63 - 1)
NULL = b"null"


def string(raw: bytes) -> bytes:
    """A JSON string of UTF-8 text (invalid bytes replaced by U+FFFD)."""
    return json.dumps(raw.decode("utf-8", "replace"), ensure_ascii=False).encode()


def integer(raw: bytes) -> bytes:
    """A number within 64-bit signed integers, else a string (BIGINT UNSIGNED above 2^63-1)."""
    if len(raw) < 19:
        return raw
    return raw if _INT64[0] <= int(raw) <= _INT64[1] else string(raw)


def year(raw: bytes) -> bytes:
    """``2021`` -> ``2021``; ``0000`` -> ``0`` (a JSON number has no leading zeros)."""
    return b"%d" % int(raw)


def binary(raw: bytes) -> bytes:
    return b'"' + base64.b64encode(raw) + b'"'


_NINE = "%.9g"  # enough digits for any float32 to be read back exactly


def floats(raw: bytes) -> bytes:
    """Packed little-endian float32 -> ``[1.5,-2.0,...]``; base64 when they are not that."""
    if len(raw) % 4:
        return binary(raw)
    values = struct.unpack(f"<{len(raw) // 4}f", raw)
    if not all(map(math.isfinite, values)):
        return binary(raw)
    return ("[" + ",".join(map(_NINE.__mod__, values)) + "]").encode()


def packed(value: Any) -> bytes | None:
    """A document's array of numbers as the float32 bytes it stands for (None: not one)."""
    if not isinstance(value, list) or not all(
        isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) for v in value
    ):
        return None
    return struct.pack(f"<{len(value)}f", *(float(v) for v in value))


def embedded(raw: bytes) -> bytes:
    """A JSON column's text as it is, when it parses; else a JSON string of it."""
    try:
        json.loads(raw)
    except ValueError:
        return string(raw)
    return raw


def as_is(raw: bytes) -> bytes:
    """A text that is JSON already: a number of docs/values.md (FLOAT, DOUBLE, the ``epoch``,
    ``epoch_ms`` and ``number`` formats), ``true``/``false`` (the ``boolean`` format)."""
    return raw


_BY_KIND: dict[Kind, Encode] = {
    Kind.INTEGER: integer,
    Kind.BIT: integer,
    Kind.YEAR: year,
    Kind.FLOAT: as_is,
    Kind.DOUBLE: as_is,
    Kind.JSON: embedded,
    Kind.BINARY: binary,
}


def encoder(kind: Kind, fmt: str | None) -> Encode:
    """How a non-NULL value of ``kind`` (already in format ``fmt``, if any) is written."""
    if fmt in _NUMBER_FORMATS or fmt == "boolean":
        return as_is
    if fmt is not None:  # iso8601
        return string
    return _BY_KIND.get(kind, string)


def document_function(
    fields: list[tuple[bytes, int]],
    kinds: dict[int, Kind],
    formats: dict[int, Callable[[bytes], bytes | None]],
    format_names: dict[int, str],
    vectors: frozenset[int] = frozenset(),
) -> Callable[[Row], bytes]:
    """Row -> its document text. ``fields``: (field name, position in the row) of each written
    column; ``formats``: per position, the value's format function (plan/values.py);
    ``vectors``: the positions of packed float32 (arrays of numbers)."""
    parts = parts_function(fields, kinds, formats, format_names, vectors)
    return lambda row: render(parts(row))


Parts = list[tuple[bytes, bytes]]  # (field name, its JSON value), sorted by name


def parts_function(
    fields: list[tuple[bytes, int]],
    kinds: dict[int, Kind],
    formats: dict[int, Callable[[bytes], bytes | None]],
    format_names: dict[int, str],
    vectors: frozenset[int] = frozenset(),
) -> Callable[[Row], Parts]:
    """Row -> its document's fields, sorted by name: (name, JSON value), as
    ``document_function`` writes them; a nested document adds fields of its own
    (plan/nesting.py) before ``render``."""
    steps = [
        (name, i, formats.get(i), _encoder(i, kinds, format_names, vectors))
        for name, i in sorted(fields)
    ]

    def parts(row: Row) -> Parts:
        out = []
        for name, i, fmt, enc in steps:
            v = row[i]
            if v is not None and fmt is not None:
                v = fmt(v)
            out.append((name, NULL if v is None else enc(v)))
        return out

    return parts


def _encoder(
    i: int, kinds: dict[int, Kind], format_names: dict[int, str], vectors: frozenset[int]
) -> Encode:
    return floats if i in vectors else encoder(kinds[i], format_names.get(i))


def render(parts: Parts) -> bytes:
    """A document's text from its fields (sorted by name)."""
    return b"{" + b",".join(_name(n) + v for n, v in parts) + b"}"


@functools.lru_cache(maxsize=4096)
def _name(name: bytes) -> bytes:
    return json.dumps(name.decode(), ensure_ascii=False).encode() + b":"


def parsed(text: bytes | str) -> Any:
    """A document (or a JSON value) as Python data, numbers exact (``Decimal``): what verify
    compares, so that RedisJSON's own serialisation of the same values (``1.5`` for ``1.50``,
    its key order, its spacing) compares equal."""
    return json.loads(text, parse_float=Decimal)


def differing(want: Any, have: Any, vectors: frozenset[str] = frozenset()) -> list[str]:
    """The top-level keys whose values differ (``["(document)"]`` when either is no object).
    Types count: ``true`` is not ``1``, ``"1"`` is not ``1``; ``1.50`` is ``1.5``. A field
    named in ``vectors`` (at any depth: a nested child's too) that holds an array of numbers
    is compared as the float32 bytes it stands for (RedisJSON may read a number's text into
    the 64-bit float next to the nearest one, which is the same float32)."""
    if not isinstance(want, dict) or not isinstance(have, dict):
        return [] if _typed(want, vectors) == _typed(have, vectors) else ["(document)"]
    keys = dict.fromkeys([*want, *have])
    return [
        k
        for k in keys
        if k not in want
        or k not in have
        or _typed({k: want[k]}, vectors) != _typed({k: have[k]}, vectors)
    ]


def _typed(value: Any, vectors: frozenset[str] = frozenset()) -> Any:
    """``value`` with each scalar tagged by its JSON type, numbers as Decimal; an array of
    numbers under a name in ``vectors`` as its float32 bytes."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, Decimal)):
        return ("number", Decimal(value))
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            blob = packed(v) if k in vectors else None
            out[k] = ("vector", blob) if blob is not None else _typed(v, vectors)
        return out
    if isinstance(value, list):
        return [_typed(v, vectors) for v in value]
    return value
