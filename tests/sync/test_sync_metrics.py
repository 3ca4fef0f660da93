"""sync observable as a service (issue 20): ``/metrics`` scraped while rows are written (the
counters move by exactly the writes, the lag is plausible and 0 again once idle), the same
figures in the ``--json`` status lines, and ``/healthz`` turning 503 when the source stops
answering (SIGSTOP of the private MariaDB) or Redis stops taking writes (SIGSTOP of a private
redis-server), and 200 again after SIGCONT. HTTP servers bind 127.0.0.1 on free ports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.reports import SyncStatus
from migrator.sync.figures import HealthRules, SyncFigures
from tests.binlog_server import free_port
from tests.faults import redis_process, redis_server_problem, wait_for
from tests.sync.helpers import master_position, past_loading
from tests.sync.workload import MAPPING, SCHEMA

_ids = iter(range(8100, 8200))


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics parsed by prometheus_client's own parser: (sample name, labels) -> value."""
    status, text = _get(port, "/metrics")
    assert status == 200
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "mapping"))
            out[(s.name, labels)] = s.value
    return out


def _rows(m: dict[Any, float], op: str) -> float:
    return m.get(("migrator_sync_row_changes_total", (("operation", op), ("table", "emp"))), 0)


def _txns(m: dict[Any, float], op: str) -> float:
    key = ("migrator_sync_table_transactions_total", (("operation", op), ("table", "emp")))
    return m.get(key, 0)


@contextmanager
def following(db: Any, target: str, figures: SyncFigures, **kw: Any) -> Iterator[int]:
    """sync running on a thread with ``--metrics 127.0.0.1:<free port>``; yields the port once
    it follows the log; stops it after."""
    port = free_port()
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            sync(parse_mapping(MAPPING, name="metricstest"), source=db.url, target=target,
                 stop=stop, server_id=next(_ids), metrics=f"127.0.0.1:{port}", figures=figures,
                 **kw)  # fmt: skip
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_for("sync following the log", lambda: figures.phase == "following" or errors, 60)
        assert not errors, errors
        yield port
    except BaseException:
        if errors:  # a wait in the test that failed because sync did: say why sync failed
            raise AssertionError(f"sync failed: {errors[0]!r}") from errors[0]
        raise
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive() and not errors, errors


