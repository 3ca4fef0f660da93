"""While a follow loop runs, the interpreter hands its lock between the reader and the
applying thread every ``SWITCH_INTERVAL`` (0.5 ms) instead of CPython's 5 ms, and the process's
own interval comes back once the last loop ends (sync/follow.py; docs/performance.md)."""

from __future__ import annotations

import sys
import threading

from migrator.source.binlog import Transaction
from migrator.sync.figures import SyncFigures
from migrator.sync.follow import SWITCH_INTERVAL, quick_handover
from tests.faults import wait_for
from tests.sync.test_sync_metrics import following
from tests.sync.workload import SCHEMA


def test_the_interval_is_short_while_following_and_restored_after(
    binlog_db, redis_url: str
) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    own = sys.getswitchinterval()
    assert own > SWITCH_INTERVAL  # CPython's default: 5 ms
    seen: list[float] = []
    applied = threading.Event()

    def on_applied(group: list[Transaction]) -> None:
        seen.append(sys.getswitchinterval())
        applied.set()

    with following(binlog_db, redis_url, SyncFigures(), on_applied=on_applied):
        binlog_db.run("INSERT INTO dept VALUES (9001, 'handover');")
        wait_for("the insert applied", applied.is_set, 30)
    assert seen and all(s == SWITCH_INTERVAL for s in seen), seen
    assert sys.getswitchinterval() == own


def test_nested_loops_restore_the_interval_once_the_last_one_ends() -> None:
    own = sys.getswitchinterval()
    quick_handover(True)
    quick_handover(True)
    assert sys.getswitchinterval() == SWITCH_INTERVAL
    quick_handover(False)
    assert sys.getswitchinterval() == SWITCH_INTERVAL  # one loop still runs
    quick_handover(False)
    assert sys.getswitchinterval() == own


def test_a_shorter_interval_of_the_process_is_kept() -> None:
    own = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL / 5)
    short = sys.getswitchinterval()  # as CPython keeps it (whole microseconds)
    try:
        quick_handover(True)
        assert sys.getswitchinterval() == short
        quick_handover(False)
        assert sys.getswitchinterval() == short
    finally:
        sys.setswitchinterval(own)
