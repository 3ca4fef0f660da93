"""The two engines every integration test runs on (README.md, "Tests"), and where each comes from.

* ``mariadb``: the server at ``MIGRATOR_TEST_MYSQL_URL`` (the project's machines: MariaDB 10.11
  on 3306, binary log off), else a ``mariadb:10.11`` container where Docker answers; the binlog
  tests start a private ``mariadbd`` (tests/binlog_server.py).
* ``mysql``: Oracle MySQL, one server per session with the row binary log and GTIDs on, used by
  the plain and the binlog tests alike: ``MIGRATOR_TEST_ORACLE_MYSQL_URL`` (a server of yours,
  root with every privilege, ``log_bin`` and ``gtid_mode`` on, for tests alone: they make
  accounts and set globals there as on the servers they start), else a private MySQL 9.7 the
  session starts with scripts/mysql-server.sh (tests/mysql_server.py), else ``mysql:8.0`` in a
  container where Docker answers.

``MIGRATOR_TEST_ENGINES`` (``mariadb``, ``mysql`` or both, comma-separated; default both) keeps
only some; the other engine's variants are deselected.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

from sqlalchemy.engine import make_url

from tests.binlog_server import MySQL8Container, PrivateMariaDB
from tests.mysql_server import PrivateMySQL, mysql_problem
from tests.services import (
    Unavailable,
    docker_problem,
    make_safe,
    mysql_connect,
    probe_mysql,
    server_url,
)

ENGINES = ("mariadb", "mysql")
ENGINES_ENV = "MIGRATOR_TEST_ENGINES"
ORACLE_ENV = "MIGRATOR_TEST_ORACLE_MYSQL_URL"
MARIADB_IMAGE = "mariadb:10.11"
# like the project's shared server: binary log off (the binlog tests start their own)
MARIADB_OPTIONS = ("--character-set-server=utf8mb4",)


def engines_selected() -> tuple[str, ...]:
    raw = os.environ.get(ENGINES_ENV, "").strip()
    if not raw:
        return ENGINES
    chosen = tuple(e.strip() for e in raw.split(",") if e.strip())
    unknown = [e for e in chosen if e not in ENGINES]
    if unknown:
        raise ValueError(
            f"{ENGINES_ENV}: unknown engine {unknown[0]!r}; say {' or '.join(ENGINES)}"
        )
    return chosen


def server_facts(url: str) -> dict[str, str]:
    """VERSION(), @@log_bin and @@gtid_mode (MariaDB has no gtid_mode: "")."""
    conn = mysql_connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION(), @@log_bin")
            version, log_bin = cur.fetchone() or ("", 0)
            gtid = ""
            if "mariadb" not in str(version).lower():
                cur.execute("SELECT @@gtid_mode")
                gtid = str((cur.fetchone() or ("",))[0])
    finally:
        conn.close()
    return {"version": str(version), "log_bin": str(log_bin), "gtid_mode": gtid}


def wrong_engine(url: str, expected: str, env: str) -> str | None:
    """Why the server at ``url`` is not of engine ``expected``, or None."""
    version = server_facts(url)["version"]
    is_mariadb = "mariadb" in version.lower()
    if is_mariadb == (expected == "mariadb"):
        return None
    other = ORACLE_ENV if expected == "mariadb" else "MIGRATOR_TEST_MYSQL_URL"
    return (
        f"the {expected} engine's server is {version}; {env} names the {expected} server"
        f" (an Oracle MySQL goes in {other})"
        if expected == "mariadb"
        else f"the {expected} engine's server is {version}; {env} names an Oracle MySQL"
        f" (a MariaDB goes in {other})"
    )


@dataclass
class GivenMySQL:
    """An Oracle MySQL of the user's (``MIGRATOR_TEST_ORACLE_MYSQL_URL``)."""

    kind: ClassVar[str] = "mysql"
    url: str
    reader_url: str = ""

    @property
    def port(self) -> int:
        return make_url(self.url).port or 3306


OracleMySQL = PrivateMySQL | MySQL8Container | GivenMySQL
BinlogServer = PrivateMariaDB | OracleMySQL


@contextmanager
def start_oracle_mysql() -> Iterator[OracleMySQL]:
    """The session's Oracle MySQL (see the module's docstring); raises Unavailable with why."""
    configured = os.environ.get(ORACLE_ENV)
    if configured:
        url = server_url(configured)
        problem = probe_mysql(url) or wrong_engine(url, "mysql", ORACLE_ENV)
        if not problem:
            facts = server_facts(url)
            if facts["log_bin"] != "1" or facts["gtid_mode"] != "ON":
                problem = f"wants log_bin=ON and gtid_mode=ON, has {facts}"
        if problem:
            raise Unavailable(f"{ORACLE_ENV}={make_safe(url)}: {problem}")
        yield GivenMySQL(url)
        return
    problem = mysql_problem()
    if problem is None:
        server = PrivateMySQL()
        try:
            try:
                server.start()
            except RuntimeError as e:
                raise Unavailable(f"the private MySQL did not start: {e}") from None
            yield server
        finally:
            server.stop()
        return
    docker = docker_problem()
    if docker:
        raise Unavailable(f"no Oracle MySQL: {ORACLE_ENV} is not set, {problem}, and {docker}")
    container = MySQL8Container()
    try:
        try:
            container.start()
        except Exception as e:
            raise Unavailable(f"could not start a mysql:8.0 container: {e}") from None
        yield container
    finally:
        container.stop()
