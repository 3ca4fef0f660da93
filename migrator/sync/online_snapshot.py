"""Online, lock-free, resumable snapshots of single tables while ``sync`` follows the log.

A table waiting for (or in) its snapshot is read in primary-key chunks between the follow
loop's groups, with no transaction held longer than one chunk's ``SELECT``; the rest of the
mapping keeps following. The result is exact by the method of Flink CDC's incremental
snapshot and Netflix's DBLog, without a watermark table (the tool never writes to MySQL):

1. **Arm** at applied position P (everything up to P is in Redis): from now on, the primary
   key of every row change of the table is remembered (``seen``).
2. **Read** at the next step: ``SELECT ... WHERE pk > done ORDER BY pk LIMIT chunk_rows`` in
   a transaction of its own, then the log's head H (``SHOW BINARY LOG STATUS``). Whatever the
   read saw was committed to the log before H; whatever was in the log up to P is in it
   (MariaDB: the consistent snapshot's own log position is H; MySQL, which logs a transaction
   before it makes it visible: the read begins only once the executed GTID set of the applied
   position is committed, ``WAIT_FOR_EXECUTED_GTID_SET``).
3. **Flush** once the applied position passes H: the chunk's rows are written as ``migrate``
   writes them (same packer), except those whose key changed since P — the log already
   wrote their newer image (or removed them). Then ``done`` = the chunk's last key, stored
   with the position in one atomic write.

While a table is queued or in its snapshot, each of its row changes is applied as a
*replacement* (the before-image's entries removed, the after-image written whole: the log
carries full images), never as a field delta, so a row the snapshot has not reached yet is
never half-written. A chunk's rows are at least as new as the applied position once it passes
H, so writing them then is exact; a crash anywhere replays the log from the stored position
over newer rows, which converges (docs/sync.md).

With change streams asked to take the first load's rows (``streams: {snapshot: true}``), each
row a chunk of the first run's load writes gets a ``snapshot`` entry (plan/stream.py), appended
in the MULTI/EXEC that stores the chunk's progress with the position (``entries``): a chunk read
again after a crash appends nothing twice. Re-snapshots of single tables append none (the log's
changes of the table are appended meanwhile, so a consumer's copy stays exact).

Progress lives in the state hash's ``snapshot`` field (JSON: the queue of tables, the current
table's last key, chunk number, estimated chunks, rows): ``kill -9`` resumes at the chunk it
was at. Counters and latest lists are rebuilt after a table's last chunk (plan/finish.py).
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from migrator.errors import MigratorError, TableChanged
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Command, Row, Stats
from migrator.plan.finish import finish_commands
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import TablePlan
from migrator.plan.stream import ChangeStream
from migrator.progress import NULL_PROGRESS, Progress
from migrator.reports import TableReport
from migrator.retry import Retrying, Stopped
from migrator.source.binlog.reader import BinlogPosition, Change
from migrator.source.binlog.reconnect import surfaced
from migrator.source.binlog.settings import log_status
from migrator.source.mysql import Source
from migrator.source.selects import RawRow, keyset_value, selector_of
from migrator.source.snapshot import is_mariadb, start_snapshot, wait_visible
from migrator.source.where import clause, read_clause
from migrator.store.cluster_sink import Writer, sink_for, writer_for
from migrator.store.keys import remove_owned
from migrator.sync.shard_rows import ShardRows
from migrator.sync.shards import shard_ends
from migrator.sync.snapshot_queue import (
    FIELD,
    FIRST_RUN,
    Pending,
    dump_queue,
)

#: default rows per chunk (``sync --chunk-rows``)
SNAPSHOT_CHUNK_ROWS = 50_000
#: a chunk read again this many times when its table changes under its read view each time
_CHANGED_RETRIES = 5

Key = tuple[bytes | None, ...]


def _passed(applied: BinlogPosition, head: BinlogPosition) -> bool:
    return (applied.file, applied.pos) >= (head.file, head.pos)


@dataclass
class _Chunk:
    rows: list[RawRow]  # the rows to write at the flush (none when ``written``)
    head: BinlogPosition  # H: flushed once the applied position passes it
    last: bool  # fewer rows than asked: the table's end
    count: int = 0  # rows read
    tail: RawRow | None = None  # the last row read (its key is the next chunk's start)
    written: bool = False  # written while read (nothing was logged since the arm)


@dataclass
class Snapshots:
    """The engine: the queue of tables to snapshot and the current chunk (see the module
    docstring). ``step`` is called by the follow loop between groups; it returns True when
    the progress changed and must be stored with the position."""

    src: Source
    client: Any
    mapping: Mapping
    resolved: dict[str, Resolved]
    plans: dict[str, TablePlan]
    queue: list[Pending]
    chunk_rows: int = SNAPSHOT_CHUNK_ROWS
    retrying: Retrying | None = None
    on_done: Callable[[TableReport, Pending], None] | None = None
    # per table started, chunk flushed (its rows) and table done: the first load's tables
    # to ``loading`` (the bars, and the figures), the others to ``others`` (the figures)
    loading: Progress = NULL_PROGRESS
    others: Progress = NULL_PROGRESS
    armed: bool = False
    seen: set[Key] = field(default_factory=set)
    chunk: _Chunk | None = None
    stats: Stats = field(default_factory=Stats)
    readers: Counter[str] = field(default_factory=Counter)  # rows per driver that read them
    started: float | None = None  # when this run began the current table (monotonic)
    mariadb: bool | None = None  # the source's kind, asked once
    writer: Writer | None = None  # a flush's writes in flight (see step)
    #: Ctrl-C or SIGTERM: acted on between two pages of a removal or of a chunk's read and
    #: before a table's end-of-table writes (``Stopped``; the stored progress is where the
    #: next run resumes)
    stop: threading.Event | None = None
    #: the change streams that take the first load's rows (plan/stream.py snapshot_streams)
    streams: dict[str, ChangeStream] = field(default_factory=dict)
    #: the rows written since the progress was last stored, each with its stream (``entries``)
    snapped: list[tuple[ChangeStream, Row]] = field(default_factory=list)
    #: the shard this sync follows (sync/shards.py): it removes no other shard's keys and
    #: raises the counters it finishes; ``claims``: its rows' primary keys claimed, those
    #: another shard owns left out (sync/shard_rows.py)
    shard: str = ""
    claims: ShardRows | None = None

    # -- what the follow loop asks ---------------------------------------------------------
    def observe(self, change: Change) -> None:
        """A row change of a replaced table, in log order: its keys are newer than a chunk
        read after the arm, so the chunk's copy of them is dropped at flush."""
        if self.armed and self.queue and change.table == self.queue[0].table:
            npk = len(self.resolved[change.table].primary_key)
            for row in (change.before, change.after):
                if row is not None:
                    self.seen.add(tuple(row[:npk]))

    def add(self, table: str, reason: str) -> bool:
        """Queue ``table`` (its keys are removed when its turn comes); False when it already
        waits (a snapshot under way starts again from its first chunk)."""
        if table not in self.plans:
            raise MigratorError(
                f"cannot re-snapshot table '{table}': the mapping does not name it",
                f"name one of: {', '.join(sorted(self.plans))}",
            )
        for i, p in enumerate(self.queue):
            if p.table == table:
                if i == 0:
                    self._restart(p, reason)
                return False
        self.queue.append(Pending(table, reason))
        return True

    def discard(self, table: str) -> None:
        """A DDL of ``table`` (a TRUNCATE...): a chunk of it read before the statement and not
        yet written is dropped, and read again after it."""
        if self.queue and self.queue[0].table == table and self.writer is None:
            self.chunk, self.armed, self.seen = None, False, set()

    def fields(self) -> dict[str, str]:
        return {FIELD: dump_queue(self.queue)}

    def entries(self, at: BinlogPosition) -> list[Command]:
        """The ``snapshot`` entries of the rows written since the progress was last stored,
        as of the applied position ``at`` (stored with them), taken once."""
        snapped, self.snapped = self.snapped, []
        if not snapped:
            return []
        pos, gtid, ts = f"{at.file}:{at.pos}".encode(), at.gtid.encode(), int(time.time())
        return [stream.snapshot_entry(row, pos, gtid, ts) for stream, row in snapped]

    def first_load(self) -> bool:
        """Whether tables of the first run's online load are still queued."""
        return any(p.reason == FIRST_RUN for p in self.queue)

    def _bar(self, p: Pending) -> Progress:
        return self.loading if p.reason == FIRST_RUN else self.others

    def progress(self) -> dict[str, Any] | None:
        if not self.queue:
            return None
        p = self.queue[0]
        return {
            "table": p.table,
            "chunk": p.chunk,
            "chunks": max(p.chunks, p.chunk),
            "rows": p.rows,
            "waiting": [q.table for q in self.queue[1:]],
        }

    def step(self, applied: BinlogPosition) -> bool:
        """One step of the current table's snapshot at ``applied`` (everything up to it is in
        Redis): the clear of its keys, the flush of the chunk read when ``applied`` passed its
        head, and at most one read (flushed at once when nothing was logged meanwhile). A
        flush's writes overlap the next read and are acknowledged before this returns (no
        group is applied meanwhile, so no newer change can land before them). True when the
        progress changed and must be stored with the position."""
        if not self.queue:
            return False
        self.snapped = []  # (a step that wrote rows returned True: its entries are stored)
        try:
            return self._step(applied)
        finally:
            self._drain()

    def _step(self, applied: BinlogPosition) -> bool:
        p = self.queue[0]
        changed = False
        if self.started is None:
            self.started = time.monotonic()
            estimate = self.resolved[p.table].schema.row_estimate
            self._bar(p).start(p.table, estimate or None)
        if not p.cleared:
            self._clear(p)
            changed = True
        if self.chunk is not None:
            if not _passed(applied, self.chunk.head):
                return changed
            self._flush(p, self.chunk)
            if not self.queue or not self.queue[0].cleared:
                return True  # the next table starts at the next step
            p, changed = self.queue[0], True
        if not self.armed:
            self.armed, self.seen = True, set()
            if not self._exact():
                return changed  # read at the next step (see _read)
        self.chunk = self._read(p, applied)
        if _passed(applied, self.chunk.head):
            self._flush(p, self.chunk)
            changed = True
        return changed

    # -- the steps ---------------------------------------------------------------------------
    def _restart(self, p: Pending, reason: str) -> None:
        self.snapped = []
        p.reason, p.after, p.chunk, p.rows, p.cleared = reason, None, 0, 0, False
        self.chunk, self.armed, self.seen, self.started = None, False, set(), None

    def _clear(self, p: Pending) -> None:
        """The table's old keys removed before its first chunk (again after a crash: the
        chunks read after this see every row the log wrote meanwhile). One shard's sync
        removes none: the table's keys hold the other shards' rows too (sync/shards.py)."""
        space = KeySpace(list(self.plans.values()), self.mapping.kept())
        bar, said = self._bar(p), [0.0]

        def removing(n: int) -> None:
            if time.monotonic() - said[0] >= 1.0:
                said[0] = time.monotonic()
                bar.note(p.table, f"removing its old keys: {n:,} removed")

        if not self.shard:
            remove_owned(self.client, space, [p.table], retrying=self.retrying,
                         stop=self.stop, removing=removing)  # fmt: skip
        r = self.resolved[p.table]
        estimate = r.schema.row_estimate or 0
        p.cleared, p.chunk, p.rows, p.after = True, 0, 0, None
        p.chunks = max(1, math.ceil(estimate / self.chunk_rows))
        self.stats, self.readers = Stats(), Counter()

    def _exact(self) -> bool:
        """MariaDB gives the log position of a consistent snapshot (``binlog_snapshot_*``):
        a chunk read in one is exactly the source at that position. Elsewhere the read view
        is only known to lie between the applied position and the log's end read after it."""
        if self.mariadb is None:  # (the connection opened inside the retries' reach too)
            self.mariadb = surfaced(lambda: is_mariadb(self.src.raw_connection()),
                                    "asking the server's kind", self.src.close)  # fmt: skip
        return self.mariadb

    def _read(self, p: Pending, applied: BinlogPosition) -> _Chunk:
        """The chunk after ``p.after`` and its head H. MariaDB: read inside a consistent
        snapshot whose log position is H; when that is ``applied`` (nothing logged since),
        the rows are exact already and are written as they stream in, as migrate writes.
        Else (MySQL): wait until every transaction up to the applied position (its executed
        GTID set) is committed in the engine — MySQL logs a transaction before it makes it
        visible — then read in a fresh read view, then H = the log's end (docs/sync.md)."""
        src = self.src
        plan = self.plans[p.table]

        def read() -> _Chunk:
            conn = src.raw_connection()
            if self._exact():
                snap = start_snapshot(conn)
                if snap.binlog_file is None or snap.binlog_position is None:
                    raise MigratorError("the source's binary log is off", "sync needs log_bin=ON")
                at = BinlogPosition(snap.binlog_file, snap.binlog_position)
                if _passed(applied, at):  # nothing logged since: write while reading
                    count, tail = self._select(p, lambda rows: self._write(plan, rows))
                    return _Chunk([], at, count < self.chunk_rows, count, tail, written=True)
                rows: list[RawRow] = []
                count, tail = self._select(p, rows.extend)
                return _Chunk(rows, at, count < self.chunk_rows, count, tail)
            # every transaction up to the applied position visible, then a fresh read view,
            # held no longer than this chunk's statements
            wait_visible(conn, applied.gtid)
            rows = []
            count, tail = self._select(p, rows.extend)
            head = log_status(conn)
            if head is None:
                raise MigratorError("the source's binary log is off", "sync needs log_bin=ON")
            return _Chunk(rows, BinlogPosition(*head), count < self.chunk_rows, count, tail)

        for attempt in range(_CHANGED_RETRIES, -1, -1):
            try:
                return surfaced(read, f"reading a chunk of {p.table}", src.close)
            except TableChanged:  # a TRUNCATE or ALTER after the read view began
                if not attempt:
                    raise
                with suppress(Exception):
                    src.raw_connection().rollback()  # the next read view sees the change
        raise AssertionError("unreachable")

    def _select(
        self, p: Pending, take: Callable[[list[RawRow]], object]
    ) -> tuple[int, RawRow | None]:
        """The chunk after ``p.after``, one keyset page handed to ``take`` batch by batch; the
        read view ends after it. Returns the rows read and the last one."""
        r = self.resolved[p.table]
        plan = self.plans[p.table]
        selector = selector_of(r.schema, plan.row_names)
        after = None
        if p.after is not None:
            kinds = [r.schema.column(c).kind for c in r.primary_key]
            after = [keyset_value(bytes.fromhex(v), k) for v, k in zip(p.after, kinds)]
        conn = self.src.raw_connection()
        driver = self.src.reader
        count, tail = 0, None
        pages = self.src.batches(
            p.table, selector, r.primary_key, self.mapping.options.batch_size, after=after,
            page_size=self.chunk_rows, where=read_clause(r),
        )  # fmt: skip
        try:
            for rows in pages:
                self._stopping(f"reading a chunk of {p.table}")
                take(rows)
                count, tail = count + len(rows), rows[-1]
                self.readers[driver] += len(rows)
                if count >= self.chunk_rows:
                    break
        finally:
            pages.close()
            with suppress(Exception):
                conn.rollback()
        return count, tail

    def _write(self, plan: TablePlan, rows: Sequence[Row]) -> None:
        """Rows packed and queued to the background writer (acknowledged by ``_drain``)."""
        if not rows:
            return
        if self.writer is None:
            self.writer = writer_for(self.client, self.retrying)
        stream = self.streams.get(plan.table.name)
        if stream is not None and self.queue[0].reason == FIRST_RUN:
            self.snapped += [(stream, row) for row in plan.written(rows)]
        size = self.mapping.options.batch_size
        for i in range(0, len(rows), size):
            payload, count, stats = self.writer.pack(plan, rows[i : i + size])
            self.writer.put(payload, count)
            self.stats.add(stats)

    def _flush(self, p: Pending, chunk: _Chunk) -> None:
        plan, r = self.plans[p.table], self.resolved[p.table]
        npk = len(r.primary_key)
        if not chunk.written:
            seen = self.seen
            rows = [row for row in chunk.rows if tuple(row[:npk]) not in seen]
            claims = self.claims
            self._write(plan, rows if claims is None else claims.rows(p.table, rows))
        if chunk.tail is not None:
            p.after = [(v or b"").hex() for v in chunk.tail[:npk]]
        p.chunk += 1
        p.chunks = max(p.chunks, p.chunk + (0 if chunk.last else 1))
        p.rows += chunk.count
        self._bar(p).advance(p.table, chunk.count)
        self.chunk, self.armed, self.seen = None, False, set()
        if chunk.last:
            self._finish(p)

    def _stopping(self, where: str) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Stopped(f"stopped {where}")

    def _drain(self) -> None:
        """Wait until the chunk's writes are acknowledged (a writer error is raised here)."""
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.close()

    def _finish(self, p: Pending) -> None:
        """After the last chunk: counters and latest lists, as migrate finishes a table."""
        self._drain()
        self._stopping(f"before the end-of-table writes of {p.table}")
        plan, r = self.plans[p.table], self.resolved[p.table]
        commands = surfaced(lambda: finish_commands(self.src, plan, r, clause(r)),
                            f"finishing {p.table}", self.src.close)  # fmt: skip
        with suppress(Exception):
            self.src.raw_connection().rollback()
        if self.shard:  # counters raised, latest lists merged over the shards
            commands = shard_ends(self.client, self.src, plan, commands, self.shard, self.mapping)
        sink_for(self.client, self.retrying).write(commands)
        self.queue.pop(0)
        self._bar(p).finish(p.table)
        if self.on_done is not None:
            s = self.stats
            report = TableReport(
                p.table, rows=p.rows, keys=s.keys, entries=s.entries, skipped=dict(s.skipped),
                rejected=dict(s.rejected), seconds=time.monotonic() - (self.started or 0.0),
                status=p.reason, readers=dict(self.readers),
            )  # fmt: skip
            self.on_done(report, p)
        self.stats, self.readers, self.started = Stats(), Counter(), None
