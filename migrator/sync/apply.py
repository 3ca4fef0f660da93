"""How the follow loop (sync/follow.py) applies a group of whole transactions: each row change
planned as a delta of its table (plan/delta.py), with the child rows of cascades and the nested
documents it touches, the latest lists rebuilt from MySQL and the shared unique entries read
again, then written with the position after the group in one MULTI/EXEC (on a Cluster the
position after its commands; store/sync_state.py). The expiry sweep commits the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Command
from migrator.plan.cascade_apply import Cascades
from migrator.plan.delta import Delta, TableDelta
from migrator.plan.expiry_delta import ExpiringTableDelta
from migrator.plan.planner import TablePlan
from migrator.plan.stream import ChangeStream
from migrator.retry import Retrying
from migrator.source.binlog.reader import BinlogPosition, Change, Transaction
from migrator.source.binlog.reconnect import surfaced
from migrator.source.mysql import Source
from migrator.source.selects import RawRow
from migrator.source.weights import Weights
from migrator.source.where import clause
from migrator.store.expiry_sweep import due
from migrator.store.sync_state import SyncState, apply_group, raise_counter
from migrator.sync import shard_latest
from migrator.sync.figures import SyncFigures
from migrator.sync.nesting import NestSync
from migrator.sync.online_snapshot import Snapshots
from migrator.sync.schema_watch import SchemaWatch
from migrator.sync.shard_rows import ShardRows
from migrator.sync.shared_uniques import shared_entries


def position_fields(pos: BinlogPosition) -> dict[str, str]:
    return {"file": pos.file, "pos": str(pos.pos), "gtid": pos.gtid}


class GroupApplier:
    """The applying half of ``Follower``, which sets these attributes."""

    src: Source
    client: Any
    state: SyncState
    cluster: bool
    plans: dict[str, TablePlan]
    resolved: dict[str, Resolved]
    deltas: dict[str, TableDelta]
    expiring: list[ExpiringTableDelta]
    #: the tables' change streams (plan/stream.py): their entries go in the group's MULTI
    streams: dict[str, ChangeStream]
    nesting: NestSync | None
    cascades: Cascades | None
    schema: SchemaWatch | None
    snapshots: Snapshots | None
    position: BinlogPosition
    figures: SyncFigures
    retrying: Retrying | None
    on_applied: Callable[[list[Transaction]], None] | None
    #: tables with weighed columns: (collation, position) of each (``_weigh``)
    weighed: dict[str, list[tuple[str, int]]]
    weights: Weights
    #: a shard's claims: rows another shard owns left out of the group (sync/shard_rows.py)
    claims: ShardRows | None
    shard: str  # the shard this sync follows ("": one source), of ``shard_names``
    shard_names: list[str]

    def _apply(self, group: list[Transaction]) -> None:
        if self.weighed:
            self._weigh(group)
        if self.claims is not None:
            self.claims.group(group)
        total = Delta()
        deltas = self.deltas
        snap = self.snapshots
        replaced = {p.table for p in snap.queue} if snap is not None and snap.queue else None
        nesting = self.nesting
        if nesting is not None:
            nesting.prefetch((c.table, c.before, c.after) for txn in group for c in txn.changes)
        entries = self._entries(group) if self.streams else []
        unfiled = self.claims.crossing.unfiled if self.claims is not None else set()
        for txn in group:
            for change in txn.changes:
                own = deltas.get(change.table)  # None: a parent read for its cascades only
                if own is None:
                    pass
                elif replaced and change.table in replaced:
                    assert snap is not None
                    snap.observe(change)  # a whole-row replacement (online_snapshot.py)
                    own.change(change.before, None, total)
                    own.change(None, change.after, total)
                else:
                    own.change(change.before, change.after, total)
                if self.cascades is not None:  # child rows the log does not carry
                    self.cascades.follow(change.table, change.before, change.after, total)
                if nesting is not None:
                    nesting.change(change.table, change.before, change.after,
                                   unfiled=id(change) in unfiled)  # fmt: skip
        last = group[-1]
        self._commit(total, last.position, entries)
        self.position = last.position
        self.figures.applied_group(group, 2 if self.cluster else 1)
        if self.on_applied:
            self.on_applied(group)

    def _entries(self, group: list[Transaction]) -> list[Command]:
        """The change-stream entries of the group, in commit order (plan/stream.py)."""
        streams = self.streams
        out: list[Command] = []
        for txn in group:
            pos = txn.position
            where, gtid = f"{pos.file}:{pos.pos}".encode(), pos.gtid.encode()
            for c in txn.changes:
                stream = streams.get(c.table)
                if stream is not None:
                    entry = stream.entry(c.before, c.after, where, gtid, txn.timestamp)
                    if entry is not None:
                        out.append(entry)
        return out

    def _weigh(self, group: list[Transaction]) -> None:
        """Each row of a table with weighed columns gets their comparison keys after its
        ``select`` values, as ``migrate`` reads them (plan/layout.py ``row_names``), asked of the
        server in one query for the group (source/weights.py)."""
        weighed = self.weighed
        pairs: list[tuple[str, bytes]] = []
        for txn in group:
            for c in txn.changes:
                for row in (c.before, c.after) if c.table in weighed else ():
                    if row is not None:
                        pairs += [(k, v) for k, i in weighed[c.table] if (v := row[i]) is not None]
        keys = surfaced(lambda: self.weights.keys(pairs), "reading the comparison keys of text",
                        self.src.close) if pairs else {}  # fmt: skip

        def filled(table: str, row: tuple[bytes | None, ...] | None) -> RawRow | None:
            if row is None:
                return None
            return row + tuple(None if (v := row[i]) is None else keys[k, v]
                               for k, i in weighed[table])  # fmt: skip

        for txn in group:
            txn.changes = [
                Change(c.table, filled(c.table, c.before), filled(c.table, c.after))
                if c.table in weighed else c
                for c in txn.changes
            ]  # fmt: skip

    def _sweep(self) -> None:
        """Remove the rows past their expiry from the shared structures (expiry_sweep.py),
        in a transaction of their own, with the applied position as it is."""
        total = due(self.client, self.expiring)
        if total is not None:
            self._commit(total, self.position)

    def _commit(self, total: Delta, at: BinlogPosition, entries: Sequence[Command] = ()) -> None:
        """A group's Delta, the latest lists and shared unique entries it touched, its
        change-stream ``entries`` and the position ``at``, in one MULTI/EXEC
        (store/sync_state.py): a group replayed after a crash before EXEC appends nothing
        twice, since nothing of it was applied."""
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
        commands += entries
        # appends are not idempotent: a retry of a group already in is not sent again
        once = {"file": at.file, "pos": str(at.pos)} if entries else None
        fields = position_fields(at)
        position = self.state.command(fields | self.schema.fields() if self.schema else fields)
        apply_group(self.client, commands, position, self.state, self.retrying, once)
        if entries:
            self.figures.appended(entries)

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
            if self.shard:  # merged with the other shards' newest (sync/shard_latest.py)
                out.append(shard_latest.commands(self.client, self.src, plan, latest, self.shard,
                                                 self.shard_names, clause(r)))  # fmt: skip
                continue
            rows = self.src.latest(table, pk_cols, order_by, latest.limit, clause(r))
            pks = [plan.sep.join(v for v in row if v is not None) for row in rows]
            rebuilt = plan.latest_commands(latest.key, pks)
            out.append([c for c in rebuilt if c[0] not in (b"MULTI", b"EXEC")])
        conn.rollback()
        return out
