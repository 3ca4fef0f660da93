"""MySQL value -> Redis bytes (docs/values.md), and sorted-set scores.

Rows are read over MySQL's text protocol with the driver's type conversion switched off, so
each value arrives as the very bytes the server prints for it (what ``mysql -B`` shows):
DECIMAL keeps its scale, DATETIME(n) its n fraction digits, TIME may be negative or over 24 h,
zero dates stay ``0000-00-00``, TIMESTAMP is in the session's UTC, ENUM and SET are text,
BLOBs are their raw bytes. Three kinds need help from the query or from here:

* BIT is sent as raw bytes, so it is selected as ``CAST(col AS UNSIGNED)`` (decimal text);
* GEOMETRY is stored in an internal binary form, so it is selected as ``ST_AsText(col)``;
* FLOAT: MariaDB prints 6 significant digits, which do not read back to the stored number,
  so FLOAT is selected as DOUBLE and written here as the shortest text that reads back to
  the same 32-bit float (what MySQL 8 prints too).
"""

from __future__ import annotations

import calendar
import math
import re
import struct
from collections.abc import Callable
from decimal import Decimal

from migrator.mapping.kinds import Kind

Converter = Callable[[bytes], bytes]


def float32_text(raw: bytes) -> bytes:
    """The shortest text that reads back to the same 32-bit float, in MySQL's style
    (``1.2345678``, ``3.4028235e38``, ``1e-7``). ``raw`` is the value printed as a DOUBLE."""
    value = float(raw)
    if not math.isfinite(value):
        return raw
    if value == 0.0:
        return b"-0" if math.copysign(1.0, value) < 0 else b"0"
    target = struct.unpack("f", struct.pack("f", value))[0]
    for digits in range(1, 10):
        text = f"{target:.{digits - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == target:
            break
    return _mysql_style(text).encode()


def _mysql_style(sci: str) -> str:
    """``1.5e+02`` -> ``150``; ``1.5e+38`` -> ``1.5e38``; ``1e-07`` -> ``1e-7``: positional
    for exponents -4..14, else MySQL's exponent form without '+' or leading zeros."""
    mantissa, exp_text = sci.split("e")
    exponent = int(exp_text)
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    if -5 < exponent < 15:
        if exponent < 0:
            return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
        whole, frac = digits[: exponent + 1], digits[exponent + 1 :]
        whole += "0" * (exponent + 1 - len(whole))
        return f"{sign}{whole}.{frac}" if frac else f"{sign}{whole}"
    lead = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{lead}e{exponent}"


def converter(kind: Kind) -> Converter | None:
    """A per-value fix-up for kinds whose server text is not the Redis text, else None."""
    return float32_text if kind is Kind.FLOAT else None


_DATE = re.compile(rb"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}):(\d{2})(\.\d+)?)?$")


def score(raw: bytes, kind: Kind) -> bytes | None:
    """A sorted-set score for a value: numbers as they are, dates as Unix seconds (UTC).
    None when the value cannot be a score (a zero date, say)."""
    if kind.numeric:
        try:
            number = float(raw)
        except ValueError:
            return None
        return raw if math.isfinite(number) else None
    if kind.temporal:
        return unix_seconds(raw)
    return None


def unix_seconds(raw: bytes) -> bytes | None:
    m = _DATE.match(raw)
    if not m:
        return None
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not (1 <= month <= 12 and 1 <= day <= 31) or year == 0:
        return None  # zero dates have no instant
    hh, mm, ss = (int(m.group(i) or 0) for i in (4, 5, 6))
    try:
        seconds = calendar.timegm((year, month, day, hh, mm, ss, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    fraction = m.group(7)
    if fraction and fraction.strip(b".0"):
        return (
            b"%d%s" % (seconds, fraction.rstrip(b"0")) if seconds >= 0 else _neg(seconds, fraction)
        )
    return b"%d" % seconds


def _neg(seconds: int, fraction: bytes) -> bytes:
    value = seconds + float(fraction)
    return repr(value).encode()


#: per-column formats of the row hash and column strings (docs/mapping.md#formats)
FORMATS = ("epoch", "epoch_ms", "iso8601", "boolean", "number")


def formatter(name: str, kind: Kind) -> Callable[[bytes], bytes | None]:
    """Value (the text of docs/values.md) -> its text in format ``name``; None: no value
    (a date with no instant, ``0000-00-00``: left out, as a NULL is)."""
    if name == "epoch":
        return unix_seconds
    if name == "epoch_ms":
        return epoch_ms
    if name == "iso8601":
        return iso8601_utc if kind is Kind.TIMESTAMP else iso8601
    if name == "boolean":
        return boolean
    if name == "number":
        return number
    raise ValueError(f"unknown format {name!r}")


def epoch_ms(raw: bytes) -> bytes | None:
    """Unix milliseconds (UTC) of a date or time: ``1577934245250``; a fraction of a
    millisecond is kept as decimals (``1577934245250.5``)."""
    seconds = unix_seconds(raw)
    if seconds is None:
        return None
    return number(format(Decimal(seconds.decode()) * 1000, "f").encode())


def iso8601(raw: bytes) -> bytes | None:
    """``2020-01-02 03:04:05.250`` -> ``2020-01-02T03:04:05.250``; a DATE as it is."""
    if unix_seconds(raw) is None:
        return None
    return raw.replace(b" ", b"T", 1)


def iso8601_utc(raw: bytes) -> bytes | None:
    """A TIMESTAMP (read in UTC) with its zone: ``2020-01-02T03:04:05Z``."""
    text = iso8601(raw)
    return None if text is None else text + b"Z"


def boolean(raw: bytes) -> bytes:
    """``0`` -> ``false``, any other number -> ``true`` (TINYINT(1), BIT(1))."""
    return b"false" if Decimal(raw.decode()) == 0 else b"true"


def number(raw: bytes) -> bytes:
    """An exact number in its shortest text: ``99.50`` -> ``99.5``, ``10.00`` -> ``10``,
    ``-0.00`` -> ``0``; integers as they are."""
    if b"." not in raw and b"e" not in raw.lower():
        return raw
    value = Decimal(raw.decode())
    if value == 0:
        return b"0"
    text = format(value.normalize(), "f")
    return text.encode()
