"""Fixtures for the sync tests, on each server with the row binary log (``binlog_server`` in
tests/conftest.py: a private MariaDB, and the session's Oracle MySQL; tests/engines.py).

* ``binlog_db`` -> :class:`tests.services.MySQLDatabase`: a fresh database on that server,
  dropped after the test (marked ``integration`` through ``binlog_server``).
* ``own_source`` -> a private server of each engine (``PrivateMariaDB``, ``PrivateMySQL``) of
  the test's own, which it may stop, kill or restart; removed after it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.binlog_server import PrivateMariaDB, missing
from tests.engines import BinlogServer
from tests.mysql_server import PrivateMySQL, mysql_problem
from tests.services import MySQLDatabase, create_database, drop_database, new_database_name


@pytest.fixture
def binlog_db(binlog_server: BinlogServer) -> Iterator[MySQLDatabase]:
    db = create_database(binlog_server.url, new_database_name())
    try:
        yield db
    finally:
        drop_database(binlog_server.url, db.name)


@pytest.fixture(params=["mariadb", "mysql"])
def own_source(request: pytest.FixtureRequest) -> Iterator[PrivateMariaDB | PrivateMySQL]:
    """A private server of the engine (the tests shut it down)."""
    problem = missing() if request.param == "mariadb" else mysql_problem()
    if problem:
        pytest.skip(problem)
    server = PrivateMariaDB() if request.param == "mariadb" else PrivateMySQL()
    server.start()
    try:
        yield server
    finally:
        server.stop()
