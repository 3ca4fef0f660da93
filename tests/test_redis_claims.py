"""A test session's claim on a Redis database (tests/conftest.py ``redis_test_db``) is taken
over once its owner is gone from this host, never while it runs or when another host holds
it: a run killed with ``kill -9`` must not leave the next runs without a database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
import redis

from tests.conftest import _take_over_a_dead_claim
from tests.services import redis_db_url


@pytest.fixture
def lock(redis_server_url: str) -> Iterator[tuple[redis.Redis, str]]:
    client = redis.Redis.from_url(redis_db_url(redis_server_url, 0))
    key = f"migrator-tests:claim-test:{uuid.uuid4().hex}"
    try:
        yield client, key
    finally:
        client.delete(key)
        client.close()


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


def test_a_dead_owners_claim_is_taken_over_a_live_or_foreign_one_is_not(
    lock: tuple[redis.Redis, str],
) -> None:
    client, key = lock
    me = f"{socket.gethostname()}:{os.getpid()}"
    for held in (f"{socket.gethostname()}:{_dead_pid()}", str(_dead_pid())):  # old form: pid
        client.set(key, held, ex=60)
        assert _take_over_a_dead_claim(client, key, me)
        assert client.get(key) == me.encode() and client.ttl(key) > 3600
    for held in (f"{socket.gethostname()}:{os.getppid()}", f"elsewhere:{_dead_pid()}"):
        client.set(key, held, ex=60)
        assert not _take_over_a_dead_claim(client, key, me)
        assert client.get(key) == held.encode()
