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
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

from migrator.commands.follow import Follower, position_fields
from migrator.commands.reports import SyncReport, SyncStatus, TableReport
from migrator.commands.session import load, opened, target_url
from migrator.errors import MigratorError, SourceError
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Stats
from migrator.plan.finish import finish_commands
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import TablePlan
from migrator.plan.values import converter
from migrator.progress import NULL_PROGRESS, Progress
from migrator.source.binlog import (
    BinlogPosition,
    Transaction,
)
from migrator.source.binlog_settings import refuse_gaps
from migrator.source.mysql import Selector, Source
from migrator.source.snapshot import Snapshot, start_snapshot
from migrator.target.cluster import connect_any
from migrator.target.cluster_sink import sink_for, writer_for
from migrator.target.keys import remove_owned
from migrator.target.sync_state import SyncState, apply_group
from migrator.urls import mask

SERVER_ID_ENV = "MIGRATOR_SYNC_SERVER_ID"


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
            target=mask(target_url(m, target)),
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
