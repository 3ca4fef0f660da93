"""``--dask ADDRESS``: migrate's chunks as tasks of a Dask distributed cluster.

The caller plans the chunks, registers them in the checkpoint and finishes each table
(counter, latest lists) exactly as with local workers (scaleout/workers.py); only the chunks run
elsewhere. Each task opens its own MySQL and Redis connections on its Dask worker (one pair
per worker thread, kept for its next tasks), attaches the run's guard and runs
``run_task`` (scaleout/tasks.py): the same packer, run marker and per-chunk checkpoint as a local
worker, in a snapshot of its own per chunk.

* Progress and retry notes travel as Dask events (``Worker.log_event`` on a topic of the run,
  ``Client.subscribe_topic`` here) into the one progress view of the command.
* A worker that dies mid-chunk: the scheduler runs the chunk again on another worker, from
  the chunk's start (its writes are idempotent; the counter and latest lists are only built
  after the table's chunks, by the caller), and only that run's figures are counted.
* A task that fails (a refused row, a full Redis, a source error) fails the run with its own
  error: Dask retries a task only when its worker is lost, never after an exception.
* The scheduler lost: every chunk still running is reported as a connection failure (exit 3);
  ``--resume``, on the cluster or locally, continues from the checkpoint.
* Ctrl-C (or an error): a Dask ``Event`` of the run is set, which each task checks at least
  once a second between batches (``StopCheck``), and the tasks are cancelled.
* Start-up: the connection to the scheduler is made in a thread while the caller opens the
  source (``Connecting``), and every worker is asked to import migrator at once (``_warm``),
  so that neither waits in line before the first chunk.
* A worker thread keeps its MySQL connection for its next tasks (each task ends its snapshot,
  releasing its metadata locks) and its Redis client for the next tasks of the same run: a
  new run's marker guards a new client.

The ``distributed`` package is an optional extra (``pip install 'migrator[dask]'``), on the
caller's host and on every worker's.
"""

from __future__ import annotations

import importlib
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, wait
from contextlib import suppress
from typing import Any

from migrator.errors import ConnectError, MigratorError
from migrator.plan.planner import Stats
from migrator.scaleout.pool import connections, drain
from migrator.scaleout.tasks import Task, run_task

INSTALL = "pip install 'migrator[dask]' on this host and on every Dask worker's host"
#: how long to wait for the scheduler to answer, and for a first worker to join it
CONNECT_SECONDS = 10
#: how often a running task checks whether the run was stopped (Ctrl-C, an error)
STOP_CHECK_SECONDS = 1.0


