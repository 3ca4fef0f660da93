"""MySQL: engine, read-only UTC session, snapshots, keyset batches by primary key.

Rows are streamed over an unbuffered cursor of the DBAPI driver with its type conversion off,
so values arrive as the bytes MySQL prints (see values.py). Statements are built with
SQLAlchemy Core, which quotes every identifier; nothing is pasted into SQL. How they are
spelled is in ``selects``; the look-ups besides batches (counts, shared keys, latest rows,
rows by value) in ``lookups``, which ``Source`` inherits.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from contextlib import suppress
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from migrator.errors import ConnectError, MigratorError, SourceError, TableChanged
from migrator.mapping.schema import Schema
from migrator.retry import Retrying
from migrator.source.connection import (
    TABLE_DEF_CHANGED,
    connect_error,
    error_code,
    expect_greeting,
    first_line,
    parse_url,
    setup_session,
    transient,
)
from migrator.source.drivers import driver_of, let_go, raw_connect, unbuffered_cursor, url_flag
from migrator.source.introspect import read_schema
from migrator.source.lookups import Lookups
from migrator.source.selects import (
    RawRow,
    Selector,
    after_key,
    column_expr,
    convert_row,
    driver_params,
    keyset_value,
    selector_of,
    upto_key,
)
from migrator.source.snapshot import Snapshot, start_snapshot
from migrator.urls import mask

log = logging.getLogger(__name__)


class Source(Lookups):
    """A read-only MySQL source."""

    def __init__(
        self, url: str, *, connect_timeout: int = 10, retrying: Retrying | None = None
    ) -> None:
        self.url = parse_url(url)
        self.retrying = retrying or Retrying()  # transient failures of reads (retry.py)
        self.connect_timeout = connect_timeout
        connect_args: dict[str, Any] = {"connect_timeout": connect_timeout, "charset": "utf8mb4"}
        if "ssl_disabled" in self.url.query:  # the schema too: "false" is true to PyMySQL
            connect_args["ssl_disabled"] = url_flag("ssl_disabled", self.url.query["ssl_disabled"])
        self.engine: Engine = sa.create_engine(
            self.url, pool_pre_ping=True, connect_args=connect_args
        )
        sa.event.listen(self.engine, "connect", setup_session)
        self._schema: Schema | None = None
        self._raw: Any = None
        #: the snapshot every read on the raw connection sees (None: each query its own)
        self.taken: Snapshot | None = None
        #: snapshots taken again after the connection holding the last one was lost
        self.retaken: list[Snapshot] = []
        self._resnapshot = False

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._drop()
        self.taken = None
        self.engine.dispose()

    def end_snapshot(self) -> None:
        """End the snapshot's transaction, and with it the metadata locks it holds on the
        tables it read: a connection kept open between tasks (a Dask worker's) must not keep
        DDL (ALTER, DROP) on those tables waiting."""
        if self._raw is not None:
            with suppress(Exception):  # a lost connection holds nothing
                self._raw.rollback()
        self.taken = None
        self._resnapshot = False

    def _lost(self) -> None:
        """The raw connection failed (and is retried): forget it; a snapshot it held is
        taken again on the next connection, at a later moment (``retaken``)."""
        self._drop()
        if self.taken is not None:
            self._resnapshot = True

    def _drop(self) -> None:
        """Forget the raw connection (lost, or closing); the next read opens a new one."""
        if self._raw is not None:
            with suppress(Exception):  # already gone
                self._raw.close()
            self._raw = None

    @property
    def shown_url(self) -> str:
        return mask(self.url)

    def check(self) -> None:
        """Connect once, turning failures into ConnectError."""
        expect_greeting(self.url, self.connect_timeout)
        try:
            with self.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
        except sa.exc.DBAPIError as e:
            raise connect_error(self.url, e) from None
        except Exception as e:  # driver import errors, DNS...
            raise ConnectError(f"cannot connect to MySQL ({self.shown_url}): {e}") from None

    def schema(self, only: list[str] | None = None, database: str = "") -> Schema:
        """The source's schema (cached), or its ``only`` tables read afresh; of another
        ``database`` of the server where given (read afresh)."""
        if self._schema is None or only is not None or database:
            self.check()
            try:
                schema = read_schema(self.engine, only, database)
            except sa.exc.DBAPIError as e:
                raise connect_error(self.url, e) from None
            if only is not None or database:
                return schema
            self._schema = schema
        return self._schema

    # -- raw reading -----------------------------------------------------------------------
    def raw_connection(self) -> Any:
        """A DBAPI connection with type conversion off: every value is bytes or None."""
        if self._raw is None:
            self._raw = raw_connect(self.url, self.connect_timeout)
            if self._resnapshot:
                self._resnapshot = False
                self.retaken.append(self.snapshot())
        return self._raw

    @property
    def reader(self) -> str:
        """The driver of the reading connection ("asyncmy" or "pymysql"): the one that read
        the batch ``batches`` last handed out; the reports count rows by it."""
        return driver_of(self.raw_connection())

    def snapshot(self, what: str = "starting a snapshot on MySQL") -> Snapshot:
        """Begin a consistent snapshot (``START TRANSACTION WITH CONSISTENT SNAPSHOT, READ
        ONLY``, repeatable read) on the reading connection: every read after it (batches,
        counts, counters, latest lists, look-ups) sees the source as of one moment, until the
        next ``snapshot()`` or ``close()``. Returns the moment and binlog position. A lost
        connection (``KILL`` as it starts) is retried on a new one as ``self.retrying`` says
        (``what`` names the step in its notes)."""
        self._resnapshot = False  # this one replaces any snapshot a lost connection held

        def once() -> Snapshot:
            try:
                return start_snapshot(self.raw_connection())
            except Exception as e:
                if transient(e):
                    self._drop()
                raise

        try:
            self.taken = self.retrying.call(once, transient, what)
        except MigratorError:
            raise
        except Exception as e:
            raise SourceError(f"cannot start a snapshot on the source: {first_line(e)}") from None
        return self.taken

    def _execute(self, stmt: sa.sql.Executable, params: dict[str, Any] | None = None) -> Any:
        compiled = stmt.compile(dialect=self.engine.dialect)  # type: ignore[attr-defined]
        bound = dict(compiled.params)
        if params:
            bound.update(params)
        cursor = self.raw_connection().cursor()
        try:
            cursor.execute(str(compiled), driver_params(compiled, bound))
        except Exception as e:
            with suppress(Exception):
                cursor.close()
            if transient(e):
                raise
            raise SourceError(f"query failed on the source: {first_line(e)}") from None
        return cursor

    def fetch_all(self, stmt: sa.sql.Executable) -> list[RawRow]:
        """Every row of ``stmt``; a lost connection, deadlock... is retried (retry.py)."""

        def once() -> list[RawRow]:
            try:
                cursor = self._execute(stmt)
                try:
                    return [tuple(r) for r in cursor.fetchall()]
                finally:
                    with suppress(Exception):
                        cursor.close()
            except Exception as e:
                if transient(e):
                    self._lost()
                raise

        return self.retrying.call(once, transient, "reading MySQL")

    def identity(self) -> dict[str, str]:
        """Which server and database this is (a checkpoint is bound to them):
        ``@@server_uuid`` where there is one (MySQL), else host, port and ``@@server_id``."""
        who = sa.text("SELECT @@hostname, @@port, @@server_id, DATABASE()")
        host, port, server_id, db = (_text(v) for v in self.fetch_all(who)[0])
        server = f"{host}:{port} (server_id {server_id})"
        with suppress(SourceError):  # MariaDB has no server_uuid
            server = _text(self.fetch_all(sa.text("SELECT @@server_uuid"))[0][0]) or server
        return {"server": server, "database": db}

    def selector(self, table: str, names: Sequence[str]) -> Selector:
        return selector_of(self.schema().tables[table], names)

    def batches(
        self,
        table: str,
        selector: Selector,
        pk: Sequence[str],
        batch_size: int,
        after: Sequence[Any] | None = None,
        page_size: int | None = None,
        until: Sequence[Any] | None = None,
        retrying: Retrying | None = None,
        where: Any = None,
    ) -> Generator[list[RawRow], None, None]:
        """Rows in primary-key order, ``batch_size`` at a time, by keyset pagination:
        ``WHERE pk > :last ORDER BY pk LIMIT n`` (expanded for composite keys).
        ``until`` stops at ``pk <= until`` (tuple order), for the chunks of workers.
        A lost connection (``KILL``, a restart), a deadlock or a lock wait timeout is retried
        as ``retrying`` says, on a new connection, from the last row handed out. ``where``:
        only the rows a row filter keeps (source/where.py)."""
        retrying = retrying or self.retrying
        page_size = page_size or max(batch_size, 20000)
        t = sa.table(table, *(sa.column(n) for n in selector.names))
        pk_cols = [t.c[n] for n in pk]
        pk_kinds = [selector.columns[selector.names.index(n)].kind for n in pk]
        exprs = [column_expr(c, t) for c in selector.columns]
        base = sa.select(*exprs).order_by(*pk_cols).limit(sa.bindparam("_limit", page_size))
        if where is not None:
            base = base.where(where)
        if until is not None:
            ends: list[Any] = [sa.bindparam(f"_u{i}", v) for i, v in enumerate(until)]
            base = base.where(upto_key(pk_cols, ends))
        first = base.compile(dialect=self.engine.dialect)
        params: list[Any] = [sa.bindparam(f"_k{i}") for i in range(len(pk))]
        nxt = base.where(after_key(pk_cols, params)).compile(dialect=self.engine.dialect)
        last = list(after) if after is not None else None
        convert = selector.needs_conversion
        failures = 0  # in a row, since rows last arrived
        while True:
            stmt = first if last is None else nxt
            bound = dict(stmt.params)
            bound["_limit"] = page_size
            if last is not None:
                bound.update({f"_k{i}": v for i, v in enumerate(last)})
            cursor = None
            got = 0
            try:
                cursor = self.raw_connection().cursor(unbuffered_cursor(self.raw_connection()))
                cursor.execute(str(stmt), driver_params(stmt, bound))
                while True:
                    rows = cursor.fetchmany(batch_size)
                    if not rows:
                        break
                    got += len(rows)
                    failures = 0
                    if convert:
                        rows = [convert_row(r, selector) for r in rows]
                    last = [keyset_value(v, k) for v, k in zip(rows[-1], pk_kinds)]
                    yield rows
            except Exception as e:
                reason = transient(e)
                if error_code(e) == TABLE_DEF_CHANGED:
                    raise TableChanged(
                        f"reading {table} failed: {first_line(e)}",
                        f"'{table}' was altered or truncated while it was read; run the "
                        "command again once the schema change is done",
                    ) from None
                if reason is None:
                    raise SourceError(f"reading {table} failed: {first_line(e)}") from None
                let_go(cursor)  # its connection is gone: closing it could block or raise
                cursor = None
                self._lost()
                failures += 1
                retrying.failed(failures, reason, f"reading {table} from MySQL")
                continue  # the same page again, after the last row handed out
            finally:
                if cursor is not None:
                    with suppress(Exception):
                        cursor.close()
            if got < page_size:
                return


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)
