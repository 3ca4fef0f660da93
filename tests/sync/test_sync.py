"""sync on each server with the row binary log (issue 12 item 7; ``binlog_server``: a private
MariaDB, and MySQL 8 in a container where Docker answers): random writes from several seeds
while it runs, kill -9 and restart, DDL, a reader with only the grants sync needs, and the
refusal of a server without a binary log. After each, ``verify`` must find Redis equal to MySQL."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import SourceError
from migrator.mapping.loader import parse_mapping
from migrator.reports import SchemaChanged
from migrator.store.sync_lock import lock_key
from migrator.store.sync_state import state_key
from migrator.sync.schema_watch import resnapshot_by_hand
from tests.faults import wait_for
from tests.mysql_server import PrivateMySQL
from tests.services import create_database, database_url
from tests.sync.helpers import cli, following, while_syncing, write_random
from tests.sync.workload import MAPPING, SCHEMA

_ids = iter(range(7100, 8000))


def _mapping(name: str = "synctest"):  # type: ignore[no-untyped-def]
    return parse_mapping(MAPPING, name=name)


def _verify(db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    report = verify(_mapping(), source=db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()


@pytest.mark.smoke
def test_first_run_loads_the_snapshot_then_follows(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    report = sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
                  server_id=next(_ids))  # fmt: skip
    assert report.snapshot is not None and report.snapshot.has_position
    assert report.online_load, "the default first load is online"
    assert [t.table for t in report.loaded] == ["dept", "emp", "tag", "stats"]
    assert sum(t.rows for t in report.loaded) == 3 + 3 + 3 + 2 + 0
    assert not report.resnapshots and report.stopped == "caught up"
    _verify(binlog_db, redis_url)
    write_random(binlog_db, 1, 150)
    again = sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
                 server_id=next(_ids))  # fmt: skip
    assert again.snapshot is None and again.transactions > 0
    _verify(binlog_db, redis_url)


@pytest.mark.parametrize("seeds", [(11, 12, 13), (21, 22)])
def test_random_writes_while_sync_runs(binlog_db, redis_url: str, seeds) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)

    def run(stop: threading.Event, status: Any) -> None:
        sync(_mapping(), source=binlog_db.url, target=redis_url, stop=stop,
             server_id=next(_ids), on_status=status)  # fmt: skip

    while_syncing(run, [functools.partial(write_random, binlog_db, s, 120) for s in seeds])
    # what the stopped follower had not applied yet is applied by a restart
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    _verify(binlog_db, redis_url)


def _cli_setup(db, redis_url: str, tmp_path: Path) -> tuple[list[str], dict[str, str]]:  # type: ignore[no-untyped-def]
    """The schema loaded; ``sync MAPPING --source --target`` and an env with a server id."""
    db.run(SCHEMA)
    mapping = tmp_path / "m.yaml"
    mapping.write_text(MAPPING)
    env = {**os.environ, "MIGRATOR_SYNC_SERVER_ID": str(next(_ids))}
    return ["sync", str(mapping), "--source", db.url, "--target", redis_url], env


def test_kill_9_mid_stream_then_restart(binlog_db, redis_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base, env = _cli_setup(binlog_db, redis_url, tmp_path)
    subprocess.run(cli(*base, "--until-caught-up"), env=env, check=True, capture_output=True)
    client = redis.Redis.from_url(redis_url)
    name = Path(base[1]).stem  # the mapping's: m.yaml
    loaded = client.hget(state_key(name), "pos")
    proc = subprocess.Popen(cli(*base, "--json"), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip

    def until(what: str, holds: Callable[[], object]) -> None:
        wait_for(what, lambda: holds() or proc.poll() is not None, 60)
        assert proc.poll() is None, proc.communicate()

    try:
        until("sync started", lambda: client.exists(lock_key(name)))
        writer = threading.Thread(target=write_random, args=(binlog_db, 31, 400))
        writer.start()
        # mid-stream: once it applied a group of the writes, whatever it is doing then
        until("sync applying the writes", lambda: client.hget(state_key(name), "pos") != loaded)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        writer.join()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    done = subprocess.run(cli(*base, "--until-caught-up", "--json"), env=env,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    _verify(binlog_db, redis_url)


def test_sigterm_stops_promptly(binlog_db, redis_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base, env = _cli_setup(binlog_db, redis_url, tmp_path)
    with following(base, env) as proc:  # the snapshot is loaded and it follows the log
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        # by design about 2 s (the stop is seen within 0.1 s, the log reader given at most 2 s);
        # the bound leaves room for a loaded host and still fails a wait for a read timeout
        # (30 s) or Redis' socket timeout (60 s)
        assert time.monotonic() - t0 < 15.0
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def test_ddl_on_a_mapped_table_stops_with_exit_1(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    binlog_db.run(
        "INSERT INTO emp (email) VALUES ('before@ddl'); "
        "ALTER TABLE other ADD COLUMN w INT; "  # not mapped: no stop
        "ALTER TABLE emp ADD COLUMN extra INT; INSERT INTO emp (email) VALUES ('after@ddl')"
    )
    with pytest.raises(SchemaChanged) as caught:
        sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids), resnapshot=resnapshot_by_hand)  # fmt: skip
    assert caught.value.exit_code == 1
    assert "emp" in caught.value.message and "ALTER TABLE emp" in caught.value.message
    # emp is mapped with all its columns: a re-snapshot of emp, which this hook leaves to
    # the user (sync's own re-reads it online: tests/sync/test_ddl_effects.py)
    assert "needs a re-snapshot" in caught.value.message
    assert "--resnapshot emp" in (caught.value.hint or "")
    # what came before the DDL was applied; the stored position is kept, before the DDL
    client = redis.Redis.from_url(redis_url)
    assert client.hget("emp:4", "email") == b"before@ddl"
    assert client.hget("migrator:synctest:sync", "file") and not client.exists("emp:5")
    # the way back: --reload removes what the mapping owns and loads a new snapshot (the
    # mapping still fits: its columns default to all, so the new one is written too)
    client.set("emp:999", "stale")  # a key the mapping owns that no row explains
    again = sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
                 server_id=next(_ids), reload=True)  # fmt: skip
    assert again.snapshot is not None and again.removed > 0
    assert not client.exists("emp:999")
    assert client.hget("emp:5", "email") == b"after@ddl"
    _verify(binlog_db, redis_url)
    client.close()


def test_a_changed_mapping_re_snapshots_only_its_changed_tables(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """No --reload: the changed table (emp) is re-read online, the others keep their keys."""
    binlog_db.run(SCHEMA)
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    client.hset("dept:1", "marker", "kept")  # not a change of dept: never reloaded
    changed = parse_mapping(MAPPING.replace("      - title\n", ""), name="synctest")
    report = sync(changed, source=binlog_db.url, target=redis_url, until_caught_up=True,
                  server_id=next(_ids))  # fmt: skip
    assert [t.table for t in report.resnapshots] == ["emp"]
    assert "re-snapshot of emp queued: its mapping changed" in report.notes
    assert client.hget("dept:1", "marker") == b"kept"
    client.hdel("dept:1", "marker")
    client.close()
    result = verify(changed, source=binlog_db.url, target=redis_url)
    assert result.exit_code == 0, result.as_dict()


def test_a_server_without_row_binlog_is_refused(engine: str, mysql_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """The shared MariaDB has its log off; the session's MySQL has it on, so on MySQL a
    server of the test's own is started without it (``--skip-log-bin``)."""
    own = PrivateMySQL(binlog=False) if engine == "mysql" else None
    try:
        db = mysql_db
        if own is not None:
            own.start()
            db = create_database(own.url, "mig_t_nolog")
        db.run("CREATE TABLE t (id INT PRIMARY KEY)")
        m = parse_mapping("version: 1\ntables:\n  t: {}\n")
        with pytest.raises(SourceError) as caught:
            sync(m, source=db.url, target=redis_url, until_caught_up=True)
    finally:
        if own is not None:
            own.stop()
    assert caught.value.exit_code == 2
    assert "log_bin" in caught.value.message and "--log-bin" in (caught.value.hint or "")


