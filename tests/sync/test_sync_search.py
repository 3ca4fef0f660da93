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
