"""migrate's per-table loop, and ``--workers``: chunks of a table loaded side by side.

A table is loaded as one or more *tasks*. A task reads a primary-key range in batches,
packs each batch straight to Redis protocol (``TablePlan.pack``) and hands it to a
``PackedWriter`` thread; its progress is checkpointed in the field ``task.field``. With one
worker, or a key MySQL does not keep unique, a table is one task whose field is the table's
own name (the classic checkpoint), read in the caller's snapshot. With N workers, the table
is cut into chunks of about ``chunk_rows`` rows along its primary key (source/chunks.py),
fields ``<table>#range:<n>`` whose state holds the chunk's last key (``until``), all
registered before any row is written, so that ``--resume`` finds the same chunks again
whatever ``--workers`` it gets. The last chunk ends at the key's maximum as of the plan: rows
inserted later are ``sync``'s business. (A checkpoint of an older migrator, with fields
``<table>#range:<after>:<until>`` and an open-ended last one, is resumed as recorded.)
Tasks of all tables run in a pool: N-1 spawned processes plus a thread of this process. When
a table's tasks are all done, its counter and latest lists are rebuilt once, and the table is
marked done.

Worker processes die with their parent: on Linux the kernel sends them SIGKILL when it dies
(``PR_SET_PDEATHSIG``), elsewhere a watchdog thread sees the parent pid change; on Ctrl-C,
SIGTERM or an error the parent terminates them (their writes are idempotent and a batch is
checkpointed only once acknowledged, so a killed worker loses nothing ``--resume`` needs).
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from migrator import lifeline
from migrator.mapping.model import Retries
from migrator.mapping.resolve import Resolved
from migrator.plan.finish import finish_commands
from migrator.plan.planner import Stats, TablePlan
from migrator.plan.values import converter
from migrator.progress import Progress
from migrator.reports import TableReport
from migrator.retry import Retrying
from migrator.source.chunks import CHUNK_ROWS, Chunk, plan_chunks
from migrator.source.mysql import Source
from migrator.source.selects import Selector, keyset_value
from migrator.source.shared import shared_values
from migrator.source.where import clause
from migrator.store.checkpoint import Checkpoint, TableState, checkpoint_key
from migrator.store.cluster import connect_any
from migrator.store.cluster_sink import sink_for, writer_for
from migrator.store.guard import Guard
from migrator.store.sink import Client, retry

RANGE = "#range:"
ENDING_WRITES = (b"SET", b"RPUSH")  # the table's counter and latest lists (finish_commands)


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
    cols = tuple(resolved.schema.column(n) for n in plan.select)
    selector = Selector(plan.select, cols, tuple(converter(c.kind) for c in cols))
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
    done, total = task.rows, Stats()
    batches = src.batches(
        resolved.name, selector, pk, task.batch_size, after=after, until=until,
        retrying=retrying, where=clause(resolved),
    )  # fmt: skip
    try:
        for rows in batches:
            payload, count, stats = writer.pack(plan, rows)
            done += len(rows)
            mark = checkpoint.command(task.field, rows[-1][: len(pk)], done, until=task.until)
            writer.put(payload, count, mark)
            total.add(stats)
            total.readers[src.reader] += len(rows)
            report(len(rows))
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


# -- running tasks: in this process, or in spawned worker processes -----------------------------
_OPEN: dict[str, Any] = {}


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore Ctrl-C while worker processes are started (they inherit the disposition, so
    they never print their own KeyboardInterrupt tracebacks; the parent stops them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _in_worker(task: Task) -> Stats:
    name = task.resolved.name

    def note(text: str) -> None:
        lifeline.progress.put((name, text))

    src, client = connections(task, _OPEN, note)
    return run_task(task, src, client, lambda n: lifeline.progress.put((name, n)), note)


def connections(
    task: Task, cache: dict[str, Any], note: Callable[[str], None]
) -> tuple[Source, Client]:
    """The source and the guarded target a worker runs ``task`` with, opened once per
    ``cache`` (a worker process's, or a Dask worker thread's) and run: a Dask worker outlives
    a run, and a client guarded by an earlier run's marker would refuse to reconnect."""
    src = cache.get(task.source)
    if src is None:
        src = cache[task.source] = Source(task.source)
    token, client = cache.get(task.target, (None, None))
    if client is not None and token != task.token:
        with suppress(Exception):
            client.close()
        client = None
    if client is None:
        # a target restarting as this worker starts refuses connections for a while: retried
        retrying = Retrying(task.retries, note)
        client = connect_any(task.target, retrying=retrying)
        if task.token is not None:
            guard = Guard(checkpoint_key(task.mapping), task.token, task.run_id)
            retry(lambda: guard.attach(client), retrying=retrying)
        cache[task.target] = (task.token, client)
    return src, client


