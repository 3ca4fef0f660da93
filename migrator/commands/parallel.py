"""migrate's per-table loop, and ``--workers``: key ranges of a table loaded side by side.

A table is loaded as one or more *tasks*. A task reads a primary-key range in batches,
packs each batch straight to Redis protocol (``TablePlan.pack``) and hands it to a
``PackedWriter`` thread; its progress is checkpointed in the field ``task.field``. With one
worker, or a key that is not a single integer column, a table is one task whose field is the
table's own name (the classic checkpoint). With N workers, a single integer key's MIN..MAX is
split into N ranges, fields ``<table>#range:<after>:<until>``, all registered before any row
is written, so that ``--resume`` finds the same ranges again whatever ``--workers`` it gets.
The last range has no upper bound (``<table>#range:<after>:``): rows inserted after the
split are loaded too.
Tasks of all tables run in a pool: N-1 spawned processes plus a thread of this process. When
a table's tasks are all done, its counter and latest lists are rebuilt once, and the table is
marked done.

Worker processes die with their parent: on Linux the kernel sends them SIGKILL when it dies
(``PR_SET_PDEATHSIG``), elsewhere a watchdog thread sees the parent pid change; on Ctrl-C,
SIGTERM or an error the parent terminates them (their writes are idempotent and a batch is
checkpointed only once acknowledged, so a killed worker loses nothing ``--resume`` needs).
"""

from __future__ import annotations

import multiprocessing
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

import sqlalchemy as sa

from migrator import lifeline
from migrator.commands.reports import TableReport
from migrator.mapping.kinds import Kind
from migrator.mapping.model import Retries
from migrator.mapping.resolve import Resolved
from migrator.plan.finish import finish_commands
from migrator.plan.planner import Stats, TablePlan
from migrator.plan.values import converter
from migrator.progress import Progress
from migrator.retry import Retrying
from migrator.source.mysql import Selector, Source, keyset_value
from migrator.target.checkpoint import Checkpoint, TableState, checkpoint_key
from migrator.target.cluster import connect_any
from migrator.target.cluster_sink import sink_for, writer_for
from migrator.target.guard import Guard
from migrator.target.sink import Client, retry

RANGE = "#range:"
ENDING_WRITES = (b"SET", b"RPUSH")  # the table's counter and latest lists (finish_commands)


@dataclass(frozen=True)
class Task:
    resolved: Resolved
    field: str  # checkpoint field: the table's name, or <table>#range:<after>:<until>
    after: tuple[bytes, ...] | None  # raw primary-key text to start after
    until: int | None  # last primary key of the range (single integer keys)
    rows: int  # rows already done (resume)
    source: str
    target: str
    mapping: str
    batch_size: int
    snapshot: bool  # read in a snapshot of its own (with N workers), else in the caller's
    retries: Retries
    token: str | None  # the run's marker (target/guard.py)
    run_id: str  # the target server's run_id when the tasks were made ("" unknown)

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
    checkpoint = Checkpoint(client, task.mapping, task.token)
    retrying = Retrying(task.retries, note, stop)
    if task.snapshot:  # a KILL as it starts is retried like one while reading
        src.retrying = retrying
        snapshot_of(src, resolved.name)
    writer = writer_for(client, retrying)
    done, total = task.rows, Stats()
    batches = src.batches(
        resolved.name, selector, pk, task.batch_size, after=after, until=task.until,
        retrying=retrying,
    )  # fmt: skip
    try:
        for rows in batches:
            payload, count, stats = writer.pack(plan, rows)
            done += len(rows)
            writer.put(payload, count, checkpoint.command(task.field, rows[-1][: len(pk)], done))
            total.add(stats)
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
        last.append(checkpoint.command(task.field, None, done, done=True))
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
    """A table's tasks, resuming from ``states``; and the rows done before."""
    name = resolved.name
    ranges = {f: s for f, s in states.items() if f.startswith(name + RANGE)}
    if ranges:
        tasks = []
        for f, s in ranges.items():
            if not s.done:
                bound = f.rsplit(":", 1)[1]
                until = int(bound) if bound else None  # the last range: open-ended
                tasks.append(Task(resolved, f, s.after, until, s.rows, **common))
        return tasks, sum(s.rows for s in ranges.values())
    state = states.get(name)
    if state is not None:
        return [Task(resolved, name, state.after, None, state.rows, **common)], state.rows
    bounds = _split(src, resolved, workers, common["batch_size"])
    if not bounds:
        return [Task(resolved, name, None, None, 0, **common)], 0
    tasks = [
        Task(resolved, f"{name}{RANGE}{a}:{'' if u is None else u}", (str(a).encode(),), u, 0,
             **common)
        for a, u in bounds
    ]  # fmt: skip
    return tasks, 0


