"""How stages report progress: a small protocol with a silent default. rich lives in render/."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Progress(Protocol):
    def start(self, table: str, total: int | None) -> None: ...

    def advance(self, table: str, rows: int) -> None: ...

    def finish(self, table: str) -> None: ...

    def note(self, table: str, message: str) -> None:
        """Something worth seeing on the table's line: a retry, a reload after a loss."""


class NullProgress:
    """Reports nothing."""

    def start(self, table: str, total: int | None) -> None:
        pass

    def advance(self, table: str, rows: int) -> None:
        pass

    def finish(self, table: str) -> None:
        pass

    def note(self, table: str, message: str) -> None:
        pass


NULL_PROGRESS = NullProgress()


class Periodic:
    """``tick()`` every ``interval`` seconds, on a thread of its own, from ``__enter__`` to
    ``__exit__`` (none when ``interval`` is 0): on a schedule from ``began``, so a late tick
    shifts none after it (a busy host may leave one out, never crowd two together)."""

    name = "periodic"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.began = time.monotonic()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def tick(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Periodic:
        if self.interval > 0:
            self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(5.0)

    def _run(self) -> None:
        ticks = 1
        while not self.stop.wait(self.began + ticks * self.interval - time.monotonic()):
            ticks = int((time.monotonic() - self.began) / self.interval) + 1  # no drift
            self.tick()
