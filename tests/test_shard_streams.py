"""verify's change-stream check over a sharded source (docs/sharding.md#verify,
verify/streams.py): each entry names a shard of the mapping, and the newest entry of each shard
is compared with that shard's stored position (``migrator:<m>:sync:<shard>``), not with a
one-source state. The shards are databases of their own on the session's MariaDB; the entries
and positions are written by hand (the live run: tests/sync/test_sync_shard_streams.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from migrator.commands import dry_run, migrate
from migrator.commands.verify import verify
from migrator.store.sync_state import state_key
from migrator.verify.streams import AHEAD, MALFORMED, malformed
from tests.services import MySQLDatabase, create_database, drop_database, new_database_name

SCHEMA = "CREATE TABLE acct (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL);"
MAPPING = """version: 1
sources:
{sources}
tables:
  acct:
    streams: {{key: "acct:changes"}}
"""


@pytest.fixture
def two(mysql_server_url: str) -> Iterator[dict[str, MySQLDatabase]]:
    dbs = {n: create_database(mysql_server_url, new_database_name()) for n in ("east", "west")}
    try:
        for i, db in enumerate(dbs.values()):
            db.run(SCHEMA + f"INSERT INTO acct VALUES ({i * 100 + 1}, 'o');")
        yield dbs
    finally:
        for db in dbs.values():
            drop_database(mysql_server_url, db.name)


def _entry(client: redis.Redis, shard: bytes | None, pos: bytes, pk: bytes = b"1") -> bytes:
    fields = {b"op": b"insert", b"table": b"acct", b"pk": pk}
    fields |= {b"shard": shard} if shard is not None else {}
    fields |= {b"pos": pos, b"ts": b"1764400000", b"after.id": pk, b"after.owner": b"o"}
    return client.xadd(b"acct:changes", fields)  # type: ignore[no-any-return]


def test_an_entry_past_its_shards_stored_position_is_found(
    two: dict[str, MySQLDatabase], tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    lines = "\n".join(f'  - {{name: {n}, url: "{db.url}"}}' for n, db in two.items())
    f = tmp_path / "shop.yaml"
    f.write_text(MAPPING.format(sources=lines) + f"target: {redis_url}\n")
    (planned,) = dry_run(f).tables  # the entry as the first shard's process appends it
    assert planned.stream is not None and " pk 1 shard east pos " in planned.stream, planned.stream
    assert migrate(f).exit_code == 0
    for shard, pos in ((b"east", b"1000"), (b"west", b"500")):
        redis_client.hset(state_key("shop", shard.decode()), mapping={b"file": b"b.000002",
                                                                      b"pos": pos})  # fmt: skip
    # east's newest at its stored position, west's within its own: nothing to say, though
    # east's position is past west's (each shard's log is its own)
    _entry(redis_client, b"west", b"b.000002:400", b"101")
    _entry(redis_client, b"east", b"b.000002:1000")
    assert verify(f).ok
    ahead = _entry(redis_client, b"west", b"b.000002:600", b"101")  # past west's 500
    _entry(redis_client, b"east", b"b.000002:900")  # east's newest now, within its own
    found = verify(f)
    (check,) = found.tables
    assert check.counts[AHEAD] == 1, check.counts
    (shown,) = check.examples[AHEAD]
    assert (shown.field, shown.mysql, shown.redis) == (ahead.decode(), "b.000002:500",
                                                       "b.000002:600")  # fmt: skip
    redis_client.hset(state_key("shop", "west"), b"pos", b"600")
    assert verify(f).ok
    _entry(redis_client, b"north", b"b.000002:1")  # a shard the mapping does not list
    _entry(redis_client, None, b"b.000002:1")  # no shard
    check = verify(f).tables[0]
    assert check.counts[MALFORMED] == 2 and not check.counts[AHEAD], check.counts
    said = sorted(d.redis or "" for d in check.examples[MALFORMED])
    assert said == ["shard None is not one of the mapping's shards",
                    "shard b'north' is not one of the mapping's shards"], said  # fmt: skip


def test_the_shard_field_is_part_of_the_envelope() -> None:
    fields = {b"op": b"delete", b"table": b"acct", b"pk": b"1", b"shard": b"east",
              b"pos": b"b.000001:4", b"ts": b"1", b"before.id": b"1"}  # fmt: skip
    assert malformed(fields, {b"acct"}) is None  # one source: not asked for, not an image
    assert malformed(fields, {b"acct"}, {b"east", b"west"}) is None
    assert "not one of the mapping's shards" in (malformed(fields, {b"acct"}, {b"west"}) or "")
