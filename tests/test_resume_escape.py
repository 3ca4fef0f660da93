"""``--resume`` finds escaped keys (issue 27 item 4): under ``escape: backslash`` the key a
checkpoint vouches for is made as the load made it, escaped; before, the check built it
unescaped, warned "the target lacks that key" and loaded the table again."""

from __future__ import annotations

import json
from pathlib import Path

import redis

from migrator.commands.migrate import migrate
from migrator.commands.verify import verify
from tests.services import MySQLDatabase

MAPPING = """
version: 1
options:
  escape: backslash
tables:
  pair: {}
  other: {}
"""
CHECKPOINT = "migrator:pairs:checkpoint"


def test_resume_trusts_the_escaped_keys_it_vouches_for(
    mysql_db: MySQLDatabase, tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    mysql_db.run(
        "CREATE TABLE pair (a VARCHAR(20), b VARCHAR(20), n INT, PRIMARY KEY (a, b));"
        "INSERT INTO pair VALUES ('x:1', 'y', 1), ('x', '1:y', 2), ('z:z', 'w\\\\v', 3);"
        "CREATE TABLE other (id INT PRIMARY KEY, name VARCHAR(20));"
        "INSERT INTO other VALUES (1, 'one'), (2, 'two');"
    )
    path = tmp_path / "pairs.yaml"
    path.write_text(MAPPING)
    migrate(path, source=mysql_db.url, target=redis_url, workers=1)
    assert redis_client.exists(b"pair:z\\:z:w\\\\v")  # the last row's key, escaped
    # a run stopped in its second table: 'pair' done, 'other' after its first row
    raw = json.loads(redis_client.hget(CHECKPOINT, "other") or b"{}")
    redis_client.hset(CHECKPOINT, "other", json.dumps({**raw, "done": False, "rows": 1,
                      "after": [b"1".hex()]}))  # fmt: skip
    report = migrate(path, source=mysql_db.url, target=redis_url, workers=1, resume=True)
    assert not report.recoveries, report.recoveries
    statuses = {t.table: (t.status, t.resumed_from) for t in report.tables}
    assert statuses == {"pair": ("done earlier", 3), "other": ("done", 1)}
    assert verify(path, source=mysql_db.url, target=redis_url).ok
