"""A ``unique:`` MySQL does not enforce, under ``sync`` (issue 27 item 5): deleting the row an
entry names, or changing its value, keeps the entry while another row still holds the value
(it then names that row), and removes it once none does (before: the entry went with the
first row deleted)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.verify import report as vr
from tests.binlog_server import missing
from tests.faults import redis_server_problem

pytestmark = pytest.mark.skipif(
    redis_server_problem() is not None or missing() is not None,
    reason=f"{redis_server_problem() or missing()}",
)

_ids = iter(range(9600, 9700))
MAPPING = """
version: 1
tables:
  acct:
    unique:
      - columns: [email]
      - columns: [login]
        key: "login:{login}"
"""


def _caught_up(db: Any, url: str) -> None:
    m = parse_mapping(MAPPING, name="acct")
    report = sync(m, source=db.url, target=url, until_caught_up=True, server_id=next(_ids))
    assert report.stopped == "caught up"


def test_an_entry_stays_while_another_row_holds_its_value(binlog_db: Any, redis_url: str) -> None:
    binlog_db.run(
        "CREATE TABLE acct (id INT PRIMARY KEY, email VARCHAR(40), login VARCHAR(20));"
        "INSERT INTO acct VALUES (1, 'a@x', 'l1'), (2, 'a@x', 'l2'), (3, 'a@x', 'l3'),"
        " (4, 'b@x', 'lb'), (5, 'c@x', 'lb');"
    )
    client = redis.Redis.from_url(redis_url)
    _caught_up(binlog_db, redis_url)
    named = client.hget("acct:uniques:email", "a@x")
    assert named in (b"1", b"2", b"3")
    login = client.get("login:lb")
    assert login in (b"4", b"5")
    binlog_db.run(f"DELETE FROM acct WHERE id = {int(named)}")  # the row the entry names
    binlog_db.run(f"UPDATE acct SET login = 'lc' WHERE id = {int(login)}")  # the one named
    _caught_up(binlog_db, redis_url)
    assert client.hget("acct:uniques:email", "a@x") in {b"1", b"2", b"3"} - {named}
    assert client.get("login:lb") == ({b"4", b"5"} - {login}).pop()
    assert client.get("login:lc") == login
    binlog_db.run("DELETE FROM acct WHERE email = 'a@x' OR login = 'lb'")
    _caught_up(binlog_db, redis_url)
    assert not client.hexists("acct:uniques:email", "a@x") and not client.exists("login:lb")
    report = verify(parse_mapping(MAPPING, name="acct"), source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()
    assert vr.SHARED_UNIQUE  # (the kind verify counts while rows share a value)


FILTERED = """
version: 1
tables:
  pass:
    where: "active = 1"
    expire: {column: until}
    unique:
      - columns: [login]
        key: "pass:login:{login}"
"""


def test_entries_follow_the_where_and_keep_their_holders_ttl(
    binlog_db: Any, redis_url: str
) -> None:
    """A row that leaves the where: kept its entry, and any UPDATE of an expire: table's row
    rewrote its entry without a TTL (stale keys and keys for ever under sync)."""
    binlog_db.run(
        "CREATE TABLE pass (id INT PRIMARY KEY, login VARCHAR(20), active INT,"
        " until DATETIME, note VARCHAR(10));"
        "INSERT INTO pass VALUES (1, 'l1', 1, '2999-01-01 00:00:00', ''),"
        " (2, 'l1', 1, '2998-01-01 00:00:00', ''), (3, 'l3', 1, '2997-01-01 00:00:00', '');"
    )
    client = redis.Redis.from_url(redis_url)
    m = parse_mapping(FILTERED, name="pass")

    def caught_up() -> None:
        report = sync(m, source=binlog_db.url, target=redis_url, until_caught_up=True,
                      server_id=next(_ids))  # fmt: skip
        assert report.stopped == "caught up"

    caught_up()
    named = client.get("pass:login:l1")
    assert named in (b"1", b"2") and client.pttl("pass:login:l1") > 0
    binlog_db.run(f"UPDATE pass SET active = 0 WHERE id = {int(named)}")  # leaves the where:
    binlog_db.run("UPDATE pass SET note = 'x'")  # every row, the entries' values unchanged
    caught_up()
    other = ({b"1", b"2"} - {named}).pop()
    assert client.get("pass:login:l1") == other
    for entry, row in (("pass:login:l1", b"pass:" + other), ("pass:login:l3", b"pass:3")):
        assert abs(client.pttl(entry) - client.pttl(row)) < 1000 and client.pttl(entry) > 0
    binlog_db.run(f"UPDATE pass SET active = 0 WHERE id = {int(other)}")
    caught_up()
    assert not client.exists("pass:login:l1")
    report = verify(m, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0, [(t.counts, t.examples) for t in report.tables]
