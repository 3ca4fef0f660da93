"""Worker processes end with their parent (issue 10 item 3).

``init_worker`` is the initializer of ``--workers``' spawned processes. It lives here, in a
module that imports nothing heavy, because a spawned process imports the initializer's module
before it runs it: from ``commands/parallel.py`` that took a second or more (SQLAlchemy,
redis-py...), a second in which a worker whose parent was killed would live on. From here a
worker is protected within a few milliseconds of starting:

* on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills it when its parent dies;
* on every platform, a watchdog thread that ends it once its parent pid changes (polled
  every WATCHDOG_SECONDS), and a check right away, for a parent that died even sooner.

Ctrl-C is the parent's (SIGINT ignored here; the parent stops the workers), SIGTERM ends a
worker at once.
"""

from __future__ import annotations

import ctypes
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