class Pool:
    """``workers`` slots: one thread of this process and ``workers - 1`` spawned processes."""

    def __init__(
        self, workers: int, source: str, client: Client, shared: Source | None = None
    ) -> None:
        """``shared``: the source the local slot reads with (one worker: the caller's, so that
        every table is read in the caller's snapshot); else it opens its own."""
        ctx = lifeline.spawn_context()
        self.progress: Any = ctx.Queue() if workers > 1 else queue.SimpleQueue()
        self.local = ThreadPoolExecutor(1, thread_name_prefix="migrate-task")
        self.remote = (
            ProcessPoolExecutor(
                workers - 1,
                ctx,
                initializer=lifeline.init_worker,
                initargs=(self.progress, os.getpid()),
            )
            if workers > 1
            else None
        )
        self.slots = workers - 1
        self.source_url, self.client = source, client
        self.local_source: Source | None = shared
        self.own_source = shared is None
        self.local_busy = False  # until the caller has handled the local task's end
        self.stop = threading.Event()  # asks the local thread to stop (errors, Ctrl-C)

    def submit(self, task: Task, remote_running: int) -> tuple[Future[Stats], bool] | None:
        """Start a task on a free slot: (future, whether remote), or None when all are busy."""
        if not self.local_busy:
            self.local_busy = True
            return self.local.submit(self._local, task), False
        if self.remote is not None and remote_running < self.slots:
            with _sigint_ignored():  # a worker started now inherits it: Ctrl-C is the parent's
                return self.remote.submit(_in_worker, task), True
        return None

    def _local(self, task: Task) -> Stats:
        if self.local_source is None:
            self.local_source = Source(self.source_url)
        name = task.resolved.name

        def report(n: int) -> None:
            if self.stop.is_set():
                raise InterruptedError("stopped")
            self.progress.put((name, n))

        def note(text: str) -> None:
            self.progress.put((name, text))

        return run_task(task, self.local_source, self.client, report, note, self.stop)

    def drain(self, advance: Callable[[str, int], None], note: Callable[[str, str], None],
              timeout: float) -> None:  # fmt: skip
        drain(self.progress, advance, note, timeout)

    def close(self, cancel: bool = False) -> None:
        """Wait for the tasks to end; ``cancel``: stop them now (worker processes are
        terminated, then killed if they outlive STOP_SECONDS)."""
        if cancel:
            self.stop.set()
        if self.remote is not None:
            if cancel:
                self._terminate()
            self.remote.shutdown(wait=True, cancel_futures=cancel)
        self.local.shutdown(wait=True, cancel_futures=cancel)
        if self.local_source is not None and self.own_source:
            self.local_source.close()

    def _terminate(self) -> None:
        # ProcessPoolExecutor has no public way to stop running tasks (3.14's
        # terminate_workers()); its process table is the one handle on them
        procs = list((getattr(self.remote, "_processes", None) or {}).values())
        for p in procs:
            with suppress(Exception):
                p.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                with suppress(Exception):
                    p.kill()


def drain(
    progress: Any,
    advance: Callable[[str, int], None],
    note: Callable[[str, str], None],
    timeout: float,
) -> None:
    """Hand on what tasks reported on ``progress``: rows done (int) or a retry's note (str)."""
    while True:
        try:
            name, what = progress.get(timeout=timeout) if timeout else progress.get_nowait()
        except queue.Empty:
            return
        if isinstance(what, str):
            note(name, what)
        else:
            advance(name, what)
        timeout = 0.0


#: how long terminated workers get before SIGKILL
STOP_SECONDS = 1.0


def run_all(
    pool: Any,
    tasks: list[Task],
    advance: Callable[[str, int], None],
    on_done: Callable[[Task, Stats], None],
    on_start: Callable[[Task], object] = lambda task: None,
    note: Callable[[str, str], None] = lambda table, text: None,
) -> None:
    """Run every task on the pool, reporting each start, progress, retry and finished task.
    On an error (or Ctrl-C) every other running task is stopped."""
    waiting = list(tasks)
    running: dict[Future[Stats], tuple[Task, bool]] = {}
    try:
        while waiting or running:
            while waiting:
                remote = sum(1 for _, r in running.values() if r)
                started = pool.submit(waiting[0], remote)
                if started is None:
                    break
                on_start(waiting[0])
                running[started[0]] = (waiting.pop(0), started[1])
            finished, _ = wait(list(running), timeout=0.05, return_when=FIRST_COMPLETED)
            pool.drain(advance, note, 0.0 if finished else 0.05)
            for fut in finished:
                task, remote = running.pop(fut)
                on_done(task, fut.result())
                if not remote:  # free only now: on_done may read the shared source
                    pool.local_busy = False
        pool.drain(advance, note, 0.0)
    except BaseException:
        pool.close(cancel=True)
        raise
    pool.close()


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
) -> list[TableReport]:
    """migrate's loop: every table's tasks on a pool of ``workers`` (or on the pool
    ``engine`` makes: a Dask cluster's, scaleout/dask_tasks.py), then each table's counter and
    latest lists, once all its chunks are done."""
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
        commands = finish_commands(src, TablePlan(r), r, clause(r))
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
