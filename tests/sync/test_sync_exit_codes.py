"""Exit codes that mean what the docs say (issue 27 item 3): Redis refusing writes for
``maxmemory`` is exit 4 — a condition to fix in Redis — with the position kept, so a plain
start goes on once Redis has room (before: exit 1, documented as "a DDL: fix the mapping, do
not restart"); the systemd unit of docs/sync.md does not restart on it (tests/
test_sync_service.py)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import EXIT_TARGET
from migrator.mapping.loader import parse_mapping
from migrator.reports import SyncStatus
from tests.binlog_server import PrivateMariaDB, missing, running_mariadb
from tests.faults import redis_process, redis_server_problem, wait_for
from tests.services import create_database
from tests.sync.helpers import cli, following
from tests.sync.workload import MAPPING, SCHEMA

pytestmark = pytest.mark.skipif(
    redis_server_problem() is not None or missing() is not None,
    reason=f"{redis_server_problem() or missing()}",
)

_ids = iter(range(9500, 9600))


def test_redis_out_of_memory_while_following_is_exit_4_with_the_position_kept(
    binlog_db: Any, tmp_path: Path
) -> None:
    binlog_db.run(SCHEMA)
    with redis_process(tmp_path, extra=("--maxmemory-policy", "noeviction")) as server:
        mapping = tmp_path / "m.yaml"
        mapping.write_text(MAPPING)
        base = ["sync", str(mapping), "--source", binlog_db.url, "--target", server.url]
        env = {**os.environ, "MIGRATOR_SYNC_SERVER_ID": str(next(_ids))}
        client = server.client()
        with following(base, env) as proc:
            stored = client.hget("migrator:m:sync", "pos")
            client.config_set("maxmemory", "1")  # below what it uses: every write refused
            binlog_db.run("INSERT INTO emp (email, login) VALUES ('oom@x', 'oom')")
            out, err = proc.communicate(timeout=120)
        assert proc.returncode == EXIT_TARGET, (out[-2000:], err[-2000:])
        last = json.loads(out.splitlines()[-1])
        assert last["exit_code"] == EXIT_TARGET and "OOM" in last["error"], last
        hint = " ".join(last["hint"].split())
        assert "maxmemory" in hint and "migrator sync" in hint and "Redis holds" in hint, hint
        assert client.hget("migrator:m:sync", "pos") == stored, "the position is kept"
        client.config_set("maxmemory", "0")
        done = subprocess.run(cli(*base, "--until-caught-up"), env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        m = parse_mapping(MAPPING, name="m")
        assert verify(m, source=binlog_db.url, target=server.url).exit_code == 0
        assert sync(m, source=binlog_db.url, target=server.url, until_caught_up=True,
                    server_id=next(_ids)).stopped == "caught up"  # fmt: skip


@pytest.fixture
def own_mariadb() -> Iterator[PrivateMariaDB]:
    with running_mariadb() as server:
        yield server


def test_a_mysql_restart_as_the_online_first_load_begins_is_ridden_out(
    own_mariadb: PrivateMariaDB, redis_url: str
) -> None:
    """MySQL stops as the first load begins and is down for a few seconds: the load's first
    retry meets no server, and its connection is opened inside the retry policy now (before:
    exit 3 after that one try, 'cannot connect'). The load rides it out and ends exact."""
    db = create_database(own_mariadb.url, "mig_t_first_restart")
    db.run(SCHEMA)
    m = parse_mapping(MAPPING + "options:\n  retries: {attempts: 30, backoff: 0.2, "
                      "max_backoff: 1}\n", name="m")  # fmt: skip
    started: list[threading.Thread] = []

    def on_status(status: SyncStatus) -> None:
        if status.phase == "loading" and not started:  # the first load begins: MySQL stops
            own_mariadb.halt()
            back = threading.Timer(3.0, own_mariadb.start)
            back.start()
            started.append(back)

    try:
        report = sync(m, source=db.url, target=redis_url, until_caught_up=True,
                      server_id=next(_ids), on_status=on_status)  # fmt: skip
    finally:
        for t in started:
            t.join()
    assert started and report.stopped == "caught up"
    assert verify(m, source=db.url, target=redis_url).exit_code == 0


@pytest.mark.parametrize("resnapshot", [False, True])
def test_a_mysql_restart_while_an_online_snapshot_reads_is_ridden_out(
    own_mariadb: PrivateMariaDB, redis_url: str, resnapshot: bool
) -> None:
    """MySQL restarts while the online first load (or a --resnapshot) reads its chunks: the
    next follower asks the server's kind on a new connection, opened inside the retries now
    (before: exit 3, 'cannot reach MySQL', after one try)."""
    db = create_database(own_mariadb.url, f"mig_t_chunk_restart_{int(resnapshot)}")
    db.run(
        "CREATE TABLE item (id INT PRIMARY KEY, name VARCHAR(40));"
        "INSERT INTO item SELECT seq, CONCAT('n', seq) FROM seq_1_to_20000;"
    )
    m = parse_mapping("version: 1\noptions:\n  retries: {attempts: 35, backoff: 0.2, "
                      "max_backoff: 2}\ntables:\n  item: {}\n", name="restart")  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    kw: dict[str, Any] = {"server_id": next(_ids), "chunk_rows": 2000}
    if resnapshot:
        sync(m, source=db.url, target=redis_url, until_caught_up=True, **kw)
        kw["resnapshot_tables"] = ["item"]

    def restart() -> None:
        while not json.loads(client.hget("migrator:restart:sync", "snapshot") or "[]"):
            time.sleep(0.02)  # the load (or the re-snapshot) of item is under way
        own_mariadb.halt()
        time.sleep(1.0)  # down for a second, as a restart on a busy host is
        own_mariadb.start()

    restarter = threading.Thread(target=restart)
    restarter.start()
    try:
        report = sync(m, source=db.url, target=redis_url, until_caught_up=True, **kw)
    finally:
        restarter.join(120)
    assert report.stopped == "caught up" and report.recoveries
    assert verify(m, source=db.url, target=redis_url).exit_code == 0


@pytest.mark.parametrize("empty", [False, True])
def test_a_stop_as_sync_recovers_from_a_redis_restart_is_never_an_unexpected_error(
    binlog_db: Any, tmp_path: Path, empty: bool
) -> None:
    """Ctrl-C (here: the stop event) just as sync recovers from Redis restarted from its AOF
    (issue 35 item 2): the online first load was done, so it is an asked-for stop, exit 0
    (before: exit 1, IndexError, reading the first table of an empty load queue). Restarted
    empty: the load begins again and the stop ends it with exit 130 and the command that
    resumes it. The next run ends caught up and exact either way."""
    binlog_db.run(SCHEMA)
    with redis_process(tmp_path, appendonly=True) as server:
        m = parse_mapping(MAPPING + "options:\n  retries: {attempts: 10, backoff: 0.2}\n",
                          name="m")  # fmt: skip
        stop = threading.Event()
        statuses: list[SyncStatus] = []
        outcome: list[BaseException | str] = []

        def on_status(status: SyncStatus) -> None:
            statuses.append(status)
            if status.note and "target lost data" in status.note:
                stop.set()  # Ctrl-C in the second the recovery takes

        def run() -> None:
            try:
                report = sync(m, source=binlog_db.url, target=server.url, stop=stop,
                              server_id=next(_ids), on_status=on_status,
                              status_interval=0.2)  # fmt: skip
                outcome.append(report.stopped)
            except BaseException as e:
                outcome.append(e)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        wait_for("sync following", lambda: any(s.phase == "caught up" for s in statuses), 60)
        server.restart(down=0.3, empty=empty)
        thread.join(120)
        assert not thread.is_alive() and stop.is_set(), statuses[-3:]
        (got,) = outcome
        if empty:  # exit 130: LoadInterrupted, or the interrupt of the load itself
            assert isinstance(got, KeyboardInterrupt), repr(got)
        else:
            assert got == "stopped", repr(got)
        report = sync(m, source=binlog_db.url, target=server.url, until_caught_up=True,
                      server_id=next(_ids))  # fmt: skip
        assert report.stopped == "caught up"
        assert verify(m, source=binlog_db.url, target=server.url).exit_code == 0
