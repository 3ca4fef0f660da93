"""sync in a service's journal (issue 35 item 4): run as the installed ``migrator`` with stderr
a file (not a terminal), it logs a start line (the source's password masked), a status line
every ``--log-interval``, and one line per event — caught up, a DDL applied, a table read
again, a reload after Redis lost its data, a lost source connection or a stopped Redis
retried and back, its stop — as plain text without colour, or one
JSON object per line with ``--log-format json``. An applied ADD COLUMN moves
``migrator_sync_schema_changes_total``, never ``errors_total``. ``/healthz`` during the first
load gives the rows done, their total and the time left."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy.engine import make_url

from tests.binlog_server import READER, free_port
from tests.faults import redis_process, redis_server_problem, wait_for
from tests.services import url_text
from tests.sync.test_schema_changes import MAPPING, SCHEMA
from tests.sync.test_sync_faults import _kill_sync_connections
from tests.sync.test_sync_metrics import _get, scrape

_ids = iter(range(8900, 8950))
TEXT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (info|warning|error) [a-z_]+: \S")
ANSI = "\x1b["


def _shop(server: Any, db: Any, tmp_path: Path) -> tuple[Path, str]:
    """The schema and mapping of tests/sync/test_schema_changes.py; the mapping's path and
    the reader account's URL (it has a password) to the test's database."""
    db.run(SCHEMA)
    mapping = tmp_path / "shop.yaml"
    mapping.write_text(MAPPING)
    return mapping, url_text(make_url(server.reader_url).set(database=db.name))


@contextmanager
def running(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``migrator sync ARGS`` with stdout and stderr to files (not a terminal), killed for
    sure after the block."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.pop("MIGRATOR_SOURCE_URL", None)
    env.pop("MIGRATOR_TARGET_URL", None)
    env["MIGRATOR_SYNC_SERVER_ID"] = str(next(_ids))
    program = Path(sys.executable).parent / "migrator"
    with open(log, "wb") as err, open(log.with_suffix(".out"), "wb") as out:
        proc = subprocess.Popen([str(program), "sync", *args], stdout=out, stderr=err, env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def _lines(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8", errors="replace").splitlines()


def _said(log: Path, proc: subprocess.Popen[bytes], pattern: str, times: int = 1) -> list[str]:
    """Waits until ``times`` lines of the log match ``pattern`` (a failure at once when sync
    ended); returns them."""

    def found() -> list[str] | bool:
        hits = [x for x in _lines(log) if re.search(pattern, x)]
        return hits if len(hits) >= times else proc.poll() is not None

    got = wait_for(f"{pattern!r} in sync's log", found, 90)
    assert isinstance(got, list), f"sync ended (exit {proc.poll()}):\n" + "\n".join(_lines(log))
    return got


def _errors(metrics: dict[Any, float]) -> float:
    return sum(v for (name, _), v in metrics.items() if name == "migrator_sync_errors_total")


def test_a_run_off_a_terminal_logs_its_start_status_and_events(  # type: ignore[no-untyped-def]
    binlog_server, binlog_db, redis_url: str, tmp_path: Path
) -> None:
    mapping, source = _shop(binlog_server, binlog_db, tmp_path)
    port = free_port()
    log = tmp_path / "sync.log"
    args = [str(mapping), "--source", source, "--target", redis_url, "--log-interval", "0.5",
            "--metrics", f"127.0.0.1:{port}"]  # fmt: skip
    with running(args, log) as proc:
        (start,) = _said(log, proc, r" start: ")
        _said(log, proc, r" caught_up: ")
        before = scrape(port)
        # an unmapped column of item (columns: [name, qty]): applied, the stream goes on
        binlog_db.run("ALTER TABLE item ADD COLUMN extra INT")
        (ddl,) = _said(log, proc, r" ddl: item: ALTER TABLE item ADD COLUMN extra")
        after = scrape(port)
        # dept is mapped with all its columns: read again online
        binlog_db.run("ALTER TABLE dept ADD COLUMN region VARCHAR(10)")
        _said(log, proc, r" resnapshot: dept is read again")
        _said(log, proc, r" resnapshot_done: dept: ")
        redis.Redis.from_url(redis_url).flushdb()  # Redis lost its data: loaded again
        (reload,) = _said(log, proc, r" reload: Redis: the target lost data")
        _said(log, proc, r" loaded: first load done", times=2)  # the first run's, then this
        statuses = _said(log, proc, r" status: ", times=3)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, "\n".join(_lines(log))
    lines = _lines(log)
    text = "\n".join(lines)
    assert READER[1] not in text and READER[1] not in log.with_suffix(".out").read_text()
    assert ANSI not in text
    assert all(TEXT.match(x) or x.startswith(("progress ", "note: ")) for x in lines), text
    # the start line: the mapping, the source without its password, the target, the position
    assert str(mapping) in start and f"{READER[0]}:***@" in start and redis_url in start
    assert "no stored position: the tables are loaded first" in start, start
    assert re.search(r"following at \S+:\d+, lag [\d.]+ s, [\d,.]+ transactions/s, "
                     r"[\d,.]+ row changes/s, behind: ", " ".join(statuses)), statuses  # fmt: skip
    assert "at " in ddl and "applied" not in reload
    assert re.search(r" stop: stopped at \S+:\d+", lines[-1]) or any(
        " stop: stopped" in x for x in lines
    ), text
    # the applied ADD COLUMN: counted as a schema change, not as an error
    assert _errors(after) == _errors(before), (before, after)
    key = ("migrator_sync_schema_changes_total", (("effect", "apply"),))
    assert after.get(key, 0) == before.get(key, 0) + 1, after


def test_log_format_json_is_one_object_per_line(  # type: ignore[no-untyped-def]
    binlog_server, binlog_db, redis_url: str, tmp_path: Path
) -> None:
    mapping, source = _shop(binlog_server, binlog_db, tmp_path)
    log = tmp_path / "sync.jsonl"
    args = [str(mapping), "--source", source, "--target", redis_url, "--log-format", "json",
            "--log-interval", "0.5", "--json"]  # fmt: skip
    with running(args, log) as proc:
        _said(log, proc, r'"event": "caught_up"')
        binlog_db.run("ALTER TABLE item ADD COLUMN extra INT")
        _said(log, proc, r'"event": "ddl"')
        _said(log, proc, r'"event": "status"', times=2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, "\n".join(_lines(log))
    lines = _lines(log)
    assert READER[1] not in "\n".join(lines) and ANSI not in "\n".join(lines)
    records = [json.loads(x) for x in lines]  # every line an object: nothing else on stderr
    assert all(set(r) == {"time", "level", "event", "message", "fields"} for r in records)
    by = {r["event"]: r for r in records}
    assert {"start", "caught_up", "ddl", "status", "stop"} <= set(by), [r["event"] for r in records]
    assert by["start"]["fields"]["source"].startswith(f"mysql+pymysql://{READER[0]}:***@")
    assert by["start"]["fields"]["mapping"] == str(mapping)
    assert by["ddl"]["fields"]["table"] == "item" and by["ddl"]["fields"]["effect"] == "apply"
    status = by["status"]["fields"]
    assert {"phase", "position", "lag_seconds", "transactions_per_second",
            "row_changes_per_second", "behind_transactions", "behind_bytes"} <= set(
                status)  # fmt: skip
    # stdout keeps its contract: --json status objects, then the report
    out = [json.loads(x) for x in log.with_suffix(".out").read_text().splitlines()]
    assert all("status" in x for x in out[:-1]) and out[-1]["stopped"] == "stopped"


def test_healthz_during_the_first_load_gives_rows_total_and_time_left_then_a_stop_is_logged(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, tmp_path: Path
) -> None:
    """``tag`` is held by LOCK TABLES, so the load is surely under way, however fast: the
    tables before it are read, tag waits."""
    binlog_db.run(
        "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(20));"
        "CREATE TABLE tag (id INT PRIMARY KEY, v VARCHAR(20));"
        "INSERT INTO tag VALUES (1, 'a'), (2, 'b');"
    )
    conn = binlog_db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            for start in range(0, 3000, 500):
                cur.executemany("INSERT INTO big VALUES (%s, %s)",
                                [(i, f"v{i}") for i in range(start, start + 500)])  # fmt: skip
            conn.commit()
            cur.execute("ANALYZE TABLE big, tag")  # the row estimates the total is made of
            cur.fetchall()
    finally:
        conn.close()
    mapping = tmp_path / "m.yaml"
    mapping.write_text("version: 1\ntables:\n  big: {}\n  tag: {}\n")
    port = free_port()
    log = tmp_path / "sync.log"
    args = [str(mapping), "--source", binlog_db.url, "--target", redis_url, "--metrics",
            f"127.0.0.1:{port}", "--chunk-rows", "100"]  # fmt: skip
    holder = binlog_db.connect(client_flag=0)
    try:
        with holder.cursor() as cur:
            cur.execute("LOCK TABLES tag WRITE")
        with running(args, log) as proc:
            client = redis.Redis.from_url(redis_url)

            def loading() -> str | bool:
                if proc.poll() is not None:
                    return True
                text = _get(port, "/healthz")[1]
                # (big's last rows may be in Redis a moment before they are counted)
                return text if client.exists("big:2999") and "loaded 3,000 " in text else False

            said = wait_for("big loaded, tag waiting", loading, 90)
            assert proc.poll() is None, "\n".join(_lines(log))
            assert re.search(r"^ok: loading the snapshot, 2 table\(s\): loaded 3,000 of about "
                             r"[\d,]+ rows \(\d+%\), about [\d,]+ s left", said), said  # fmt: skip
            # stopped before the load is done: exit 130, logged before it is printed
            proc.send_signal(signal.SIGTERM)
            with holder.cursor() as cur:
                cur.execute("UNLOCK TABLES")
            assert proc.wait(60) == 130, "\n".join(_lines(log))
        lines = _lines(log)
        (at,) = [i for i, x in enumerate(lines) if TEXT.match(x) and " interrupted: " in x]
        assert " error interrupted: stopped before the first load was done" in lines[at]
        assert lines[at + 1] == "error: interrupted", lines
    finally:
        holder.close()


@pytest.mark.engine("mariadb", why="KILLs every connection of sync's: a server of the test's own")
def test_a_lost_source_connection_is_logged_with_its_retry_and_reconnect(  # type: ignore[no-untyped-def]
    binlog_server, binlog_db, redis_url: str, tmp_path: Path
) -> None:
    binlog_db.run(SCHEMA)
    mapping = tmp_path / "shop.yaml"
    mapping.write_text(MAPPING)
    log = tmp_path / "sync.log"
    with running([str(mapping), "--source", binlog_db.url, "--target", redis_url], log) as proc:
        _said(log, proc, r" caught_up: ")
        wait_for("a KILL", lambda: _kill_sync_connections(binlog_server, binlog_db), 10)
        binlog_db.run("INSERT INTO item (name, qty) VALUES ('after', 1)")
        (retry,) = _said(log, proc, r" warning retry: source failed \(1 in a row\): ")
        _said(log, proc, r" reconnected: following the binary log again from \S+:\d+")
        _said(log, proc, r" caught_up: ", times=2)  # the new reader's
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, "\n".join(_lines(log))
    assert retry.endswith("; retrying"), retry


@pytest.mark.skipif(redis_server_problem() is not None, reason="no redis-server")
@pytest.mark.engine("mariadb", why="Redis stopped and started again: the source plays no part")
def test_redis_stopped_and_back_is_logged_and_its_password_is_not(  # type: ignore[no-untyped-def]
    binlog_db, tmp_path: Path
) -> None:
    binlog_db.run(SCHEMA)
    mapping = tmp_path / "shop.yaml"
    mapping.write_text(MAPPING)
    log = tmp_path / "sync.log"
    with redis_process(tmp_path, appendonly=True, password="redis-pw-77") as target:
        url = f"redis://:redis-pw-77@127.0.0.1:{target.port}/0"
        with running([str(mapping), "--source", binlog_db.url, "--target", url], log) as proc:
            (start,) = _said(log, proc, r" start: ")
            _said(log, proc, r" caught_up: ")
            target.stop()  # its data kept in its append-only file
            binlog_db.run("INSERT INTO item (name, qty) VALUES ('while down', 1)")
            _said(log, proc, r" warning retry: Redis failed \(2 in a row\): ")
            target.start()
            _said(log, proc, r" recovered: Redis answers again after \d+ failure\(s\)")
            # another server (its run id): it vouches for the position its AOF kept
            _said(
                log,
                proc,
                r" warning target_lost: Redis: the target lost data .*; continuing from the",
            )
            _said(log, proc, r" caught_up: ", times=2)  # the new reader's
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, "\n".join(_lines(log))
    assert "redis-pw-77" not in log.read_text() and f":***@127.0.0.1:{target.port}" in start
