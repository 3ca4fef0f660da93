"""``sync``: load the mapping's tables once, then keep Redis in step with the binary log.

First run (no state in Redis under ``migrator:<mapping>:sync``), by default: the log's
position is stored at once, then every mapped table is read online, in primary-key chunks,
while the log is followed (commands/online_snapshot.py; resumable). With
``online_load=False``: every mapped table is read inside one
``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and written exactly as ``migrate`` writes it
(same plan, same packed bytes, counters and latest lists rebuilt from the same snapshot);
the snapshot's binary-log position is then stored. Every run then follows the log
from the stored position: a reader thread decodes committed transactions
(``migrator.source.binlog``), this thread turns their row changes into Redis deltas
(``migrator.plan.delta``) and applies each group of whole transactions together with the
position after them in one MULTI/EXEC (``migrator.target.sync_state``; on a Redis Cluster
the position is stored after its commands, and a replay converges). Counters are raised
(never lowered) in the same MULTI; a latest list touched by a group is rebuilt from MySQL,
as migrate builds it, also inside it.

Consistency: Redis always equals the source as of the stored position, except for latest
lists, which are rebuilt from MySQL's current rows and so may be ahead while sync is behind;
once sync has caught up (no pending transactions) they are exact too. During the online
load, that holds for the tables loaded and the keys of the current table up to its last chunk;
the other tables' keys are incomplete until their turn.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any

from migrator.commands.failover import failover
from migrator.commands.figures import HealthRules, SyncFigures, serving
from migrator.commands.follow import Follower
from migrator.commands.online_snapshot import (
    FIELD,
    SNAPSHOT_CHUNK_ROWS,
    dump_queue,
    first_run_queue,
)
from migrator.commands.reports import SyncReport, SyncStatus, TableReport
from migrator.commands.schema_watch import Resnapshot
from migrator.commands.session import load, opened, target_url
from migrator.commands.sync_run import SyncRun
from migrator.errors import MigratorError
from migrator.mapping.loader import suggest
from migrator.mapping.model import Mapping, Retries
from migrator.mapping.resolve import Resolved, resolve
from migrator.plan.batch import Stats
from migrator.plan.cascade import refuse_unfollowable
from migrator.plan.finish import finish_commands
from migrator.plan.planner import TablePlan
from migrator.plan.values import converter
from migrator.progress import NULL_PROGRESS, Progress
from migrator.retry import Retrying
from migrator.source import gtid
from migrator.source.binlog import (
    Transaction,
)
from migrator.source.binlog_settings import refuse_gaps
from migrator.source.mysql import Selector, Source
from migrator.source.reconnect import surfaced
from migrator.source.snapshot import Snapshot, start_snapshot
from migrator.target.checkpoint import KeysFollower
from migrator.target.cluster import connect_any, is_cluster
from migrator.target.cluster_sink import sink_for, writer_for
from migrator.target.sync_lock import SyncLock
from migrator.target.sync_state import SyncState
from migrator.urls import mask

SERVER_ID_ENV = "MIGRATOR_SYNC_SERVER_ID"


def default_server_id(mapping_name: str, target: str = "") -> int:
    """A replica server id of the mapping and target's own (stable; syncs of one mapping into
    two targets read the log side by side, and a second sync into the same target is refused
    by its lock before it connects); ``--server-id`` or $MIGRATOR_SYNC_SERVER_ID override it."""
    raw = os.environ.get(SERVER_ID_ENV)
    if raw:
        if not raw.isdigit() or not 0 < int(raw) < 2**32:
            raise MigratorError(f"{SERVER_ID_ENV}={raw!r} is not a server id", "e.g. 4242")
        return int(raw)
    where = mask(target).encode()
    return 100_000 + zlib.crc32(mapping_name.encode() + b"\0" + where) % 1_000_000_000


def mapping_fingerprint(m: Mapping, legacy: bool = False) -> str:
    """What the loaded keys depend on in the mapping (tables, keys, structures, options), not
    how they are loaded (``batch_size``, ``retries``). ``legacy``: as migrator computed it
    before, with those two (a stored position then still matches)."""
    options = m.options
    if not legacy:
        options = dataclasses.replace(options, batch_size=0, retries=Retries(0, 0.0, 0.0))
    return hashlib.sha256(repr((m.tables, options)).encode()).hexdigest()[:16]


def table_fingerprints(m: Mapping) -> dict[str, str]:
    """Per table, what its keys depend on: its own mapping and the options (as
    ``mapping_fingerprint``). Stored with the position (``tables``) to tell, on the next run,
    which tables are new or changed in the mapping."""
    options = dataclasses.replace(m.options, batch_size=0, retries=Retries(0, 0.0, 0.0))
    return {t.name: hashlib.sha256(repr((t, options)).encode()).hexdigest()[:16] for t in m.tables}


def mapping_changes(
    stored: dict[str, str], m: Mapping, shape: str
) -> tuple[list[tuple[str, str]], list[str]]:
    """Against the stored state: the tables to re-snapshot online (with why) and the tables
    no longer mapped (their keys are kept). A state without per-table fingerprints (an older
    migrator) whose whole-mapping fingerprint differs is refused (exit 2): ``--reload``."""
    if not stored.get("file"):
        return [], []
    now = table_fingerprints(m)
    raw = stored.get("tables")
    if not raw:
        if stored.get("mapping") in (None, shape, mapping_fingerprint(m, legacy=True)):
            return [], []
        raise MigratorError(
            "the mapping changed since sync loaded its snapshot (tables, keys or "
            "structures differ), and the stored state (from an older migrator) does not say "
            "which tables, so Redis lacks what the new mapping adds",
            f"reload: 'migrator sync {m.file or 'MAPPING'} --reload' removes the "
            "mapping's keys and loads a new snapshot",
        )
    before: dict[str, str] = json.loads(raw)
    changed = [
        (t, "new in the mapping" if t not in before else "its mapping changed")
        for t, fp in now.items()
        if before.get(t) != fp
    ]
    return changed, [t for t in before if t not in now]


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
    retries: int | None = None,
    again: str | None = None,
    metrics: str | None = None,
    figures: SyncFigures | None = None,
    resnapshot: Resnapshot | None = None,
    resnapshot_tables: Sequence[str] = (),
    chunk_rows: int = SNAPSHOT_CHUNK_ROWS,
    online_load: bool = True,
) -> SyncReport:
    """Load the tables on the first run (or with ``reload``), then apply the binary
    log until ``stop`` is set (or, with ``until_caught_up``, until nothing is pending). Raises
    MigratorError; ``SchemaChanged`` (exit 1) on DDL of a mapped table. ``retries``
    overrides ``options.retries.attempts``; ``again`` is the command that continues after a
    failure (default ``migrator sync FILE``). A second sync of the same mapping into the same
    Redis database is refused (target/sync_lock.py); a target that loses data, or a lost
    source connection, is recovered from (commands/sync_run.py). ``metrics`` (``HOST:PORT``)
    serves ``/metrics`` and ``/healthz`` of ``figures`` meanwhile. A DDL after which one
    table must be read again re-snapshots it online with the mapping resolved again (the
    others keep following); a ``resnapshot(table, reason)`` hook is called instead when
    given (``resnapshot_by_hand`` stops, exit 1, keeping the position;
    commands/schema_watch.py).
    ``resnapshot_tables``: tables removed and read again online, chunk by chunk
    (``chunk_rows`` rows each), while the others keep following (commands/online_snapshot.py);
    ``online_load`` (the default): the first run (and a reload) reads every table that way
    too, from the log's position (a stop before it is done: ``LoadInterrupted``, exit 130,
    and the next run resumes it); False: in one long consistent snapshot (a stop: exit 130,
    and the next run loads again)."""
    m = load(mapping)
    asked = refuse_unknown(m, resnapshot_tables)
    if chunk_rows < 1:
        raise MigratorError("--chunk-rows must be 1 or more", "e.g. --chunk-rows 20000")
    stop = stop or threading.Event()
    started = time.perf_counter()
    figures = figures or SyncFigures(HealthRules(heartbeat=heartbeat))
    on_status = figures.stamped(on_status)  # the figures in every status line
    bars = progress
    progress = figures.tee(bars, on_status, status_interval)  # the load's progress
    # the online load's: no status of its own (the follow loop's says it is loading)
    online = figures.tee(bars, None, status_interval, phase=False)
    others = figures.tee(NULL_PROGRESS, None, status_interval, phase=False)
    if retries is not None and retries < 0:
        raise MigratorError("--retries must be 0 or more", "e.g. --retries 8")
    policy = m.options.retries
    if retries is not None:
        policy = dataclasses.replace(policy, attempts=retries)
    with serving(metrics, figures, m.name), opened(m, source) as (src, resolved):
        url = target_url(m, target)
        client: Any = connect_any(url)
        database = src.url.database
        if not database:
            raise MigratorError(
                "the source URL names no database",
                "end it with the database: mysql+pymysql://user@host:3306/shop",
            )
        user = f"'{src.url.username or ''}'@'<host>'"
        surfaced(lambda: refuse_gaps(src.raw_connection(), user, src.shown_url),
                 "checking the source's settings", src.close)  # fmt: skip
        refuse_unfollowable({r.name: TablePlan(r) for r in resolved}, is_cluster(client))
        ident = f"{src.url.host or 'localhost'}:{src.url.port or 3306}/{database}"
        lock = SyncLock(connect_any(url), m.name, m.file or m.name)
        lock.acquire()  # before anything is written or the log is read
        try:
            state = SyncState(client, m.name)
            stored = state.load()
            server = surfaced(lambda: gtid.server_id(src.raw_connection()),
                              "reading the source's server id", src.close)  # fmt: skip
            reader_id = server_id or default_server_id(m.name, url)
            shape = mapping_fingerprint(m)
            if reload:
                stored = {}
            elif stored and gtid.moved(stored, ident, server):  # a failover (or another source)
                stored = surfaced(
                    lambda: failover(src, client, state.key, stored, ident, server, reader_id),
                    "finding the stored GTID state on the source", src.close,
                )  # fmt: skip
            changed, dropped = mapping_changes(stored, m, shape)
            identity = {"mapping": shape, "tables": json.dumps(table_fingerprints(m))}
            report = SyncReport(
                mapping=m.file or m.name,
                source=src.shown_url,
                target=mask(url),
                snapshot=None,
            )

            def first_load(retrying: Retrying) -> tuple[Snapshot, list[TableReport]]:
                report.online_load = online_load
                if online_load:
                    return load_position(src)
                return load_snapshot(src, client, resolved, m, progress, stop, retrying)

            run = SyncRun(
                m, src, client, state, resolved, report, stop, policy, lock,
                again or f"migrator sync {m.file or 'MAPPING'}",
                on_status=on_status, progress=progress, figures=figures,
                load=first_load,
                follower=lambda start, **kw: Follower(
                    src, client, state, resolved, database, start, stop, heartbeat,
                    reader_id, on_status, status_interval, on_applied, mapping=m,
                    figures=figures, resnapshot=resnapshot, chunk_rows=chunk_rows,
                    identity=identity, asked=once(asked, changed, dropped), progress=online,
                    others=others, **kw,
                ),
                replan=lambda: replan(src, m, resolved),
                fields={"source": ident, "server": server, **identity, **(
                    {FIELD: dump_queue(first_run_queue(resolved, chunk_rows))}
                    if online_load else {})},
            )  # fmt: skip
            hint = KeysFollower(client, m.name)  # verify's @keys, kept (checkpoint.py)
            try:
                run.run(stored, until_caught_up)
            except BaseException:
                hint.forget()
                raise
            hint.record(run.others)
        finally:
            lock.release()
            client.close()
        report.seconds = time.perf_counter() - started
        return report


def replan(src: Source, m: Mapping, resolved: list[Resolved]) -> None:
    """After a DDL that re-snapshots a table: the mapping resolved again, in place, against
    the schema the server has now (the followers to come read it; commands/sync_run.py)."""
    names = [r.name for r in resolved]
    resolved[:] = resolve(m, src.schema(names), names)  # read afresh, not the cached one


def refuse_unknown(m: Mapping, tables: Sequence[str]) -> list[str]:
    """``--resnapshot`` tables, each checked against the mapping (exit 2 with the closest)."""
    out: list[str] = []
    names = [t.name for t in m.tables]
    for table in tables:
        if table not in names:
            close = suggest(table, names)
            raise MigratorError(
                f"--resnapshot {table}: the mapping does not name table '{table}'"
                + (f"; {close}" if close else ""),
                f"name a table of the mapping: {', '.join(sorted(names))}",
            )
        if table not in out:
            out.append(table)
    return out


def once(
    asked: list[str], changed: list[tuple[str, str]], dropped: list[str]
) -> tuple[tuple[str, str], ...]:
    """The tables to re-snapshot (with why), handed to the first follower only (later ones
    resume them from the stored progress)."""
    out = [(t, why) for t, why in changed] + [(t, "--resnapshot") for t in asked]
    out += [(t, "") for t in dropped]  # "" : no longer mapped, its keys kept
    asked.clear()
    changed.clear()
    dropped.clear()
    return tuple(out)


def load_position(src: Source) -> tuple[Snapshot, list[TableReport]]:
    """The online load: only the log's position (a consistent snapshot begun and ended at
    once); the tables are then read online (commands/online_snapshot.py)."""
    conn = src.raw_connection()
    snapshot = surfaced(lambda: start_snapshot(conn), "taking the log's position", src.close)
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
) -> tuple[Snapshot, list[TableReport]]:
    """Every mapped table read in one consistent snapshot and written as migrate writes it.
    A lost source connection is ``SourceLost`` (the load starts again from a new snapshot);
    Redis writes are retried as ``retrying`` says."""
    conn = src.raw_connection()
    snapshot = surfaced(lambda: start_snapshot(conn), "starting the snapshot", src.close)
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
