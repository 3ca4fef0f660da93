"""sync's first load, before the log is followed: by default only the log's position (the
tables are then read online, sync/online_snapshot.py); with ``--consistent-load`` every
mapped table read in one consistent snapshot and written as migrate writes it (a mapping
with nested documents always loads so: the documents and their side structure are written
from that snapshot, as migrate writes them)."""

from __future__ import annotations

import threading
import time
from contextlib import suppress
from typing import Any

from migrator.errors import MigratorError, TableChanged
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Stats
from migrator.plan.finish import finish_commands
from migrator.plan.nesting import trees
from migrator.plan.planner import TablePlan
from migrator.plan.stream import snapshot_entries, with_entries
from migrator.progress import Progress
from migrator.reports import TableReport
from migrator.retry import Retrying
from migrator.source.binlog.reconnect import SourceChanged, surfaced
from migrator.source.mysql import Source
from migrator.source.nesting import all_written
from migrator.source.selects import selector_of
from migrator.source.snapshot import Snapshot, gtid_snapshot, start_snapshot
from migrator.source.where import clause, read_clause
from migrator.store.cluster_sink import sink_for, writer_for
from migrator.store.owned import owned
from migrator.sync.shard_rows import ShardRows
from migrator.sync.shards import shard_ends


def load_position(src: Source, reader_id: int) -> tuple[Snapshot, list[TableReport]]:
    """The online load: only the log's position (a consistent snapshot begun and ended at
    once; on MySQL with GTIDs ``gtid_snapshot``'s, without a lock); the tables are then read
    online (sync/online_snapshot.py). ``reader_id``: the server id to read the log as."""
    opened: list[Any] = []

    def position() -> Snapshot:  # the connection opened inside the retries' reach too
        conn = src.raw_connection()
        opened[:] = [conn]
        return gtid_snapshot(conn, src.url, reader_id) or start_snapshot(conn)

    snapshot = surfaced(position, "taking the log's position", src.close)
    conn = opened[0]
    with suppress(Exception):  # a lost connection has nothing to roll back
        conn.rollback()
    return snapshot, []


def load_snapshot(
    src: Source,
    client: Any,
    resolved: list[Resolved],
    m: Mapping,
    progress: Progress,
    stop: threading.Event,
    retrying: Retrying | None = None,
    reader_id: int | None = None,
    shard: str = "",
    claims: ShardRows | None = None,
) -> tuple[Snapshot, list[TableReport]]:
    """Every mapped table read in one consistent snapshot and written as migrate writes it
    (on MySQL with GTIDs and a ``reader_id``, ``gtid_snapshot``'s, without a lock), with the
    ``snapshot`` entries of the streams that ask for them (as of the snapshot's position).
    A lost source connection is ``SourceLost`` (the load starts again from a new snapshot);
    Redis writes are retried as ``retrying`` says. One ``shard``'s load raises the counters
    (sync/shards.py) and leaves out the rows another shard owns (``claims``)."""
    opened: list[Any] = []

    def begin() -> Snapshot:  # the connection opened inside the retries' reach too
        conn = src.raw_connection()
        opened[:] = [conn]
        found = None if reader_id is None else gtid_snapshot(conn, src.url, reader_id)
        return found or start_snapshot(conn)

    snapshot = surfaced(begin, "starting the snapshot", src.close)
    conn = opened[0]
    reports = []
    try:
        for r in resolved:
            t0 = time.perf_counter()
            plan = TablePlan(r)
            selector = selector_of(r.schema, plan.row_names)
            writer = writer_for(client, retrying)
            entries = snapshot_entries(plan)  # streams.snapshot: as of the snapshot's position
            if entries is not None:
                if not snapshot.has_position:
                    raise MigratorError("the source's binary log is off", "sync needs log_bin=ON")
                assert snapshot.binlog_file is not None and snapshot.binlog_position is not None
                entries.at(snapshot.binlog_file, snapshot.binlog_position, snapshot.gtid,
                           snapshot.moment)  # fmt: skip
                sink_for(client, retrying).write([entries.truncate()])  # before its rows
            total = Stats()
            progress.start(r.name, r.schema.row_estimate or None)
            try:
                for rows in src.batches(
                    r.name, selector, r.primary_key, m.options.batch_size, where=read_clause(r)
                ):
                    if stop.is_set():
                        raise KeyboardInterrupt
                    if claims is not None:  # (sync/shard_rows.py)
                        rows = claims.rows(r.name, rows)
                    payload, count, stats = writer.pack(plan, rows)
                    if entries is not None:
                        payload, count = with_entries(
                            payload, count, entries.of(plan.written(rows))
                        )
                    writer.put(payload, count)
                    total.add(stats)
                    total.readers[src.reader] += len(rows)
                    progress.advance(r.name, len(rows))
            finally:
                writer.close()
            ends = finish_commands(src, plan, r, clause(r))
            if shard:  # counters raised, latest lists merged over the shards
                ends = shard_ends(client, src, plan, ends, shard, m)
            sink_for(client, retrying).write(ends)
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
                    readers=dict(total.readers),
                )
            )
        for top in trees({r.name: TablePlan(r) for r in resolved}).values():
            progress.note(top.name, f"writing documents with {', '.join(top.tables()[1:])} nested")
            sink = sink_for(client, retrying)  # the documents whole, and their rows beside them
            keep = owned(client, top.layout, retrying)  # a shard's: its own (store/owned.py)
            for cmds in all_written(src, top, m.options.batch_size, keep):
                if stop.is_set():
                    raise KeyboardInterrupt
                sink.write(cmds)
        if claims is not None:  # the children another shard's documents would hold: said
            claims.crossing.loaded(src, retrying)
    except TableChanged as e:  # a swap's cut-over under the snapshot: a new snapshot
        raise SourceChanged(f"{e.message}: the first load starts again") from None
    finally:
        with suppress(Exception):  # a lost connection has nothing to roll back
            conn.rollback()
    return snapshot, reports
