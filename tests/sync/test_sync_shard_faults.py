"""One shard's trouble under ``sync --shard`` (docs/sharding.md#one-shards-trouble): its server
stopped and started again while the other shard follows on; a DDL after which a table must be
read again, and a TRUNCATE, stop that shard's process (exit 1) before the statement with its
position kept, and touch no other shard's keys; that shard's ``--reload`` then removes only
its own rows and loads them again. And two shards into a Redis Cluster."""

from __future__ import annotations

import os
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands.sync import sync
from migrator.commands.verify import verify
from migrator.errors import MigratorError
from migrator.plan.expiry import encode_row
from migrator.reports import SchemaChanged
from tests.binlog_server import free_port
from tests.faults import wait_for
from tests.sync.helpers import following, purge_logs
from tests.sync.shard_scene import BASE, mapping_of, servers, shards, union_of, write_shard

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
    # west loaded after east: its end of table raised the counter, it did not set west's MAX
    assert client.get(b"item:id") == b"%d" % (BASE["east"] + 20)
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


NEWEST = """      - key: "{{item}}:newest"
        order_by: id
        limit: 3
"""


def _newest(shards: dict[str, Any], order: str, limit: int) -> list[bytes]:
    """``ORDER BY order DESC, id DESC LIMIT limit`` over the union of the shards' rows (the
    order column an integer): the ids, as a latest list holds them."""
    rows: list[tuple[int, int]] = []
    for db in shards.values():
        conn = db.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT {order}, id FROM item WHERE {order} IS NOT NULL")
                rows += cur.fetchall()
        finally:
            conn.close()
    return [str(i).encode() for _, i in sorted(rows, reverse=True)[:limit]]


def test_two_shards_into_a_redis_cluster(
    servers: dict[str, Any], shards: dict[str, Any], redis_cluster: Any, tmp_path: Path
) -> None:
    """Claims, reloads, counters and latest lists on a Cluster: each script names keys of
    one slot (the shards' candidates of a list hash to the list's slot: the list key made
    their hash tag, or its own tag kept); a list key whose '}' keeps them out is refused."""
    mapping = mapping_of(tmp_path, shards)
    target = redis_cluster.url
    text = Path(mapping).read_text()
    lists = text.index("  tag:")
    redis_cluster.flush()
    try:
        Path(mapping).write_text(
            text[:lists] + NEWEST.replace("{{item}}:", "item}}") + text[lists:]
        )
        with pytest.raises(MigratorError, match="'}' outside a hash tag") as refused:
            sync(mapping, target=target, shard="east", until_caught_up=True)
        assert refused.value.exit_code == 2 and "hash tag of its own" in (refused.value.hint or "")
        text = text[:lists] + NEWEST + text[lists:]  # a list of its own tag, and item:latest
        Path(mapping).write_text(text)
        for name in shards:
            sync(mapping, target=target, shard=name, until_caught_up=True)
        for seed, name in enumerate(shards):
            write_shard(shards[name], name, seed, 80)
        shards["east"].run("UPDATE item SET price = price + 1; DELETE FROM item WHERE id % 3 = 0")
        shards["west"].run("INSERT INTO item VALUES (9000, 'w9000', 'c1', 1); "
                           "INSERT INTO tag VALUES (9000, 'a')")  # fmt: skip
        shards["east"].run("INSERT INTO item VALUES (5, 'east5', 'c0', 1)")  # west's 5: collides
        for name in shards:
            sync(mapping, target=target, shard=name, until_caught_up=True)
        sync(mapping, target=target, shard="east", until_caught_up=True, reload=True)
        client = redis.RedisCluster.from_url(target)
        try:  # the collision: west's row 5 kept, through east's load and reload
            assert client.hget("item:5", "email") == b"e5"
            assert client.hget("migrator:shop:shard:item", encode_row((b"5",))) == b"west"
        finally:
            client.close()
        shards["east"].run("DELETE FROM item WHERE id = 5")  # so the union can hold the rows
        shards["west"].run("UPDATE item SET price = 999 WHERE id = 9000")  # west's newest now
        for name in shards:
            sync(mapping, target=target, shard=name, until_caught_up=True)
        union = Path(union_of(servers, shards, tmp_path))
        union_text = union.read_text()
        at = union_text.index("  tag:")
        union.write_text(union_text[:at] + NEWEST + union_text[at:])
        client = redis.RedisCluster.from_url(target)
        try:  # each list: ORDER BY ... LIMIT N over the union
            assert client.lrange("item:latest", 0, -1) == _newest(shards, "price", 5)
            assert client.lrange("{item}:newest", 0, -1) == _newest(shards, "id", 3)
            assert client.lindex("item:latest", 0) == b"9000"
        finally:
            client.close()
        checked = verify(str(union), target=target)
        assert checked.exit_code == 0, checked.as_dict()
    finally:
        redis_cluster.flush()


