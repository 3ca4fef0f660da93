"""A scene for the schema-change tests: the workload's schema (tests/sync/workload.py) with a
mapping that lists emp's columns (so emp has a column, ``note``, the mapping does not draw
from), its first snapshot loaded, random writers of several seeds, and ``sync`` following in
a thread of this process — whose status lines, applied positions and error are kept.

Every wait is bounded and fails at once with the error of a thread that died."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.mapping.loader import load_mapping
from migrator.reports import SyncReport, SyncStatus
from migrator.source.binlog.reader import BinlogPosition, Transaction
from migrator.store.sync_state import SyncState
from tests.faults import wait_for
from tests.sync.helpers import master_position
from tests.sync.workload import MAPPING, SCHEMA, Writer

#: emp lists its columns: every one but ``note``
EMP_COLUMNS = "    columns: [email, login, dept_id, title, salary, hired]\n"
SCENE_MAPPING = MAPPING.replace("  emp:\n", "  emp:\n" + EMP_COLUMNS, 1)

#: what a writer tolerates once a DDL took a column or table it writes away (the stop cases)
GONE = (1054, 1146)  # unknown column, no such table

#: what a writer always tolerates (the transaction is rolled back, as an application would
#: retry it): a table a DDL rebuilt meanwhile (1412, "Table definition has changed, please
#: retry transaction"), an insert that met a table swap (1467, "Failed to read
#: auto-increment value from storage engine"), a read view older than an index an online
#: ALTER rebuilt (159, "InnoDB: insufficient history for index")
RETRY = (1412, 1467, 159)

_ids = iter(range(8800, 8990))


def server_id() -> int:
    return next(_ids)


@dataclass
class Writers:
    """Random writers of ``seeds``, each on a connection and thread of its own, until stopped."""

    db: Any
    seeds: tuple[int, ...]
    tolerate: tuple[int, ...] = ()
    steps: int = 0
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    gates: list[threading.Lock] = field(default_factory=list)  # held by a writer in a step
    paused: bool = False

    def start(self) -> Writers:
        for seed in self.seeds:
            self.gates.append(threading.Lock())
            args = (seed, self.gates[-1])
            thread = threading.Thread(target=self._write, args=args, name=f"writer-{seed}")
            thread.start()
            self.threads.append(thread)
        return self

    def _write(self, seed: int, gate: threading.Lock) -> None:
        conn = self.db.connect(client_flag=0)
        writer = Writer(conn, seed)
        try:
            while not self.stop.is_set():
                try:
                    with gate:
                        writer.step()
                except pymysql.err.MySQLError as e:
                    if not e.args or e.args[0] not in (*RETRY, *self.tolerate):
                        raise
                    conn.rollback()
                with self.lock:
                    self.steps += 1
        except BaseException as e:
            self.errors.append(e)
        finally:
            conn.close()

    def pause(self) -> None:
        """Hold every writer between two transactions (a cut-over's lock) until ``resume``."""
        for n, gate in enumerate(self.gates):
            if not gate.acquire(timeout=60):
                for held in self.gates[:n]:
                    held.release()
                raise AssertionError("a writer's transaction did not end within 60 s")
        self.paused = True

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            for gate in self.gates:
                gate.release()

    def check(self) -> None:
        assert not self.errors, f"a writer failed: {self.errors[0]!r}"

    def more(self, steps: int, seconds: float = 60.0) -> None:
        """Wait until the writers have made ``steps`` more transactions."""
        goal = self.steps + steps
        deadline = time.monotonic() + seconds
        while self.steps < goal:
            self.check()
            assert time.monotonic() < deadline, f"writers made {self.steps}/{goal} steps"
            time.sleep(0.02)

    def end(self) -> None:
        self.stop.set()
        self.resume()
        for thread in self.threads:
            thread.join(30)
        assert not any(t.is_alive() for t in self.threads), "a writer did not stop"
        self.check()


@dataclass
class Following:
    """``sync`` following in a thread: its report or error, status lines, applied positions."""

    path: Path
    db: Any
    redis_url: str
    stop: threading.Event = field(default_factory=threading.Event)
    statuses: list[SyncStatus] = field(default_factory=list)
    applied: list[BinlogPosition] = field(default_factory=list)
    report: SyncReport | None = None
    error: BaseException | None = None
    thread: threading.Thread | None = None
    options: dict[str, Any] = field(default_factory=dict)  # more of sync()'s arguments

    def start(self) -> Following:
        def on_applied(group: list[Transaction]) -> None:
            self.applied.append(group[-1].position)

        def run() -> None:
            try:
                self.report = sync(
                    load_mapping(self.path), source=self.db.url, target=self.redis_url,
                    stop=self.stop, server_id=server_id(), on_status=self.statuses.append,
                    status_interval=0.2, on_applied=on_applied, **self.options,
                )  # fmt: skip
            except BaseException as e:
                self.error = e

        self.thread = threading.Thread(target=run, name="sync-following")
        self.thread.start()
        return self

    def following(self, seconds: float = 60.0) -> None:
        """Wait until sync follows the log: its start-up (the mapping resolved against the
        schema) is over before a change of the scene can meet it."""
        wait_for("sync following the log", lambda: self.error is not None or any(
            s.phase in ("following", "caught up") for s in self.statuses), seconds)  # fmt: skip
        self.running()

    def running(self) -> None:
        assert self.error is None, f"sync stopped: {self.error!r}"
        assert self.thread is not None and self.thread.is_alive(), "sync ended"

    def caught_up(self, seconds: float = 90.0) -> None:
        """Wait until sync has applied everything the log holds now (a marker transaction of
        an unmapped table is written first, so the log ends with a transaction)."""
        self.db.run("REPLACE INTO other VALUES (99, 1)")
        end = master_position(self.db)
        deadline = time.monotonic() + seconds
        while not self.applied or (self.applied[-1].file, self.applied[-1].pos) < (
            end.file,
            end.pos,
        ):
            self.running()
            assert time.monotonic() < deadline, f"sync not at {end} within {seconds} s"
            time.sleep(0.05)

    def snapshots_done(self, seconds: float = 120.0) -> None:
        """Wait until the online snapshots a change queued are done: a status line after the
        first one that showed one (or its "re-snapshotting" note) shows none. Caught up with
        the log is not enough: a snapshot's chunks are read between transactions."""

        def done() -> bool:
            self.running()
            started = next(
                (i for i, s in enumerate(self.statuses)
                 if s.online_snapshot or "re-snapshotting" in (s.note or "")),
                None,
            )  # fmt: skip
            return started is not None and any(
                not s.online_snapshot for s in self.statuses[started + 1 :]
            )

        wait_for("the online snapshots done", done, seconds)

    def ended(self, seconds: float = 90.0) -> BaseException | None:
        """Wait for sync to end by itself (a stop); its error."""
        assert self.thread is not None
        self.thread.join(seconds)
        assert not self.thread.is_alive(), f"sync did not stop within {seconds} s: {self.notes()}"
        return self.error

    def end(self) -> SyncReport:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(30)
        assert not self.thread.is_alive(), "sync did not stop"
        assert self.error is None, f"sync failed: {self.error!r}"
        assert self.report is not None
        return self.report

    def notes(self) -> list[str]:
        return [s.note for s in self.statuses if s.note]

    def never_left_the_loop(self) -> None:
        """Every status line said following or caught up; no reload, reconnect or recovery."""
        phases = {s.phase for s in self.statuses}
        assert phases <= {"following", "caught up"}, phases
        assert all(s.figures.get("reconnects", 0) == 0 for s in self.statuses)
        assert self.report is not None
        assert self.report.snapshot is None and not self.report.loaded, "a reload"
        assert not self.report.recoveries, self.report.recoveries


def during_writes(
    path: Path,
    db: Any,
    redis_url: str,
    seeds: tuple[int, ...],
    change: Callable[[Writers], None],
    *,
    stops: bool = False,
    tolerate: tuple[int, ...] = (),
    reader_restarts: bool = False,
    **options: Any,
) -> Following:
    """``sync`` following while writers of ``seeds`` write; ``change`` runs after 15 of their
    transactions, 15 more follow it. Then, unless it ``stops``, sync is waited for until it
    has applied the whole log, stopped, and checked never to have left its follow loop;
    with ``stops``, sync is waited for until it ends by itself (its error: ``.error``).
    ``options`` go to ``sync()``."""
    following = Following(path, db, redis_url, options=options).start()
    following.following()
    writers = Writers(db, seeds, tolerate).start()
    try:
        writers.more(15)
        change(writers)
        writers.more(15)
        writers.end()
        if stops:
            following.ended()
        else:
            following.caught_up()
            if reader_restarts:
                following.snapshots_done()
    finally:
        writers.end()
        following.stop.set()
    if not stops:
        following.end()
        if not reader_restarts:  # a re-snapshot starts a new log reader after its DDL
            following.never_left_the_loop()
    return following


def caught_up_and_verified(path: Path, db: Any, redis_url: str) -> None:
    """``sync --until-caught-up`` exits at the log's end, then ``verify`` exits 0."""
    assert once(path, db, redis_url).stopped == "caught up"
    report = verify(load_mapping(path), source=db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()


def stored_state(path: Path, redis_url: str) -> dict[str, str]:
    """The sync state in Redis (position, columns...) of the mapping at ``path``."""
    client = redis.Redis.from_url(redis_url)
    try:
        return SyncState(client, load_mapping(path).name).load()
    finally:
        client.close()


def scene(db: Any, redis_url: str, tmp_path: Path, mapping: str = SCENE_MAPPING) -> Path:
    """The schema and mapping set up, and the first run's snapshot loaded."""
    db.run(SCHEMA)
    path = tmp_path / "m.yaml"
    path.write_text(mapping)
    once(path, db, redis_url)
    return path


def once(path: Path, db: Any, redis_url: str, **options: Any) -> SyncReport:
    """One ``sync --until-caught-up`` run."""
    return sync(load_mapping(path), source=db.url, target=redis_url, until_caught_up=True,
                server_id=server_id(), **options)  # fmt: skip


def line_of(path: Path, text: str) -> int:
    """The 1-based line of the mapping file that contains ``text``."""
    lines = path.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def run_statements(db: Any, statements: list[str], between: Callable[[], None]) -> None:
    """Each statement on a connection of its own, ``between`` after each."""
    for statement in statements:
        db.run(statement)
        between()
