"""Change streams exactly once under the faults of issue 37 item 2, on MariaDB and MySQL 9.7,
beside the kill -9 of ``sync`` of tests/sync/test_sync_streams.py (whose writer this module
uses: random transactions of 1-3 row changes, one in five rolled back, with its own log of what
committed). After each fault and the recovery, ``_exactly_once`` compares the streams with the
writer's log: every committed change once, none rolled back, in commit order per stream, each
entry's position no later than the stored one (positions of one server after the other's, and
increasing on each).

* Redis restarted from an AOF written with ``appendfsync everysec`` that lost its tail (what an
  OS crash leaves: the file cut at a group's MULTI, Redis killed -9 first): the entries, the
  rows and the position are lost together — Redis holds a prefix of the writer's log, rows as
  of that prefix, and a position at or past its last entry's — and the ``sync`` that was
  following appends the lost changes again, each once.
* MySQL killed -9 and restarted while ``sync`` drains a backlog, on a private server of each
  engine.
* A failover to a promoted replica (tests/replication.py), with changes ``sync`` had not
  applied yet and new ones on the promoted server.
* ``ALTER TABLE ... ADD COLUMN`` while the writer writes: the table is re-snapshotted online,
  the re-snapshot appends nothing, the changes around it are appended once.
* ``sync --reload``, given or forced by a purged log (exit 2 first): the entries there are kept,
  the reload appends none for its snapshot, so the changes committed between the stored
  position and the new snapshot are in no stream; the changes after it are, once each.
* The consumer docs/sync.md shows, killed (-9) at random moments while ``sync`` is killed (-9)
  at others, both started again: each change's effect once, in commit order; and the variant
  whose effect lies outside Redis (a MySQL table), idempotent by the entry ID.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import functools
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import MigratorError
from migrator.mapping.model import Mapping
from migrator.store.sync_state import state_key
from tests.binlog_server import PrivateMariaDB, missing
from tests.faults import redis_process, redis_server_problem, wait_for
from tests.mysql_server import PrivateMySQL, mysql_problem
from tests.replication import MySQLReplicaPair, ReplicaPair, on
from tests.services import MySQLDatabase, create_database
from tests.sync.helpers import cli, purge_logs
from tests.sync.test_sync_streams import (
    MAPPING,
    STREAM_OF,
    Writer,
    _caught_up,
    _entries,
    _image,
    _loaded,
    _parsed,
    _total,
    consumer_code,
)

pytestmark = pytest.mark.skipif(
    redis_server_problem() is not None, reason=f"{redis_server_problem()}"
)

_ids = iter(range(9400, 9500))
Where = tuple[str, int, int]  # the log's base name, the file's number, the offset


def _where(text: bytes) -> Where:
    file, _, pos = text.decode().rpartition(":")
    base, _, number = file.rpartition(".")
    return base, int(number), int(pos)


def _stored(client: redis.Redis) -> Where:
    stored: Any = client.hgetall(state_key("streams"))
    return _where(stored[b"file"] + b":" + stored[b"pos"])


def _in_order(at: list[Where], last: Where) -> None:
    """Positions increase per server, one server's after the other's (a failover), and the
    stored position's server is the last one, at or past its entries."""
    runs = [w[0] for i, w in enumerate(at) if i == 0 or at[i - 1][0] != w[0]]
    assert len(runs) == len(set(runs)), runs  # a server left is never come back to
    for base in runs:
        mine = [w for w in at if w[0] == base]
        assert mine == sorted(mine), base
    if at:
        assert at[-1][0] == last[0] and at[-1] <= last, (at[-1], last)


def _exactly_once(client: redis.Redis, log: list[tuple[bytes, Any]]) -> None:
    """Each committed change once, none rolled back, in commit order per stream, each entry's
    position no later than the stored one."""
    last = _stored(client)
    for stream in STREAM_OF.values():
        got = _entries(client, stream)
        assert [_parsed(f) for _, f in got] == [c for s, c in log if s == stream], stream
        _in_order([_where(f[b"pos"]) for _, f in got], last)
        assert all(f[b"gtid"] and int(f[b"ts"]) > 1_700_000_000 for _, f in got)


