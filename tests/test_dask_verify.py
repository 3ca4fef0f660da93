"""verify --dask with --fix, --sample and --counts-only (issue 21): each gives what the same
verify gives on this host (its --json, less timings, the snapshot and the examples it names,
which may be other ones), on a real Dask cluster (a ``dask scheduler`` and two ``dask
worker`` processes, shared by this module's tests: none of them breaks it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands import migrate, verify
from migrator.verify.report import VerifyReport
from tests.dask_cluster import DaskCluster, dask_cluster
from tests.test_faults import MAPPING, make_table

ROWS = 6000


@pytest.fixture(autouse=True)
def _no_local_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIGRATOR_WORKERS", raising=False)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:
    with dask_cluster(tmp_path_factory.mktemp("dask")) as c:
        yield c


@pytest.fixture
def loaded(mysql_db: Any, redis_url: str, tmp_path: Path) -> Path:
    """Table t (an index, a latest list, a counter) of ROWS rows, loaded."""
    make_table(mysql_db, ROWS)
    path = tmp_path / "t.yaml"
    path.write_text(MAPPING.format(batch=200, attempts=3))
    assert migrate(path, source=mysql_db.url, target=redis_url, workers=1).exit_code == 0
    return path


def damage(r: redis.Redis) -> None:
    """One difference of each kind a row, an index or the end of a table can have."""
    r.hset("t:7", "name", "changed")  # a value
    r.hdel("t:8", "grp")  # a field
    r.delete("t:9")  # a row
    r.hset("t:999999", "name", "nobody")  # a stale row key
    r.set("t:id", "5")  # the counter
    r.sadd("t:indices:grp:5", "999998")  # a member nobody explains
    r.srem("t:indices:grp:6", "6")  # a missing member
    r.lpop("t:latest")  # the latest list


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A --json report less what two equal runs may differ in."""

    def table(t: dict[str, Any]) -> dict[str, Any]:
        return t | {"seconds": 0, "examples": len(t["examples"]) > 0}

    out = report | {"seconds": 0, "snapshot": None, "tables": [table(t) for t in report["tables"]]}
    if "fix" in out:
        fix = out["fix"]
        out["fix"] = fix | {
            "tables": [table(t) for t in fix["tables"]],
            "found": [table(t) for t in fix["found"] or []],
        }
    return out


def cli_json(*args: str) -> tuple[int, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIGRATOR_") or "TEST" in k}
    done = subprocess.run(
        [sys.executable, "-m", "migrator", "verify", *args, "--json"],
        capture_output=True, text=True, env={**env, "COLUMNS": "200"}, timeout=300,
    )  # fmt: skip
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_fix_on_the_cluster_repairs_what_a_local_fix_repairs(
    loaded: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis, cluster: DaskCluster
) -> None:
    common = [str(loaded), "--source", mysql_db.url, "--target", redis_url, "--fix"]
    damage(redis_client)
    local_code, local = cli_json(*common)
    damage(redis_client)
    code, remote = cli_json(*common, "--dask", cluster.address, "--chunk-rows", "1000")
    assert code == local_code == 0, remote
    assert comparable(remote) == comparable(local)
    assert remote["fix"]["changed"] >= 8 and remote["fix"]["rechecked"]
    assert verify(loaded, source=mysql_db.url, target=redis_url).exit_code == 0


def test_fix_on_the_cluster_rebuilds_a_key_of_another_type_once(
    loaded: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis, cluster: DaskCluster
) -> None:
    # every chunk has members of each index set: each chunk's check meets the string where a
    # set must be, and only the first one that repairs it may delete it
    for g in range(10):
        redis_client.delete(f"t:indices:grp:{g}")
        redis_client.set(f"t:indices:grp:{g}", "in the way")
    fixed = verify(loaded, source=mysql_db.url, target=redis_url, fix=True,
                   dask=cluster.address, chunk_rows=500)  # fmt: skip
    assert fixed.exit_code == 0, fixed.as_dict()
    assert sum(t.counts["wrong type"] for t in fixed.repaired) >= 10
    assert redis_client.scard("t:indices:grp:5") == len(range(5, ROWS + 1, 97))
    assert verify(loaded, source=mysql_db.url, target=redis_url).exit_code == 0


def both(
    loaded: Path, mysql_db: Any, redis_url: str, cluster: DaskCluster, **options: Any
) -> tuple[VerifyReport, VerifyReport]:
    local = verify(loaded, source=mysql_db.url, target=redis_url, **options)
    remote = verify(loaded, source=mysql_db.url, target=redis_url, dask=cluster.address,
                    **options)  # fmt: skip
    return local, remote


def test_sample_on_the_cluster_finds_what_a_local_sample_finds(
    loaded: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis, cluster: DaskCluster
) -> None:
    clean_local, clean = both(loaded, mysql_db, redis_url, cluster, sample=500)
    assert clean.exit_code == clean_local.exit_code == 0, clean.as_dict()
    assert clean.tables[0].notes == clean_local.tables[0].notes
    damage(redis_client)
    # a sample of every row meets every difference, wherever it runs
    local, remote = both(loaded, mysql_db, redis_url, cluster, sample=ROWS)
    assert remote.exit_code == local.exit_code == 1
    assert comparable(remote.as_dict()) == comparable(local.as_dict())
    assert remote.mode == f"sample {ROWS}" and sum(remote.tables[0].counts.values()) >= 6


def test_counts_only_on_the_cluster_finds_what_a_local_count_finds(
    loaded: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis, cluster: DaskCluster
) -> None:
    clean_local, clean = both(loaded, mysql_db, redis_url, cluster, counts_only=True)
    assert clean.exit_code == clean_local.exit_code == 0, clean.as_dict()
    assert comparable(clean.as_dict()) == comparable(clean_local.as_dict())
    for i in range(10, 20):
        redis_client.delete(f"t:{i}")
    redis_client.set("t:id", "5")
    local, remote = both(loaded, mysql_db, redis_url, cluster, counts_only=True)
    assert remote.exit_code == local.exit_code == 1
    assert comparable(remote.as_dict()) == comparable(local.as_dict())
    assert remote.tables[0].redis_rows == ROWS - 10


def test_row_images_are_concluded_once_over_the_chunks(  # type: ignore[no-untyped-def]
    mysql_db, redis_url: str, redis_client: redis.Redis, cluster: DaskCluster, tmp_path: Path
) -> None:
    """A cascade child's row images (plan/row_images.py), checked chunk by chunk on the
    cluster, are concluded once where the chunks meet: a clean load is 0, an image of a row
    MySQL lacks is named."""
    from migrator.plan.expiry import encode_row
    from tests.sync.test_cascade_images import SHAPES, Writes, _load

    _load(mysql_db)
    work = Writes(mysql_db, 3)
    work.run(150)
    work.close()
    path = tmp_path / "shapes.yaml"
    path.write_text(SHAPES)
    assert migrate(path, source=mysql_db.url, target=redis_url).exit_code == 0
    common = [str(path), "--source", mysql_db.url, "--target", redis_url]
    code, remote = cli_json(*common, "--dask", cluster.address, "--chunk-rows", "10")
    assert code == 0, remote
    redis_client.hset("migrator:shapes:rows:comment", encode_row((b"999999",)), b"x")
    code, remote = cli_json(*common, "--dask", cluster.address, "--chunk-rows", "10")
    (comment,) = [t for t in remote["tables"] if t["table"] == "comment"]
    assert code == 1 and comment["differences"] == {"extra field": 1}, remote
