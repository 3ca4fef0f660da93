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
