"""sync's coordinator: one run of ``migrator sync`` behind the command, the way a Debezium
connector keeps a snapshot source, a streaming source and a schema history behind one
coordinator. It checks the source's settings and the mapping's tables, takes the lease
(store/sync_lock.py), reads the stored position (store/sync_state.py) — across a failover
too (failover.py) — and tells which tables the mapping changed (identity.py), then hands the
first load (first_load.py, online_snapshot.py) and the follow loop (follow.py) to the recovery
loop (recovery.py), with its figures (figures.py) teed into every status and progress line.

First run (no state in Redis under ``migrator:<mapping>:sync``), by default: the log's
position is stored at once, then every mapped table is read online, in primary-key chunks,
while the log is followed (sync/online_snapshot.py; resumable). With
``online_load=False``: every mapped table is read inside one
``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and written exactly as ``migrate`` writes it
(same plan, same packed bytes, counters and latest lists rebuilt from the same snapshot);
the snapshot's binary-log position is then stored. Every run then follows the log
from the stored position: a reader thread decodes committed transactions
(``migrator.source.binlog.reader``), this thread turns their row changes into Redis deltas
(``migrator.plan.delta``) and applies each group of whole transactions together with the
position after them in one MULTI/EXEC (``migrator.store.sync_state``; on a Redis Cluster
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

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from migrator.errors import MigratorError
from migrator.mapping.model import Mapping, Retries
from migrator.mapping.resolve import Resolved, resolve
from migrator.plan.cascade import refuse_unfollowable
from migrator.plan.cascade_parents import outside
from migrator.plan.nesting import trees
from migrator.plan.planner import TablePlan
from migrator.plan.search import definitions
from migrator.progress import NULL_PROGRESS, Progress
from migrator.reports import SyncReport, SyncStatus, TableReport
from migrator.retry import Retrying
from migrator.source.binlog import gtid
from migrator.source.binlog.reader import Transaction
from migrator.source.binlog.reconnect import surfaced
from migrator.source.binlog.settings import refuse_gaps
from migrator.source.foreign_keys import cascades_logged, with_others
from migrator.source.mysql import Source
from migrator.source.snapshot import Snapshot
from migrator.store import features, search_index
from migrator.store.checkpoint import KeysFollower
from migrator.store.cluster import connect_any, is_cluster
from migrator.store.sink import retry
from migrator.store.sync_lock import SyncLock
from migrator.store.sync_state import SyncState
from migrator.sync import log, shard_latest
from migrator.sync.failover import failover
from migrator.sync.figures import SyncFigures
from migrator.sync.first_load import load_position, load_snapshot
from migrator.sync.follow import Follower
from migrator.sync.identity import (
    default_server_id,
    mapping_changes,
    mapping_fingerprint,
    table_fingerprints,
)
from migrator.sync.nesting import cascade_plans
from migrator.sync.nesting import refuse as refuse_nesting
from migrator.sync.online_snapshot import SNAPSHOT_CHUNK_ROWS
from migrator.sync.recovery import SyncRun
from migrator.sync.schema_watch import Resnapshot
from migrator.sync.shard_nesting import refuse_unowned
from migrator.sync.shard_rows import Collisions, ShardRows
from migrator.sync.shards import (
    refuse_changed,
    refuse_resnapshot,
    shard_resnapshot,
)
from migrator.sync.snapshot_queue import FIELD, dump_queue, first_run_queue
from migrator.urls import mask


@dataclass
class Options:
    """How one run behaves: the command's options, already checked (commands/sync.py)."""

    figures: SyncFigures
    policy: Retries
    stop: threading.Event = field(default_factory=threading.Event)
    until_caught_up: bool = False
    server_id: int | None = None
    on_status: Callable[[SyncStatus], None] | None = None
    status_interval: float = 1.0
    progress: Progress = NULL_PROGRESS
    on_applied: Callable[[list[Transaction]], None] | None = None
    heartbeat: float = 0.2
    reload: bool = False
    again: str | None = None
    resnapshot: Resnapshot | None = None
    asked: list[str] = field(default_factory=list)  # --resnapshot tables
    chunk_rows: int = SNAPSHOT_CHUNK_ROWS
    online_load: bool = True
    shard: str = ""  # one shard of a sharded source (sync/shards.py), or ""
    collisions: Collisions | None = None  # its collisions, counted (sync/shard_rows.py)


