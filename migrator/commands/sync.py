"""``migrator sync``: load the mapping, open the source, hand over to the sync stage
(``migrator.sync.coordinator``: first load, follow loop, recovery), return its report."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from migrator.commands.session import load, opened, shards, target_url
from migrator.errors import MigratorError
from migrator.mapping.model import Mapping, Shard
from migrator.mapping.shape import suggest
from migrator.progress import NULL_PROGRESS, Progress
from migrator.reports import SyncReport, SyncStatus
from migrator.source.binlog.process import reader_kind
from migrator.source.binlog.reader import Transaction
from migrator.sync.coordinator import Options, coordinate
from migrator.sync.figures import HealthRules, SyncFigures
from migrator.sync.log import Ticker
from migrator.sync.online_snapshot import SNAPSHOT_CHUNK_ROWS
from migrator.sync.schema_watch import Resnapshot
from migrator.sync.shard_rows import Collisions
from migrator.sync.shards import refuse_unsharded


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
    log_interval: float = 0.0,
    shard: str | None = None,
) -> SyncReport:
    """Load the tables on the first run (or with ``reload``), then apply the binary
    log until ``stop`` is set (or, with ``until_caught_up``, until nothing is pending). Raises
    MigratorError; ``SchemaChanged`` (exit 1) on DDL of a mapped table. ``retries``
    overrides ``options.retries.attempts``; ``again`` is the command that continues after a
    failure (default ``migrator sync FILE``). A second sync of the same mapping into the same
    Redis database is refused (store/sync_lock.py); a target that loses data, or a lost
    source connection, is recovered from (sync/recovery.py). ``metrics`` (``HOST:PORT``)
    serves ``/metrics`` and ``/healthz`` of ``figures`` meanwhile. A DDL after which one
    table must be read again re-snapshots it online with the mapping resolved again (the
    others keep following); a ``resnapshot(table, reason)`` hook is called instead when
    given (``resnapshot_by_hand`` stops, exit 1, keeping the position;
    sync/schema_watch.py).
    ``resnapshot_tables``: tables removed and read again online, chunk by chunk
    (``chunk_rows`` rows each), while the others keep following (sync/online_snapshot.py);
    ``online_load`` (the default): the first run (and a reload) reads every table that way
    too, from the log's position (a stop before it is done: ``LoadInterrupted``, exit 130,
    and the next run resumes it); False: in one long consistent snapshot (a stop: exit 130,
    and the next run loads again). Its events go to the ``migrator.sync`` logger
    (sync/log.py), with a ``status`` line every ``log_interval`` seconds (0: none).
    A sharded mapping (``sources:``) is followed one shard per process: ``shard`` names it
    (its own position, lock and progress; sync/shards.py); without it, exit 2."""
    m = load(mapping)
    refuse_unsharded(m, shard)
    # (an unsharded mapping's source is checked when it is opened)
    picked = shards(m, source, shard)[0] if m.sources or shard else Shard("", "")
    source = picked.url if m.sources else source
    asked = refuse_unknown(m, resnapshot_tables)
    reader_kind()  # MIGRATOR_SYNC_READER, refused before anything is done
    if chunk_rows < 1:
        raise MigratorError("--chunk-rows must be 1 or more", "e.g. --chunk-rows 20000")
    if retries is not None and retries < 0:
        raise MigratorError("--retries must be 0 or more", "e.g. --retries 8")
    policy = m.options.retries
    if retries is not None:
        policy = dataclasses.replace(policy, attempts=retries)
    started = time.perf_counter()
    figures = figures or SyncFigures(HealthRules(heartbeat=heartbeat))
    options = Options(
        figures=figures, policy=policy, stop=stop or threading.Event(),
        until_caught_up=until_caught_up, server_id=server_id, on_status=on_status,
        status_interval=status_interval, progress=progress, on_applied=on_applied,
        heartbeat=heartbeat, reload=reload, again=again, resnapshot=resnapshot, asked=asked,
        chunk_rows=chunk_rows, online_load=online_load, shard=picked.name,
        collisions=Collisions(picked.name),
    )  # fmt: skip
    with (
        serving(metrics, figures, m.name, picked.name, options.collisions),
        Ticker(figures.as_dict, log_interval),
        opened(m, source) as (src, resolved),
    ):
        if picked.name:  # its tables keep the owner hash (plan/owners.py)
            resolved = [dataclasses.replace(r, shard=picked.name) for r in resolved]
        report = coordinate(m, src, resolved, target_url(m, target), options)
    report.seconds = time.perf_counter() - started
    return report


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


@contextmanager
def serving(
    address: str | None,
    figures: SyncFigures,
    mapping: str,
    shard: str = "",
    collisions: Collisions | None = None,
) -> Iterator[None]:
    """``/metrics`` and ``/healthz`` on ``address`` (none when None) while the block runs,
    labelled with the ``shard`` when one; the figures say ``stopped`` after it.
    prometheus_client is imported only then."""
    server = None
    if address:
        from migrator.sync.exporter import MetricsServer

        server = MetricsServer(address, figures, mapping, shard, collisions)
    try:
        yield
    finally:
        figures.stopped()
        if server is not None:
            server.close()
