"""Redis Cluster targets (docs/connections.md): migrate and verify route every key to its slot's
primary, and a cluster ends up holding exactly what a single server holds for the same data.

The cluster is a real one of three primaries (``redis_cluster`` in conftest.py, started by
tests/cluster.py); the single server is the session's ``redis_url``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import migrate, verify
from migrator.errors import ConnectError, MigratorError, TargetError
from migrator.store.checkpoint import Checkpoint
from migrator.store.cluster import connect_any, parse_seeds, units
from migrator.store.cluster_sink import ClusterSink
from migrator.verify import report as vr
from tests.cluster import ClusterServers
from tests.test_workers import MAPPING, ROWS, TABLE, snapshot

# workers: loads into a cluster from worker processes too; again in CI with MIGRATOR_WORKERS=4
pytestmark = [pytest.mark.integration, pytest.mark.workers]
REPO = Path(__file__).resolve().parent.parent


# -- pure parts ---------------------------------------------------------------------------------
def test_units_keep_a_transaction_together() -> None:
    cmds = [(b"HSET", b"a", b"f", b"v"), (b"MULTI",), (b"DEL", b"l"), (b"RPUSH", b"l", b"1"),
            (b"EXEC",), (b"SET", b"c", b"1")]  # fmt: skip
    assert units(cmds) == [[cmds[0]], cmds[1:5], [cmds[5]]]


def test_parse_seeds() -> None:
    seeds, options = parse_seeds("redis+cluster://u:p%40ss@10.0.0.1:7000,[::1]:7001/0")
    assert seeds == [("10.0.0.1", 7000), ("::1", 7001)]
    assert options == {"ssl": False, "username": "u", "password": "p@ss"}
    assert parse_seeds("rediss+cluster://h:1")[1] == {"ssl": True}
    # TLS files and other redis-py options ride in the query, as redis.from_url reads them
    seeds, options = parse_seeds(
        "rediss+cluster://h:1,h:2?ssl_ca_certs=/c/ca.crt&ssl_certfile=/c/me.crt"
        "&ssl_keyfile=/c/me.key&ssl_cert_reqs=required&socket_timeout=5"
    )
    assert seeds == [("h", 1), ("h", 2)]
    assert options == {
        "ssl": True, "ssl_ca_certs": "/c/ca.crt", "ssl_certfile": "/c/me.crt",
        "ssl_keyfile": "/c/me.key", "ssl_cert_reqs": "required", "socket_timeout": 5.0,
    }  # fmt: skip
    assert parse_seeds("redis+cluster://h:1/0?db=0")[1] == {"ssl": False}
    with pytest.raises(MigratorError, match="only database 0"):
        parse_seeds("redis+cluster://h:1?db=2")
    with pytest.raises(MigratorError, match="only database 0"):
        parse_seeds("redis+cluster://h:1/3")
    with pytest.raises(MigratorError, match="not host:port"):
        parse_seeds("redis+cluster://:secret@h:1,h2")


# -- a real cluster -----------------------------------------------------------------------------
@pytest.fixture
def cluster(redis_cluster: ClusterServers) -> Iterator[ClusterServers]:
    redis_cluster.flush()
    try:
        yield redis_cluster
    finally:
        redis_cluster.flush()


@pytest.fixture
def rc(cluster: ClusterServers) -> Iterator[RedisCluster]:
    client = RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def items(mysql_db: Any, tmp_path: Path) -> Path:
    mysql_db.run(TABLE)
    path = tmp_path / "items.yaml"
    path.write_text(MAPPING)
    return path


def keys_per_node(cluster: ClusterServers) -> list[int]:
    out = []
    for port in cluster.ports:
        node = cluster.node(port)
        out.append(int(node.dbsize()))
        node.close()
    return out


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_detection_and_refusals(cluster: ClusterServers) -> None:
    for url in (cluster.url, cluster.url + "/0", cluster.seeds_url):
        client = connect_any(url)
        assert isinstance(client, RedisCluster)
        client.close()
    with pytest.raises(MigratorError, match="only database 0") as e:
        connect_any(cluster.url + "/3")
    assert e.value.exit_code == 2
    with pytest.raises(ConnectError):
        connect_any("redis+cluster://127.0.0.1:1")


def test_single_server_is_not_a_cluster(redis_url: str) -> None:
    client = connect_any(redis_url)
    assert isinstance(client, redis.Redis)
    client.close()
    with pytest.raises(ConnectError, match="cannot use the Redis Cluster"):
        connect_any(redis_url.replace("redis://", "redis+cluster://").rsplit("/", 1)[0])


def test_samples_equal_a_single_server(
    cluster: ClusterServers, rc: RedisCluster, mysql_db: Any, redis_url: str,
    redis_client: redis.Redis,
) -> None:  # fmt: skip
    for sql in sorted((REPO / "samples").glob("*.sql")):
        mysql_db.run(sql.read_text(encoding="utf-8"))
    demo = REPO / "mappings/demo.yaml"
    one = migrate(demo, source=mysql_db.url, target=redis_url)
    many = migrate(demo, source=mysql_db.url, target=cluster.seeds_url)
    assert many.exit_code == 0 and many.rows == one.rows
    want = snapshot(redis_client)
    assert snapshot(rc) == want and len(want) > 20
    assert sum(1 for n in keys_per_node(cluster) if n) >= 2  # really spread over the primaries
    assert rc.lrange("login:last_login_times", 0, -1) == [b"3", b"2", b"1"]
    code, out = cli("verify", str(demo), "--source", mysql_db.url, "--target", cluster.url)
    assert code == 0 and "Redis matches MySQL" in out


@pytest.mark.parametrize("workers", [1, 2])
def test_items_equal_a_single_server_and_verify(
    workers: int, cluster: ClusterServers, rc: RedisCluster, items: Path, mysql_db: Any,
    redis_url: str, redis_client: redis.Redis,
) -> None:  # fmt: skip
    one = migrate(items, source=mysql_db.url, target=redis_url, workers=1)
    many = migrate(items, source=mysql_db.url, target=cluster.url, workers=workers,
                   chunk_rows=ROWS // 2)  # fmt: skip
    assert many.tables[0].as_dict() | {"seconds": 0, "rows_per_second": 0} == one.tables[
        0
    ].as_dict() | {"seconds": 0, "rows_per_second": 0}
    want = snapshot(redis_client)
    assert snapshot(rc) == want
    assert len([k for k in want if k[5:].isdigit()]) == ROWS
    assert all(keys_per_node(cluster))
    fields = [f.decode() for f in rc.hkeys("migrator:items:checkpoint")]
    assert len([f for f in fields if f.startswith("item#range:")]) == (2 if workers == 2 else 0)
    report = verify(items, source=mysql_db.url, target=cluster.url)
    assert report.ok, report.tables
    assert report.tables[0].redis_rows == ROWS


def _key_elsewhere(rc: RedisCluster, cluster: ClusterServers, prefix: str) -> str:
    """A key under ``prefix`` whose slot lives on a primary other than the URL's node."""
    for n in range(100_000, 200_000):
        key = f"{prefix}{n}"
        if rc.get_node_from_key(key).port != cluster.ports[0]:
            return key
    raise AssertionError("unreachable")