def _split(
    src: Source, resolved: Resolved, workers: int, batch_size: int
) -> list[tuple[int, int | None]]:
    """(after, until) ranges covering MIN..MAX of a single integer key, the last one without
    an upper bound (rows inserted meanwhile belong to it); or [] to not split."""
    pk = resolved.primary_key
    if workers < 2 or len(pk) != 1 or resolved.schema.column(pk[0]).kind is not Kind.INTEGER:
        return []
    if (resolved.schema.row_estimate or 0) < 4 * batch_size:
        return []
    col: Any = sa.column(pk[0])
    stmt = sa.select(sa.func.min(col), sa.func.max(col)).select_from(sa.table(resolved.name, col))
    lo_raw, hi_raw = src.fetch_all(stmt)[0]
    if lo_raw is None or hi_raw is None:
        return []
    lo, hi = int(lo_raw), int(hi_raw)
    step = max(1, (hi - lo + workers) // workers)
    out: list[tuple[int, int | None]] = []
    start = lo - 1
    while start < hi:
        until = min(hi, start + step)
        out.append((start, until if until < hi else None))
        start = until
    return out


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
    src = _OPEN.get(task.source)
    if src is None:
        src = _OPEN[task.source] = Source(task.source)
    name = task.resolved.name

    def note(text: str) -> None:
        lifeline.progress.put((name, text))

    client = _OPEN.get(task.target)
    if client is None:
        # a target restarting as this worker starts refuses connections for a while: retried
        retrying = Retrying(task.retries, note)
        client = connect_any(task.target, retrying=retrying)
        if task.token is not None:
            guard = Guard(checkpoint_key(task.mapping), task.token, task.run_id)
            retry(lambda: guard.attach(client), retrying=retrying)
        _OPEN[task.target] = client
    return run_task(task, src, client, lambda n: lifeline.progress.put((name, n)), note)


class Pool:
    """``workers`` slots: one thread of this process and ``workers - 1`` spawned processes."""

    def __init__(
        self, workers: int, source: str, client: Client, shared: Source | None = None
    ) -> None:
        """``shared``: the source the local slot reads with (one worker: the caller's, so that
        every table is read in the caller's snapshot); else it opens its own."""
        ctx = multiprocessing.get_context("spawn")
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
        """Hand on what tasks reported: rows done (int) or a retry's note (str)."""
        while True:
            try:
                name, what = (
                    self.progress.get(timeout=timeout) if timeout else self.progress.get_nowait()
                )
            except queue.Empty:
                return
            if isinstance(what, str):
                note(name, what)
            else:
                advance(name, what)
            timeout = 0.0

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


#: how long terminated workers get before SIGKILL
STOP_SECONDS = 1.0


def run_all(
    pool: Pool,
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
) -> list[TableReport]:
    """migrate's loop: every table's tasks on a pool of ``workers``, then each table's
    counter and latest lists, once all its ranges are done."""
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
        commands = finish_commands(src, TablePlan(r), r)
        sink(name).write([*commands, checkpoint.command(name, None, rows, done=True)])
        report.keys = total.all_keys + len({c[1] for c in commands if c[0] in ENDING_WRITES})
        report.rows, report.entries = total.rows, total.entries
        report.skipped, report.rejected = dict(total.skipped), dict(total.rejected)
        if r.trusts_declared_key:
            pk = [r.schema.column(c) for c in r.primary_key]
            report.duplicate_keys, report.duplicate_rows = src.shared_keys(name, pk)
            if r.table.kind == "hash":  # a row sharing a key overwrote a hash: no new key
                report.keys -= report.duplicate_rows
        report.rejects = list(total.rejects)
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
            sink(name).write([checkpoint.command(t.field, t.after, 0) for t in table_tasks])
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
        pool = Pool(min(workers, len(tasks)), common["source"], client, shared)
        run_all(
            pool, tasks, progress.advance, on_done,
            on_start=lambda task: started.setdefault(task.resolved.name, time.perf_counter()),
            note=note,
        )  # fmt: skip
    return [reports[r.name] for r in resolved]
