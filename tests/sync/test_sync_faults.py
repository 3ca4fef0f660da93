"""sync under faults (issue 17 items 1, 2 and 6), on real servers: a private ``redis-server``
restarted empty, from its AOF, or flushed, during the first load and while following; the
source's connections killed and a private mariadbd restarted or gone; a second sync of the
same mapping and target; Ctrl-C in the first load; ``--json`` errors. Each ends with
``sync --until-caught-up`` and ``verify`` exit 0, or the documented exit 3 and command.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pymysql
import pytest
import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import ConnectError, MigratorError, TargetLost
from migrator.mapping.loader import parse_mapping
from migrator.progress import NullProgress
from migrator.reports import SyncReport, SyncStatus
from migrator.store.sync_lock import LEASE_SECONDS
from migrator.store.sync_state import state_key
from migrator.sync.identity import default_server_id
from tests.binlog_server import PrivateMariaDB, missing, running_mariadb
from tests.faults import RedisProcess, redis_process, redis_server_problem, wait_for
from tests.services import create_database
from tests.sync.helpers import cli, following, log_base, master_position, write_random
from tests.sync.workload import MAPPING, SCHEMA

pytestmark = pytest.mark.skipif(
    redis_server_problem() is not None or missing() is not None,
    reason=f"{redis_server_problem() or missing()}",
)

_ids = iter(range(8100, 9000))
FAST = "options:\n  retries: {attempts: 10, backoff: 0.2, max_backoff: 1}\n"
STATE = "migrator:synctest:sync"


def _mapping(options: str = FAST) -> Any:
    return parse_mapping(MAPPING + options, name="synctest")


def _verify(db: Any, url: str) -> None:
    report = verify(_mapping(), source=db.url, target=url)
    assert report.exit_code == 0, json.dumps(report.as_dict(), default=str)[:3000]


def _caught_up(db: Any, url: str, **kw: Any) -> SyncReport:
    """``sync --until-caught-up``, then ``verify`` exit 0. A last insert first: the random
    writes may delete emp's highest row, after which the counter rule differs between sync
    and verify (issue 17 item 5, not what these tests are about)."""
    db.run("INSERT INTO emp (email) VALUES (NULL)")
    report = sync(_mapping(), source=db.url, target=url, until_caught_up=True,
                  server_id=next(_ids), **kw)  # fmt: skip
    assert report.stopped == "caught up"
    _verify(db, url)
    return report


def _many_rows(db: Any, n: int = 3000) -> None:
    """Enough employees that the first load takes many batches."""
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO emp (email, login, dept_id, title, salary) "
                "VALUES (%s, %s, %s, %s, %s)",
                [(f"m{i}@x", f"m{i}", 1 + i % 3, "dev", i) for i in range(n)],
            )
        conn.commit()
    finally:
        conn.close()


def _reach_head(db: Any, client: redis.Redis, run: Following) -> None:
    """Wait until the stored position is the end of the binary log (or ``run`` failed)."""
    head = master_position(db)
    at = [head.file.encode(), b"%d" % head.pos]
    wait_for(f"sync at {head}", lambda: run.error or client.hmget(STATE, ["file", "pos"]) == at, 60)
    assert run.error is None, run.error


class OnBatch(NullProgress):
    """Calls ``action`` once, after the ``after``-th batch of the first load was queued."""

    def __init__(self, action: Callable[[], None], after: int = 2) -> None:
        self.action, self.after, self.batches = action, after, 0
        self.notes: list[str] = []

    def note(self, table: str, message: str) -> None:
        self.notes.append(message)

    def advance(self, table: str, rows: int) -> None:
        self.batches += 1
        if self.batches == self.after:
            self.action()


class Following:
    """``sync`` following the log in a thread until ``finish()``."""

    def __init__(self, db: Any, url: str, **kw: Any) -> None:
        self.stop = threading.Event()
        self.statuses: list[SyncStatus] = []
        self.applied = 0
        self.error: BaseException | None = None
        self.report: SyncReport | None = None

        def applied(group: list[Any]) -> None:
            self.applied += len(group)

        def run() -> None:
            try:
                self.report = sync(
                    kw.pop("mapping", None) or _mapping(), source=db.url, target=url,
                    stop=self.stop, server_id=next(_ids), on_status=self.statuses.append,
                    status_interval=0.2, on_applied=applied, **kw,
                )  # fmt: skip
            except BaseException as e:
                self.error = e

        self.thread = threading.Thread(target=run, name="sync-under-test", daemon=True)
        self.thread.start()
        wait_for("sync following the log", lambda: self.following() or self.error, 60)

    def following(self) -> bool:
        return any(s.phase in ("following", "caught up") for s in self.statuses)

    def wait_applied(self, n: int, seconds: float = 60) -> None:
        wait_for(f"{n} transactions applied", lambda: self.applied >= n or self.error, seconds)
        assert self.error is None, self.error

    def finish(self) -> SyncReport:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        if isinstance(self.error, KeyboardInterrupt):  # a stop in a first load: exit 130
            raise AssertionError(f"stopped in a first load: {self.error}") from self.error
        if self.error is not None:
            raise self.error
        assert self.report is not None
        return self.report

    def notes(self) -> list[str]:
        return [s.note for s in self.statuses if s.note]


def _loaded(client: redis.Redis) -> bool:
    """A first load done: its position stored, and no table of it (online) left to read."""
    return bool(client.hget(STATE, "file")) and not client.hget(STATE, "snapshot")


def _lost_data_noted(run: Following) -> bool:
    """The follower recorded a target loss and what it does about it (the recovery is in
    its report by then; a retry's note comes before it)."""
    return any("target lost data" in n for n in run.notes())


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    with redis_process(tmp_path) as server:
        yield server


@pytest.fixture
def aof_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    with redis_process(tmp_path, appendonly=True) as server:
        yield server


# -- item 1: a target that lost the data -------------------------------------------------------
def test_redis_restarted_empty_while_following_is_reloaded(binlog_db, own_redis) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    url = own_redis.url
    _caught_up(binlog_db, url)
    run = Following(binlog_db, url)
    write_random(binlog_db, 61, 40)
    run.wait_applied(1)
    own_redis.restart(down=0.3)  # empty: no persistence
    # the follower sees it by itself (idle check, next group, new connection) and reloads
    wait_for("the snapshot loaded again", lambda: run.error or _loaded(own_redis.client()), 60)
    write_random(binlog_db, 62, 40)
    report = run.finish()
    assert report.snapshot is not None, "loaded again"
    assert any("loading the snapshot again" in r for r in report.recoveries), report.recoveries
    assert any("target lost data" in n for n in run.notes())
    _caught_up(binlog_db, url)


def test_flushdb_while_following_is_reloaded(binlog_db, own_redis) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    url = own_redis.url
    _caught_up(binlog_db, url)
    run = Following(binlog_db, url)
    write_random(binlog_db, 63, 30)
    run.wait_applied(1)
    own_redis.client().flushdb()
    write_random(binlog_db, 64, 30)
    wait_for("the snapshot loaded again", lambda: run.error or _loaded(own_redis.client()), 60)
    report = run.finish()
    assert any("marker is gone" in r for r in report.recoveries), report.recoveries
    _caught_up(binlog_db, url)


def test_redis_restarted_from_its_aof_continues_from_the_position_it_holds(
    binlog_db, aof_redis
) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    url = aof_redis.url
    _caught_up(binlog_db, url)
    run = Following(binlog_db, url)
    write_random(binlog_db, 65, 30)
    run.wait_applied(1)
    aof_redis.restart(down=0.3)  # a new run_id, the data and the marker kept
    write_random(binlog_db, 66, 30)
    wait_for("the recovery", lambda: _lost_data_noted(run) or run.error, 60)
    report = run.finish()
    assert report.snapshot is None, "nothing was lost, so nothing is loaded again"
    assert any("continuing from the position" in r for r in report.recoveries), report.recoveries
    _caught_up(binlog_db, url)


def test_redis_back_from_an_older_snapshot_replays_from_the_position_it_holds(
    binlog_db, own_redis
) -> None:  # type: ignore[no-untyped-def]
    """Like a failover to a replica that missed the last writes: the marker is there, with
    an older position and the data as of it; what came after is applied again."""
    binlog_db.run(SCHEMA)
    url = own_redis.url
    _caught_up(binlog_db, url)
    run = Following(binlog_db, url)
    client = own_redis.client()
    write_random(binlog_db, 68, 20)
    _reach_head(binlog_db, client, run)
    client.save()  # dump.rdb, loaded by the next start
    older = client.hgetall(STATE)
    write_random(binlog_db, 69, 20)
    _reach_head(binlog_db, client, run)
    assert client.hgetall(STATE)[b"pos"] != older[b"pos"]
    own_redis.restart(down=0.3, kill=True)  # back with the older data, marker and position
    wait_for("the recovery", lambda: _lost_data_noted(run) or run.error, 60)
    report = run.finish()
    assert report.snapshot is None
    held = f"{older[b'file'].decode()}:{older[b'pos'].decode()}"
    assert any(f"continuing from the position it still holds, {held}" in r
               for r in report.recoveries), report.recoveries  # fmt: skip
    _caught_up(binlog_db, url)


@pytest.mark.parametrize("online", [True, False], ids=["online", "consistent"])
@pytest.mark.parametrize("fault", ["restart", "flushdb"])
def test_target_lost_during_the_first_load_is_loaded_again(binlog_db, own_redis, fault,
                                                           online) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    """Redis emptied after the load's second batch (consistent) or chunk (online, the
    default): the load starts again from a new position; "caught up" only once it is done."""
    binlog_db.run(SCHEMA)
    _many_rows(binlog_db)
    url = own_redis.url

    def lose() -> None:
        if fault == "restart":
            own_redis.restart(down=0.2)
        else:
            own_redis.client().flushdb()

    progress = OnBatch(lose)
    statuses: list[SyncStatus] = []
    report = sync(_mapping(FAST + "  batch_size: 200\n"), source=binlog_db.url, target=url,
                  until_caught_up=True, server_id=next(_ids), progress=progress,
                  online_load=online, chunk_rows=200, on_status=statuses.append)  # fmt: skip
    assert report.stopped == "caught up"
    assert any("loading the snapshot again" in r for r in report.recoveries), report.recoveries
    assert any("target lost data" in n for n in progress.notes), progress.notes  # the bars
    assert report.online_load == online and report.snapshot is not None
    # the load's tables once each: those done before the loss are not counted twice
    assert [t.table for t in report.loaded] == ["dept", "emp", "tag", "stats"]
    assert sum(t.rows for t in report.loaded) == 3 + 3003 + 3 + 2
    assert {s.phase for s in statuses if s.note and "target lost" in s.note} == {"loading"}
    assert own_redis.client().hget(STATE, "snapshot") in (None, b"")
    _verify(binlog_db, url)


@pytest.mark.parametrize("online", [True, False], ids=["online", "consistent"])
def test_a_loss_without_retries_is_exit_3_with_the_command_and_no_position(
    binlog_db, own_redis, online
) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    _many_rows(binlog_db, 1000)
    url = own_redis.url
    with pytest.raises(TargetLost) as caught:
        sync(_mapping(FAST + "  batch_size: 200\n"), source=binlog_db.url, target=url,
             until_caught_up=True, server_id=next(_ids), retries=0, online_load=online,
             chunk_rows=200, progress=OnBatch(lambda: own_redis.client().flushdb()))  # fmt: skip
    assert caught.value.exit_code == 3
    hint = " ".join((caught.value.hint or "").split())
    assert "migrator sync" in hint and "the first load is not complete" in hint, hint
    assert own_redis.client().hget(STATE, "file") is None, "no position over missing data"
    report = _caught_up(binlog_db, url)
    assert report.snapshot is not None


def test_redis_gone_past_the_retries_is_exit_3_with_the_position_and_command(
    binlog_db, own_redis
) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    url = own_redis.url
    _caught_up(binlog_db, url)
    run = Following(binlog_db, url, mapping=_mapping(FAST.replace("attempts: 10", "attempts: 2")))
    own_redis.stop()
    run.thread.join(60)
    assert isinstance(run.error, ConnectError) and run.error.exit_code == 3, run.error
    assert "migrator sync" in (run.error.hint or "")
    assert log_base(binlog_db) in (run.error.hint or "")
    own_redis.start()  # empty
    report = _caught_up(binlog_db, url)
    assert report.snapshot is not None


def test_a_position_without_its_marker_is_not_trusted(binlog_db, own_redis) -> None:  # type: ignore[no-untyped-def]
    """What today's MULTI re-created after a loss: a position over an empty Redis."""
    binlog_db.run(SCHEMA)
    url = own_redis.url
    _caught_up(binlog_db, url)
    client = own_redis.client()
    stored = {k: v for k, v in client.hgetall(STATE).items() if not k.startswith(b"@")}
    client.flushdb()
    client.hset(STATE, mapping=stored)
    report = _caught_up(binlog_db, url)
    assert report.snapshot is not None
    assert any("no run marker" in r for r in report.recoveries)


def test_caught_up_is_not_reported_over_a_flushed_target(binlog_db, own_redis) -> None:  # type: ignore[no-untyped-def]
    """The check before "caught up": flushed after the last group, nothing written since."""
    binlog_db.run(SCHEMA)
    url = own_redis.url
    _caught_up(binlog_db, url)
    write_random(binlog_db, 67, 20)
    flushed: list[int] = []

    def flush_once(group: list[Any]) -> None:
        if not flushed:
            flushed.append(1)
            own_redis.client().flushdb()

    report = sync(_mapping(), source=binlog_db.url, target=url, until_caught_up=True,
                  server_id=next(_ids), on_applied=flush_once)  # fmt: skip
    assert flushed and report.snapshot is not None
    _verify(binlog_db, url)


# -- item 2: the source's connections ----------------------------------------------------------
def _dumps(server: PrivateMariaDB | Any) -> int:
    """How many binlog dumps the server runs."""
    conn = pymysql.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                "WHERE COMMAND LIKE 'Binlog Dump%%'"
            )
            return int((cur.fetchone() or (0,))[0])
    finally:
        conn.close()


