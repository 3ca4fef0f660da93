"""Expiry under sync (docs/mapping.md#expire, docs/sync.md#expiry): random writes move rows'
moments 1-3 s ahead, into the past and back, or to NULL (never); after ``--until-caught-up``
and a wait past every short moment, ``verify`` finds 0 differences, and an independent
comparison (MySQL's own rows against what Redis holds, key by key) agrees: no key, member,
score or list entry of an expired row is left, and the live rows' keys carry their TTLs."""

from __future__ import annotations

import functools
import random
import subprocess
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.mapping.model import Mapping
from migrator.reports import SyncReport
from tests.faults import wait_for
from tests.services import MySQLDatabase
from tests.sync.helpers import cli, mixed_writes, while_syncing

SCHEMA = """
CREATE TABLE tok (
  id INT PRIMARY KEY, email VARCHAR(40), city VARCHAR(20), score INT, ends DATETIME(3) NULL,
  UNIQUE KEY (email), KEY (city)
);
"""
MAPPING = """
version: 1
tables:
  tok:
    expire: {column: ends}
    unique: [email]
    indexes: [city]
    sorted: [{key: "tok:by:score", score: score}]
    latest: [{key: "tok:latest", order_by: score, limit: 5}]
"""
CITY = ["Oslo", "Rome", None]
#: seconds from now: short moments, the past, a far future, never
AHEAD: list[float | None] = [1.0, 2.0, 3.0, -2.0, -3600.0, 3600.0, None]

_ids = iter(range(8300, 8400))


def _ends(rng: random.Random) -> datetime | None:
    ahead = rng.choice(AHEAD)
    if ahead is None:
        return None
    return datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(seconds=ahead)


def _row(rng: random.Random, i: int) -> tuple[object, ...]:
    return (i, f"u{i}@x.org", rng.choice(CITY), rng.randint(0, 50), _ends(rng))


def _update(cur: Any, rng: random.Random, i: int) -> None:
    if rng.random() < 0.55:
        cur.execute("UPDATE tok SET ends = %s WHERE id = %s", (_ends(rng), i))
    else:
        cur.execute("UPDATE tok SET city = %s, score = %s WHERE id = %s",
                    (rng.choice(CITY), rng.randint(0, 50), i))  # fmt: skip


def _write(db: MySQLDatabase, rng: random.Random, steps: int, first: int) -> None:
    mixed_writes(db, rng, steps, first, "tok", _row, _update)


