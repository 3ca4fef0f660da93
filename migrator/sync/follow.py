"""sync's follow loop: a reader thread decodes the binary log into a queue; this thread
applies groups of whole transactions, each with the position after it (one MULTI/EXEC on a
single server; on a Cluster the position after its commands). A ``Follower`` is built by
sync/coordinator.py and run by the recovery loop (sync/recovery.py). How a group is applied
is in sync/apply.py; what a re-read table or a schema change does, in sync/table_changes.py.

A lost source connection, whichever it is (the log stream, the one that rebuilds latest
lists, the WKT look-ups), ends the loop with ``SourceLost`` after the last whole transaction
applied; a target that lost its data ends it with ``TargetLost`` (checked on every group, on
every new connection, every second while idle, and before "caught up" is reported). The
recovery loop (sync/recovery.py) decides what comes next.
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
from migrator.mapping.schema import TableSchema
from migrator.plan.cascade import followable, refuse_unfollowable
from migrator.plan.cascade_apply import Cascades
from migrator.plan.cascade_parents import located, outside, watched
from migrator.plan.expiry_delta import table_delta
from migrator.plan.nesting import trees
from migrator.plan.planner import TablePlan
from migrator.plan.stream import snapshot_streams, streams_of
from migrator.progress import NULL_PROGRESS, Progress
from migrator.reports import SyncReport, SyncStatus
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
from migrator.source.foreign_keys import cascades_logged, with_others
from migrator.source.mysql import Source
from migrator.source.weights import Weights
from migrator.store.cluster import is_cluster
from migrator.store.expiry_sweep import SWEEP_SECONDS, expiring
from migrator.store.sink import retry
from migrator.store.sync_state import SyncState
from migrator.sync.apply import GroupApplier
from migrator.sync.figures import SyncFigures
from migrator.sync.handoff import Handoff
from migrator.sync.head import HeadWatch
from migrator.sync.log import event
from migrator.sync.nesting import NestSync, cascade_plans, nest_parents
from migrator.sync.nesting import refuse as refuse_nesting
from migrator.sync.online_snapshot import SNAPSHOT_CHUNK_ROWS, Snapshots
from migrator.sync.schema_watch import Resnapshot, SchemaWatch, resnapshot_by_hand
from migrator.sync.shard_rows import Collisions, ShardRows
from migrator.sync.snapshot_queue import FIRST_RUN, load_queue
from migrator.sync.table_changes import TableChanges

MAX_GROUP_ROWS = 5000  # row changes applied in one MULTI/EXEC at most (whole transactions)


_END = object()
#: how often the target's marker is checked while no group is applied (seconds)
TARGET_CHECK_SECONDS = 1.0


class _Lost:
    """The reader's connection was lost (handed from the reader thread)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class Follower(TableChanges, GroupApplier):
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
        shard: str = "",
        collisions: Collisions | None = None,
    ) -> None:
        self.src, self.client, self.state, self.stop = src, client, state, stop
        self.shard = shard  # one shard of a sharded source (sync/shards.py), or ""
        self.shard_names = [s.name for s in mapping.sources] if mapping is not None else []
        self.check_target, self.retrying = check_target, retrying
        self.progressed = False  # the new reader delivered something (a retry succeeded)
        self.cluster = is_cluster(client)
        self.plans = {r.name: TablePlan(r) for r in resolved}
        #: a shard's claims on its rows' primary keys (sync/shard_rows.py)
        self.claims = ShardRows(client, self.plans, shard, collisions or Collisions(shard)) \
            if shard else None  # fmt: skip
        self.deltas = {name: table_delta(plan) for name, plan in self.plans.items()}
        self.expiring = expiring(self.deltas)  # tables with expire: (expiry_sweep.py)
        self.streams = streams_of(dict(self.plans))  # change streams (plan/stream.py)
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
        try:  # (the nested tables' other parents too: sync/nesting.py)
            parents = {} if logged else self._parents(self.plans)
            schemas = {n: p.resolved.schema for n, p in self.plans.items()} | parents
            refuse_nesting(tops, self.cluster, logged, schemas)
            refuse_unfollowable(followed, self.cluster, logged, parents)
        except MigratorError:
            ctl.close()
            raise
        rules = followable(followed, self.cluster, logged, parents=parents)[0]
        # parents the mapping leaves out: their referenced columns read for the rules only
        read = {r.parent for r in rules} | set(() if logged else nest_parents(tops))
        self.parents = {n: c for n, c in watched(self.plans, parents).items() if n in read}
        for name, cols in self.parents.items():
            ts = parents[name]
            tables[name] = TableColumns(cols, tuple(map(ts.column, cols)), row_end=ts.row_end,
                                        elsewhere=located(name, ts))  # fmt: skip
        shapes = {n: p.select for n, p in self.plans.items()} | self.parents
        self.nesting = NestSync(tops, self._read, logged, shapes) if tops else None
        self.weights = Weights(src)  # comparison keys of text (source/weights.py)
        self.weighed = {
            name: [(plan.resolved.schema.column(c).collation or "", plan.pos[c])
                   for c in plan.weighed]
            for name, plan in self.plans.items() if plan.weighed
        }  # fmt: skip
        self.cascades = (
            Cascades(rules, self.deltas, self._read, self.weights.keys) if rules else None
        )
        self.schema: SchemaWatch | None = None  # DDL decided by its effect on the mapping
        # a DDL that changes what the mapping writes for one table's rows: (table, reason)
        self.resnapshot = resnapshot
        stored = retry(state.load, retrying=retrying)
        if mapping is not None:
            read_only = {n: (parents[n], c) for n, c in self.parents.items()}
            self.schema = SchemaWatch(mapping, self.plans, ctl, stored.get("columns"), read_only)
        self.report: SyncReport | None = None
        self.snapshots: Snapshots | None = None  # online snapshots of single tables
        if mapping is not None:
            waiting = [p for p in load_queue(stored) if p.table in self.plans]
            first = {p.table: max(0, self.resolved[p.table].schema.row_estimate - p.rows)
                     for p in waiting if p.reason == FIRST_RUN}  # fmt: skip
            if first and figures is not None:
                figures.expect(first)  # a resumed first load: the rows still to read
            self.snapshots = Snapshots(
                src, client, mapping, self.resolved, self.plans, waiting,
                chunk_rows, retrying, self._snapshotted, progress, others, stop=stop,
                streams=snapshot_streams(dict(self.plans)), shard=shard, claims=self.claims,
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
        if self.claims is not None:
            self.claims.retrying = self.retrying

    def _parents(self, followed: dict[str, TablePlan]) -> dict[str, TableSchema]:
        """The schemas, as the server has them now, of the parent tables of cascading foreign
        keys that the mapping leaves out, another database's too (plan/cascade.py reads their
        rows for the rules)."""
        fks = [fk for p in followed.values() for fk in p.resolved.schema.foreign_keys]
        names = sorted({k.parent for k in fks if k.unlogged_rules and not k.parent_database
                        and k.parent not in self.plans})  # fmt: skip
        ctl = self.ctl

        def read() -> dict[str, TableSchema]:
            own = outside(ctl.schema(names).tables, self.plans) if names else {}
            return with_others(ctl, own, fks, self.plans)

        return surfaced(read, "reading the parent tables' schema", ctl.close)

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
        caught_up = said_caught_up = False
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
            if caught_up and not said_caught_up:  # once a reader: the log's own line
                said_caught_up = True
                event("caught_up", f"caught up: everything the source's log holds is applied, "
                      f"up to {self.position}", position=str(self.position))  # fmt: skip
            if self.on_status and (now - last_status >= self.status_interval or ended):
                rate = window_rows / max(now - window_start, 1e-9)
                self.on_status(self._status(report, rate, caught_up))
                last_status, window_rows, window_start = now, 0, now
            if ddl is not None:
                if self.snapshots is not None:  # a chunk read before a DDL is read again
                    self.snapshots.discard(ddl.table)
                self._schema_changed(ddl, report)
            if ended and not self.reader_stop.is_set():
                # a reader that follows ends only when asked: an end nobody asked for (a
                # source shut down cleanly) is a lost connection, retried as one
                raise SourceLost("the binary log stream ended (the server shut down?)")
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

    def _status(self, report: SyncReport, rate: float, caught_up: bool) -> SyncStatus:
        phase = "loading" if self.first_loading() else "following"
        status = SyncStatus(
            "caught up" if caught_up else phase, str(self.position),
            report.transactions, report.rows_changed, rate, self.figures.lag(),
        )  # fmt: skip
        if self.snapshots is not None:
            status.online_snapshot = self.snapshots.progress()
        return status


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
