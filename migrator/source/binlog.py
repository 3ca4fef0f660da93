"""Reading the binary log: committed transactions of row changes, in the snapshot's row shape.

Built on python-mysql-replication (PyPI ``mysql-replication``), the well-kept pure-Python
reader of the replication protocol. ``BinlogReader`` yields, in log order:

* ``Transaction``: the row changes of one committed transaction on the mapped tables (each
  ``Change`` has the table and its before/after rows as tuples of Redis text in the order the
  caller asked for, the snapshot's shape), with the position after its commit (XID, or COMMIT
  for non-transactional engines) — the only places it is safe to resume from; a statement
  that commits by itself (DDL) of another database or of an unmapped table is an empty one,
  so that the stored position moves past it too;
* ``SchemaChange``: DDL (ALTER, RENAME, DROP, TRUNCATE, CREATE OR REPLACE) naming a mapped
  table, with the table's columns as last logged; the caller decides (``sync.schema_watch``)
  and the reader goes on after it; a row change logged as a statement ends the iteration;
* ``Idle``: a heartbeat while the log has nothing new (every ``heartbeat`` seconds), so that a
  stop request is seen within that time and the caller can tell it has caught up.

Rolled-back transactions are not in the log. Changes to tables the mapping does not name are
dropped by the library before their rows are decoded (``only_tables``/``only_schemas``); their
transactions still advance the position. Pitfalls (notes/binlog.md): file/position resume
needs ``is_mariadb`` off and ``resume_stream``; each reader needs its own server id; a
blocking stream is stopped by a flag checked per event, with heartbeats to wake it. A lost
connection raises ``source.reconnect.SourceLost`` (the library would reconnect forever, from
the middle of a transaction); the caller starts a new reader from the last whole transaction.
"""

from __future__ import annotations

import datetime
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication import row_event as _row_event
from pymysqlreplication.event import (
    GtidEvent,
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
from sqlalchemy.engine import URL

from migrator.mapping.schema import Column
from migrator.plan.schema_change import without_comments
from migrator.source.binlog_rows import RowFn, RowsDecoder, decoder_for, row_function
from migrator.source.binlog_values import (
    Encoder,
    empty_value,
    encoder_for,
    fraction_digits,
    is_current,
)
from migrator.source.gtid import advance
from migrator.source.reconnect import StreamConnection

Row = tuple[bytes | None, ...]


@dataclass(frozen=True, order=True)
class BinlogPosition:
    """A place in the binary log: file and byte position (what a reader resumes from), and
    the GTID state there when the server reports one (MariaDB: the last GTID of each domain,
    as ``@@gtid_binlog_pos`` shows it; MySQL: the GTID of the last transaction)."""

    file: str
    pos: int
    gtid: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (f" (GTID {self.gtid})" if self.gtid else "")

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "pos": self.pos, "gtid": self.gtid}


@dataclass(frozen=True)
class Change:
    table: str
    before: Row | None  # None for an insert
    after: Row | None  # None for a delete


@dataclass
class Transaction:
    changes: list[Change]
    position: BinlogPosition  # after the commit: where to resume once this is applied
    timestamp: int  # the commit's time (Unix seconds, from the log)


@dataclass(frozen=True)
class SchemaChange:
    table: str
    query: str
    position: BinlogPosition  # before the statement
    statement_dml: bool = False  # a row change logged as a statement, not DDL
    after: BinlogPosition | None = None  # after the statement (DDL commits by itself)
    # the table's column names in its last table map read before it (None: no row read yet)
    logged: tuple[str, ...] | None = None
    # rows of the table logged, after a DDL of this run, without these columns the caller wants
    missing: tuple[str, ...] = ()
    schema: str = ""  # the statement's default database (``USE``), for unqualified names


@dataclass(frozen=True)
class Idle:
    position: BinlogPosition  # how far the log has been read


Event = Transaction | SchemaChange | Idle


