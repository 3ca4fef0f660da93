"""The figures of docs/performance.md, "Vectors" (issue 38 part 5): ``migrate`` of
``MIGRATOR_VECTOR_ROWS`` rows (default 100,000) with a 768-dimension VECTOR, as row hashes and
as RedisJSON documents, each with its search index built (``MIGRATOR_VECTOR_ALGORITHM``:
hnsw, the default, or flat) (migrate waits the indexing out
before it moves the alias); Redis's memory after each; then ``sync``'s drain of 10,000
vector updates (transactions of 100 rows). MySQL 9.7 (the session's private server) and the
query-engine server of tests/modules_server.py. Marked ``long``: ``make test-long``, or
``pytest -s tests/sync/test_vectors_bench.py`` by name; it prints the figures, asserting only that
each run succeeded."""

from __future__ import annotations

import os
import random
import struct
import time
from typing import Any

import pytest
import redis

from migrator.commands import migrate, verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from tests.modules_server import ModulesServer
from tests.services import MySQLDatabase

pytestmark = pytest.mark.long

DIM = 768
MAPPING = """
version: 1
tables:
  item:
    as: {kind}
    formats: {{price: number}}
    search:
      name: items
      tag: [in_stock]
      numeric: [price]
      vector:
        embedding: {{metric: cosine, algorithm: {algorithm}}}
"""


def _pool(rnd: random.Random, size: int = 512) -> list[bytes]:
    return [struct.pack(f"<{DIM}f", *(rnd.gauss(0, 1) for _ in range(DIM))) for _ in range(size)]


def _vector(pool: list[bytes], rnd: random.Random) -> bytes:
    """One of the pool's vectors with its floats rotated: ~393,000 distinct vectors, cheaply."""
    v = pool[rnd.randrange(len(pool))]
    k = 4 * rnd.randrange(DIM)
    return v[k:] + v[:k]


def _fill(db: MySQLDatabase, rows: int, rnd: random.Random, pool: list[bytes]) -> None:
    db.run(
        f"CREATE TABLE item (id INT PRIMARY KEY, in_stock ENUM('yes','no') NOT NULL, "
        f"price DECIMAL(7,2) NOT NULL, embedding VECTOR({DIM}) NOT NULL)"
    )
    for start in range(0, rows, 2000):
        batch = [
            (i, rnd.choice(("yes", "no")), round(rnd.uniform(1, 120), 2), _vector(pool, rnd))
            for i in range(start + 1, min(rows, start + 2000) + 1)
        ]
        db.insert("INSERT INTO item VALUES (%s, %s, %s, %s)", batch)


def _memory(client: redis.Redis) -> tuple[float, float]:
    """(used_memory MiB, the index's vector memory MiB)."""
    used = int(client.info("memory")["used_memory"]) / 2**20
    info: Any = client.ft("items").info()
    return used, float(info.get("vector_index_sz_mb", 0) or 0)


@pytest.mark.engine("mysql", why="VECTOR(768) is MySQL 9's type")
def test_vector_figures(
    binlog_db: MySQLDatabase, modules_server: ModulesServer, modules_redis_url: str
) -> None:
    rows = int(os.environ.get("MIGRATOR_VECTOR_ROWS", "100000"))
    algorithm = os.environ.get("MIGRATOR_VECTOR_ALGORITHM", "hnsw")
    rnd = random.Random(38)
    pool = _pool(rnd)
    t = time.perf_counter()
    _fill(binlog_db, rows, rnd, pool)
    print(f"\nfilled {rows:,} rows of VECTOR({DIM}) in {time.perf_counter() - t:.1f}s")
    client = redis.Redis.from_url(modules_redis_url)
    base = int(client.info("memory")["used_memory"]) / 2**20
    ids = iter(range(38900, 38999))
    for kind in ("hash", "json"):
        modules_server.empty()
        mapping = parse_mapping(
            MAPPING.format(kind=kind, algorithm=algorithm), name=f"vectorbench{kind}"
        )
        t = time.perf_counter()
        report = migrate(mapping, source=binlog_db.url, target=modules_redis_url)
        took = time.perf_counter() - t
        assert report.exit_code == 0
        used, index = _memory(client)
        print(
            f"migrate {kind}: {rows:,} rows in {took:.1f}s = {rows / took:,.0f} rows/s "
            f"({algorithm.upper()} index built); used_memory {used - base:,.0f} MiB over "
            f"the empty server's "
            f"{base:,.0f} MiB ({(used - base) * 2**20 / rows:,.0f} B/row), of which the "
            f"vector index {index:,.0f} MiB"
        )
        sync(mapping, source=binlog_db.url, target=modules_redis_url, until_caught_up=True,
             server_id=next(ids))  # fmt: skip
        _updates(binlog_db, rows, rnd, pool)
        t = time.perf_counter()
        sync(mapping, source=binlog_db.url, target=modules_redis_url, until_caught_up=True,
             server_id=next(ids))  # fmt: skip
        took = time.perf_counter() - t
        print(f"sync {kind}: 10,000 vector updates (100 transactions of 100) drained in "
              f"{took:.1f}s = {10_000 / took:,.0f} rows/s, start-up included")  # fmt: skip
        assert verify(mapping, source=binlog_db.url, target=modules_redis_url).exit_code == 0
    client.close()


def _updates(db: MySQLDatabase, rows: int, rnd: random.Random, pool: list[bytes]) -> None:
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            for _ in range(100):
                for _ in range(100):
                    cur.execute(
                        "UPDATE item SET embedding = %s WHERE id = %s",
                        (_vector(pool, rnd), rnd.randint(1, rows)),
                    )
                conn.commit()
    finally:
        conn.close()
