"""The atomic write of a group: every reply checked, errors named, never a hang."""

from __future__ import annotations

import pytest
import redis

from migrator.errors import TargetError
from migrator.target.sync_state import raise_counter, write_atomic


def test_group_applied_and_counter_never_lowered(redis_client: redis.Redis) -> None:
    write_atomic(redis_client, [(b"HSET", b"emp:1", b"a", b"1"), raise_counter(b"emp:id", 7)])
    write_atomic(redis_client, [raise_counter(b"emp:id", 3)])
    assert redis_client.get(b"emp:id") == b"7"
    assert redis_client.hgetall(b"emp:1") == {b"a": b"1"}


def test_refused_inside_exec_names_the_command(redis_client: redis.Redis) -> None:
    redis_client.set(b"s", b"x")
    with pytest.raises(TargetError) as caught:
        write_atomic(redis_client, [(b"SET", b"a", b"1"), (b"SADD", b"s", b"m")])
    assert "SADD s" in caught.value.message and "WRONGTYPE" in caught.value.message


def test_refused_when_queued_aborts_the_whole_group(redis_client: redis.Redis) -> None:
    with pytest.raises(TargetError) as caught:
        write_atomic(redis_client, [(b"SET", b"a", b"1"), (b"HSET", b"h")])
    assert "HSET h" in caught.value.message
    assert redis_client.get(b"a") is None  # nothing of the group was applied