def _compare(db: MySQLDatabase, client) -> None:  # type: ignore[no-untyped-def]
    """Redis against MySQL's rows and the clock, without verify (no row is within a few
    seconds of its moment when this runs)."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = [r for r in db.query("SELECT id, email, city, score, ends FROM tok")
            if r[4] is None or r[4] > now]  # fmt: skip
    ids = {str(r[0]).encode() for r in rows}
    held = {k.split(b":")[1] for k in client.scan_iter(match="tok:*")
            if k.split(b":")[1].isdigit()}  # fmt: skip
    assert held == ids
    for r in rows:
        ttl = client.pttl(f"tok:{r[0]}")
        if r[4] is None:
            assert ttl == -1, r
        else:
            want = (r[4] - now).total_seconds() * 1000
            assert abs(ttl - want) < 2000, (r, ttl, want)
    assert client.hgetall("tok:uniques:email") == {r[1].encode(): str(r[0]).encode() for r in rows}
    for city in CITY[:2]:
        want = {str(r[0]).encode() for r in rows if r[2] == city}
        assert client.smembers(f"tok:indices:city:{city}") == want
    assert set(client.zrange("tok:by:score", 0, -1)) == ids
    newest = sorted(rows, key=lambda r: (r[3], r[0]), reverse=True)[:5]
    assert client.lrange("tok:latest", 0, -1) == [str(r[0]).encode() for r in newest]
    top = db.query("SELECT MAX(id) FROM tok")[0][0] or 0
    assert int(client.get("tok:id")) >= top
    schedule = client.zrange("migrator:expiry:expiry:tok", 0, -1)
    assert set(schedule) == {str(r[0]).encode() for r in rows if r[4] is not None}
    assert set(client.hkeys("migrator:expiry:expiry:tok:memo")) == set(schedule)


def _seed(db: MySQLDatabase, seed: int, n: int) -> None:
    rng = random.Random(seed)
    conn = db.connect(client_flag=0)
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO tok VALUES (%s,%s,%s,%s,%s)",
                        [_row(rng, i) for i in range(1, n + 1)])  # fmt: skip
    conn.commit()
    conn.close()


def _caught_up(mapping: Mapping, db: MySQLDatabase, target: str) -> SyncReport:
    return sync(mapping, source=db.url, target=target, until_caught_up=True, server_id=next(_ids))


def _settled(mapping: Mapping, db: MySQLDatabase, target: str, client) -> None:  # type: ignore[no-untyped-def]
    """Once every short moment is past and sync caught up: Redis as MySQL says, both ways."""
    time.sleep(3.5)
    _caught_up(mapping, db, target)
    _compare(db, client)
    report = verify(mapping, source=db.url, target=target)
    assert report.exit_code == 0, report.as_dict()


def test_rows_move_past_their_expiry_and_back(binlog_db, redis_url: str, redis_client) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    _seed(binlog_db, 5, 120)
    mapping = parse_mapping(MAPPING, name="expiry")
    first = _caught_up(mapping, binlog_db, redis_url)
    assert 0 < first.loaded[0].rows < 120
    for seed in (1, 2, 3):
        _write(binlog_db, random.Random(seed), 150, 120 + 150 * (seed - 1))
        _caught_up(mapping, binlog_db, redis_url)
        _settled(mapping, binlog_db, redis_url, redis_client)


def test_rows_expire_while_sync_follows(binlog_db, redis_url: str, redis_client) -> None:  # type: ignore[no-untyped-def]
    """sync runs (online load in chunks of 20) while writers move moments back and forth;
    its periodic sweep and the log meet exactly."""
    binlog_db.run(SCHEMA)
    _seed(binlog_db, 9, 200)
    mapping = parse_mapping(MAPPING, name="expiry")

    def run(stop: threading.Event, status: Any) -> None:
        sync(mapping, source=binlog_db.url, target=redis_url, stop=stop, chunk_rows=20,
             server_id=next(_ids), on_status=status)  # fmt: skip

    while_syncing(run, [functools.partial(_write, binlog_db, random.Random(s), 120, 80 + 120 * s)
                        for s in (1, 2)])  # fmt: skip
    _settled(mapping, binlog_db, redis_url, redis_client)


FIXED = """
version: 1
tables:
  tok:
    expire: 6s
    unique: [email]
    indexes: [city]