def _kill_sync_connections(server: PrivateMariaDB | Any, db: Any) -> int:
    """KILL every connection of the test's database and every binlog dump (on a server of
    the tests' own), except the asking one."""
    conn = pymysql.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
    killed = 0
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "
                "AND (DB = %s OR DB = 'information_schema' OR COMMAND LIKE 'Binlog Dump%%')",
                (db.name,),
            )
            for (i,) in cur.fetchall():
                try:
                    cur.execute(f"KILL {int(i)}")
                    killed += 1
                except pymysql.MySQLError:
                    pass
    finally:
        conn.close()
    return killed


def test_killed_source_connections_are_opened_again(binlog_db, binlog_server, redis_url) -> None:  # type: ignore[no-untyped-def]
    if not isinstance(binlog_server, PrivateMariaDB):
        pytest.skip("KILLs connections of a server of the tests' own")
    binlog_db.run(SCHEMA)
    run = Following(binlog_db, redis_url)
    for seed in (71, 72, 73):
        before = run.applied
        write_random(binlog_db, seed, 30)  # with latest-list changes: that connection is used
        run.wait_applied(before + 1)  # (after the last KILL: on new connections)
        wait_for("a KILL", lambda: _kill_sync_connections(binlog_server, binlog_db), 10)
    before = run.applied
    write_random(binlog_db, 74, 30)
    run.wait_applied(before + 1)  # read on new connections: the reconnect is recorded
    report = run.finish()
    assert any("reconnected" in r for r in report.recoveries), report.recoveries
    assert any("lost the connection" in n or "retry" in n for n in run.notes()), run.notes()
    _caught_up(binlog_db, redis_url)


