"""``sync``: load a consistent snapshot once, then keep Redis in step with the binary log.

First run (no state in Redis under ``migrator:<mapping>:sync``): every mapped table is read
inside one ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and written exactly as ``migrate``
writes it (same plan, same packed bytes, counters and latest lists rebuilt from the same
snapshot); the snapshot's binary-log position is then stored. Every run then follows the log
from the stored position: a reader thread decodes committed transactions
(``migrator.source.binlog``), this thread turns their row changes into Redis deltas
(``migrator.plan.delta``) and applies each group of whole transactions together with the
position after them in one MULTI/EXEC (``migrator.target.sync_state``; on a Redis Cluster
the position is stored after its commands, and a replay converges). Counters are raised
(never lowered) in the same MULTI; a latest list touched by a group is rebuilt from MySQL,
as migrate builds it, also inside it.

Consistency: Redis always equals the source as of the stored position, except for latest
lists, which are rebuilt from MySQL's current rows and so may be ahead while sync is behind;
once sync has caught up (no pending transactions) they are exact too.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from migrator.commands.reports import TableReport
from migrator.commands.session import load, opened, target_url
from migrator.errors import EXIT_DIFFERENCE, EXIT_OK, MigratorError, SourceError
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Command, Stats
from migrator.plan.delta import Delta, TableDelta
from migrator.plan.finish import finish_commands
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import TablePlan
from migrator.plan.values import converter
from migrator.progress import NULL_PROGRESS, Progress
from migrator.source.binlog import (
    BinlogPosition,
    BinlogReader,
    Idle,
    SchemaChange,
    TableColumns,
    Transaction,
)
from migrator.source.binlog_settings import refuse_gaps
from migrator.source.mysql import Selector, Source
from migrator.source.snapshot import Snapshot, start_snapshot
from migrator.target.cluster import connect_any, is_cluster
from migrator.target.cluster_sink import sink_for, writer_for
from migrator.target.keys import remove_owned
from migrator.target.sync_state import SyncState, apply_group, raise_counter
from migrator.urls import mask_target

SERVER_ID_ENV = "MIGRATOR_SYNC_SERVER_ID"
MAX_GROUP_ROWS = 5000  # row changes applied in one MULTI/EXEC at most (whole transactions)


class SchemaChanged(MigratorError):
    """DDL on a mapped table: the mapping may no longer fit; sync stops (exit 1)."""

    exit_code = EXIT_DIFFERENCE


@dataclass
class SyncStatus:
    """What sync is doing, once per interval (the live line, or one ``--json`` object)."""

    phase: str  # "loading" | "following" | "caught up" | "stopped"
    position: str
    transactions: int = 0
    rows_changed: int = 0
    events_per_second: float = 0.0
    lag_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "position": self.position,
            "transactions": self.transactions,
            "rows_changed": self.rows_changed,
            "events_per_second": round(self.events_per_second, 1),
            "lag_seconds": round(self.lag_seconds, 3),
        }


@dataclass
class SyncReport:
    mapping: str
    source: str
    target: str
    snapshot: Snapshot | None  # set when this run loaded the snapshot (first run)
    loaded: list[TableReport] = field(default_factory=list)
    removed: int = 0  # keys of an earlier load removed before the first run's load
    started_at: BinlogPosition | None = None
    position: BinlogPosition | None = None
    transactions: int = 0
    rows_changed: int = 0
    seconds: float = 0.0
    stopped: str = "stopped"  # "caught up" | "stopped" | "end of log"

    exit_code = EXIT_OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "mapping": self.mapping,
            "source": self.source,
            "target": self.target,
            "snapshot": self.snapshot.as_dict() if self.snapshot is not None else None,
            "loaded": [t.as_dict() for t in self.loaded],
            "removed": self.removed,
            "started_at": self.started_at.as_dict() if self.started_at else None,
            "position": self.position.as_dict() if self.position else None,
            "transactions": self.transactions,
            "rows_changed": self.rows_changed,
            "seconds": round(self.seconds, 3),
            "stopped": self.stopped,
        }


def default_server_id(mapping_name: str) -> int:
    """A replica server id of the mapping's own (stable, so a second sync of the same mapping
    takes over from the first instead of writing beside it); ``--server-id`` or
    $MIGRATOR_SYNC_SERVER_ID override it."""
    raw = os.environ.get(SERVER_ID_ENV)
    if raw:
        if not raw.isdigit() or not 0 < int(raw) < 2**32:
            raise MigratorError(f"{SERVER_ID_ENV}={raw!r} is not a server id", "e.g. 4242")
        return int(raw)
    return 100_000 + zlib.crc32(mapping_name.encode()) % 1_000_000_000


def snapshot_position(snapshot: Snapshot) -> BinlogPosition:
    if snapshot.binlog_file is None or snapshot.binlog_position is None:
        raise SourceError(
            f"the snapshot has no binary-log position: {snapshot.note or 'the log is off'}",
            "sync needs the position to follow the log from; see the settings above",
        )
    return BinlogPosition(snapshot.binlog_file, snapshot.binlog_position, snapshot.gtid or "")


def mapping_fingerprint(m: Mapping) -> str:
    """What the loaded keys depend on in the mapping (tables, keys, structures, options)."""
    return hashlib.sha256(repr((m.tables, m.options)).encode()).hexdigest()[:16]


def position_fields(pos: BinlogPosition) -> dict[str, str]:
    return {"file": pos.file, "pos": str(pos.pos), "gtid": pos.gtid}


def wkt_function(src: Source) -> Callable[[bytes], bytes]:
    """GEOMETRY from the log (SRID + WKB) -> the WKT the snapshot selects, asked of the server
    so the text is byte-for-byte ``ST_AsText``'s."""

    def wkt(raw: bytes) -> bytes:
        cursor = src.raw_connection().cursor()
        try:
            srid = int.from_bytes(raw[:4], "little")
            cursor.execute("SELECT ST_AsText(ST_GeomFromWKB(UNHEX(%s), %s))", (raw[4:].hex(), srid))
            value = cursor.fetchone()[0]
        finally:
            cursor.close()
        return bytes(value)

    return wkt


