"""A primary and a replica of our own, for the failover tests: MariaDB GTID replication
(``ReplicaPair``: two private mariadbd, tests/binlog_server.py) or Oracle MySQL GTID
auto-position (``MySQLReplicaPair``: two private MySQL 9.7, tests/mysql_server.py).

``start()`` starts both servers, each with its binary log and logging what it applies, the
replica with other log file names (``replica-bin``) and its own server id, replicating from the
primary (MariaDB: ``master_use_gtid=slave_pos``; MySQL: ``SOURCE_AUTO_POSITION=1`` over TLS, as
root's ``caching_sha2_password`` needs TLS or the server's key). ``caught_up()`` waits until the
replica holds every GTID the primary logged; ``pause()`` stops the replication (the replica then
misses what follows); ``promote()`` stops the primary and makes the replica a primary of its own
(``RESET ... ALL``): the same GTIDs, other file names and offsets; ``gtid(server)`` is the
server's GTID state (MariaDB ``gtid_binlog_pos``, MySQL's executed set). ``stop()`` stops both
and removes their directories. ``on``, ``stored`` and ``follow`` are the failover tests' shared
steps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import redis

from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.store.sync_state import state_key
from tests.binlog_server import PrivateMariaDB
from tests.mysql_server import PrivateMySQL
from tests.services import MySQLDatabase, database_url
from tests.sync.workload import MAPPING

SECONDS = 30.0


class Server(Protocol):
    url: str
    port: int

    def connect(self) -> Any: ...
    def start(self) -> Any: ...
    def stop(self) -> None: ...


def value(server: Server, sql: str, args: tuple[Any, ...] | None = None) -> Any:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            row = cur.fetchone()
            return row[0] if row else None
    finally:
        conn.close()


def run(server: Server, *statements: str) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()


class _Pair:
    """What both engines' pairs do alike; a subclass names its statements and GTID state."""

    primary: Server
    replica: Server
    STOP: ClassVar[str]
    RESET: ClassVar[str]

    def replicate(self) -> list[str]:
        raise NotImplementedError

    def gtid(self, server: Server) -> str:
        raise NotImplementedError

    def caught_up(self) -> str:
        raise NotImplementedError

    def start(self) -> Any:
        try:
            self.primary.start()
            self.replica.start()
            run(self.replica, *self.replicate())
        except BaseException:
            self.stop()
            raise
        return self

    def pause(self) -> None:
        run(self.replica, self.STOP)

    def promote(self) -> None:
        self.primary.stop()
        run(self.replica, self.STOP, self.RESET)

    def stop(self) -> None:
        self.replica.stop()
        self.primary.stop()


@dataclass
class ReplicaPair(_Pair):
    primary: PrivateMariaDB = field(
        default_factory=lambda: PrivateMariaDB(server_id=1, options=("--log-slave-updates",))
    )
    replica: PrivateMariaDB = field(
        default_factory=lambda: PrivateMariaDB(
            server_id=2, log_bin="replica-bin", options=("--log-slave-updates",)
        )
    )
    STOP: ClassVar[str] = "STOP SLAVE"
    RESET: ClassVar[str] = "RESET SLAVE ALL"

    def replicate(self) -> list[str]:
        return [
            f"CHANGE MASTER TO master_host='127.0.0.1', master_port={self.primary.port}, "
            "master_user='root', master_use_gtid=slave_pos",
            "START SLAVE",
        ]

    def gtid(self, server: Server) -> str:
        return str(value(server, "SELECT @@GLOBAL.gtid_binlog_pos") or "")

    def caught_up(self) -> str:
        """Wait until the replica's log holds the primary's last GTIDs; returns them."""
        deadline = time.monotonic() + SECONDS
        while True:
            want = self.gtid(self.primary)
            if value(self.replica, "SELECT @@GLOBAL.gtid_slave_pos") == want:
                return want
            if time.monotonic() > deadline:
                raise AssertionError(f"the replica did not reach {want} within {SECONDS}s")
            time.sleep(0.05)


@dataclass
class MySQLReplicaPair(_Pair):
    primary: PrivateMySQL = field(default_factory=lambda: PrivateMySQL(server_id=1))
    replica: PrivateMySQL = field(
        default_factory=lambda: PrivateMySQL(server_id=2, log_bin="replica-bin")
    )
    STOP: ClassVar[str] = "STOP REPLICA"
    RESET: ClassVar[str] = "RESET REPLICA ALL"

    def replicate(self) -> list[str]:
        return [
            f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', "
            f"SOURCE_PORT={self.primary.port}, SOURCE_USER='root', SOURCE_PASSWORD='', "
            "SOURCE_AUTO_POSITION=1, SOURCE_SSL=1",
            "START REPLICA",
        ]

    def gtid(self, server: Server) -> str:
        return str(value(server, "SELECT @@GLOBAL.gtid_executed") or "").replace("\n", "")

    def caught_up(self) -> str:
        """Wait until the replica executed the primary's GTIDs; returns them."""
        want = self.gtid(self.primary)
        done = value(self.replica, "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)", (want, SECONDS))
        if done != 0:
            status = value(self.replica, "SELECT @@GLOBAL.gtid_executed")
            raise AssertionError(f"the replica did not reach {want} within {SECONDS}s: {status}")
        return want


def on(server: Server, name: str) -> MySQLDatabase:
    """The database ``name`` on one of the pair's servers."""
    return MySQLDatabase(name, database_url(server.url, name), server.url)


def follow(db: MySQLDatabase, target: str, name: str, reader: int) -> Any:
    """``sync --until-caught-up`` of the workload's mapping under ``name``."""
    return sync(parse_mapping(MAPPING, name=name), source=db.url, target=target,
                until_caught_up=True, server_id=reader)  # fmt: skip


def stored(target: str, name: str) -> dict[str, str]:
    """The position sync stored in Redis for the mapping ``name``."""
    client = redis.Redis.from_url(target)
    try:
        raw = client.hgetall(state_key(name))
    finally:
        client.close()
    return {k.decode(): v.decode() for k, v in raw.items()}
