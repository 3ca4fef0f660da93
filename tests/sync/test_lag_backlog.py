"""The lag is true while sync is behind (issue 26 item 3): measured against the source's own
log end (sync/head.py asks it every 0.25 s), not against what the reader has read.

* the applier held back while the source writes: ``migrator_sync_lag_seconds`` grows
  monotonically past the alert's threshold, the bytes and transactions behind are exported,
  and ``/healthz`` turns 503 (not advancing);
* the reader slowed below the source's write rate, the applier applying everything it reads:
  the lag never reads 0 while the source's log is past the applied position, and it is at
  least the time since the source's last write, less about a second (the log's whole-second
  timestamps).
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from migrator.source.binlog.reader import Transaction
from migrator.sync.figures import HealthRules, SyncFigures
from tests.faults import wait_for
from tests.sync.test_sync_metrics import _get, following, scrape
from tests.sync.workload import SCHEMA


def _writer(db: Any, stop: threading.Event, per_second: float, start: int) -> threading.Thread:
    """Inserts one row per transaction into ``dept`` (autocommit) until ``stop``."""

    def run() -> None:
        conn = db.connect(client_flag=0)
        try:
            n = start
            with conn.cursor() as cur:
                while not stop.is_set():
                    cur.execute("INSERT INTO dept VALUES (%s, %s)", (n, f"d{n}"))
                    conn.commit()
                    n += 1
                    time.sleep(1 / per_second)
        finally:
            conn.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_held_applier_lag_grows_and_the_alert_and_healthz_fire(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    hold, held = threading.Event(), threading.Event()

    def applied(group: list[Transaction]) -> None:
        while hold.is_set():  # the applier held back: this group is written, the next waits
            held.set()
            time.sleep(0.02)

    figures = SyncFigures(HealthRules(stall=2.0))
    done = threading.Event()
    with following(binlog_db, redis_url, figures, on_applied=applied) as port:
        writer = _writer(binlog_db, done, 50, 1000)
        try:
            hold.set()
            wait_for("the applier held", held.is_set, 30)
            # the writes after the held group: the lag shows them (at once, or at the next poll)
            wait_for("a lag above 0", lambda: figures.lag() > 0, 10)
            samples = []
            for _ in range(25):  # 5 s
                samples.append(figures.lag())
                time.sleep(0.2)
            metrics = scrape(port)
            status, body = _get(port, "/healthz")
        finally:
            done.set()
            writer.join()
            hold.clear()
    assert all(later >= earlier for earlier, later in itertools.pairwise(samples)), samples
    assert samples[0] > 0 and samples[-1] >= 4.5, samples  # 5 s of samples after the first
    # the documented alert's condition (migrator_sync_lag_seconds > threshold), scaled down
    assert metrics[("migrator_sync_lag_seconds", ())] > 4.5
    assert metrics[("migrator_sync_behind_bytes", ())] > 0
    assert metrics[("migrator_sync_behind_transactions", ())] >= 100  # 50/s for 5 s, less
    assert status == 503 and "not advancing" in body, body


class _SlowReader(SyncFigures):
    """Figures whose ``read_all`` (called by the reader thread for the events it takes off
    the log: transactions, heartbeats) takes 50 ms an event: a reader slower than the
    source's writes."""

    def read_all(self, events: list[Any]) -> None:
        time.sleep(0.05 * len(events))
        super().read_all(events)


def test_a_slow_reader_never_shows_lag_0_while_behind(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    figures = _SlowReader()
    done = threading.Event()
    with following(binlog_db, redis_url, figures):
        writer = _writer(binlog_db, done, 100, 5000)
        time.sleep(3.0)
        done.set()
        writer.join()
        ended = time.time()
        samples = []
        for _ in range(20):  # 2 s after the last write, still behind
            samples.append((time.time() - ended, figures.lag(), figures.as_dict()))
            time.sleep(0.1)
    behind = [(since, lag) for since, lag, f in samples if f["behind_bytes"]]
    assert len(behind) == len(samples), "the reader caught up: it is not slower than the writes"
    assert all(lag > 0 for _, lag in behind), behind
    # the oldest transaction not applied was committed before the last write: the lag is at
    # least the time since, less the whole second the log's timestamps round to
    assert all(lag >= since - 1.3 for since, lag in behind), behind
