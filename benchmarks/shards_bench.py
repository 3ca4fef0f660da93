"""sync over a sharded source: the aggregate drain rate of one ``sync --shard`` process per shard
against the shards' combined sysbench write rate (the method of benchmarks/sysbench_bench.py).

    PYTHONPATH=. .venv/bin/python benchmarks/shards_bench.py [--engines mariadb,mysql,mariadb]
        [--seconds 20] [--threads 2] [--runs 1]

Starts one private source per engine listed (the one-source benchmark's ``Source``: a private
MariaDB, or Oracle MySQL 9.7 through scripts/mysql-server.sh, relaxed durability) and its own
redis-server; removes them at the end. Each shard holds sysbench's ``sbtest1..4`` (50,000 rows
each) with keys of its own: shard i's ids are moved up by i x 10,000,000 after ``prepare``, and
its ``oltp_write_only`` run picks its ids in its own range (a wrapper of sysbench's script that
offsets ``sysbench.rand.default``), so no primary key is on two shards. One mapping lists the
shards under ``sources:``.

1. Each shard's first load: ``migrator sync MAPPING --shard NAME --until-caught-up``.
2. Backlog: sysbench writes on every shard at once, at full speed, for ``--seconds``: each
   shard's txn/s, and their sum (the combined source rate).
3. The drain: one ``sync --shard NAME --until-caught-up`` process per shard, all started at
   once; each one's transactions and seconds (its ``--json`` report), and the aggregate:
   every shard's transactions over the time until the last process is done, its ratio to the
   combined source rate. The machine's load average is printed beside each figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.sync_bench import PrivateRedis
from benchmarks.sysbench_bench import ROWS, TABLES, Source, ensure_sysbench, load, sysbench

ROOT = Path(__file__).resolve().parent.parent
SPAN = 10_000_000  # each shard's ids: [i * SPAN + 1, i * SPAN + ROWS]
WRAPPER = """-- sysbench's oltp_write_only, its ids moved up by SHARD_OFFSET (shards_bench.py)
require("oltp_write_only")
local base = sysbench.rand.default
local offset = tonumber(os.getenv("SHARD_OFFSET") or "0")
sysbench.rand.default = function(a, b) return base(a, b) + offset end
"""


def mapping_text(shards: list[tuple[str, Source]]) -> str:
    sources = "".join(f"  - {{name: {name}, url: '{src.url}'}}\n" for name, src in shards)
    tables = "".join(
        f'  sbtest{i}:\n    key: "sb{i}:{{id}}"\n    indexes: [k]\n' for i in range(1, TABLES + 1)
    )
    return f"version: 1\nsources:\n{sources}tables:\n{tables}"


def migrator(*args: str) -> dict[str, Any]:
    """``migrator ARGS --json``: its report, the last line (``sync --json`` prints a status
    object per second before it; exit 0 expected)."""
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "migrator"), *args, "--json"],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"migrator {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def shift_ids(src: Source, offset: int) -> None:
    conn = src.connect()
    with conn.cursor() as cur:
        cur.execute("USE sbtest")
        for i in range(1, TABLES + 1):
            cur.execute(f"UPDATE sbtest{i} SET id = id + {offset} ORDER BY id DESC")
    conn.close()


def drain(mapping: Path, target: str, names: list[str]) -> tuple[dict[str, Any], float]:
    """One ``sync --shard`` per shard, started at once: each one's report, and the seconds
    until the last is done."""
    reports: dict[str, Any] = {}

    def one(k: int, name: str) -> None:
        reports[name] = migrator("sync", str(mapping), "--shard", name, "--target", target,
                                 "--until-caught-up", "--server-id", str(9300 + k))  # fmt: skip

    runners = [threading.Thread(target=one, args=(k, n)) for k, n in enumerate(names)]
    t0 = time.perf_counter()
    for r in runners:
        r.start()
    for r in runners:
        r.join()
    return reports, time.perf_counter() - t0


def write(rates: dict[str, float], k: int, name: str, src: Source, script: Path, args: Any) -> None:
    """sysbench on shard ``k`` at full speed, in its own id range: its rate into ``rates``."""
    rates[name] = sysbench(src, "run", args.threads, args.seconds, script=str(script),
                           env={"SHARD_OFFSET": str(k * SPAN)})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="mariadb,mysql", help="one shard per engine named")
    parser.add_argument("--seconds", type=float, default=20.0, help="sysbench's backlog run")
    parser.add_argument("--threads", type=int, default=2, help="sysbench's threads per shard")
    parser.add_argument("--runs", type=int, default=1, help="backlog runs (a new backlog each)")
    args = parser.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    ensure_sysbench()
    shards: list[tuple[str, Source]] = []
    target = PrivateRedis()
    work = Path(tempfile.mkdtemp(prefix="shards-bench-"))
    try:
        for k, engine in enumerate(engines):
            shards.append((f"s{k}-{engine}", Source(engine, 3480 + k)))
        for k, (_, src) in enumerate(shards):
            sysbench(src, "prepare", 4)
            shift_ids(src, k * SPAN)
        script = work / "shard_write_only.lua"
        script.write_text(WRAPPER)
        mapping = work / "shards.yaml"
        mapping.write_text(mapping_text(shards))
        names = [name for name, _ in shards]
        drain(mapping, target.url, names)  # the first loads
        print(f"first load of {len(shards)} shards x {TABLES} x {ROWS:,} rows done; {load()}")
        ratios = []
        for _ in range(args.runs):
            rates: dict[str, float] = {}
            writers = [threading.Thread(target=write, args=(rates, k, n, s, script, args))
                       for k, (n, s) in enumerate(shards)]  # fmt: skip
            for w in writers:
                w.start()
            for w in writers:
                w.join()
            combined = sum(rates.values())
            written = load()
            reports, seconds = drain(mapping, target.url, names)
            txns = sum(int(r["transactions"]) for r in reports.values())
            for name in names:
                r = reports[name]
                print(f"[{name}] source {rates[name]:,.0f} txn/s; sync --shard {name}: "
                      f"{r['transactions']:,} transactions in {r['seconds']:.2f} s")  # fmt: skip
            ratio = txns / seconds / combined
            ratios.append(ratio)
            print(f"combined source rate {combined:,.0f} txn/s ({len(shards)} shards, "
                  f"{args.threads} sysbench threads each, {args.seconds:.0f} s; {written}); "
                  f"aggregate drain {txns:,} transactions in {seconds:.2f} s = "
                  f"{txns / seconds:,.0f} txn/s, ratio {ratio:.2f}x; {load()}")  # fmt: skip
        if len(ratios) > 1:
            print(f"ratio over {len(ratios)} runs: median {statistics.median(ratios):.2f}x "
                  f"(min {min(ratios):.2f}, max {max(ratios):.2f})")  # fmt: skip
    finally:
        target.stop()
        for _, src in shards:
            src.stop()


if __name__ == "__main__":
    main()
