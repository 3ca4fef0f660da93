"""Field names, formats and lower() under sync (docs/mapping.md#fields, #formats): random
writes change spellings, times and flags; after ``--until-caught-up`` ``verify`` finds 0
differences, and an independent check (the test's own arithmetic against MySQL's rows)
agrees."""

from __future__ import annotations

import calendar
import json
import random

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from tests.services import MySQLDatabase

SCHEMA = """
CREATE TABLE login (
  id INT PRIMARY KEY, name VARCHAR(20) COLLATE utf8mb4_general_ci, login_times INT,
  joined DATETIME, active TINYINT(1), UNIQUE KEY (name)
);
"""
MAPPING = """
version: 1
tables:
  login:
    fields: {login_times: times}
    formats: {joined: epoch_ms, active: boolean}
    unique:
      - columns: [name]
        key: "login:{lower(name)}:id"
"""
NAMES = ["ken", "Ken", "KEN", "bob", "Bob", "ann", "Ann", "zoe"]
_ids = iter(range(8300, 8400))


def _write(db: MySQLDatabase, rng: random.Random, steps: int) -> None:
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            for _ in range(steps):
                i = rng.randint(1, 40)
                roll = rng.random()
                if roll < 0.25:
                    cur.execute("INSERT IGNORE INTO login VALUES (%s, NULL, %s, %s, %s)",
                                (i, rng.randint(0, 9), f"2024-0{rng.randint(1, 9)}-01 10:00:00",
                                 rng.randint(0, 1)))  # fmt: skip
                elif roll < 0.35:
                    cur.execute("DELETE FROM login WHERE id = %s", (i,))
                elif roll < 0.7:  # a unique name: IGNORE skips a clash ('Ken' = 'ken')
                    cur.execute("UPDATE IGNORE login SET name = %s WHERE id = %s",
                                (rng.choice([*NAMES, f"n{i}"]), i))  # fmt: skip
                else:
                    joined = f"2023-12-{rng.randint(10, 31)} 23:59:59"
                    sql = "UPDATE login SET login_times = login_times + 1, active = %s, joined = %s"
                    cur.execute(sql + " WHERE id = %s", (rng.randint(0, 1), joined, i))
                conn.commit()
    finally:
        conn.close()


def _compare(db: MySQLDatabase, client) -> None:  # type: ignore[no-untyped-def]
    rows = db.query("SELECT id, name, login_times, joined, active FROM login")
    for id_, name, times, joined, active in rows:
        h = client.hgetall(f"login:{id_}")
        want = {}
        if name is not None:
            want[b"name"] = name.encode()
            assert client.get(f"login:{name.lower()}:id") == str(id_).encode()
        if times is not None:
            want[b"times"] = str(times).encode()
        if joined is not None:
            want[b"joined"] = str(calendar.timegm(joined.timetuple()) * 1000).encode()
        if active is not None:
            want[b"active"] = b"true" if active else b"false"
        assert h == want, (id_, h, want)
    names = {n.lower() for _, n, *_ in rows if n is not None}
    held = {k.split(b":")[1].decode() for k in client.scan_iter(match="login:*:id")}
    assert held == names


def test_spellings_times_and_flags_under_sync(binlog_db, redis_url: str, redis_client) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    binlog_db.run("INSERT INTO login VALUES (1, 'Ken', 5, '2020-01-02 03:04:05', 1),"
                  " (2, 'bob', 0, NULL, 0)")  # fmt: skip
    mapping = parse_mapping(MAPPING, name="transforms")
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    _compare(binlog_db, redis_client)
    for seed in (1, 2):
        _write(binlog_db, random.Random(seed), 200)
        sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
        report = verify(mapping, source=binlog_db.url, target=redis_url)
        assert report.exit_code == 0, json.dumps(report.as_dict(), default=str)[:3000]
        _compare(binlog_db, redis_client)
