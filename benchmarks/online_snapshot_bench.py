"""An online snapshot's speed next to migrate's, on the same table.

    PYTHONPATH=. .venv/bin/python benchmarks/online_snapshot_bench.py [--rows 500000]
        [--chunk-rows 50000] [--reps 3]

Starts its own MariaDB (row binary log) and redis-server on free ports (tests/binlog_server.py,
benchmarks/sync_bench.py), and removes both at the end. The table is sync_bench's ``emp`` with
its mapping (row hash, counter, unique hash, index set, sorted set). Per repetition, on an
empty Redis database each time:

* ``migrate``: rows / seconds of its report (one reader, the default driver);
* ``sync --online-load`` (the default) into the empty database: the first run, every table
  read online; rows / the whole command's seconds;
* ``sync --consistent-load`` into an empty database: the first run, every table read in one
  consistent snapshot; rows / the whole command's seconds;
* ``sync --resnapshot emp`` (after that first run): the table's keys removed,
  then read online chunk by chunk while the log is followed; rows / the snapshot's seconds
  (wall clock, from the removal of the old keys to the last chunk's counter), and rows / the
  whole command's seconds (its start-up and the mapping's introspection included).

Prints each figure and the median ratio online / migrate.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.sync_bench import INSERT, MAPPING, PrivateRedis, _row, bench_database
from migrator.commands import migrate
from migrator.commands.session import opened
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import TablePlan
from migrator.store.keys import remove_owned
from migrator.sync.online_snapshot import SNAPSHOT_CHUNK_ROWS
from tests.binlog_server import PrivateMariaDB


def load(db: PrivateMariaDB, rows: int) -> None:
    conn = db.connect("bench")
    conn.autocommit(False)
    cur = conn.cursor()
    for start in range(1, rows + 1, 5000):
        cur.executemany(INSERT, [_row(i) for i in range(start, min(start + 5000, rows + 1))])
        conn.commit()
    cur.execute("ANALYZE TABLE emp")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--chunk-rows", type=int, default=SNAPSHOT_CHUNK_ROWS)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    db, target = PrivateMariaDB(), PrivateRedis()
    try:
        url = bench_database(db)
        load(db, args.rows)
        mapping = parse_mapping(MAPPING, name="bench")
        client = redis.Redis.from_url(target.url)
        ratios: list[float] = []
        firsts: list[float] = []
        consistent: list[float] = []
        for rep in range(args.reps):
            client.flushdb()
            report = migrate(mapping, source=url, target=target.url)
            m_rate = report.rows / report.seconds
            print(f"rep {rep + 1}: migrate {report.rows:,} rows in {report.seconds:.2f} s = "
                  f"{m_rate:,.0f} rows/s")  # fmt: skip
            client.flushdb()
            t0 = time.perf_counter()
            first = sync(mapping, source=url, target=target.url, until_caught_up=True,
                         server_id=9201, online_load=True, chunk_rows=args.chunk_rows)  # fmt: skip
            wall = time.perf_counter() - t0
            [loaded] = first.loaded
            f_rate = loaded.rows / wall
            print(f"rep {rep + 1}: sync --online-load (first run) {loaded.rows:,} rows in "
                  f"{wall:.2f} s (the whole command) = {f_rate:,.0f} rows/s")  # fmt: skip
            firsts.append(f_rate / m_rate)
            client.flushdb()
            t0 = time.perf_counter()
            whole = sync(mapping, source=url, target=target.url, until_caught_up=True,
                         server_id=9203, online_load=False)  # fmt: skip
            wall = time.perf_counter() - t0
            c_rate = sum(t.rows for t in whole.loaded) / wall
            print(f"rep {rep + 1}: sync --consistent-load (first run) {c_rate * wall:,.0f} rows "
                  f"in {wall:.2f} s (the whole command) = {c_rate:,.0f} rows/s")  # fmt: skip
            consistent.append(c_rate / m_rate)  # its keys and state: the re-snapshot's start
            t0 = time.perf_counter()  # the removal of emp's keys, timed apart (the run's own
            with opened(mapping, url) as (_, resolved):  # then finds none)
                space = KeySpace([TablePlan(r) for r in resolved])
            removed = remove_owned(client, space, ["emp"])
            clear = time.perf_counter() - t0
            t0 = time.perf_counter()
            done = sync(mapping, source=url, target=target.url, until_caught_up=True,
                        server_id=9202, resnapshot_tables=("emp",),
                        chunk_rows=args.chunk_rows)  # fmt: skip
            wall = time.perf_counter() - t0
            [snap] = done.resnapshots
            s_rate = snap.rows / snap.seconds
            print(f"rep {rep + 1}: sync --resnapshot emp {snap.rows:,} rows in "
                  f"{snap.seconds:.2f} s = {s_rate:,.0f} rows/s ({snap.rows / wall:,.0f} rows/s "
                  f"over the command's {wall:.2f} s), chunks of {args.chunk_rows:,}; the "
                  f"removal of its {removed:,} old keys before: {clear:.2f} s")  # fmt: skip
            ratios.append(s_rate / m_rate)
        print(
            f"online first load / migrate, median of {args.reps}: "
            f"{statistics.median(firsts):.0%} (each: {', '.join(f'{r:.0%}' for r in firsts)})"
        )
        print(
            f"consistent first load / migrate, median of {args.reps}: "
            f"{statistics.median(consistent):.0%} "
            f"(each: {', '.join(f'{r:.0%}' for r in consistent)})"
        )
        print(
            f"online re-snapshot / migrate, median of {args.reps}: "
            f"{statistics.median(ratios):.0%} (each: {', '.join(f'{r:.0%}' for r in ratios)})"
        )
        client.close()
    finally:
        db.stop()
        target.stop()


if __name__ == "__main__":
    main()