def sync(
    mapping: Mapping | str | os.PathLike[str],
    *,
    source: str | None = None,
    target: str | None = None,
    until_caught_up: bool = False,
    server_id: int | None = None,
    stop: threading.Event | None = None,
    on_status: Callable[[SyncStatus], None] | None = None,
    status_interval: float = 1.0,
    progress: Progress = NULL_PROGRESS,
    on_applied: Callable[[list[Transaction]], None] | None = None,
    heartbeat: float = 0.2,
    reload: bool = False,
) -> SyncReport:
    """Load a consistent snapshot on the first run (or with ``reload``), then apply the binary
    log until ``stop`` is set (or, with ``until_caught_up``, until nothing is pending). Raises
    MigratorError; ``SchemaChanged`` (exit 1) on DDL of a mapped table."""
    m = load(mapping)
    stop = stop or threading.Event()
    started = time.perf_counter()
    with opened(m, source) as (src, resolved):
        client: Any = connect_any(target_url(m, target))
        database = src.url.database
        if not database:
            raise MigratorError(
                "the source URL names no database",
                "end it with the database: mysql+pymysql://user@host:3306/shop",
            )
        user = f"'{src.url.username or ''}'@'<host>'"
        refuse_gaps(src.raw_connection(), user, src.shown_url)
        ident = f"{src.url.host or 'localhost'}:{src.url.port or 3306}/{database}"
        state = SyncState(client, m.name)
        stored = state.load()
        if stored and stored.get("source") not in (None, ident):
            raise MigratorError(
                f"Redis holds sync state of another source ({stored.get('source')}), not {ident}",
                f"sync into another Redis database, or delete the key {state.key.decode()} "
                "and the mapping's keys first",
            )
        shape = mapping_fingerprint(m)
        if reload:
            state.clear()
            stored = {}
        elif stored.get("file") and stored.get("mapping") not in (None, shape):
            raise MigratorError(
                "the mapping changed since sync loaded its snapshot (tables, keys or "
                "structures differ), so Redis lacks what the new mapping adds",
                f"reload: 'migrator sync {m.file or 'MAPPING'} --reload' removes the mapping's "
                "keys and loads a new snapshot",
            )
        report = SyncReport(
            mapping=m.file or m.name,
            source=src.shown_url,
            target=mask_target(target_url(m, target)),
            snapshot=None,
        )
        if not stored.get("file"):
            if on_status:
                on_status(SyncStatus("loading", "snapshot"))
            # a first run starts clean: keys of rows gone since an earlier load (or an
            # interrupted first run) would otherwise stay
            space = KeySpace([TablePlan(r) for r in resolved], m.options.ignore)
            report.removed = remove_owned(client, space, [r.name for r in resolved])
            report.snapshot, report.loaded = load_snapshot(src, client, resolved, m, progress, stop)
            pos = snapshot_position(report.snapshot)
            stored = position_fields(pos)
            apply_group(
                client,
                [],
                state.command(
                    {
                        **stored,
                        "source": ident,
                        "loaded_at": report.snapshot.moment,
                        "mapping": shape,
                    }
                ),
            )
        start = BinlogPosition(stored["file"], int(stored["pos"]), stored.get("gtid", ""))
        report.started_at = report.position = start
        if not stop.is_set():
            follower = Follower(
                src, client, state, resolved, database, start, stop, heartbeat,
                server_id or default_server_id(m.name), on_status, status_interval, on_applied,
            )  # fmt: skip
            follower.run(until_caught_up, report)
        report.seconds = time.perf_counter() - started
        client.close()
        return report


