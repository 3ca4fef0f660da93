"""MySQL's online snapshot chunks begin their read only once every transaction up to the applied
position is visible (migrator/source/snapshot.py ``wait_visible``; docs/consistency.md): MySQL
writes a transaction to the binary log, where sync may read it, before InnoDB commits it."""

from __future__ import annotations

import time

import pytest

from migrator.errors import SourceError
from migrator.source.gtid_set import GtidSet
from migrator.source.snapshot import wait_visible
from tests.services import MySQLDatabase

pytestmark = pytest.mark.engine("mysql", why="MariaDB's snapshot has a log position of its own")


def _executed(db: MySQLDatabase) -> str:
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.gtid_executed")
            return str(cur.fetchone()[0]).replace("\n", "")
    finally:
        conn.close()


def test_a_chunk_waits_for_the_applied_gtids_and_no_longer(binlog_db: MySQLDatabase) -> None:
    binlog_db.run("CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1)")
    now = _executed(binlog_db)
    conn = binlog_db.connect(client_flag=0)
    try:
        t0 = time.monotonic()
        wait_visible(conn, now)  # committed: at once
        assert time.monotonic() - t0 < 1.0
        wait_visible(conn, "")  # the empty set: at once
        ahead = GtidSet.parse(now)
        ((uuid, _), spans), *_ = ahead.ranges.items()
        ahead.add(uuid, spans[-1][1] + 1000)  # a transaction the server has not executed
        with pytest.raises(SourceError) as caught:
            wait_visible(conn, str(ahead), seconds=1)
        assert "did not commit the transactions" in caught.value.message
    finally:
        conn.close()
