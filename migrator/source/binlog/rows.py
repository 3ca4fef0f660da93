"""A fast decoder for the row images of a rows event (the hot path of ``sync``).

python-mysql-replication decodes each value through several generic Python calls (packet
reads, bitmap tests, name lookups, NULL-source bookkeeping): ~70 us per row on these
machines, most of sync's time. This module reads a rows event's body in one piece and decodes
each column with a small function chosen once per table map (``struct`` on a bytes buffer),
giving the same Python values the library gives (ints, floats, bytes or str, timedelta...),
which ``values`` then encodes exactly as before — except DECIMAL, DATE and DATETIME,
decoded straight to their text (the encoders pass bytes through). Column types it does not
know (MySQL's binary JSON, the pre-5.6 TIME) make ``decoder_for`` return None, and the
reader falls back to the library for that table.
tests/sync/test_binlog_values.py checks both paths against the snapshot for every type.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable, Sequence
from typing import Any

from pymysql.charset import charset_by_name
from pymysqlreplication.constants import FIELD_TYPE as T

from migrator.source.binlog.values import is_current

Decode = Callable[[bytes, int], tuple[Any, int]]
RowImage = list[Any]

_UTF8 = {"utf8", "utf-8", "utf8mb4", "utf8mb3", "ascii"}
# MySQL's wide charsets whose names Python reads otherwise: its utf16, ucs2 and utf32 are
# big-endian (Python's "utf16"/"utf32" guess little-endian without a BOM; "ucs2" is unknown)
WIDE_CODECS = {"utf16": "utf-16-be", "ucs2": "utf-16-be", "utf32": "utf-32-be",
               "utf16le": "utf-16-le"}  # fmt: skip


def codec_of(charset: str) -> str:
    """The Python codec of a MySQL charset's bytes."""
    wide = WIDE_CODECS.get(charset.lower())
    if wide is not None:
        return wide
    found = charset_by_name(charset)
    return found.encoding if found else charset


def _ints(size: int, unsigned: bool) -> Decode:
    if size == 3:

        def int24(buf: bytes, off: int) -> tuple[Any, int]:
            return int.from_bytes(buf[off : off + 3], "little", signed=not unsigned), off + 3

        return int24
    code = {1: "b", 2: "h", 4: "i", 8: "q"}[size]
    unpack = struct.Struct("<" + (code.upper() if unsigned else code)).unpack_from

    def fixed(buf: bytes, off: int) -> tuple[Any, int]:
        return unpack(buf, off)[0], off + size

    return fixed


def _struct(fmt: str, size: int) -> Decode:
    unpack = struct.Struct(fmt).unpack_from

    def read(buf: bytes, off: int) -> tuple[Any, int]:
        return unpack(buf, off)[0], off + size

    return read


def _encoding(charset: str | None) -> str | None:
    """The codec a string column's bytes are decoded with (None: kept as bytes)."""
    if charset is None:
        return None
    name = codec_of(charset)
    return name if name.lower() not in _UTF8 and charset != "binary" else None


def _ascii_compatible(encoding: str) -> bool:
    """Whether ASCII text is the same bytes in ``encoding`` as in UTF-8 (latin1, cp1252,
    the EUC and GB families...; not UCS-2, UTF-16 or UTF-32)."""
    ascii = bytes(range(128))
    try:
        return ascii.decode(encoding) == ascii.decode("ascii")
    except (UnicodeDecodeError, LookupError):
        return False


def _text(length_size: int, charset: str | None) -> Decode:
    encoding = _encoding(charset)
    to_int = int.from_bytes
    # ASCII text of an ASCII-compatible charset is already its UTF-8: kept as bytes
    ascii_ok = encoding is not None and _ascii_compatible(encoding)

    def read(buf: bytes, off: int) -> tuple[Any, int]:
        n = to_int(buf[off : off + length_size], "little")
        start = off + length_size
        raw = buf[start : start + n]
        if encoding is None or (ascii_ok and raw.isascii()):
            return raw, start + n
        return raw.decode(encoding), start + n

    return read


def _decimal(precision: int, scale: int) -> Decode:
    """MySQL's packed DECIMAL (groups of 9 digits in 4 bytes, big-endian, the sign in the top
    bit, a negative value inverted) -> its text, as ``format(Decimal, "f")`` writes it."""
    sizes = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]
    integral = precision - scale
    full_int, rest_int = divmod(integral, 9)
    full_frac, rest_frac = divmod(scale, 9)
    size = sizes[rest_int] + full_int * 4 + full_frac * 4 + sizes[rest_frac]
    if full_int == 0 and full_frac == 0:
        return _small_decimal(size, sizes[rest_frac], scale)
    return _decimal_groups(sizes, full_int, rest_int, full_frac, rest_frac, scale, size)