def connect(address: str) -> Any:
    """A Dask client of the scheduler at ``address`` that has at least one worker."""
    try:
        import distributed
    except ImportError:
        raise MigratorError("--dask needs the optional Dask dependency", INSTALL) from None
    # the client logs every lost connection and retry itself; the command says what matters
    for name in ["distributed", *logging.root.manager.loggerDict]:
        if name.startswith("distributed"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    try:
        client = distributed.Client(
            address, timeout=CONNECT_SECONDS, set_as_default=False, name="migrator"
        )
    except (OSError, TimeoutError) as e:
        raise ConnectError(
            f"cannot reach the Dask scheduler at {address}: {e}",
            "start one with 'dask scheduler' and check the address, e.g. --dask "
            "tcp://10.0.0.5:8786",
        ) from None
    try:
        client.wait_for_workers(1, timeout=CONNECT_SECONDS)
    except (OSError, TimeoutError):
        client.close()
        raise ConnectError(
            f"the Dask scheduler at {address} has no worker",
            f"start workers with 'dask worker {address}' (the migrator package installed)",
        ) from None
    _warm(client)
    return client


def _warm(client: Any) -> None:
    """Have every worker import the tasks' modules now, while the caller starts up (a
    worker's first chunk would otherwise wait about a second for them)."""
    with suppress(Exception):  # only an optimisation: a task imports what it needs anyway
        client.run(importlib.import_module, "migrator.scaleout.dask_verify", wait=False)


class Connecting:
    """``connect(address)`` in a thread of its own, begun at once: importing distributed,
    reaching the scheduler and warming the workers overlap the caller's own start-up
    (opening the source, reading its schema). ``client()`` waits for it."""

    def __init__(self, address: str) -> None:
        self.future: Future[Any] = Future()
        threading.Thread(target=self._run, args=(address,), name="dask-connect",
                         daemon=True).start()  # fmt: skip

    def _run(self, address: str) -> None:
        try:
            self.future.set_result(connect(address))
        except BaseException as e:
            self.future.set_exception(e)

    def client(self) -> Any:
        return self.future.result()

    def close(self) -> None:
        """Close the client, now or (still connecting) once it is made."""
        self.future.add_done_callback(lambda f: f.exception() is None and f.result().close())


def threads(client: Any) -> int:
    """The worker threads of the cluster (how many chunks run at once)."""
    return max(1, sum(client.nthreads().values()))


class DaskPool:
    """The Dask counterpart of ``parallel.Pool``: every task is submitted at once."""

    def __init__(self, client: Any, address: str, again: str | None = None) -> None:
        """``again``: the hint of a lost scheduler (the command that runs the work again)."""
        import distributed

        self.client, self.address, self.again = client, address, again
        run = uuid.uuid4().hex[:12]
        self.topic, self.stop_name = f"migrator-progress-{run}", f"migrator-stop-{run}"
        self.progress: queue.SimpleQueue[Any] = queue.SimpleQueue()
        client.subscribe_topic(self.topic, lambda event: self.progress.put(event[1]))
        self.stopped = distributed.Event(self.stop_name, client=client)
        self.futures: list[Any] = []
        self.locals: list[Future[Any]] = []  # what ``call`` returned, set by the callbacks
        self.local_busy = False  # (parallel.run_all's; there is no local slot)

    def submit(self, task: Task, remote_running: int) -> tuple[Future[Stats], bool]:
        key = f"migrate-{self.topic[-12:]}-{task.field}"
        return self.call(run_on_worker, task, self.topic, self.stop_name, key=key), True

    def call(self, fn: Callable[..., Any], *args: Any, key: str) -> Future[Any]:
        """``fn(*args)`` as a task; its result (or error: a lost scheduler is a
        ConnectError) in a concurrent.futures.Future."""
        remote = self.client.submit(fn, *args, key=key, pure=False)
        self.futures.append(remote)
        local: Future[Any] = Future()
        self.locals.append(local)

        def done(fut: Any) -> None:
            if fut.cancelled():  # no result() for it: that is a round trip on the client's
                # loop, which waits forever once the client is closed (see ``close``)
                local.set_exception(self._lost(CancelledError(fut.key)))
                return
            try:
                local.set_result(fut.result())
            except MigratorError as e:
                local.set_exception(e)
            except BaseException as e:  # cancelled: the scheduler was lost (or we stopped)
                local.set_exception(self._lost(e))

        remote.add_done_callback(done)
        return local

    def _lost(self, e: BaseException) -> MigratorError:
        what = "lost" if isinstance(e, CancelledError | OSError) else type(e).__name__
        return ConnectError(f"the Dask scheduler at {self.address}: chunk {what}: {e}", self.again)

    def drain(self, advance: Callable[[str, int], None], note: Callable[[str, str], None],
              timeout: float) -> None:  # fmt: skip
        drain(self.progress, advance, note, timeout)

    def close(self, cancel: bool = False) -> None:
        """Stop listening; ``cancel``: ask running tasks to stop and cancel the rest. Returns
        once every task's callback has run (bounded): a callback that runs after the client
        is closed (a task that failed or ended as the run stopped) waits forever in
        ``result()``, on Dask's callback thread, which the interpreter joins at exit: the
        command printed its error and never ended."""
        if cancel:
            with suppress(Exception):  # the scheduler may be gone
                self.stopped.set()
            with suppress(Exception):
                self.client.cancel(self.futures, force=True)
        wait(self.locals, timeout=CONNECT_SECONDS)
        with suppress(Exception):
            self.client.unsubscribe_topic(self.topic)


_THREAD = threading.local()


class StopCheck:
    """On a Dask worker: raises InterruptedError once the run's stop event is set (Ctrl-C or
    an error on the caller's side). Called between batches; asks the scheduler at most once
    a STOP_CHECK_SECONDS."""

    def __init__(self, stop_name: str) -> None:
        import distributed

        self.event = distributed.Event(stop_name)
        self.checked = time.monotonic()

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.checked >= STOP_CHECK_SECONDS:
            self.checked = now
            if self.event.is_set():
                raise InterruptedError("stopped")


def run_on_worker(task: Task, topic: str, stop_name: str) -> Stats:
    """A chunk, on a Dask worker (see the module's docstring)."""
    import distributed

    worker = distributed.get_worker()
    name = task.resolved.name
    cache = _THREAD.__dict__.setdefault("open", {})
    stop = StopCheck(stop_name)

    def note(text: str) -> None:
        worker.log_event(topic, (name, text))

    def report(n: int) -> None:
        worker.log_event(topic, (name, n))
        stop()

    src, client = connections(task, cache, note)
    try:
        return run_task(task, src, client, report, note)
    finally:
        src.end_snapshot()  # the connection stays open for the next task, without its locks
