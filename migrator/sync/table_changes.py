"""What the follow loop (sync/follow.py) does when a table's rows must be read again or its
schema changes: online snapshots of single tables queued, stepped and stored with the applied
position (sync/online_snapshot.py), and each DDL applied by its effect on the mapping (a
TRUNCATE removes the table's keys; a change of what the mapping writes re-reads the table) or
stopped on (sync/schema_watch.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from migrator.errors import MigratorError
from migrator.reports import SchemaChanged, SyncReport, SyncStatus, TableReport
from migrator.retry import Retrying
from migrator.source.binlog.reader import BinlogPosition, SchemaChange
from migrator.store.sync_state import SyncState, apply_group
from migrator.sync.apply import position_fields
from migrator.sync.figures import SyncFigures
from migrator.sync.log import event
from migrator.sync.nesting import NestSync
from migrator.sync.online_snapshot import Snapshots
from migrator.sync.schema_watch import Replan, Resnapshot, SchemaWatch, short_query, stopped
from migrator.sync.shards import truncate_stops
from migrator.sync.snapshot_queue import FIRST_RUN, Pending


class TableChanges:
    """The half of ``Follower`` that re-reads tables and follows schema changes; ``Follower``
    sets these attributes and gives the status (``_status``)."""

    client: Any
    state: SyncState
    nesting: NestSync | None
    schema: SchemaWatch | None
    snapshots: Snapshots | None
    report: SyncReport | None
    resnapshot: Resnapshot | None
    position: BinlogPosition
    read_to: BinlogPosition
    identity: dict[str, str]
    shard: str  # one shard of a sharded source (sync/shards.py), or ""
    figures: SyncFigures
    retrying: Retrying | None
    on_status: Callable[[SyncStatus], None] | None

    def _status(self, report: SyncReport, rate: float, caught_up: bool) -> SyncStatus:
        raise NotImplementedError

    def first_loading(self) -> bool:
        """Whether the first run's online load is not done yet (its phase is ``loading``)."""
        return self.snapshots is not None and self.snapshots.first_load()

    def resnapshot_online(self, table: str, reason: str) -> None:
        """Read ``table`` again, online, while every other table keeps following: its keys
        are removed when its turn comes, then it is loaded chunk by chunk. Stored at once
        with the applied position, so a crash still does it. ``reason`` is reported."""
        assert self.snapshots is not None, "a Follower built with its mapping"
        self._refuse_tree(table, reason)
        self.snapshots.add(table, reason)
        self._store_snapshots()
        event("resnapshot", f"{table} is read again online, chunk by chunk: {reason}",
              table=table, reason=reason)  # fmt: skip
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
        """The snapshots' progress with the applied position, in one atomic write, with the
        ``snapshot`` entries of the rows written since (online_snapshot.py): sent once, while
        the stored progress is not this one yet."""
        assert self.snapshots is not None
        progress = self.snapshots.fields()
        fields = position_fields(self.position) | progress | self.identity
        position = self.state.command(fields | self.schema.fields() if self.schema else fields)
        entries = self.snapshots.entries(self.position)
        once = progress if entries else None
        apply_group(self.client, entries, position, self.state, self.retrying, once)
        if entries:
            self.figures.appended(entries)

    def _snapshotted(self, table: TableReport, p: Pending) -> None:
        """A table's online snapshot done: a table of the first run's load is reported with
        the tables loaded (``loaded``), any other with the re-snapshots."""
        first = p.reason == FIRST_RUN
        event("table_loaded" if first else "resnapshot_done",
              f"{table.table}: {table.rows:,} rows read online in {table.seconds:.1f} s"
              + ("" if first else f" (read again: {p.reason})"),
              table=table.table, rows=table.rows, seconds=round(table.seconds, 3))  # fmt: skip
        if first and not self.first_loading():
            self.figures.loaded()
            event("loaded", f"first load done online; following from {self.position}",
                  position=str(self.position))  # fmt: skip
        if self.report is None:
            return
        if first:
            table.status = "done"
            self.report.loaded.append(table)
            self.report.online_load = True
        else:
            self.report.resnapshots.append(table)

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
            if effect.action == "truncate" and self.shard:  # every shard's rows: stop
                self.figures.schema_changed("stop")
                raise truncate_stops(self.shard, ddl.table, str(ddl.position))
            if effect.action == "truncate":
                self._refuse_tree(ddl.table, f"{short_query(ddl.query)} at {ddl.position}")
            if effect.action != "stop" and ddl.after is not None:
                if effect.action == "truncate":
                    self.schema.truncate(self.client, ddl.table)  # a crash: replayed, the same
                fields = position_fields(ddl.after) | self.schema.fields(always=True)
                position = self.state.command(fields)
                apply_group(self.client, [], position, self.state, self.retrying)
                self.position = report.position = ddl.after
                self._applied(ddl, effect.action, effect.what)
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
            self.figures.schema_changed("stop")
            raise stopped(ddl, effect)
        self.state.clear()
        self.figures.schema_changed("stop")
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

    def _applied(self, ddl: SchemaChange, action: str, what: str) -> None:
        """A DDL of a mapped table applied: counted (not an error) and logged."""
        self.figures.schema_changed(action)
        query = short_query(ddl.query)
        event("ddl", f"{ddl.table}: {query} at {ddl.position}: {what}", table=ddl.table,
              query=query, effect=action, position=str(ddl.position))  # fmt: skip
