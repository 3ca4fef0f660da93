"""sync's first load, before the log is followed: by default only the log's position (the
tables are then read online, sync/online_snapshot.py); with ``--consistent-load`` every
mapped table read in one consistent snapshot and written as migrate writes it."""

from __future__ import annotations

import threading
import time
from contextlib import suppress
from typing import Any

from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Stats
from migrator.plan.finish import finish_commands
from migrator.plan.planner import TablePlan
from migrator.plan.values import converter
from migrator.progress import Progress
from migrator.reports import TableReport
from migrator.retry import Retrying
from migrator.source.mysql import Selector, Source
from migrator.source.reconnect import surfaced
from migrator.source.snapshot import Snapshot, start_snapshot
from migrator.store.cluster_sink import sink_for, writer_for


def load_position(src: Source) -> tuple[Snapshot, list[TableReport]]:
    """The online load: only the log's position (a consistent snapshot begun and ended at
    once); the tables are then read online (sync/online_snapshot.py)."""
    conn, snapshot = surfaced(lambda: _snapshot(src), "taking the log's position", src.close)
    with suppress(Exception):  # a lost connection has nothing to roll back
        conn.rollback()
    return snapshot, []


def _snapshot(src: Source) -> tuple[Any, Snapshot]:
    """The reading connection (opened here, inside the retry policy's reach: a MySQL that
    restarts is ridden out like a lost connection) and a snapshot begun on it."""
    conn = src.raw_connection()
    return conn, start_snapshot(conn)


def load_snapshot(
    src: Source,
    client: Any,
    resolved: list[Resolved],
    m: Mapping,
    progress: Progress,
    stop: threading.Event,
    retrying: Retrying | None = None,
) -> tuple[Snapshot, list[TableReport]]:
    """Every mapped table read in one consistent snapshot and written as migrate writes it.
    A lost source connection is ``SourceLost`` (the load starts again from a new snapshot);
    Redis writes are retried as ``retrying`` says."""
    conn, snapshot = surfaced(lambda: _snapshot(src), "starting the snapshot", src.close)
    reports = []
    try:
        for r in resolved:
            t0 = time.perf_counter()
            plan = TablePlan(r)
            cols = tuple(r.schema.column(n) for n in plan.select)
            selector = Selector(plan.select, cols, tuple(converter(c.kind) for c in cols))
            writer = writer_for(client, retrying)
            total = Stats()
            progress.start(r.name, r.schema.row_estimate or None)
            try:
                for rows in src.batches(r.name, selector, r.primary_key, m.options.batch_size):
                    if stop.is_set():
                        raise KeyboardInterrupt
                    payload, count, stats = writer.pack(plan, rows)
                    writer.put(payload, count)
                    total.add(stats)
                    total.readers[src.reader] += len(rows)
                    progress.advance(r.name, len(rows))
            finally:
                writer.close()
            sink_for(client, retrying).write(finish_commands(src, plan, r))
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
    finally:
        with suppress(Exception):  # a lost connection has nothing to roll back
            conn.rollback()
    return snapshot, reports
