"""Table maps and row events from raw bytes: the mapped tables' rows, the rest skipped.

A table map comes before the rows of every table in every transaction, and on a busy log
it is nearly always the same bytes as the last one of its table. ``TableMaps`` keeps what
it made of each distinct table map, keyed by the map's bytes: the first time, the
replication library parses it (``TableMapEvent``: column types, names, charsets, ENUM/SET
labels from the optional metadata), and the mapped table's fast decoder
(``rows``) and encoders are chosen; afterwards a dictionary look-up is all a table
map costs. A map of a table the mapping does not name costs the slicing of its names, and
its rows events only the read of their table id.

A rows event of a mapped table is cut into its present-columns bitmaps and its row images
in place and handed to the generated decoders. A table whose columns the fast decoder does
not know (MySQL's binary JSON, pre-5.6 temporal types) are decoded by the library, from the
same bytes, with its zero-date and negative-TIME readers patched (``patch_zero_dates``).
MySQL's partial JSON updates, and rows logged without all their columns, are refused.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysql.connections import MysqlPacket
from pymysqlreplication import column as _column
from pymysqlreplication import row_event as _row_event
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.packet import BinLogPacketWrapper

from migrator.source.binlog import guard
from migrator.source.binlog.rows import RowFn, RowsDecoder, codec_of
from migrator.source.binlog.stream import (
    HEADER_SIZE,
    PARTIAL_UPDATE,
    TABLE_MAP,
    UPDATES,
    V2,
    WRITES,
    RawEvent,
    length_coded,
)

_HEADER = struct.Struct("<IBIIIH")
MAX_CACHED_MAPS = 4096  # distinct table maps kept (a log of DDL churn must not grow it forever)


@dataclass(eq=False)
class Mapped:
    """What a table map of a mapped table gives: the library's columns (their identity is
    the map's structure: the same object for the same bytes), the fast decoder (None: the
    library decodes) and the encoders of its rows."""

    name: str
    columns: list[Any]
    table_obj: Any  # the library's Table, for its decoding
    table: Any  # binlog.TableColumns (the columns wanted, in the plan's order)
    fast: tuple[RowsDecoder, RowFn] | None
    encoders: tuple[Callable[[Any], bytes], ...]


class _Ctl:
    """What the library's parsers ask of their control connection: the charset, the server
    kind, and (only when the log names no columns) a cursor, opened on first use."""

    charset = "utf8mb4"

    def __init__(self, connect: Callable[[], Any]) -> None:
        self.dbms, self.connect = "mysql", connect  # dbms: set once the stream is open
        self.conn: Any = None

    def _get_dbms(self) -> str:
        return self.dbms

    def cursor(self) -> Any:
        if self.conn is None:
            self.conn = self.connect()
        return self.conn.cursor(pymysql.cursors.DictCursor)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class TableMaps:
    """The table maps read so far (per table id, since the last rotation) and the rows of
    ``database``'s mapped ``tables`` (name -> ``binlog.TableColumns``; another database's
    parents keyed ``database.table``, found by their ``elsewhere``)."""

    def __init__(self, database: str, tables: dict[str, Any], connect: Callable[[], Any]) -> None:
        self.database, self.tables = database, tables
        #: (database, table) as a table map names it -> the key of ``tables``
        self.keys = {t.elsewhere or (database, name): name for name, t in tables.items()}
        self.by_id: dict[int, Mapped | None] = {}
        self.by_bytes: dict[bytes, Mapped | None] = {}
        self.ctl = _Ctl(connect)
        self.library_map: dict[int, Any] = {}  # table id -> the library's Table
        self.log_file: Callable[[], str] = lambda: "?"  # the stream's file, for messages
        self.full: set[tuple[int, bytes]] = set()  # (columns, bitmap) seen naming them all

    def rotated(self) -> None:
        """Table ids are per server lifetime: after a restart (which rotates the log) the
        same id may name another table."""
        self.by_id.clear()
        self.library_map.clear()

    def table_map(self, event: RawEvent) -> Mapped | None:
        body = event.body
        table_id = int.from_bytes(body[:6], "little")
        try:
            found = self.by_bytes[body]
        except KeyError:
            found = self._new(event, table_id)
            if len(self.by_bytes) >= MAX_CACHED_MAPS:
                self.by_bytes.clear()
            self.by_bytes[body] = found
        self.by_id[table_id] = found
        if found is not None:
            self.library_map[table_id] = found.table_obj
        return found

    def _new(self, event: RawEvent, table_id: int) -> Mapped | None:
        body = event.body
        n = body[8]
        schema = body[9 : 9 + n].decode()
        m = body[10 + n]
        key = self.keys.get((schema, body[11 + n : 11 + n + m].decode()))
        if key is None:
            return None
        name, table = key, self.tables[key]
        parsed = self._library(event, TABLE_MAP, {})
        columns = parsed.columns
        if any(getattr(c, "name", None) is None for c in columns):
            raise guard.UnsafeLog(
                f"the binary log's table map of {self.shown(name)} at {self.where(event)} names "
                "no columns (binlog_row_metadata=MINIMAL): its rows cannot be matched to "
                "columns exactly",
                f"SET GLOBAL binlog_row_metadata = 'FULL' (and in my.cnf); {guard.RELOAD}",
            )
        return Mapped(name, columns, parsed.table_obj, table, table.decoder_of(columns),
                      table.encoders_of(columns))  # fmt: skip

    def _library(self, event: RawEvent, type_: int, table_map: dict[int, Any]) -> Any:
        """The library's event made of ``event``'s bytes (a dummy checksum appended: its
        table-map parser stops 4 bytes before the end)."""
        size = HEADER_SIZE + len(event.body) + 4
        timestamp, _, server, _, next_pos, flags = _HEADER.unpack(event.header)
        header = _HEADER.pack(timestamp, type_, server, size, next_pos, flags)
        packet = MysqlPacket(b"\x00" + header + event.body + b"\x00\x00\x00\x00", "utf8mb4")
        cls = _LIBRARY[type_]
        wrapped = BinLogPacketWrapper(
            packet, table_map, self.ctl, (8, 0, 0), True, {cls}, None, None, None, None,
            False, False, False, True, False,
        )  # fmt: skip
        if wrapped.event is None:
            raise ValueError(f"the library could not read a binary log event of type {type_}")
        return wrapped.event

    def rows(self, event: RawEvent) -> tuple[Mapped, Any] | None:
        """A mapped table's rows event: (its table, the rows as ``binlog.Change``s are made
        of them: ``("fast", images)`` or ``("library", event)``); None for other tables."""
        body = event.body
        found = self.by_id.get(int.from_bytes(body[:6], "little"))
        if found is None:
            return None
        type_ = event.type
        off = 8 + (body[8] | body[9] << 8) if type_ in V2 else 8
        n, off = length_coded(body, off)
        size = (n + 7) >> 3
        presents = [body[off : off + size]]
        off += size
        if type_ in UPDATES:
            presents.append(body[off : off + size])
            off += size
        for present in presents:
            if (n, present) not in self.full:
                self._whole(present, n, found.name, event)
        if type_ == PARTIAL_UPDATE:  # rows made whole (JSON logged whole or unchanged), or refused
            library = self._library(event, type_, self.library_map)
            guard.partial_json(library, self.log_file())
            return found, ("library", library)
        if found.fast is None:
            return found, ("library", self._library(event, type_, self.library_map))
        return found, ("fast", found.fast[0].images(body[off:], presents))

    def _whole(self, present: bytes, n: int, table: str, event: RawEvent) -> None:
        """Raise unless a present-columns bitmap names all ``n`` columns: sync needs the
        whole row before and after (binlog_row_image=FULL; a session may set MINIMAL)."""
        if guard.full(present, n):
            self.full.add((n, present))
            return
        raise guard.UnsafeLog(
            f"a row change of {self.shown(table)} at {self.where(event)} is logged without "
            "all of its columns (binlog_row_image=MINIMAL or NOBLOB, set by the server or a "
            "session): sync needs the whole row before and after",
            "SET GLOBAL binlog_row_image = 'FULL' (and in my.cnf), and make sure no session "
            f"changes it (SET SESSION binlog_row_image); {guard.RELOAD}",
        )

    def shown(self, key: str) -> str:
        """``database.table`` of a key of ``tables``, for messages."""
        return ".".join(self.tables[key].elsewhere or (self.database, key))

    def where(self, event: RawEvent) -> str:
        """Where ``event`` starts in the log (``file:offset``), for messages."""
        _, _, _, size, next_pos, _ = _HEADER.unpack(event.header)
        return f"{self.log_file()}:{next_pos - size}"

    def close(self) -> None:
        self.ctl.close()


_LIBRARY: dict[int, Any] = {
    TABLE_MAP: _row_event.TableMapEvent,
    **dict.fromkeys(WRITES, _row_event.WriteRowsEvent),
    **dict.fromkeys(UPDATES - {PARTIAL_UPDATE}, _row_event.UpdateRowsEvent),
    PARTIAL_UPDATE: _row_event.PartialUpdateRowsEvent,
    25: _row_event.DeleteRowsEvent,
    32: _row_event.DeleteRowsEvent,
}


def patch_zero_dates() -> None:
    """Make the library return zero and partly-zero dates (``0000-00-00``, ``2020-00-15``)
    as their text instead of None, so they are written as MySQL prints them (docs/values.md),
    read negative TIME(n) fractions right, and decode MySQL's utf16, ucs2 and utf32 as the
    big-endian text they are. Patches its DATE, DATETIME, DATETIME2 and TIME2 readers and its
    charset lookup (python-mysql-replication 1.0.x; tests/sync/test_binlog_values.py checks
    them)."""
    cls: Any = _row_event.RowsEvent
    if getattr(cls, "_migrator_zero_dates", False):
        return

    def read_date(self: Any) -> Any:
        v = self.packet.read_uint24()
        year, month, day = v >> 9, (v >> 5) & 15, v & 31
        try:
            return datetime.date(year, month, day)
        except ValueError:
            return f"{year:04d}-{month:02d}-{day:02d}"

    def read_datetime(self: Any) -> Any:
        v = self.packet.read_uint64()
        date, time = divmod(v, 1000000)
        year, md = divmod(date, 10000)
        month, day = divmod(md, 100)
        hour, ms = divmod(time, 10000)
        minute, second = divmod(ms, 100)
        try:
            return datetime.datetime(year, month, day, hour, minute, second)
        except ValueError:
            return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"

    def read_datetime2(self: Any, column: Any) -> Any:
        v = _uint_be(self.packet.read(5)) - 0x8000000000
        ymd, hms = v >> 17, v % (1 << 17)
        ym, day = ymd >> 5, ymd % 32
        year, month = divmod(ym, 13)
        hour, minute, second = hms >> 12, (hms >> 6) % 64, hms % 64
        micro = self._RowsEvent__read_fsp(column)
        try:
            return datetime.datetime(year, month, day, hour, minute, second, micro)
        except ValueError:
            fsp = column.fsp or 0
            frac = f".{micro:06d}"[: fsp + 1] if fsp else ""
            return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}{frac}"

    def read_time2(self: Any, column: Any) -> Any:
        # MySQL's my_time_packed_from_binary: the fraction shares the sign of the whole
        # (the library reads it as positive, so '-00:00:00.001' came out as -0.999 s)
        fsp = column.fsp or 0
        if fsp >= 5:
            packed = _uint_be(self.packet.read(6)) - 0x800000000000
        else:
            intpart = _uint_be(self.packet.read(3)) - 0x800000
            frac, unit = 0, 0
            if fsp:
                size = 1 if fsp <= 2 else 2
                frac, unit = _uint_be(self.packet.read(size)), 10000 if size == 1 else 100
                if intpart < 0 and frac:
                    intpart, frac = intpart + 1, frac - (0x100 if size == 1 else 0x10000)
            packed = (intpart << 24) + frac * unit
        sign, packed = (-1 if packed < 0 else 1), abs(packed)
        hms, micro = packed >> 24, packed % (1 << 24)
        hours, minutes, seconds = (hms >> 12) % 1024, (hms >> 6) % 64, hms % 64
        return sign * datetime.timedelta(
            hours=hours, minutes=minutes, seconds=seconds, microseconds=micro
        )

    cls.charset_to_encoding = staticmethod(codec_of)  # utf16, ucs2, utf32: big-endian
    cls._RowsEvent__read_date = read_date
    cls._RowsEvent__read_time2 = read_time2
    cls._RowsEvent__read_datetime = read_datetime
    cls._RowsEvent__read_datetime2 = read_datetime2
    cls._migrator_zero_dates = True
    patch_vectors()


#: MySQL 9's VECTOR (MYSQL_TYPE_VECTOR), which python-mysql-replication 1.0 does not know
VECTOR = 242


def patch_vectors() -> None:
    """Make the library read a VECTOR column of a table map: one byte of metadata (the size
    of its length, as a BLOB's), which it skipped, so every field after it was misread
    ("0 is not a valid MetadataFieldType"); the server counts it among the columns of the
    charset list (binary); its value is then read as a GEOMETRY's is, the raw bytes (4-byte
    little-endian floats) that SELECT returns too."""
    column: Any = _column.Column
    if getattr(column, "_migrator_vectors", False):
        return
    parse = column._Column__parse_column_definition

    def parse_vector(self: Any, column_type: int, packet: Any) -> None:
        parse(self, column_type, packet)
        if column_type == VECTOR:
            self.length_size = packet.read_uint8()

    table_map: Any = _row_event.TableMapEvent
    character = table_map._is_character_column
    init = table_map.__init__

    def is_character(column_type: int, dbms: str = "mysql") -> bool:
        # the server counts VECTOR (charset binary) among the columns its charsets are for
        return column_type == VECTOR or character(column_type, dbms=dbms)

    def table_map_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        for c in getattr(self, "columns", ()):
            if c.type == VECTOR:  # its value: a length and raw bytes, as a GEOMETRY's
                c.type = FIELD_TYPE.GEOMETRY

    column._Column__parse_column_definition = parse_vector
    column._migrator_vectors = True
    table_map._get_optional_meta_data = _optional_metadata
    table_map._is_character_column = staticmethod(is_character)
    table_map.__init__ = table_map_init


def _optional_metadata(self: Any) -> Any:
    """The library's TLV loop of a table map's optional metadata, which also skips a field it
    does not know (MySQL 9's VECTOR_DIMENSIONALITY, 13) instead of failing on it."""
    kinds, out = _row_event.MetadataFieldType, _row_event.OptionalMetaData()
    known = {k.value for k in kinds}
    while self.packet.bytes_to_read() > _row_event.BINLOG.BINLOG_CHECKSUM_LEN:
        kind = self.packet.read(1)[0]
        length = self.packet.read_length_coded_binary()
        if kind not in known or kind == kinds.UNKNOWN_METADATA_FIELD_TYPE.value:
            self.packet.read(length)
            continue
        field = kinds(kind)
        if field == kinds.SIGNEDNESS:
            bools = self._read_bool_list(length, True)
            out.unsigned_column_list = self._convert_include_non_numeric_column(bools)
        elif field in (kinds.DEFAULT_CHARSET, kinds.ENUM_AND_SET_DEFAULT_CHARSET):
            default, pairs = self._read_default_charset(length)
            test = self._is_character_column if field == kinds.DEFAULT_CHARSET else (
                self._is_enum_or_set_column)  # fmt: skip
            parsed = self._parsed_column_charset_by_default_charset(default, pairs, test)
            if field == kinds.DEFAULT_CHARSET:
                out.default_charset_collation, out.charset_collation = default, pairs
                out.charset_collation_list = parsed
            else:
                out.enum_and_set_default_charset = default
                out.enum_and_set_charset_collation = pairs
                out.enum_and_set_collation_list = parsed
        elif field in (kinds.COLUMN_CHARSET, kinds.ENUM_AND_SET_COLUMN_CHARSET):
            ids = self._read_ints(length)
            test = self._is_character_column if field == kinds.COLUMN_CHARSET else (
                self._is_enum_or_set_column)  # fmt: skip
            parsed = self._parsed_column_charset_by_column_charset(ids, test)
            if field == kinds.COLUMN_CHARSET:
                out.column_charset, out.charset_collation_list = ids, parsed
            else:
                out.enum_and_set_default_column_charset_list = ids
                out.enum_and_set_collation_list = parsed
        elif field == kinds.COLUMN_NAME:
            out.column_name_list = self._read_column_names(length)
        elif field == kinds.SET_STR_VALUE:
            out.set_str_value_list = self._read_type_values(length)
        elif field == kinds.ENUM_STR_VALUE:
            out.set_enum_str_value_list = self._read_type_values(length)
        elif field == kinds.GEOMETRY_TYPE:
            out.geometry_type_list = self._read_ints(length)
        elif field == kinds.SIMPLE_PRIMARY_KEY:
            out.simple_primary_key_list = self._read_ints(length)
        elif field == kinds.PRIMARY_KEY_WITH_PREFIX:
            out.primary_keys_with_prefix = self._read_primary_keys_with_prefix(length)
        elif field == kinds.VISIBILITY:
            out.visibility_list = self._read_bool_list(length, False)
    return out


def _uint_be(raw: bytes) -> int:
    return int.from_bytes(raw, "big")
