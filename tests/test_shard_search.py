"""verify's search-index check over a sharded source (docs/sharding.md#verify, verify/search.py):
the documents and TAG counts it expects are every shard's rows less those ``migrate`` leaves out
as collisions (a later shard's row whose primary key or unique value an earlier shard holds),
so collisions make no search difference of their own, and a document missing from Redis still
does. Shards as databases of their own on the engine's server; the target a server with the
query engine (tests/modules_server.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from migrator.commands import migrate
from migrator.commands.shards import COLLIDING
from migrator.commands.verify import verify
from tests.services import MySQLDatabase, create_database, drop_database, new_database_name

SCHEMA = """
CREATE TABLE customer (id INT PRIMARY KEY, email VARCHAR(60), region VARCHAR(10),
                       UNIQUE KEY (email), KEY (region));
"""
MAPPING = """version: 1
sources:
{sources}
tables:
  customer: {{unique: [email], indexes: [region], search: {{name: customers}}}}
"""
DOCUMENTS, TAGS = "search index documents", "search index tag count"


@pytest.fixture
def two(mysql_server_url: str) -> Iterator[dict[str, MySQLDatabase]]:
    dbs = {n: create_database(mysql_server_url, new_database_name()) for n in ("east", "west")}
    try:
        for db in dbs.values():
            db.run(SCHEMA)
        yield dbs
    finally:
        for db in dbs.values():
            drop_database(mysql_server_url, db.name)


def test_collisions_make_no_search_difference_and_a_missing_document_does(
    two: dict[str, MySQLDatabase], tmp_path: Path, modules_redis_url: str
) -> None:
    east, west = two["east"], two["west"]
    east.run("INSERT INTO customer VALUES (1, 'a@x', 'eu'), (2, 'b@x', 'us'), (3, 'c@x', 'eu')")
    # west's 2 collides by its primary key, 103 by east's email a@x (a region of another case)
    west.run(
        "INSERT INTO customer VALUES (2, 'b2@x', 'ap'), (103, 'a@x', 'EU'), "
        "(101, 'd@x', 'us'), (102, 'e@x', 'ap'), (104, 'f@x', NULL), (105, 'g@x', 'Eu')"
    )
    # (the TAG ignores case: east's eu and west's Eu are one value, three documents)
    lines = "\n".join(f'  - {{name: {n}, url: "{db.url}"}}' for n, db in two.items())
    f = tmp_path / "shop.yaml"
    f.write_text(MAPPING.format(sources=lines) + f"target: {modules_redis_url}\n")
    assert migrate(f).exit_code == 1  # the two collisions, left out
    found = verify(f)
    (check,) = found.tables
    assert check.counts[COLLIDING] == 2, check.counts
    assert not check.counts[DOCUMENTS] and not check.counts[TAGS], check.examples[TAGS]
    assert set(check.counts) == {COLLIDING}, check.counts
    client = redis.Redis.from_url(modules_redis_url)
    client.delete(b"customer:102")  # a document gone by hand: its email and region one fewer
    check = verify(f).tables[0]
    assert check.counts[DOCUMENTS] == 1 and check.counts[TAGS] == 2, check.examples[TAGS]
    (docs,) = check.examples[DOCUMENTS]
    assert (docs.mysql, docs.redis) == ("7", "6")
    tags = {(d.field, d.mysql, d.redis) for d in check.examples[TAGS]}
    assert tags == {("email=e@x", "1", "0"), ("region=ap", "1", "0")}


NESTED_SCHEMA = """
CREATE TABLE book (id INT PRIMARY KEY, name VARCHAR(40));
CREATE TABLE tag (id INT PRIMARY KEY, book_id INT NOT NULL,
                  tagname VARCHAR(20) COLLATE utf8mb4_general_ci,
                  FOREIGN KEY (book_id) REFERENCES book (id));
"""
NESTED = """version: 1
sources:
{sources}
tables:
  book: {{as: json, search: {{name: books, tag: [tags.tagname]}}}}
  tag: {{as: none, columns: [book_id, tagname], nest: {{in: book, as: tags}}}}
"""


def test_nested_tag_counts_are_every_shards(
    two: dict[str, MySQLDatabase], tmp_path: Path, modules_redis_url: str
) -> None:
    """A TAG of a nested child's column counts the documents of every shard holding a child
    with the value (was: the first shard's only, a difference for every value on another)."""
    east, west = two["east"], two["west"]
    for db in (east, west):
        db.run("DROP TABLE customer")
        db.run(NESTED_SCHEMA)
    east.run("INSERT INTO book VALUES (1, 'a'), (2, 'b'); "
             "INSERT INTO tag VALUES (1, 1, 'sql'), (2, 1, 'db'), (3, 2, 'SQL')")  # fmt: skip
    west.run("INSERT INTO book VALUES (101, 'c'), (102, 'd'); "
             "INSERT INTO tag VALUES (101, 101, 'Sql'), (102, 102, 'go')")  # fmt: skip
    lines = "\n".join(f'  - {{name: {n}, url: "{db.url}"}}' for n, db in two.items())
    f = tmp_path / "books.yaml"
    f.write_text(NESTED.format(sources=lines) + f"target: {modules_redis_url}\n")
    assert migrate(f).exit_code == 0
    found = verify(f)
    assert found.exit_code == 0, [(t.table, dict(t.counts), t.examples) for t in found.tables]
    client = redis.Redis.from_url(modules_redis_url)
    client.delete(b"book:102")  # west's only 'go': one document fewer than MySQL's
    check = {t.table: t for t in verify(f).tables}["book"]
    tags = {(d.field, d.mysql, d.redis) for d in check.examples[TAGS]}
    assert tags == {("tags_tagname=go", "1", "0")}, tags
