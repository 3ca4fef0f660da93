"""sync's follow loop: a reader thread decodes the binary log into a queue; this thread
applies groups of whole transactions, each with the position after it (one MULTI/EXEC on a
single server; on a Cluster the position after its commands). See ``migrator.commands.sync``.

A lost source connection, whichever it is (the log stream, the one that rebuilds latest
lists, the WKT look-ups), ends the loop with ``SourceLost`` after the last whole transaction
applied; a target that lost its data ends it with ``TargetLost`` (checked on every group, on
every new connection, every second while idle, and before "caught up" is reported). The
caller (commands/sync.py) decides what comes next.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from migrator.errors import MigratorError, SourceError
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Command
from migrator.plan.cascade import Cascades, followable, refuse_unfollowable
from migrator.plan.delta import Delta
from migrator.plan.expiry_delta import table_delta
from migrator.plan.nesting import trees
from migrator.plan.planner import TablePlan
from migrator.progress import NULL_PROGRESS, Progress
from migrator.reports import SchemaChanged, SyncReport, SyncStatus, TableReport
from migrator.retry import Retrying
from migrator.source.binlog.process import reader_for
from migrator.source.binlog.reader import (
    BinlogPosition,
    Idle,
    SchemaChange,
    TableColumns,
    Transaction,
)
from migrator.source.binlog.reconnect import SourceLost, lost_reason, surfaced
from migrator.source.binlog.settings import log_status
from migrator.source.foreign_keys import cascades_logged
from migrator.source.mysql import Source
from migrator.source.where import clause
from migrator.store.cluster import is_cluster
from migrator.store.expiry_sweep import SWEEP_SECONDS, due, expiring
from migrator.store.sink import retry
from migrator.store.sync_state import SyncState, apply_group, raise_counter
from migrator.sync.figures import SyncFigures
from migrator.sync.handoff import Handoff
from migrator.sync.head import HeadWatch
from migrator.sync.nesting import NestSync, cascade_plans
from migrator.sync.nesting import refuse as refuse_nesting
from migrator.sync.online_snapshot import (
    FIRST_RUN,
    SNAPSHOT_CHUNK_ROWS,
    Pending,
    Snapshots,
    load_queue,
)
from migrator.sync.schema_watch import (
    Replan,
    Resnapshot,
    SchemaWatch,
    resnapshot_by_hand,
    short_query,
    stopped,
)
from migrator.sync.shared_uniques import shared_entries

MAX_GROUP_ROWS = 5000  # row changes applied in one MULTI/EXEC at most (whole transactions)


def position_fields(pos: BinlogPosition) -> dict[str, str]:
    return {"file": pos.file, "pos": str(pos.pos), "gtid": pos.gtid}


_END = object()
#: how often the target's marker is checked while no group is applied (seconds)
TARGET_CHECK_SECONDS = 1.0


class _Lost:
    """The reader's connection was lost (handed from the reader thread)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


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
        check_target: Callable[[], None] = lambda: None,
        retrying: Retrying | None = None,
        mapping: Mapping | None = None,
        figures: SyncFigures | None = None,
        resnapshot: Resnapshot | None = resnapshot_by_hand,
        chunk_rows: int = SNAPSHOT_CHUNK_ROWS,
        asked: tuple[tuple[str, str], ...] = (),
        identity: dict[str, str] | None = None,
        progress: Progress = NULL_PROGRESS,
        others: Progress = NULL_PROGRESS,
    ) -> None:
        self.src, self.client, self.state, self.stop = src, client, state, stop
        self.check_target, self.retrying = check_target, retrying
        self.progressed = False  # the new reader delivered something (a retry succeeded)
        self.cluster = is_cluster(client)
        self.plans = {r.name: TablePlan(r) for r in resolved}
        self.deltas = {name: table_delta(plan) for name, plan in self.plans.items()}
        self.expiring = expiring(self.deltas)  # tables with expire: (expiry_sweep.py)
        self.resolved = {r.name: r for r in resolved}
        tables = {
            name: TableColumns(
                plan.select,
                tuple(map(plan.resolved.schema.column, plan.select)),
                row_end=plan.resolved.schema.row_end,
            )
            for name, plan in self.plans.items()
        }
        self.ctl = Source(str(src.url.render_as_string(hide_password=False)))
        # sync refused the rest at start; a restarted MySQL may now run InnoDB's foreign keys
        ctl = self.ctl
        logged = surfaced(lambda: cascades_logged(ctl.raw_connection()),
                          "reading the source's settings", ctl.close)  # fmt: skip
        tops = trees(self.plans)  # nested documents (sync/nesting.py)
        followed = cascade_plans(self.plans, tops)
        try:
            refuse_nesting(tops, self.cluster, logged)
            refuse_unfollowable(followed, self.cluster, logged)
        except MigratorError:
            ctl.close()
            raise
        rules = followable(followed, self.cluster, logged)[0]
        self.nesting = NestSync(tops, self._read, logged) if tops else None
        self.cascades = Cascades(rules, self.deltas, self._read) if rules else None
        self.schema: SchemaWatch | None = None  # DDL decided by its effect on the mapping
        # a DDL that changes what the mapping writes for one table's rows: (table, reason)
        self.resnapshot = resnapshot
        stored = retry(state.load, retrying=retrying)
        if mapping is not None:
            self.schema = SchemaWatch(mapping, self.plans, self.ctl, stored.get("columns"))
        self.report: SyncReport | None = None
        self.snapshots: Snapshots | None = None  # online snapshots of single tables
        if mapping is not None:
            waiting = [p for p in load_queue(stored) if p.table in self.plans]
            self.snapshots = Snapshots(
                src, client, mapping, self.resolved, self.plans, waiting,
                chunk_rows, retrying, self._snapshotted, progress, others, stop=stop,
            )  # fmt: skip
        self.asked, self.identity = asked, identity or {}
        self.read_to = start  # how far the log is applied, or read with nothing to apply
        self.reader_stop = threading.Event()
        self.reader = reader_for(
            src.url, server_id=server_id, database=database, tables=tables, start=start,
            stop=self.reader_stop, heartbeat=heartbeat, ctl=self.ctl,
        )  # fmt: skip
        self.handoff = Handoff()
        self.on_status, self.status_interval, self.on_applied = (
            on_status,
            status_interval,
            on_applied,
        )
        self.position = start
        self.figures = figures or SyncFigures()
        self.retrying = retrying or self.figures.retrying("Redis")

    def _pump(self) -> None:
        """The reader's events to the applying thread, a frame at a time (the reader process's
        frames; the thread reader's events one by one)."""
        handoff, read = self.handoff, self.figures.read_all
        try:
            for frame in self.reader.frames():
                read(frame)
                while True:
                    try:
                        handoff.put(frame, timeout=0.2)
                        break
                    except queue.Full:
                        if self.reader_stop.is_set():
                            return
        except BaseException as e:  # handed to the applying thread
            reason = lost_reason(e)
            handoff.put([e if reason is None else _Lost(reason)])
        finally:
            handoff.put([_END])

    def run(self, until_caught_up: bool, report: SyncReport) -> None:
        self.report = report
        snap = self.snapshots
        if snap is not None and snap.queue and snap.queue[0].chunk:
            p = snap.queue[0]
            report.notes.append(f"resumed {p.table} at chunk {p.chunk + 1} of {p.chunks}")
        for table, why in self.asked:
            if why:
                self.resnapshot_online(table, why)
            else:
                report.notes.append(f"{table} is no longer in the mapping: its keys are kept")
        if self.identity and self.snapshots is not None:
            self._store_snapshots()  # the mapping's tables, with the queue they asked for
        thread = threading.Thread(target=self._pump, name="binlog-reader", daemon=True)
        self.figures.following(self.position, loading=self.first_loading())
        thread.start()
        # the source's own word on its log's end: the lag when the reader is behind
        head = HeadWatch(self.ctl.url.render_as_string(hide_password=False), self.figures)
        head.start()
        try:
            self._loop(until_caught_up, report)
        finally:
            self.reader_stop.set()
            head.close()
            thread.join(2.0)
            with suppress(Exception):  # a lost connection has nothing left to close
                self.reader.close()
            self.ctl.close()

    def _loop(self, until_caught_up: bool, report: SyncReport) -> None:
        last_status = last_head = last_check = last_sweep = time.monotonic()
        window_rows, window_start = 0, time.monotonic()
        caught_up = False
        while True:
            group: list[Transaction] = []
            rows = 0
            ended, ddl, idle = False, None, False
            try:  # a chunk waiting for the stream: look again soon, it may be idle
                item = self.handoff.get(timeout=0.01 if self._snapshot_waits() else 0.1)
            except queue.Empty:
                item = None
            while item is not None:
                if isinstance(item, Transaction):
                    group.append(item)
                    rows += len(item.changes)
                    self.progressed = True
                elif isinstance(item, Idle):
                    idle = self.progressed = True
                    self.read_to = max(self.read_to, item.position)
                elif isinstance(item, _Lost):
                    raise SourceLost(item.reason)
                elif isinstance(item, SchemaChange):
                    ddl = item
                    break
                elif item is _END:
                    ended = True
                    break
                elif isinstance(item, BaseException):
                    if group:  # what was read before the failure is applied, with its position
                        self._apply(group)
                        report.transactions += len(group)
                        report.rows_changed += rows
                        report.position = self.position
                    raise _reader_error(item)
                if rows >= MAX_GROUP_ROWS:
                    break
                try:
                    item = self.handoff.get()
                except queue.Empty:
                    item = None
            if group:
                self._apply(group)
                last_check = time.monotonic()
                report.transactions += len(group)
                report.rows_changed += rows
                report.position = self.position
                window_rows += rows
                caught_up = False
            if idle or ended:
                caught_up = self.handoff.empty()
            if self.snapshots is not None and self.snapshots.queue:
                self._snapshot_step()
                caught_up = caught_up and not self.snapshots.queue
            now = time.monotonic()
            if not caught_up and not group and now - last_head >= 0.5 and self.handoff.empty():
                # busy logs of other databases may leave no silence for a heartbeat
                caught_up, last_head = self._at_head(), now
                caught_up = caught_up and not (self.snapshots and self.snapshots.queue)
            if self.expiring and (caught_up or now - last_sweep >= SWEEP_SECONDS):
                self._sweep()  # before "caught up": nothing past its expiry is left
                last_sweep = now
            if now - last_check >= TARGET_CHECK_SECONDS or (until_caught_up and caught_up):
                self.check_target()  # TargetLost when Redis no longer holds the position
                last_check = now
            if self.on_status and (now - last_status >= self.status_interval or ended):
                rate = window_rows / max(now - window_start, 1e-9)
                self.on_status(self._status(report, rate, caught_up))
                last_status, window_rows, window_start = now, 0, now
            if ddl is not None:
                if self.snapshots is not None:  # a chunk read before a DDL is read again
                    self.snapshots.discard(ddl.table)
                self._schema_changed(ddl, report)
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
        src = self.src
        head = surfaced(lambda: log_status(src.raw_connection()), "asking for the log's end",
                        src.close)  # fmt: skip
        if head is not None:
            self.figures.head_at(*head)
        return head is not None and (self.position.file, self.position.pos) >= head

    def first_loading(self) -> bool:
        """Whether the first run's online load is not done yet (its phase is ``loading``)."""
        return self.snapshots is not None and self.snapshots.first_load()

    def _status(self, report: SyncReport, rate: float, caught_up: bool) -> SyncStatus:
        phase = "loading" if self.first_loading() else "following"
        status = SyncStatus(
            "caught up" if caught_up else phase, str(self.position),
            report.transactions, report.rows_changed, rate, self.figures.lag(),
        )  # fmt: skip
        if self.snapshots is not None:
            status.online_snapshot = self.snapshots.progress()
        return status

    # -- online snapshots (sync/online_snapshot.py) ------------------------------------
    def resnapshot_online(self, table: str, reason: str) -> None:
        """Read ``table`` again, online, while every other table keeps following: its keys
        are removed when its turn comes, then it is loaded chunk by chunk. Stored at once
        with the applied position, so a crash still does it. ``reason`` is reported."""
        assert self.snapshots is not None, "a Follower built with its mapping"
        self._refuse_tree(table, reason)
        self.snapshots.add(table, reason)
        self._store_snapshots()
        if self.report is not None:
            self.report.notes.append(f"re-snapshot of {table} queued: {reason}")

    def _refuse_tree(self, table: str, reason: str) -> None:
        """A table of a nesting tree is not read again alone (its documents hold others'
        rows): sync stops (exit 2), the position before the change kept."""
        if self.nesting is not None and table in self.nesting.tables:
            raise MigratorError(
                f"{table} must be read again ({reason}), and it is part of nested documents, "
                "which sync does not re-read one table at a time",
                f"'migrator sync {self.report.mapping if self.report else 'MAPPING'} --reload' "
                "removes the mapping's keys and loads a new snapshot",
            )

    def _snapshot_waits(self) -> bool:
        return self.snapshots is not None and bool(self.snapshots.queue)

    def _snapshot_step(self) -> None:
        assert self.snapshots is not None
        applied = max(self.position, self.read_to)
        if self.snapshots.step(applied):
            self._store_snapshots()

    def _store_snapshots(self) -> None:
        """The snapshots' progress with the applied position, in one atomic write."""
        assert self.snapshots is not None
        fields = position_fields(self.position) | self.snapshots.fields() | self.identity
        position = self.state.command(fields | self.schema.fields() if self.schema else fields)
        apply_group(self.client, [], position, self.state, self.retrying)

    def _snapshotted(self, table: TableReport, p: Pending) -> None:
        """A table's online snapshot done: a table of the first run's load is reported with
        the tables loaded (``loaded``), any other with the re-snapshots."""
        first = p.reason == FIRST_RUN
        if first and not self.first_loading():
            self.figures.loaded()
        if self.report is None:
            return
        if first:
            table.status = "done"
            self.report.loaded.append(table)
            self.report.online_load = True
        else:
            self.report.resnapshots.append(table)

    def _apply(self, group: list[Transaction]) -> None:
        total = Delta()
        deltas = self.deltas
        snap = self.snapshots
        replaced = {p.table for p in snap.queue} if snap is not None and snap.queue else None
        nesting = self.nesting
        if nesting is not None:
            nesting.prefetch((c.table, c.before, c.after) for txn in group for c in txn.changes)
        for txn in group:
            for change in txn.changes:
                if replaced and change.table in replaced:
                    assert snap is not None
                    snap.observe(change)  # a whole-row replacement (online_snapshot.py)
                    deltas[change.table].change(change.before, None, total)
                    deltas[change.table].change(None, change.after, total)
                else:
                    deltas[change.table].change(change.before, change.after, total)
                if self.cascades is not None:  # child rows the log does not carry
                    self.cascades.follow(change.table, change.before, change.after, total)
                if nesting is not None:
                    nesting.change(change.table, change.before, change.after)
        last = group[-1]
        self._commit(total, last.position)
        self.position = last.position
        self.figures.applied_group(group, 2 if self.cluster else 1)
        if self.on_applied:
            self.on_applied(group)

    def _sweep(self) -> None:
        """Remove the rows past their expiry from the shared structures (expiry_sweep.py),
        in a transaction of their own, with the applied position as it is."""
        total = due(self.client, self.expiring)
        if total is not None:
            self._commit(total, self.position)

    def _commit(self, total: Delta, at: BinlogPosition) -> None:
        """A group's Delta, the latest lists and shared unique entries it touched, and the
        position ``at``, in one MULTI/EXEC (store/sync_state.py)."""
        dirty = total.dirty_latest
        commands: list[Command] = total.commands
        commands += [raise_counter(k, v) for k, v in total.counters.items()]
        if dirty:
            for rebuild in self._latest(dirty):
                commands += [(b"MULTI",), *rebuild, (b"EXEC",)] if self.cluster else rebuild
        if total.dirty_unique:  # a value another row may still hold (sync/shared_uniques.py)
            commands += surfaced(
                lambda: shared_entries(self.src, self.plans, total.dirty_unique),
                "reading the rows that share a unique value", self.src.close,
            )  # fmt: skip
        if self.nesting is not None:  # nested documents, after their tables' own writes
            commands += self.nesting.commands()
        fields = position_fields(at)
        position = self.state.command(fields | self.schema.fields() if self.schema else fields)
        apply_group(self.client, commands, position, self.state, self.retrying)

    def _read(self, commands: list[Command]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        replies = list(pipe.execute())
        self.figures.redis_round_trip()
        return replies

    def _latest(self, dirty: set[tuple[str, int]]) -> list[list[Command]]:
        """Rebuild the touched latest lists from MySQL's current rows (DEL + RPUSH each, inside
        the group's MULTI; on a cluster in a MULTI of its own), as migrate builds them."""
        return surfaced(lambda: self._read_latest(dirty), "rebuilding latest lists",
                        self.src.close)  # fmt: skip

    def _read_latest(self, dirty: set[tuple[str, int]]) -> list[list[Command]]:
        conn = self.src.raw_connection()
        conn.rollback()  # a fresh read view: the rows as committed now
        out: list[list[Command]] = []
        for table, n in sorted(dirty):
            r, plan = self.resolved[table], self.plans[table]
            latest = r.table.latest[n]
            schema = r.schema
            pk_cols = [schema.column(c) for c in r.primary_key]
            order_by = schema.column(latest.order_by)
            rows = self.src.latest(table, pk_cols, order_by, latest.limit, clause(r))
            pks = [plan.sep.join(v for v in row if v is not None) for row in rows]
            rebuilt = plan.latest_commands(latest.key, pks)
            out.append([c for c in rebuilt if c[0] not in (b"MULTI", b"EXEC")])
        conn.rollback()
        return out

    def _schema_changed(self, ddl: SchemaChange, report: SyncReport) -> None:
        """Apply a DDL whose effect leaves the mapping's values alone (a TRUNCATE: remove the
        table's keys), with the position after it; hand a table whose rows must be read again
        to the re-snapshot hook (the default stops, exit 1); else stop (exit 1)."""
        if not ddl.statement_dml and self.schema is not None:
            effect = self.schema.effect(ddl)
            if effect.action == "resnapshot":
                reason = f"{short_query(ddl.query)} at {ddl.position}: {effect.what}"
                if self.resnapshot is None:  # online: queued with the position before it
                    self.resnapshot_online(ddl.table, reason)
                else:  # resnapshot_by_hand stops, the position kept
                    self.resnapshot(ddl.table, reason)
            if effect.action == "truncate":
                self._refuse_tree(ddl.table, f"{short_query(ddl.query)} at {ddl.position}")
            if effect.action != "stop" and ddl.after is not None:
                if effect.action == "truncate":
                    self.schema.truncate(self.client, ddl.table)  # a crash: replayed, the same
                fields = position_fields(ddl.after) | self.schema.fields(always=True)
                position = self.state.command(fields)
                apply_group(self.client, [], position, self.state, self.retrying)
                self.position = report.position = ddl.after
                if self.on_status:
                    status = self._status(report, 0.0, False)
                    status.note = effect.what
                    if effect.action == "resnapshot":
                        status.note += f"; re-snapshotting {ddl.table}"
                    self.on_status(status)
                if effect.action == "resnapshot" and self.resnapshot is None:
                    raise Replan(ddl.table)  # a new reader and plan from the position after it
                return
            self.state.clear()
            raise stopped(ddl, effect)
        self.state.clear()
        if ddl.statement_dml:
            raise SchemaChanged(
                f"table '{ddl.table}' was changed by a statement logged as SQL, not as rows, "
                f"at {ddl.position}: {short_query(ddl.query)}; sync cannot apply it exactly and "
                "stopped before it (everything up to it is applied)",
                "a session wrote with binlog_format=STATEMENT or MIXED: SET GLOBAL "
                "binlog_format = 'ROW' and make every client use it; then 'migrator sync "
                "MAPPING --reload' removes the mapping's keys and loads a new snapshot",
            )
        raise SchemaChanged(
            f"table '{ddl.table}' changed at {ddl.position}: {short_query(ddl.query)}; sync "
            "stopped before it (everything up to it is applied)",
            "the mapping may no longer fit: run 'migrator validate MAPPING' against the source "
            "and adjust it; then 'migrator sync MAPPING --reload' removes the mapping's keys "
            "and loads a new snapshot",
        )


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
