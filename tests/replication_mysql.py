"""A primary and a replica of our own in Oracle MySQL (GTID auto-position), for the failover tests.

``MySQLReplicaPair.start()`` starts two private MySQL servers (tests/mysql_server.py: binary
log and GTIDs on; a replica logs what it applies, MySQL's default), the replica with other
log file names (``replica-bin``) and its own server id and UUID, replicating from the primary
with ``SOURCE_AUTO_POSITION=1`` over TLS (root's ``caching_sha2_password`` needs TLS or the
server's key). The same interface as tests/replication.py's MariaDB pair: ``caught_up()``
waits until the replica executed every GTID the primary did; ``pause()`` stops the
replication; ``promote()`` stops the primary and makes the replica a primary of its own
(``STOP REPLICA; RESET REPLICA ALL``); ``gtid(server)`` is its ``@@GLOBAL.gtid_executed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.mysql_server import PrivateMySQL

SECONDS = 30.0


def _value(server: PrivateMySQL, sql: str, args: tuple[Any, ...] | None = None) -> Any:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            row = cur.fetchone()
            return row[0] if row else None
    finally:
        conn.close()


def _run(server: PrivateMySQL, *statements: str) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()


def executed(server: PrivateMySQL) -> str:
    return str(_value(server, "SELECT @@GLOBAL.gtid_executed") or "").replace("\n", "")


@dataclass
class MySQLReplicaPair:
    primary: PrivateMySQL = field(default_factory=lambda: PrivateMySQL(server_id=1))
    replica: PrivateMySQL = field(
        default_factory=lambda: PrivateMySQL(server_id=2, log_bin="replica-bin")
    )

    def start(self) -> MySQLReplicaPair:
        try:
            self.primary.start()
            self.replica.start()
            _run(
                self.replica,
                f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', "
                f"SOURCE_PORT={self.primary.port}, SOURCE_USER='root', SOURCE_PASSWORD='', "
                "SOURCE_AUTO_POSITION=1, SOURCE_SSL=1",
                "START REPLICA",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def gtid(self, server: PrivateMySQL) -> str:
        return executed(server)

    def caught_up(self) -> str:
        """Wait until the replica executed the primary's GTIDs; returns them."""
        want = executed(self.primary)
        done = _value(self.replica, "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)", (want, SECONDS))
        if done != 0:
            status = _value(self.replica, "SELECT @@GLOBAL.gtid_executed")
            raise AssertionError(f"the replica did not reach {want} within {SECONDS}s: {status}")
        return want

    def pause(self) -> None:
        _run(self.replica, "STOP REPLICA")

    def promote(self) -> None:
        self.primary.stop()
        _run(self.replica, "STOP REPLICA", "RESET REPLICA ALL")

    def stop(self) -> None:
        self.replica.stop()
        self.primary.stop()
