"""README.md's "Which rows, which fields, which shapes" example, as printed there, on both
engines and a server with JSON and search (tests/modules_server.py): validate, migrate, the
values and TTLs it promises, the tags nested in their books, a search by text and by a nested
tag, then verify 0."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import redis
from redis.commands.search.query import Query

from migrator.commands import migrate
from migrator.commands.validate import validate
from migrator.commands.verify import verify
from tests.services import MySQLDatabase

README = Path(__file__).resolve().parent.parent / "README.md"
SCHEMA = """
CREATE TABLE session (
  id INT PRIMARY KEY, status VARCHAR(10), created DATETIME, login_times INT,
  is_admin TINYINT(1), ends_at DATETIME NULL
);
CREATE TABLE book (id INT PRIMARY KEY, name VARCHAR(50), author VARCHAR(50), FULLTEXT (name));
CREATE TABLE tag (
  tagname VARCHAR(20), book_id INT, PRIMARY KEY (tagname, book_id),
  FOREIGN KEY (book_id) REFERENCES book (id) ON DELETE CASCADE
);
INSERT INTO session VALUES
  (1, 'active', '2026-02-01 00:00:00', 3, 1, UTC_TIMESTAMP() + INTERVAL 1 HOUR),
  (2, 'closed', '2026-02-01 00:00:00', 1, 0, NULL),
  (3, 'active', '2025-12-31 00:00:00', 1, 0, NULL),
  (4, 'active', '2026-03-01 00:00:00', 2, 0, UTC_TIMESTAMP() - INTERVAL 2 DAY);
INSERT INTO book VALUES (1, 'Programming Ruby', 'Dave Thomas'), (2, 'Erlang', 'Joe Armstrong');
INSERT INTO tag VALUES ('ruby', 1), ('web', 1), ('erlang', 2), ('web', 2);
"""


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"```yaml\n(tables:\n  session:\n.*?)```", text, re.S)
    assert found, "README.md lost its example"
    return "version: 1\n" + found.group(1)


@pytest.mark.smoke
def test_the_readme_example_does_what_it_says(
    mysql_db: MySQLDatabase, modules_redis_url: str, tmp_path: Path
) -> None:
    mysql_db.run(SCHEMA)
    path = tmp_path / "example.yaml"
    path.write_text(_example())
    checked = validate(path, source=mysql_db.url)
    assert not checked.problems, checked.problems
    assert migrate(path, source=mysql_db.url, target=modules_redis_url).exit_code == 0
    r = redis.Redis.from_url(modules_redis_url)
    try:
        one = r.hgetall("session:1")
        assert one[b"login:times"] == b"3" and one[b"is_admin"] == b"true", one
        assert one[b"created"] == b"%d" % (1769904000 * 1000), one  # epoch_ms, UTC
        # a day after ends_at (an hour ahead)
        assert abs(r.ttl("session:1") - (3600 + 86400)) < 60, r.ttl("session:1")
        # filtered out (status, created) or past its moment (ends_at + 1 day < now)
        assert not any(r.exists(f"session:{i}") for i in (2, 3, 4))
        assert r.json().get("book:1") == {
            "name": "Programming Ruby", "author": "Dave Thomas",
            "tags": [{"book_id": 1, "tagname": "ruby"}, {"book_id": 1, "tagname": "web"}],
        }  # fmt: skip
        assert not r.exists("tag:ruby:1")  # as: none: in its book's document only
        deadline = time.monotonic() + 30
        while int(r.ft("books").info()["indexing"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        hits = r.ft("books").search(Query("@name:erlang")).docs
        assert [d.id for d in hits] == ["book:2"], hits
        tagged = r.ft("books").search(Query("@tags_tagname:{web}")).docs
        assert sorted(d.id for d in tagged) == ["book:1", "book:2"], tagged
    finally:
        r.close()
    assert verify(path, source=mysql_db.url, target=modules_redis_url).exit_code == 0