@dataclass
class TableColumns:
    """The columns a table's rows are wanted in (the plan's ``select`` order), with their
    schema, for turning the library's values into the snapshot's bytes."""

    names: tuple[str, ...]
    columns: tuple[Column, ...]
    encoders: tuple[Encoder, ...] = field(default=())
    # per table id: the table map's columns, and its fast decoder with the function that
    # makes a row of an image (binlog_rows.row_function), or None: the library decodes it
    decoders: dict[int, tuple[Any, tuple[RowsDecoder, RowFn] | None]] = field(default_factory=dict)

    # per table id: the table map's columns, and the encoders for its rows (``logged``)
    by_map: dict[int, tuple[Any, tuple[Encoder, ...]]] = field(default_factory=dict)

    use_fast: bool = True
    # a system-versioned table: its ROW END column; an image whose ROW END is not the maximum
    # is a version kept as history, not a row (an UPDATE logs the old version as an INSERT, a
    # DELETE is an UPDATE that ends the row), so it counts as no row at all
    row_end: str | None = None

    def fast(self, event: Any) -> list[Change] | None:
        """The event's changes through ``binlog_rows`` (None: use the library's decoding)."""
        if not self.use_fast:
            return None
        cached = self.decoders.get(event.table_id)
        if cached is None or cached[0] is not event.columns:  # a new table map
            cached = self.decoders[event.table_id] = (event.columns, self._decoder(event.columns))
        found = cached[1]
        if found is None:
            return None
        decoder, row = found
        packet = event.packet
        buf = bytes(packet.read(event.event_size - packet.read_bytes))
        twice = isinstance(event, UpdateRowsEvent)
        presents = [event.columns_present_bitmap]
        if twice:
            presents.append(event.columns_present_bitmap2)
        encoders = self.logged(event)
        name = event.table
        images = decoder.images(buf, presents)
        if twice:
            return [Change(name, row(b, encoders), row(a, encoders)) for b, a in images]
        if isinstance(event, WriteRowsEvent):
            return [Change(name, None, row(r[0], encoders)) for r in images]
        return [Change(name, row(r[0], encoders), None) for r in images]

    def _decoder(self, columns: Any) -> tuple[RowsDecoder, RowFn] | None:
        names = [c.name for c in columns]
        if any(n is None for n in names):
            return None  # no column names in the log: the library asks the server
        decoder = decoder_for(columns)
        if decoder is None:
            return None
        where = {n: k for k, n in enumerate(self.names)}
        end = names.index(self.row_end) if self.row_end in names else None
        slots = [(i, where[n]) for i, n in enumerate(names) if n in where]
        return decoder, row_function(slots, len(self.names), end)

    def logged(self, event: Any) -> tuple[Encoder, ...]:
        """The encoders for the rows of ``event``'s table map: a temporal column's fraction
        digits as that map logs them — a row logged before an ALTER that changed them and
        read after it (or the other way round) is written as it was logged — the others as
        the schema gives them."""
        cached = self.by_map.get(event.table_id)
        if cached is None or cached[0] is not event.columns:  # a new table map
            cached = self.by_map[event.table_id] = (event.columns, self._logged(event.columns))
        return cached[1]

    def _logged(self, columns: Any) -> tuple[Encoder, ...]:
        out = list(self.encoders)
        slots = {n: k for k, n in enumerate(self.names)}
        for c in columns:
            slot, fsp = slots.get(c.name), getattr(c, "fsp", None)
            if slot is None or fsp is None:  # not wanted, or no fraction (not temporal)
                continue
            column = self.columns[slot]
            if fraction_digits(column.column_type) != fsp:
                base = column.column_type.split("(")[0]
                logged = replace(column, column_type=f"{base}({fsp})" if fsp else base)
                out[slot] = encoder_for(logged)
        return tuple(out)

    def row(
        self, values: dict[str, Any], none_sources: dict[str, str], encoders: tuple[Encoder, ...]
    ) -> Row | None:
        if self.row_end is not None and not is_current(values.get(self.row_end)):
            return None  # a version kept as history
        out: list[bytes | None] = []
        for name, column, encode in zip(self.names, self.columns, encoders):
            v = values.get(name)
            if v is None:
                out.append(
                    empty_value(column) if none_sources.get(name, "null") != "null" else None
                )
            else:
                out.append(encode(v))
        return tuple(out)


_DDL = re.compile(
    r"^\s*(alter|rename|drop|truncate|create\s+or\s+replace)\b", re.IGNORECASE | re.DOTALL
)
# row changes logged as statements (a session with binlog_format=STATEMENT or MIXED)
_DML = re.compile(r"^\s*(insert|update|delete|replace|load\s+data)\b", re.IGNORECASE | re.DOTALL)


