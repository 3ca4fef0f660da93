"""What a session can make the binary log carry that sync cannot apply exactly (issue 25 item 2):
refused at start when the server is set that way, and stopped on in the stream when one
session sets it for itself — never a change lost with an exit 0 (migrator/source/binlog/guard.py,
migrator/source/binlog/settings.py).

* MySQL's ``binlog_transaction_compression=ON``: sync's own stream (binlog/stream) unpacks a
  compressed transaction (python-mysql-replication yielded its GTID event and dropped its row
  changes); here one session writes a compressed transaction (two inserts and an update),
  another an ordinary insert, and both are applied.
* MySQL's ``binlog_row_value_options=PARTIAL_JSON``: an update logged with a JSON diff stops
  sync; an update of the same kind that logs the JSON whole (or unchanged) is applied.
* MariaDB's ``log_bin_compress=ON`` (global): its compressed events stop sync too.
* ``binlog_row_image`` MINIMAL and NOBLOB (a session setting on both engines) and
  ``binlog_row_metadata=MINIMAL`` (global) stop sync at the first such row change of a mapped
  table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import EXIT_USAGE, SourceError
from migrator.mapping.loader import parse_mapping
from migrator.source.binlog.guard import UnsafeLog
from tests.mysql_server import PrivateMySQL
from tests.services import MySQLDatabase, create_database

NAME = "guard"
MAPPING = """
version: 1
tables:
  doc:
    indexes: [kind]
"""
SCHEMA = """
CREATE TABLE doc (id INT PRIMARY KEY, kind VARCHAR(10), body JSON, data BLOB);
INSERT INTO doc VALUES (1, 'a', '{"n": 1, "tags": ["x"]}', 'one'), (2, 'b', '[]', 'two');
"""

_ids = iter(range(7400, 7500))


def _mapping() -> Any:
    return parse_mapping(MAPPING, name=NAME)


def _sync(db: MySQLDatabase, target: str, **kw: Any) -> Any:
    return sync(_mapping(), source=db.url, target=target, until_caught_up=True,
                server_id=next(_ids), **kw)  # fmt: skip


def _same(db: MySQLDatabase, target: str) -> bool:
    return verify(_mapping(), source=db.url, target=target).exit_code == 0


@pytest.fixture
def loaded(binlog_db: MySQLDatabase, redis_url: str) -> Iterator[MySQLDatabase]:
    binlog_db.run(SCHEMA)
    _sync(binlog_db, redis_url)
    assert _same(binlog_db, redis_url)
    yield binlog_db


def _session(db: MySQLDatabase, *statements: str) -> None:
    """One connection of its own runs ``statements`` (session settings die with it)."""
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        conn.commit()
    finally:
        conn.close()


def _global(db: MySQLDatabase, name: str, value: Any) -> Any:
    """SET GLOBAL name = value; returns the old value (as the server gave it)."""
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT @@GLOBAL.{name}")
            old = cur.fetchone()[0]
            cur.execute(f"SET GLOBAL {name} = %s", (value,))
        return old
    finally:
        conn.close()


def _stops(db: MySQLDatabase, target: str, *words: str) -> UnsafeLog:
    with pytest.raises(UnsafeLog) as caught:
        _sync(db, target)
    e = caught.value
    assert e.exit_code == EXIT_USAGE and "--reload" in (e.hint or "")
    for word in words:
        assert word in e.message + (e.hint or ""), (word, str(e))
    return e


@pytest.mark.engine("mysql", why="binlog_transaction_compression is MySQL's (8.0.20+)")
def test_a_compressed_transaction_is_applied(loaded: MySQLDatabase, redis_url: str) -> None:
    _session(loaded, "SET SESSION binlog_transaction_compression = ON", "BEGIN",
             "INSERT INTO doc VALUES (3, 'c', '{}', 'three')",
             "INSERT INTO doc VALUES (4, 'c', '{}', 'four')",
             "UPDATE doc SET kind = 'z' WHERE id = 1")  # fmt: skip
    _session(loaded, "INSERT INTO doc VALUES (5, 'e', NULL, NULL)")
    _sync(loaded, redis_url)
    assert _same(loaded, redis_url)


@pytest.mark.engine("mysql", why="tagged GTIDs are MySQL's (8.3+)")
def test_a_tagged_gtid_stops_sync(engine: str, redis_url: str) -> None:
    """On a MySQL of the test's own: a tagged GTID stays in @@gtid_executed for good."""
    own = PrivateMySQL()
    own.start()
    try:
        db = create_database(own.url, "mig_t_tagged")
        db.run(SCHEMA)
        _sync(db, redis_url)
        _session(db, "SET SESSION gtid_next = 'AUTOMATIC:batch'",
                 "INSERT INTO doc VALUES (3, 'c', NULL, NULL)")  # fmt: skip
        _stops(db, redis_url, "tagged GTID")
        assert not _same(db, redis_url)
        # a server that executed one is still followed from a new snapshot (under the
        # global read lock: the binlog library cannot ask for a tagged set)
        _sync(db, redis_url, reload=True)
        assert _same(db, redis_url)
    finally:
        own.stop()


