"""sync's figures without servers (issue 20): the lag's definition on a fake clock, the health
rules, counted retries, and the exposition of /metrics and /healthz (a server on a free port of
127.0.0.1). The same behaviour on real servers: tests/sync/test_sync_metrics.py."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from migrator.errors import ConnectError, MigratorError
from migrator.progress import NULL_PROGRESS
from migrator.source.binlog.reader import BinlogPosition, Change, Idle, Transaction
from migrator.store.sink import transient
from migrator.sync.exporter import MetricsServer, parse_address
from migrator.sync.figures import HealthRules, SyncFigures, _kind


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def pos(n: int, file: str = "mysql-bin.000001") -> BinlogPosition:
    return BinlogPosition(file, n, f"0-1-{n}")


def txn(n: int, timestamp: int, *changes: Change) -> Transaction:
    return Transaction(list(changes), pos(n), timestamp)


def following(clock: Clock, start: int = 100, **rules: float) -> SyncFigures:
    f = SyncFigures(HealthRules(**rules), clock=clock)  # type: ignore[arg-type]
    f.following(pos(start))
    return f


def test_lag_is_0_when_everything_is_applied_and_counts_from_the_arrival_in_ms() -> None:
    clock = Clock()
    f = following(clock)
    assert f.lag() == 0.0
    f.read(txn(200, 1000, Change("emp", None, (b"1",))))
    clock.now += 0.0125
    assert f.lag() == pytest.approx(0.0125, abs=1e-9)  # to the millisecond, not the second
    f.applied_group([txn(200, 1000, Change("emp", None, (b"1",)))])
    assert f.lag() == 0.0
    clock.now += 60  # idle tables: no event, no change
    f.read(Idle(pos(200)))
    assert f.lag() == 0.0


def test_a_heartbeat_past_the_last_transaction_counts_as_applied_once_what_came_before_is() -> None:
    clock = Clock()
    f = following(clock)
    f.read(txn(200, 1000))
    f.read(Idle(pos(300)))  # e.g. DDL of an unmapped table after it: nothing to apply
    clock.now += 0.5
    assert f.lag() == pytest.approx(0.5)
    f.applied_group([txn(200, 1000)])
    assert f.log is not None
    assert f.lag() == 0.0 and f.log.applied == ("mysql-bin.000001", 300)
    # the log rotated while idle: the heartbeat names the new file
    f.read(Idle(pos(4, "mysql-bin.000002")))
    assert f.lag() == 0.0 and f.log.head == ("mysql-bin.000002", 4)


def test_the_lag_grows_from_the_first_sign_of_the_source_moving_on_even_when_nothing_is_read() -> (
    None
):
    clock = Clock()
    f = following(clock)
    f.head_at("mysql-bin.000001", 500)  # SHOW MASTER STATUS; the reader is stuck
    clock.now += 7.25
    assert f.lag() == pytest.approx(7.25)
    f.head_at("mysql-bin.000001", 900)  # a later sign does not restart the clock
    clock.now += 1
    assert f.lag() == pytest.approx(8.25)


def test_a_backlog_read_late_takes_the_commit_time_from_the_log() -> None:
    clock = Clock(5000.0)
    f = following(clock)
    f.read(txn(200, 4000))  # committed ~1000 s ago, read now (sync was down)
    assert f.lag() == pytest.approx(5000.0 - 4001.0)
    f.read(txn(300, 4999))
    f.applied_group([txn(200, 4000)])  # the next one was read live: its arrival counts
    clock.now += 0.25
    assert f.lag() == pytest.approx(0.25)


def test_row_changes_and_transactions_per_table_and_operation() -> None:
    f = following(Clock())
    group = [
        txn(200, 1, Change("emp", None, (b"1",)), Change("emp", None, (b"2",))),
        txn(300, 1, Change("emp", (b"1",), (b"1x",)), Change("dept", (b"9",), None)),
        txn(400, 1),  # a transaction of unmapped tables
    ]
    f.applied_group(group)
    d = f.as_dict()
    assert d["row_changes"] == {
        "dept": {"insert": 0, "update": 0, "delete": 1},
        "emp": {"insert": 2, "update": 1, "delete": 0},
    }
    assert d["table_transactions"]["emp"] == {"insert": 1, "update": 1, "delete": 0}
    assert d["transactions"] == 3 and d["redis_round_trips"] == 1
    assert d["position"] == {"file": "mysql-bin.000001", "pos": 400, "gtid": "0-1-400"}


def test_health_rules() -> None:
    clock = Clock()
    f = SyncFigures(HealthRules(stall=5, retries=3), clock=clock)
    assert f.health() == (True, "starting: checking the source and the target")
    load = f.tee(NULL_PROGRESS, None, 1.0)
    load.start("emp", 3)
    load.advance("emp", 3)
    assert f.health() == (True, "loading the snapshot, 1 table(s): loaded 3 of about 3 rows (100%)")
    f.following(pos(100))
    assert f.health()[0]
    # behind and not advancing
    f.read(txn(200, 1000))
    clock.now += 5.5
    ok, why = f.health()
    assert not ok and why.startswith("not advancing: applied up to mysql-bin.000001:100 for 5.5 s")
    f.applied_group([txn(200, 1000)])
    f.read(Idle(pos(200)))
    assert f.health()[0]
    # a silent source: no event, no heartbeat
    clock.now += 6
    ok, why = f.health()
    assert not ok and "no event and no heartbeat from the source for 6.0 s" in why
    f.read(Idle(pos(200)))
    assert f.health() == (True, "following: lag 0.000 s at mysql-bin.000001:200 (GTID 0-1-200)")
    # retries under way past the threshold, until one try succeeds
    for n in (1, 2, 3):
        f.failed("Redis", "connection lost (Connection refused)", n)
    ok, why = f.health()
    assert not ok and why == (
        "retrying: 3 failures in a row, the last Redis: connection lost (Connection refused)"
    )
    f.recovered("Redis")
    assert f.health()[0]
    f.stopped()
    assert f.health() == (False, "stopped: not following the binary log")


def flaky_source():  # type: ignore[no-untyped-def]
    failures = iter([OSError("gone")])

    def read() -> None:
        e = next(failures, None)
        if e is not None:
            raise e

    return read


def test_a_second_reader_in_one_run_is_a_reconnect() -> None:
    f = following(Clock())
    assert f.as_dict()["reconnects"] == 0
    f.following(pos(300))  # the caller started the reader again after a loss
    assert f.as_dict()["reconnects"] == 1 and f.lag() == 0.0


class Quick:
    attempts = 3
    backoff = 0.001
    max_backoff = 0.001


def test_retries_through_the_figures_are_counted_and_reset() -> None:
    f = following(Clock())
    failures = iter([redis.ConnectionError("reset"), redis.TimeoutError("slow")])

    def flaky() -> str:
        e = next(failures, None)
        if e is not None:
            raise e
        return "done"

    assert f.retrying("Redis", Quick()).call(flaky, transient, "Redis") == "done"
    d = f.as_dict()
    assert d["retries"] == {"Redis": 2} and d["failures_in_a_row"] == 0
    assert d["errors"] == {"redis_connection_lost": 1, "redis_timed_out": 1}

    def down() -> None:
        raise redis.ConnectionError("refused")

    with pytest.raises(ConnectError):
        f.retrying("Redis", Quick()).call(down, transient, "Redis")
    assert f.as_dict()["retries"] == {"Redis": 5}  # the 4th failure is not retried
    notes: list[str] = []
    f.retrying("source", Quick(), note=notes.append).call(flaky_source(), transient, "MySQL")
    assert notes == ["retry 1/3 in 0.0s: MySQL: connection lost (gone)"]
    assert f.as_dict()["retries"] == {"Redis": 5, "source": 1}
    assert _kind("source", "connection lost (2013, 'Lost connection')") == "source_connection_lost"
    assert _kind("source", "reading the binary log: lost the connection (2013)") == (
        "source_connection_lost"
    )
    assert _kind("Redis", "answered LOADING Redis is loading") == "redis_loading"
    assert _kind("Redis", "answered MASTERDOWN") == "redis_other"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:9108", ("127.0.0.1", 9108)), (":9108", ("127.0.0.1", 9108)),
     ("0.0.0.0:80", ("0.0.0.0", 80)), ("[::1]:9108", ("::1", 9108))],
)  # fmt: skip
def test_metrics_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["9108", "host", "host:port", "h:70000", ""])
def test_bad_metrics_addresses_are_usage_errors(text: str) -> None:
    with pytest.raises(MigratorError) as caught:
        parse_address(text)
    assert caught.value.exit_code == 2 and "HOST:PORT" in caught.value.message


def _get(port: int, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def test_the_server_serves_metrics_and_health_and_a_taken_port_is_one_error() -> None:
    clock = Clock()
    f = following(clock, stall=5)
    f.applied_group([txn(200, 1000, Change("emp", None, (b"1",)))])
    server = MetricsServer("127.0.0.1:0", f, "shop")
    try:
        status, kind, text = _get(server.port, "/metrics")
        assert status == 200 and kind.startswith("text/plain")
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
        }
        key = (("mapping", "shop"), ("operation", "insert"), ("table", "emp"))
        assert samples[("migrator_sync_row_changes_total", key)] == 1
        assert samples[("migrator_sync_lag_seconds", (("mapping", "shop"),))] == 0
        info = [k for k in samples if k[0] == "migrator_sync_position_info"]
        assert dict(info[0][1]) == {
            "mapping": "shop", "file": "mysql-bin.000001", "pos": "200", "gtid": "0-1-200",
        }  # fmt: skip
        assert _get(server.port, "/healthz")[0] == 200
        clock.now += 10
        status, _, body = _get(server.port, "/healthz")
        assert status == 503 and body.startswith("unhealthy: no event and no heartbeat")
        assert _get(server.port, "/elsewhere")[0] == 404
        with pytest.raises(MigratorError) as caught:
            MetricsServer(f"127.0.0.1:{server.port}", f, "shop")
        assert "cannot listen there" in caught.value.message
    finally:
        server.close()


def test_health_while_loading_gives_rows_total_and_time_left() -> None:
    """The first load's tables expected (their row estimates) at its start: rows done, the
    total and the time left at the pace so far, in /healthz and the figures."""
    clock = Clock()
    f = SyncFigures(clock=clock)
    f.expect({"emp": 1000, "dept": 0})  # dept: no estimate; emp's counts
    load = f.tee(NULL_PROGRESS, None, 1.0)
    load.start("emp", 1000)
    said = "loading the snapshot, 2 table(s): loaded"
    assert f.health() == (True, f"{said} 0 of about 1,000 rows (0%)")
    clock.now += 10
    load.advance("emp", 250)  # 25 rows/s: 750 left, 30 s
    assert f.health() == (True, f"{said} 250 of about 1,000 rows (25%), about 30 s left")
    assert f.as_dict()["load"] == {"rows": 250, "total": 1000, "seconds_left": 30.0}
    load.advance("emp", 1000)  # the estimate was low: the total is never below what was read
    assert f.as_dict()["load"] == {"rows": 1250, "total": 1250, "seconds_left": 0.0}
    f.expect({"emp": 400})  # loaded again (Redis lost its data): counted from there
    assert f.as_dict()["load"]["rows"] == 0
    f.loaded()
    assert f.as_dict()["load"] is None


def test_an_applied_ddl_is_no_error() -> None:
    f = SyncFigures()
    f.schema_changed("apply")
    f.schema_changed("resnapshot")
    assert f.as_dict()["errors"] == {} and f.as_dict()["schema_changes"] == {
        "apply": 1, "resnapshot": 1
    }  # fmt: skip
    f.schema_changed("stop")  # sync stopped on it: a failure
    assert f.as_dict()["errors"] == {"schema_change": 1}
