"""sync's recovery loop: the first load and the follow loop, run again after a fault.

* **A target that lost data** (restarted empty, flushed, failed over to a replica without the
  last writes): ``TargetLost``, seen by the run marker (store/sync_state.py) or the guard
  on every new connection (store/guard.py). The target is waited for (``options.retries``),
  then asked what it still vouches for: its marker with a position -> follow on from *that*
  position (a restart from its AOF, a replica that lags: the position and the data are an
  ordered prefix of what was written); anything else -> load the snapshot again. After
  ``attempts`` losses in a row: exit 3, naming the command that continues.
* **A lost source connection** (``KILL``, a restart, a network blip): ``SourceLost`` from
  whichever connection met it. Every connection is opened again and the read starts again
  from the last applied position (in the first load: from a new snapshot, since the old one
  is gone with its connection), after the policy's wait, with a note in the live status;
  after ``attempts`` failures in a row: exit 3 with the position and the command.

Ctrl-C (``stop``) ends a follow run as a stop (exit 0) and a first load as an interrupt
(exit 130: the load is not complete). A consistent load stores no position, so the next run
loads again; an online load (the default) has stored the position and its progress, so the
next run resumes it (``LoadInterrupted`` says where).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from migrator.errors import (
    ConnectError,
    LoadInterrupted,
    MigratorError,
    SourceError,
    TargetFull,
    TargetLost,
)
from migrator.mapping.model import Mapping, Retries
from migrator.mapping.resolve import Resolved
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import Command, TablePlan
from migrator.plan.stream import snapshot_entries
from migrator.progress import Progress
from migrator.reports import SyncReport, SyncStatus, TableReport
from migrator.retry import Retrying, Stopped
from migrator.source.binlog.reader import BinlogPosition
from migrator.source.binlog.reconnect import SourceLost, Surface, surfaced
from migrator.source.mysql import Source
from migrator.source.snapshot import Snapshot
from migrator.store.checkpoint import held_keys
from migrator.store.guard import MARKER, Guard, run_id
from migrator.store.keys import remove_owned
from migrator.store.sink import transient
from migrator.store.sync_lock import SyncLock
from migrator.store.sync_state import SyncState, apply_group
from migrator.sync.apply import position_fields
from migrator.sync.figures import SyncFigures
from migrator.sync.follow import Follower
from migrator.sync.log import event
from migrator.sync.schema_watch import Replan, loaded_columns
from migrator.sync.shard_rows import remove_own

Load = Callable[[Retrying], tuple[Snapshot, list[TableReport]]]
#: at most one note a second on the removal of old keys
NOTE_SECONDS = 1.0


def snapshot_position(snapshot: Snapshot) -> BinlogPosition:
    if snapshot.binlog_file is None or snapshot.binlog_position is None:
        raise SourceError(
            f"the snapshot has no binary-log position: {snapshot.note or 'the log is off'}",
            "sync needs the position to follow the log from; see the settings above",
        )
    return BinlogPosition(snapshot.binlog_file, snapshot.binlog_position, snapshot.gtid or "")


class SyncRun:
    """One ``sync`` command's life: load when needed, follow, recover (see the module doc)."""

    def __init__(
        self,
        m: Mapping,
        src: Source,
        client: Any,
        state: SyncState,
        resolved: list[Resolved],
        report: SyncReport,
        stop: threading.Event,
        policy: Retries,
        lock: SyncLock,
        again: str,
        *,
        on_status: Callable[[SyncStatus], None] | None,
        progress: Progress,
        load: Load,
        follower: Callable[..., Follower],
        fields: dict[str, str],
        figures: SyncFigures | None = None,
        replan: Callable[[], None] = lambda: None,
        shard: str = "",
        relocate: Callable[[], dict[str, str] | None] = lambda: None,
    ) -> None:
        self.m, self.src, self.client, self.state = m, src, client, state
        self.resolved, self.report, self.stop, self.policy = resolved, report, stop, policy
        self.lock, self.again, self.on_status, self.progress = lock, again, on_status, progress
        self.load, self.follower, self.fields = load, follower, fields
        self.replan = replan  # the mapping resolved again against the live schema
        self.relocate = relocate  # another server behind the source's address: failed over
        self.shard = shard  # one shard of a sharded source: it removes no other's keys
        self.figures = figures or SyncFigures()  # retries counted for /metrics and /healthz
        self.redis = self.figures.retrying("Redis", policy, stop, self.note)  # writes, waits
        self.guard: Guard | None = None
        self.loading = True  # no position to follow from yet
        self.current: Follower | None = None  # the follower of the moment
        self.others: int | None = None  # keys not the mapping's, counted before a load
        src.retrying = Surface()  # every lost source connection comes up to this loop

    def note(self, message: str) -> None:
        """A retry or recovery, in the live status (``--json``: its ``note``; on a terminal
        the status line, or during the first load the tables' progress lines)."""
        loading = self.report.position is None or self._first_loading()
        if loading:
            for r in self.resolved:
                self.progress.note(r.name, message)
        if self.on_status is not None:
            where = str(self.report.position) if self.report.position else "snapshot"
            phase = "loading" if loading else "following"
            self.on_status(SyncStatus(phase, where, self.report.transactions,
                                      self.report.rows_changed, note=message))  # fmt: skip

    def run(self, stored: dict[str, str], until_caught_up: bool) -> None:
        self.loading = not self.state.trusted(stored)
        if stored.get("file") and self.loading:
            self.report.recoveries.append(
                "the stored position had no run marker (re-created after a loss, or written by "
                "an older migrator): loaded the snapshot again"
            )
        try:
            if not self.loading:
                self._arm()
            self._loop(until_caught_up)
        except Stopped:  # Ctrl-C while waiting for a server
            if self.loading:
                raise KeyboardInterrupt from None
            if self._load_unfinished():
                raise self._interrupted() from None
            self.report.stopped = "stopped"

    def _first_loading(self) -> bool:
        return self.current is not None and self.current.first_loading()

    def _load_unfinished(self) -> bool:
        """Whether this run's online first load has tables left: stored and not begun (no
        follower since it), or queued in the follower of the moment."""
        return self.report.online_load and (self.current is None or self._first_loading())

    def _interrupted(self) -> LoadInterrupted:
        """A stop before the online first load was done: what Redis holds, and the command
        that resumes the load."""
        current = self.current
        if current is None or current.snapshots is None or not current.snapshots.queue:
            return LoadInterrupted(  # no table begun
                "the first load is not complete; Redis holds the log's position and the "
                f"load's plan (no table read yet, {len(self.resolved)} waiting): "
                f"'{self.again}' resumes it there"
            )
        queue = current.snapshots.queue
        p = queue[0]
        more = f"; {len(queue) - 1} more table(s) waiting" if len(queue) > 1 else ""
        return LoadInterrupted(
            "the first load is not complete; Redis holds the log's position and the load's "
            f"progress ({p.table}: {p.chunk} of {max(p.chunks, p.chunk)} chunk(s) loaded{more}): "
            f"'{self.again}' resumes it there"
        )

    def _loop(self, until_caught_up: bool) -> None:
        losses = failures = 0
        reconnected = False
        while True:
            self.lock.check()
            follower: Follower | None = None
            try:
                if self.loading:
                    self._load()
                    self.loading, failures = False, 0
                    self.current = None  # the new load's tables: the next follower reads them
                if self.stop.is_set():  # (after a recovery: the load may be done long since)
                    if self._load_unfinished():  # its tables are still to read: not done
                        raise self._interrupted()
                    self.report.stopped = "stopped"
                    return
                assert self.report.position is not None
                if reconnected:  # the address may lead to another server now
                    self._relocated()
                    reconnected = False
                follower = self.current = self.follower(
                    self.report.position, check_target=self._check_target, retrying=self.redis
                )
                follower.run(until_caught_up, self.report)
                if self.report.stopped == "stopped" and follower.first_loading():
                    raise self._interrupted()  # a stop (Ctrl-C, SIGTERM) before it was done
                return
            except Replan:  # a DDL re-snapshots a table: its new columns, a new reader
                failures = 0
                surfaced(self.replan, "reading the source's schema", self.src.close)
                continue
            except TargetLost as e:
                losses += 1
                if losses > self.policy.attempts:
                    raise self._gave_up(e, f"after {losses - 1} recoveries in a row") from None
                try:
                    self.loading = self._recover(e)
                except ConnectError as gone:  # Redis did not come back
                    raise self._gave_up(gone) from None
            except SourceLost as e:
                if follower is not None and follower.progressed:
                    failures = 0
                failures += 1
                self._retry_source(e, failures, self.loading)
                reconnected = True
            except ConnectError as e:
                raise self._gave_up(e) from None
            except TargetFull as e:  # fix Redis; the stored position stays where it was
                raise TargetFull(e.message, f"{e.hint}; {self._holds()}; once fixed: "
                                 f"{self.again}") from None  # fmt: skip
            if follower is not None and follower.progressed:
                losses = 0

    # -- the first load ---------------------------------------------------------------------
    def _load(self) -> None:
        """Remove the mapping's keys, read every table in one snapshot, store its position:
        under a new run marker, so a loss during the load is seen when the position is
        written (it then is refused) or on the next connection."""
        report = self.report
        report.position = report.started_at = None
        if self.on_status:
            self.on_status(SyncStatus("loading", "snapshot"))
        self._arm(new=True)
        space = KeySpace([TablePlan(r) for r in self.resolved], self.m.kept())
        if self.shard:  # only the rows the owner hashes name for it (shard_rows.py)
            plans = {r.name: TablePlan(r) for r in self.resolved}
            report.removed = remove_own(self.client, plans, self.shard, self.redis,
                                        self._removing())  # fmt: skip
        else:
            report.removed = remove_owned(
                self.client, space, [r.name for r in self.resolved], stop=self.stop,
                removing=self._removing(),
            )  # fmt: skip
            self.others = held_keys(self.client, self.m.name)
        self.figures.expect({r.name: r.schema.row_estimate for r in self.resolved})
        report.snapshot, report.loaded = self.load(self.redis)
        pos = snapshot_position(report.snapshot)
        fields = {**position_fields(pos), **self.fields, "loaded_at": report.snapshot.moment}
        fields |= loaded_columns([r.schema for r in self.resolved])  # what DDL is judged by
        # an online load: the streams that take its rows get each table's truncate before any
        # change that follows the position (the rows come chunk by chunk: online_snapshot.py)
        truncates = [] if report.loaded else self._truncates(pos, report.snapshot.moment)
        once = {"file": pos.file, "pos": str(pos.pos)} if truncates else None
        apply_group(self.client, truncates, self.state.command(fields), self.state, self.redis,
                    once)  # fmt: skip
        self.figures.appended(truncates)
        report.started_at = report.position = pos
        if report.loaded:  # a consistent load, done (an online one reads while following)
            rows = sum(t.rows for t in report.loaded)
            event("loaded", f"first load done: {rows:,} rows in {len(report.loaded)} table(s) "
                  f"from a consistent snapshot; following from {pos}", rows=rows,
                  tables=len(report.loaded), position=str(pos))  # fmt: skip

    def _truncates(self, pos: BinlogPosition, moment: str) -> list[Command]:
        """A ``truncate`` entry per table whose stream takes the load's rows (plan/stream.py)."""
        out = []
        for plan in (TablePlan(r) for r in self.resolved):
            entries = snapshot_entries(plan)
            if entries is not None:
                entries.at(pos.file, pos.pos, pos.gtid, moment)
                out.append(entries.truncate())
        return out

    def _removing(self) -> Callable[[int], None]:
        """What the removal of the mapping's old keys says while it runs (a note after its
        first UNLINK, then at most every NOTE_SECONDS): before any table starts, nothing
        else shows it is working."""
        said = [0.0]

        def removing(n: int) -> None:
            if time.monotonic() - said[0] >= NOTE_SECONDS:
                said[0] = time.monotonic()
                text = f"removing the mapping's old keys: {n:,} removed"
                self.progress.note("removal", text)  # (no table has a line yet)
                if self.on_status is not None:
                    self.on_status(SyncStatus("loading", "snapshot", note=text))

        return removing

    def _arm(self, new: bool = False) -> None:
        """Bind the guard to the state's marker (a new one with ``new``) and the server's
        run_id; every new connection is checked from then on."""
        guard = self.guard
        if guard is not None:
            guard.armed = False  # the marker changes under it
        try:
            token = self.redis.call(self.state.begin, transient, "Redis") if new else None
            token = token or self.state.token
            assert token is not None
            server = self.redis.call(lambda: run_id(self.client), transient, "Redis")
        finally:
            if guard is not None:
                guard.armed = True
        if guard is None:
            self.guard = Guard(self.state.key.decode(), token, server)
            self.guard.attach(self.client)
        else:
            guard.token, guard.run_id = token.encode(), server
        if not new:
            stored = self.state.load()
            self.report.started_at = self.report.position = BinlogPosition(
                stored["file"], int(stored["pos"]), stored.get("gtid", "")
            )

    # -- faults -----------------------------------------------------------------------------
    def _check_target(self) -> None:
        """TargetLost unless Redis still holds this run's marker on the same server (and a
        stop if another sync took the lease over meanwhile)."""
        self.lock.check()
        guard = self.guard
        assert guard is not None

        def check() -> None:
            marker = self.client.hget(self.state.key, MARKER)
            guard.check(run_id(self.client), marker if isinstance(marker, bytes) else None)

        self.redis.call(check, transient, "Redis")

    def _recover(self, e: TargetLost) -> bool:
        """Wait for the target, then: True to load again, False to follow on from the
        position it still holds."""
        guard = self.guard
        assert guard is not None
        guard.armed = False  # the next connections are expected to meet the new server
        try:
            stored = self.redis.call(self.state.load, transient, "Redis")
        finally:
            guard.armed = True
        if stored.get(MARKER) == self.state.token and stored.get("file"):
            self._arm()
            what = f"continuing from the position it still holds, {self.report.position}"
            again = False
        else:
            what = "its data is gone: loading the snapshot again"
            again = True
        self.report.recoveries.append(f"{e.message}; {what}")
        self.note(f"target lost data: {what}")
        event("reload" if again else "target_lost", f"Redis: {e.message}; {what}",
              logging.WARNING, reason=e.message, reload=again,
              position=None if again else str(self.report.position))  # fmt: skip
        return again

    def _retry_source(self, e: SourceLost, failures: int, loading: bool) -> None:
        """Wait as the policy says, or give up (exit 3) with the position and the command."""
        self.src.close()  # every connection of the source is opened again
        where = "the first load starts again" if loading else f"from {self.report.position}"
        retrying = self.figures.retrying("source", self.policy, self.stop, self.note)
        try:
            retrying.failed(failures, e.reason, f"MySQL ({where})")
        except ConnectError:
            why = f"still failing after {self.policy.attempts} retries"
            raise self._gave_up(e, why) from None
        self.report.recoveries.append(f"{e.message}; reconnected ({where})")

    def _relocated(self) -> None:
        """After a lost source connection: when another server answers at the source's
        address (a virtual IP moved to a promoted replica), follow on from the position the
        failover found there (sync/failover.py), stored and logged by ``relocate``."""
        moved = self.relocate()
        if moved is not None:
            self.report.position = BinlogPosition(moved["file"], int(moved["pos"]),
                                                  moved.get("gtid", ""))  # fmt: skip
            self.fields.update(source=moved["source"], server=moved["server"])

    def _holds(self) -> str:
        """What Redis holds now: the stored position, and whether the first load is done."""
        pos = self.report.position
        if pos is None:
            return "the first load is not complete (no position is stored)"
        if self._first_loading():
            return (
                f"the first load is not complete: its progress is stored with the position "
                f"{pos} while Redis keeps them (the next run resumes it; if Redis lost them, "
                "the next run loads again)"
            )
        return f"Redis holds every change up to {pos} with its position"

    def _gave_up(self, e: MigratorError, why: str = "") -> MigratorError:
        """The error, saying what Redis holds and the command that continues."""
        holds = self._holds()
        message = f"{e.message} ({why})" if why else e.message
        hint = f"{holds}; once the server is back: {self.again}"
        kind = TargetLost if isinstance(e, TargetLost) else ConnectError
        return kind(message, f"{e.hint}; {hint}" if e.hint and not why else hint)
