"""Expiry (docs/mapping.md#expire): the loader's and validate's refusals, migrate's TTLs
and schedule, rows already past their moment left out, verify and --fix on real servers."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from migrator.commands import dry_run, migrate
from migrator.commands.validate import validate
from migrator.commands.verify import verify
from migrator.errors import MigratorError
from migrator.mapping.expiry import Expiry, ExpirySyntaxError, parse
from migrator.mapping.loader import parse_mapping
from migrator.plan.expiry import decode_row, encode_row
from tests.services import MySQLDatabase

SCHEMA = """
CREATE TABLE sess (
  id INT PRIMARY KEY, login VARCHAR(20), ends DATETIME(3) NULL, ends_ts TIMESTAMP NULL,
  ends_epoch BIGINT NULL, ends_ms BIGINT NULL, note VARCHAR(10), UNIQUE KEY (login)
)
"""
MAPPING = """
version: 1
tables:
  sess:
    expire: {column: %s%s}
    unique:
      - columns: [login]
        key: "sess:login:{login}"
    indexes: [[note]]
    sorted: [{key: "sess:by:ends_epoch", score: ends_epoch}]
"""


def _at(seconds: float) -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(seconds=seconds)


def _rows() -> list[tuple[object, ...]]:
    out = []
    for i, ahead in enumerate([3600, -3600, 7200, None, -5, 600], start=1):
        if ahead is None:
            out.append((i, f"u{i}", None, None, None, None, "n"))
            continue
        at = _at(ahead)
        epoch = int(at.replace(tzinfo=timezone.utc).timestamp())
        out.append((i, f"u{i}", at, at, epoch, epoch * 1000, "n" if i % 2 else "m"))
    return out


def _load(db: MySQLDatabase) -> list[tuple[object, ...]]:
    db.run(SCHEMA)
    rows = _rows()
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.executemany("INSERT INTO sess VALUES (%s,%s,%s,%s,%s,%s,%s)", rows)
        conn.commit()
    finally:
        conn.close()
    return rows


def _migrated(
    db: MySQLDatabase, tmp_path: Path, target: str, mapping: str
) -> tuple[list[tuple[object, ...]], Path]:
    """The table loaded into MySQL, migrated by ``mapping`` (m.yaml): (its rows, the file)."""
    rows = _load(db)
    path = tmp_path / "m.yaml"
    path.write_text(mapping)
    assert migrate(path, source=db.url, target=target, workers=1).exit_code == 0
    return rows, path


def test_parse_and_refusals() -> None:
    assert parse("90s") == Expiry(ttl=90.0)
    assert parse({"ttl": "1.5h"}) == Expiry(ttl=5400.0)
    assert parse(3600) == Expiry(ttl=3600.0)
    assert parse({"column": "c", "offset": "-10m", "unit": "ms"}) == Expiry(
        column="c", offset=-600.0, unit="ms"
    )
    for bad, message in [
        ("-5s", "must not be negative"),
        (0, "above zero"),
        ("3 weeks", "unknown unit"),
        ({"ttl": 5, "column": "c"}, "not both"),
        ({"column": "c", "unit": "us"}, "s or ms"),
        ({"column": "c", "every": 1}, "unknown key"),
        ({"ttl": 5, "offset": 1}, "go with column"),
    ]:
        with pytest.raises(ExpirySyntaxError, match=message):
            parse(bad)
    # what dry-run says (and the fingerprint holds): a unit only where it is not seconds
    assert parse({"column": "ends_at", "offset": "1d"}).text == "ends_at + 86400s"
    assert parse({"column": "c", "offset": "-10m", "unit": "ms"}).text == "c - 600s (unit ms)"
    assert parse("1h").text == "ttl 3600s"
    row = (b"1", None, b"", b"a:b-")
    assert decode_row(encode_row(row)) == row


def test_loader_names_the_path() -> None:
    with pytest.raises(MigratorError, match=r"tables\.sess\.expire.*unknown unit"):
        parse_mapping("version: 1\ntables:\n  sess:\n    expire: 5 weeks\n")


def test_validate_checks_the_column(mysql_db: MySQLDatabase, tmp_path: Path) -> None:
    _load(mysql_db)
    path = tmp_path / "m.yaml"
    for column, message in [("note", "is text"), ("nope", "unknown column 'nope'")]:
        path.write_text(MAPPING % (column, ""))
        problems = validate(path, source=mysql_db.url).problems
        assert any(message in p.message and "expire" in p.path for p in problems), problems
    path.write_text(MAPPING % ("ends", ""))
    assert not [p for p in validate(path, source=mysql_db.url).problems if p.level == "error"]
    path.write_text(FIXED + "    latest: [{key: sess:latest, order_by: ends}]\n")
    problems = validate(path, source=mysql_db.url).problems
    assert any("MySQL cannot tell whose ttl" in p.message for p in problems), problems


@pytest.mark.parametrize(
    ("column", "extra"),
    [("ends", ""), ("ends_ts", ""), ("ends_epoch", ""), ("ends_ms", ", unit: ms"),
     ("ends", ", offset: -30m")],
)  # fmt: skip
def test_migrate_sets_ttls_and_leaves_out_past_rows(
    mysql_db: MySQLDatabase,
    redis_url: str,
    redis_client: redis.Redis,
    tmp_path: Path,
    column: str,
    extra: str,
) -> None:
    rows = _load(mysql_db)
    path = tmp_path / "m.yaml"
    path.write_text(MAPPING % (column, extra))
    offset = -1800 if "offset" in extra else 0
    resp = tmp_path / "load.resp"
    planned = dry_run(path, source=mysql_db.url, sample=0, resp_file=resp).tables[0]
    workers = 2 if column == "ends_epoch" else 1  # worker processes plan the same
    assert migrate(path, source=mysql_db.url, target=redis_url, workers=workers).exit_code == 0
    now = time.time()
    past = [r for r in rows if isinstance(r[2], datetime)
            and r[2].replace(tzinfo=timezone.utc).timestamp() + offset <= now]  # fmt: skip
    assert planned.expire is not None and "sess:{id}, sess:login:{login}: PEXPIREAT" in (
        planned.expire
    ), planned.expire
    assert (planned.expired, planned.rows) == (len(past), len(rows) - len(past))
    schedule = "migrator:m:expiry:sess"
    for row in rows:
        pk, login, ends = row[0], row[1], row[2]
        key = f"sess:{pk}"
        if ends is None:
            assert redis_client.ttl(key) == -1 and redis_client.ttl(f"sess:login:{login}") == -1
            assert redis_client.zscore(schedule, str(pk)) is None
            continue
        assert isinstance(ends, datetime)
        moment = ends.replace(tzinfo=timezone.utc).timestamp() + offset
        if moment <= now:
            assert not redis_client.exists(key), key
            assert not redis_client.exists(f"sess:login:{login}")
            assert not redis_client.sismember(f"sess:indices:note:{row[6]}", str(pk))
            continue
        want = moment - now
        for k in (key, f"sess:login:{login}"):
            got = redis_client.pttl(k) / 1000
            assert abs(got - want) < 5, (k, got, want)
        assert redis_client.ttl(f"sess:indices:note:{row[6]}") == -1  # shared: no TTL
        score = redis_client.zscore(schedule, str(pk))
        assert score is not None and abs(score / 1000 - moment) < 2
        assert redis_client.hexists(f"{schedule}:memo", str(pk))
    assert b"PEXPIREAT" in resp.read_bytes()
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0


def _kinds(report) -> dict[str, int]:  # type: ignore[no-untyped-def]
    out: dict[str, int] = {}
    for t in report.tables:
        out.update(t.counts)
    return out


def test_verify_judges_ttls_and_fix_never_resurrects(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = _migrated(mysql_db, tmp_path, redis_url, MAPPING % ("ends", ""))[1]
    ok = verify(path, source=mysql_db.url, target=redis_url)
    assert ok.exit_code == 0, ok.as_dict()
    # a key that lost its TTL, one whose TTL is far from its moment, one within tolerance
    redis_client.persist("sess:1")
    redis_client.pexpire("sess:login:u3", redis_client.pttl("sess:login:u3") + 60_000)
    redis_client.pexpire("sess:6", redis_client.pttl("sess:6") + 1_000)
    found = verify(path, source=mysql_db.url, target=redis_url)
    kinds = _kinds(found)
    assert found.exit_code == 1 and kinds == {"missing TTL": 1, "wrong TTL": 1}, kinds
    assert "sess:1" in str(found.as_dict()) and "sess:login:u3" in str(found.as_dict())
    # a row whose moment MySQL moves to within the tolerance of now is not judged
    mysql_db.run("UPDATE sess SET ends = UTC_TIMESTAMP(3) + INTERVAL 1 SECOND WHERE id = 6")
    # a row moved into the past, whose keys Redis still holds without a TTL: should have gone
    mysql_db.run("UPDATE sess SET ends = UTC_TIMESTAMP(3) - INTERVAL 1 HOUR WHERE id = 3")
    redis_client.persist("sess:3")
    redis_client.persist("sess:login:u3")
    # live rows lost from Redis: --fix writes them back, with their TTL or none
    redis_client.delete("sess:4", "sess:login:u1")
    found = verify(path, source=mysql_db.url, target=redis_url)
    text = str(found.as_dict())
    assert found.exit_code == 1 and "sess:3" in text and "sess:4" in text, text
    assert "sess:login:u1" in text, text
    assert "sess:6" not in text, text
    verify(path, source=mysql_db.url, target=redis_url, fix=True)
    # row 6's moment just passed: within the tolerance still, not judged (set again here, not
    # slept for: the verifies before take seconds on a busy machine)
    mysql_db.run(
        "UPDATE sess SET ends = UTC_TIMESTAMP(3) - INTERVAL 500000 MICROSECOND WHERE id = 6"
    )
    after = verify(path, source=mysql_db.url, target=redis_url)
    assert after.exit_code == 0, after.as_dict()
    assert redis_client.ttl("sess:1") > 3000 and redis_client.ttl("sess:login:u1") > 3000
    assert redis_client.exists("sess:4") and redis_client.ttl("sess:4") == -1
    for gone in ("sess:3", "sess:login:u3", "sess:2", "sess:login:u2"):
        assert not redis_client.exists(gone), gone  # never resurrected
    assert not redis_client.sismember("sess:indices:note:n", b"3")
    verify(path, source=mysql_db.url, target=redis_url, fix=True)
    assert not redis_client.exists("sess:3") and not redis_client.exists("sess:2")


FIXED = """
version: 1
tables:
  sess:
    expire: 2s
    unique: [login]
    indexes: [[note]]
