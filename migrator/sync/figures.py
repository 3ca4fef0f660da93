"""sync's figures: what the follow loop has done, how far behind the source it is, and whether
it is healthy — for ``/metrics`` and ``/healthz`` (``migrator.sync.exporter`` serves them)
and the ``--json`` status lines (``as_dict``).

Fed from two threads: the binary-log reader (``read``: every event as it arrives, heartbeats
included) and the applier (``following``, ``applied``, ``head``, retries); read by the HTTP
server's threads. One lock guards it all; every call is a few counter updates.

The lag's definition and its bookkeeping: ``migrator.sync.lag``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from migrator.progress import Progress
from migrator.reports import SyncStatus
from migrator.retry import Classify, Policy, Retrying
from migrator.source.binlog.reader import BinlogPosition, Idle, Transaction
from migrator.sync.behind import behind
from migrator.sync.lag import LagClock, Pos
from migrator.sync.log import event
from migrator.sync.pace import load_message, load_pace

T = TypeVar("T")
OPERATIONS = ("insert", "update", "delete")
OnStatus = Callable[[SyncStatus], None]


@dataclass(frozen=True)
class HealthRules:
    """When ``/healthz`` answers 503: behind the source without advancing, or without a word
    (event or heartbeat) from it, for ``stall`` seconds; or ``retries`` failures in a row."""

    stall: float = 30.0
    retries: int = 3
    heartbeat: float = 0.2  # how often the source is asked for a heartbeat (for the message)


def _key(p: BinlogPosition) -> Pos:
    return (p.file, p.pos)


class SyncFigures:
    def __init__(self, rules: HealthRules | None = None, clock: Callable[[], float] = time.time):
        self.rules = rules or HealthRules()
        self.clock = clock
        self._lock = threading.Lock()
        now = clock()
        self.phase = "starting"
        self.row_changes: Counter[tuple[str, str]] = Counter()  # (table, operation)
        self.table_transactions: Counter[tuple[str, str]] = Counter()
        self.stream_entries: Counter[str] = Counter()  # change-stream entries, by stream
        self.transactions = 0
        self.position: BinlogPosition | None = None  # stored in Redis with the last group
        self.log: LagClock | None = None  # once following
        self.heard_at = now
        self.heartbeats = 0
        self.reconnects = 0
        self.retries: Counter[str] = Counter()  # by what failed (Redis, source)
        self.in_a_row: Counter[str] = Counter()  # failures in a row, now
        self.last_failure = ""
        self.errors: Counter[str] = Counter()  # failures, by kind
        self.schema_changes: Counter[str] = Counter()  # DDL applied, by effect
        self.snapshot_rows: Counter[str] = Counter()
        self.snapshot_chunks: Counter[str] = Counter()
        self.snapshot_tables: dict[str, bool] = {}  # table -> done
        self.snapshot_totals: dict[str, int] = {}  # table -> rows estimated when started
        self.load_totals: dict[str, int] = {}  # the first load's tables: rows to load
        self.load_began: float | None = None
        self.load_base: Counter[str] = Counter()  # rows counted before it (an earlier load)
        self.round_trips = 0
        self.head_gtid = ""  # the source's GTID state, as last asked
        self.head_sizes: dict[str, int] | None = None  # its log files' sizes, as last asked

    # -- what sync reports ------------------------------------------------------------------

    def stamped(self, on_status: OnStatus | None) -> OnStatus | None:
        """``on_status`` with these figures in every status it is given."""
        if on_status is None:
            return None
        report = on_status

        def stamp(status: SyncStatus) -> None:
            status.figures = self.as_dict()
            report(status)

        return stamp

    def tee(
        self, inner: Progress, on_status: OnStatus | None, interval: float, phase: bool = True
    ) -> Progress:
        """``inner`` (the progress bars), with the load's tables, rows and chunks counted here
        (with ``phase``, the phase is ``loading`` from its first table on) and a ``loading``
        status at most every ``interval`` seconds (none without ``on_status``). The online
        snapshots' progress: ``phase`` False, their phase is the follow loop's."""
        return _Tee(self, inner, on_status, interval, phase)

    # -- following --------------------------------------------------------------------------

    def following(self, start: BinlogPosition, loading: bool = False) -> None:
        """A reader follows the log from ``start``; a second one in the same run is a
        reconnect (the caller started the reader again after a lost connection). ``loading``:
        the first load is read online meanwhile (the phase is ``loading`` until ``loaded``)."""
        with self._lock:
            again = self.log is not None
            self.reconnects += again
            self.phase = "loading" if loading else "following"
            self.position = start
            self.heard_at = self.clock()
            self.log = LagClock(_key(start), self.heard_at)
        if again:
            event("reconnected", f"following the binary log again from {start}",
                  position=str(start), reconnects=self.reconnects)  # fmt: skip

    def loaded(self) -> None:
        """The online first load's last table is done: following from now on."""
        with self._lock:
            if self.phase == "loading":
                self.phase = "following"

    def read(self, event: Any) -> None:
        """The reader took ``event`` off the log (its thread, as it arrives)."""
        self.read_all([event])

    def read_all(self, events: list[Any]) -> None:
        """The reader took ``events`` off the log together (its thread, as they arrive)."""
        now = self.clock()
        with self._lock:
            self.heard_at = now
            self.in_a_row.pop("source", None)
            log = self.log
            for event in events:
                kind = type(event)
                if kind is Transaction:
                    if log:
                        log.transaction(_key(event.position), now, event.timestamp)
                elif kind is Idle and log:
                    self.heartbeats += 1
                    log.heartbeat(_key(event.position), now)

    def head_at(
        self, file: str, pos: int, gtid: str = "", sizes: dict[str, int] | None = None
    ) -> None:
        """The source's log ends at ``file:pos`` now (``SHOW BINARY LOG STATUS``), with the GTID
        state ``gtid``; ``sizes``: its files' sizes, when asked (``head.HeadWatch``)."""
        with self._lock:
            if self.log:
                self.log.seen((file, pos), self.clock())
            if gtid:
                self.head_gtid = gtid
            if sizes:
                self.head_sizes = sizes

    def appended(self, entries: Sequence[tuple[bytes, ...]]) -> None:
        """Change-stream entries written with their group (an XADD's key is its stream)."""
        with self._lock:
            self.stream_entries.update(e[1].decode() for e in entries)

    def applied_group(self, group: list[Transaction], round_trips: int = 1) -> None:
        """A group of transactions and its position were written to Redis."""
        now = self.clock()
        with self._lock:
            for txn in group:
                touched = set()
                for change in txn.changes:
                    op = (
                        "insert"
                        if change.before is None
                        else "delete"
                        if change.after is None
                        else "update"
                    )
                    self.row_changes[(change.table, op)] += 1
                    touched.add((change.table, op))
                self.table_transactions.update(touched)
            self.transactions += len(group)
            self.round_trips += round_trips
            self.in_a_row.pop("Redis", None)
            last = group[-1].position
            self.position = last
            if self.log:
                self.log.applied_through(_key(last), now)

    def redis_round_trip(self) -> None:
        """A request sent to Redis and waited for, besides the groups (a cascade's reads)."""
        with self._lock:
            self.round_trips += 1

    def stopped(self) -> None:
        with self._lock:
            self.phase = "stopped"

    # -- failures ---------------------------------------------------------------------------

    def failed(self, what: str, reason: str, failures: int, retried: bool = True) -> None:
        """A transient failure of ``what`` (Redis, source), the ``failures``-th in a row;
        ``retried``: another try follows (not when the policy's attempts are used up)."""
        with self._lock:
            self.retries[what] += retried
            self.in_a_row[what] = failures
            self.last_failure = f"{what}: {reason}"
            self.errors[_kind(what, reason)] += 1
        then = "retrying" if retried else "no retry left"
        event("retry", f"{what} failed ({failures} in a row): {reason}; {then}",
              logging.WARNING, what=what, reason=reason, failures=failures,
              retried=retried)  # fmt: skip

    def recovered(self, what: str) -> None:
        with self._lock:
            failures = self.in_a_row.pop(what, None)
        if failures:
            event("recovered", f"{what} answers again after {failures} failure(s)",
                  what=what, failures=failures)  # fmt: skip

    def schema_changed(self, effect: str) -> None:
        """A DDL of a mapped table applied (``effect``: apply, truncate, resnapshot), or
        (``stop``) one sync stopped on: a failure, in ``errors``."""
        with self._lock:
            if effect == "stop":
                self.errors["schema_change"] += 1
            else:
                self.schema_changes[effect] += 1

    def expect(self, estimates: dict[str, int]) -> None:
        """The first load's tables and their rows to load (estimates; 0: not known), for
        the rows done, the total and the time left in ``/healthz`` and the log."""
        with self._lock:
            self.load_totals = dict(estimates)
            self.load_base = Counter({t: self.snapshot_rows[t] for t in estimates})
            self.load_began = self.clock()

    def retrying(
        self,
        what: str,
        policy: Policy | None = None,
        stop: threading.Event | None = None,
        note: Callable[[str], None] | None = None,
    ) -> Retrying:
        """A retry policy (``retry.Retrying``) whose failures and recoveries are counted
        here, as ``what`` (``Redis``, ``source``)."""
        return _Counted(self, what, policy, stop, note)

    # -- reading ----------------------------------------------------------------------------

    def lag(self) -> float:
        with self._lock:
            return self._lag(self.clock())

    def _lag(self, now: float) -> float:
        return self.log.lag(now) if self.log else 0.0

    def health(self) -> tuple[bool, str]:
        """(healthy, why) — what ``/healthz`` answers (200 or 503) and says."""
        with self._lock:
            return self._health(self.clock())

    def _health(self, now: float) -> tuple[bool, str]:
        rules = self.rules
        worst = max(self.in_a_row.values(), default=0)
        if worst >= rules.retries:
            return False, f"retrying: {worst} failures in a row, the last {self.last_failure}"
        if self.phase == "starting":
            return True, "starting: checking the source and the target"
        if self.phase == "loading":
            tables = len(self.load_totals) or len(self.snapshot_tables)
            return True, f"loading the snapshot, {tables} table(s): {load_message(self._load(now))}"
        if self.phase != "following":
            return False, f"{self.phase}: not following the binary log"
        log = self.log
        since = log.stalled_for(now) if log else 0.0
        if log and since > rules.stall:
            return False, (
                f"not advancing: applied up to {_show(log.applied)} for {since:.1f} s while the "
                f"source's log is at {_show(log.head)}"
            )
        silent = now - self.heard_at
        if silent > rules.stall:
            return False, (
                f"no event and no heartbeat from the source for {silent:.1f} s (one is asked every "
                f"{rules.heartbeat:g} s): the source or the network does not answer"
            )
        lag = self._lag(now)
        return True, f"following: lag {lag:.3f} s at {self.position}"

    def as_dict(self) -> dict[str, Any]:
        """The figures as plain data: the ``--json`` status line's fields and what /metrics
        shows."""
        with self._lock:
            now = self.clock()
            ok, why = self._health(now)
            head, applied = (self.log.head, self.log.applied) if self.log else (None, None)
            gtid = self.position.gtid if self.position else None
            where = {"file": head[0], "pos": head[1], "gtid": self.head_gtid} if head else None
            tables: dict[str, dict[str, int]] = {}
            for (table, op), n in sorted(self.row_changes.items()):
                tables.setdefault(table, dict.fromkeys(OPERATIONS, 0))[op] = n
            txns: dict[str, dict[str, int]] = {}
            for (table, op), n in sorted(self.table_transactions.items()):
                txns.setdefault(table, dict.fromkeys(OPERATIONS, 0))[op] = n
            return {
                "phase": self.phase,
                "healthy": ok,
                "health": why,
                "lag_seconds": round(self._lag(now), 3),
                "position": self.position.as_dict() if self.position else None,
                "source_position": where,
                **behind(applied, head, gtid, self.head_gtid, self.head_sizes),
                "transactions": self.transactions,
                "row_changes": tables,
                "table_transactions": txns,
                "stream_entries": dict(sorted(self.stream_entries.items())),
                "heartbeats": self.heartbeats,
                "seconds_since_source_heard": round(now - self.heard_at, 3),
                "reconnects": self.reconnects,
                "retries": dict(self.retries),
                "failures_in_a_row": max(self.in_a_row.values(), default=0),
                "errors": dict(self.errors),
                "schema_changes": dict(self.schema_changes),
                "load": self._load(now) if self.phase == "loading" else None,
                "snapshot": {
                    t: {
                        "rows": self.snapshot_rows[t],
                        "chunks": self.snapshot_chunks[t],
                        "done": done,
                    }
                    for t, done in self.snapshot_tables.items()
                },
                "redis_round_trips": self.round_trips,
            }

    def _load(self, now: float) -> dict[str, Any]:
        names = self.load_totals or self.snapshot_totals
        return load_pace(names, self.snapshot_rows, self.load_base, self.load_began, now)