@contextlib.contextmanager
def _following(mapping: Mapping, source: str, target: str) -> Iterator[list[Any]]:
    """``sync`` following in a thread; stopped on the way out, and what it raised raised
    there. Yields the live statuses."""
    stop = threading.Event()
    statuses: list[Any] = []
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        run = pool.submit(sync, mapping, source=source, target=target, stop=stop,
                          server_id=next(_ids), on_status=statuses.append,
                          status_interval=0.2)  # fmt: skip
        try:
            yield statuses
        finally:
            stop.set()
        run.result(timeout=60)


def _writing(writer: Writer) -> threading.Thread:
    thread = threading.Thread(target=writer.run, args=(100_000,), daemon=True)
    thread.start()
    return thread


def _stop_writing(writer: Writer, thread: threading.Thread) -> None:
    writer.stop.set()
    thread.join(30)
    assert not thread.is_alive() and writer.error is None, writer.error


def _reconnect(writer: Writer, db: MySQLDatabase) -> None:
    writer.conn = db.connect(client_flag=0)
    writer.conn.autocommit(False)


# -- Redis from an AOF that lost its tail (appendfsync everysec) --------------------------------

MULTI = b"*1\r\n$5\r\nMULTI\r\n"


def _aof(directory: Path) -> Path:
    (incr,) = (directory / "appendonlydir").glob("*.incr.aof")
    return incr


def _groups(directory: Path, since: int) -> list[int]:
    """Where each MULTI of the AOF's tail (from offset ``since``) begins."""
    data = _aof(directory).read_bytes()
    at, found = since, []
    while (at := data.find(MULTI, at)) >= 0:
        found.append(at)
        at += len(MULTI)
    return found


def _rows_as_of(initial: dict[str, dict[int, Any]], log: list[tuple[bytes, Any]]) -> dict[
        tuple[str, bytes], dict[bytes, bytes]]:  # fmt: skip
    """The rows' images (``table``, ``pk``) after the seed and ``log``: what the hashes hold."""
    rows = {(t, str(i).encode()): _image(t, r) for t, by in initial.items() for i, r in by.items()}
    for _, (op, table, pk, _before, after) in log:
        key = (table.decode(), pk)
        if op == b"delete":
            rows.pop(key, None)
        else:
            rows[key] = after
    return rows


