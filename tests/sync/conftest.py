"""Fixtures for the sync tests: a private MariaDB with the row binary log (tests/binlog_server.py).

* ``binlog_server`` (session) -> :class:`tests.binlog_server.PrivateMariaDB`, started once on a
  free port in a temporary directory and stopped (directory removed) at the end of the session;
  skipped with the reason when mariadbd is not installed.
* ``binlog_db`` -> :class:`tests.services.MySQLDatabase`: a fresh database on that server,
  dropped after the test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.binlog_server import PrivateMariaDB, missing
from tests.services import MySQLDatabase, create_database, drop_database, new_database_name


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if {"binlog_server", "binlog_db"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def binlog_server() -> Iterator[PrivateMariaDB]:
    problem = missing()
    if problem:
        pytest.skip(f"no private MariaDB with a binary log: {problem}")
    server = PrivateMariaDB()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def binlog_db(binlog_server: PrivateMariaDB) -> Iterator[MySQLDatabase]:
    db = create_database(binlog_server.url, new_database_name())
    try:
        yield db
    finally:
        drop_database(binlog_server.url, db.name)