def _small_decimal(size: int, frac_bytes: int, scale: int) -> Decode:
    """At most 8 digits each side (DECIMAL(10,2), (16,8)...): one group each, so the value
    is one integer, split by a shift (the hot path of a money column)."""
    sign, shift = 1 << (8 * size - 1), 8 * frac_bytes
    negated = sign ^ ((1 << (8 * size)) - 1)  # the sign bit back, then every bit inverted
    frac_mask = (1 << shift) - 1
    pattern = b"%s%d.%0*d" if scale else b"%s%d"

    def read(buf: bytes, off: int) -> tuple[Any, int]:
        v = int.from_bytes(buf[off : off + size], "big")
        negative = not v & sign
        v ^= negated if negative else sign
        whole = v >> shift
        if scale:
            return pattern % (b"-" if negative else b"", whole, scale, v & frac_mask), off + size
        return pattern % (b"-" if negative else b"", whole), off + size

    return read


def _decimal_groups(
    sizes: list[int], full_int: int, rest_int: int, full_frac: int, rest_frac: int, scale: int,
    size: int,
) -> Decode:  # fmt: skip
    def read(buf: bytes, off: int) -> tuple[Any, int]:
        raw = bytearray(buf[off : off + size])
        negative = not raw[0] & 0x80
        raw[0] ^= 0x80
        if negative:
            raw = bytearray(b ^ 0xFF for b in raw)
        pos, parts = 0, []
        if sizes[rest_int]:
            parts.append(str(int.from_bytes(raw[: sizes[rest_int]], "big")))
            pos = sizes[rest_int]
        for _ in range(full_int):
            parts.append(f"{int.from_bytes(raw[pos : pos + 4], 'big'):09d}")
            pos += 4
        frac = []
        for _ in range(full_frac):
            frac.append(f"{int.from_bytes(raw[pos : pos + 4], 'big'):09d}")
            pos += 4
        if sizes[rest_frac]:
            value = int.from_bytes(raw[pos : pos + sizes[rest_frac]], "big")
            frac.append(f"{value:0{rest_frac}d}")
        whole = "".join(parts).lstrip("0") or "0"
        text = ("-" if negative else "") + whole + ("." + "".join(frac) if scale else "")
        return text.encode(), off + size  # as format(Decimal, "f") writes it

    return read


def _fsp_reader(fsp: int) -> tuple[int, Callable[[bytes], int]]:
    """Bytes of a temporal fraction and how to turn them into microseconds."""
    size = (fsp + 1) // 2
    scale = 10 ** (6 - 2 * size)
    return size, lambda raw: int.from_bytes(raw, "big") * scale if size else 0


def _datetime2(fsp: int) -> Decode:
    size, micro_of = _fsp_reader(fsp)

    def read(buf: bytes, off: int) -> tuple[Any, int]:
        v = int.from_bytes(buf[off : off + 5], "big") - 0x8000000000
        micro = micro_of(buf[off + 5 : off + 5 + size])
        ymd, hms = v >> 17, v % (1 << 17)
        year, month = divmod(ymd >> 5, 13)
        day, hour, minute, second = ymd % 32, hms >> 12, (hms >> 6) % 64, hms % 64
        text = b"%04d-%02d-%02d %02d:%02d:%02d" % (year, month, day, hour, minute, second)
        if fsp:
            text += (b".%06d" % micro)[: fsp + 1]
        return text, off + 5 + size  # zero and partly-zero dates too, as MySQL prints them

    return read


def _timestamp2(fsp: int) -> Decode:
    size, micro_of = _fsp_reader(fsp)
    epoch = datetime.datetime(1970, 1, 1)

    def read(buf: bytes, off: int) -> tuple[Any, int]:
        seconds = int.from_bytes(buf[off : off + 4], "big")
        micro = micro_of(buf[off + 4 : off + 4 + size])
        return epoch + datetime.timedelta(seconds=seconds, microseconds=micro), off + 4 + size

    return read


