"""Cascades on DECIMAL, temporal, FLOAT and DOUBLE keys (issue 36 item 1): where both sides of
the foreign key have one type, each value has one text, so ``sync`` follows the rule from the
parent's change (it refused them as "compared by value") — but for a FLOAT's or DOUBLE's zero,
which Oracle MySQL keeps as ``-0`` too (printed '-0', equal to 0): a child holding either is
found (plan/cascade.py ``Cascades._found``). Random writes on MariaDB (whose log lacks the
cascaded rows) and MySQL 9.7 with ``innodb_native_foreign_keys=ON``; each run ends with
``verify`` 0 and Redis equal to a fresh ``migrate``."""

from __future__ import annotations

import random
from typing import Any

import pytest
import redis

from migrator.commands.session import opened
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.plan.cascade import followable
from migrator.plan.planner import TablePlan
from tests.services import create_database, drop_database, new_database_name
from tests.sync.test_cascade_images import equals_a_fresh_migrate
from tests.sync.test_cascade_keys import _logged
from tests.sync.test_cascade_keys import innodb_fk_mysql as innodb_fk_mysql

_ids = iter(range(8800, 8850))
SCHEMA = """
CREATE TABLE price (code DECIMAL(6,2) PRIMARY KEY, day DATE NOT NULL, at DATETIME(3) NOT NULL,
  UNIQUE KEY (day), UNIQUE KEY (at));
CREATE TABLE quote (id INT PRIMARY KEY, code DECIMAL(6,2) NULL, note VARCHAR(10),
  FOREIGN KEY (code) REFERENCES price (code) ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE event (id INT PRIMARY KEY, day DATE NULL, at DATETIME(3) NULL,
  FOREIGN KEY (day) REFERENCES price (day) ON DELETE SET NULL ON UPDATE CASCADE,
  FOREIGN KEY (at) REFERENCES price (at) ON DELETE CASCADE ON UPDATE CASCADE);
"""
MAPPING = """
version: 1
tables:
  price: {}
  quote:
    indexes: [code]
  event:
    formats: {at: epoch_ms}
"""


def _value(rnd: random.Random, i: int) -> tuple[str, str, str]:
    return (
        f"{i}.{rnd.choice(['00', '50', '05'])}",
        f"DATE '2020-01-01' + INTERVAL {i} DAY",
        f"TIMESTAMP '2021-06-01 00:00:00' + INTERVAL {i * 1000 + rnd.randint(0, 999)} MICROSECOND",
    )


def _writes(db: Any, seed: int, n: int) -> None:
    rnd = random.Random(seed)
    prices = [str(c) for (c,) in db.query("SELECT code FROM price")]
    for step in range(seed * 1000, seed * 1000 + n):
        pick = rnd.random()
        if not prices or pick < 0.3:
            code, day, at = _value(rnd, step * 3 + 1)
            db.run(f"INSERT INTO price VALUES ({code}, {day}, {at})")
            prices.append(code)
        elif pick < 0.6:
            code = rnd.choice(prices)
            db.run(
                f"INSERT INTO quote VALUES ({step}, {code}, 'q{step}');"
                f"INSERT INTO event SELECT {step}, day, at FROM price WHERE code = {code}"
            )
        elif pick < 0.8:
            old = rnd.choice(prices)
            new, day, at = _value(rnd, step * 3 + 2)
            db.run(f"UPDATE price SET code = {new}, day = {day}, at = {at} WHERE code = {old}")
            prices[prices.index(old)] = new
        else:
            code = rnd.choice(prices)
            db.run(f"DELETE FROM price WHERE code = {code}")
            prices.remove(code)


FLOATS = """
CREATE TABLE gauge (x DOUBLE PRIMARY KEY, f FLOAT NOT NULL, UNIQUE KEY (f));
CREATE TABLE reading (id INT PRIMARY KEY, x DOUBLE NULL, f FLOAT NULL, note VARCHAR(10),
  FOREIGN KEY (x) REFERENCES gauge (x) ON DELETE CASCADE ON UPDATE CASCADE,
  FOREIGN KEY (f) REFERENCES gauge (f) ON DELETE SET NULL ON UPDATE CASCADE);
"""
FLOAT_MAPPING = """
  gauge: {}
  reading:
    indexes: [x]
"""
#: the gauges' values: zero in both spellings, and others; MySQL keeps -0e0 as -0
_ZEROS = ("0", "-0e0")


def _float_writes(db: Any, seed: int, n: int) -> None:
    """Children referencing a zero parent as 0 and as -0, zero parents deleted, their key
    changed to another value, to the other spelling of zero (bytes only) and back."""
    rnd = random.Random(seed)
    held = {str(x) for (x,) in db.query("SELECT x FROM gauge")}
    for step in range(seed * 1000, seed * 1000 + n):
        pick = rnd.random()
        zero = "0" in held or "-0" in held
        if not zero and pick < 0.5:
            db.run(f"INSERT INTO gauge VALUES ({rnd.choice(_ZEROS)}, {rnd.choice(_ZEROS)})")
            held.add("0")
        elif zero and pick < 0.7:
            value = rnd.choice(_ZEROS)
            db.run(f"INSERT INTO reading VALUES ({step}, {value}, {rnd.choice(_ZEROS)}, 'r')")
        elif zero and pick < 0.8:  # the key's bytes only: -0 for 0 or back
            db.run(f"UPDATE gauge SET x = {rnd.choice(_ZEROS)}, f = {rnd.choice(_ZEROS)} "
                   "WHERE x = 0")  # fmt: skip
        elif zero and pick < 0.9:
            other = f"{step}.5"
            db.run(f"UPDATE gauge SET x = {other}, f = {other} WHERE x = 0")
            held = (held - {"0", "-0"}) | {other}
        elif zero:
            db.run("DELETE FROM gauge WHERE x = 0")
            held -= {"0", "-0"}


def _follows(db: Any, redis_url: str, client: redis.Redis) -> None:
    db.run(SCHEMA + FLOATS)
    m = parse_mapping(MAPPING + FLOAT_MAPPING, name="valuekeys")
    with opened(m, db.url) as (_, resolved):
        rules, refused = followable({r.name: TablePlan(r) for r in resolved})
    assert len(rules) == 5 and refused == [], refused  # code, day, at, x, f: none refused
    assert [r.zeros for r in rules if r.child == "reading"] == [(True,), (True,)]
    sid = next(_ids)
    sync(m, source=db.url, target=redis_url, until_caught_up=True, server_id=sid)
    for batch in range(3):
        _writes(db, batch, 40)
        _float_writes(db, batch, 40)
        done = sync(m, source=db.url, target=redis_url, until_caught_up=True, server_id=sid)
        assert done.stopped == "caught up"
    equals_a_fresh_migrate(db, m, redis_url, client)


@pytest.mark.engine("mariadb", why="MariaDB's log lacks the cascaded rows; MySQL: below")
def test_decimal_and_temporal_keys_follow_their_cascades(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, redis_client: redis.Redis
) -> None:
    assert not _logged(binlog_db)
    _follows(binlog_db, redis_url, redis_client)


def test_decimal_and_temporal_keys_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis
) -> None:
    db = create_database(innodb_fk_mysql.url, new_database_name())
    try:
        assert not _logged(db)
        _follows(db, redis_url, redis_client)
    finally:
        drop_database(innodb_fk_mysql.url, db.name)