def test_metrics_move_with_the_writes_and_the_lag_is_plausible(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    statuses: list[SyncStatus] = []
    figures = SyncFigures()
    with following(binlog_db, redis_url, figures, on_status=statuses.append,
                   status_interval=0.2) as port:  # fmt: skip
        before = scrape(port)
        assert before[("migrator_sync_phase", (("phase", "following"),))] == 1
        # the first load's progress: every row of emp (3) in one chunk
        assert before[("migrator_sync_snapshot_rows_total", (("table", "emp"),))] == 3
        assert before[("migrator_sync_snapshot_chunks_total", (("table", "emp"),))] >= 1
        conn = binlog_db.connect(client_flag=0)
        lags: list[tuple[float, float]] = []  # (lag, seconds since the first write began)
        writing = time.monotonic()
        try:
            cur = conn.cursor()
            for batch in range(3):  # 3 transactions of 10 inserts
                cur.executemany(
                    "INSERT INTO emp (email, login) VALUES (%s, %s)",
                    [(f"m{batch}_{i}@x", f"m{batch}_{i}") for i in range(10)],
                )
                conn.commit()
                lag = scrape(port)[("migrator_sync_lag_seconds", ())]
                lags.append((lag, time.monotonic() - writing))
            cur.execute("UPDATE emp SET title = 'metrics' WHERE email LIKE 'm0\\_%'")
            conn.commit()
            cur.execute("DELETE FROM emp WHERE email LIKE 'm1\\_%' AND login < 'm1_5'")
            conn.commit()
        finally:
            conn.close()
        end = master_position(binlog_db)

        def applied() -> dict[Any, float] | None:
            m = scrape(port)
            return m if _rows(m, "delete") - _rows(before, "delete") >= 5 else None

        after = wait_for("the writes applied", applied, 30)
        assert _rows(after, "insert") - _rows(before, "insert") == 30
        assert _rows(after, "update") - _rows(before, "update") == 10
        assert _rows(after, "delete") - _rows(before, "delete") == 5
        assert (_txns(after, "insert"), _txns(after, "update"), _txns(after, "delete")) == (3, 1, 1)
        t0 = before[("migrator_sync_transactions_total", ())]
        assert after[("migrator_sync_transactions_total", ())] - t0 >= 5
        rt0 = before[("migrator_sync_redis_round_trips_total", ())]
        assert after[("migrator_sync_redis_round_trips_total", ())] > rt0
        # plausible: never negative, never more than the time since the test began writing
        # (what a transaction not yet applied can be behind by, however slow the host)
        assert all(0.0 <= lag <= spent + 0.5 for lag, spent in lags), lags

        def at_zero() -> dict[Any, float] | None:
            m = scrape(port)
            beats = m[("migrator_sync_heartbeats_total", ())]
            return m if m[("migrator_sync_lag_seconds", ())] == 0.0 and beats > 0 else None

        # idle tables, idle source: heartbeats bring the lag to 0 and keep it there; the stored
        # position is the log's end
        idle = [wait_for("heartbeats, and the lag at 0", at_zero, 30)]
        idle += [scrape(port) for _ in range(2)]
        assert [m[("migrator_sync_lag_seconds", ())] for m in idle] == [0.0, 0.0, 0.0]
        assert idle[-1][("migrator_sync_heartbeats_total", ())] > 0
        assert idle[-1][("migrator_sync_source_silence_seconds", ())] < 3.0
        info = [k for k in idle[-1] if k[0] == "migrator_sync_position_info"]
        assert info and dict(info[0][1])["file"] == end.file
        assert int(dict(info[0][1])["pos"]) >= end.pos
        assert _get(port, "/healthz")[0] == 200
        # writes to a table the mapping does not name move the position, not the lag
        binlog_db.run("INSERT INTO other VALUES (1, 1), (2, 2)")
        moved = master_position(binlog_db)
        assert moved > end

        def position() -> int:
            m = scrape(port)
            pos = int(next(dict(k[1])["pos"] for k in m if k[0] == "migrator_sync_position_info"))
            return pos if pos >= moved.pos and m[("migrator_sync_lag_seconds", ())] == 0 else 0

        wait_for("the position past the unmapped write, lag 0", position, 15)
        assert _rows(scrape(port), "insert") == _rows(after, "insert")
    # the same figures in the --json status lines
    last = statuses[-1].as_dict()
    assert last["row_changes"]["emp"] == {
        "insert": _rows(after, "insert"),
        "update": _rows(after, "update"),
        "delete": _rows(after, "delete"),
    }
    assert last["snapshot"]["emp"]["rows"] == 3
    documented = {  # docs/sync.md, the --json paragraph
        "healthy", "health", "row_changes", "table_transactions", "source_position",
        "heartbeats", "seconds_since_source_heard", "reconnects", "retries",
        "failures_in_a_row", "errors", "snapshot", "redis_round_trips",
    }  # fmt: skip
    assert documented <= set(last), documented - set(last)
    json.dumps(last)


def _sigstopped(pid: int) -> Any:
    @contextmanager
    def paused() -> Iterator[None]:
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    return paused()


def test_healthz_turns_503_while_the_source_is_stopped(  # type: ignore[no-untyped-def]
    binlog_db, binlog_server, redis_url: str
) -> None:
    if binlog_server.kind != "mariadb":
        pytest.skip("SIGSTOP needs the private MariaDB's process")
    binlog_db.run(SCHEMA)
    figures = SyncFigures(HealthRules(stall=2.0))
    with following(binlog_db, redis_url, figures) as port:
        wait_for("/healthz 200", lambda: _healthy(port), 15)
        with _sigstopped(binlog_server.process.pid):
            _, body = wait_for("/healthz 503", lambda: _unhealthy(port), 15)
            assert "no event and no heartbeat from the source" in body, body
            m = scrape(port)
            assert m[("migrator_sync_healthy", ())] == 0
            assert m[("migrator_sync_source_silence_seconds", ())] > 2.0
            assert m[("migrator_sync_lag_seconds", ())] == 0.0  # the last it could know
        _, body = wait_for("/healthz 200 again", lambda: _healthy(port), 15)
        assert body.startswith("ok: following"), body


@pytest.mark.skipif(redis_server_problem() is not None, reason="no redis-server")
def test_healthz_turns_503_while_redis_takes_no_writes(binlog_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The source's log moves on, sync reads it but cannot apply it: 503 'not advancing'."""
    binlog_db.run(SCHEMA)
    figures = SyncFigures(HealthRules(stall=2.0))
    with redis_process(tmp_path) as target, following(binlog_db, target.url, figures) as port:
        assert target.proc is not None
        with _sigstopped(target.proc.pid):
            binlog_db.run("INSERT INTO emp (email) VALUES ('while@paused')")
            # "not advancing" once the source's head is seen past the applied position (asked
            # every 0.25 s); on a busy machine a 503 for the reader's silence may come first
            _, body = wait_for("/healthz 503 not advancing", lambda: _stalled(port), 30)
            assert body.startswith("unhealthy: not advancing"), body
            lag = scrape(port)[("migrator_sync_lag_seconds", ())]
            assert lag > 2.0  # it grows from the moment the transaction was seen
        wait_for("/healthz 200 again", lambda: _healthy(port), 30)
        wait_for("the lag back to 0", lambda: figures.lag() == 0.0, 15)


def _unhealthy(port: int) -> tuple[int, str] | None:
    got = _get(port, "/healthz")
    return got if got[0] == 503 else None


def _stalled(port: int) -> tuple[int, str] | None:
    got = _unhealthy(port)
    return got if got is not None and "not advancing" in got[1] else None


def _healthy(port: int) -> tuple[int, str] | None:
    got = _get(port, "/healthz")
    return got if got[0] == 200 else None


def test_cli_metrics_address_errors_are_one_line(tmp_path: Path) -> None:
    mapping = tmp_path / "m.yaml"
    mapping.write_text(MAPPING)
    done = subprocess.run(
        [sys.executable, "-m", "migrator", "sync", str(mapping), "--metrics", "nowhere"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--metrics 'nowhere' is not HOST:PORT" in done.stderr
    assert "127.0.0.1:9108" in done.stderr


def test_a_killed_binlog_connection_is_counted_as_a_reconnect(  # type: ignore[no-untyped-def]
    binlog_db, binlog_server, redis_url: str
) -> None:
    binlog_db.run(SCHEMA)
    figures = SyncFigures()
    with following(binlog_db, redis_url, figures) as port:
        assert scrape(port)[("migrator_sync_reconnects_total", ())] == 0
        admin = binlog_server.connect() if binlog_server.kind == "mariadb" else None
        if admin is None:
            pytest.skip("needs the private MariaDB")
        try:
            with admin.cursor() as cur:

                def dump_threads() -> list[int]:  # the reader may still be connecting
                    cur.execute("SELECT id FROM information_schema.processlist "
                                "WHERE command LIKE 'Binlog Dump%'")  # fmt: skip
                    return [row[0] for row in cur.fetchall()]

                dumps = wait_for("the reader's Binlog Dump thread", dump_threads, 15)
                for pid in dumps:
                    cur.execute(f"KILL {int(pid)}")
        finally:
            admin.close()
        binlog_db.run("INSERT INTO emp (email) VALUES ('after@kill')")
        m = wait_for("the insert applied", lambda: (m := scrape(port)) and
                     _rows(m, "insert") >= 1 and m, 30)  # fmt: skip
        assert m[("migrator_sync_reconnects_total", ())] >= 1
        kinds = {dict(k[1])["kind"] for k in m if k[0] == "migrator_sync_errors_total"}
        assert "source_connection_lost" in kinds
        assert _get(port, "/healthz")[0] == 200


def test_the_command_serves_metrics_and_prints_the_figures_in_its_json_lines(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, tmp_path: Path
) -> None:
    binlog_db.run(SCHEMA)
    mapping = tmp_path / "m.yaml"
    mapping.write_text(MAPPING)
    port = free_port()
    env = {**os.environ, "MIGRATOR_SYNC_SERVER_ID": str(next(_ids)),
           "MIGRATOR_SYNC_METRICS": f"127.0.0.1:{port}"}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "migrator", "sync", str(mapping), "--source", binlog_db.url,
         "--target", redis_url, "--json", "--health-stall", "5"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())["status"]
        assert first["phase"] == "loading" and "redis_round_trips" in first
        line = past_loading(proc.stdout)
        assert line["snapshot"]["emp"] == {"rows": 3, "chunks": 1, "done": True}
        assert _get(port, "/healthz")[0] == 200
        binlog_db.run("INSERT INTO emp (email) VALUES ('cli@metrics')")
        while not line.get("row_changes"):
            line = json.loads(proc.stdout.readline())["status"]
        assert line["row_changes"]["emp"]["insert"] == 1
        assert _rows(scrape(port), "insert") == 1
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with pytest.raises(urllib.error.URLError):  # the server went with the process
        _get(port, "/healthz")


@pytest.mark.skipif(redis_server_problem() is not None, reason="no redis-server")
def test_retries_past_the_threshold_turn_healthz_503_until_redis_is_back(  # type: ignore[no-untyped-def]
    binlog_db, tmp_path: Path
) -> None:
    """Redis stopped (its data kept in its append-only file) while rows are written: the
    follow loop's writes fail and are retried; 503 'retrying' from the 3rd failure in a row;
    Redis started again: the writes go through, 200, and the figures kept the count."""
    binlog_db.run(SCHEMA)
    figures = SyncFigures(HealthRules(stall=60, retries=3))
    with redis_process(tmp_path, appendonly=True) as target, \
            following(binlog_db, target.url, figures) as port:  # fmt: skip
        target.stop()
        binlog_db.run("INSERT INTO emp (email) VALUES ('while@down')")
        _, body = wait_for("/healthz 503", lambda: _unhealthy(port), 30)
        assert body.startswith("unhealthy: retrying: 3 failures in a row, the last Redis: "), body
        target.start()
        wait_for("/healthz 200 again", lambda: _healthy(port), 60)
        m = wait_for("the row applied", lambda: (m := scrape(port)) and
                     _rows(m, "insert") == 1 and m, 30)  # fmt: skip
        assert m[("migrator_sync_retries_total", (("what", "Redis"),))] >= 3
        assert m[("migrator_sync_failures_in_a_row", ())] == 0
        kinds = {dict(k[1])["kind"] for k in m if k[0] == "migrator_sync_errors_total"}
        assert "redis_connection_lost" in kinds, kinds


def test_a_cascade_reads_from_redis_count_as_round_trips(
    binlog_db, binlog_server, redis_url: str
) -> None:  # type: ignore[no-untyped-def]
    """A parent's DELETE that cascades: one group, and the two reads of the child rows it
    needs (the child set, then the children's hashes), are three round trips."""
    binlog_db.run(
        "CREATE TABLE parent (id INT PRIMARY KEY); "
        "CREATE TABLE child (id INT PRIMARY KEY, parent_id INT, CONSTRAINT fk_c "
        "FOREIGN KEY (parent_id) REFERENCES parent (id) ON DELETE CASCADE); "
        "INSERT INTO parent VALUES (1), (2); INSERT INTO child VALUES (1, 1), (2, 1), (3, 2)"
    )
    text = "version: 1\ntables:\n  parent: {}\n  child:\n    references: [{columns: [parent_id], "
    mapping = parse_mapping(text + "table: parent}]\n", name="cascaded")
    sid = next(_ids)
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=sid)
    binlog_db.run("DELETE FROM parent WHERE id = 1")
    figures = SyncFigures()
    report = sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True,
                  server_id=sid, figures=figures)  # fmt: skip
    d = figures.as_dict()
    assert report.transactions == 1 and d["transactions"] == 1
    changes = {"parent": {"insert": 0, "update": 0, "delete": 1}}
    trips = 3
    if binlog_server.kind != "mariadb":
        # MySQL 9.7's SQL-layer foreign keys log the cascaded deletes as row changes of
        # their own: sync applies them as logged and reads nothing
        changes["child"] = {"insert": 0, "update": 0, "delete": 2}
        trips = 1
    assert d["row_changes"] == changes
    assert d["redis_round_trips"] == trips
