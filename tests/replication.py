"""A primary and a replica of our own (MariaDB GTID replication), for the failover tests.

``ReplicaPair.start()`` starts two private mariadbd (tests/binlog_server.py), each with its
binary log and ``--log-slave-updates``, the replica with other log file names
(``replica-bin``) and its own server id, replicating from the primary with
``master_use_gtid=slave_pos``. ``caught_up()`` waits until the replica holds every GTID the
primary logged; ``pause()`` stops the replication (the replica then misses what follows);
``promote()`` stops the primary and makes the replica a primary of its own
(``STOP SLAVE; RESET SLAVE ALL``): the same GTIDs, other file names and offsets.
``stop()`` stops both and removes their directories.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tests.binlog_server import PrivateMariaDB

SECONDS = 30.0


def _value(server: PrivateMariaDB, sql: str) -> Any:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            row = cur.fetchone()
            return row[0] if row else None
    finally:
        conn.close()


def _run(server: PrivateMariaDB, *statements: str) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()


@dataclass
class ReplicaPair:
    primary: PrivateMariaDB = field(
        default_factory=lambda: PrivateMariaDB(server_id=1, options=("--log-slave-updates",))
    )
    replica: PrivateMariaDB = field(
        default_factory=lambda: PrivateMariaDB(
            server_id=2, log_bin="replica-bin", options=("--log-slave-updates",)
        )
    )

    def start(self) -> ReplicaPair:
        try:
            self.primary.start()
            self.replica.start()
            _run(
                self.replica,
                f"CHANGE MASTER TO master_host='127.0.0.1', master_port={self.primary.port}, "
                "master_user='root', master_use_gtid=slave_pos",
                "START SLAVE",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def gtid(self, server: PrivateMariaDB) -> str:
        return str(_value(server, "SELECT @@GLOBAL.gtid_binlog_pos") or "")

    def caught_up(self) -> str:
        """Wait until the replica's log holds the primary's last GTIDs; returns them."""
        deadline = time.monotonic() + SECONDS
        while True:
            want = self.gtid(self.primary)
            if _value(self.replica, "SELECT @@GLOBAL.gtid_slave_pos") == want:
                return want
            if time.monotonic() > deadline:
                raise AssertionError(f"the replica did not reach {want} within {SECONDS}s")
            time.sleep(0.05)

    def pause(self) -> None:
        _run(self.replica, "STOP SLAVE")

    def promote(self) -> None:
        self.primary.stop()
        _run(self.replica, "STOP SLAVE", "RESET SLAVE ALL")

    def stop(self) -> None:
        self.replica.stop()
        self.primary.stop()
