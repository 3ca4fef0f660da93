"""Issue 16 item 2 for sync: a composite whose one varying value holds the separator
(``user:group:{gid}:{member}`` with an integer ``gid``) is written by the first load (online,
in keyset chunks, or in one consistent snapshot) and by the binary-log changes alike, and
verify finds Redis equal to MySQL."""

from __future__ import annotations

import pytest
import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping

SCHEMA = """
CREATE TABLE user_group (gid INT NOT NULL, member VARCHAR(40) NOT NULL, role VARCHAR(20),
                         PRIMARY KEY (gid, member), KEY (role));
INSERT INTO user_group VALUES (1, 'bob:smith', 'admin');
"""
MAPPING = """
version: 1
tables:
  user_group:
    key: "user:group:{gid}:{member}"
    indexes: [role]
"""


@pytest.mark.parametrize("online", [True, False], ids=["online", "consistent"])
def test_sync_writes_a_value_with_the_separator(binlog_db, redis_url: str, online: bool) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA + "INSERT INTO user_group VALUES (4, 'alice', 'user'), (3, 'zed:x', 'x');")
    m = parse_mapping(MAPPING, name="sepsync")
    first = sync(m, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=8811,
                 online_load=online, chunk_rows=1)  # fmt: skip
    assert sum(t.rows for t in first.loaded) == 3 and first.online_load == online
    r = redis.Redis.from_url(redis_url)
    assert r.hgetall("user:group:1:bob:smith") == {b"role": b"admin"}
    binlog_db.run(
        "INSERT INTO user_group VALUES (2, 'carol:ann:jones', 'user');"
        "UPDATE user_group SET role = 'owner' WHERE gid = 1;"
    )
    again = sync(m, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=8812)
    assert again.transactions > 0
    assert r.hgetall("user:group:2:carol:ann:jones") == {b"role": b"user"}
    assert r.smembers("user_group:indices:role:owner") == {b"1:bob:smith"}
    assert r.smembers("user_group:indices:role:user") == {b"4:alice", b"2:carol:ann:jones"}
    assert verify(m, source=binlog_db.url, target=redis_url).exit_code == 0
    r.close()
