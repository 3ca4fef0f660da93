"""Where sync starts on MySQL and what its online chunks wait for (migrator/source/snapshot.py;
docs/consistency.md): the first load (online or consistent) takes its position after
``@@gtid_executed`` without a lock (no RELOAD, no FLUSH TABLES WITH READ LOCK); each chunk
begins its read only once every transaction up to the applied position is visible
(``wait_visible``) — MySQL writes a transaction to the binary log, where sync may read it,
before InnoDB commits it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import SourceError
from migrator.mapping.loader import parse_mapping
from migrator.source.binlog.gtid_set import GtidSet
from migrator.source.snapshot import wait_visible
from tests.services import MySQLDatabase, url_text
from tests.sync.helpers import write_random
from tests.sync.workload import MAPPING, SCHEMA

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


NO_RELOAD = ("migrator_noreload", "noreload-pw")


@pytest.fixture
def no_reload(binlog_db: MySQLDatabase) -> Iterator[str]:
    """An account with sync's grants but RELOAD: the database's URL with it."""
    user, password = NO_RELOAD
    binlog_db.run(
        f"DROP USER IF EXISTS '{user}'@'%'; CREATE USER '{user}'@'%' IDENTIFIED BY "
        f"'{password}'; GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO "
        f"'{user}'@'%'"
    )
    try:
        yield url_text(make_url(binlog_db.url).set(username=user, password=password))
    finally:
        binlog_db.run(f"DROP USER IF EXISTS '{user}'@'%'")


@pytest.mark.parametrize("online", [True, False], ids=["online", "consistent"])
def test_the_first_load_needs_no_lock_and_is_exact_under_writes(
    binlog_db: MySQLDatabase, no_reload: str, redis_url: str, online: bool
) -> None:
    """By an account without RELOAD (FLUSH TABLES WITH READ LOCK refused), with a writer
    going on: the online load in chunks of 2 rows, or the consistent load in one snapshot."""
    binlog_db.run(SCHEMA)
    mapping = parse_mapping(MAPPING, name="nolock")
    writer = threading.Thread(target=write_random, args=(binlog_db, 31, 300))
    writer.start()
    try:
        report = sync(mapping, source=no_reload, target=redis_url, until_caught_up=True,
                      server_id=7990, chunk_rows=2, online_load=online)  # fmt: skip
    finally:
        writer.join()
    snap = report.snapshot
    assert snap is not None and snap.has_position and snap.note is None, snap
    assert GtidSet.parse(snap.gtid or "").ranges, snap  # the executed set it started after
    sync(mapping, source=no_reload, target=redis_url, until_caught_up=True, server_id=7990)
    result = verify(mapping, source=binlog_db.url, target=redis_url)
    assert result.exit_code == 0, result.as_dict()
