"""Every bulk read uses the fast reader (issue 18, item 3): ``migrate`` with one worker and
with worker processes, ``verify``, ``dry-run``'s estimate pass, ``sync``'s snapshot load and
the chunks run on a Dask cluster.

Each report counts, per table, the rows read by each driver (``readers``, in ``--json`` too),
where the rows are read (``Source.reader`` of the connection that read the batch), in the
process that read them. By default every row must have been read by asyncmy; with
``MIGRATOR_RAW_DRIVER=pymysql`` by PyMySQL (so the count follows the driver really used).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands import dry_run, migrate, sync, verify
from migrator.mapping.loader import parse_mapping
from migrator.source.drivers import RAW_DRIVER_ENV
from tests.services import create_database, drop_database, new_database_name

ROWS = 240
MAPPING = "version: 1\ntables:\n  t:\n    indexes: [g]\n"
TABLE = "CREATE TABLE t (id INT PRIMARY KEY, g INT NOT NULL, v VARCHAR(20), KEY (g));"


def _fill(db: Any) -> None:
    values = ", ".join(f"({i}, {i % 7}, 'v{i}')" for i in range(1, ROWS + 1))
    db.run(TABLE + f"INSERT INTO t VALUES {values};")


@pytest.fixture
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The driver every row must be read by: the default (asyncmy), or PyMySQL forced."""
    monkeypatch.delenv("MIGRATOR_WORKERS", raising=False)  # each call says how many
    if request.param == "default":
        monkeypatch.delenv(RAW_DRIVER_ENV, raising=False)
        return "asyncmy"
    monkeypatch.setenv(RAW_DRIVER_ENV, request.param)  # worker processes inherit it
    return str(request.param)


@pytest.mark.parametrize("reader", ["default", "pymysql"], indirect=True)
def test_migrate_verify_and_dry_run_read_with_the_reader(
    reader: str, mysql_db: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    _fill(mysql_db)
    mapping = parse_mapping(MAPPING)
    expected = {reader: ROWS}
    planned = dry_run(mapping, source=mysql_db.url, target=redis_url)
    assert planned.tables[0].readers == expected
    assert planned.as_dict()["tables"][0]["readers"] == expected
    one = migrate(mapping, source=mysql_db.url, target=redis_url, workers=1)
    assert one.exit_code == 0 and one.tables[0].readers == expected
    assert one.as_dict()["tables"][0]["readers"] == expected
    checked = verify(mapping, source=mysql_db.url, target=redis_url)
    assert checked.exit_code == 0 and checked.tables[0].readers == expected
    assert checked.as_dict()["tables"][0]["readers"] == expected
    redis_client.flushdb()
    # six chunks on a local thread and a worker process: one driver for all of them
    many = migrate(mapping, source=mysql_db.url, target=redis_url, workers=2, chunk_rows=40)
    assert many.exit_code == 0 and many.tables[0].readers == expected
    assert verify(mapping, source=mysql_db.url, target=redis_url).exit_code == 0


@pytest.fixture
def logged_db(binlog_server: Any) -> Iterator[Any]:
    """A database of its own on the private server with the row binary log."""
    db = create_database(binlog_server.url, new_database_name())
    try:
        yield db
    finally:
        drop_database(binlog_server.url, db.name)


@pytest.mark.parametrize("reader", ["default", "pymysql"], indirect=True)
def test_sync_loads_its_snapshot_with_the_reader(
    reader: str, logged_db: Any, redis_url: str
) -> None:
    _fill(logged_db)
    report = sync(parse_mapping(MAPPING), source=logged_db.url, target=redis_url,
                  until_caught_up=True)  # fmt: skip
    assert [t.readers for t in report.loaded] == [{reader: ROWS}]
    assert report.as_dict()["loaded"][0]["readers"] == {reader: ROWS}


@pytest.mark.parametrize("reader", ["default"], indirect=True)
def test_dask_chunks_read_with_asyncmy(
    reader: str, mysql_db: Any, redis_url: str, tmp_path: Path
) -> None:
    """The chunks of ``migrate --dask`` and ``verify --dask``, read on the cluster's workers
    (processes started with the tool's environment, no driver forced)."""
    pytest.importorskip("distributed", reason="the dask extra is not installed")
    from tests.dask_cluster import dask_cluster

    _fill(mysql_db)
    mapping = parse_mapping(MAPPING)
    with dask_cluster(tmp_path / "dask") as cluster:
        loaded = migrate(mapping, source=mysql_db.url, target=redis_url, dask=cluster.address,
                         chunk_rows=40)  # fmt: skip
        checked = verify(mapping, source=mysql_db.url, target=redis_url, dask=cluster.address,
                         chunk_rows=40)  # fmt: skip
    assert loaded.exit_code == 0 and loaded.tables[0].readers == {reader: ROWS}
    assert checked.exit_code == 0 and checked.tables[0].readers == {reader: ROWS}
