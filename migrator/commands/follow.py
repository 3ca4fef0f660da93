"""sync's follow loop: a reader thread decodes the binary log into a queue; this thread
applies groups of whole transactions, each with the position after it (one MULTI/EXEC on a
single server; on a Cluster the position after its commands). See ``migrator.commands.sync``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from migrator.commands.reports import SchemaChanged, SyncReport, SyncStatus
from migrator.errors import MigratorError, SourceError
from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Command
from migrator.plan.delta import Delta, TableDelta
from migrator.plan.planner import TablePlan
from migrator.source.binlog import (
    BinlogPosition,
    BinlogReader,
    Idle,
    SchemaChange,
    TableColumns,
    Transaction,
)
from migrator.source.binlog_settings import log_status
from migrator.source.mysql import Source
from migrator.target.cluster import is_cluster
from migrator.target.sync_state import SyncState, apply_group, raise_counter

MAX_GROUP_ROWS = 5000  # row changes applied in one MULTI/EXEC at most (whole transactions)


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
        head = log_status(self.src.raw_connection())
        return head is not None and (self.position.file, self.position.pos) >= head

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