def ddl_table(
    query: str, schema: str, database: str, tables: Sequence[str], kinds: re.Pattern[str] = _DDL
) -> str | None:
    """The mapped table a DDL statement (or, with ``kinds=_DML``, a statement-logged row
    change) names, or None. ``schema`` is the statement's default database."""
    text = without_comments(query)
    if not kinds.match(text):
        return None
    for table in tables:
        name = re.escape(table)
        for m in re.finditer(rf"(?:`?([\w$]+)`?\s*\.\s*)?`?(?<![\w$]){name}(?![\w$])`?", text):
            qualifier = m.group(1)
            if (qualifier or schema) == database:
                return table
    return None


def patch_zero_dates() -> None:
    """Make the library return zero and partly-zero dates (``0000-00-00``, ``2020-00-15``)
    as their text instead of None, so they are written as MySQL prints them (docs/values.md), and
    read negative TIME(n) fractions right. Patches its DATE, DATETIME, DATETIME2 and TIME2
    readers (python-mysql-replication 1.0.x; tests/sync/test_binlog_values.py checks them)."""
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

    cls._RowsEvent__read_date = read_date
    cls._RowsEvent__read_time2 = read_time2
    cls._RowsEvent__read_datetime = read_datetime
    cls._RowsEvent__read_datetime2 = read_datetime2
    cls._migrator_zero_dates = True


def _uint_be(raw: bytes) -> int:
    return int.from_bytes(raw, "big")


ROW_EVENTS = (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)


