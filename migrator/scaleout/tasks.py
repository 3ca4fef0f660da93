"""A table's load as *tasks*, and one task run.

A task reads a primary-key range in batches, packs each batch straight to Redis protocol
(``TablePlan.pack``) and hands it to a ``PackedWriter`` thread; its progress is checkpointed in
the field ``task.field``. With one worker, or a key MySQL does not keep unique, a table is one
task whose field is the table's own name (the classic checkpoint), read in the caller's
snapshot. With N workers, the table is cut into chunks of about ``chunk_rows`` rows along its
primary key (source/chunks.py), fields ``<table>#range:<n>`` whose state holds the chunk's last
key (``until``), all registered before any row is written, so that ``--resume`` finds the same
chunks again whatever ``--workers`` it gets. The last chunk ends at the key's maximum as of the
plan: rows inserted later are ``sync``'s business. (A checkpoint of an older migrator, with
fields ``<table>#range:<after>:<until>`` and an open-ended last one, is resumed as recorded.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from migrator.mapping.model import Retries
from migrator.mapping.resolve import Resolved
from migrator.plan.owners import owners_of
from migrator.plan.planner import Stats, TablePlan
from migrator.plan.stream import snapshot_entries, with_entries
from migrator.retry import Retrying
from migrator.source.chunks import CHUNK_ROWS, Chunk, plan_chunks
from migrator.source.mysql import Source
from migrator.source.selects import keyset_value, selector_of
from migrator.source.where import read_clause
from migrator.store.checkpoint import Checkpoint, TableState
from migrator.store.claims import Claims
from migrator.store.cluster_sink import sink_for, writer_for
from migrator.store.sink import Client

RANGE = "#range:"


@dataclass(frozen=True)
class Task:
    resolved: Resolved
    field: str  # checkpoint field: the table's name, or <table>#range:<chunk number>
    after: tuple[bytes, ...] | None  # raw primary-key text to start after
    until: tuple[bytes, ...] | None  # raw primary key the chunk ends with (None: the table's)
    rows: int  # rows already done (resume)
    source: str
    target: str
    mapping: str
    batch_size: int
    snapshot: bool  # read in a snapshot of its own (with N workers), else in the caller's
    retries: Retries
    token: str | None  # the run's marker (store/guard.py)
    run_id: str  # the target server's run_id when the tasks were made ("" unknown)
    chunk_rows: int = CHUNK_ROWS  # rows per chunk when a table is planned (source/chunks.py)
    #: the table's stream takes a ``snapshot`` entry per row (one worker: the caller's
    #: snapshot, whose position the entries carry; plan/stream.py)
    stream_snapshot: bool = False

    @property
    def split(self) -> bool:
        return self.field != self.resolved.name


def run_task(
    task: Task,
    src: Source,
    client: Client,
    report: Callable[[int], None],
    note: Callable[[str], None],
    stop: threading.Event | None = None,
) -> Stats:
    """Load one task's rows; returns what they amounted to. ``note`` hears each retry."""
    resolved = task.resolved
    plan = TablePlan(resolved)
    selector = selector_of(resolved.schema, plan.row_names)
    pk = resolved.primary_key
    kinds = [resolved.schema.column(c).kind for c in pk]
    after = None if task.after is None else [keyset_value(v, k) for v, k in zip(task.after, kinds)]
    until = None if task.until is None else [keyset_value(v, k) for v, k in zip(task.until, kinds)]
    checkpoint = Checkpoint(client, task.mapping, task.token)
    retrying = Retrying(task.retries, note, stop)
    if task.snapshot:  # a KILL as it starts is retried like one while reading
        src.retrying = retrying
        snapshot_of(src, resolved.name)
    writer = writer_for(client, retrying)
    entries = snapshot_entries(plan) if task.stream_snapshot else None
    if entries is not None and task.after is None and not task.rows:  # the table from its start
        entries.at(*_position(src))
        sink_for(client, retrying).write([entries.truncate()])
    done, total = task.rows, Stats()
    owners = owners_of(plan)  # a shard's rows: claimed first (store/claims.py)
    claims = None if owners is None else Claims(plan, owners, client)
    batches = src.batches(
        resolved.name, selector, pk, task.batch_size, after=after, until=until,
        retrying=retrying, where=read_clause(resolved),
    )  # fmt: skip
    try:
        for read in batches:
            rows = read if claims is None else claims.keep(read, total, retrying)
            payload, count, stats = writer.pack(plan, rows)
            if entries is not None:  # as of the snapshot the rows are read in (taken again
                entries.at(*_position(src))  # after a lost connection)
                payload, count = with_entries(payload, count, entries.of(plan.written(rows)))
            done += len(read)
            mark = checkpoint.command(task.field, read[-1][: len(pk)], done, until=task.until)
            writer.put(payload, count, mark)
            total.add(stats)
            total.readers[src.reader] += len(read)
            report(len(read))
    except BaseException:
        with suppress(Exception):  # end the read while its connection is still open
            batches.close()
        try:
            writer.close()
        except Exception:  # the first error is the one to report
            pass
        raise
    last = [c for c in [writer.close()] if c is not None]
    if task.split:
        last.append(checkpoint.command(task.field, None, done, done=True, until=task.until))
    if last:
        sink_for(client, retrying).write(last)
    return total


