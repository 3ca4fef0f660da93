"""migrate's per-table loop, and ``--workers``: chunks of a table loaded side by side.

A table is loaded as one or more tasks (scaleout/tasks.py: one per chunk of its primary key
with N workers, resumed as the checkpoint recorded them). Tasks of all tables run in a pool
(scaleout/pool.py: N-1 spawned processes plus a thread of this process, or a Dask cluster's).
When a table's tasks are all done, its counter and latest lists are rebuilt once, and the table
is marked done. How many workers a run gets by default is decided here too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from migrator.mapping.resolve import Resolved
from migrator.plan.finish import EndReader, finish_commands
from migrator.plan.planner import Stats, TablePlan
from migrator.progress import Progress
from migrator.reports import TableReport
from migrator.retry import Retrying
from migrator.scaleout.pool import Pool, run_all
from migrator.scaleout.tasks import RANGE, Task, snapshot_of, tasks_for
from migrator.source.mysql import Source
from migrator.source.shared import shared_values
from migrator.source.where import clause
from migrator.store.checkpoint import Checkpoint, TableState
from migrator.store.cluster_sink import sink_for
from migrator.store.sink import Client

ENDING_WRITES = (b"SET", b"RPUSH")  # the table's counter and latest lists (finish_commands)


#: below this many rows (estimated) in all, starting worker processes costs more than it saves
PARALLEL_FROM_ROWS = 200_000
#: at most this many CPUs, MySQL and Redis need them all: one process loads fastest
#: (benchmarks/RESULTS.md: on 2 CPUs --workers 2 is slower than 1 and takes twice the memory)
SERIAL_UP_TO_CPUS = 2


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, which containers narrow)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_workers(rows: int | None = None, cpus: int | None = None) -> int:
    """1 on machines of up to SERIAL_UP_TO_CPUS CPUs, or when the tables hold fewer than
    PARALLEL_FROM_ROWS rows in all; else min(4, CPUs) (the work is split with MySQL and
    Redis, which need cores of their own)."""
    cpus = cpus or usable_cpus()
    if cpus <= SERIAL_UP_TO_CPUS or (rows is not None and rows < PARALLEL_FROM_ROWS):
        return 1
    return min(4, cpus)


def load_tables(
    src: Source,
    client: Client,
    checkpoint: Checkpoint,
    resolved: list[Resolved],
    states: dict[str, TableState],
    progress: Progress,
    workers: int,
    common: dict[str, Any],
    engine: Callable[[], Any] | None = None,
    ends: EndReader | None = None,
) -> list[TableReport]:
    """migrate's loop: every table's tasks on a pool of ``workers`` (or on the pool
    ``engine`` makes: a Dask cluster's, scaleout/dask_tasks.py), then each table's counter and
    latest lists, once all its chunks are done (``ends``: read from there, every shard of a
    sharded source: source/shards.py; default ``src``)."""
    reports = {r.name: TableReport(r.name) for r in resolved}
    by_name = {r.name: r for r in resolved}
    left: dict[str, int] = {}
    totals: dict[str, Stats] = {}
    started: dict[str, float] = {}
    tasks: list[Task] = []

    def note(name: str, text: str) -> None:
        reports[name].retries += 1
        progress.note(name, text)

    def retrying(name: str) -> Retrying:
        return Retrying(common["retries"], lambda text: note(name, text))

    def sink(name: str) -> Any:
        return sink_for(client, retrying(name))

    def finish(name: str) -> None:
        r, report, total = by_name[name], reports[name], totals[name]
        rows = report.resumed_from + total.rows
        src.retrying = retrying(name)  # the counter and latest queries
        if common["snapshot"]:  # N workers: the end of the table as of now
            snapshot_of(src, name)
        commands = finish_commands(ends or src, TablePlan(r), r, clause(r))
        sink(name).write([*commands, checkpoint.command(name, None, rows, done=True)])
        report.keys = total.all_keys + len({c[1] for c in commands if c[0] in ENDING_WRITES})
        report.rows, report.entries = total.rows, total.entries
        report.skipped, report.rejected = dict(total.skipped), dict(total.rejected)
        if r.trusts_declared_key:
            pk = [r.schema.column(c) for c in r.primary_key]
            report.duplicate_keys, report.duplicate_rows = src.shared_keys(name, pk, clause(r))
            if r.table.kind == "hash":  # a row sharing a key overwrote a hash: no new key
                report.keys -= report.duplicate_rows
        report.shared = shared_values(src, r)  # a unique: value several rows hold
        report.rejects = list(total.rejects)
        report.readers = dict(total.readers)
        report.seconds = time.perf_counter() - started.get(name, time.perf_counter())
        progress.finish(name)

    for r in resolved:
        name, report = r.name, reports[r.name]
        state = states.get(name)
        if state is not None and state.done:
            report.status, report.resumed_from = "done earlier", state.rows
            continue
        own = {f: s for f, s in states.items() if f == name or f.startswith(name + RANGE)}
        table_tasks, report.resumed_from = tasks_for(src, r, own, workers, common)
        if not own and any(t.split for t in table_tasks):  # register the ranges first
            sink(name).write(
                [checkpoint.command(t.field, t.after, 0, until=t.until) for t in table_tasks]
            )
        progress.start(name, r.schema.row_estimate or None)
        if report.resumed_from:
            progress.advance(name, report.resumed_from)
        left[name], totals[name] = len(table_tasks), Stats()
        tasks += table_tasks
        if not table_tasks:  # every range was done; only the table's end is missing
            finish(name)

    def on_done(task: Task, stats: Stats) -> None:
        name = task.resolved.name
        totals[name].add(stats)
        left[name] -= 1
        if left[name] == 0:
            finish(name)

    if tasks:
        shared = None if common["snapshot"] else src
        pool = (
            engine() if engine else Pool(min(workers, len(tasks)), common["source"], client, shared)
        )
        run_all(
            pool, tasks, progress.advance, on_done,
            on_start=lambda task: started.setdefault(task.resolved.name, time.perf_counter()),
            note=note,
        )  # fmt: skip
    return [reports[r.name] for r in resolved]
