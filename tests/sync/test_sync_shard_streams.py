"""Change streams over a sharded source (docs/sharding.md#change-streams-over-shards,
docs/sync.md#change-streams): a private Oracle MySQL 9.7 (east) and a private MariaDB (west)
each hold a shard; a ``sync --shard`` process per shard appends each of its shard's changes to
the one stream in its group's MULTI/EXEC, each entry naming its shard (``shard``), its
position in that shard's log. West's process is killed (-9) and started again while both
shards take random writes; east is then reloaded. A consumer replaying the stream from its
start (a truncate forgets its shard's rows) holds exactly the union of the shards' rows, each
shard's entries are in its log's order and none is there twice, and ``verify`` answers 0."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from migrator.commands.migrate import migrate
from migrator.commands.sync import sync
from migrator.commands.verify import verify
from tests.sync.helpers import Rows, replay
from tests.sync.shard_scene import (
    STREAMED,
    followed_with_a_kill,
    mapping_of,
    servers,
    shards,
    write_shard,
)

__all__ = ["servers", "shards"]  # the fixtures

STREAM = b"item:changes"


def _rows(dbs: dict[str, Any]) -> Rows:
    """Every shard's rows of item as the row hash writes them (NULL left out)."""
    out: Rows = {}
    for db in dbs.values():
        conn = db.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT id, email, cat, price FROM item")
                for row in cur.fetchall():
                    fields = zip((b"id", b"email", b"cat", b"price"), row, strict=True)
                    out[str(row[0]).encode()] = {k: str(v).encode() for k, v in fields
                                                 if v is not None}  # fmt: skip
        finally:
            conn.close()
    return out


def _position(pos: bytes) -> tuple[int, int]:
    m = re.fullmatch(rb".*\.(\d+):(\d+)", pos)
    assert m is not None, pos
    return int(m.group(1)), int(m.group(2))


def _checked(client: redis.Redis, names: set[bytes]) -> None:
    """Each entry names a shard of the mapping; per shard the positions never go back, and no
    change (shard, op, position, key) is there twice."""
    entries = [f for _, f in client.xrange(STREAM)]
    assert {f.get(b"shard") for f in entries} == names
    for name in names:
        at = [_position(f[b"pos"]) for f in entries if f[b"shard"] == name]
        assert at == sorted(at), name
    seen = Counter((f[b"shard"], f[b"op"], f[b"pos"], f.get(b"pk")) for f in entries)
    assert [k for k, n in seen.items() if n > 1] == []
    ops = Counter((f[b"shard"], f[b"op"]) for f in entries)
    for name in names:  # each shard's load: a truncate, then its rows; then its changes
        assert ops[name, b"truncate"] >= 1 and ops[name, b"snapshot"] >= 20, ops
        assert ops[name, b"update"] and ops[name, b"delete"], ops


def test_a_stream_over_two_shards_replays_to_their_union_after_a_kill_and_a_reload(
    shards: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    mapping = mapping_of(tmp_path, shards, STREAMED)
    client = redis.Redis.from_url(redis_url)
    followed_with_a_kill(shards, mapping, redis_url, (120, 80))
    for name in shards:
        sync(mapping, target=redis_url, shard=name, until_caught_up=True)
    assert replay(client, STREAM, b"item") == _rows(shards)
    _checked(client, {b"east", b"west"})
    checked = verify(mapping, target=redis_url)
    assert checked.exit_code == 0, json.dumps(checked.as_dict(), default=str)[:3000]
    # east reloaded after writes it did not follow: its truncate forgets east's rows only,
    # its snapshot entries give them again
    write_shard(shards["east"], "east", 21, 40)
    sync(mapping, target=redis_url, shard="east", until_caught_up=True, reload=True)
    write_shard(shards["west"], "west", 22, 20)
    sync(mapping, target=redis_url, shard="west", until_caught_up=True)
    assert replay(client, STREAM, b"item") == _rows(shards)
    _checked(client, {b"east", b"west"})
    assert verify(mapping, target=redis_url).exit_code == 0


def test_migrate_of_the_shards_appends_each_shards_truncate_and_rows(
    shards: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    """``migrate`` with ``snapshot: true`` over the shards: each shard's load appends its own
    truncate, then its rows, each naming the shard, as of that shard's snapshot; a second
    ``--replace`` run appends after them, and the replay is the union either way."""
    mapping = mapping_of(tmp_path, shards, STREAMED)
    client = redis.Redis.from_url(redis_url)
    report = migrate(mapping, target=redis_url)
    assert report.exit_code == 0, report.tables
    entries = [f for _, f in client.xrange(STREAM)]
    for name in (b"east", b"west"):
        mine = [f for f in entries if f[b"shard"] == name]
        assert [f[b"op"] for f in mine] == [b"truncate"] + [b"snapshot"] * 20
        assert len({f[b"pos"] for f in mine}) == 1  # the shard's snapshot
        assert list(mine[0])[:4] == [b"op", b"table", b"shard", b"pos"]  # the envelope's order
        assert list(mine[1])[:5] == [b"op", b"table", b"pk", b"shard", b"pos"]
    assert replay(client, STREAM, b"item") == _rows(shards)
    shards["west"].run("DELETE FROM item WHERE id = 3")
    assert migrate(mapping, target=redis_url, replace=True).exit_code == 0
    assert client.xlen(STREAM) == 2 * 21 + 21 + 20  # kept, appended to
    assert replay(client, STREAM, b"item") == _rows(shards)
