"""sync beside a search index (issue 29 item 3): the server indexes the row hashes as sync
writes them, so after random inserts, updates and deletes FT.SEARCH by a TAG and a NUMERIC
range still returns what MySQL's query returns, and verify (index counts included) is 0.
With ``index_sets: false`` the SET indexes are neither loaded nor kept."""

from __future__ import annotations

import functools
import random
import threading
from typing import Any

import pytest
import redis
from redis.commands.search.query import Query

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.store.search_index import current
from tests.sync.helpers import while_syncing
from tests.test_search import AUTHORS, LANGS, SCHEMA, _agrees, _insert, _mapping, _rows

_ids = iter(range(12100, 12200))


def _write(db: Any, seed: int, steps: int) -> None:
    """Random transactions on book: inserts of new ids, updates of lang/author/year, deletes."""
    rnd = random.Random(seed)
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            for i in range(steps):
                what = rnd.random()
                if what < 0.3:
                    row = _rows(seed * 1000 + i, 1, start=10_000 + seed * 1000 + i)[0]
                    cur.execute("INSERT INTO book VALUES (%s, %s, %s, %s, %s, %s, %s)", row)
                elif what < 0.8:
                    cur.execute(
                        "UPDATE book SET lang = %s, author = %s, year = %s WHERE id = %s",
                        (rnd.choice(LANGS), rnd.choice(AUTHORS), rnd.randint(1980, 2020),
                         rnd.randint(1, 200)),
                    )  # fmt: skip
                else:
                    cur.execute("DELETE FROM book WHERE id = %s", (rnd.randint(1, 200),))
                conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("index_sets", [True, False])
def test_random_writes_while_sync_runs_keep_the_index_exact(
    binlog_db, modules_redis_url: str, index_sets: bool
) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    _insert(binlog_db, _rows(5, 200))
    mapping = _mapping("" if index_sets else ", index_sets: false")

    def run(stop: threading.Event, status: Any) -> None:
        sync(mapping, source=binlog_db.url, target=modules_redis_url, stop=stop,
             server_id=next(_ids), on_status=status)  # fmt: skip

    while_syncing(run, [functools.partial(_write, binlog_db, s, 150) for s in (1, 2)])
    sync(mapping, source=binlog_db.url, target=modules_redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    client = redis.Redis.from_url(modules_redis_url, decode_responses=True)
    try:
        assert current(client, "books") is not None
        _agrees(binlog_db, client)
        sets = list(client.scan_iter("book:indices:*"))
        assert bool(sets) == index_sets
    finally:
        client.close()
    report = verify(mapping, source=binlog_db.url, target=modules_redis_url)
    assert report.exit_code == 0, report.as_dict()


#: moves, renames, a cascade and new rows for docs/mapping.md's nested book-and-tag example
NESTED_WRITES = [
    "INSERT INTO book VALUES (4, 'Web Erlang', 'Ann Ek')",
    "INSERT INTO tag VALUES ('erlang', 4), ('web', 4)",
    "UPDATE tag SET book_id = 3 WHERE tagname = 'web' AND book_id = 2",  # to another book
    "UPDATE tag SET tagname = 'RAILS' WHERE tagname = 'ruby' AND book_id = 2",  # renamed
    "DELETE FROM book WHERE id = 1",  # ON DELETE CASCADE takes its ruby tag with it
    "UPDATE book SET name = 'Erlang, 2nd ed.' WHERE id = 3",
]


def test_sync_keeps_the_documented_nested_example_searchable(
    binlog_db, modules_redis_url: str
) -> None:  # type: ignore[no-untyped-def]
    """docs/mapping.md's books with their tags nested and searchable by tag, followed by
    sync through a tag moved to another book, a tag renamed, a book deleted with its tags
    (a cascade), new rows: FT.SEARCH by each tag, and by a tag and an id range, returns the
    books MySQL's join returns, and verify is 0."""
    from migrator.mapping.loader import parse_mapping
    from tests.test_search_nested import REPO, _block, _example

    binlog_db.run((REPO / "samples" / "book_tag.sql").read_text(encoding="utf-8"))
    m = parse_mapping(_block(_example(), "yaml"), name="booktag")
    sync(m, source=binlog_db.url, target=modules_redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    for statement in NESTED_WRITES:
        binlog_db.run(statement)
    report = sync(m, source=binlog_db.url, target=modules_redis_url, until_caught_up=True,
                  server_id=next(_ids))  # fmt: skip
    assert report.transactions == len(NESTED_WRITES)
    r = redis.Redis.from_url(modules_redis_url, decode_responses=True)
    try:
        join = "SELECT DISTINCT b.id FROM book b JOIN tag t ON t.book_id = b.id WHERE "
        for tag in ("ruby", "rails", "web", "erlang"):  # rails: RAILS, the column is _ci
            found = {d.id for d in r.ft("books").search(Query(f"@tags_tagname:{{{tag}}}")).docs}
            want = {f"book:{row[0]}" for row in binlog_db.query(join + "t.tagname = %s", (tag,))}
            assert found == want, tag
        both = r.ft("books").search(Query("@tags_tagname:{web} @id:[3 4]")).docs
        want = binlog_db.query(join + "t.tagname = 'web' AND b.id BETWEEN 3 AND 4")
        assert {d.id for d in both} == {f"book:{row[0]}" for row in want} == {"book:3", "book:4"}
        assert r.json().get("book:3")["tags"] == [{"tagname": "erlang"}, {"tagname": "web"}]
        assert not r.exists("book:1")
    finally:
        r.close()
    assert verify(m, source=binlog_db.url, target=modules_redis_url).exit_code == 0