def test_killed_source_connections_in_the_default_first_load_resume_it(  # type: ignore[no-untyped-def]
    binlog_db, binlog_server, redis_url
) -> None:
    """KILL of every connection of sync's after the online load's third chunk: the load goes
    on from its stored chunk (no new position, no reload), then caught up and verify."""
    if not isinstance(binlog_server, PrivateMariaDB):
        pytest.skip("KILLs connections of a server of the tests' own")
    binlog_db.run(SCHEMA)
    _many_rows(binlog_db)
    kills: list[int] = []
    progress = OnBatch(lambda: kills.append(_kill_sync_connections(binlog_server, binlog_db)),
                       after=3)  # fmt: skip
    report = sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
                  server_id=next(_ids), progress=progress, chunk_rows=500)  # fmt: skip
    assert kills and kills[0] > 0
    assert report.stopped == "caught up"
    assert any("reconnected" in r for r in report.recoveries), report.recoveries
    assert not any("loading the snapshot again" in r for r in report.recoveries)
    assert any(re.fullmatch(r"resumed emp at chunk \d+ of \d+", n) for n in report.notes), (
        report.notes
    )
    assert [t.table for t in report.loaded] == ["dept", "emp", "tag", "stats"]
    assert report.loaded[1].rows == 3003
    _verify(binlog_db, redis_url)


