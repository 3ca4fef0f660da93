"""sync's log, pure (sync/log.py, render/log.py, sync/pace.py): the text and JSON formats, the
start line without a password, the status line's figures and rates. The real runs, on both
engines: tests/sync/test_sync_logs.py."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from migrator.render.log import logging_to
from migrator.source.binlog.reader import BinlogPosition
from migrator.sync import log
from migrator.sync.figures import SyncFigures
from migrator.sync.pace import load_message, load_pace
from migrator.urls import mask
from tests.test_cli_details import cli

SOURCE = "mysql+pymysql://app:s3cret@db1:3306/shop"


def test_text_lines_are_one_record_each_without_colour() -> None:
    out = io.StringIO()
    with logging_to(out, "text"):
        log.event("ddl", "item: ALTER TABLE item\n  ADD COLUMN x INT", table="item")
    log.event("ddl", "not written: the handler is gone")
    (line,) = out.getvalue().splitlines()
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info ddl: item: ALTER TABLE item ADD COLUMN x INT",
        line,
    ), line
    assert "\x1b[" not in out.getvalue()


def test_json_lines_hold_time_level_event_message_and_fields() -> None:
    out = io.StringIO()
    with logging_to(out, "json"):
        log.started("shop.yaml", mask(SOURCE), "redis://r:6379/0", {}, False, True)
        log.started("shop.yaml", mask(SOURCE), "redis://r:6379/0",
                    {"file": "bin.000002", "pos": "400", "gtid": "0-1-9"}, False, True)  # fmt: skip
    first, then = (json.loads(x) for x in out.getvalue().splitlines())
    assert set(first) == {"time", "level", "event", "message", "fields"}
    assert first["event"] == "start" and first["level"] == "info"
    assert first["fields"]["source"] == "mysql+pymysql://app:***@db1:3306/shop"
    assert first["fields"]["position"] is None and "loaded first (online" in first["message"]
    assert then["fields"]["position"] == "bin.000002:400" and then["fields"]["gtid"] == "0-1-9"
    assert "s3cret" not in out.getvalue()


def test_the_status_line_gives_position_lag_rates_and_what_is_behind() -> None:
    f = SyncFigures()
    f.following(BinlogPosition("bin.000001", 4))
    ticker = log.Ticker(f.as_dict, 60)
    out = io.StringIO()
    with logging_to(out, "json"):
        ticker.last = (ticker.last[0] - 2.0, 0, 0)  # the last line 2 s ago
        f.transactions = 10  # 10 transactions since: 5/s
        ticker.tick()
    (record,) = (json.loads(x) for x in out.getvalue().splitlines())
    fields = record["fields"]
    assert record["event"] == "status" and fields["phase"] == "following"
    assert fields["position"] == "bin.000001:4" and fields["lag_seconds"] == 0.0
    assert 4.9 < fields["transactions_per_second"] <= 5.0
    assert fields["behind_transactions"] == 0 and fields["behind_bytes"] == 0
    assert re.fullmatch(r"following at bin\.000001:4, lag 0\.000 s, [\d.]+ transactions/s, "
                        r"0\.0 row changes/s, behind: 0 transaction\(s\), 0 bytes",
                        record["message"]), record["message"]  # fmt: skip


def test_the_load_pace() -> None:
    pace = load_pace({"a": 100, "b": 300}, {"a": 100, "b": 50}, {}, 10.0, 15.0)
    assert pace == {"rows": 150, "total": 400, "seconds_left": 8.3}  # 30 rows/s, 250 left
    assert load_message(pace) == "loaded 150 of about 400 rows (37%), about 8 s left"
    assert load_pace({"a": 0}, {"a": 7}, {}, None, 1.0) == {
        "rows": 7, "total": None, "seconds_left": None
    }  # fmt: skip
    assert load_message({"rows": 7, "total": None, "seconds_left": None}) == (
        "loaded 7 rows (total not known)"
    )


def test_retries_and_recoveries_are_logged_as_they_are_counted() -> None:
    f = SyncFigures()
    out = io.StringIO()
    with logging_to(out, "text"):
        f.failed("Redis", "Connection refused", 1)
        f.failed("Redis", "Connection refused", 2, retried=False)
        f.recovered("Redis")
        f.recovered("Redis")  # nothing failed since: no line
    lines = out.getvalue().splitlines()
    assert [x.split(" ", 2)[2] for x in lines] == [
        "retry: Redis failed (1 in a row): Connection refused; retrying",
        "retry: Redis failed (2 in a row): Connection refused; no retry left",
        "recovered: Redis answers again after 2 failure(s)",
    ]
    assert lines[0].split()[1] == "warning" and lines[2].split()[1] == "info"


def test_an_error_that_ends_the_run_is_logged_before_it_is_printed(tmp_path: Path) -> None:
    mapping = tmp_path / "m.yaml"
    mapping.write_text("version: 1\ntables:\n  t: {}\n")
    source = "mysql+pymysql://app:s3cret@127.0.0.1:1/shop"  # nothing listens on port 1
    done = cli("sync", str(mapping), "--source", source, "--target", "redis://127.0.0.1:1/0",
               "--retries", "0", "--log-format", "json", columns=None)  # fmt: skip
    assert done.returncode == 3, done.stderr
    first, *rest = done.stderr.splitlines()
    record = json.loads(first)
    assert record["event"] == "error" and record["level"] == "error"
    assert record["fields"]["exit_code"] == 3 and record["fields"]["hint"]
    assert record["message"].startswith("cannot reach MySQL at 127.0.0.1:1")
    assert rest[0].startswith("error: ") and "s3cret" not in done.stderr