def test_one_shards_server_down_leaves_the_other_following(
    servers: dict[str, Any], shards: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    """West's server stops: west's process retries (its /healthz says so), east's applies on;
    west's server back, west's process resumes from its own position; verify answers 0."""
    mapping = mapping_of(tmp_path, shards)
    Path(mapping).write_text(Path(mapping).read_text() + "options:\n  retries: "
                             "{attempts: 200, backoff: 0.2, max_backoff: 1}\n")  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    port = free_port()
    args = {n: ["sync", mapping, "--shard", n, "--target", redis_url] for n in shards}
    with (
        following(args["east"], dict(os.environ)) as east,
        following([*args["west"], "--metrics", f"127.0.0.1:{port}", "--health-retries", "2"],
                  dict(os.environ)) as west,
    ):  # fmt: skip
        servers["west"].halt()
        try:
            wait_for("west's /healthz: retrying", lambda: "retrying" in _health(port), 60)
            shards["east"].run("INSERT INTO item VALUES (1000500, 'e500', 'c1', 3)")
            wait_for("east applying", lambda: client.exists("item:1000500"), 30)
            assert west.poll() is None and east.poll() is None
        finally:
            servers["west"].start()
        shards["west"].run("INSERT INTO item VALUES (500, 'w500', 'c1', 4)")
        wait_for("west resumed", lambda: client.exists("item:500"), 60)
        assert _health(port).startswith("shard west: ok")
        for proc in (east, west):
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
    assert verify(mapping, target=redis_url).exit_code == 0


def _health(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return str(r.read().decode())
    except urllib.error.HTTPError as e:
        return str(e.read().decode())
    except OSError:
        return ""


def test_one_shards_purged_log_stops_it_alone_and_its_reload_is_exact(
    shards: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    """West's binary log purged past its position: west's sync exits 2 with the fix, east's
    follows on; west's --reload removes the rows deleted meanwhile (its own only)."""
    mapping = mapping_of(tmp_path, shards)
    client = redis.Redis.from_url(redis_url)
    for name in shards:
        sync(mapping, target=redis_url, shard=name, until_caught_up=True)
    shards["west"].run("DELETE FROM item WHERE id IN (1, 2); UPDATE item SET cat = 'c7'")
    purge_logs(shards["west"])
    with pytest.raises(MigratorError) as purged:
        sync(mapping, target=redis_url, shard="west", until_caught_up=True)
    assert purged.value.exit_code == 2 and "--reload" in (purged.value.hint or "")
    shards["east"].run(f"UPDATE item SET price = 77 WHERE id = {BASE['east'] + 1}")
    sync(mapping, target=redis_url, shard="east", until_caught_up=True)  # east: its own log
    assert client.hget(f"item:{BASE['east'] + 1}", "price") == b"77"
    assert client.exists(b"item:1")  # west's gap: not applied yet
    sync(mapping, target=redis_url, shard="west", until_caught_up=True, reload=True)
    assert not client.exists(b"item:1") and not client.exists(b"item:2")
    assert not client.sismember(b"item:indices:cat:c1", b"4")  # west's rows re-indexed
    assert client.sismember(b"item:indices:cat:c1", str(BASE["east"] + 1).encode())
    assert client.hlen(b"migrator:shop:shard:item") == 38
    assert verify(mapping, target=redis_url).exit_code == 0


def test_candidates_of_the_old_name_are_renamed_when_the_shard_starts(
    shards: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    """An older migrator named a shard's candidates ``...:latest:<shard>:<list key>``: the
    shard's process renames them when it starts, so its rows stay in the merge whether its
    shard changes or not."""
    mapping = mapping_of(tmp_path, shards)
    client = redis.Redis.from_url(redis_url)
    for name in shards:
        sync(mapping, target=redis_url, shard=name, until_caught_up=True)
    new, old = b"migrator:shop:latest:west:{item:latest}", b"migrator:shop:latest:west:item:latest"
    held = client.zrange(new, 0, -1)
    assert len(held) == 5 and not client.exists(old)
    client.rename(new, old)  # as an older migrator left them
    sync(mapping, target=redis_url, shard="west", until_caught_up=True)  # west: no change
    assert client.zrange(new, 0, -1) == held and not client.exists(old)
    shards["east"].run("UPDATE item SET price = price - 100")  # west's rows the newest now
    sync(mapping, target=redis_url, shard="east", until_caught_up=True)
    assert client.lrange(b"item:latest", 0, -1) == [b"20", b"19", b"18", b"17", b"16"]
    assert verify(mapping, target=redis_url).exit_code == 0
