"""``migrate --replace --shard NAME`` (docs/sharding.md#migrate): one shard's rows removed from
Redis through the owner hash, their members of shared structures with them, and the shard
loaded again; another shard's keys stay as they were, even where its MySQL rows changed."""

from __future__ import annotations

import pytest
from redis.cluster import RedisCluster
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import migrate
from migrator.commands.verify import verify
from migrator.store.claims import COLLISION
from migrator.verify import report as vr
from tests import test_shards
from tests.test_shards import EAST, WEST, _fill, _mapping, expected, held

two = test_shards.two  # the fixture: two shard databases on the engine's server

MOVED = (3, "cy", "cy@x", "ap", "2024-05-01 00:00:00")  # row 3 of east, moved to region ap


def test_one_shard_is_reloaded_alone(two, tmp_path, redis_url, redis_client):
    east, west = two
    _fill(east, EAST)
    _fill(west, WEST)
    f = _mapping(tmp_path, {"east": east.url, "west": west.url}, redis_url)
    assert migrate(f).exit_code == 0
    # east: row 2 deleted, row 3 moved to another region, row 4 added; west: row 101 deleted
    east.run("DELETE FROM customer WHERE id = 2; UPDATE customer SET region = 'ap' WHERE id = 3")
    _fill(east, [(4, "fay", "fay@x", "eu", "2024-07-01 00:00:00")])
    west.run("DELETE FROM customer WHERE id = 101")
    report = migrate(f, replace=True, shard="east")
    assert report.exit_code == 0, report.tables
    assert report.removed == 3  # east's three rows as Redis held them
    assert [t.table for t in report.tables] == ["customer@east"]
    now_east = [EAST[0], MOVED, (4, "fay", "fay@x", "eu", "2024-07-01 00:00:00")]
    want = expected({"east": now_east, "west": WEST})  # west as Redis held it: 101 stays
    want[b"customer:latest"] = [b"4", b"102", b"3"]  # the union's newest, 101 no longer in it
    assert held(redis_client) == want
    # what west's change left (its row 101) is verify's to find, and --fix's to remove
    found = verify(f)
    assert not found.ok
    shown = {d.key for t in found.tables for ds in t.examples.values() for d in ds}
    assert "customer:101" in shown, shown
    assert verify(f, fix=True).ok


@pytest.mark.parametrize(
    "mapping", ["  customer: {as: columns}\n", "  customer: {formats: {created: epoch}}\n"]
)
def test_tables_it_cannot_undo_row_by_row_are_refused(
    two, tmp_path, redis_url, redis_client, mapping
):
    east, west = two
    f = tmp_path / "m.yaml"
    f.write_text(
        f'version: 1\nsources:\n  - {{name: east, url: "{east.url}"}}\n'
        f'  - {{name: west, url: "{west.url}"}}\ntarget: {redis_url}\ntables:\n{mapping}'
    )
    result = CliRunner().invoke(app, ["migrate", str(f), "--replace", "--shard", "east"])
    assert result.exit_code == 2, result.output
    assert "cannot be removed one by one" in result.output
    assert redis_client.dbsize() == 0


@pytest.mark.engine("mariadb", why="the target is what this test varies, not the engine")
def test_a_cluster_target(two, tmp_path, redis_cluster):
    """The same on a Redis Cluster: claims, the owner hash and one shard's reload are
    commands on keys of many slots, each routed to its node."""
    east, west = two
    _fill(east, EAST)
    _fill(west, [(2, "bob2", "bob2@x", "us", "2024-02-02 00:00:00"), *WEST])
    f = _mapping(tmp_path, {"east": east.url, "west": west.url}, redis_cluster.url)
    redis_cluster.flush()
    rc = RedisCluster(host="127.0.0.1", port=redis_cluster.ports[0])
    try:
        report = migrate(f)
        assert report.exit_code == 1  # west's row 2: a collision, not written
        assert sum(t.rejected.get(COLLISION, 0) for t in report.tables) == 1
        assert held(rc) == expected({"east": EAST, "west": WEST})
        assert dict(verify(f).tables[0].counts) == {vr.COLLIDING: 1}
        east.run("DELETE FROM customer WHERE id = 3")
        again = migrate(f, replace=True, shard="east")
        assert again.exit_code == 0 and again.removed == 3
        assert held(rc) == expected({"east": EAST[:2], "west": WEST})
        assert dict(verify(f).tables[0].counts) == {vr.COLLIDING: 1}
    finally:
        rc.close()
        redis_cluster.flush()
