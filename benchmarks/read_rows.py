"""How fast each driver reads the benchmark table, alone (issue 18): ``Source.batches`` over
every column of ``emp`` in 5,000-row batches, as migrate reads it, alternating asyncmy and
PyMySQL in each repetition; rows/s and the process's CPU seconds.

    .venv/bin/python benchmarks/read_rows.py \
        --source mysql+pymysql://root@127.0.0.1:3306/migrator_bench --reps 3

The table is the one benchmarks/run.py generates (run it first); nothing is written.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import DEFAULT_SOURCE

from migrator.source.drivers import RAW_DRIVER_ENV, RAW_DRIVERS
from migrator.source.mysql import Source


def read_all(url: str, driver: str) -> tuple[int, float, float]:
    """Rows read, wall seconds, CPU seconds of reading ``emp`` through ``driver``."""
    os.environ[RAW_DRIVER_ENV] = driver
    with Source(url) as src:
        table = src.schema().tables["emp"]
        selector = src.selector("emp", [c.name for c in table.columns])
        wall, cpu = time.perf_counter(), time.process_time()
        rows = sum(len(b) for b in src.batches("emp", selector, list(table.primary_key), 5000))
        return rows, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help=f"e.g. {DEFAULT_SOURCE}")
    parser.add_argument("--reps", type=int, default=3, help="repetitions, e.g. 3")
    args = parser.parse_args()
    for rep in range(1, args.reps + 1):
        for driver in RAW_DRIVERS:
            rows, wall, cpu = read_all(args.source, driver)
            one = os.getloadavg()[0]
            print(f"rep {rep} {driver:8} {rows:,} rows  {rows / wall:10,.0f} rows/s  "
                  f"CPU {cpu:.2f} s  load {one:.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