"""


def test_a_fixed_ttl_is_renewed_by_every_write_and_swept(
    binlog_db, redis_url: str, redis_client
) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    conn = binlog_db.connect(client_flag=0)
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO tok VALUES (%s,%s,%s,%s,%s)",
                        [(i, f"u{i}@x.org", "Oslo", i, None) for i in range(1, 6)])  # fmt: skip
    conn.commit()
    mapping = parse_mapping(FIXED, name="fixed")
    _caught_up(mapping, binlog_db, redis_url)
    assert 0 < redis_client.pttl("tok:1") <= 6000
    time.sleep(3)
    with conn.cursor() as cur:  # a write of row 1 (its score alone): the ttl starts again
        cur.execute("UPDATE tok SET score = 99 WHERE id = 1")
    conn.commit()
    _caught_up(mapping, binlog_db, redis_url)
    assert redis_client.pttl("tok:1") > redis_client.pttl("tok:2") + 2000  # 3 s later
    assert redis_client.hgetall("tok:1")[b"score"] == b"99"
    wait_for("rows 2-5 past their ttl", lambda: not redis_client.exists("tok:2"), 10)
    _caught_up(mapping, binlog_db, redis_url)
    assert redis_client.hgetall("tok:uniques:email") == {b"u1@x.org": b"1"}
    assert redis_client.smembers("tok:indices:city:Oslo") == {b"1"}
    assert set(redis_client.zrange("migrator:fixed:expiry:tok:gone", 0, -1)) == {
        b"2",
        b"3",
        b"4",
        b"5",
    }
    report = verify(mapping, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()  # rows 2-5: correctly absent
    with conn.cursor() as cur:  # a write brings row 2 back, with a new ttl
        cur.execute("UPDATE tok SET city = 'Rome' WHERE id = 2")
    conn.commit()
    conn.close()
    _caught_up(mapping, binlog_db, redis_url)
    assert redis_client.hget("tok:2", "city") == b"Rome" and redis_client.pttl("tok:2") > 3000
    assert redis_client.zscore("migrator:fixed:expiry:tok:gone", b"2") is None
    assert redis_client.smembers("tok:indices:city:Rome") == {b"2"}


# -- a fault in the middle of a sweep -----------------------------------------------------------
def _one_way_or_the_other(client, name: str, rows: dict[bytes, tuple[object, ...]]) -> int:  # type: ignore[no-untyped-def]
    """Each swept row is wholly there (its schedule entry, memo, unique entry, index and
    sorted-set members) or wholly gone: the sweep's MULTI/EXEC per row. The rows still due."""
    schedule = set(client.zrange(f"migrator:{name}:expiry:tok", 0, -1))
    memo = set(client.hkeys(f"migrator:{name}:expiry:tok:memo"))
    emails = client.hgetall("tok:uniques:email")
    cities = {c: client.smembers(f"tok:indices:city:{c}") for c in CITY[:2]}
    scored = set(client.zrange("tok:by:score", 0, -1))
    for i, row in rows.items():
        there = [i in schedule, i in memo, emails.get(str(row[1]).encode()) == i, i in scored]
        if row[2] is not None:
            there.append(i in cities[row[2]])
        assert len(set(there)) == 1, (i, there)
    return len(schedule & set(rows))


def test_kill_9_in_the_middle_of_a_sweep_leaves_each_row_whole_and_the_next_run_ends_it(
    binlog_db, redis_url: str, redis_client, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """2,000 rows loaded 4 s before their moment; once it is past, ``sync`` runs and is
    killed (-9) as soon as its sweep has removed a row, three times: after each kill every
    row is wholly there or wholly gone (never a unique entry without its schedule entry, say),
    the kill fell in the middle of a sweep at least once, and the next run ends the sweep:
    Redis as MySQL says, and ``verify`` exit 0."""
    binlog_db.run(SCHEMA)
    ends = datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(seconds=4)
    rng = random.Random(4)
    rows = {str(i).encode(): (i, f"u{i}@x.org", rng.choice(CITY), i % 50, ends)
            for i in range(1, 2001)}  # fmt: skip
    conn = binlog_db.connect(client_flag=0)
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO tok VALUES (%s,%s,%s,%s,%s)", list(rows.values()))
    conn.commit()
    conn.close()
    path = tmp_path / "sweep.yaml"
    path.write_text(MAPPING)
    mapping = parse_mapping(MAPPING, name="sweep")
    _caught_up(mapping, binlog_db, redis_url)
    assert _one_way_or_the_other(redis_client, "sweep", rows) == 2000, "not all loaded"
    time.sleep(max(0.0, (ends - datetime.now(timezone.utc).replace(tzinfo=None)).total_seconds()))
    cut = []

    def swept(due: int) -> bool:
        return bool(redis_client.zcard("migrator:sweep:expiry:tok") < due)

    for _ in range(3):
        due = _one_way_or_the_other(redis_client, "sweep", rows)
        if not due:
            break
        proc = subprocess.Popen(
            cli("sync", str(path), "--source", binlog_db.url, "--target", redis_url,
                "--server-id", str(next(_ids))),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for("a row swept", lambda d=due, p=proc: swept(d) or p.poll(), 60, every=0.001)
        finally:
            proc.kill()
            proc.communicate(timeout=30)
        cut.append((due, _one_way_or_the_other(redis_client, "sweep", rows)))
    assert any(0 < left < due for due, left in cut), f"no kill fell mid-sweep: {cut}"
    _settled(mapping, binlog_db, redis_url, redis_client)
    assert _one_way_or_the_other(redis_client, "sweep", rows) == 0
