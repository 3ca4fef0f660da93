"""One shard's schema changes under ``sync --shard`` (docs/sharding.md#one-shards-trouble): a
DDL after which a table must be read again, and a TRUNCATE, stop that shard's process (exit 1)
before the statement with its position kept, and touch no other shard's keys; that shard's
``--reload`` then removes only its own rows and loads them again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands.sync import sync
from migrator.reports import SchemaChanged
from tests.sync.shard_scene import BASE, mapping_of, servers, shards

__all__ = ["servers", "shards"]  # the fixtures


def _keys(client: redis.Redis) -> set[bytes]:
    return {k for k in client.scan_iter("item:*") if k[5:].isdigit()}


def test_a_ddl_or_truncate_stops_its_shard_only_and_its_reload_removes_its_rows(
    shards: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    mapping = mapping_of(tmp_path, shards)
    client = redis.Redis.from_url(redis_url)
    for name in shards:
        sync(mapping, target=redis_url, shard=name, until_caught_up=True)
    east = {k for k in _keys(client) if int(k[5:]) > BASE["east"]}
    west = _keys(client) - east
    assert len(east) == len(west) == 20
    shards["east"].run("ALTER TABLE item ADD COLUMN extra INT")  # mapped with all its columns
    before = client.hgetall(b"migrator:shop:sync:east")
    with pytest.raises(SchemaChanged, match="on shard east needs a re-snapshot") as stopped:
        sync(mapping, target=redis_url, shard="east", until_caught_up=True)
    assert stopped.value.exit_code == 1
    assert "--shard east --reload" in (stopped.value.hint or "")
    after = client.hgetall(b"migrator:shop:sync:east")
    assert after[b"file"] == before[b"file"] and after[b"pos"] == before[b"pos"]  # kept
    assert _keys(client) == east | west  # nobody's keys removed
    shards["west"].run("INSERT INTO item VALUES (99, 'w99', 'c1', 5); TRUNCATE item")
    with pytest.raises(SchemaChanged, match="truncated on shard west") as truncated:
        sync(mapping, target=redis_url, shard="west", until_caught_up=True)
    assert truncated.value.exit_code == 1
    assert client.exists(b"item:99")  # applied up to the statement, and stopped before it
    assert client.hget(b"migrator:shop:sync:west", b"file")  # the position kept
    assert _keys(client) == east | west | {b"item:99"}
    sync(mapping, target=redis_url, shard="west", until_caught_up=True, reload=True)
    assert _keys(client) == east  # west's rows gone with their owner fields, east's kept
    assert client.hvals(b"migrator:shop:shard:item") == [b"east"] * 20
    assert not client.sismember(b"item:indices:cat:c1", b"1")
    assert client.zscore(b"item:by:price", str(BASE["east"] + 1)) is not None
    sync(mapping, target=redis_url, shard="east", until_caught_up=True, reload=True)
    assert _keys(client) == east
    assert client.hget(f"item:{BASE['east'] + 1}", b"cat") == b"c1"
