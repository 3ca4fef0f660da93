"""The reader thread's events to the applying thread, a frame (a list of events) per hand-over.

A queue slot per event cost two lock round trips per small transaction on the applying
thread's side; the reader process sends its events in frames anyway (source/binlog/process.py),
so a frame goes through the queue whole and the applying thread takes its events one by one
from the frame in hand. Bounded in frames: a reader far ahead waits (it is then the applier
that is behind, and the lag says so).
"""

from __future__ import annotations

import queue
from collections import deque
from typing import Any

FRAMES = 64  # frames held at most (a frame: up to 512 events or ~1,000 row changes)


class Handoff:
    """One producer thread (``put``), one consumer thread (``get``, ``empty``)."""

    def __init__(self, frames: int = FRAMES) -> None:
        self.frames: queue.Queue[list[Any]] = queue.Queue(maxsize=frames)
        self.held: deque[Any] = deque()  # the rest of the frame in hand (the consumer's)

    def put(self, frame: list[Any], timeout: float | None = None) -> None:
        """Hand over ``frame`` (not empty); ``queue.Full`` after ``timeout`` seconds."""
        self.frames.put(frame, timeout=timeout)

    def get(self, timeout: float = 0.0) -> Any:
        """The next event, waiting up to ``timeout`` seconds for one (0: not at all);
        ``queue.Empty`` if none came."""
        held = self.held
        if not held:
            frame = self.frames.get(timeout=timeout) if timeout > 0 else self.frames.get_nowait()
            held.extend(frame)
        return held.popleft()

    def empty(self) -> bool:
        return not self.held and self.frames.empty()
