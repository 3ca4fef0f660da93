"""The counter's one rule (docs/mapping.md#counter): the next ``INCR`` must never hand out a
primary key a row has, so a counter is an integer at least ``MAX(pk)`` (0 for an empty
table). ``migrate`` writes ``MAX(pk)``, ``verify`` accepts any integer at least that and
``--fix`` sets ``MAX(pk)`` where the rule does not hold (sync's side: tests/sync/
test_hard_cases.py)."""

from __future__ import annotations

import pytest
import redis

from migrator.commands import migrate, verify
from migrator.mapping.loader import parse_mapping
from migrator.plan.finish import counter_holds
from migrator.verify import report as vr
from tests.services import MySQLDatabase

# outcome decided by migrate's worker count: again in CI with MIGRATOR_WORKERS=4
pytestmark = pytest.mark.workers

SCHEMA = """
CREATE TABLE item (id INT PRIMARY KEY, name VARCHAR(20));
INSERT INTO item VALUES (1, 'a'), (2, 'b'), (7, 'c');
CREATE TABLE empty_t (id INT PRIMARY KEY);
"""
MAPPING = "version: 1\ntables:\n  item: {}\n  empty_t: {}\n"


@pytest.mark.parametrize(
    "value, max_pk, holds",
    [(b"7", b"7", True), (b"99", b"7", True), (b"6", b"7", False), (None, b"0", False),
     (b"0", b"0", True), (b"-3", b"-5", True), (b"-6", b"-5", False), (b"x", b"0", False),
     (b" 9", b"7", False), (b"7.0", b"7", False), (b"", b"0", False)],
)  # fmt: skip
def test_counter_holds(value: bytes | None, max_pk: bytes, holds: bool) -> None:
    assert counter_holds(value, max_pk) is holds


@pytest.fixture
def loaded(mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis) -> redis.Redis:
    mysql_db.run(SCHEMA)
    report = migrate(parse_mapping(MAPPING), source=mysql_db.url, target=redis_url)
    assert report.exit_code == 0
    assert redis_client.get("item:id") == b"7"  # migrate writes MAX(pk)
    assert redis_client.get("empty_t:id") == b"0"  # and 0 for an empty table
    return redis_client


def _verify(db: MySQLDatabase, redis_url: str, **kw: object) -> vr.VerifyReport:
    return verify(parse_mapping(MAPPING), source=db.url, target=redis_url, **kw)  # type: ignore[arg-type]


def test_a_counter_above_max_is_right(
    loaded: redis.Redis, mysql_db: MySQLDatabase, redis_url: str
) -> None:
    loaded.incr("item:id", 5)  # ids handed out by the application: 8..12
    loaded.set("empty_t:id", "4")
    report = _verify(mysql_db, redis_url)
    assert report.exit_code == 0, report.as_dict()


def test_highest_row_deleted_still_verifies(
    loaded: redis.Redis, mysql_db: MySQLDatabase, redis_url: str
) -> None:
    mysql_db.run("DELETE FROM item WHERE id = 7")  # MAX(pk) is 2 now; the counter stays 7
    loaded.delete("item:7")  # as sync removes it
    report = _verify(mysql_db, redis_url)
    assert report.exit_code == 0, report.as_dict()


@pytest.mark.parametrize("value", ["6", "-1", "seven", None])
def test_a_counter_below_max_or_not_a_number_is_wrong_and_fix_sets_max(
    loaded: redis.Redis, mysql_db: MySQLDatabase, redis_url: str, value: str | None
) -> None:
    if value is None:
        loaded.delete("item:id")
    else:
        loaded.set("item:id", value)
    report = _verify(mysql_db, redis_url)
    check = next(t for t in report.tables if t.table == "item")
    assert report.exit_code == 1 and check.counts[vr.WRONG_COUNTER] == 1, report.as_dict()
    (d,) = check.examples[vr.WRONG_COUNTER]
    assert d.key == "item:id" and d.mysql == ">= 7"
    fixed = _verify(mysql_db, redis_url, fix=True)
    assert fixed.exit_code == 0, fixed.as_dict()
    assert loaded.get("item:id") == b"7"
