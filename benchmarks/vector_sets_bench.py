"""Vector sets (``vector_sets:``): migrate's rate and Redis 8's memory for embeddings, and what
VSIM answers against an exhaustive scan.

    PYTHONPATH=. .venv/bin/python benchmarks/vector_sets_bench.py [--rows 100000] [--dim 768]
        [--quant noquant] [--queries 100] [--ef N]

Starts its own MariaDB (tests/binlog_server.py) and a Redis 8 (scripts/redis-server.sh
--flavor redis8) on free ports and removes both at the end. Loads ``rows`` products whose
embedding is a VARBINARY of ``dim`` packed float32 (seeded uniform values; as MySQL 9.7's
VECTOR reads, the bytes are the same), then:

* ``migrate`` into an empty Redis: rows / seconds of its report, the set's ``MEMORY USAGE``
  and ``used_memory`` grown, per element;
* ``queries`` VSIMs (``ELE`` of a random product, ``COUNT 10``): the median latency, and the
  recall@10 of the graph's answer against ``TRUTH`` (Redis's exhaustive scan), with and
  without a FILTER on an attribute.
"""

from __future__ import annotations

import argparse
import random
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from migrator.commands import migrate
from migrator.mapping.loader import parse_mapping
from tests.binlog_server import PrivateMariaDB
from tests.cluster import free_ports
from tests.targets import FlavorServer

MAPPING = """
version: 1
tables:
  product:
    columns: [category, price]
    vector_sets:
      - {{key: "product:similar", vector: embedding, dim: {dim}, quant: {quant},
         attributes: [category, price]{ef}}}
"""


def load(db: PrivateMariaDB, rows: int, dim: int) -> None:
    conn = db.connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE bench")
    cur.execute("USE bench")
    cur.execute(f"CREATE TABLE product (id INT PRIMARY KEY, category VARCHAR(20), "
                f"price DECIMAL(8,2), embedding VARBINARY({4 * dim}))")  # fmt: skip
    rng = random.Random(1)
    fmt = f"<{dim}f"
    for start in range(1, rows + 1, 2000):
        batch = [(i, rng.choice(["books", "music", "toys"]), f"{rng.randint(100, 9999) / 100:.2f}",
                  struct.pack(fmt, *(rng.uniform(-1, 1) for _ in range(dim))))
                 for i in range(start, min(start + 2000, rows + 1))]  # fmt: skip
        cur.executemany("INSERT INTO product VALUES (%s,%s,%s,%s)", batch)
        conn.commit()
    conn.close()


def vsim(client: redis.Redis, query: str, *extra: str) -> list[bytes]:
    got = client.execute_command("VSIM", "product:similar", "ELE", query, "COUNT", 10, *extra)
    return list(got)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--quant", default="noquant", choices=["noquant", "q8", "bin"])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--ef", type=int, default=None, help="VADD's EF (default: Redis's)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vector-sets-bench-"))
    redis8 = FlavorServer("redis8", free_ports(1)[0], work / "redis8")
    (work / "redis8").mkdir()
    db = PrivateMariaDB(binlog=False, dir=work / "mariadb")
    db.start()
    url = redis8.start()
    try:
        t = time.monotonic()
        load(db, args.rows, args.dim)
        print(f"loaded {args.rows:,} rows of {args.dim} floats into MariaDB in "
              f"{time.monotonic() - t:.1f} s")  # fmt: skip
        client = redis.Redis.from_url(url)
        before = int(client.info("memory")["used_memory"])
        mapping = parse_mapping(
            MAPPING.format(
                dim=args.dim, quant=args.quant, ef="" if args.ef is None else f", ef: {args.ef}"
            ),
            name="bench",
        )
        report = migrate(mapping, source=f"{db.url}/bench", target=f"{url}/0")
        (table,) = report.tables
        grown = int(client.info("memory")["used_memory"]) - before
        usage = int(client.memory_usage("product:similar", samples=0) or 0)
        n = int(client.execute_command("VCARD", "product:similar"))
        print(f"migrate: {n:,} elements in {table.seconds:.1f} s = {n / table.seconds:,.0f} rows/s;"
              f" MEMORY USAGE {usage / n:,.0f} B/element, used_memory grew {grown / n:,.0f} "
              f"B/element ({args.quant}, {args.dim} floats = {4 * args.dim} B)")  # fmt: skip
        rng = random.Random(2)
        for label, extra in (("no filter", ()), ("FILTER .price < 50", ("FILTER", ".price < 50"))):
            took, hits = [], 0
            for _ in range(args.queries):
                q = str(rng.randint(1, args.rows))
                t = time.monotonic()
                graph = vsim(client, q, *extra)
                took.append(time.monotonic() - t)
                truth = vsim(client, q, *extra, "TRUTH")
                hits += len(set(graph) & set(truth))
            print(f"VSIM COUNT 10, {label}: median {statistics.median(took) * 1000:.2f} ms, "
                  f"recall@10 {hits / (10 * args.queries):.3f} against TRUTH "
                  f"({args.queries} queries)")  # fmt: skip
    finally:
        redis8.stop()
        db.stop()


if __name__ == "__main__":
    main()
