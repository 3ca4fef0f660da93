"""Row filters on a Dask cluster (docs/mapping.md#where): ``migrate --dask`` loads, chunk by
chunk on the workers, exactly what one local worker loads, and ``verify --dask`` finds it
equal; a row that then leaves the filter is found as a stray key by both verifies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from migrator.commands import migrate
from migrator.commands.verify import verify
from tests.dask_cluster import DaskCluster, dask_cluster
from tests.services import MySQLDatabase
from tests.test_workers import snapshot

MAPPING = """
version: 1
tables:
  t:
    where: "(kind IN ('a', 'B') AND n >= 100) OR at < DATETIME '2024-01-01 00:00:00.5'"
    indexes: [kind]
"""


@pytest.fixture(autouse=True)
def _no_local_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIGRATOR_WORKERS", raising=False)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DaskCluster]:
    with dask_cluster(tmp_path / "dask") as c:
        yield c


def test_dask_chunks_load_and_verify_only_the_filtered_rows(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, cluster: DaskCluster,
    tmp_path: Path,
) -> None:  # fmt: skip
    mysql_db.run("CREATE TABLE t (id INT PRIMARY KEY, kind VARCHAR(4), n INT, at DATETIME(3))")
    rows = [(i, "aAbc"[i % 4], i % 300, f"2024-01-01 00:00:00.{(i % 3) * 250:03d}")
            for i in range(1, 3001)]  # fmt: skip
    mysql_db.insert("INSERT INTO t VALUES (%s, %s, %s, %s)", rows)
    path = tmp_path / "m.yaml"
    path.write_text(MAPPING)
    assert migrate(path, source=mysql_db.url, target=redis_url, workers=1).exit_code == 0
    want = snapshot(redis_client)
    held = [k for k in redis_client.scan_iter("t:[0-9]*")]
    assert 0 < len(held) < 3000
    redis_client.flushdb()
    report = migrate(path, source=mysql_db.url, target=redis_url, dask=cluster.address,
                     chunk_rows=300)  # fmt: skip
    assert report.exit_code == 0
    assert snapshot(redis_client) == want
    assert verify(path, source=mysql_db.url, target=redis_url, dask=cluster.address).ok
    kept = int(held[0].split(b":")[1])
    mysql_db.run(f"UPDATE t SET kind = 'z', at = '2030-01-01' WHERE id = {kept}")
    for dask in (None, cluster.address):
        found = verify(path, source=mysql_db.url, target=redis_url, dask=dask)
        assert not found.ok and f"t:{kept}" in str(found.as_dict())