def load_snapshot(
    src: Source,
    client: Any,
    resolved: list[Resolved],
    m: Mapping,
    progress: Progress,
    stop: threading.Event,
) -> tuple[Snapshot, list[TableReport]]:
    """Every mapped table read in one consistent snapshot and written as migrate writes it."""
    conn = src.raw_connection()
    snapshot = start_snapshot(conn)
    reports = []
    try:
        for r in resolved:
            t0 = time.perf_counter()
            plan = TablePlan(r)
            cols = tuple(r.schema.column(n) for n in plan.select)
            selector = Selector(plan.select, cols, tuple(converter(c.kind) for c in cols))
            writer = writer_for(client)
            total = Stats()
            progress.start(r.name, r.schema.row_estimate or None)
            try:
                for rows in src.batches(r.name, selector, r.primary_key, m.options.batch_size):
                    if stop.is_set():
                        raise KeyboardInterrupt
                    payload, count, stats = writer.pack(plan, rows)
                    writer.put(payload, count)
                    total.add(stats)
                    progress.advance(r.name, len(rows))
            finally:
                writer.close()
            sink_for(client).write(finish_commands(src, plan, r))
            progress.finish(r.name)
            reports.append(
                TableReport(
                    r.name,
                    rows=total.rows,
                    keys=total.keys,
                    entries=total.entries,
                    skipped=dict(total.skipped),
                    rejected=dict(total.rejected),
                    seconds=time.perf_counter() - t0,
                )
            )
    finally:
        conn.rollback()
    return snapshot, reports


_END = object()


