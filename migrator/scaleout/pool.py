"""Where tasks run: a pool of N-1 spawned processes plus a thread of this process
(``Pool``), or a Dask cluster's (scaleout/dask_tasks.py), driven by ``run_all``; what the tasks
report (rows done, retries) comes back on a queue (``drain``).

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
from typing import Any

from migrator import lifeline
from migrator.plan.planner import Stats
from migrator.retry import Retrying
from migrator.scaleout.tasks import Task, run_task
from migrator.source.mysql import Source
from migrator.store.checkpoint import checkpoint_key
from migrator.store.cluster import connect_any
from migrator.store.guard import Guard
from migrator.store.sink import Client, retry

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
