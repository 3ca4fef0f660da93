"""Fixtures for the sync tests, on each server with the row binary log (``binlog_server`` in
tests/conftest.py: a private MariaDB, and the session's Oracle MySQL; tests/engines.py).

* ``binlog_db`` -> :class:`tests.services.MySQLDatabase`: a fresh database on that server,
  dropped after the test (marked ``integration`` through ``binlog_server``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engines import BinlogServer
from tests.services import MySQLDatabase, create_database, drop_database, new_database_name


@pytest.fixture
def binlog_db(binlog_server: BinlogServer) -> Iterator[MySQLDatabase]:
    db = create_database(binlog_server.url, new_database_name())
    try:
        yield db
    finally:
        drop_database(binlog_server.url, db.name)
