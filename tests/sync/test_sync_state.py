"""The atomic write of a group: every reply checked, errors named, never a hang."""

from __future__ import annotations

import time

import pytest
import redis

from migrator.errors import TargetError, TargetLost
from migrator.plan.resp import resp
from migrator.store.sync_state import SyncState, _watch, exec_group, raise_counter, write_atomic


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


def test_a_group_of_many_entries_leaves_no_reply_unread(redis_client: redis.Redis) -> None:
    """An XADD's reply inside EXEC is its entry's ID, two lines: a group of 20,000 (its
    replies arrive in several reads) was read 20,000 lines short, and the next group on the
    connection read them as its own (a protocol error, sysbench_bench.py --streams on)."""
    state = SyncState(redis_client, "many")
    state.begin()
    entries = [(b"XADD", b"s", b"*", b"op", b"insert", b"pk", b"%d" % i) for i in range(20_000)]
    for k in range(3):
        at = {"file": "b.000001", "pos": str(100 + k)}
        write_atomic(redis_client, [*entries, state.command(at)], state, once=at)
    assert redis_client.xlen(b"s") == 60_000
    assert redis_client.hget(state.key, "pos") == b"102"


def test_an_entry_refused_inside_exec_is_named_and_never_waited_for(redis_url: str) -> None:
    """An XADD refused inside EXEC answers one line, not two: the replies are then counted as
    replies (no wait for a line that never comes), and the refused command is the one named,
    whatever IDs came before it."""
    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    client.set(b"taken", b"x")
    group: list[tuple[bytes, ...]] = [(b"XADD", b"s", b"*", b"a", b"%d" % i) for i in range(3000)]
    group += [(b"XADD", b"taken", b"*", b"a", b"1"), (b"SET", b"after", b"1")]
    began = time.monotonic()
    with pytest.raises(TargetError) as caught:
        write_atomic(client, group)
    assert time.monotonic() - began < 4  # not the socket's timeout (5 s)
    assert "XADD taken" in caught.value.message and "WRONGTYPE" in caught.value.message
    assert client.ping() and client.xlen(b"s") == 3000  # the connection reads in step


def test_refused_when_queued_aborts_the_whole_group(redis_client: redis.Redis) -> None:
    with pytest.raises(TargetError) as caught:
        write_atomic(redis_client, [(b"SET", b"a", b"1"), (b"HSET", b"h")])
    assert "HSET h" in caught.value.message
    assert redis_client.get(b"a") is None  # nothing of the group was applied


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_flush_between_watch_and_exec_is_a_loss_at_once(redis_url: str, protocol: int) -> None:
    """EXEC answers a null when the watched state hash changed: ``*-1`` in RESP2, ``_`` in
    RESP3 (redis-py 8's default). Either is the whole reply: the group is refused as a lost
    target at once, never read on until the socket's timeout (a sync that did so noticed a
    FLUSHDB a minute late, as a "timeout")."""
    client = redis.Redis.from_url(redis_url, protocol=protocol, socket_timeout=5)
    other = redis.Redis.from_url(redis_url)
    try:
        state = SyncState(client, "watched")
        state.begin()
        group = [(b"HSET", b"emp:1", b"a", b"1"), state.command({"file": "f", "pos": "4"})]
        payload = b"*1\r\n$5\r\nMULTI\r\n" + resp(group) + b"*1\r\n$4\r\nEXEC\r\n"
        conn = client.connection_pool.get_connection()
        try:
            _watch(conn, state)  # the marker is there
            other.flushdb()  # ... and gone before the group's EXEC
            with pytest.raises(TargetLost):
                exec_group(conn, payload, group)
        finally:
            client.connection_pool.release(conn)
        assert other.dbsize() == 0  # nothing of the group was applied
        write_atomic(client, [(b"SET", b"after", b"1")])  # the connection is fit for more
        assert other.get(b"after") == b"1"
    finally:
        client.close()
        other.close()
