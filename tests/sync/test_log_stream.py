"""sync's own binary-log stream (source/binlog/stream.py, tables.py) on each server:
what a session may log besides plain row events — MySQL's compressed transactions are
applied; rows logged without all their columns (binlog_row_image=MINIMAL) and MariaDB's
compressed events stop sync with the setting named. Busy logs of other tables are skipped
without being applied (their transactions still advance the position)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import SourceError
from migrator.mapping.loader import parse_mapping
from tests.sync.workload import MAPPING, SCHEMA

_ids = iter(range(8600, 8700))


def _mapping():  # type: ignore[no-untyped-def]
    return parse_mapping(MAPPING, name="streamtest")


def _sync(db: Any, redis_url: str) -> Any:
    return sync(_mapping(), source=db.url, target=redis_url, until_caught_up=True,
                server_id=next(_ids))  # fmt: skip


def _run(db: Any, *statements: str) -> None:
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        conn.commit()
    finally:
        conn.close()


def _equal(db: Any, redis_url: str) -> None:
    report = verify(_mapping(), source=db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()


@pytest.mark.engine("mysql", why="binlog_transaction_compression is MySQL's (8.0.20+)")
def test_compressed_transactions_are_applied(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """MySQL logs a transaction of a session with binlog_transaction_compression=ON as one
    zstd-compressed Transaction_payload event: its row changes are applied like any other."""
    binlog_db.run(SCHEMA)
    _sync(binlog_db, redis_url)
    _run(binlog_db, "SET SESSION binlog_transaction_compression = ON",
         "INSERT INTO dept VALUES (40, 'zstd')",
         "UPDATE emp SET title = CONCAT(IFNULL(title, ''), 'z')",
         "DELETE FROM tag WHERE emp_id = 2")  # fmt: skip
    report = _sync(binlog_db, redis_url)
    assert report.rows_changed == 1 + 3 + 1, report.as_dict()
    _equal(binlog_db, redis_url)


def test_rows_logged_without_all_columns_stop_sync(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """A session with binlog_row_image=MINIMAL logs an UPDATE with the key as its before
    image and the changed columns as its after image: not enough to write the row."""
    binlog_db.run(SCHEMA)
    _sync(binlog_db, redis_url)
    _run(binlog_db, "INSERT INTO dept VALUES (41, 'before')")
    _run(binlog_db, "SET SESSION binlog_row_image = 'MINIMAL'",
         "UPDATE emp SET title = CONCAT(IFNULL(title, ''), 'm')")  # fmt: skip
    with pytest.raises(SourceError) as raised:
        _sync(binlog_db, redis_url)
    assert "binlog_row_image" in raised.value.message
    assert "FULL" in (raised.value.hint or "")
    # the transaction before it is applied (and stored with its position)
    client = redis.Redis.from_url(redis_url)
    assert client.hget("dept:41", "name") == b"before"


@pytest.mark.engine("mariadb", why="log_bin_compress is MariaDB's")
def test_mariadb_compressed_events_stop_sync(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    _sync(binlog_db, redis_url)
    try:
        _run(binlog_db, "SET GLOBAL log_bin_compress = ON",
             "SET GLOBAL log_bin_compress_min_len = 10")  # fmt: skip
        _run(binlog_db, "UPDATE emp SET note = REPEAT('x', 200)")
    finally:
        _run(binlog_db, "SET GLOBAL log_bin_compress = OFF")
    with pytest.raises(SourceError) as raised:
        _sync(binlog_db, redis_url)
    assert "log_bin_compress" in raised.value.message + (raised.value.hint or "")


def test_transactions_of_other_tables_only_advance_the_position(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    _run(binlog_db, "CREATE TABLE other_json (id INT PRIMARY KEY, v JSON)")
    first = _sync(binlog_db, redis_url)
    _run(binlog_db, *[f"INSERT INTO other_json VALUES ({i}, '[{i}]')" for i in range(50)],
         "UPDATE emp SET title = CONCAT(IFNULL(title, ''), 'o')")  # fmt: skip
    _run(binlog_db, "UPDATE other_json SET v = '{}'", "INSERT INTO other VALUES (9, 9)")
    report = _sync(binlog_db, redis_url)
    assert report.rows_changed == 3, report.as_dict()  # emp's three rows, not other's
    assert report.position is not None and first.position is not None
    assert report.position > first.position
    _equal(binlog_db, redis_url)
