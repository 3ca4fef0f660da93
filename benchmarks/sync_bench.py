"""sync's speed: row changes applied per second, and the lag at a steady write rate.

    PYTHONPATH=. .venv/bin/python benchmarks/sync_bench.py [--changes 100000] [--rate 1000]

Starts its own MariaDB (row binary log) and its own redis-server on free ports in temporary
directories (tests/binlog_server.py), and removes both at the end; the shared servers are not
touched. The table is the benchmark's ``emp`` (benchmarks/generate.py) with its mapping's
structures: row hash, counter, unique hash on email, index on mgr_id, plus a sorted set on
salary.

1. Throughput: with sync stopped, ``--changes`` row changes are written (half inserts by
   executemany, half updates that move email, mgr_id and salary, in transactions of 100
   rows); then ``sync --until-caught-up`` applies the backlog: changes / seconds (binlog
   decoding, delta planning and MULTI/EXEC included), and the CPU seconds sync used for it
   (its process and its reader process; steadier than the rate on a busy machine).
2. Lag: sync follows while a writer inserts ``--rate`` rows/s for ``--seconds`` seconds in
   transactions of 10 rows every 10 ms; for each row, the time from just before its COMMIT
   in MySQL to the end of the EXEC that applied it in Redis; p50, p99 and max are printed.
3. The lag sync reports (``lag_seconds`` of /metrics and the status lines) next to the lag
   this script measures, sampled every 20 ms during phase 2 and the idle seconds after it:
   measured = now - the moment just before the COMMIT of the oldest transaction not yet
   applied (0 when all are applied; so it includes the COMMIT itself, which sync cannot see
   begin). Printed: both distributions and their difference.
"""

from __future__ import annotations

import argparse
import bisect
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.source.binlog.reader import Transaction
from migrator.sync.figures import SyncFigures
from tests.binlog_server import PrivateMariaDB, free_port

MAPPING = """
version: 1
tables:
  emp:
    key: "emp:{emp_id}"
    counter: "emp:id"
    unique: [email]
    indexes: [mgr_id]
    sorted:
      - key: "emp:by:salary"
        score: salary
"""