def test_tampering_is_found(
    cluster: ClusterServers, rc: RedisCluster, items: Path, mysql_db: Any
) -> None:
    migrate(items, source=mysql_db.url, target=cluster.url)
    args = ("verify", str(items), "--source", mysql_db.url, "--target", cluster.url)
    assert cli(*args)[0] == 0
    rc.delete("item:17")
    code, out = cli(*args)
    assert code == 1 and "item:17" in out
    migrate(items, source=mysql_db.url, target=cluster.url)
    assert cli(*args)[0] == 0
    stale_row = _key_elsewhere(rc, cluster, "item:")
    rc.hset(stale_row, "name", "nobody")
    report = verify(items, source=mysql_db.url, target=cluster.url)
    check = report.tables[0]
    assert not report.ok and check.counts[vr.STALE] == 1, check.as_dict()
    assert [d.key for d in check.examples[vr.STALE]] == [stale_row]
    rc.delete(stale_row)
    stale_set = _key_elsewhere(rc, cluster, "item:indices:grp:")
    rc.sadd(stale_set, "1")
    code, out = cli(*args, "--json")
    assert code == 1 and stale_set in out


def test_resume_after_a_failure(
    cluster: ClusterServers, rc: RedisCluster, items: Path, mysql_db: Any, redis_url: str,
    redis_client: redis.Redis,
) -> None:  # fmt: skip
    migrate(items, source=mysql_db.url, target=redis_url, workers=1)
    want = snapshot(redis_client)
    # a key of the wrong type where the index set of grp 70 (ids 2800-2839) must go
    rc.set("item:indices:grp:70", "in the way")
    with pytest.raises(TargetError, match="WRONGTYPE"):
        migrate(items, source=mysql_db.url, target=cluster.url, workers=2, into_existing=True)
    state = Checkpoint(rc, "items").load()
    assert sum(s.rows for s in state.values()) > 0
    assert not all(s.done for s in state.values())
    rc.delete("item:indices:grp:70")
    again = migrate(items, source=mysql_db.url, target=cluster.url, workers=2, resume=True)
    table = again.tables[0]
    assert table.resumed_from > 0 and table.resumed_from + table.rows == ROWS
    assert snapshot(rc) == want
    assert verify(items, source=mysql_db.url, target=cluster.url).ok


