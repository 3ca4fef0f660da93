"""An independent probe of sync's lag (issue 35 item 6), for benchmarks/sysbench_bench.py --live.

A process of its own (not sync's, not the benchmark's: no shared interpreter lock) with two
threads:

* the writer updates one row of the ``probe`` table every 50 ms, on its own connection
  (autocommit), to the writer's clock: ``UPDATE probe SET t = <now in µs> WHERE id = 1``, the
  time taken just before the statement is sent; it notes how long each commit took;
* the reader polls that row's hash in Redis (``HGET probe:1 t``) every 2 ms and notes when it
  first saw each new value.

The lag of a write is the first time Redis was seen holding its value or a later one, less the
time written into the row: the whole path (the source's commit, the binary log, sync's reading,
decoding and applying) on one clock. Reading every 2 ms adds up to 2 ms. A write whose value was
replaced before a poll saw it (sync applied it and the next one in one group, or between two
polls) counts to the moment its successor was seen: Redis held its change (or a later one) from
then at the latest.
"""

from __future__ import annotations

import multiprocessing
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

SCHEMA = "CREATE TABLE probe (id INT PRIMARY KEY, t BIGINT NOT NULL)"
MAPPING = '  probe:\n    key: "probe:{id}"\n'  # the entry of sysbench_bench.py's mapping
KEY, FIELD = "probe:1", "t"
EVERY, POLL = 0.050, 0.002


def lags(written: list[int], seen: list[tuple[int, int]]) -> list[int]:
    """Each write's lag in µs: the first moment ``seen`` (µs, value), in time order, holds its
    value or a later one, less the value (the time it was written). Writes never seen are left
    out (the caller counts them)."""
    out, i = [], 0
    for t in sorted(written):
        while i < len(seen) and seen[i][1] < t:
            i += 1
        if i == len(seen):
            break
        out.append(seen[i][0] - t)
    return out


@dataclass
class ProbeResult:
    lags_ms: list[float]  # of each write made while the load ran, in order of writing
    writes: int  # writes made while the load ran
    commits_ms: list[float]  # how long the writer's UPDATE took, each

    def percentile(self, values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[max(0, int(len(ordered) * q + 0.999999) - 1)] if ordered else 0.0

    def summary(self) -> str:
        if not self.lags_ms:
            return f"probe: none of {self.writes} writes seen in Redis"
        lag, commit = self.lags_ms, self.commits_ms
        unseen = self.writes - len(lag)
        return (
            f"probe (a row updated every 50 ms with the writer's clock, read back from Redis "
            f"every 2 ms; {self.writes} writes{f', {unseen} never seen' if unseen else ''}): "
            f"lag p50 {statistics.median(lag):.0f} ms, p99 {self.percentile(lag, 0.99):.0f} ms, "
            f"max {max(lag):.0f} ms; of which the writer's own commit p50 "
            f"{statistics.median(commit):.1f} ms, p99 {self.percentile(commit, 0.99):.1f} ms"
        )


def _run(source: dict[str, Any], redis_url: str, window: Any, stop: Any, results: Any) -> None:
    """The probe process: write and read until ``stop``; only the writes made while
    ``window`` is set are measured."""
    import pymysql
    import redis

    conn = pymysql.connect(**source, autocommit=True)
    client = redis.Redis.from_url(redis_url)
    written: list[int] = []  # µs, writes made inside the window
    commits: list[float] = []
    seen: list[tuple[int, int]] = []  # (µs, value) each time the value changed
    done = threading.Event()

    def read() -> None:
        last = None
        while not done.is_set():
            value = client.hget(KEY, FIELD)
            now = time.time_ns() // 1000
            if value is not None and value != last:
                last = value
                seen.append((now, int(value)))
            time.sleep(POLL)

    reader = threading.Thread(target=read, name="probe-reader", daemon=True)
    reader.start()
    cur = conn.cursor()
    tick = time.monotonic()
    while not stop.is_set():
        t = time.time_ns() // 1000
        cur.execute("UPDATE probe SET t = %s WHERE id = 1", (t,))
        if window.is_set():
            written.append(t)
            commits.append((time.time_ns() // 1000 - t) / 1000)
        tick += EVERY
        time.sleep(max(0.0, tick - time.monotonic()))
        if tick < time.monotonic():  # a commit longer than 50 ms: the next write goes now
            tick = time.monotonic()
    time.sleep(1.0)  # the last writes reach Redis
    done.set()
    reader.join(5)
    conn.close()
    measured = lags(written, seen)
    results.put(([m / 1000 for m in measured], len(written), commits))


class Probe:
    """The probe process: ``start()`` after the row exists and sync follows; ``measure()``
    around the load; ``stop()`` returns the :class:`ProbeResult`."""

    def __init__(self, source: dict[str, Any], redis_url: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.window, self.halt, self.results = ctx.Event(), ctx.Event(), ctx.Queue()
        self.process = ctx.Process(
            target=_run, args=(source, redis_url, self.window, self.halt, self.results),
            name="lag-probe", daemon=True,
        )  # fmt: skip

    def start(self) -> None:
        self.process.start()

    def measure(self, on: bool) -> None:
        (self.window.set if on else self.window.clear)()

    def stop(self) -> ProbeResult:
        self.halt.set()
        lags_ms, writes, commits = self.results.get(timeout=60)
        self.process.join(10)
        return ProbeResult(lags_ms, writes, commits)
