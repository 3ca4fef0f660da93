"""Row filters under sync (docs/mapping.md#where): random writes move rows into and out of
the filter (a case-insensitive status, a DECIMAL bound, a date); after ``--until-caught-up``
``verify`` finds 0 differences, and an independent comparison (MySQL's own WHERE against
what Redis holds, key by key) agrees."""

from __future__ import annotations

import functools
import random
import threading
from decimal import Decimal
from typing import Any

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from tests.services import MySQLDatabase
from tests.sync.helpers import mixed_writes, while_syncing

SCHEMA = """
CREATE TABLE acct (
  id INT PRIMARY KEY, status VARCHAR(10) COLLATE utf8mb4_general_ci, amount DECIMAL(8,2),
  created DATETIME(3), email VARCHAR(40), city VARCHAR(20), score INT,
  UNIQUE KEY (email), KEY (city)
);
"""
MAPPING = """
version: 1
tables:
  acct:
    where: "status = 'active' AND amount >= 10 AND created >= DATE '2024-01-01'"
    columns: [status, amount]
    unique: [email]
    indexes: [city]
    sorted: [{key: "acct:by:score", score: score}]
    latest: [{key: "acct:latest", order_by: created, limit: 5}]
"""
#: what MySQL's own WHERE says (ASCII statuses: its '=' and the filter's agree on them)
NATIVE = "status = 'active' AND amount >= 10 AND created >= '2024-01-01'"
STATUS = ["active", "Active", "ACTIVE", "active ", "closed", None]
AMOUNT = [Decimal("9.99"), Decimal("10.00"), Decimal("10.01"), Decimal("55.5"), None]
CREATED = ["2023-12-31 23:59:59.999", "2024-01-01 00:00:00.000", "2024-06-01 12:00:00.5", None]
CITY = ["Oslo", "Rome", None]

_ids = iter(range(8100, 8200))


def _row(rng: random.Random, i: int) -> tuple[object, ...]:
    return (i, rng.choice(STATUS), rng.choice(AMOUNT), rng.choice(CREATED), f"u{i}@x.org",
            rng.choice(CITY), rng.randint(0, 50))  # fmt: skip


def _update(cur: Any, rng: random.Random, i: int) -> None:
    col, pool = rng.choice([("status", STATUS), ("amount", AMOUNT), ("created", CREATED),
                            ("city", CITY)])  # fmt: skip
    cur.execute(f"UPDATE acct SET {col} = %s, score = %s WHERE id = %s",
                (rng.choice(pool), rng.randint(0, 50), i))  # fmt: skip


def _write(db: MySQLDatabase, rng: random.Random, steps: int, first: int) -> None:
    mixed_writes(db, rng, steps, first, "acct", _row, _update)


def _compare(db: MySQLDatabase, client) -> None:  # type: ignore[no-untyped-def]
    """Redis against MySQL's own WHERE, without verify."""
    rows = db.query(f"SELECT id, email, city, score, created FROM acct WHERE {NATIVE}")
    ids = {str(r[0]).encode() for r in rows}
    held = {k.split(b":")[1] for k in client.scan_iter(match="acct:*")
            if k.split(b":")[1].isdigit()}  # fmt: skip
    assert held == ids
    assert {k: v for k, v in client.hgetall("acct:uniques:email").items()} == {
        r[1].encode(): str(r[0]).encode() for r in rows
    }
    for city in CITY[:2]:
        want = {str(r[0]).encode() for r in rows if r[2] == city}
        assert client.smembers(f"acct:indices:city:{city}") == want
    assert {m for m in client.zrange("acct:by:score", 0, -1)} == ids
    newest = sorted(rows, key=lambda r: (r[4], r[0]), reverse=True)[:5]
    assert client.lrange("acct:latest", 0, -1) == [str(r[0]).encode() for r in newest]
    top = db.query("SELECT MAX(id) FROM acct")[0][0] or 0
    assert int(client.get("acct:id")) >= top  # every row's key, filtered or not


def test_rows_move_in_and_out_of_the_filter(binlog_db, redis_url: str, redis_client) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    rng = random.Random(7)
    conn = binlog_db.connect(client_flag=0)
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO acct VALUES (%s,%s,%s,%s,%s,%s,%s)",
                        [_row(rng, i) for i in range(1, 121)])  # fmt: skip
    conn.commit()
    conn.close()
    mapping = parse_mapping(MAPPING, name="filters")
    first = sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True,
                 server_id=next(_ids))  # fmt: skip
    assert 0 < first.loaded[0].rows < 120
    _compare(binlog_db, redis_client)
    for seed in (1, 2, 3):
        _write(binlog_db, random.Random(seed), 150, 120 + 150 * (seed - 1))
        sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
        report = verify(mapping, source=binlog_db.url, target=redis_url)
        assert report.exit_code == 0, report.as_dict()
        _compare(binlog_db, redis_client)


def test_writes_during_the_online_load_move_rows_in_and_out(
    binlog_db, redis_url: str, redis_client
) -> None:  # type: ignore[no-untyped-def]
    """The online first load reads chunks of 20 rows while writers move rows across the
    filter: the chunks (filtered in SQL) and the log (filtered in Python) meet exactly."""
    binlog_db.run(SCHEMA)
    rng = random.Random(11)
    conn = binlog_db.connect(client_flag=0)
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO acct VALUES (%s,%s,%s,%s,%s,%s,%s)",
                        [_row(rng, i) for i in range(1, 401)])  # fmt: skip
    conn.commit()
    conn.close()
    mapping = parse_mapping(MAPPING, name="filters-online")

    def run(stop: threading.Event, status: Any) -> None:
        sync(mapping, source=binlog_db.url, target=redis_url, stop=stop, chunk_rows=20,
             server_id=next(_ids), on_status=status)  # fmt: skip

    writes = [functools.partial(_write, binlog_db, random.Random(s), 100, 400 + 100 * s)
              for s in (1, 2)]  # fmt: skip
    while_syncing(run, writes)
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    report = verify(mapping, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()
    _compare(binlog_db, redis_client)