class CuttingProxy:
    """A TCP proxy on a free port in front of a MySQL server; ``cut()`` drops every
    connection through it at once, as a network blip does."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> int:
        with self.lock:
            victims, self.open = self.open, []
        for s in victims:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        return len(victims) // 2

    def close(self) -> None:
        self.listener.close()
        self.cut()


def test_a_network_blip_is_ridden_out(binlog_db, binlog_server, redis_url) -> None:  # type: ignore[no-untyped-def]
    if not isinstance(binlog_server, PrivateMariaDB):
        pytest.skip("a proxy in front of a server of the tests' own")
    binlog_db.run(SCHEMA)
    proxy = CuttingProxy(binlog_server.port)
    try:
        url = binlog_db.url.replace(f":{binlog_server.port}/", f":{proxy.port}/")
        through = SimpleNamespace(url=url, run=binlog_db.run)  # every connection via the proxy
        run = Following(through, redis_url)
        client = redis.Redis.from_url(redis_url)
        for seed in (75, 76):
            write_random(binlog_db, seed, 30)
            _reach_head(binlog_db, client, run)  # (after the last cut: on new connections)
            assert proxy.cut() >= 1
        write_random(binlog_db, 77, 30)
        _reach_head(binlog_db, client, run)
        report = run.finish()
        assert any("reconnected" in r for r in report.recoveries), report.recoveries
        _caught_up(through, redis_url)
    finally:
        proxy.close()


@pytest.fixture
def own_mariadb() -> Iterator[PrivateMariaDB]:
    with running_mariadb() as server:
        yield server


def test_a_mysql_restart_is_ridden_out(own_mariadb, redis_url) -> None:  # type: ignore[no-untyped-def]
    db = create_database(own_mariadb.url, "mig_t_restart")
    db.run(SCHEMA)
    run = Following(db, redis_url)
    write_random(db, 81, 30)
    run.wait_applied(1)
    own_mariadb.restart(down=0.5)
    write_random(db, 82, 30)
    wait_for("writes after the restart applied", lambda: run.applied >= 40 or run.error, 60)
    report = run.finish()
    assert any("reconnected" in r for r in report.recoveries), report.recoveries
    _caught_up(db, redis_url)


def _cli_setup(
    db: Any, url: str, tmp_path: Path, options: str = FAST
) -> tuple[list[str], dict[str, str]]:
    mapping = tmp_path / "m.yaml"
    mapping.write_text(MAPPING + options)
    env = {**os.environ, "MIGRATOR_SYNC_SERVER_ID": str(next(_ids))}
    return ["sync", str(mapping), "--source", db.url, "--target", url], env


def test_a_source_down_past_the_retries_is_exit_3_with_the_position_and_command(
    own_mariadb, redis_url, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    db = create_database(own_mariadb.url, "mig_t_down")
    db.run(SCHEMA)
    base, env = _cli_setup(db, redis_url, tmp_path)
    subprocess.run(cli(*base, "--until-caught-up"), env=env, check=True, capture_output=True)
    proc = subprocess.Popen(cli(*base, "--json", "--retries", "2"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        assert '"status"' in proc.stdout.readline()
        own_mariadb.halt()
        out, err = proc.communicate(timeout=60)  # never reconnecting forever
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 3, err
    lines = [json.loads(line) for line in out.splitlines()]  # every line one object
    assert any(line.get("status", {}).get("note") for line in lines), lines
    failure = lines[-1]
    assert failure["exit_code"] == 3
    assert "mysql-bin." in failure["hint"] and "migrator sync" in failure["hint"]
    assert "unexpected" not in err
    own_mariadb.restart()
    write_random(db, 83, 30)
    done = subprocess.run(cli(*base, "--until-caught-up"), env=env, capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    _verify(db, redis_url)


def test_a_killed_connection_without_retries_is_exit_3_never_1_or_2(
    binlog_db, binlog_server, redis_url
) -> None:  # type: ignore[no-untyped-def]
    if not isinstance(binlog_server, PrivateMariaDB):
        pytest.skip("KILLs connections of a server of the tests' own")
    binlog_db.run(SCHEMA)
    _caught_up(binlog_db, redis_url)
    run = Following(binlog_db, redis_url, retries=0)
    # once sync's binlog dump runs (on a busy machine it may start after the first status
    # line): a kill before it would meet only connections sync may open again
    wait_for("sync's binlog dump", lambda: _dumps(binlog_server), 60)
    wait_for("a connection killed", lambda: _kill_sync_connections(binlog_server, binlog_db), 30)
    run.thread.join(180)
    assert not run.thread.is_alive(), "sync still runs 180 s after its connection was killed"
    assert isinstance(run.error, ConnectError), run.error
    assert run.error.exit_code == 3
    assert "migrator sync" in (run.error.hint or "")
    assert log_base(binlog_db) in (run.error.hint or "")
    _caught_up(binlog_db, redis_url)


# -- item 6: one sync per mapping and target, --json, Ctrl-C -----------------------------------
def test_a_second_sync_is_refused_and_the_first_goes_on(binlog_db, redis_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    base, env = _cli_setup(binlog_db, redis_url, tmp_path)
    with following(base, env) as first:
        other = {**env, "MIGRATOR_SYNC_SERVER_ID": str(next(_ids))}
        second = subprocess.run(cli(*base, "--json", "--until-caught-up"), env=other,
                                capture_output=True, text=True, timeout=60)  # fmt: skip
        assert second.returncode == 2, second.stderr
        said = " ".join(second.stderr.split())
        assert "another sync" in said and "pid" in said, said
        failure = json.loads(second.stdout.strip())  # one object on one line
        assert "\n" not in second.stdout.strip() and failure["exit_code"] == 2
        binlog_db.run("INSERT INTO emp (email) VALUES ('after@second')")
        client = redis.Redis.from_url(redis_url)
        wait_for("the first applying on", lambda: client.exists("emp:4") or first.poll(), 60)
        assert first.poll() is None, "the first one is untouched"
        first.send_signal(signal.SIGTERM)
        first.wait(60)
        assert first.returncode == 0
    _caught_up(binlog_db, redis_url)


def _signalled_while_tag_is_locked(  # type: ignore[no-untyped-def]
    db, cmd: list[str], env: dict[str, str], what: str, ready: Any, sig: int
) -> tuple[subprocess.Popen[str], str, str]:
    """Run ``cmd`` while ``tag`` is held by LOCK TABLES, so that its load cannot end
    however fast it is; send ``sig`` once ``ready()``, then let the table go. The process
    and its (stdout, stderr); killed for sure if still running."""
    holder = db.connect(client_flag=0)
    proc = None
    try:
        with holder.cursor() as cur:
            cur.execute("LOCK TABLES tag WRITE")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        try:
            wait_for(what, lambda: proc.poll() is not None or ready(), 120)
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(sig)
        finally:
            with holder.cursor() as cur:
                cur.execute("UNLOCK TABLES")
        out, err = proc.communicate(timeout=60)
        return proc, out, err
    finally:
        holder.close()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_in_the_first_load_is_130_and_the_next_run_loads_again(
    binlog_db, redis_url, tmp_path, sig
) -> None:  # type: ignore[no-untyped-def]
    """``--consistent-load``: nothing of an interrupted load is stored. ``tag`` is held by
    LOCK TABLES, so the signal surely comes while the load is under way, however fast."""
    binlog_db.run(SCHEMA)
    _many_rows(binlog_db, 3000)
    base, env = _cli_setup(binlog_db, redis_url, tmp_path, FAST + "  batch_size: 100\n")
    client = redis.Redis.from_url(redis_url)
    cmd = cli(*base, "--json", "--consistent-load")
    proc, out, err = _signalled_while_tag_is_locked(
        binlog_db, cmd, env, "the load writing", lambda: client.exists("emp:3003"), sig
    )
    assert proc.returncode == 130, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["exit_code"] == 130 and "loads again" in lines[-1]["hint"]
    assert "--consistent-load" in lines[-1]["hint"]
    assert "Traceback" not in err
    assert client.hget(STATE, "file") is None
    report = _caught_up(binlog_db, redis_url)
    assert report.snapshot is not None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_in_the_default_first_load_is_130_and_the_next_run_resumes_it(
    binlog_db, redis_url, tmp_path, sig
) -> None:  # type: ignore[no-untyped-def]
    """The online load (the default): exit 130, the position and the load's progress kept
    (the hint says where), and the next run reads only the tables left. ``tag`` is held by
    LOCK TABLES, so the signal surely comes while the load waits to read it."""
    binlog_db.run(SCHEMA)
    _many_rows(binlog_db, 3000)
    base, env = _cli_setup(binlog_db, redis_url, tmp_path)
    key = state_key("m")  # the mapping m.yaml's
    client = redis.Redis.from_url(redis_url)
    cmd = cli(*base, "--json", "--chunk-rows", "500")
    proc, out, err = _signalled_while_tag_is_locked(
        binlog_db, cmd, env, "the load at tag", lambda: _stored_head(client, key) == "tag", sig
    )
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    last = json.loads(out.splitlines()[-1])
    assert last["error"] == "interrupted" and last["exit_code"] == 130
    hint = " ".join(last["hint"].split())
    stored = client.hgetall(key)
    assert stored.get(b"file"), "the position is kept"
    left = json.loads(stored[b"snapshot"])
    assert [p["table"] for p in left] in (["tag", "stats"], ["stats"]), left
    p = left[0]
    said = f"({p['table']}: {p['chunk']} of {max(p['chunks'], p['chunk'])} chunk(s) loaded"
    assert said in hint and "resumes it there" in hint and "migrator sync" in hint, hint
    assert client.exists("emp:3003"), "the tables done before it are in Redis"
    done = subprocess.run(cli(*base, "--until-caught-up"), env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    rows = {"tag": 3, "stats": 2}
    assert (f"first load done online, every table read in primary-key chunks while following "
            f"the log {sum(rows[q['table']] for q in left)} rows in {len(left)} table(s) "
            "finished by this run (it resumed the load)") in text, text  # fmt: skip
    assert "caught up at binlog" in text and not client.hget(key, "snapshot")
    _verify(binlog_db, redis_url)


def _stored_head(client: redis.Redis, key: str) -> str:
    """The table the stored online load is at ("" when none)."""
    raw = client.hget(key, "snapshot")
    queue = json.loads(raw) if raw else []
    return str(queue[0]["table"]) if queue else ""


def test_a_lease_of_another_host_is_waited_out_then_taken(binlog_db, redis_url) -> None:  # type: ignore[no-untyped-def]
    """A sync killed with -9 elsewhere: its lease runs out (here shortened to 0.5 s once
    the refusal is seen: a lease that ran out before this sync asked would prove nothing)."""
    binlog_db.run(SCHEMA)
    client = redis.Redis.from_url(redis_url)
    held = json.dumps({"host": "elsewhere", "pid": 1, "since": "then", "id": "x"})
    client.set("migrator:synctest:sync:lock", held, px=LEASE_SECONDS * 1000)
    with pytest.raises(MigratorError) as caught:
        sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
    assert caught.value.exit_code == 2 and "elsewhere" in caught.value.message
    assert client.get("migrator:synctest:sync:lock") == held.encode(), "left untouched"
    assert client.pexpire("migrator:synctest:sync:lock", 500)
    wait_for("the lease to run out", lambda: not client.exists("migrator:synctest:sync:lock"), 30)
    _caught_up(binlog_db, redis_url)
    assert not client.exists("migrator:synctest:sync:lock"), "released at the end"


def test_ctrl_c_while_following_stops_with_exit_0(binlog_db, redis_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    base, env = _cli_setup(binlog_db, redis_url, tmp_path)
    with following(base, env) as proc:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["stopped"] == "stopped"


def test_the_default_server_id_is_the_mapping_and_target_s_own() -> None:
    one = default_server_id("shop", "redis://127.0.0.1:6379/0")
    assert one == default_server_id("shop", "redis://127.0.0.1:6379/0")
    assert one != default_server_id("shop", "redis://127.0.0.1:6379/1")
    assert one != default_server_id("shop2", "redis://127.0.0.1:6379/0")


def test_the_status_line_shows_a_retry() -> None:
    from migrator.render.sync import _status_line

    note = "retry 1/8 in 0.5s: MySQL (from mysql-bin.000001:4): lost the connection (2013)"
    line = _status_line(SyncStatus("following", "mysql-bin.000001:4", note=note)).plain
    assert note in line and "following" in line