"""


def test_a_fixed_ttl_counts_from_the_load(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    # 4 s, waits counted from the keys' own end: the checks keep to their windows on a busy
    # machine (parallel workers) where a verify takes a second or two
    rows, path = _migrated(mysql_db, tmp_path, redis_url, FIXED.replace("2s", "4s"))
    ends = time.monotonic() + redis_client.pttl("sess:1") / 1000
    for row in rows:
        assert 0 < redis_client.pttl(f"sess:{row[0]}") <= 4000
    assert redis_client.ttl("sess:uniques:login") == -1
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0
    _sleep_until(ends + 0.2)
    assert not redis_client.exists("sess:1")
    # gone from Redis, within the tolerance of their moment: not judged
    assert time.monotonic() < ends + 1.5, "too late for the check inside the tolerance"
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0
    _sleep_until(ends + 2.3)
    # past the tolerance: correctly absent, not missing; but with no sync to sweep, the
    # shared structures still name the expired rows, which verify reports (they explain
    # nothing)
    assert redis_client.hlen("sess:uniques:login") == len(rows)  # no sync: not swept yet
    left = verify(path, source=mysql_db.url, target=redis_url)
    kinds, text = _kinds(left), str(left.as_dict())
    assert left.exit_code == 1 and kinds == {"stale key": 3}, kinds  # no row explains them
    for key in ("sess:uniques:login", "sess:indices:note:n", "sess:indices:note:m"):
        assert key in text, text
    # --fix sweeps, never writes them back
    verify(path, source=mysql_db.url, target=redis_url, fix=True)
    assert not redis_client.exists("sess:1") and not redis_client.exists("sess:uniques:login")
    assert not redis_client.exists("sess:indices:note:n")
    assert redis_client.zcard("migrator:m:expiry:sess:gone") == len(rows)
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0
    for mode in ({"counts_only": True}, {"sample": 3}):  # row counts: less the rows gone
        report = verify(path, source=mysql_db.url, target=redis_url, **mode)
        assert report.exit_code == 0 and report.tables[0].mysql_rows == 0, report.as_dict()


def _sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))


def test_members_of_expired_rows_beside_live_ones_are_stale(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Under a fixed ttl, with no sync to sweep: a shared key holding one live row's member
    and the leftovers of expired rows (MySQL still has those rows) is reported, member by
    member; the expired rows do not account for their members."""
    rows, path = _migrated(mysql_db, tmp_path, redis_url, FIXED)
    kept = redis_client.dump("sess:1")
    time.sleep(2.0 + 2.0 + 0.3)  # the ttl, then verify's tolerance
    # row 1 written again since (as sync would): its keys back, its moment ahead
    redis_client.restore("sess:1", 60_000, kept)
    redis_client.zadd("migrator:m:expiry:sess", {"1": (time.time() + 60) * 1000})
    live = [r for r in rows if r[0] == 1]
    assert live and redis_client.hlen("sess:uniques:login") == len(rows)
    found = verify(path, source=mysql_db.url, target=redis_url)
    kinds, text = _kinds(found), str(found.as_dict())
    leftovers = len(rows) - 1  # every other row's unique entry; its note's index members
    notes = sum(1 for r in rows if r[0] != 1 and r[6] == "n")
    assert found.exit_code == 1, found.as_dict()
    assert kinds == {"foreign unique entry": leftovers, "foreign index member": notes,
                     "stale key": 1}, kinds  # fmt: skip
    assert "sess:indices:note:m" in text  # no live row: the whole key is stale
    verify(path, source=mysql_db.url, target=redis_url, fix=True)
    assert redis_client.hkeys("sess:uniques:login") == [b"u1"]
    assert redis_client.smembers("sess:indices:note:n") == {b"1"}
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0


def test_replace_removes_the_schedule_with_the_keys(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = _migrated(mysql_db, tmp_path, redis_url, MAPPING % ("ends", ""))[1]
    assert redis_client.hexists("migrator:m:expiry:sess:memo", "1")
    mysql_db.run("DELETE FROM sess WHERE id = 1")
    report = migrate(path, source=mysql_db.url, target=redis_url, workers=1, replace=True)
    assert report.exit_code == 0
    assert redis_client.zscore("migrator:m:expiry:sess", "1") is None  # no memo outlives it
    assert not redis_client.hexists("migrator:m:expiry:sess:memo", "1")
    assert redis_client.zscore("migrator:m:expiry:sess", "3") is not None