def refuse_cluster_streams(resolved: list[Resolved], cluster: bool) -> None:
    """Change streams are exact only in the group's one MULTI/EXEC, which a Redis Cluster
    cannot give keys of several slots: refused there (exit 2)."""
    streamed = [r.name for r in resolved if r.table.streams is not None]
    if cluster and streamed:
        raise MigratorError(
            f"sync cannot write change streams ({streamed[0]}) on a Redis Cluster: the "
            "entries, the rows and the position would not share one MULTI/EXEC",
            "sync to a single Redis server, or drop streams: from the mapping",
        )


def coordinate(
    m: Mapping, src: Source, resolved: list[Resolved], url: str, o: Options
) -> SyncReport:
    """One sync run against the opened source and the target at ``url``, until ``o.stop`` is
    set (or, with ``o.until_caught_up``, until nothing is pending). Raises MigratorError;
    ``SchemaChanged`` (exit 1) on DDL of a mapped table."""
    figures = o.figures
    on_status = figures.stamped(o.on_status)  # the figures in every status line
    bars = o.progress
    progress = figures.tee(bars, on_status, o.status_interval)  # the load's progress
    # the online load's: no status of its own (the follow loop's says it is loading)
    online = figures.tee(bars, None, o.status_interval, phase=False)
    others = figures.tee(NULL_PROGRESS, None, o.status_interval, phase=False)
    tops = trees({r.name: TablePlan(r) for r in resolved})  # nested documents
    online_load = o.online_load and not tops  # a tree is loaded whole, in one snapshot
    refuse_nesting(tops, cluster=False, logged=True)  # what needs no server: at once
    shard = o.shard
    refuse_resnapshot(o.asked, shard)
    resnapshot = o.resnapshot or (shard_resnapshot(shard) if shard else None)
    collisions = o.collisions or Collisions(shard)
    client: Any = connect_any(url)
    searches = definitions(resolved, m)
    features.require(client, resolved, searches)  # the server indexes what sync writes
    database = src.url.database
    if not database:
        raise MigratorError(
            "the source URL names no database",
            "end it with the database: mysql+pymysql://user@host:3306/shop",
        )
    user = f"'{src.url.username or ''}'@'<host>'"
    surfaced(lambda: refuse_gaps(src.raw_connection(), user, src.shown_url),
             "checking the source's settings", src.close)  # fmt: skip
    logged = surfaced(lambda: cascades_logged(src.raw_connection()),
                      "reading the source's settings", src.close)  # fmt: skip
    source_tables = src.schema().tables
    refuse_nesting(tops, is_cluster(client), logged, source_tables)
    refuse_cluster_streams(resolved, is_cluster(client))
    names = [s.name for s in m.sources] if shard else []
    shard_latest.refuse(resolved, names, is_cluster(client))  # merged over the shards
    plans = {r.name: TablePlan(r) for r in resolved}
    followed = cascade_plans(plans, tops)
    fks = [fk for p in followed.values() for fk in p.resolved.schema.foreign_keys]
    # read for their cascades (plan/cascade.py), another database's too
    parents = surfaced(lambda: with_others(src, outside(source_tables, plans), fks, plans),
                       "reading the parent tables' schema", src.close)  # fmt: skip
    refuse_unfollowable(followed, is_cluster(client), logged, parents)
    ident = f"{src.url.host or 'localhost'}:{src.url.port or 3306}/{database}"
    lock = SyncLock(connect_any(url), m.name, m.file or m.name, shard)
    lock.acquire()  # before anything is written or the log is read
    try:
        search_index.build(client, m.name, searches, progress)
        if shard and not is_cluster(client):  # (a Cluster never held the old names)
            retry(lambda: shard_latest.rename_old(client, resolved, shard))
        if shard:  # ranks an older migrator gave text (its bytes): the server's now
            surfaced(lambda: shard_latest.rerank(client, src, plans, shard, names),
                     "ranking the shard's latest-list candidates", src.close)  # fmt: skip
        state = SyncState(client, m.name, shard)
        stored = state.load()
        server = surfaced(lambda: gtid.server_id(src.raw_connection()),
                          "reading the source's server id", src.close)  # fmt: skip
        reader_id = o.server_id or default_server_id(m.name + (f":{shard}" if shard else ""), url)
        shape = mapping_fingerprint(m)

        def fail_over(held: dict[str, str], now: str) -> dict[str, str]:
            """The stored position moved to server ``now`` by its GTID state, and said."""
            found = surfaced(
                lambda: failover(src, client, state.key, held, ident, now, reader_id),
                "finding the stored GTID state on the source", src.close,
            )  # fmt: skip
            log.failed_over(held, found)
            return found

        def relocate() -> dict[str, str] | None:
            """After a lost connection: a failover when another server answers now (a
            virtual IP moved to a promoted replica)."""
            now = surfaced(lambda: gtid.server_id(src.raw_connection()),
                           "reading the source's server id", src.close)  # fmt: skip
            held = state.load()
            moved = bool(held.get("file")) and gtid.moved(held, ident, now)
            return fail_over(held, now) if moved else None

        if o.reload:
            stored = {}
        elif stored and gtid.moved(stored, ident, server):  # a failover (or another source)
            stored = fail_over(stored, server)

        changed, dropped = mapping_changes(stored, m, shape)
        refuse_changed(changed, shard)
        if shard and stored.get("file"):  # a Redis an older migrator loaded: said, not met
            retry(lambda: refuse_unowned(client, plans))
        log.started(m.file or m.name, src.shown_url, mask(url), stored, o.reload, online_load)
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
                return load_position(src, reader_id)
            claims = ShardRows(client, {r.name: TablePlan(r) for r in resolved}, shard,
                               collisions) if shard else None  # fmt: skip
            if claims is not None:
                claims.retrying = retrying
            return load_snapshot(src, client, resolved, m, progress, o.stop, retrying, reader_id,
                                 shard, claims)  # fmt: skip

        run = SyncRun(
            m, src, client, state, resolved, report, o.stop, o.policy, lock,
            o.again or f"migrator sync {m.file or 'MAPPING'}",
            on_status=on_status, progress=progress, figures=o.figures,
            load=first_load,
            follower=lambda start, **kw: Follower(
                src, client, state, resolved, database, start, o.stop, o.heartbeat,
                reader_id, on_status, o.status_interval, o.on_applied, mapping=m,
                figures=o.figures, resnapshot=resnapshot, chunk_rows=o.chunk_rows, shard=shard,
                collisions=collisions,
                identity=identity, asked=once(o.asked, changed, dropped), progress=online,
                others=others, **kw,
            ),
            replan=lambda: replan(src, m, resolved, shard), shard=shard, relocate=relocate,
            fields={"source": ident, "server": server, **identity, **(
                {FIELD: dump_queue(first_run_queue(resolved, o.chunk_rows))}
                if online_load else {})},
        )  # fmt: skip
        hint = KeysFollower(client, m.name)  # verify's @keys, kept (checkpoint.py)
        try:
            run.run(stored, o.until_caught_up)
        except BaseException:
            hint.forget()
            raise
        if shard:  # several writers: no one process knows the union's count
            hint.forget()
        else:
            hint.record(run.others)
        log.ended(report)
    finally:
        lock.release()
        client.close()
    return report


def replan(src: Source, m: Mapping, resolved: list[Resolved], shard: str = "") -> None:
    """After a DDL that re-snapshots a table: the mapping resolved again, in place, against
    the schema the server has now (the followers to come read it; recovery.py)."""
    names = [r.name for r in resolved]
    resolved[:] = resolve(m, src.schema(names), names, shard)  # afresh, not the cached one


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