def _time2(fsp: int) -> Decode:
    def read(buf: bytes, off: int) -> tuple[Any, int]:
        # MySQL's my_time_packed_from_binary: the fraction shares the sign of the whole
        if fsp >= 5:
            packed = int.from_bytes(buf[off : off + 6], "big") - 0x800000000000
            end = off + 6
        else:
            intpart = int.from_bytes(buf[off : off + 3], "big") - 0x800000
            frac, end = 0, off + 3
            if fsp:
                size = 1 if fsp <= 2 else 2
                frac = int.from_bytes(buf[end : end + size], "big")
                end += size
                if intpart < 0 and frac:
                    intpart, frac = intpart + 1, frac - (1 << (8 * size))
                frac *= 10000 if size == 1 else 100
            packed = (intpart << 24) + frac
        sign, packed = (-1 if packed < 0 else 1), abs(packed)
        hms, micro = packed >> 24, packed % (1 << 24)
        delta = datetime.timedelta(
            hours=(hms >> 12) % 1024, minutes=(hms >> 6) % 64, seconds=hms % 64, microseconds=micro
        )
        return sign * delta, end

    return read


def _date(buf: bytes, off: int) -> tuple[Any, int]:
    v = int.from_bytes(buf[off : off + 3], "little")
    return b"%04d-%02d-%02d" % (v >> 9, (v >> 5) & 15, v & 31), off + 3


def _year(buf: bytes, off: int) -> tuple[Any, int]:
    return buf[off] + 1900, off + 1


def _labels(size: int, labels: Sequence[str], is_set: bool) -> Decode:
    def read(buf: bytes, off: int) -> tuple[Any, int]:
        v = int.from_bytes(buf[off : off + size], "little")
        if not is_set:
            return labels[v] if v < len(labels) else "", off + size
        return ",".join(m for i, m in enumerate(labels) if v >> i & 1), off + size

    return read


def _bit(nbytes: int) -> Decode:
    def read(buf: bytes, off: int) -> tuple[Any, int]:
        return int.from_bytes(buf[off : off + nbytes], "big"), off + nbytes

    return read


def _decoder(column: Any) -> Decode | None:
    t = column.type
    unsigned = bool(getattr(column, "unsigned", False))
    if t in (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG):
        return _ints({T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8}[t], unsigned)
    if t == T.FLOAT:
        return _struct("<f", 4)
    if t == T.DOUBLE:
        return _struct("<d", 8)
    if t == T.NEWDECIMAL:
        return _decimal(column.precision, column.decimals)
    if t in (T.VARCHAR, T.STRING, T.VAR_STRING):
        return _text(2 if column.max_length > 255 else 1, column.character_set_name)
    if t in (T.BLOB, T.GEOMETRY):
        return _text(column.length_size, column.character_set_name if t == T.BLOB else "binary")
    if t == T.DATETIME2:
        return _datetime2(column.fsp)
    if t == T.TIMESTAMP2:
        return _timestamp2(column.fsp)
    if t == T.TIME2:
        return _time2(column.fsp)
    if t == T.DATE:
        return _date
    if t == T.YEAR:
        return _year
    if t in (T.ENUM, T.SET):
        labels = (column.enum_values if t == T.ENUM else column.set_values) or None
        return None if labels is None else _labels(column.size, labels, t == T.SET)
    if t == T.BIT:
        return _bit(column.bytes)
    return None  # binary JSON, pre-5.6 temporal types...: the library decodes those


ImageFn = Callable[[bytes, int, list[Decode]], tuple[RowImage, int]]


class RowsDecoder:
    """Decodes the row images of events of one table map into lists of Python values, in
    the table's column order."""

    def __init__(self, decoders: list[Decode], inline: list[str | None] | None = None) -> None:
        self.decoders = decoders
        self.n = len(decoders)
        self.inline = tuple(inline or [None] * self.n)

    def images(self, buf: bytes, presents: list[bytes]) -> list[tuple[RowImage, ...]]:
        """Every row of the event body ``buf``: one image per present-columns bitmap (two
        for an UPDATE: before and after)."""
        readers = []
        for present in presents:
            key = (bytes(present), self.inline)
            reader = _IMAGES.get(key)
            if reader is None:
                reader = _IMAGES[key] = _image_function(self.n, *key)
            readers.append(reader)
        out: list[tuple[RowImage, ...]] = []
        off, end, decoders = 0, len(buf), self.decoders
        if len(readers) == 1:
            (read,) = readers
            while off < end:
                values, off = read(buf, off, decoders)
                out.append((values,))
            return out
        read_before, read_after = readers
        while off < end:
            before, off = read_before(buf, off, decoders)
            after, off = read_after(buf, off, decoders)
            out.append((before, after))
        return out


#: generated row-image readers by (present-columns bitmap, each column's inline code):
#: a table map comes with every transaction, its columns' layout seldom changes
_IMAGES: dict[tuple[bytes, tuple[str | None, ...]], ImageFn] = {}
_NAMESPACE: dict[str, Any] = {"FROM": int.from_bytes} | {
    f"U{c}": struct.Struct("<" + c).unpack_from for c in "bBhHiIqQ"
}


