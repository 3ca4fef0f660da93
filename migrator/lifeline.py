"""Worker processes end with their parent (issue 10 item 3).

``init_worker`` is the initializer of ``--workers``' spawned processes. It lives here, in a
module that imports nothing heavy, because a spawned process imports the initializer's module
before it runs it: from ``scaleout/pool.py`` that took a second or more (SQLAlchemy,
redis-py...), a second in which a worker whose parent was killed would live on. From here a
worker is protected within a few milliseconds of starting:

* on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills it when its parent dies;
* on every platform, a watchdog thread that ends it once its parent pid changes (polled
  every WATCHDOG_SECONDS), and a check right away, for a parent that died even sooner.

Ctrl-C is the parent's (SIGINT ignored here; the parent stops the workers), SIGTERM ends a
worker at once.

``spawn_context()`` is the multiprocessing context the workers are started with: spawn, with
two changes so that ``kill -9`` of the parent while a worker starts leaves stderr clean:

* a worker starts in ``spawned``, which ends it quietly when its parent died before handing
  over its task (multiprocessing's own start prints the traceback of the half-read hand-over);
* the resource tracker (the process that removes the semaphores of the parent's queues once
  the parent is gone) is started with its "leaked semaphore objects" warning off: after a
  ``kill -9`` it removes them as it should, and the warning is noise on the user's terminal.
"""

from __future__ import annotations

import ctypes
import io
import multiprocessing.context
import os
import signal
import sys
import threading
import time
from typing import Any

#: prctl(2) option: the signal this process gets when its parent dies (Linux)
PR_SET_PDEATHSIG = 1
WATCHDOG_SECONDS = 0.5

#: the queue a worker reports progress and notes on (set by ``init_worker``)
progress: Any = None


def init_worker(queue: Any, parent: int) -> None:
    global progress
    progress = queue
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def die_with_parent(parent: int) -> None:
    """End this process when ``parent`` dies (see the module docstring)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the watchdog alone
            pass
    if os.getppid() != parent:  # died before we asked
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCHDOG_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


#: the interpreter's warning option the resource tracker inherits (see the module docstring)
QUIET_TRACKER = "ignore:resource_tracker:UserWarning"


def spawn_context() -> Any:
    """The context worker processes are started with (see the module docstring); plain spawn
    where processes do not start through ``popen_spawn_posix`` (Windows)."""
    if QUIET_TRACKER not in sys.warnoptions:
        sys.warnoptions.append(QUIET_TRACKER)  # read when the tracker starts, with the pool
    if sys.platform == "win32":
        return multiprocessing.get_context("spawn")
    return _QuietSpawnContext()


def spawned(parent: int, **handles: Any) -> None:
    """A worker's start, in place of ``multiprocessing.spawn.spawn_main``: when the hand-over
    from ``parent`` fails because the parent is gone (killed as the worker started), the
    worker ends quietly; any other failure is multiprocessing's own."""
    from multiprocessing import spawn

    try:
        spawn.spawn_main(**handles)
    except Exception:
        if os.getppid() != parent:
            os._exit(1)
        raise


if sys.platform != "win32":
    from multiprocessing import popen_spawn_posix, reduction, spawn
    from multiprocessing import util as _util

    util: Any = _util  # its process helpers are internal (untyped in typeshed)

    class _QuietPopen(popen_spawn_posix.Popen):
        """``popen_spawn_posix.Popen`` whose child starts in ``spawned`` (its ``_launch``,
        Python 3.10-3.13, with only the child's program changed)."""

        def _launch(self, process_obj: Any) -> None:
            from multiprocessing import resource_tracker

            fds: list[int] = self._fds  # type: ignore[attr-defined]
            tracker_fd: Any = resource_tracker.getfd()
            fds.append(tracker_fd)
            prep_data = spawn.get_preparation_data(process_obj._name)
            fp = io.BytesIO()
            multiprocessing.context.set_spawning_popen(self)
            try:
                reduction.dump(prep_data, fp)
                reduction.dump(process_obj, fp)
            finally:
                multiprocessing.context.set_spawning_popen(None)
            parent_r = child_w = child_r = parent_w = None
            try:
                parent_r, child_w = os.pipe()
                child_r, parent_w = os.pipe()
                prog = (
                    "from migrator.lifeline import spawned; "
                    f"spawned(parent={os.getpid()}, tracker_fd={tracker_fd}, "
                    f"pipe_handle={child_r})"
                )
                exe = spawn.get_executable()
                cmd = [exe, *util._args_from_interpreter_flags(), "-c", prog,
                       "--multiprocessing-fork"]  # fmt: skip
                fds.extend([child_r, child_w])
                self.pid = util.spawnv_passfds(exe, cmd, fds)
                self.sentinel = parent_r
                with open(parent_w, "wb", closefd=False) as f:
                    f.write(fp.getbuffer())
            finally:
                self.finalizer = util.Finalize(
                    self, util.close_fds, [fd for fd in (parent_r, parent_w) if fd is not None]
                )
                for fd in (child_r, child_w):
                    if fd is not None:
                        os.close(fd)

    class _QuietProcess(multiprocessing.context.SpawnProcess):
        @staticmethod
        def _Popen(process_obj: Any) -> Any:
            return _QuietPopen(process_obj)

    class _QuietSpawnContext(multiprocessing.context.SpawnContext):
        Process = _QuietProcess