class Follower:
    """The follow loop: a reader thread fills a queue; this thread applies groups of whole
    transactions, each group with its position in one MULTI/EXEC."""

    def __init__(
        self,
        src: Source,
        client: Any,
        state: SyncState,
        resolved: list[Resolved],
        database: str,
        start: BinlogPosition,
        stop: threading.Event,
        heartbeat: float,
        server_id: int,
        on_status: Callable[[SyncStatus], None] | None,
        status_interval: float,
        on_applied: Callable[[list[Transaction]], None] | None,
    ) -> None:
        self.src, self.client, self.state, self.stop = src, client, state, stop
        self.cluster = is_cluster(client)
        self.plans = {r.name: TablePlan(r) for r in resolved}
        self.deltas = {name: TableDelta(plan) for name, plan in self.plans.items()}
        self.resolved = {r.name: r for r in resolved}
        tables = {
            name: TableColumns(plan.select, tuple(map(plan.resolved.schema.column, plan.select)))
            for name, plan in self.plans.items()
        }
        self.ctl = Source(str(src.url.render_as_string(hide_password=False)))
        self.reader_stop = threading.Event()
        self.reader = BinlogReader(
            src.url, server_id=server_id, database=database, tables=tables, start=start,
            stop=self.reader_stop, heartbeat=heartbeat, wkt=wkt_function(self.ctl),
        )  # fmt: skip
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=2000)
        self.on_status, self.status_interval, self.on_applied = (
            on_status,
            status_interval,
            on_applied,
        )
        self.position = start
        self.last_commit = 0.0

    def _pump(self) -> None:
        try:
            for event in self.reader:
                while True:
                    try:
                        self.queue.put(event, timeout=0.2)
                        break
                    except queue.Full:
                        if self.reader_stop.is_set():
                            return
        except BaseException as e:  # handed to the applying thread
            self.queue.put(e)
        finally:
            self.queue.put(_END)

    def run(self, until_caught_up: bool, report: SyncReport) -> None:
        thread = threading.Thread(target=self._pump, name="binlog-reader", daemon=True)
        thread.start()
        try:
            self._loop(until_caught_up, report)
        finally:
            self.reader_stop.set()
            thread.join(2.0)
            self.reader.close()
            self.ctl.close()

    def _loop(self, until_caught_up: bool, report: SyncReport) -> None:
        last_status = last_head = time.monotonic()
        window_rows, window_start = 0, time.monotonic()
        caught_up = False
        while True:
            group: list[Transaction] = []
            rows = 0
            ended, ddl, idle = False, None, False
            try:
                item = self.queue.get(timeout=0.1)
            except queue.Empty:
                item = None
            while item is not None:
                if isinstance(item, Transaction):
                    group.append(item)
                    rows += len(item.changes)
                elif isinstance(item, Idle):
                    idle = True
                elif isinstance(item, SchemaChange):
                    ddl = item
                    break
                elif item is _END:
                    ended = True
                    break
                elif isinstance(item, BaseException):
                    raise _reader_error(item)
                if rows >= MAX_GROUP_ROWS:
                    break
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    item = None
            if group:
                self._apply(group)
                report.transactions += len(group)
                report.rows_changed += rows
                report.position = self.position
                window_rows += rows
                caught_up = False
            if idle or ended:
                caught_up = self.queue.empty()
            now = time.monotonic()
            if not caught_up and not group and now - last_head >= 0.5 and self.queue.empty():
                # busy logs of other databases may leave no silence for a heartbeat
                caught_up, last_head = self._at_head(), now
            if self.on_status and (now - last_status >= self.status_interval or ended):
                rate = window_rows / max(now - window_start, 1e-9)
                self.on_status(self._status(report, rate, caught_up))
                last_status, window_rows, window_start = now, 0, now
            if ddl is not None:
                self._schema_changed(ddl)
            if ended:
                report.stopped = "end of log"
                return
            if until_caught_up and caught_up:
                report.stopped = "caught up"
                return
            if self.stop.is_set():
                report.stopped = "stopped"
                return

    def _at_head(self) -> bool:
        """Whether everything up to the end of the binary log is applied."""
        conn = self.src.raw_connection()
        cursor = conn.cursor()
        try:
            cursor.execute("SHOW MASTER STATUS")
            row = cursor.fetchone()
        finally:
            cursor.close()
        if not row:
            return False
        file, pos = (v.decode() if isinstance(v, bytes) else str(v) for v in row[:2])
        return (self.position.file, self.position.pos) >= (file, int(pos))

    def _status(self, report: SyncReport, rate: float, caught_up: bool) -> SyncStatus:
        lag = 0.0 if caught_up or not self.last_commit else max(0.0, time.time() - self.last_commit)
        return SyncStatus(
            "caught up" if caught_up else "following", str(self.position),
            report.transactions, report.rows_changed, rate, lag,
        )  # fmt: skip

    def _apply(self, group: list[Transaction]) -> None:
        total = Delta()
        deltas = self.deltas
        for txn in group:
            for change in txn.changes:
                deltas[change.table].change(change.before, change.after, total)
        dirty = total.dirty_latest
        commands: list[Command] = total.commands
        commands += [raise_counter(k, v) for k, v in total.counters.items()]
        if dirty:
            for rebuild in self._latest(dirty):
                commands += [(b"MULTI",), *rebuild, (b"EXEC",)] if self.cluster else rebuild
        last = group[-1]
        self.position = last.position
        apply_group(self.client, commands, self.state.command(position_fields(last.position)))
        self.last_commit = float(last.timestamp)
        if self.on_applied:
            self.on_applied(group)

    def _latest(self, dirty: set[tuple[str, int]]) -> list[list[Command]]:
        """Rebuild the touched latest lists from MySQL's current rows (DEL + RPUSH each, inside
        the group's MULTI; on a cluster in a MULTI of its own), as migrate builds them."""
        conn = self.src.raw_connection()
        conn.rollback()  # a fresh read view: the rows as committed now
        out: list[list[Command]] = []
        for table, n in sorted(dirty):
            r, plan = self.resolved[table], self.plans[table]
            latest = r.table.latest[n]
            schema = r.schema
            pk_cols = [schema.column(c) for c in r.primary_key]
            rows = self.src.latest(table, pk_cols, schema.column(latest.order_by), latest.limit)
            pks = [plan.sep.join(v for v in row if v is not None) for row in rows]
            rebuilt = plan.latest_commands(latest.key, pks)
            out.append([c for c in rebuilt if c[0] not in (b"MULTI", b"EXEC")])
        conn.rollback()
        return out

    def _schema_changed(self, ddl: SchemaChange) -> None:
        self.state.clear()
        if ddl.statement_dml:
            raise SchemaChanged(
                f"table '{ddl.table}' was changed by a statement logged as SQL, not as rows, "
                f"at {ddl.position}: {_short(ddl.query)}; sync cannot apply it exactly and "
                "stopped before it (everything up to it is applied)",
                "a session wrote with binlog_format=STATEMENT or MIXED: SET GLOBAL "
                "binlog_format = 'ROW' and make every client use it; then 'migrator sync "
                "MAPPING --reload' removes the mapping's keys and loads a new snapshot",
            )
        raise SchemaChanged(
            f"table '{ddl.table}' changed at {ddl.position}: {_short(ddl.query)}; sync stopped "
            "before it (everything up to it is applied)",
            "the mapping may no longer fit: run 'migrator validate MAPPING' against the source "
            "and adjust it; then 'migrator sync MAPPING --reload' removes the mapping's keys "
            "and loads a new snapshot",
        )


def _short(query: str) -> str:
    one = " ".join(query.split())
    return one if len(one) <= 80 else one[:77] + "..."


def _reader_error(e: BaseException) -> MigratorError:
    if isinstance(e, MigratorError):
        return e
    args: tuple[Any, ...] = tuple(getattr(e, "args", ()))
    code = args[0] if args and isinstance(args[0], int) else None
    text = str(args[1]) if len(args) > 1 else str(e)
    if code == 1236:
        return SourceError(
            f"the source cannot send its binary log from the stored position: {text}",
            "the binary log there was purged or the server was replaced: 'migrator sync "
            "MAPPING --reload' removes the mapping's keys and loads a new snapshot",
        )
    return SourceError(f"reading the binary log failed: {type(e).__name__}: {text}")