DDL = """
CREATE TABLE emp (
  emp_id INT NOT NULL PRIMARY KEY,
  ename VARCHAR(40) NOT NULL,
  email VARCHAR(80) NOT NULL,
  mgr_id INT NULL,
  hired DATETIME NOT NULL,
  salary DECIMAL(10,2) NOT NULL,
  note TEXT NULL,
  UNIQUE KEY uq_email (email),
  KEY ix_mgr (mgr_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""

INSERT = "INSERT INTO emp VALUES (%s, %s, %s, %s, %s, %s, %s)"


def _row(i: int) -> tuple[object, ...]:
    return (i, f"emp{i}", f"user{i}@example.com", i % 1000 or None, "2020-01-02 03:04:05",
            f"{i % 100000}.{i % 100:02d}", None if i % 4 == 0 else f"note {i}")  # fmt: skip


class PrivateRedis:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="migrator-bench-redis-"))
        self.port = free_port()
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        client.close()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def throughput(db: PrivateMariaDB, url: str, target: str, changes: int) -> float:
    mapping = parse_mapping(MAPPING, name="bench")
    sync(mapping, source=url, target=target, until_caught_up=True, server_id=9101)
    conn = db.connect("bench")
    conn.autocommit(False)
    cur = conn.cursor()
    inserts = changes // 2
    for start in range(1, inserts + 1, 100):
        cur.executemany(INSERT, [_row(i) for i in range(start, min(start + 100, inserts + 1))])
        conn.commit()
    for start in range(1, changes - inserts + 1, 100):
        cur.execute(
            "UPDATE emp SET email = CONCAT('moved', email), mgr_id = mgr_id + 1, "
            "salary = salary + 1 WHERE emp_id BETWEEN %s AND %s",
            (start, start + 99),
        )
        conn.commit()
    conn.close()
    t0, cpu0, child0 = time.perf_counter(), time.process_time(), _children_cpu()
    report = sync(mapping, source=url, target=target, until_caught_up=True, server_id=9102)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    reader = _children_cpu() - child0  # sync's reader process, ended with the run
    print(f"throughput: {report.rows_changed:,} row changes in {report.transactions:,} "
          f"transactions applied in {seconds:.2f} s = {report.rows_changed / seconds:,.0f} "
          f"row changes/s; sync's CPU {cpu + reader:.2f} s ({reader:.2f} s of it in its "
          "reader process)")  # fmt: skip
    return report.rows_changed / seconds


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def lag(db: PrivateMariaDB, url: str, target: str, rate: int, seconds: float) -> list[float]:
    mapping = parse_mapping(MAPPING, name="bench")
    committed: dict[bytes, float] = {}
    lags: list[float] = []
    # in commit order: the last id of each transaction and the moment before its COMMIT
    txn_last: list[int] = []
    txn_time: list[float] = []
    top = [0]  # the highest id applied (ids rise with the commit order)

    def applied(group: list[Transaction]) -> None:
        now = time.time()
        for txn in group:
            for change in txn.changes:
                if change.before is None and change.after is not None:
                    t = committed.get(change.after[0] or b"")
                    if t is not None:
                        lags.append(now - t)
                        top[0] = max(top[0], int(change.after[0] or 0))

    def measured(now: float) -> float:
        i = bisect.bisect_right(txn_last, top[0])  # the oldest transaction not applied
        return now - txn_time[i] if i < len(txn_time) else 0.0

    samples: list[tuple[float, float, bool]] = []  # (measured, reported, writing)
    figures = SyncFigures()
    sampling, writing = threading.Event(), threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            reported = figures.lag()
            samples.append((measured(time.time()), reported, writing.is_set()))
            time.sleep(0.02)

    stop = threading.Event()
    follower = threading.Thread(
        target=sync, args=(mapping,),
        kwargs={"source": url, "target": target, "stop": stop, "on_applied": applied,
                "server_id": 9103, "figures": figures},
    )  # fmt: skip
    follower.start()
    time.sleep(1.0)
    sampler = threading.Thread(target=sample)
    sampler.start()
    writing.set()
    conn = db.connect("bench")
    conn.autocommit(False)
    cur = conn.cursor()
    per_tick, tick = max(1, rate // 100), 0.01
    next_id = 10_000_000
    t_end = time.monotonic() + seconds
    due = time.monotonic()
    while time.monotonic() < t_end:
        rows = [_row(i) for i in range(next_id, next_id + per_tick)]
        cur.executemany(INSERT, rows)
        now = time.time()  # just before the commit: the lag includes the commit itself
        for r in rows:
            committed[str(r[0]).encode()] = now
        txn_time.append(now)  # before the COMMIT: sync may apply it before COMMIT returns
        txn_last.append(rows[-1][0])  # type: ignore[arg-type]
        conn.commit()
        next_id += per_tick
        due += tick
        time.sleep(max(0.0, due - time.monotonic()))
    conn.close()
    writing.clear()
    time.sleep(2.0)
    sampling.set()
    sampler.join()
    stop.set()
    follower.join(10)
    written = next_id - 10_000_000
    lags.sort()
    p50, p99 = statistics.median(lags), lags[int(len(lags) * 0.99) - 1]
    print(f"lag at {written / seconds:,.0f} inserts/s for {seconds:.0f} s: {len(lags):,} of "
          f"{written:,} rows timed; p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
          f"max {lags[-1] * 1000:.1f} ms")  # fmt: skip
    _compare(samples)
    return lags


def _ms(values: list[float]) -> str:
    v = sorted(values)
    return (f"p50 {statistics.median(v) * 1000:.1f} ms, p99 {v[int(len(v) * 0.99) - 1] * 1000:.1f} "
            f"ms, max {v[-1] * 1000:.1f} ms")  # fmt: skip


def _compare(samples: list[tuple[float, float, bool]]) -> None:
    busy = [(m, r) for m, r, w in samples if w]
    idle = [(m, r) for m, r, w in samples if not w][5:]  # after the last writes are applied
    print(f"lag sampled every 20 ms while writing ({len(busy)} samples): measured "
          f"{_ms([m for m, _ in busy])}; sync reports {_ms([r for _, r in busy])}; "
          f"reported - measured: min {min(r - m for m, r in busy) * 1000:.1f} ms, "
          f"{_ms([r - m for m, r in busy])}")  # fmt: skip
    print(f"lag while idle ({len(idle)} samples): measured max "
          f"{max(m for m, _ in idle) * 1000:.1f} ms; sync reports max "
          f"{max(r for _, r in idle) * 1000:.1f} ms")  # fmt: skip


def bench_database(db: PrivateMariaDB) -> str:
    """Start ``db``, create the database ``bench`` with the ``emp`` table; its URL."""
    db.start()
    db.connect().cursor().execute("CREATE DATABASE bench")
    db.connect("bench").cursor().execute(DDL)
    return f"{db.url}/bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", action="store_true", help="cProfile the throughput phase")
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--switch-interval", type=float, default=sys.getswitchinterval(),
        help="the interpreter's switch interval in this process, where sync runs (default: "
        "CPython's, %(default)s s; an experiment, docs/performance.md)",
    )  # fmt: skip
    args = parser.parse_args()
    sys.setswitchinterval(args.switch_interval)
    db, target = PrivateMariaDB(), PrivateRedis()
    try:
        url = bench_database(db)
        if args.profile:
            import cProfile
            import pstats

            with cProfile.Profile() as prof:
                throughput(db, url, target.url, args.changes)
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
            return
        throughput(db, url, target.url, args.changes)
        lag(db, url, target.url, args.rate, args.seconds)
    finally:
        db.stop()
        target.stop()


if __name__ == "__main__":
    main()
