"""A source URL that points at a server which is not MySQL: one error, never a hang."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from migrator.errors import EXIT_CONNECT, ConnectError
from migrator.source.mysql import Source
from tests.faults import silent_server


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP server that accepts connections and says nothing (tests/faults.py)."""
    with silent_server() as server:
        yield server.port


def test_a_port_that_sends_no_greeting_is_an_error_after_the_timeout(silent_port: int) -> None:
    started = time.monotonic()
    with (
        Source(f"mysql+pymysql://root@127.0.0.1:{silent_port}/db", connect_timeout=1) as src,
        pytest.raises(ConnectError) as caught,
    ):
        src.schema()
    assert time.monotonic() - started < 30  # the timeout, not a hang (bound for a loaded host)
    assert "sent no MySQL greeting" in caught.value.message
    assert "MySQL listens on 3306" in (caught.value.hint or "")
    assert caught.value.exit_code == EXIT_CONNECT


def test_a_real_mysql_server_passes_the_greeting_check(mysql_db) -> None:  # type: ignore[no-untyped-def]
    with Source(mysql_db.url, connect_timeout=1) as src:
        assert src.schema().database == mysql_db.name
