"""Expiry over a sharded source (docs/sharding.md#expiry-over-shards): two shards of a table
with ``expire: {column: ends}`` (NULL, past and far-future moments) and a unique, an index, a
sorted set and a latest list, loaded by ``migrate``: ``verify`` of the shards answers 0, and
Redis holds what a ``migrate`` of one database with the union's rows writes (every key, its
TTL within two seconds, the expiry schedule and memos), the owner hash aside; rows that pass
their moment with no sync running are swept by ``verify --fix`` of the shards."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands import migrate
from migrator.commands.verify import verify
from tests.services import (
    MySQLDatabase,
    create_database,
    drop_database,
    key_values,
    new_database_name,
)
from tests.sync.test_sync_expiry import MAPPING, SCHEMA

TABLES = MAPPING.split("\n", 2)[2]  # without its version line
#: seconds from now: the past, a far future, never
AHEAD: list[float | None] = [-3600.0, -5.0, 3600.0, 86400.0, None]


def rows_of(first: int) -> list[tuple[Any, ...]]:
    """Ten rows from ``first``: each moment of ``AHEAD`` twice, scores tying across shards."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    out = []
    for i in range(10):
        ahead = AHEAD[i % len(AHEAD)]
        ends = None if ahead is None else now + timedelta(seconds=ahead)
        out.append((first + i, f"u{first + i}@x", ["Oslo", "Rome"][i % 2], i % 4, ends))
    return out


@pytest.fixture
def dbs(mysql_server_url: str) -> Iterator[dict[str, MySQLDatabase]]:
    names = ("east", "west", "union")
    out = {n: create_database(mysql_server_url, new_database_name()) for n in names}
    try:
        for name in names:
            out[name].run(SCHEMA)
        yield out
    finally:
        for name in names:
            drop_database(mysql_server_url, out[name].name)


def dump(client: redis.Redis) -> dict[bytes, Any]:
    """Every key (the owner hash aside) with its value and its TTL in ms (-1: none)."""
    return key_values(client, lambda k: k.startswith(b"migrator:shop:shard:")
                      or k.endswith(b":checkpoint"), ttl=True)  # fmt: skip


def same_keys(sharded: dict[bytes, Any], union: dict[bytes, Any]) -> None:
    assert sharded.keys() == union.keys()
    for key, (value, ttl) in union.items():
        assert sharded[key][0] == value, key
        got = sharded[key][1]
        assert (got == -1) == (ttl == -1) and abs(got - ttl) < 2000, (key, got, ttl)


def test_a_migrate_of_shards_with_expiry_equals_one_of_the_union(
    dbs: dict[str, MySQLDatabase], tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    east, west = rows_of(1), rows_of(101)
    marks = "INSERT INTO tok VALUES (%s, %s, %s, %s, %s)"
    dbs["east"].insert(marks, east)
    dbs["west"].insert(marks, west)
    dbs["union"].insert(marks, east + west)
    (tmp_path / "shards").mkdir()
    (tmp_path / "union").mkdir()
    sharded = tmp_path / "shards" / "shop.yaml"
    sharded.write_text(
        "version: 1\nsources:\n"
        + "".join(f'  - {{name: {n}, url: "{dbs[n].url}"}}\n' for n in ("east", "west"))
        + TABLES
    )
    union = tmp_path / "union" / "shop.yaml"
    union.write_text(f'version: 1\nsource: "{dbs["union"].url}"\n' + TABLES)

    assert migrate(str(sharded), target=redis_url).exit_code == 0
    checked = verify(str(sharded), target=redis_url)
    assert checked.exit_code == 0, checked.as_dict()
    owners = redis_client.hgetall(b"migrator:shop:shard:tok")
    # every live row of each shard has its owner; an expired row is not written at all
    assert sorted(owners.values()) == [b"east"] * 6 + [b"west"] * 6
    got = dump(redis_client)
    assert b"tok:latest" in got and b"migrator:shop:expiry:tok" in got
    redis_client.flushdb()
    assert migrate(str(union), target=redis_url).exit_code == 0
    same_keys(got, dump(redis_client))


def test_verify_fix_of_the_shards_sweeps_rows_past_their_moment(
    dbs: dict[str, MySQLDatabase], tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    """Rows of both shards pass their moment with no sync running: their entries stay in the
    shared structures; ``verify --fix`` of the shards sweeps them (owner fields included),
    and a second ``verify`` answers 0."""
    soon = datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(seconds=2)
    marks = "INSERT INTO tok VALUES (%s, %s, %s, %s, %s)"
    for name, first in (("east", 1), ("west", 101)):
        dbs[name].insert(marks, [*rows_of(first), (first + 50, f"s{first}@x", "Oslo", 3, soon)])
    sharded = tmp_path / "shop.yaml"
    lines = [f'  - {{name: {n}, url: "{dbs[n].url}"}}\n' for n in ("east", "west")]
    sharded.write_text("version: 1\nsources:\n" + "".join(lines) + TABLES)
    assert migrate(str(sharded), target=redis_url).exit_code == 0
    owners = b"migrator:shop:shard:tok"
    assert redis_client.hget(owners, b"2:51") == b"east"
    time.sleep(3)
    assert redis_client.sismember(b"tok:indices:city:Oslo", b"151")  # kept: no sync ran
    fixed = verify(str(sharded), target=redis_url, fix=True)
    assert fixed.exit_code == 0, fixed.as_dict()  # swept first, then compared
    assert "expiry: 2 rows past it swept" in str(fixed.as_dict())
    again = verify(str(sharded), target=redis_url)
    assert again.exit_code == 0, again.as_dict()
    assert not redis_client.sismember(b"tok:indices:city:Oslo", b"151")
    assert (
        redis_client.hget(owners, b"2:51") is None and redis_client.hget(owners, b"3:151") is None
    )