def test_moved_replies_refresh_the_slot_map(cluster: ClusterServers, rc: RedisCluster) -> None:
    """Commands sent to the wrong primary (a stale slot map) come back MOVED and are sent
    again to the right one, the per-key transaction of a latest list included."""
    client = connect_any(cluster.url)
    assert isinstance(client, RedisCluster)
    sink = ClusterSink(client)
    keys = [b"k:%d" % i for i in range(200)]
    wrong = {n.port: n for n in client.get_primaries()}
    for key in [*keys, b"list"]:
        right = client.get_node_from_key(key).port
        sink.router.nodes[key_slot(key)] = next(n for p, n in wrong.items() if p != right)
    rc.set("list", "old")  # DEL inside the transaction clears it
    commands_ = [(b"SET", k, k) for k in keys]
    commands_ += [(b"MULTI",), (b"DEL", b"list"), (b"RPUSH", b"list", b"3", b"2"), (b"EXEC",)]
    sink.write(commands_)
    assert [rc.get(k) for k in keys] == keys
    assert rc.lrange("list", 0, -1) == [b"3", b"2"]
    client.close()


def test_seed_passwords_are_masked() -> None:
    from migrator.urls import mask

    assert mask("redis+cluster://u:secret@h1:1,h2:2/0") == "redis+cluster://u:***@h1:1,h2:2/0"


def test_ask_replies_go_to_the_importing_node(cluster: ClusterServers) -> None:
    """A slot being migrated: a new key is refused with ASK by its owner and written on the
    importing node after ASKING."""
    client = connect_any(cluster.url)
    assert isinstance(client, RedisCluster)
    key = b"asked:1"
    slot = key_slot(key)
    owner_port = client.get_node_from_key(key).port
    other_port = next(p for p in cluster.ports if p != owner_port)
    owner, other = cluster.node(owner_port), cluster.node(other_port)
    owner_id, other_id = (
        owner.execute_command("CLUSTER MYID"),
        other.execute_command("CLUSTER MYID"),
    )
    other.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", owner_id)
    owner.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", other_id)
    try:
        ClusterSink(client).write([(b"SET", key, b"v")])
        assert owner.execute_command("CLUSTER COUNTKEYSINSLOT", slot) == 0
        assert other.execute_command("CLUSTER COUNTKEYSINSLOT", slot) == 1
        other.execute_command("ASKING")
        assert other.execute_command("GET", key) == b"v"
    finally:
        other.execute_command("ASKING")
        other.delete(key)  # a node keeps no keys of a slot it gives back
        for node in (owner, other):
            node.execute_command("CLUSTER SETSLOT", slot, "NODE", owner_id)
            node.close()
        client.close()


def test_fix_and_replace_on_a_cluster(
    cluster: ClusterServers, rc: RedisCluster, items: Path, mysql_db: Any
) -> None:
    """verify --fix repairs every kind of difference on a cluster, keys on every primary;
    migrate --replace removes what the mapping owns there and loads again."""
    migrate(items, source=mysql_db.url, target=cluster.url, workers=1)
    stale_row = _key_elsewhere(rc, cluster, "item:")
    rc.hset(stale_row, "name", "nobody")
    rc.delete("item:17")
    rc.hset("item:18", "extra", "1")
    rc.hset("item:19", "name", "wrong")
    rc.sadd("item:indices:grp:0", "2999")  # a foreign member
    rc.srem("item:indices:grp:1", "41")  # a missing one
    rc.hset("item:uniques:code", "nope", "5")
    rc.zadd("item:by:score", {"20": 9999})
    rc.set("item:id", "1")
    rc.lpush("item:latest", "7")
    rc.set(_key_elsewhere(rc, cluster, "item:junk:"), "x")
    fixed = verify(items, source=mysql_db.url, target=cluster.url, fix=True)
    changed = fixed.repaired[0].counts
    assert fixed.ok and fixed.found is not None, [t.as_dict() for t in fixed.tables]
    assert changed[vr.STALE] == 2 and changed[vr.MISSING_ROW] == 1, changed
    assert changed[vr.FOREIGN_INDEX] == 1 and changed[vr.MISSING_INDEX] == 1, changed
    assert changed[vr.FOREIGN_UNIQUE] == 1 and changed[vr.WRONG_LATEST] == 1, changed
    assert not rc.exists(stale_row) and rc.hget("item:19", "name") == b"na\xc3\xafve 19"
    assert verify(items, source=mysql_db.url, target=cluster.url).ok
    mysql_db.run("DELETE FROM item WHERE id > 2000")
    rc.set("someone:else", "kept")
    report = migrate(items, source=mysql_db.url, target=cluster.url, replace=True)
    assert report.removed is not None and report.removed >= ROWS
    assert rc.get("someone:else") == b"kept" and not rc.exists("item:2500")
    assert verify(items, source=mysql_db.url, target=cluster.url).ok