def test_sync_into_a_redis_cluster(binlog_db, redis_cluster) -> None:  # type: ignore[no-untyped-def]
    """On a Cluster a group is applied, then its position stored; a replay converges."""
    redis_cluster.flush()
    try:
        binlog_db.run(SCHEMA)
        target = redis_cluster.url
        sync(_mapping(), source=binlog_db.url, target=target, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
        write_random(binlog_db, 41, 150)
        first = sync(_mapping(), source=binlog_db.url, target=target, until_caught_up=True,
                     server_id=next(_ids))  # fmt: skip
        assert first.transactions > 0
        _verify(binlog_db, target)
        # a crash between a group and its position: the group is applied again
        node = redis.Redis.from_url(redis_cluster.url)
        state = redis.RedisCluster.from_url(redis_cluster.url)
        try:
            assert first.started_at is not None
            state.hset("migrator:synctest:sync", mapping={
                "file": first.started_at.file, "pos": str(first.started_at.pos)})  # fmt: skip
        finally:
            node.close()
            state.close()
        sync(_mapping(), source=binlog_db.url, target=target, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
        _verify(binlog_db, target)
    finally:
        redis_cluster.flush()


def test_missing_privileges_are_named_with_the_grant(
    binlog_db, binlog_server, redis_url: str
) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    user = f"ro_{binlog_db.name[-8:]}"
    binlog_db.run(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'; "
                  f"GRANT SELECT ON `{binlog_db.name}`.* TO '{user}'@'%'")  # fmt: skip
    try:
        url = binlog_db.url.replace("root@", f"{user}:pw@")
        with pytest.raises(SourceError) as caught:
            sync(_mapping(), source=url, target=redis_url, until_caught_up=True,
                 server_id=next(_ids))  # fmt: skip
        assert caught.value.exit_code == 2
        assert "REPLICATION SLAVE" in caught.value.message
        assert "REPLICATION CLIENT" in caught.value.message
        grants = "REPLICATION SLAVE, REPLICATION CLIENT, SELECT"  # no RELOAD on either engine
        assert f"GRANT {grants} ON *.*" in (caught.value.hint or "")
        assert "RELOAD" not in caught.value.message
        assert "pw" not in str(caught.value)
    finally:
        binlog_db.run(f"DROP USER '{user}'@'%'")


def test_a_reader_with_the_grants_sync_needs(binlog_db, binlog_server, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """The reader account (tests/binlog_server.py, READER_GRANTS) loads the snapshot, with its
    log position, and follows the log."""
    binlog_db.run(SCHEMA)
    url = database_url(binlog_server.reader_url, binlog_db.name)
    first = sync(_mapping(), source=url, target=redis_url, until_caught_up=True,
                 server_id=next(_ids))  # fmt: skip
    assert first.snapshot is not None and first.snapshot.has_position, first.snapshot
    write_random(binlog_db, 51, 100)
    again = sync(_mapping(), source=url, target=redis_url, until_caught_up=True,
                 server_id=next(_ids))  # fmt: skip
    assert again.transactions > 0
    _verify(binlog_db, redis_url)


def test_statement_logged_change_of_a_mapped_table_stops(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    # an unrelated table, then DDL of its own as the last event: nothing to stop for
    binlog_db.run("SET SESSION binlog_format = 'STATEMENT'; UPDATE other SET v = 1; "
                  "CREATE TABLE extra (id INT PRIMARY KEY)")  # fmt: skip
    done = sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
                server_id=next(_ids))  # fmt: skip
    assert done.stopped == "caught up"
    binlog_db.run("SET SESSION binlog_format = 'STATEMENT'; UPDATE emp SET title = 'x'")
    with pytest.raises(SchemaChanged) as caught:
        sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
    assert "statement" in caught.value.message and "binlog_format" in (caught.value.hint or "")


def test_json_is_one_object_per_line(binlog_db, redis_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base, env = _cli_setup(binlog_db, redis_url, tmp_path)
    done = subprocess.run(
        cli(*base, "--until-caught-up", "--json"),
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["status"]["phase"] == "loading"
    report = lines[-1]
    assert report["stopped"] == "caught up" and report["snapshot"]["binlog_file"]
    assert sum(t["rows"] for t in report["loaded"]) == 11
    assert report["online_load"] is True and report["resnapshots"] == []
    statuses = [line["status"] for line in lines[:-1]]
    # "loading" until the online load's last table is done, never after it
    phases = [s["phase"] for s in statuses]
    assert phases == sorted(phases, key=lambda p: p != "loading"), phases
