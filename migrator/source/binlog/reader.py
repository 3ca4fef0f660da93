"""Reading the binary log: committed transactions of row changes, in the snapshot's row shape.

Built on python-mysql-replication (PyPI ``mysql-replication``), the well-kept pure-Python
reader of the replication protocol. ``BinlogReader`` yields, in log order:

* ``Transaction``: the row changes of one committed transaction on the mapped tables (each
  ``Change`` has the table and its before/after rows as tuples of Redis text in the order the
  caller asked for, the snapshot's shape), with the position after its commit (XID, or COMMIT
  for non-transactional engines) — the only places it is safe to resume from;
* ``SchemaChange``: DDL (ALTER, RENAME, DROP, TRUNCATE, CREATE OR REPLACE) naming a mapped
  table, with the table's columns as last logged; the caller decides (``sync.schema_watch``)
  and the reader goes on after it; a row change logged as a statement ends the iteration;
* ``Idle``: a heartbeat while the log has nothing new (every ``heartbeat`` seconds), so that a
  stop request is seen within that time and the caller can tell it has caught up.

Rolled-back transactions are not in the log. Changes to tables the caller does not name (the
mapped tables, and the parents sync reads for their cascades only: plan/cascade.py) are
dropped by the library before their rows are decoded (``only_tables``/``only_schemas``); their
transactions still advance the position. Pitfalls (notes/binlog.md): file/position resume
needs ``is_mariadb`` off and ``resume_stream``; each reader needs its own server id; a
blocking stream is stopped by a flag checked per event, with heartbeats to wake it. A lost
connection raises ``reconnect.SourceLost`` (the library would reconnect forever, from
the middle of a transaction); the caller starts a new reader from the last whole transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from sqlalchemy.engine import URL

from migrator.mapping.schema import Column
from migrator.source.binlog.gtid import advance, is_state, parse
from migrator.source.binlog.reconnect import StreamConnection
from migrator.source.binlog.rows import RowFn, RowsDecoder, decoder_for, row_function
from migrator.source.binlog.statements import DDL, DML, ddl_table
from migrator.source.binlog.stream import (
    GTID,
    HEARTBEAT,
    HEARTBEAT_V2,
    MARIADB_GTID,
    QUERY,
    ROTATE,
    ROWS,
    TABLE_MAP,
    UPDATES,
    WRITES,
    XID,
    LogStream,
    RawEvent,
)
from migrator.source.binlog.tables import Mapped, TableMaps, patch_zero_dates
from migrator.source.binlog.values import (
    Encoder,
    empty_value,
    encoder_for,
    fraction_digits,
    is_current,
)

Row = tuple[bytes | None, ...]


@dataclass(frozen=True, order=True)
class BinlogPosition:
    """A place in the binary log: file and byte position (what a reader resumes from), and
    the GTID state there when the server reports one (MariaDB: the last GTID of each domain,
    as ``@@gtid_binlog_pos`` shows it; MySQL: the executed GTID set, as ``@@gtid_executed``
    shows it)."""

    file: str
    pos: int
    gtid: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (f" (GTID {self.gtid})" if self.gtid else "")

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "pos": self.pos, "gtid": self.gtid}


class Change(NamedTuple):
    """One row change (a named tuple: made for every row read, at half a frozen dataclass's
    cost)."""

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
    use_fast: bool = True
    # a system-versioned table: its ROW END column; an image whose ROW END is not the maximum
    # is a version kept as history, not a row (an UPDATE logs the old version as an INSERT, a
    # DELETE is an UPDATE that ends the row), so it counts as no row at all
    row_end: str | None = None
    #: (database, table) of a table of another database of the server (a parent read for its
    #: cascades: plan/cascade_parents.py), whose key is ``database.table``; None: the key is
    #: the name of a table of the reader's database
    elsewhere: tuple[str, str] | None = None

    def decoder_of(self, columns: Any) -> tuple[RowsDecoder, RowFn] | None:
        """The fast decoder of a table map's rows (``rows``) with the function that
        makes a row of an image, or None: the library decodes them."""
        if not self.use_fast:
            return None
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

    def encoders_of(self, columns: Any) -> tuple[Encoder, ...]:
        """The encoders for the rows of a table map: a temporal column's fraction digits as
        that map logs them — a row logged before an ALTER that changed them and read after
        it (or the other way round) is written as it was logged — the others as the schema
        gives them."""
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
        self.stream = LogStream(url, server_id=server_id, file=start.file, pos=start.pos,
                                heartbeat=heartbeat, blocking=blocking)  # fmt: skip

        def control() -> Any:
            return StreamConnection(
                host=url.host or "127.0.0.1", port=url.port or 3306,
                user=url.username or "root", password=url.password or "", charset="utf8mb4",
                database="information_schema", autocommit=True, connect_timeout=10,
            )  # fmt: skip

        self.maps = TableMaps(database, tables, control)

    def close(self) -> None:
        self.maps.close()
        self.stream.close()

    def frames(self) -> Iterator[list[Event]]:
        """The events one by one, each in a list of its own (``ReaderProcess.frames``' form)."""
        for event in self:
            yield [event]

    def __iter__(self) -> Iterator[Event]:
        changes: list[Change] = []
        gtids = GtidState(self.position.gtid)
        in_transaction = began = False
        stream, maps, stop = self.stream, self.maps, self.stop
        logged: dict[str, Any] = {}  # per mapped table: its last table map's columns
        altered: set[str] = set()  # the mapped tables a DDL of this run named
        where = {name: t.elsewhere for name, t in self.tables.items() if t.elsewhere}
        stream.open()
        maps.ctl.dbms = "mariadb" if stream.mariadb else "mysql"
        maps.log_file = lambda: stream.file
        for event in stream:
            kind = event.type
            if kind in ROWS:
                in_transaction = True
                found = maps.rows(event)
                if found is not None:
                    mapped, decoded = found
                    name = mapped.name
                    if logged.get(name) is not mapped.columns:  # a new table map
                        # after a DDL of this run: never decoded with a schema not its own
                        lost = (
                            _lacking(mapped.columns, mapped.table.names) if name in altered else ()
                        )
                        if lost:
                            yield SchemaChange(name, "", self.position, missing=lost)
                            return
                        logged[name] = mapped.columns
                    changes += _changes(kind, mapped, decoded)
            elif kind == TABLE_MAP:
                maps.table_map(event)
            elif kind == XID:
                self.position = BinlogPosition(stream.file, stream.pos, gtids.state)
                yield Transaction(changes, self.position, event.timestamp)
                changes, in_transaction, began = [], False, False
            elif kind in (MARIADB_GTID, GTID):
                gtids.event(event)
                changes, in_transaction, began = [], True, False
            elif kind == QUERY:
                schema, raw = _query(event.body)
                if raw == b"BEGIN":
                    changes, in_transaction, began = [], True, True
                    continue
                query = raw.decode("utf-8", errors="backslashreplace")
                word = query.strip().upper()
                if word == "BEGIN":
                    changes, in_transaction, began = [], True, True
                elif word == "COMMIT":  # non-transactional engines end with COMMIT, not XID
                    self.position = BinlogPosition(stream.file, stream.pos, gtids.state)
                    yield Transaction(changes, self.position, event.timestamp)
                    changes, in_transaction, began = [], False, False
                elif word == "ROLLBACK":
                    changes, in_transaction, began = [], False, False
                else:
                    mapped_names = list(self.tables)
                    hit = ddl_table(query, schema, self.database, mapped_names, DDL, where)
                    dml = ddl_table(query, schema, self.database, mapped_names, DML, where)
                    if hit is None and dml is not None:
                        yield SchemaChange(dml, query.strip(), self.position, True)
                        return
                    after = BinlogPosition(stream.file, stream.pos, gtids.state)
                    if hit is not None:
                        altered.add(hit)
                        names = _names(logged[hit]) if hit in logged else None
                        yield SchemaChange(hit, query.strip(), self.position, False, after,
                                           names, schema=schema)  # fmt: skip
                    if not began:  # a statement of its own (DDL...): it commits by itself
                        self.position = after
                        changes, in_transaction = [], False
                        if hit is None:  # another database's, or an unmapped table's: an
                            # empty transaction, so the stored position moves past it too
                            yield Transaction([], self.position, event.timestamp)
            elif kind == ROTATE:
                # table ids are per server lifetime: after a restart the next file reuses
                # them for other tables
                maps.rotated()
            elif (kind in (HEARTBEAT, HEARTBEAT_V2)) and not in_transaction:
                yield Idle(BinlogPosition(stream.file, stream.pos, gtids.state))
            if not in_transaction and stop.is_set():
                return


def _query(body: bytes) -> tuple[str, bytes]:
    """A query event's default database and statement (MySQL's Query_log_event)."""
    db_length = body[8]
    off = 13 + (body[11] | body[12] << 8)  # the post-header, then the status variables
    return body[off : off + db_length].decode(), body[off + db_length + 1 :]


class GtidState:
    """The GTID state as of the last transaction read: MariaDB's (``domain-server-seq`` per
    domain, as ``gtid.advance`` makes it) kept per domain so that a transaction costs one
    string; MySQL's: the GTID of the last transaction."""

    def __init__(self, state: str) -> None:
        self.state = state
        self.domains: dict[int, str] | None = None
        if not state or is_state(state):
            self.domains = {d: f"{d}-{s}-{n}" for d, (s, n) in parse(state).items()}

    def event(self, event: RawEvent) -> None:
        body = event.body
        if event.type == MARIADB_GTID:
            seq = int.from_bytes(body[:8], "little")
            domain = int.from_bytes(body[8:12], "little")
            text = f"{domain}-{event.server_id}-{seq}"
            domains = self.domains
            if domains is None:  # a state that is not MariaDB's
                self.state = advance(self.state, text)
                return
            domains[domain] = text
            self.state = (
                text if len(domains) == 1 else ",".join(domains[d] for d in sorted(domains))
            )
        else:  # MySQL: flags (1), the source's UUID (16), the transaction number (8)
            sid = body[1:17].hex()
            gno = int.from_bytes(body[17:25], "little")
            text = f"{sid[:8]}-{sid[8:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:]}:{gno}"
            self.state = advance(self.state, text)  # the state as gtid.advance keeps it
            self.domains = None


def _lacking(columns: Any, wanted: Sequence[str]) -> tuple[str, ...]:
    """The wanted columns a table map does not have (none when it names no columns)."""
    names = _names(columns)
    return () if names is None else tuple(n for n in wanted if n not in names)


def _names(columns: Any) -> tuple[str, ...] | None:
    names = tuple(c.name for c in columns)
    return None if any(n is None for n in names) else names


def _changes(kind: int, mapped: Mapped, decoded: tuple[str, Any]) -> list[Change]:
    changes = _images(kind, mapped, decoded)
    if mapped.table.row_end is None:
        return changes
    # system versioning: history in and out of the log is no change of the current rows
    return [c for c in changes if c.before is not None or c.after is not None]


def _images(kind: int, mapped: Mapped, decoded: tuple[str, Any]) -> list[Change]:
    how, value = decoded
    name, encoders = mapped.name, mapped.encoders
    if how == "fast":
        assert mapped.fast is not None
        row, new = mapped.fast[1], tuple.__new__  # Change(...) without its Python __new__
        if kind in UPDATES:
            return [new(Change, (name, row(b, encoders), row(a, encoders))) for b, a in value]
        if kind in WRITES:
            return [new(Change, (name, None, row(r[0], encoders))) for r in value]
        return [new(Change, (name, row(r[0], encoders), None)) for r in value]
    event, table = value, mapped.table
    if not getattr(event, "complete", True):
        return []
    if kind in UPDATES:
        return [
            Change(
                name,
                table.row(r["before_values"], r["before_none_sources"], encoders),
                table.row(r["after_values"], r["after_none_sources"], encoders),
            )
            for r in event.rows
        ]
    rows = [table.row(r["values"], r["none_sources"], encoders) for r in event.rows]
    if kind in WRITES:
        return [Change(name, None, r) for r in rows]
    return [Change(name, r, None) for r in rows]
