"""``sync`` over a sharded source, one process per shard (docs/sharding.md#sync): a private
Oracle MySQL and a private MariaDB each hold a shard of one schema; a ``sync --shard`` process
follows each while both take random writes; one process is killed with -9 and started again,
one shard is reloaded; Redis then equals an independent rebuild (``migrate`` of the union of
the shards' rows into another database) and ``verify`` of the union answers 0. Also: what
is refused, and each shard's own state, lock and metrics label."""

from __future__ import annotations

import logging
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands.sync import sync
from migrator.commands.verify import verify
from migrator.errors import MigratorError
from migrator.plan.expiry import encode_row
from migrator.store.sync_lock import SyncLock
from migrator.sync.exporter import MetricsServer
from migrator.sync.figures import SyncFigures
from migrator.sync.shard_rows import Collisions
from tests.sync.helpers import cli
from tests.sync.shard_scene import (
    BASE,
    STREAMED,
    equals_a_rebuild,
    followed_with_a_kill,
    mapping_of,
    north_server,
    seeded,
    servers,
    shards,
    write_shard,
)

__all__ = ["north_server", "servers", "shards"]  # the fixtures


def _caught_up(mapping: str, shard: str, url: str, *more: str) -> None:
    line = cli("sync", mapping, "--shard", shard, "--target", url, "--until-caught-up", *more)
    done = subprocess.run(line, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("count", [2, 3])
def test_shards_followed_by_a_process_each_kill_and_reload_equal_a_rebuild(
    count: int,
    servers: dict[str, Any],
    shards: dict[str, Any],
    redis_url: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """Two shards (MySQL 9.7, MariaDB), or three (and a second MariaDB)."""
    if count == 3:
        shards = {**shards, "north": seeded("north", request.getfixturevalue("north_server"))}
    mapping = mapping_of(tmp_path, shards)
    client = redis.Redis.from_url(redis_url)
    followed_with_a_kill(shards, mapping, redis_url, (150, 100))
    write_shard(shards["east"], "east", 21, 60)
    _caught_up(mapping, "east", redis_url, "--reload")  # this shard's rows only, loaded again
    for name in shards:
        _caught_up(mapping, name, redis_url)
    state = {n: client.hgetall(f"migrator:shop:sync:{n}") for n in shards}
    assert all(s.get(b"file") for s in state.values()), state
    equals_a_rebuild(servers, shards, mapping, redis_url, tmp_path)


def test_a_sharded_mapping_is_synced_one_shard_per_process(
    shards: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    mapping = mapping_of(tmp_path, shards)
    done = subprocess.run(cli("sync", mapping, "--target", redis_url), capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 2
    said = " ".join(done.stderr.split())
    assert "--shard east" in said and "--shard west" in said
    assert "migrator-sync@.service" in said
    with pytest.raises(MigratorError, match="no shard of that name"):
        sync(mapping, target=redis_url, shard="north", until_caught_up=True)
    with pytest.raises(MigratorError, match="--resnapshot item would remove"):
        sync(mapping, target=redis_url, shard="east", resnapshot_tables=["item"],
             until_caught_up=True)  # fmt: skip


def test_each_shard_has_its_own_lock_and_state(
    shards: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    mapping = mapping_of(tmp_path, shards)
    client = redis.Redis.from_url(redis_url)
    held = SyncLock(redis.Redis.from_url(redis_url), "shop", mapping, "east")
    held.acquire()
    try:
        with pytest.raises(MigratorError, match=r"another sync of .* --shard east"):
            sync(mapping, target=redis_url, shard="east", until_caught_up=True)
        report = sync(mapping, target=redis_url, shard="west", until_caught_up=True)
        assert report.stopped == "caught up"
    finally:
        held.release()
    assert client.exists(b"migrator:shop:sync:west")
    assert not client.exists(b"migrator:shop:sync:east")  # west wrote nothing of east's
    assert not client.exists(b"migrator:shop:sync")
    assert client.scard(b"item:indices:cat:c0") > 0
    west_keys = set(client.scan_iter("item:*"))
    sync(mapping, target=redis_url, shard="east", until_caught_up=True)
    sync(mapping, target=redis_url, shard="west", until_caught_up=True, reload=True)
    assert west_keys <= set(client.scan_iter("item:*"))
    assert client.exists(f"item:{BASE['east'] + 1}")  # the west's reload left east's rows


def test_a_primary_key_on_two_shards_is_reported_and_the_owner_row_kept(
    shards: dict[str, Any], redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mapping = mapping_of(tmp_path, shards)
    client = redis.Redis.from_url(redis_url)
    shards["east"].run(
        "INSERT INTO item VALUES (5, 'east5', 'c9', 999); "  # west holds id 5
        "INSERT INTO item VALUES (1000700, 'e4', 'c9', 2)"
    )  # and email e4
    sync(mapping, target=redis_url, shard="west", until_caught_up=True)
    west_row = client.hgetall(b"item:5")
    with caplog.at_level(logging.WARNING, logger="migrator.sync"):
        sync(mapping, target=redis_url, shard="east", until_caught_up=True)  # its load
        shards["east"].run(
            "INSERT INTO item VALUES (6, 'east6', 'c9', 1); "
            "UPDATE item SET price = 7 WHERE id = 5; DELETE FROM item WHERE id = 5; "
            "INSERT INTO item VALUES (1000600, 'e3', 'c9', 2); "  # west's row 3 holds e3
            "UPDATE item SET price = 8 WHERE id = 1000600; "
            "DELETE FROM item WHERE id = 1000700"  # held out at the load: e4 stays west's
        )
        sync(mapping, target=redis_url, shard="east", until_caught_up=True)  # following
    assert client.hgetall(b"item:5") == west_row  # the owner's row, whatever east did
    assert client.hget(b"item:6", b"email") == b"e6"
    assert client.hget(b"migrator:shop:shard:item", encode_row((b"5",))) == b"west"
    assert client.hget(b"item:uniques:email", b"east5") is None
    assert not client.sismember(b"item:indices:cat:c9", b"5")
    for email, holder in ((b"e3", b"3"), (b"e4", b"4")):  # unique values west's rows hold
        assert client.hget(b"item:uniques:email", email) == holder
    assert not client.exists(b"item:1000600") and not client.exists(b"item:1000700")
    said = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "collision"]
    # once per row and run: 5 and 1000700 by the load; 6, 5 (its UPDATE and DELETE) and
    # 1000600 (its INSERT and UPDATE) while following
    keys = [m for m in said if "its primary key is on shard west too" in m]
    assert [m.split("WHERE ")[1] for m in keys] == ["`id` = 5", "`id` = 6", "`id` = 5"], said
    assert all(m.startswith("collision: not written from shard east") for m in keys)
    uniques = [m for m in said if "its unique email value is held on shard west" in m]
    assert len(uniques) == 2 and len(said) == 5, said
    assert "WHERE `email` = 'e4'" in uniques[0] and "WHERE `email` = 'e3'" in uniques[1]
    collisions = Collisions("east")
    collisions.found("item", encode_row((b"6",)), "collision: item (id=6) ...")
    server = MetricsServer("127.0.0.1:0", SyncFigures(), "shop", "east", collisions)
    try:
        base = f"http://127.0.0.1:{server.port}"
        text = urllib.request.urlopen(f"{base}/metrics").read().decode()
        assert (
            'migrator_sync_collisions_total{mapping="shop",shard="east",table="item"} 1.0' in text
        )
        assert 'migrator_sync_transactions_total{mapping="shop",shard="east"}' in text
        health = urllib.request.urlopen(f"{base}/healthz").read().decode()
        assert health.startswith("shard east: ok: starting"), health
    finally:
        server.close()


def test_a_collided_row_is_no_candidate_of_the_latest_list(
    shards: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    """East's newest rows (by price) collide with west's (a primary key, a unique value): Redis
    holds west's rows, so the merged list names none of them, through east's load and a
    change it follows; the next newest of east take their places. Nor does east's change
    stream have an entry of them (docs/sharding.md#change-streams-over-shards)."""
    mapping = mapping_of(tmp_path, shards, STREAMED)
    client = redis.Redis.from_url(redis_url)
    shards["east"].run(
        "INSERT INTO item VALUES (5, 'east5', 'c0', 999); "  # west holds id 5 (price 5)
        "INSERT INTO item VALUES (1000800, 'e3', 'c0', 998)"  # west's row 3 holds e3
    )
    union = [b"1000020", b"20", b"1000019", b"19", b"1000018"]  # the rows Redis holds
    sync(mapping, target=redis_url, shard="west", until_caught_up=True)
    sync(mapping, target=redis_url, shard="east", until_caught_up=True)  # its load
    assert client.lrange(b"item:latest", 0, -1) == union
    shards["east"].run(
        "INSERT INTO item VALUES (7, 'east7', 'c0', 997); "  # west holds id 7
        "UPDATE item SET price = 996 WHERE id = 1000800"
    )
    sync(mapping, target=redis_url, shard="east", until_caught_up=True)  # following
    assert client.lrange(b"item:latest", 0, -1) == union
    shards["east"].run("UPDATE item SET price = 995 WHERE id = 1000001")
    sync(mapping, target=redis_url, shard="east", until_caught_up=True)
    assert client.lrange(b"item:latest", 0, -1) == [b"1000001", *union[:4]]
    east = [f for _, f in client.xrange(b"item:changes") if f[b"shard"] == b"east"]
    assert [f[b"op"] for f in east] == [b"truncate"] + [b"snapshot"] * 20 + [b"update"]
    assert {f[b"pk"] for f in east[1:]} == {b"%d" % (BASE["east"] + i) for i in range(1, 21)}


def test_a_consistent_load_of_each_shard(
    shards: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    """``--consistent-load`` of each shard: the same claims, raised counter and merged latest
    list as the online load."""
    mapping = mapping_of(tmp_path, shards)
    client = redis.Redis.from_url(redis_url)
    shards["east"].run("INSERT INTO item VALUES (5, 'east5', 'c0', 900)")  # west's 5: collides
    for name in ("east", "west"):
        report = sync(mapping, target=redis_url, shard=name, until_caught_up=True,
                      online_load=False)  # fmt: skip
        assert not report.online_load
    assert client.hget(b"item:5", b"email") == b"east5"  # east loaded first: its row kept
    assert client.hget(b"migrator:shop:shard:item", encode_row((b"5",))) == b"east"
    assert client.get(b"item:id") == b"%d" % (BASE["east"] + 20)
    assert verify(mapping, target=redis_url).exit_code == 1  # the collision
    shards["west"].run("DELETE FROM item WHERE id = 5")
    sync(mapping, target=redis_url, shard="west", until_caught_up=True)
    assert client.hget(b"item:5", b"email") == b"east5"  # west's delete: not east's row
    assert client.lindex(b"item:latest", 0) == b"5"  # price 900: the newest of the union
    assert verify(mapping, target=redis_url).exit_code == 0