def _show(pos: Pos | None) -> str:
    return f"{pos[0]}:{pos[1]}" if pos else "?"


KINDS = (  # (words in the reason, kind), the first that matches
    (("timed out", "timeout"), "timed_out"),
    (("loading",), "loading"),
    (("busy",), "busy"),
    (("readonly", "read only", "read-only"), "read_only"),
    (("connection", "lost", "closed", "reset", "refused", "gone away", "broken pipe"),
     "connection_lost"),
)  # fmt: skip


def _kind(what: str, reason: str) -> str:
    """A label from a short list for a failure: ``redis_connection_lost``, ``source_timed_out``,
    ``redis_loading``... (``<what>_other`` for the rest), so the series stay few."""
    text = reason.lower()
    kind = next((k for words, k in KINDS if any(w in text for w in words)), "other")
    return f"{re.sub(r'[^a-z0-9]+', '_', what.lower())}_{kind}"


class _Counted(Retrying):
    """A retry policy that tells the figures about each failure and each recovery."""

    def __init__(
        self,
        figures: SyncFigures,
        what: str,
        policy: Policy | None,
        stop: threading.Event | None,
        note: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(policy, note, stop)
        self.figures, self.what = figures, what

    def failed(self, failures: int, reason: str, what: str) -> None:
        self.figures.failed(self.what, reason, failures, failures <= self.policy.attempts)
        super().failed(failures, reason, what)

    def call(self, fn: Callable[[], T], classify: Classify, what: str) -> T:
        result = super().call(fn, classify, what)
        self.figures.recovered(self.what)
        return result


class _Tee:
    """Progress to the bars and to the figures."""

    def __init__(
        self,
        figures: SyncFigures,
        inner: Progress,
        on_status: OnStatus | None,
        interval: float,
        phase: bool = True,
    ) -> None:
        self.figures, self.inner, self.on_status = figures, inner, on_status
        self.interval, self.last, self.phase = interval, time.monotonic(), phase

    def start(self, table: str, total: int | None) -> None:
        with self.figures._lock:
            if self.phase:
                self.figures.phase = "loading"
            self.figures.snapshot_tables[table] = False
            self.figures.snapshot_totals[table] = total or 0
        self.inner.start(table, total)

    def advance(self, table: str, rows: int) -> None:
        f = self.figures
        with f._lock:
            f.snapshot_rows[table] += rows
            f.snapshot_chunks[table] += 1
            f.round_trips += 1  # one pipeline per chunk
        self.inner.advance(table, rows)
        if self.on_status is not None and time.monotonic() - self.last >= self.interval:
            self.last = time.monotonic()
            self.on_status(SyncStatus("loading", "snapshot"))

    def finish(self, table: str) -> None:
        with self.figures._lock:
            self.figures.snapshot_tables[table] = True
        self.inner.finish(table)

    def note(self, table: str, message: str) -> None:
        self.inner.note(table, message)