def test_redis_losing_its_aof_tail_loses_entries_rows_and_position_together(
    binlog_db: MySQLDatabase, tmp_path: Path
) -> None:
    with redis_process(tmp_path, appendonly=True, extra=("--appendfsync", "everysec")) as server:
        client = server.client()
        writer, mapping = _loaded(binlog_db, server.url, 41, 10)
        initial = copy.deepcopy(writer.rows)
        path = tmp_path / "streams.yaml"
        path.write_text(MAPPING)
        loaded_at = _aof(server.directory).stat().st_size
        proc = subprocess.Popen(
            cli("sync", str(path), "--source", binlog_db.url, "--target", server.url,
                "--server-id", str(next(_ids))),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        writing = _writing(writer)
        try:
            wait_for(
                "eight groups with entries",
                lambda: len(_groups(server.directory, loaded_at)) >= 8 or proc.poll(),
                60,
            )
            proc.send_signal(signal.SIGSTOP)  # sync frozen, its groups half sent or not
            held = _total(client)
            server.stop(kill=True)
            groups = _groups(server.directory, loaded_at)
            assert len(groups) >= 8, (len(groups), proc.poll())
            cut = random.Random(41).choice(groups[2:])
            with _aof(server.directory).open("r+b") as f:
                f.truncate(cut)  # the last second's writes never reached the disk
            server.start()
            client = server.client()
            log = list(writer.log)
            n = _total(client)
            assert 0 < n < held, (n, held)  # the tail is lost ...
            for stream in STREAM_OF.values():  # ... a prefix of the committed changes is kept
                got = [_parsed(f) for _, f in _entries(client, stream)]
                assert got == [c for s, c in log[:n] if s == stream], stream
            lost_at = _stored(client)  # ... with its position ...
            kept = [_where(f[b"pos"]) for s in STREAM_OF.values() for _, f in _entries(client, s)]
            assert max(kept) <= lost_at
            for (table, pk), image in _rows_as_of(initial, log[:n]).items():  # ... and its rows
                held_row = client.hgetall(f"{table}:{pk.decode()}")  # the key holds the id
                # ... a row whose every column is NULL keeps its primary key's field
                want = {k: v for k, v in image.items() if k != b"id"} or {b"id": pk}
                assert held_row == want, (table, pk)
            proc.send_signal(signal.SIGCONT)  # the same sync goes on: it finds Redis older
            wait_for("the lost changes appended again",
                     lambda: _total(client) > held or proc.poll() is not None, 60)  # fmt: skip
            assert proc.poll() is None, proc.communicate(timeout=10)[1][-2000:]
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)
            _stop_writing(writer, writing)
            proc.kill()
            proc.communicate(timeout=30)
        _caught_up(mapping, binlog_db, server.url)
        _exactly_once(client, writer.log)
        assert len(writer.log) > held
        # the changes appended again are those after the position Redis came back with
        at = sorted(_where(f[b"pos"]) for s in STREAM_OF.values() for _, f in _entries(client, s))
        assert at[n - 1] <= lost_at < at[n]


# -- MySQL killed -9 and restarted --------------------------------------------------------------


def test_mysql_killed_9_while_sync_drains_keeps_each_change_once(
    own_source: PrivateMariaDB | PrivateMySQL, redis_url: str, redis_client: redis.Redis
) -> None:
    """mysqld killed (-9: InnoDB recovers at the next start) while ``sync`` follows with a
    backlog, down half a second: sync reconnects and goes on after the last whole transaction
    it applied, then a second burst of writes."""
    db = create_database(own_source.url, "mig_t_streams_crash")
    writer, mapping = _loaded(db, redis_url, 43, 10)
    with _following(mapping, db.url, redis_url) as statuses:
        for _ in range(150):  # a burst faster than 10 ms apart: a backlog to drain
            writer.step()
        wait_for("some applied", lambda: _total(redis_client) > 10, 30)
        own_source.halt(kill=True)
        time.sleep(0.5)
        own_source.start()
        _reconnect(writer, db)
        writer.run(80)
        assert writer.error is None, writer.error
        wait_for("all applied", lambda: _total(redis_client) >= len(writer.log), 90)
    assert any(s.note and "retry" in s.note and "MySQL" in s.note for s in statuses)
    _caught_up(mapping, db, redis_url)
    _exactly_once(redis_client, writer.log)


# -- a failover to a promoted replica ------------------------------------------------------------


PAIRS = {"mariadb": (missing, ReplicaPair), "mysql": (mysql_problem, MySQLReplicaPair)}


@pytest.fixture(params=["mariadb", pytest.param("mysql", marks=pytest.mark.long)])
def pair(request: pytest.FixtureRequest) -> ReplicaPair | MySQLReplicaPair:
    """A primary and a replica of the engine (tests/replication.py); MySQL's two MySQL 9.7
    take ~30 s to start: ``long``."""
    problem, kind = PAIRS[request.param]
    if problem():
        pytest.skip(str(problem()))
    made: ReplicaPair | MySQLReplicaPair = kind().start()  # type: ignore[operator]
    request.addfinalizer(made.stop)
    return made


