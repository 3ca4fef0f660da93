"""Nested documents (``nest:``) whose innermost tables have a nullable foreign key or a row
filter (issue 36 item 1; the notes' filter tests their key for NULL, which its ON UPDATE
CASCADE keeps as it is): a row with a NULL key, or one its filter leaves out, is in no
document and not in the rows kept beside them, as ``migrate`` writes them; ``sync`` follows
rows in and out (logged changes, and InnoDB's unlogged ``ON DELETE`` / ``ON UPDATE SET NULL``
of the reviews, ``CASCADE`` of the tags and notes) under random writes, on MariaDB, MySQL 9.7
(which logs the cascaded rows) and MySQL with ``innodb_native_foreign_keys=ON``, ending in
``verify`` 0 and every key, the rows kept beside the documents included, equal to a fresh
``migrate``'s. On a table that nests another: tests/sync/test_sync_nesting_kept.py."""

from __future__ import annotations

import random
from typing import Any

import pymysql
import redis

from migrator.commands import migrate, verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from tests.services import MySQLDatabase, create_database, drop_database, new_database_name
from tests.sync.test_cascade_keys import innodb_fk_mysql as innodb_fk_mysql
from tests.sync.test_sync_nesting import SCHEMA, TWO_LEVELS, random_writes
from tests.test_workers import snapshot as dump

_ids = iter(range(9400, 9450))

#: review's key may be NULL (ON DELETE/UPDATE SET NULL): a review of no book is in no document
NULLABLE = """
ALTER TABLE review DROP FOREIGN KEY fk_review_book;
ALTER TABLE review MODIFY book_id INT NULL, ADD CONSTRAINT fk_review_book FOREIGN KEY (book_id)
  REFERENCES book (id) ON DELETE SET NULL ON UPDATE SET NULL;
"""
LEAVES = (
    TWO_LEVELS.format(kind="json-string")
    .replace(
        "    nest: {in: book, as: reviews, kind: map}\n",
        '    nest: {in: book, as: reviews, kind: map}\n    where: "stars IS NULL OR stars > 1"\n',
    )
    .replace(
        "    nest: {in: tag, as: notes, order: rank}\n",
        "    nest: {in: tag, as: notes, order: rank}\n"
        "    where: \"body <> 'hidden' AND tag_id IS NOT NULL\"\n",
    )
)


def review_writes(db: MySQLDatabase, seed: int, steps: int) -> None:
    """Reviews inserted with or without a book, moved to a book or to none, their stars
    changed across the filter; notes hidden and shown."""
    rng = random.Random(seed)
    fresh = iter(range(100000 + 1000 * seed, 100000 + 1000 * seed + 999))
    conn = db.connect(autocommit=True)
    try:
        with conn.cursor() as cur:
            for _ in range(steps):
                cur.execute("SELECT id FROM book")
                books = [r[0] for r in cur.fetchall()] + [None]
                stars = rng.choice([None, 1, 2, 5])
                roll = rng.random()
                try:
                    if roll < 0.4:
                        cur.execute("INSERT INTO review VALUES (%s, %s, %s)",
                                    (next(fresh), rng.choice(books), stars))  # fmt: skip
                    elif roll < 0.6:
                        cur.execute("UPDATE review SET book_id = %s ORDER BY RAND() LIMIT 1",
                                    (rng.choice(books),))  # fmt: skip
                    elif roll < 0.8:
                        cur.execute("UPDATE review SET stars = %s ORDER BY RAND() LIMIT 1",
                                    (stars,))  # fmt: skip
                    else:
                        cur.execute("UPDATE note SET body = %s ORDER BY RAND() LIMIT 1",
                                    (rng.choice(["hidden", "shown"]),))  # fmt: skip
                except pymysql.err.IntegrityError:
                    pass  # the book just went
    finally:
        conn.close()


def _keys(client: redis.Redis) -> dict[bytes, Any]:
    """Every key of the mapping, the rows kept beside the documents included."""
    out: dict[bytes, Any] = dict(dump(client))
    for key in client.scan_iter(match="migrator:*:nest:*", count=1000):
        kind = client.type(key)
        out[key] = client.hgetall(key) if kind == b"hash" else client.smembers(key)
    return out


def as_migrated(
    mapping: Any, db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> tuple[dict[bytes, Any], dict[bytes, Any]]:
    """After sync: verify 0, and every key (the rows kept beside the documents included)
    equal to a fresh migrate's; (sync's keys, migrate's)."""
    report = verify(mapping, source=db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()
    through_log = _keys(redis_client)
    redis_client.flushdb()
    assert migrate(mapping, source=db.url, target=redis_url).exit_code == 0
    migrated = _keys(redis_client)
    differ = sorted(k for k in through_log.keys() | migrated.keys()
                    if through_log.get(k) != migrated.get(k))  # fmt: skip
    assert not differ, [(k, through_log.get(k), migrated.get(k)) for k in differ[:3]]
    return through_log, migrated


def _leaves(db: MySQLDatabase, redis_url: str, redis_client: redis.Redis) -> None:
    db.run(SCHEMA)
    db.run(NULLABLE)
    db.run("INSERT INTO review VALUES (3, NULL, 5), (4, 1, 1); UPDATE note SET body = 'hidden' "
           "WHERE id = 11")  # fmt: skip
    mapping = parse_mapping(LEAVES, name="leaves")
    sid = next(_ids)
    run = {"source": db.url, "target": redis_url, "until_caught_up": True}
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    for seed in range(1, 4):
        random_writes(db, seed, 40, [])
        review_writes(db, seed, 40)
        sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    _, migrated = as_migrated(mapping, db, redis_url, redis_client)
    (nulled, out, hidden), = db.query(
        "SELECT SUM(book_id IS NULL), SUM(stars = 1), (SELECT SUM(body = 'hidden') FROM note) "
        "FROM review"
    )  # fmt: skip
    assert nulled and out and hidden, (nulled, out, hidden)  # rows out of every document
    images = migrated[b"migrator:leaves:nest:review"]
    (held,) = db.query("SELECT COUNT(*) FROM review WHERE book_id IS NOT NULL "
                       "AND (stars IS NULL OR stars > 1)")[0]  # fmt: skip
    assert len(images) == held > 3


def test_nullable_keys_and_filters_on_innermost_tables_are_followed(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    _leaves(binlog_db, redis_url, redis_client)


def test_nullable_keys_and_filters_on_innermost_tables_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis
) -> None:
    db = create_database(innodb_fk_mysql.url, new_database_name())
    try:
        _leaves(db, redis_url, redis_client)
    finally:
        drop_database(innodb_fk_mysql.url, db.name)
