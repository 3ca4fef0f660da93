"""``migrate`` of one table split over two shards against the same rows from one source
(docs/sharding.md#cost): the time of each, medians of ``--runs``, and what the owner hash
takes in Redis. The shards are two databases of their own on the MySQL server of
``--mysql`` (dropped at the end), the target a private redis-server on a free port (stopped
at the end).

    .venv/bin/python benchmarks/shards_migrate_bench.py --rows 100000 --runs 3
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pymysql
import redis

from migrator.commands import migrate

TABLE = (
    "CREATE TABLE {db}.customer (id INT PRIMARY KEY, name VARCHAR(40), email VARCHAR(60), "
    "region VARCHAR(10), UNIQUE KEY (email), KEY (region))"
)
TABLES = "tables:\n  customer: {unique: [email], indexes: [region]}\n"


def fill(conn: pymysql.Connection, db: str, first: int, last: int) -> None:
    with conn.cursor() as c:
        for at in range(first, last + 1, 5000):
            rows = [
                (k, f"n{k}", f"e{k}@x", f"r{k % 50}") for k in range(at, min(last, at + 4999) + 1)
            ]
            c.executemany(f"INSERT INTO {db}.customer VALUES (%s, %s, %s, %s)", rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000, help="rows per shard")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mysql", default="127.0.0.1:3306", help="host:port, user root")
    a = ap.parse_args()
    host, port = a.mysql.split(":")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    rport = s.getsockname()[1]
    s.close()
    work = Path(tempfile.mkdtemp())
    server = subprocess.Popen(
        ["redis-server", "--port", str(rport), "--save", "", "--appendonly", "no",
         "--dir", str(work)], stdout=subprocess.DEVNULL,
    )  # fmt: skip
    names = [f"mig_bench_{uuid.uuid4().hex[:8]}" for _ in range(3)]
    conn = pymysql.connect(host=host, port=int(port), user="root", autocommit=True)
    try:
        for db in names:
            with conn.cursor() as c:
                c.execute(f"CREATE DATABASE {db}")
                c.execute(TABLE.format(db=db))
        n = a.rows
        fill(conn, names[0], 1, n)
        fill(conn, names[1], n + 1, 2 * n)
        fill(conn, names[2], 1, 2 * n)
        url = f"mysql+pymysql://root@{host}:{port}/" + "{}"
        target = f"redis://127.0.0.1:{rport}/0"
        sharded, single = work / "sharded.yaml", work / "single.yaml"
        sharded.write_text(
            f'version: 1\nsources:\n  - {{name: east, url: "{url.format(names[0])}"}}\n'
            f'  - {{name: west, url: "{url.format(names[1])}"}}\ntarget: {target}\n{TABLES}'
        )
        single.write_text(f"version: 1\nsource: {url.format(names[2])}\ntarget: {target}\n{TABLES}")
        client = redis.Redis(port=rport)
        time.sleep(0.3)
        times: dict[str, list[float]] = {"one source": [], "two shards": []}
        memory: dict[str, int] = {}
        for _ in range(a.runs):
            for label, mapping in (("one source", single), ("two shards", sharded)):
                client.flushall()
                started = time.perf_counter()
                report = migrate(mapping, workers=1)
                times[label].append(time.perf_counter() - started)
                assert report.exit_code == 0
                memory[label] = int(client.info("memory")["used_memory"])
        owners = client.memory_usage("migrator:sharded:shard:customer") or 0
        for label, got in times.items():
            t = statistics.median(got)
            print(f"{label}: {2 * n:,} rows in {t:.2f} s ({2 * n / t:,.0f} rows/s), "
                  f"used_memory {memory[label] / 2**20:.1f} MiB")  # fmt: skip
        print(f"owner hash: {owners / 2**20:.1f} MiB, {owners / (2 * n):.0f} bytes per row")
    finally:
        with conn.cursor() as c:
            for db in names:
                c.execute(f"DROP DATABASE IF EXISTS {db}")
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
