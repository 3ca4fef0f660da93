"""Small helpers shared by the sync tests."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from migrator.source.binlog.reader import BinlogPosition
from migrator.source.binlog.settings import log_status
from tests.faults import wait_for
from tests.sync.workload import Writer

Rows = dict[bytes, dict[bytes, bytes]]


def _after(fields: dict[bytes, bytes]) -> dict[bytes, bytes]:
    if b"after" in fields:  # form: json
        return {k.encode(): v.encode() for k, v in json.loads(fields[b"after"]).items()
                if v is not None}  # fmt: skip
    return {k[6:]: v for k, v in fields.items() if k.startswith(b"after.")}


def replay(
    client: Any, stream: bytes = b"acct:changes", table: bytes = b"acct", key: bytes = b"id"
) -> Rows:
    """The consumer of docs/sync.md#snapshot-entries: the stream from its start, applied (an
    update whose before-image's ``key`` differs moves the row). Over a sharded source (entries
    with a ``shard``) a truncate forgets that shard's rows only."""
    rows: Rows = {}
    shard_of: dict[bytes, bytes] = {}  # the shard each row came from
    for _, f in client.xrange(stream):
        if f[b"table"] != table:
            continue
        op, shard = f[b"op"], f.get(b"shard", b"")
        if op == b"truncate":
            for pk in [pk for pk, s in shard_of.items() if s == shard]:
                del rows[pk], shard_of[pk]
            continue
        if op in (b"update", b"delete"):
            old = f.get(b"before." + key, f[b"pk"])
            rows.pop(old, None)
            shard_of.pop(old, None)
        if op != b"delete":
            rows[f[b"pk"]], shard_of[f[b"pk"]] = _after(f), shard
    return rows


def master_position(db: Any) -> BinlogPosition:
    """The binary log's current end on a test database's server (SHOW MASTER STATUS, or SHOW
    BINARY LOG STATUS where MySQL 8.4 renamed it)."""
    conn = db.connect(client_flag=0)
    try:
        end = log_status(conn)
    finally:
        conn.close()
    assert end is not None, "the binary log is off"
    return BinlogPosition(*end)


def log_base(db: Any) -> str:
    """The binary log's file names before the number, dot included: ``mysql-bin.`` (the
    private MariaDB), ``binlog.`` (MySQL's default)."""
    return master_position(db).file.rsplit(".", 1)[0] + "."


def wkt_of(src: Any) -> Any:
    from migrator.source.binlog.process import wkt_function

    return wkt_function(src)


def purge_logs(db: Any) -> None:
    """Purge every binary log of ``db``'s server but a new one (``sync`` behind it then finds
    its position purged); the dump threads reading one are killed first, as MySQL keeps a log
    a dump thread reads."""
    with db.connect() as conn, conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW BINARY LOGS")
        newest = [r[0] for r in cur.fetchall()][-1]
        cur.execute("SHOW PROCESSLIST")
        for row in cur.fetchall():
            if str(row[4]).startswith("Binlog Dump"):
                cur.execute(f"KILL {row[0]}")
        wait_for("the logs purged", lambda: cur.execute(f"PURGE BINARY LOGS TO '{newest}'")
                 or cur.execute("SHOW BINARY LOGS") == 1, 30)  # fmt: skip


def cli(*args: str) -> list[str]:
    """``migrator ARGS...`` as a command line of this interpreter."""
    return [sys.executable, "-m", "migrator", *args]


def write_random(db: Any, seed: int, steps: int) -> None:
    """``steps`` random transactions of the sync workload (tests/sync/workload.py), from
    ``seed``, on a connection of their own."""
    conn = db.connect(client_flag=0)
    try:
        w = Writer(conn, seed)
        for _ in range(steps):
            w.step()
    finally:
        conn.close()


def past_loading(stdout: IO[str]) -> dict[str, Any]:
    """Read ``sync --json``'s status lines until the first load is done: the first status
    whose phase is not ``loading`` (the run then follows the log). An end of output before
    it fails, with what was read."""
    seen = []
    while line := stdout.readline():
        seen.append(line)
        status = json.loads(line).get("status")
        if status is not None and status.get("phase") != "loading":
            return dict(status)
    raise AssertionError(f"sync's output ended before its first load was done: {seen[-3:]}")