class BinlogReader:
    """Follows the binary log from ``start``; iterate for ``Transaction``/``SchemaChange``/
    ``Idle`` events. ``stop`` (set from any thread) ends the iteration within ``heartbeat``
    seconds; ``blocking=False`` ends it at the end of the log instead of waiting."""

    def __init__(
        self,
        url: URL,
        *,
        server_id: int,
        database: str,
        tables: dict[str, TableColumns],
        start: BinlogPosition,
        stop: threading.Event | None = None,
        heartbeat: float = 0.2,
        blocking: bool = True,
        wkt: Callable[[bytes], bytes] | None = None,
        fast: bool = True,
    ) -> None:
        patch_zero_dates()
        for t in tables.values():
            t.encoders = tuple(encoder_for(c, wkt) for c in t.columns)
            t.use_fast = fast
        self.tables = tables
        self.database = database
        self.stop = stop or threading.Event()
        self.position = start
        settings = {
            "host": url.host or "127.0.0.1",
            "port": url.port or 3306,
            "user": url.username or "root",
            "passwd": url.password or "",
            "charset": "utf8mb4",
            "connect_timeout": 10,
            # a silent network: heartbeats come every `heartbeat` s, so this is a lost link
            "read_timeout": max(30, int(heartbeat * 20)),
        }
        self.stream = BinLogStreamReader(
            connection_settings=settings,
            server_id=server_id,
            log_file=start.file,
            log_pos=start.pos,
            resume_stream=True,
            blocking=blocking,
            only_events=[
                *ROW_EVENTS, XidEvent, QueryEvent, MariadbGtidEvent, GtidEvent, RotateEvent,
                HeartbeatLogEvent,
            ],
            only_schemas=[database],
            only_tables=list(tables),
            slave_heartbeat=heartbeat,
            enable_logging=False,
            pymysql_wrapper=StreamConnection,  # a lost connection is SourceLost, not retried
        )  # fmt: skip

    def close(self) -> None:
        self.stream.close()

    def __iter__(self) -> Iterator[Event]:
        changes: list[Change] = []
        gtid = self.position.gtid
        in_transaction = began = False
        stream = self.stream
        logged: dict[str, Any] = {}  # per mapped table: its last table map's columns
        altered: set[str] = set()  # the mapped tables a DDL of this run named
        for event in stream:
            if isinstance(event, ROW_EVENTS):
                in_transaction = True
                table = self.tables.get(event.table)
                if table is not None and event.schema == self.database:
                    if logged.get(event.table) is not event.columns:  # a new table map
                        # after a DDL of this run: never decoded with a schema not its own
                        lost = (
                            _lacking(event.columns, table.names) if event.table in altered else ()
                        )
                        if lost:
                            yield SchemaChange(event.table, "", self.position, missing=lost)
                            return
                        logged[event.table] = event.columns
                    changes += _changes(event, table)
            elif isinstance(event, XidEvent):
                self.position = BinlogPosition(stream.log_file, stream.log_pos, gtid)
                yield Transaction(changes, self.position, event.timestamp)
                changes, in_transaction, began = [], False, False
            elif isinstance(event, (MariadbGtidEvent, GtidEvent)):
                gtid = advance(gtid, str(event.gtid))
                changes, in_transaction, began = [], True, False
            elif isinstance(event, QueryEvent):
                query = event.query if isinstance(event.query, str) else event.query.decode()
                word = query.strip().upper()
                if word == "BEGIN":
                    changes, in_transaction, began = [], True, True
                elif word == "COMMIT":  # non-transactional engines end with COMMIT, not XID
                    self.position = BinlogPosition(stream.log_file, stream.log_pos, gtid)
                    yield Transaction(changes, self.position, event.timestamp)
                    changes, in_transaction, began = [], False, False
                elif word == "ROLLBACK":
                    changes, in_transaction, began = [], False, False
                else:
                    schema = event.schema.decode() if isinstance(event.schema, bytes) else ""
                    mapped = list(self.tables)
                    hit = ddl_table(query, schema, self.database, mapped)
                    dml = ddl_table(query, schema, self.database, mapped, _DML)
                    if hit is None and dml is not None:
                        yield SchemaChange(dml, query.strip(), self.position, True)
                        return
                    after = BinlogPosition(stream.log_file, stream.log_pos, gtid)
                    if hit is not None:
                        altered.add(hit)
                        names = _names(logged[hit]) if hit in logged else None
                        yield SchemaChange(hit, query.strip(), self.position, False, after,
                                           names, schema=schema)  # fmt: skip
                    if not began:  # a statement of its own (DDL...): it commits by itself
                        self.position = BinlogPosition(stream.log_file, stream.log_pos, gtid)
                        changes, in_transaction = [], False
                        if hit is None:  # another database's, or an unmapped table's: an
                            # empty transaction, so the stored position moves past it too
                            yield Transaction([], self.position, event.timestamp)
            elif isinstance(event, RotateEvent):
                # table ids are per server lifetime: after a restart the next file reuses
                # them for other tables, and the library keeps its map when the rotate to it
                # is the server's fake one (timestamp 0), as after a shutdown
                stream.table_map = {}
            elif isinstance(event, HeartbeatLogEvent) and not in_transaction:
                yield Idle(BinlogPosition(stream.log_file, stream.log_pos, gtid))
            if self.stop.is_set() and not in_transaction:
                return


def _lacking(columns: Any, wanted: Sequence[str]) -> tuple[str, ...]:
    """The wanted columns a table map does not have (none when it names no columns)."""
    names = _names(columns)
    return () if names is None else tuple(n for n in wanted if n not in names)


def _names(columns: Any) -> tuple[str, ...] | None:
    names = tuple(c.name for c in columns)
    return None if any(n is None for n in names) else names


def _changes(event: Any, table: TableColumns) -> list[Change]:
    changes = _images(event, table)
    if table.row_end is None:
        return changes
    # system versioning: history in and out of the log is no change of the current rows
    return [c for c in changes if c.before is not None or c.after is not None]


def _images(event: Any, table: TableColumns) -> list[Change]:
    if not getattr(event, "complete", True):
        return []
    fast = table.fast(event)
    if fast is not None:
        return fast
    name, encoders = event.table, table.logged(event)
    if isinstance(event, UpdateRowsEvent):
        return [
            Change(
                name,
                table.row(r["before_values"], r["before_none_sources"], encoders),
                table.row(r["after_values"], r["after_none_sources"], encoders),
            )
            for r in event.rows
        ]
    rows = [table.row(r["values"], r["none_sources"], encoders) for r in event.rows]
    if isinstance(event, WriteRowsEvent):
        return [Change(name, None, r) for r in rows]
    return [Change(name, r, None) for r in rows]
