"""How far sync is behind, as pure figures (sync/behind.py, sync/lag.py): bytes and
transactions between the applied position and the source's log end, and the lag while the
reader is the part that is behind (everything read applied, the source's log further)."""

from __future__ import annotations

from migrator.sync.behind import bytes_between, transactions_between
from migrator.sync.lag import LagClock


def test_bytes_in_one_file_and_across_files() -> None:
    assert bytes_between(("b.000002", 100), ("b.000002", 900), None) == 800
    assert bytes_between(("b.000002", 900), ("b.000002", 900), None) == 0
    sizes = {"b.000001": 50, "b.000002": 1000, "b.000003": 5000, "b.000004": 400}
    # the rest of file 2, all of file 3, file 4 up to the head
    assert bytes_between(("b.000002", 100), ("b.000004", 300), sizes) == 900 + 5000 + 300
    assert bytes_between(("b.000002", 100), ("b.000004", 300), None) is None


def test_transactions_by_mariadb_domain() -> None:
    assert transactions_between("0-1-10,1-2-5", "0-1-25,1-2-5,2-3-4") == 15 + 0 + 4
    assert transactions_between("", "0-1-7") == 7


def test_transactions_by_mysql_source() -> None:
    a, b = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4e11fa47-71ca-11e1-9e33-c80aa9429562"
    assert transactions_between(f"{a}:40", f"{a}:1-100,\n{b}:1-3") == 60 + 3
    assert transactions_between(f"{a}:1-40:45-50", f"{a}:1-100") == 50
    assert transactions_between(f"{a}:tag:5", f"{a}:tag:1-9") == 4
    assert transactions_between("", "") is None


def test_a_late_reader_with_everything_read_applied_is_timed_by_the_log() -> None:
    clock = LagClock(("b.1", 4), now=1000.0)
    # read 30 s after its commit (the log's whole-second timestamp): a backlog
    clock.transaction(("b.1", 100), now=1031.0, timestamp=1000)
    clock.applied_through(("b.1", 100), now=1031.5)
    clock.seen(("b.1", 9000), now=1031.6)  # the source's log is far further
    # not 0, and not only since the log end was seen: since the last applied one's commit
    assert clock.lag(1032.0) == 1032.0 - 1001.0
    clock.transaction(("b.1", 9000), now=1039.0, timestamp=1031)
    clock.applied_through(("b.1", 9000), now=1040.0)  # caught up
    clock.heartbeat(("b.1", 9000), now=1040.1)  # the reader is at the log's end
    assert clock.lag(1040.2) == 0.0
    clock.seen(("b.1", 9500), now=1050.0)  # a new write: timed from when it was seen
    assert clock.lag(1050.5) == 0.5