@contextmanager
def following(args: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """``migrator ARGS... --json`` started, its first load done (``past_loading``): the
    process, following the log. Killed on the way out if the test left it running."""
    proc = subprocess.Popen(cli(*args, "--json"), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        past_loading(proc.stdout)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def while_syncing(
    run: Callable[[threading.Event, Callable[[Any], None]], object],
    writes: list[Callable[[], object]],
) -> None:
    """``run(stop, on_status)`` (a sync) in a thread while each of ``writes`` runs in a thread
    of its own; once the writes are done and the sync is past its first load, it is stopped
    and joined. Whatever the sync or a writer raised is raised here (a writer that died
    early would leave fewer changes to follow, and a test that passes on them). Stopped while
    following: a stop during the first load is an interrupt (exit 130), which a slow host
    reaches when the writes end before the load does."""
    stop = threading.Event()
    errors: list[BaseException] = []
    failed: list[BaseException] = []  # the writers'
    following = threading.Event()

    def status(s: Any) -> None:
        if s.phase != "loading":
            following.set()

    def follow() -> None:
        try:
            run(stop, status)
        except BaseException as e:
            errors.append(e)

    follower = threading.Thread(target=follow)
    follower.start()

    def write(w: Callable[[], object]) -> None:
        try:
            w()
        except BaseException as e:
            failed.append(e)

    writers = [threading.Thread(target=write, args=(w,)) for w in writes]
    try:
        for w in writers:
            w.start()
        for w in writers:
            w.join()
        wait_for("sync following the log", lambda: following.is_set() or bool(errors), 120)
    finally:
        stop.set()
        follower.join(60)
    assert not follower.is_alive(), "sync did not stop within 60 s"
    if errors:
        raise errors[0]
    if failed:
        raise AssertionError(f"a writer failed: {failed[0]!r}") from failed[0]


def mixed_writes(
    db: Any,
    rng: random.Random,
    steps: int,
    first: int,
    table: str,
    row: Callable[[random.Random, int], tuple[object, ...]],
    update: Callable[[Any, random.Random, int], object],
) -> None:
    """``steps`` transactions of one row change each on ``table`` (ids from 1 to ``first``
    and those inserted since): 20 % INSERTs of ``row(rng, id)``, 10 % DELETEs, the rest
    ``update(cursor, rng, id)``."""
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            for n in range(steps):
                roll = rng.random()
                i = rng.randint(1, first + n)
                if roll < 0.2:
                    values = row(rng, first + n + 1)
                    marks = ",".join(["%s"] * len(values))
                    cur.execute(f"INSERT IGNORE INTO {table} VALUES ({marks})", values)
                elif roll < 0.3:
                    cur.execute(f"DELETE FROM {table} WHERE id = %s", (i,))
                else:
                    update(cur, rng, i)
                conn.commit()
    finally:
        conn.close()


class RandomTransactions:
    """Random transactions of 1-3 statements (``step``, a subclass's) on their own connection,
    with fresh integer keys apart from every other seed's."""

    def __init__(self, db: Any, seed: int, spacing: int = 10000) -> None:
        self.conn, self.rng = db.connect(autocommit=True), random.Random(seed)
        self.next = spacing * seed

    def fresh(self) -> int:
        self.next += 1
        return self.next

    def step(self) -> str:
        raise NotImplementedError

    def execute(self, cur: Any, sql: str) -> None:
        """One statement of a transaction (a subclass may count or forgive it)."""
        cur.execute(sql)

    def run(self, n: int) -> None:
        with self.conn.cursor() as cur:
            for k in range(n):
                cur.execute("START TRANSACTION")
                for _ in range(1 + k % 3):
                    self.execute(cur, self.step())
                cur.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def stopped_by(mapping: Any, change: Callable[[], None], **run: Any) -> BaseException:
    """Start ``sync`` of ``mapping`` (``run``: its other arguments), make ``change`` once it
    follows, and return what stopped it by itself (within a minute, or the test fails)."""
    from migrator.commands.sync import sync

    live, stop = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def follow() -> None:
        def seen(s: Any) -> None:
            if s.phase != "loading":
                live.set()

        try:
            sync(mapping, stop=stop, on_status=seen, **run)
        except BaseException as e:
            errors.append(e)

    follower = threading.Thread(target=follow)
    follower.start()
    try:
        assert live.wait(60), errors
        change()
        follower.join(60)  # sync stops by itself
    finally:
        stop.set()
        follower.join(30)
    assert not follower.is_alive() and len(errors) == 1, errors
    return errors[0]