def _position(src: Source) -> tuple[str, int, str | None, str]:
    """The binary-log position, GTID state and moment of the snapshot ``src`` reads in (the
    caller refused a load without one: commands/migrate.py)."""
    at = src.taken
    assert at is not None and at.binlog_file is not None and at.binlog_position is not None
    return at.binlog_file, at.binlog_position, at.gtid, at.moment


def snapshot_of(src: Source, table: str) -> None:
    """A snapshot of its own for reading ``table`` (N workers); retried as ``src.retrying``
    says, each retry noted like one while reading the table."""
    src.snapshot(f"reading {table} from MySQL (starting its snapshot)")


def tasks_for(
    src: Source,
    resolved: Resolved,
    states: dict[str, TableState],
    workers: int,
    common: dict[str, Any],
) -> tuple[list[Task], int]:
    """A table's tasks, resuming from ``states`` (whatever ``workers`` is: the chunks a
    run recorded are the table's chunks); and the rows done before."""
    name = resolved.name
    chunks = {f: s for f, s in states.items() if f.startswith(name + RANGE)}
    if chunks:
        tasks = []
        for f, s in chunks.items():
            if not s.done:
                tasks.append(Task(resolved, f, s.after, s.until or _legacy_until(f), s.rows,
                                  **common))  # fmt: skip
        return tasks, sum(s.rows for s in chunks.values())
    state = states.get(name)
    if state is not None:
        return [Task(resolved, name, state.after, None, state.rows, **common)], state.rows
    planned = _chunks(src, resolved, workers, common["chunk_rows"])
    if len(planned) < 2:  # one chunk: the table's own task and field, as with one worker
        return [Task(resolved, name, None, None, 0, **common)], 0
    width = len(str(len(planned) - 1))
    tasks = [
        Task(resolved, f"{name}{RANGE}{i:0{width}d}", c.after, c.until, 0, **common)
        for i, c in enumerate(planned)
    ]
    return tasks, 0


def _legacy_until(field: str) -> tuple[bytes, ...] | None:
    """The last key of a range recorded by an older migrator (``<table>#range:<after>:<until>``
    of a single integer key; the last range had no upper bound)."""
    rest = field.split(RANGE, 1)[1]
    bound = rest.rsplit(":", 1)[1] if ":" in rest else ""
    return (bound.encode(),) if bound else None


def _chunks(src: Source, resolved: Resolved, workers: int, chunk_rows: int) -> list[Chunk]:
    """The table's chunks (source/chunks.py), or [] to load it as one task: with one worker
    (every table in the caller's snapshot), or a key MySQL does not index as unique and
    non-NULL (a declared key: seeking along it would scan the table)."""
    pk = [resolved.schema.column(c) for c in resolved.primary_key]
    if workers < 2 or resolved.trusts_declared_key or any(c.nullable for c in pk):
        return []
    return plan_chunks(src, resolved.name, pk, chunk_rows, resolved.schema.row_estimate)
