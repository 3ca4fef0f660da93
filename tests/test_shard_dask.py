"""``migrate --dask`` over a sharded source (docs/sharding.md#migrate): each shard's chunks run
as tasks of a real Dask cluster (a scheduler and two workers on loopback ports), each chunk
carrying its shard's URL; the result equals the union loaded locally."""

from __future__ import annotations

import pytest

from migrator.commands import migrate
from migrator.commands.verify import verify
from tests import test_shards
from tests.dask_cluster import dask_cluster
from tests.test_shards import EAST, WEST, _fill, _mapping, expected, held

two = test_shards.two  # the fixture: two shard databases on the engine's server


@pytest.mark.engine("mariadb", why="the Dask cluster is what this test varies, not the engine")
def test_each_shards_chunks_run_on_the_cluster(two, tmp_path, redis_url, redis_client, monkeypatch):
    monkeypatch.delenv("MIGRATOR_WORKERS", raising=False)  # (--dask excludes --workers)
    east, west = two
    _fill(east, EAST)
    _fill(west, WEST)
    f = _mapping(tmp_path, {"east": east.url, "west": west.url}, redis_url)
    with dask_cluster(tmp_path / "dask") as cluster:
        report = migrate(f, dask=cluster.address, chunk_rows=1)
    assert report.exit_code == 0, report.tables
    assert {t.table: t.rows for t in report.tables} == {"customer@east": 3, "customer@west": 2}
    assert held(redis_client) == expected({"east": EAST, "west": WEST})
    assert verify(f).ok