def test_a_failover_keeps_each_change_once_across_the_two_servers(
    pair: ReplicaPair | MySQLReplicaPair, redis_url: str, redis_client: redis.Redis
) -> None:
    """sync follows the primary with a backlog, is stopped mid-way, the primary stops with
    changes sync never applied (the replica has them), the replica is promoted and written
    to, and sync continues there by GTID: the streams hold each change once, the primary's
    positions then the replica's (``replica-bin.*``)."""
    db = create_database(pair.primary.url, "shop")
    writer, mapping = _loaded(db, redis_url, 47, 10)
    with _following(mapping, db.url, redis_url):
        for _ in range(120):
            writer.step()
        wait_for("some applied", lambda: _total(redis_client) > 20, 30)
    for _ in range(60):  # never applied from the primary
        writer.step()
    pair.caught_up()
    pair.promote()
    new = on(cast(Any, pair.replica), "shop")
    _reconnect(writer, new)
    for _ in range(60):
        writer.step()
    _caught_up(mapping, new, redis_url)
    _exactly_once(redis_client, writer.log)
    bases = {_where(f[b"pos"])[0] for s in STREAM_OF.values() for _, f in _entries(redis_client, s)}
    assert bases == {"binlog", "replica-bin"} or bases == {"mysql-bin", "replica-bin"}, bases
    assert verify(mapping, source=new.url, target=redis_url).exit_code == 0


# -- a DDL while the writer writes ---------------------------------------------------------------