def _image_function(n: int, present: bytes, inline: tuple[str | None, ...]) -> ImageFn:
    """Generated code for one row image of the columns ``present`` marks: its NULL
    bitmap, then each value, integers and UTF-8/binary strings read inline (``_inline``),
    the other types through their decoder (``D[i]``)."""
    cols = [i for i in range(n) if present[i >> 3] >> (i & 7) & 1]
    null_size = (len(cols) + 7) // 8
    names = [f"v{i}" for i in range(n)]
    lines = [
        "def image(buf, off, D):",
        f"    nulls = FROM(buf[off : off + {null_size}], 'little')",
        f"    off += {null_size}",
    ]
    if names:
        lines.append(f"    {' = '.join(names)} = None")
    for k, i in enumerate(cols):
        lines.append(f"    if not nulls & {1 << k}:")
        code = inline[i] or "v{i}, off = D[{i}](buf, off)"
        lines += [f"        {line}" for line in code.format(i=i).split("\n")]
    lines.append(f"    return [{', '.join(names)}], off")
    namespace = dict(_NAMESPACE)
    exec(compile("\n".join(lines) + "\n", "<row image>", "exec"), namespace)
    image: ImageFn = namespace["image"]
    return image


#: an image's values -> the row (``TableColumns.names`` order, each value encoded by the
#: encoder of its slot), or None for a version kept as history (``is_current``)
RowFn = Callable[[RowImage, Sequence[Callable[[Any], bytes]]], tuple[bytes | None, ...] | None]
_ROWS: dict[tuple[tuple[tuple[int, int], ...], int, int | None], RowFn] = {}


def row_function(slots: Sequence[tuple[int, int]], width: int, end: int | None) -> RowFn:
    """The row of ``width`` slots made from an image: the value at column index ``i`` goes
    to ``slot``, encoded (``slots``: (i, slot) pairs), NULL stays None; with ``end``, the
    ROW END's index, None unless it is a current row. Generated code, one per layout."""
    key = (tuple(slots), width, end)
    found = _ROWS.get(key)
    if found is not None:
        return found
    by_slot = {slot: i for i, slot in slots}
    terms = [
        "None" if i is None else f"None if (v := values[{i}]) is None else E[{slot}](v)"
        for slot in range(width)
        for i in [by_slot.get(slot)]
    ]
    lines = ["def row(values, E):"]
    if end is not None:
        lines += [f"    if not IS_CURRENT(values[{end}]):", "        return None"]
    lines.append(f"    return ({''.join(t + ', ' for t in terms)})")
    namespace: dict[str, Any] = {"IS_CURRENT": is_current}
    exec(compile("\n".join(lines) + "\n", "<row>", "exec"), namespace)
    made: RowFn = namespace["row"]
    _ROWS[key] = made
    return made


_INT_CODES = {T.TINY: (1, "b"), T.SHORT: (2, "h"), T.LONG: (4, "i"), T.LONGLONG: (8, "q")}


def _inline(column: Any) -> str | None:
    """The statements (lines) that read a value of ``column`` at ``off`` into ``v{i}`` and
    move ``off`` past it, as ``_ints`` and ``_text`` do; None: through its decoder. Integers
    but MEDIUMINT, and strings kept as bytes with a 1- or 2-byte length."""
    t = column.type
    if t in _INT_CODES:
        size, code = _INT_CODES[t]
        code = code.upper() if getattr(column, "unsigned", False) else code
        return f"v{{i}}, = U{code}(buf, off)\noff += {size}"
    if t in (T.VARCHAR, T.STRING, T.VAR_STRING):
        length_size = 2 if column.max_length > 255 else 1
    elif t == T.BLOB:
        length_size = column.length_size
    else:
        return None
    if length_size > 2 or _encoding(column.character_set_name) is not None:
        return None
    n = "buf[off]" if length_size == 1 else "buf[off] | buf[off + 1] << 8"
    start = f"off + {length_size}"
    return f"n = {n}\nv{{i}} = buf[{start} : {start} + n]\noff = {start} + n"


def decoder_for(columns: Sequence[Any]) -> RowsDecoder | None:
    """A decoder for a table map's columns, or None when one of their types is not known."""
    decoders = []
    for column in columns:
        decode = _decoder(column)
        if decode is None:
            return None
        decoders.append(decode)
    return RowsDecoder(decoders, [_inline(c) for c in columns])
