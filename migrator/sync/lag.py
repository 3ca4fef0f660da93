"""How far sync is behind the source's log, to the millisecond — the definition behind
``lag_seconds`` (``/metrics``, ``--json``) and behind ``/healthz``'s "not advancing".

**Lag**: 0 when everything the source's log holds is applied; otherwise now − the commit
time of the oldest transaction not yet applied, both on the local clock. That commit time is
the earliest local moment sync had evidence of the transaction: its arrival in the reader, or
a heartbeat / the source's own word on its log's end (``SHOW BINARY LOG STATUS``, asked every
0.25 s by ``head.HeadWatch``) showing the log past the applied position. A heartbeat
comes only when the source has sent everything, so once the transactions read before it are
applied, the log's end is applied too: the lag is 0 on an idle source or idle tables, and it
grows from the first sign of an unapplied transaction even when nothing is read — and, since
the source is asked, also when the reader is the part that is behind and everything it has
read is applied. When the reader is behind (a transaction arrives more than ``BACKLOG``
seconds after its whole-second log timestamp), the log's timestamp + 1 s bounds the commit
time instead: of the first transaction read and not applied, or, when all read are applied,
of the last applied (the next one follows it in a backlog; until a heartbeat says the reader
has reached the log's end) — good to a second, assuming the source's clock agrees with the
local one.

Not thread-safe by itself: ``SyncFigures`` calls it under its lock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

Pos = tuple[str, int]  # (file, position): ordered as the log is
BACKLOG = 2.0  # seconds after its log timestamp past which a transaction was read late
MARKS_APART = 0.2  # seconds between two kept signs of the log's end (heartbeats, polls)
MAX_MARKS = 20_000  # kept at most (thinned beyond: a stuck sync must not grow them forever)


@dataclass
class _Pending:
    """Read by the reader, not yet applied: a transaction, or a heartbeat (``idle``) after it."""

    pos: Pos
    arrived: float
    timestamp: int | None = None  # the log's commit time (whole seconds); None: a heartbeat

    @property
    def idle(self) -> bool:
        return self.timestamp is None


class LagClock:
    def __init__(self, start: Pos, now: float) -> None:
        self.applied = start  # the log applied up to here (heartbeats included)
        self.head = start  # the furthest the source's log is known to reach
        self.advanced_at = now  # when ``applied`` last moved
        # heartbeats and SHOW MASTER STATUS past the applied position: (position, first seen)
        self.marks: deque[tuple[Pos, float]] = deque()
        self.pending: deque[_Pending] = deque()
        # the last applied transaction: its log timestamp, and whether it was read late
        self.applied_ts: int | None = None
        self.applied_late = False

    def transaction(self, pos: Pos, now: float, timestamp: int) -> None:
        """The reader read a transaction ending at ``pos`` (its arrival is its evidence)."""
        self.pending.append(_Pending(pos, now, timestamp))
        self.head = max(self.head, pos)

    def heartbeat(self, pos: Pos, now: float) -> None:
        """The source has sent everything up to ``pos``."""
        self.applied_late = False  # the reader is at the log's end: no longer late
        self.seen(pos, now)
        if self.pending:  # applied once the transactions before it are
            self.pending.append(_Pending(pos, now))
        else:
            self._advance(pos, now)

    def seen(self, pos: Pos, now: float) -> None:
        """The source's log reaches ``pos`` (a heartbeat, ``SHOW MASTER STATUS``)."""
        if pos > self.head:
            self.head = pos
            if pos > self.applied and (not self.marks or now - self.marks[-1][1] >= MARKS_APART):
                self.marks.append((pos, now))
                if len(self.marks) > MAX_MARKS:  # keep the oldest, thin the rest
                    kept = list(self.marks)
                    self.marks = deque(kept[:1] + kept[1::2])

    def applied_through(self, pos: Pos, now: float) -> None:
        """Every transaction up to ``pos`` is in Redis (and so are heartbeats read after them)."""
        pending = self.pending
        while pending and (pending[0].idle or pending[0].pos <= pos):
            done = pending.popleft()
            pos = max(pos, done.pos)
            if done.timestamp is not None:
                self.applied_ts = done.timestamp
                self.applied_late = done.arrived - (done.timestamp + 1.0) > BACKLOG
        self._advance(pos, now)

    def _advance(self, pos: Pos, now: float) -> None:
        if pos > self.applied:
            self.applied, self.advanced_at = pos, now
            self.head = max(self.head, pos)
            while self.marks and self.marks[0][0] <= pos:
                self.marks.popleft()

    @property
    def behind(self) -> bool:
        return self.applied < self.head

    def lag(self, now: float) -> float:
        return max(0.0, now - self.behind_since(now)) if self.behind else 0.0

    def behind_since(self, now: float) -> float:
        """The earliest evidence of a transaction past the applied position (local clock)."""
        since = self.marks[0][1] if self.marks else now
        first = next((p for p in self.pending if not p.idle), None)
        if first is not None and first.timestamp is not None:
            since = min(since, first.arrived)
            logged = first.timestamp + 1.0
            if first.arrived - logged > BACKLOG:  # read late: the log's own clock says more
                since = min(since, logged)
        elif self.applied_late and self.applied_ts is not None:
            # every transaction read is applied, but the reader is behind: the next one in
            # the log was committed about when the last applied one was
            since = min(since, self.applied_ts + 1.0)
        return since

    def stalled_for(self, now: float) -> float:
        """Seconds sync has been behind without the applied position moving (0: not behind)."""
        return now - max(self.behind_since(now), self.advanced_at) if self.behind else 0.0
