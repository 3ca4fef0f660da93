"""``migrator migrate``: load every mapped table into Redis (worker processes:
scaleout/workers.py).

A run is bound to what it loads and guarded against a target that loses it (issue 10):

* it starts by writing its marker and binding into the checkpoint (store/checkpoint.py):
  the fingerprint of the resolved mapping (mapping/fingerprint.py) and the source's identity;
  ``--resume`` refuses (exit 2) a checkpoint bound to something else, naming what changed;
* transient failures are retried by policy (retry.py; ``options.retries``, ``--retries``);
* when the target loses data mid-run (store/guard.py), every task is stopped, the run
  continues from what the target still vouches for, and the report lists the recovery;
  after ``attempts`` such losses it stops with exit 3.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from migrator.commands.failures import BeforeWriting
from migrator.commands.nested import every_table, nesting_trees, write_nested
from migrator.commands.session import (
    check_batch_size,
    load,
    opened,
    retry_policy,
    shards,
    source_url,
    target_url,
)
from migrator.commands.shard_loads import ShardPart, finished_on, reload_shard, run_shards
from migrator.commands.startup import STARTING, lost_or_transient, start_up
from migrator.errors import ConnectError, MigratorError, TargetError, TargetLost
from migrator.mapping.model import Mapping, Retries
from migrator.mapping.resolve import Resolved, resolve
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import TablePlan
from migrator.plan.search import definitions
from migrator.progress import NULL_PROGRESS, Progress
from migrator.reports import MigrateReport
from migrator.retry import Retrying
from migrator.scaleout import dask_tasks as scaleout
from migrator.scaleout.workers import default_workers, load_tables
from migrator.source.chunks import CHUNK_ROWS
from migrator.source.mysql import Source
from migrator.source.snapshot import binlog_on
from migrator.store import features, search_index
from migrator.store.checkpoint import (
    REPLACING,
    Checkpoint,
    TableState,
    removal_pending,
    tables_of,
)
from migrator.store.cluster import connect_any
from migrator.store.cluster_sink import sink_for
from migrator.store.guard import Guard, run_id
from migrator.store.keys import remove_owned
from migrator.store.sink import Client, transient
from migrator.urls import mask


def migrate(
    mapping: Mapping | str | os.PathLike[str],
    *,
    source: str | None = None,
    target: str | None = None,
    tables: list[str] | None = None,
    batch_size: int | None = None,
    resume: bool = False,
    progress: Progress = NULL_PROGRESS,
    workers: int | None = None,
    replace: bool = False,
    retries: int | None = None,
    resume_command: str | None = None,
    into_existing: bool = False,
    memory_check: bool = True,
    chunk_rows: int | None = None,
    dask: str | None = None,
    shard: str | None = None,
    part: ShardPart | None = None,
) -> MigrateReport:
    """Load every mapped table into Redis. Returns a report; raises MigratorError.

    With one worker every table is read inside one consistent snapshot of the source
    (``report.snapshot``: its moment and binlog position). ``workers`` (else
    $MIGRATOR_WORKERS) cuts each table into chunks of about ``chunk_rows`` rows by its primary
    key (source/chunks.py; default 50,000) and loads them side by side (scaleout/workers.py), each
    chunk in a snapshot of its own;
    default: 1 on machines of up to 2 CPUs or for loads under 200,000 rows, else
    min(4, CPUs). ``replace`` first removes every key the mapping owns (SCAN + UNLINK, never
    FLUSHDB; ``options.ignore`` and other mappings' keys stay), then loads; a ``--resume``
    of an interrupted replace finishes the removal first. Without it, a run over an earlier
    one overwrites what changed but removes nothing (``report.notes`` says how to).
    ``retries`` overrides ``options.retries.attempts``; ``resume_command`` is how the
    caller says to continue after a failure (default ``migrator migrate FILE --resume``).
    Before writing, the target is checked (commands/preflight.py): keys of the mapping's key
    space that no earlier run of it wrote refuse the run unless ``into_existing`` or
    ``replace``; with ``maxmemory`` set, a load that will not fit is refused unless not
    ``memory_check``. ``dask``: the address of a Dask scheduler whose workers run the chunks
    (scaleout/dask_tasks.py) instead of local processes. A sharded mapping (``sources:``)
    is loaded shard by shard (commands/shard_loads.py ``run_shards``; ``shard``: that one only),
    each as a ``part`` of the run: its rows, its own snapshot and checkpoint."""

    m = load(mapping)
    if m.sources and part is None:
        reload = replace and shard is not None  # that shard's rows only: reload_shard

        def load_one(p: ShardPart, first: bool) -> MigrateReport:
            """One shard's part of the run; the first removes the keys of a --replace."""
            return migrate(
                m, target=target, tables=tables, batch_size=batch_size,
                resume=resume and not reload, progress=progress, workers=workers,
                replace=replace and first, retries=retries, resume_command=resume_command,
                into_existing=into_existing or not first, memory_check=memory_check,
                chunk_rows=chunk_rows, dask=dask, part=p,
            )  # fmt: skip

        if replace and shard is not None:
            return reload_shard(m, shard, target_url(m, target), tables,
                                Retrying(retry_policy(m, retries)), load_one)  # fmt: skip
        done = finished_on(target_url(m, target)) if resume and not replace else None
        return run_shards(m, shard, source, replace, tables, load_one, finished=done)
    if shard is not None:
        shards(m, source, shard)  # the mapping has one source: refused, with the fix
    run_name = m.name if part is None else part.run_name
    if part is not None:
        source = part.url
    check_batch_size(batch_size)
    if workers is None and os.environ.get("MIGRATOR_WORKERS"):
        raw = os.environ["MIGRATOR_WORKERS"]
        if not raw.isdigit():
            raise MigratorError(f"MIGRATOR_WORKERS={raw!r} is not a number", "e.g. 2")
        workers = int(raw)
    if workers is not None and workers < 1:
        raise MigratorError("--workers must be at least 1", "e.g. --workers 2")
    if dask and workers is not None:
        raise MigratorError(
            "--workers and --dask exclude each other: with --dask the cluster's worker "
            "threads run the chunks",
            "drop --workers (or unset MIGRATOR_WORKERS), or drop --dask",
        )
    if chunk_rows is not None and chunk_rows < 1:
        raise MigratorError("--chunk-rows must be at least 1", f"e.g. --chunk-rows {CHUNK_ROWS}")
    policy = retry_policy(m, retries)
    size = batch_size or m.options.batch_size
    again = resume_command or f"migrator migrate {m.file or 'MAPPING'} --resume"
    started = time.perf_counter()
    first = BeforeWriting()  # until start-up is over: no --resume to suggest
    with (
        first,
        _cluster(dask) as connecting,
        opened(m, source, tables, "" if part is None else part.name) as (src, resolved),
    ):
        src.retrying = Retrying(policy)
        n_workers = workers or default_workers(sum(r.schema.row_estimate for r in resolved))
        if connecting is not None:  # every table in chunks, one snapshot each
            n_workers = 2  # (at least: the cluster's threads are counted once it answers)
        snapped = snapshot_tables(resolved)
        if snapped:  # entries as of one position: the load's one snapshot
            refuse_snapshot_entries(snapped, src, dask is not None or (workers or 1) > 1)
            n_workers = 1
        report = MigrateReport(
            mapping=m.file or m.name,
            source=mask(src.url),
            target=mask(target_url(m, target)),
            tables=[],
        )
        # nothing of this run is written before the load: a failure here (the target
        # unreachable, refusing the login) needs no --resume, and its hint is its own
        # a bad 'search:' stops before connecting
        searches = definitions(resolved, m, every_table(m, src, resolved))
        tops = nesting_trees(m, src, resolved)  # and a 'nest:' that cannot be
        client = connect_any(target_url(m, target))
        features.require(client, resolved, searches)
        # a Redis that goes away from here on is retried as it is mid-load
        retrying = Retrying(policy, lambda text: progress.note(STARTING, text))
        # what an earlier run left (read once: a retried start-up has begun its own)
        earlier = retrying.call(Checkpoint(client, run_name).load, transient, "Redis")
        cluster = None  # --dask: its scheduler and a worker answer before the first write
        if connecting is not None:
            cluster = connecting.client()
            n_workers = max(2, scaleout.threads(cluster))
        begun = retrying.call(
            lambda: start_up(client, m, src, resolved, replace=replace, resume=resume,
                             into_existing=into_existing, memory_check=memory_check,
                             part=part),
            lost_or_transient, "starting the run on Redis",
        )  # fmt: skip
        first.over()
        run, checkpoint, state, guard = begun.run, begun.checkpoint, begun.state, begun.guard
        report.recoveries = begun.recoveries
        report.notes += begun.notes
        common: dict[str, Any] = {
            "source": source_url(m, source),
            "target": target_url(m, target),
            "mapping": run_name,  # the checkpoint's name (a shard's own)
            "batch_size": size,
            "chunk_rows": chunk_rows or CHUNK_ROWS,
            "snapshot": n_workers > 1,
            "retries": policy,
            "token": checkpoint.token,
            "run_id": guard.run_id,
            "stream_snapshot": bool(snapped),
        }
        for what in report.recoveries:
            progress.note(what.split(":", 1)[0], what)
        resumed = bool(tables_of(state))
        try:
            removing = removal_pending(state)
            losses = 0
            while True:
                try:
                    if removing:
                        removed = _replace(m, src, client, checkpoint, resolved, retrying)
                        report.removed = (report.removed or 0) + removed
                        state[REPLACING] = TableState(None, 0, True)
                        removing = False
                    if n_workers == 1 and report.snapshot is None:
                        report.snapshot = src.snapshot()
                        if snapped and not report.snapshot.has_position:
                            raise MigratorError(
                                f"snapshot entries of {snapped[0]}'s stream need the load's "
                                f"binary-log position, which the source does not give "
                                f"({report.snapshot.note or 'log_bin is off'})",
                                "turn the binary log on, or drop streams.snapshot",
                            )
                    report.tables = load_tables(
                        src,
                        client,
                        checkpoint,
                        resolved,
                        state,
                        progress,
                        n_workers,
                        common,
                        engine=None if dask is None else lambda: scaleout.DaskPool(cluster, dask),
                        ends=None if part is None else part.ends,
                    )
                    break
                except TargetLost as e:
                    losses += 1
                    if losses > policy.attempts:
                        raise
                    state, what = recover(client, checkpoint, guard, run, policy, replace)
                    # a removal cut short, or a target whose run marker went with its data
                    # (it may hold keys of an older state again): remove before loading
                    removing = removing or removal_pending(state)
                    report.recoveries.append(f"{e.message}; {what}")
                    common["run_id"] = guard.run_id
                    for r in resolved:
                        progress.note(r.name, f"target lost data: {what}")
            # every table loaded from its start in this one run: its key count is the hint
            # with which verify guesses whether Redis holds keys the mapping does not explain
            write_nested(src, client, tops, size, retrying, progress)
            whole = not resumed and not losses and not tables
            checkpoint.record_keys(report.keys if whole else None)
            search_index.build(client, m.name, searches, progress)
        except (TargetError, ConnectError, TargetLost) as e:
            raise partial(e, again) from None
        client.close()
        report.consistency = consistency(report, n_workers, resumed=resumed)
        if src.retaken:  # the snapshot's connection was lost and taken again
            report.consistency += (
                f"; the connection to MySQL was lost {len(src.retaken)} time(s) and the "
                f"snapshot taken again: rows read after that are as of "
                f"{src.retaken[-1].describe()}"
            )
        if earlier and not resume and not replace and not (part is not None and part.replaced):
            report.rerun = True
            report.notes.append(rerun_note(m, earlier, resolved))
        report.seconds = time.perf_counter() - started
        return report


def snapshot_tables(resolved: list[Resolved]) -> list[str]:
    """The tables whose change stream takes the first load's rows (``streams.snapshot``)."""
    return [r.name for r in resolved if r.table.streams is not None and r.table.streams.snapshot]


def refuse_snapshot_entries(snapped: list[str], src: Source, parallel: bool) -> None:
    """Snapshot entries carry the position the load's rows are as of: one snapshot's, with the
    binary log on. ``--workers`` and ``--dask`` read each chunk in a snapshot of its own
    (exit 2)."""
    if parallel:
        raise MigratorError(
            f"{snapped[0]}'s stream takes snapshot entries (streams.snapshot), which need every "
            "row read in one snapshot: --workers above 1 and --dask read each chunk in a "
            "snapshot of its own",
            "drop --workers/--dask (unset MIGRATOR_WORKERS), or load with 'migrator sync'",
        )
    if not binlog_on(src.raw_connection()):
        raise MigratorError(
            f"{snapped[0]}'s stream takes snapshot entries (streams.snapshot), which carry the "
            "load's binary-log position: the source's binary log is off",
            "turn it on (log_bin), or drop streams.snapshot",
        )


@contextmanager
def _cluster(address: str | None) -> Iterator[scaleout.Connecting | None]:
    """The Dask client of ``--dask`` being connected (None without it), closed at the end."""
    if address is None:
        yield None
        return
    connecting = scaleout.Connecting(address)
    try:
        yield connecting
    finally:
        connecting.close()


def _replace(
    m: Mapping,
    src: Source,
    client: Client,
    checkpoint: Checkpoint,
    resolved: list[Resolved],
    retrying: Retrying,
) -> int:
    """Remove every key the mapping owns under the loaded tables' key spaces; the mark in
    the checkpoint (written with the run's marker) makes a ``--resume`` finish the removal
    before it loads, and says once it is ``done``. Redis going away is retried as
    ``retrying`` says; a target that lost data raises TargetLost (the caller recovers and
    removes again)."""
    sink = sink_for(client, retrying)
    sink.write([checkpoint.command(REPLACING, None, 0)])
    shard = resolved[0].shard if resolved else ""
    try:  # every table's patterns say who owns a key
        everything = resolve(m, src.schema(), shard=shard)
    except MigratorError:  # another table does not resolve (--tables left it out)
        everything = resolved
    space = KeySpace([TablePlan(r) for r in everything], m.kept())
    removed = remove_owned(client, space, [r.name for r in resolved], retrying=retrying)
    sink.write([checkpoint.command(REPLACING, None, 0, done=True)])
    return removed


def consistency(report: MigrateReport, workers: int, resumed: bool) -> str:
    """What moment of the source the load shows, in one sentence."""
    if report.snapshot is not None:
        text = f"one snapshot: {report.snapshot.describe()}"
    else:
        text = (
            f"per chunk: {workers} workers each read a chunk of a primary key (or a whole "
            "table) in a snapshot of its own, taken when the chunk starts, so the tables are "
            "not one moment (--workers 1 reads them all in one snapshot)"
        )
    if resumed:
        text += "; rows loaded before --resume were read in the earlier run's snapshot"
    return text


def rerun_note(m: Mapping, earlier: dict[str, TableState], resolved: list[Resolved]) -> str:
    complete = all(earlier.get(r.name) is not None and earlier[r.name].done for r in resolved)
    name = m.file or "MAPPING"
    return (
        f"Redis held {'a complete' if complete else 'an'} earlier run of this mapping: what "
        "changed in MySQL since was overwritten, but removals are not applied (keys of "
        "deleted rows, old unique entries, index, set and sorted-set members that moved "
        f"stay). Remove them with 'migrator verify {name} --fix', or reload with "
        f"'migrator migrate {name} --replace'."
    )


def recover(
    client: Client,
    checkpoint: Checkpoint,
    guard: Guard,
    run: dict[str, Any],
    policy: Retries,
    replace: bool = False,
) -> tuple[dict[str, TableState], str]:
    """After the target lost data: wait for it, then continue from what it still holds
    (a ``--replace`` run that starts over records its removal again)."""
    guard.armed = False  # the next connections are expected to meet the new server

    def reconcile() -> tuple[dict[str, TableState], str]:
        states, what = checkpoint.reconcile(run, replace)
        guard.run_id = run_id(client)
        return states, what

    try:
        return Retrying(policy).call(reconcile, transient, "Redis")
    finally:
        guard.armed = True


def partial(e: MigratorError, again: str) -> MigratorError:
    """The same error, saying that Redis now holds part of the load and how to go on."""
    then = f"Redis holds the batches written before it (checkpointed); once fixed: {again}"
    return type(e)(e.message, f"{e.hint}; {then}" if e.hint else then)