def test_a_column_added_while_writing_keeps_each_change_once(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    """``ALTER TABLE acct ADD COLUMN`` (a NULL column: the images stay as the writer logs them)
    while the writer commits: acct, mapped with all its columns, is re-snapshotted online
    (which appends nothing) while note keeps following; each change around it once."""
    writer, mapping = _loaded(binlog_db, redis_url, 53, 30)
    with _following(mapping, binlog_db.url, redis_url) as statuses:
        writing = _writing(writer)
        try:
            wait_for("entries", lambda: _total(redis_client) > 40, 30)
            binlog_db.run("ALTER TABLE acct ADD COLUMN extra INT NULL")
            wait_for("acct re-snapshotted", lambda: any(
                s.note and "re-snapshotting acct" in s.note for s in statuses), 30)  # fmt: skip
            n = len(writer.log)
            wait_for("writes after it", lambda: len(writer.log) > n + 40, 30)
        finally:
            _stop_writing(writer, writing)
        wait_for("all applied", lambda: _total(redis_client) >= len(writer.log), 60)
    _caught_up(mapping, binlog_db, redis_url)
    _exactly_once(redis_client, writer.log)
    assert verify(mapping, source=binlog_db.url, target=redis_url).exit_code == 0


# -- a re-snapshot: sync --reload, given or forced by a purged log -------------------------------


def _split(log: list[tuple[bytes, Any]]) -> dict[bytes, list[Any]]:
    return {s: [c for t, c in log if t == s] for s in STREAM_OF.values()}


def _reload_keeps_the_entries_and_appends_none_for_its_snapshot(
    db: MySQLDatabase, redis_url: str, client: redis.Redis, purge: bool
) -> None:
    writer, mapping = _loaded(db, redis_url, 59, 10)
    for _ in range(40):
        writer.step()
    _caught_up(mapping, db, redis_url)
    before = len(writer.log)
    kept = {s: _entries(client, s) for s in STREAM_OF.values()}
    for _ in range(40):  # committed while sync is stopped: in the reload's snapshot
        writer.step()
    gap = len(writer.log)
    if purge:
        purge_logs(db)
        with pytest.raises(MigratorError) as purged:
            _caught_up(mapping, db, redis_url)
        assert purged.value.exit_code == 2 and "purged" in (purged.value.hint or "")
        assert {s: _entries(client, s) for s in STREAM_OF.values()} == kept
    # and while the reload loads (a bounded burst: --until-caught-up returns once it is idle)
    writing = threading.Thread(target=writer.run, args=(150,), daemon=True)
    writing.start()
    try:
        sync(mapping, source=db.url, target=redis_url, until_caught_up=True, reload=True,
             server_id=next(_ids))  # fmt: skip
        n = len(writer.log)
    finally:
        writing.join(60)
    assert not writing.is_alive() and writer.error is None, writer.error
    for _ in range(20):  # and after it
        writer.step()
    _caught_up(mapping, db, redis_url)
    log = writer.log
    # the entries that were there, kept; then the changes from some point after the gap on:
    # each once, in commit order, and none of the gap's (the reload's snapshot holds them)
    got = {s: [_parsed(f) for _, f in _entries(client, s)] for s in STREAM_OF.values()}
    k = len(log) - sum(len(got[s]) for s in STREAM_OF.values()) + before  # where the tail starts
    assert gap <= k <= n, (before, gap, k, n)  # none of the gap; all after the reload
    for s in STREAM_OF.values():
        assert got[s] == _split(log[:before])[s] + _split(log[k:])[s], s
    for s in STREAM_OF.values():
        assert _entries(client, s)[: len(kept[s])] == kept[s]  # the same IDs: untouched
    for s in STREAM_OF.values():
        _in_order([_where(f[b"pos"]) for _, f in _entries(client, s)], _stored(client))
    assert verify(mapping, source=db.url, target=redis_url).exit_code == 0


def test_a_reload_keeps_the_entries_and_appends_none_for_its_snapshot(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    _reload_keeps_the_entries_and_appends_none_for_its_snapshot(
        binlog_db, redis_url, redis_client, purge=False
    )


@pytest.mark.skipif(missing() is not None, reason=f"{missing()}")
def test_a_purged_log_stops_sync_and_its_reload_appends_none_for_the_snapshot(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """On a private MariaDB (the purge must not touch the session's server): the stored
    position's log purged, sync stops (exit 2) without touching the streams, and the reload
    it asks for behaves as a given one."""
    server = PrivateMariaDB()
    server.start()
    try:
        db = create_database(server.url, "mig_t_streams_purge")
        _reload_keeps_the_entries_and_appends_none_for_its_snapshot(
            db, redis_url, redis_client, purge=True
        )
    finally:
        server.stop()


# -- the documented consumers, killed at random moments while sync is ----------------------------


def elsewhere_code() -> str:
    """The consumer variant docs/sync.md shows whose effect lies outside Redis (the second
    python block of "Change streams"): idempotent by the entry ID."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "sync.md").read_text("utf-8")
    section = text.split("## Change streams", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n")[2].split("```", 1)[0]


AUDIT = (
    "CREATE TABLE audit (entry_id VARCHAR(40) PRIMARY KEY, op VARCHAR(10), tbl VARCHAR(64), "
    "pk VARCHAR(64))"
)


def _consumer_script(tmp_path: Path, elsewhere: bool) -> Path:
    """The docs' consumer as a process: ``python script REDIS_URL [MYSQL_URL]``; with
    ``elsewhere``, its ``handle`` is the docs' variant writing to MySQL's ``audit``."""
    run = "consume(redis.Redis.from_url(sys.argv[1]))\n"
    if elsewhere:
        run = (
            "import pymysql\n"
            "from sqlalchemy.engine import make_url\n"
            "u = make_url(sys.argv[2])\n"
            "db = pymysql.connect(host=u.host, port=u.port, user=u.username, password=u.password"
            " or '', database=u.database)\n"
            "handle = lambda pipe, entry_id, fields: handle_elsewhere(db, entry_id, fields)\n"
            "consume(redis.Redis.from_url(sys.argv[1]), group='audit-mysql')\n"
        )
    script = tmp_path / f"consumer{'-elsewhere' if elsewhere else ''}.py"
    script.write_text(consumer_code() + (elsewhere_code() if elsewhere else "") +
                      "\nimport sys\n" + run)  # fmt: skip
    return script


def _by_id(entry_id: bytes | str) -> tuple[int, int]:
    ms, _, seq = str(entry_id if isinstance(entry_id, str) else entry_id.decode()).partition("-")
    return int(ms), int(seq)


def test_the_documented_consumers_and_sync_killed_9_see_each_change_once(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """``sync`` and the two consumers of docs/sync.md (its effect in the acknowledging MULTI,
    and the variant with its effect in MySQL, idempotent by the entry ID) run as processes
    while a writer commits; at random moments one of them, or all, is killed (-9) and started
    again. At the end each consumer has each committed change of acct's stream once, in
    commit order."""
    writer, mapping = _loaded(binlog_db, redis_url, 61, 10)
    binlog_db.run(AUDIT)  # unmapped: sync does not follow it
    path = tmp_path / "streams.yaml"
    path.write_text(MAPPING)
    scripts = {"in-redis": _consumer_script(tmp_path, False),
               "elsewhere": _consumer_script(tmp_path, True)}  # fmt: skip
    commands = {
        "sync": cli("sync", str(path), "--source", binlog_db.url, "--target", redis_url,
                    "--server-id", str(next(_ids))),
        "in-redis": [sys.executable, str(scripts["in-redis"]), redis_url],
        "elsewhere": [sys.executable, str(scripts["elsewhere"]), redis_url, binlog_db.url],
    }  # fmt: skip
    procs: dict[str, subprocess.Popen[str]] = {}
    rng = random.Random(61)
    kills: list[str] = []
    pending = 0

    def start_missing() -> None:
        for name, argv in commands.items():
            if name not in procs:
                procs[name] = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.PIPE, text=True)  # fmt: skip

    def kill(name: str) -> None:
        proc = procs.pop(name)
        proc.kill()
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == -9, (name, err[-2000:])
        kills.append(name)

    def handled_past(n: int) -> bool:
        return int(redis_client.llen("audit:acct")) > n

    writing = _writing(writer)
    try:
        schedule = [["sync"], ["in-redis"], ["elsewhere"], list(commands)]
        rng.shuffle(schedule)  # each kind of kill once, in a random order, at random moments
        # then consumers again (up to 6 more) until a kill has left an entry delivered and not
        # acknowledged: whether one does depends on the moment (a loaded machine's timing)
        rounds = schedule + [[rng.choice(["in-redis", "elsewhere"])] for _ in range(6)]
        for n, victims in enumerate(rounds):
            if n >= len(schedule) and pending:
                break
            start_missing()
            done = redis_client.llen("audit:acct")
            wait_for("the consumers at work", functools.partial(handled_past, done + 10), 60)
            time.sleep(rng.uniform(0.0, 0.5))
            for name in victims:
                kill(name)
            with contextlib.suppress(redis.ResponseError):
                pending += sum(g["pending"] for g in redis_client.xinfo_groups("acct:changes"))
    finally:
        _stop_writing(writer, writing)
        for name in list(procs):
            kill(name)
    _caught_up(mapping, binlog_db, redis_url)
    want = [b" ".join(c[:3]) for s, c in writer.log if s == b"acct:changes"]
    newest: Any = redis_client.xrevrange("acct:changes", count=1)
    last = newest[0][0]

    def drained(group: str) -> bool:
        groups: Any = redis_client.xinfo_groups("acct:changes")
        return any(g["name"] == group.encode() and g["last-delivered-id"] == last
                   and g["pending"] == 0 for g in groups)  # fmt: skip

    for group, name in (("audit", "in-redis"), ("audit-mysql", "elsewhere")):
        proc = subprocess.Popen(commands[name], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        try:
            wait_for(f"{name} drained", functools.partial(drained, group), 60)
        finally:
            proc.kill()
            proc.communicate(timeout=30)
    assert {"sync", "in-redis", "elsewhere"} <= set(kills), kills
    assert pending > 0, "no kill left an entry delivered and not acknowledged"
    assert redis_client.lrange("audit:acct", 0, -1) == want  # each once, in commit order
    rows = binlog_db.query("SELECT entry_id, op, tbl, pk FROM audit")
    rows.sort(key=lambda r: _by_id(r[0]))
    assert [" ".join(r[1:]).encode() for r in rows] == want
