"""MySQL: engine, read-only UTC session, keyset batches by primary key, counts.

Rows are streamed over an unbuffered cursor of the DBAPI driver with its type conversion off,
so values arrive as the bytes MySQL prints (see values.py). Statements are built with
SQLAlchemy Core, which quotes every identifier; nothing is pasted into SQL.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Engine

from migrator.errors import ConnectError, MigratorError, SourceError, TableChanged
from migrator.mapping.kinds import Kind
from migrator.mapping.schema import Column, Schema
from migrator.plan.values import Converter, converter
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
from migrator.source.snapshot import Snapshot, start_snapshot
from migrator.urls import mask

log = logging.getLogger(__name__)

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


class Source:
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

    def schema(self, only: list[str] | None = None) -> Schema:
        if self._schema is None or only is not None:
            self.check()
            try:
                schema = read_schema(self.engine, only)
            except sa.exc.DBAPIError as e:
                raise connect_error(self.url, e) from None
            if only is not None:
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
            cursor.execute(str(compiled), _params(compiled, bound))
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
        ts = self.schema().tables[table]
        columns = tuple(ts.column(n) for n in names)
        return Selector(tuple(names), columns, tuple(converter(c.kind) for c in columns))

    def count(self, table: str, where: Any = None) -> int:
        """The table's rows (``where``: those a row filter keeps, source/where.py)."""
        stmt = sa.select(sa.func.count()).select_from(sa.table(table))
        if where is not None:
            stmt = stmt.where(where)
        row = self.fetch_all(stmt)[0]
        return int(row[0] or 0)

    def value_counts(self, table: str, column: str, where: Any = None) -> list[tuple[Any, int]]:
        """(value, rows) per value of the column, NULL left out, grouped by the column's own
        collation (a search index's TAG counts are compared with them)."""
        t = sa.table(table, sa.column(column))
        c = t.c[column]
        stmt = (
            sa.select(sa.func.min(c), sa.func.count())
            .where(c.is_not(None), *([] if where is None else [where]))
            .group_by(c)
        )
        return [(v, int(n or 0)) for v, n in self.fetch_all(stmt)]

    def shared_keys(
        self, table: str, columns: Sequence[Column], where: Any = None
    ) -> tuple[int, int]:
        """For key columns MySQL does not keep unique: (keys that several rows share, rows
        beyond one per such key, which Redis does not hold as they are). Rows with a NULL in
        the key are left out (migrate rejects them); text compares byte for byte, as Redis
        keys do."""
        t = sa.table(table, *(sa.column(c.name) for c in columns))
        group = [
            sa.cast(_expr(c, t), mysql.BINARY()) if c.kind is Kind.TEXT else _expr(c, t)
            for c in columns
        ]
        shared = (
            sa.select(sa.func.count().label("n"))
            .select_from(t)
            .where(*(t.c[c.name].is_not(None) for c in columns))
            .where(*([] if where is None else [where]))
            .group_by(*group)
            .having(sa.func.count() > 1)
            .subquery()
        )
        stmt = sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(shared.c.n), 0))
        keys, rows = self.fetch_all(stmt.select_from(shared))[0]
        return int(keys or 0), int(rows or 0) - int(keys or 0)

    def max_of(self, table: str, column: Column) -> bytes | None:
        stmt = sa.select(sa.func.max(_expr(column)))
        stmt = stmt.select_from(sa.table(table, sa.column(column.name)))
        return self.fetch_all(stmt)[0][0]

    def latest(
        self, table: str, pk: Sequence[Column], order_by: Column, limit: int, where: Any = None
    ) -> list[RawRow]:
        """The primary keys of the newest ``limit`` rows by ``order_by`` (NULLs never), of
        the rows ``where`` (a row filter) keeps."""
        t = sa.table(table, *(sa.column(c.name) for c in pk), sa.column(order_by.name))
        o = t.c[order_by.name]
        stmt = (
            sa.select(*(_expr(c, t) for c in pk))
            .where(o.is_not(None), *([] if where is None else [where]))
            .order_by(o.desc(), *(t.c[c.name].desc() for c in pk))
            .limit(limit)
        )
        sel = Selector(tuple(c.name for c in pk), tuple(pk), tuple(converter(c.kind) for c in pk))
        return [_convert(r, sel) for r in self.fetch_all(stmt)]

    def sharing_rows(
        self, table: str, selector: Selector, columns: Sequence[Column], limit: int
    ) -> list[RawRow]:
        """The rows (selected as ``batches`` does), at most ``limit``, whose ``columns`` hold
        values several rows share (a ``unique:`` MySQL does not enforce; NULLs left out, text
        compared byte for byte, as ``shared_keys`` counts them). Used by verify."""
        names = {*selector.names, *(c.name for c in columns)}
        t = sa.table(table, *(sa.column(n) for n in names))
        inner = sa.table(table, *(sa.column(c.name) for c in columns)).alias("shared")

        def group(c: Column, of: Any) -> Any:
            return sa.cast(_expr(c, of), mysql.BINARY()) if c.kind is Kind.TEXT else _expr(c, of)

        labels = [f"v{i}" for i in range(len(columns))]  # grouped by alias: only_full_group_by
        shared = (
            sa.select(*(group(c, inner).label(n) for c, n in zip(columns, labels)))
            .where(*(inner.c[c.name].is_not(None) for c in columns))
            .group_by(*(sa.literal_column(n) for n in labels))
            .having(sa.func.count() > 1)
            .subquery("d")
        )
        values = sa.select(*(shared.c[n] for n in labels))
        mine = [group(c, t) for c in columns]
        cond = (mine[0] if len(mine) == 1 else sa.tuple_(*mine)).in_(values)
        stmt = sa.select(*(_expr(c, t) for c in selector.columns)).where(cond).limit(limit)
        found = self.fetch_all(stmt)
        return [_convert(r, selector) for r in found] if selector.needs_conversion else found

    def rows_where(
        self,
        table: str,
        selector: Selector,
        columns: Sequence[str],
        values: Sequence[Any],
        where: Any = None,
    ) -> list[RawRow]:
        """The rows (selected as ``batches`` does) whose ``columns`` equal one of ``values``
        (tuples for several columns): ``WHERE (c1, c2) IN ((...), ...)``. Used by verify."""
        if not values:
            return []
        t = sa.table(table, *(sa.column(n) for n in {*selector.names, *columns}))
        exprs = [_expr(c, t) for c in selector.columns]
        ts = self.schema().tables[table]
        kinds = [ts.column(c).kind for c in columns]
        # one bound parameter per value (no "expanding" IN, which the raw cursor cannot render)
        if len(columns) == 1:
            items = [
                sa.literal(_bindable(v[0] if isinstance(v, tuple) else v, kinds[0])) for v in values
            ]
            cond = t.c[columns[0]].in_(items)
        else:
            rows = [
                sa.tuple_(*(sa.literal(_bindable(x, k)) for x, k in zip(v, kinds))) for v in values
            ]
            cond = sa.tuple_(*(t.c[c] for c in columns)).in_(rows)
        stmt = sa.select(*exprs).where(cond)
        if where is not None:
            stmt = stmt.where(where)
        found = self.fetch_all(stmt)
        return [_convert(r, selector) for r in found] if selector.needs_conversion else found

    def page(
        self, table: str, selector: Selector, pk: Sequence[str], n: int,
        after: Sequence[Any] | None = None, where: Any = None,
    ) -> list[RawRow]:  # fmt: skip
        """Up to ``n`` rows after the primary key ``after`` (in primary-key order), read whole:
        the connection is free for other reads between pages (source/nesting.py)."""
        t = sa.table(table, *(sa.column(c) for c in {*selector.names, *pk}))
        cols = [t.c[c] for c in pk]
        stmt = sa.select(*(_expr(c, t) for c in selector.columns)).order_by(*cols).limit(n)
        if after is not None:
            stmt = stmt.where(after_key(cols, [sa.literal(v) for v in after]))
        if where is not None:
            stmt = stmt.where(where)
        found = self.fetch_all(stmt)
        return [_convert(r, selector) for r in found] if selector.needs_conversion else found

    def random_keys(self, table: str, pk: Sequence[str], n: int, where: Any = None) -> list[RawRow]:
        """The primary keys of ``n`` random rows (``ORDER BY RAND() LIMIT n``). Used by verify."""
        t = sa.table(table, *(sa.column(c) for c in pk))
        stmt = sa.select(*(t.c[c] for c in pk)).order_by(sa.func.rand()).limit(n)
        if where is not None:
            stmt = stmt.where(where)
        return self.fetch_all(stmt)

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
        exprs = [_expr(c, t) for c in selector.columns]
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
                cursor.execute(str(stmt), _params(stmt, bound))
                while True:
                    rows = cursor.fetchmany(batch_size)
                    if not rows:
                        break
                    got += len(rows)
                    failures = 0
                    if convert:
                        rows = [_convert(r, selector) for r in rows]
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


def _bindable(value: Any, kind: Kind) -> Any:
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


def _params(compiled: Any, bound: dict[str, Any]) -> Any:
    """Parameters as the driver's paramstyle wants them: a tuple for positional styles
    (``%s``: a mysql+mysqldb:// URL's dialect compiles them so), else the dict (``%(name)s``)."""
    names = getattr(compiled, "positiontup", None)
    return tuple(bound[n] for n in names) if names else bound


def _convert(row: Sequence[Any], selector: Selector) -> RawRow:
    return tuple(v if f is None or v is None else f(v) for v, f in zip(row, selector.converters))


def _expr(column: Column, t: Any = None) -> Any:
    col = t.c[column.name] if t is not None else sa.column(column.name)
    if column.kind is Kind.BIT:
        return sa.cast(col, mysql.INTEGER(unsigned=True))
    if column.kind is Kind.GEOMETRY:
        return sa.func.ST_AsText(col)
    if column.kind is Kind.FLOAT:
        return sa.type_coerce(col, sa.Float) + sa.literal_column("0e0")
    return col


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)
