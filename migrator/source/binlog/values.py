"""Binary-log values -> the Redis text the snapshot writes for them (docs/values.md).

The snapshot reads MySQL's text protocol (``migrator.source.mysql``), so a value arrives as
the bytes the server prints. python-mysql-replication decodes the binary log into Python
objects instead (int, str, Decimal, datetime, timedelta, bytes, ...). ``encoder_for`` builds,
per column, the function that turns such an object back into exactly the snapshot's bytes;
tests/sync/test_binlog_values.py proves it for every type against the same rows read both ways.

What needs care, and why:

* DATETIME(n)/TIMESTAMP(n)/TIME(n): n fraction digits as declared (none for n = 0);
  TIMESTAMP in UTC; a zero TIMESTAMP is 0 seconds in the log (1970-01-01 00:00:00 cannot be
  stored), printed ``0000-00-00 00:00:00``. TIME may be negative or over 24 hours.
* zero and partly-zero dates: the library turns them into None, so
  ``tables.patch_zero_dates`` makes it return their text instead (see there).
* DECIMAL: the library builds a Decimal from the stored digits, scale kept; written with
  ``format(value, "f")`` (never through float).
* FLOAT: the shortest text that reads back to the same 32-bit float (as the snapshot);
  DOUBLE: the shortest round-trip digits, positional or exponent as MariaDB prints them;
  DOUBLE(M,D): always D digits after the point, as both servers print it.
* YEAR 0000 is stored as 0 and decoded as 1900 (a year YEAR cannot hold).
* BIT arrives as a string of 0/1 digits; SET as a Python set (empty set: None, told apart
  from NULL by the row's ``none_sources``), written in the column's declared order.
* BINARY(n) loses its trailing zero bytes in the log; MySQL prints them.
* GEOMETRY arrives as MySQL's internal form (SRID + WKB); its WKT comes from the server
  (``ST_AsText(ST_GeomFromWKB(...))``), so it is byte-for-byte what the snapshot selected.
* JSON: MariaDB logs the text; MySQL 8 logs binary JSON, decoded to Python objects, written
  here as MySQL prints JSON (``{"a": 1, "b": [1, 2]}``).
* MariaDB's UUID, INET6 and INET4 are logged in their binary form (16, 16 and 4 bytes, the
  trailing zero bytes cut as for BINARY(n)); the log carries only "a binary string", so the
  column's type comes from the schema. UUID is logged in its in-memory order (the server
  swaps segments only inside its records), written as ``SELECT`` prints it; INET6 follows
  MariaDB's ``Inet6::to_string`` (the longest run of zero groups, even a single one,
  becomes ``::``, the first on a tie; ``::a.b.c.d`` and ``::ffff:a.b.c.d`` for IPv4-compatible
  and IPv4-mapped addresses).
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import re
from collections.abc import Callable
from typing import Any

from migrator.mapping.kinds import Kind
from migrator.mapping.schema import Column
from migrator.plan.values import float32_text

Encoder = Callable[[Any], bytes]
Wkt = Callable[[bytes], bytes]

_FSP = re.compile(r"\((\d+)\)")
_SCALE = re.compile(r"\(\d+,(\d+)\)")
_LABELS = re.compile(r"'((?:[^']|'')*)'")


def fraction_digits(column_type: str) -> int:
    """The declared fraction digits of a temporal type: ``datetime(3)`` -> 3, ``time`` -> 0."""
    m = _FSP.search(column_type)
    return int(m.group(1)) if m else 0


def set_labels(column_type: str) -> list[str]:
    """The members of ``set('a','b')`` in declared order."""
    return [m.replace("''", "'") for m in _LABELS.findall(column_type)]


def _fraction(micro: int, fsp: int) -> str:
    return f".{micro:06d}"[: fsp + 1] if fsp else ""


def datetime_text(value: Any, fsp: int) -> bytes:
    if isinstance(value, bytes):  # already the text (the fast path of rows)
        return value
    if isinstance(value, str):  # a zero or partly-zero date, as patch_zero_dates gives it
        return value.encode()
    v: datetime.datetime = value
    return (
        f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
        + _fraction(v.microsecond, fsp)
    ).encode()


_EPOCH = datetime.datetime(1970, 1, 1)


def timestamp_text(value: Any, fsp: int) -> bytes:
    if value == _EPOCH:  # 0 seconds: the zero TIMESTAMP (1970-01-01 00:00:00 UTC is not storable)
        return ("0000-00-00 00:00:00" + _fraction(0, fsp)).encode()
    return datetime_text(value, fsp)


def date_text(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}".encode()


def time_text(value: datetime.timedelta, fsp: int) -> bytes:
    micro = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if micro < 0 else ""
    micro = abs(micro)
    seconds, micro = divmod(micro, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    return f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}{_fraction(micro, fsp)}".encode()


def double_text(value: float) -> bytes:
    """A DOUBLE as MariaDB prints it: the shortest digits that read back to the same number,
    positional for decimal exponents -15..14 (and up to 15 when a fraction remains),
    else ``1.5e300`` / ``1e-16``."""
    if value == 0.0:
        return b"0"
    text = repr(float(value))
    if text in ("inf", "-inf", "nan"):
        return text.encode()
    sign, digits, exponent = decimal.Decimal(text).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    e10 = len(digits) + int(exponent) - 1  # the exponent of the leading digit
    minus = "-" if sign else ""
    if -15 <= e10 <= 14 or (e10 == 15 and len(ds) > 16):
        if e10 < 0:
            return f"{minus}0.{'0' * (-e10 - 1)}{ds}".encode()
        whole, frac = ds[: e10 + 1], ds[e10 + 1 :]
        whole += "0" * (e10 + 1 - len(whole))
        return f"{minus}{whole}.{frac}".encode() if frac else f"{minus}{whole}".encode()
    lead = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
    return f"{minus}{lead}e{e10}".encode()


def fixed_double(scale: int) -> Callable[[float], bytes]:
    """A DOUBLE(M,D) as the server prints it: always D digits after the point (``2.00``),
    the stored binary value rounded to D places; never ``-0.00``."""

    def text(value: float) -> bytes:
        out = b"%.*f" % (scale, value)
        return out[1:] if out.startswith(b"-") and not out.strip(b"-0.") else out

    return text


def float_text(value: float) -> bytes:
    return float32_text(repr(float(value)).encode())


def decimal_text(value: decimal.Decimal | bytes) -> bytes:
    return value if isinstance(value, bytes) else format(value, "f").encode()


def text_bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")


def json_text(value: Any) -> bytes:
    if isinstance(value, (str, bytes)):
        return text_bytes(value)  # MariaDB: JSON is text in the log
    return _json_out(value).encode()


def _json_out(value: Any) -> str:
    """A MySQL JSON value as the server prints it: ``{"k": 1, "a": [1.5, "x"]}``."""
    if isinstance(value, dict):
        items = (f"{_json_out(_as_str(k))}: {_json_out(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json_out(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return json_double(value)
    if isinstance(value, (str, bytes)):
        return json.dumps(_as_str(value), ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)


def _as_str(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def json_double(value: float) -> str:
    """A double inside MySQL's JSON: the shortest digits as a DOUBLE prints them, with ``.0``
    when neither a point nor an exponent shows (``3.0``, ``1e20``, ``-0.0``)."""
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    text = double_text(value).decode()
    return text if "." in text or "e" in text or text in ("inf", "-inf", "nan") else text + ".0"


def _fixed(value: Any, width: int) -> bytes:
    return text_bytes(value).ljust(width, b"\0")


def uuid_text(value: Any) -> bytes:
    h = _fixed(value, 16).hex().encode()
    return b"-".join((h[:8], h[8:12], h[12:16], h[16:20], h[20:]))


def inet4_text(value: Any) -> bytes:
    return b"%d.%d.%d.%d" % tuple(_fixed(value, 4))


def inet6_text(value: Any) -> bytes:
    raw = _fixed(value, 16)
    words = [raw[i] << 8 | raw[i + 1] for i in range(0, 16, 2)]
    gap_pos, gap_len, run_pos = -1, 0, -1
    for i, w in enumerate([*words, 1]):  # a sentinel closes a trailing run
        if w == 0 and run_pos < 0:
            run_pos = i
        elif w != 0 and run_pos >= 0:
            if i - run_pos > gap_len:
                gap_pos, gap_len = run_pos, i - run_pos
            run_pos = -1
    if gap_pos == 0 and (gap_len == 6 or (gap_len == 5 and words[5] == 0xFFFF)):
        return (b"::ffff:" if gap_len == 5 else b"::") + inet4_text(raw[12:])
    if gap_pos < 0:
        return b":".join(b"%x" % w for w in words)
    head = b":".join(b"%x" % w for w in words[:gap_pos])
    tail = b":".join(b"%x" % w for w in words[gap_pos + gap_len :])
    return head + b"::" + tail


_BINARY_FORMS: dict[str, Encoder] = {"uuid": uuid_text, "inet6": inet6_text, "inet4": inet4_text}


def encoder_for(column: Column, wkt: Wkt | None = None) -> Encoder:
    """The function binary-log value -> the snapshot's bytes for this column (never None:
    NULLs are handled by the caller)."""
    kind, ctype = column.kind, column.column_type.lower()
    if ctype in _BINARY_FORMS:
        return _BINARY_FORMS[ctype]
    if kind is Kind.INTEGER:
        return lambda v: b"%d" % v
    if kind is Kind.BIT:
        return lambda v: b"%d" % (int(v, 2) if isinstance(v, str) else int(v))
    if kind is Kind.YEAR:
        return lambda v: b"0000" if v in (0, 1900) else b"%d" % v
    if kind is Kind.DECIMAL:
        return decimal_text
    if kind is Kind.FLOAT:
        return float_text
    if kind is Kind.DOUBLE:
        scale = _SCALE.search(ctype)  # DOUBLE(M,D), REAL(M,D): the server prints D digits
        return fixed_double(int(scale.group(1))) if scale else double_text
    if kind is Kind.DATE:
        return date_text
    fsp = fraction_digits(ctype)
    if kind is Kind.DATETIME:
        return lambda v: datetime_text(v, fsp)
    if kind is Kind.TIMESTAMP:
        return lambda v: timestamp_text(v, fsp)
    if kind is Kind.TIME:
        return lambda v: time_text(v, fsp)
    if kind is Kind.JSON:
        return json_text
    if kind is Kind.GEOMETRY:
        if wkt is None:
            raise ValueError(f"column {column.name}: GEOMETRY needs the server's WKT")
        return lambda v: wkt(text_bytes(v))
    if kind is Kind.BINARY and ctype.startswith("binary("):
        width = fraction_digits(ctype)
        return lambda v: text_bytes(v).ljust(width, b"\0")
    if ctype.startswith("set("):
        order = {label: i for i, label in enumerate(set_labels(column.column_type))}

        def set_text(v: Any) -> bytes:
            if isinstance(v, str):
                return v.encode()
            return ",".join(sorted(v, key=lambda m: order.get(m, len(order)))).encode()

        return set_text
    return text_bytes


# the ROW END of a current row of a system-versioned table: the greatest TIMESTAMP(6)
# (2038, or 2106 where MariaDB >= 11.5 widened it) or, with transaction-precise versioning,
# the greatest BIGINT UNSIGNED; any other value marks a row of the table's history
_CURRENT_ENDS = (
    datetime.datetime(2038, 1, 19, 3, 14, 7, 999999),
    datetime.datetime(2106, 2, 7, 6, 28, 15, 999999),
    2**64 - 1,
)


def is_current(row_end: Any) -> bool:
    """Whether a row image of a system-versioned table is a current row (its ROW END is the
    maximum) rather than a version kept as history."""
    return row_end in _CURRENT_ENDS


def empty_value(column: Column) -> bytes | None:
    """What a None from the library stands for when the row's ``none_sources`` says it is
    not a NULL: an empty SET is ``''``."""
    return b"" if column.column_type.lower().startswith("set(") else None