@pytest.mark.engine("mariadb", why="log_bin_compress is MariaDB's")
def test_mariadb_compressed_events_stop_sync_and_are_refused_at_start(
    loaded: MySQLDatabase, redis_url: str
) -> None:
    old = _global(loaded, "log_bin_compress", "ON")
    try:
        with pytest.raises(SourceError) as refused:
            _sync(loaded, redis_url)
        assert "log_bin_compress is ON" in refused.value.message
        # events above log_bin_compress_min_len (256 bytes) are logged compressed
        _session(loaded, "INSERT INTO doc VALUES (3, 'c', NULL, REPEAT('x', 2000))")
    finally:
        _global(loaded, "log_bin_compress", old)
    _stops(loaded, redis_url, "compressed event", "log_bin_compress")
    assert not _same(loaded, redis_url)


@pytest.mark.engine("mysql", why="binlog_transaction_compression is MySQL's (8.0.20+)")
@pytest.mark.parametrize(
    ("name", "value"),
    [("binlog_row_value_options", "PARTIAL_JSON")],
)
def test_mysql_settings_that_log_inexactly_are_refused_at_start(
    binlog_db: MySQLDatabase, redis_url: str, name: str, value: str
) -> None:
    binlog_db.run(SCHEMA)
    old = _global(binlog_db, name, value)
    try:
        with pytest.raises(SourceError) as caught:
            _sync(binlog_db, redis_url)
    finally:
        _global(binlog_db, name, old)
    e = caught.value
    assert e.exit_code == EXIT_USAGE
    assert f"{name} is {value}" in e.message and f"SET GLOBAL {name}" in (e.hint or "")


@pytest.mark.engine("mysql", why="gtid_mode is MySQL's")
def test_mysql_without_gtids_is_refused_at_start(engine: str, redis_url: str) -> None:
    """A MySQL of the test's own started with gtid_mode=OFF (the session's has it ON)."""
    own = PrivateMySQL(options=("--gtid-mode=OFF", "--enforce-gtid-consistency=OFF"))
    own.start()
    try:
        db = create_database(own.url, "mig_t_nogtid")
        db.run(SCHEMA)
        with pytest.raises(SourceError) as caught:
            _sync(db, redis_url)
    finally:
        own.stop()
    e = caught.value
    assert e.exit_code == EXIT_USAGE and "gtid_mode is OFF, not ON" in e.message
    assert "Enabling GTID Transactions Online" in (e.hint or "")


@pytest.mark.engine("mysql", why="binlog_row_value_options is MySQL's (8.0.3+)")
def test_partial_json_updates_are_applied_when_whole_and_stop_sync_when_a_diff(
    loaded: MySQLDatabase, redis_url: str
) -> None:
    partial = "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'"
    # updates logged as partial-update events with the JSON whole or unchanged: applied
    _session(loaded, partial, "UPDATE doc SET kind = 'q' WHERE id = 2",
             "UPDATE doc SET body = '{\"whole\": true}', kind = 'r' WHERE id = 2")  # fmt: skip
    report = _sync(loaded, redis_url)
    assert report.rows_changed == 2 and _same(loaded, redis_url)
    # a JSON_SET logged as a diff of the document: stopped before it
    _session(loaded, partial, "UPDATE doc SET body = JSON_SET(body, '$.n', 2) WHERE id = 1")
    _stops(loaded, redis_url, "partial change", "binlog_row_value_options", "'body'")
    assert not _same(loaded, redis_url)


@pytest.mark.parametrize(
    ("image", "statement"),
    [
        ("MINIMAL", "UPDATE doc SET kind = 'm' WHERE id = 1"),
        ("MINIMAL", "INSERT INTO doc (id) VALUES (9)"),
        ("NOBLOB", "UPDATE doc SET kind = 'n' WHERE id = 2"),
    ],
)
def test_a_session_logging_partial_row_images_stops_sync(
    loaded: MySQLDatabase, redis_url: str, image: str, statement: str
) -> None:
    _session(loaded, "INSERT INTO doc VALUES (7, 'g', NULL, 'seven')")  # applied first
    _session(loaded, f"SET SESSION binlog_row_image = '{image}'", statement)
    _stops(loaded, redis_url, "without all of its columns", "binlog_row_image")
    assert not _same(loaded, redis_url)


def test_table_maps_without_column_names_stop_sync(loaded: MySQLDatabase, redis_url: str) -> None:
    old = _global(loaded, "binlog_row_metadata", "MINIMAL")
    try:
        _session(loaded, "UPDATE doc SET kind = 'k' WHERE id = 1")
    finally:
        _global(loaded, "binlog_row_metadata", old)
    _stops(loaded, redis_url, "names no columns", "binlog_row_metadata")
    assert not _same(loaded, redis_url)


def test_no_guard_stops_ordinary_changes(loaded: MySQLDatabase, redis_url: str) -> None:
    """The checks pass every change of a server set as sync needs (the other tests' control)."""
    _session(loaded, "INSERT INTO doc VALUES (3, 'c', '{}', REPEAT('x', 300))",
             "UPDATE doc SET data = 'blob', body = JSON_ARRAY(1) WHERE id = 2",
             "DELETE FROM doc WHERE id = 1")  # fmt: skip
    report = _sync(loaded, redis_url)
    assert report.rows_changed == 3 and _same(loaded, redis_url)
