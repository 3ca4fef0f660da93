"""Consistent snapshots (issue 11 item 1): what a snapshot sees, and the moment and binary-log
position it reports, on each engine's plain server (MariaDB's with the log off, MySQL's with it
on) and on the servers with the row log on (``binlog_server``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from typer.testing import CliRunner

from migrator.cli import app
from migrator.source.binlog.settings import log_status
from migrator.source.drivers import raw_connect
from migrator.source.mysql import parse_url
from migrator.source.snapshot import _mysql_snapshot, start_snapshot
from tests.engines import BinlogServer
from tests.services import MySQLDatabase


def _writer(url: str, database: str | None = None) -> pymysql.Connection:  # type: ignore[type-arg]
    u = parse_url(url)
    return pymysql.connect(
        host=u.host, port=u.port or 3306, user=u.username or "root",
        password=u.password or "", database=database, autocommit=True,
    )  # fmt: skip


def _count(conn: object, table: str) -> int:
    cursor = conn.cursor()  # type: ignore[attr-defined]
    cursor.execute(f"SELECT COUNT(*) FROM {table}")
    n = int(cursor.fetchone()[0])
    cursor.close()
    return n


@pytest.mark.parametrize("driver", ["asyncmy", "pymysql"])
def test_a_snapshot_does_not_see_later_writes(
    mysql_db: MySQLDatabase, driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGRATOR_RAW_DRIVER", driver)
    mysql_db.run("CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1), (2);")
    conn = raw_connect(parse_url(mysql_db.url), 10)
    try:
        snap = start_snapshot(conn)
        # MariaDB's shared server logs nothing; MySQL logs by default (and has GTIDs on)
        logs = mysql_db.query("SELECT @@log_bin")[0][0] == 1
        assert (snap.binlog_file is not None, snap.gtid is not None) == (logs, logs), snap
        assert snap.moment[:2] == "20" and len(snap.moment) == 26, snap.moment
        mysql_db.run("INSERT INTO t VALUES (3); DELETE FROM t WHERE id = 1;")
        assert _count(conn, "t") == 2  # still as of the snapshot
        again = start_snapshot(conn)  # a new snapshot sees the writes
        assert again.moment >= snap.moment
        assert _count(conn, "t") == 2
        cursor = conn.cursor()
        cursor.execute("SELECT MIN(id) FROM t")
        assert cursor.fetchone()[0] == b"2"
        cursor.close()
        with pytest.raises(Exception, match=r"(?i)read.only"):
            cursor = conn.cursor()
            cursor.execute("INSERT INTO t VALUES (9)")
    finally:
        conn.close()


Server = BinlogServer


def _log_end(admin: Any) -> tuple[str, int]:
    end = log_status(admin)
    assert end is not None, "the binary log is off"
    return end


@pytest.fixture
def logged(binlog_server: Server) -> Iterator[tuple[Any, str, str, int]]:
    """A database ``logged`` on the binlog server with a table t of two rows: (an autocommit
    cursor of the server, the database's URL, the binlog file and position after the load)."""
    admin = _writer(binlog_server.url)
    cur = admin.cursor()
    cur.execute("CREATE DATABASE logged")
    cur.execute("CREATE TABLE logged.t (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB")
    cur.execute("INSERT INTO logged.t VALUES (1, 'a'), (2, 'b')")
    file, pos = _log_end(admin)
    try:
        yield cur, binlog_server.url + "/logged", file, pos
    finally:
        cur.execute("DROP DATABASE logged")
        admin.close()


def test_snapshot_reports_the_binlog_position_and_gtid(
    logged: tuple[Any, str, str, int], binlog_server: Server
) -> None:
    cur, url, file, pos = logged
    if binlog_server.kind == "mariadb":
        cur.execute("SELECT @@gtid_binlog_pos")
    else:  # MySQL's GTID set (one line per server UUID; the snapshot joins them)
        cur.execute("SELECT @@GLOBAL.gtid_executed")
    gtid = cur.fetchone()[0].replace("\n", "")
    assert gtid
    conn = raw_connect(parse_url(url), 10)
    try:
        snap = start_snapshot(conn)
        assert (snap.binlog_file, snap.binlog_position, snap.gtid) == (file, pos, gtid)
        cur.execute("INSERT INTO logged.t VALUES (3, 'c')")  # the log moves on, not the snapshot
        assert _log_end(cur.connection)[1] > pos
        assert _count(conn, "t") == 2
        assert "binlog " + f"{file}:{pos}" in snap.describe() and gtid in snap.describe()
        assert snap.as_dict()["binlog_position"] == pos
    finally:
        conn.close()


def test_commands_report_the_snapshot_with_its_binlog_position(
    logged: tuple[Any, str, str, int], redis_url: str, tmp_path: Path
) -> None:
    """migrate, verify and dry-run --resp state the moment and binlog position they read at."""
    _, url, file, pos = logged
    path = tmp_path / "t.yaml"
    path.write_text("version: 1\ntables:\n  t: {}\n")
    for args in (
        ["migrate", str(path), "--workers", "1"],
        ["verify", str(path)],
        ["dry-run", str(path), "--resp", str(tmp_path / "load.resp")],
    ):
        result = CliRunner().invoke(app, [*args, "--source", url, "--target", redis_url, "--json"])
        assert result.exit_code == 0, result.output
        snap = json.loads(result.stdout)["snapshot"]
        assert (snap["binlog_file"], snap["binlog_position"]) == (file, pos), args
        assert snap["gtid"] and snap["moment"]
    result = CliRunner().invoke(
        app, ["migrate", str(path), "--source", url, "--target", redis_url, "--workers", "1"]
    )
    assert f"binlog {file}:{pos}" in " ".join(result.stdout.split()), result.stdout


def test_the_mysql_way_to_the_position_under_a_short_read_lock(
    logged: tuple[Any, str, str, int],
) -> None:
    """MySQL has no binlog_snapshot_* status: there the snapshot starts under FLUSH TABLES WITH
    READ LOCK and reads SHOW MASTER STATUS. That path gives the same position, on MySQL 8
    (where start_snapshot takes it) and on MariaDB (which has both); without the RELOAD
    privilege it gives none, and says why."""
    cur, url, file, pos = logged
    conn = raw_connect(parse_url(url), 10)
    try:
        snap = _mysql_snapshot(conn)
        assert (snap.binlog_file, snap.binlog_position) == (file, pos)
        cur.execute("INSERT INTO logged.t VALUES (4, 'd')")  # the lock was released
        assert _count(conn, "t") == 2
    finally:
        conn.close()
    cur.execute("CREATE USER 'reader'@'%' IDENTIFIED BY 'pw'")
    try:
        cur.execute("GRANT SELECT ON logged.* TO 'reader'@'%'")
        limited = url.replace("root@", "reader:pw@")
        conn = raw_connect(parse_url(limited), 10)
        try:
            snap = _mysql_snapshot(conn)
            assert snap.binlog_file is None and "FLUSH TABLES WITH READ LOCK" in (snap.note or "")
            assert _count(conn, "t") == 3  # still a snapshot, just without a position
        finally:
            conn.close()
    finally:
        cur.execute("DROP USER 'reader'@'%'")
