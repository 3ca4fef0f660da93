"""Nested documents (``nest:``) whose rows may be in no document on a table that nests another
(issue 36 item 1): a ``where:`` on the top (books), a nullable foreign key (``ON DELETE SET
NULL ON UPDATE CASCADE``) and a ``where:`` on a middle table (tags, with notes below), and on
the notes a filter that compares their ``ON UPDATE CASCADE`` key's values. The rows kept
beside the documents hold those rows too (a tag of no book with its notes, the tags of a book
the filter leaves out, every note), so that ``sync`` writes a row's whole subtree when it
enters a document and keeps it when it leaves. Random writes move rows in and out of the
filters, set keys to NULL and back, delete and re-key parents, on MariaDB, MySQL 9.7 (which
logs the cascaded rows) and MySQL with ``innodb_native_foreign_keys=ON``; the run ends in
``verify`` 0, every key (the rows kept beside the documents included) equal to a fresh
``migrate``'s, and the documents equal to ones built here from plain SQL queries."""

from __future__ import annotations

import json
import random
from typing import Any

import pymysql
import redis

from migrator.commands import validate, verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from tests.services import MySQLDatabase, create_database, drop_database, new_database_name
from tests.sync.test_cascade_keys import innodb_fk_mysql as innodb_fk_mysql
from tests.sync.test_sync_nesting import SCHEMA, TWO_LEVELS, random_writes
from tests.sync.test_sync_nesting_leaves import as_migrated

_ids = iter(range(9450, 9480))

#: a tag's book may be NULL: a book's delete leaves its tags (and their notes) in no document
NULLABLE = """
ALTER TABLE tag DROP FOREIGN KEY fk_tag_book;
ALTER TABLE tag MODIFY book_id INT NULL, ADD CONSTRAINT fk_tag_book FOREIGN KEY (book_id)
  REFERENCES book (id) ON DELETE SET NULL ON UPDATE CASCADE;
"""
KEPT = (
    TWO_LEVELS.format(kind="json-string")
    .replace("    as: json-string\n", "    as: json-string\n    where: \"name <> 'gone'\"\n")
    .replace(
        "    nest: {in: book, as: tags, order: tagname}\n",
        "    nest: {in: book, as: tags, order: tagname}\n    where: \"tagname <> 'x'\"\n",
    )
    .replace(
        "    nest: {in: tag, as: notes, order: rank}\n",
        "    nest: {in: tag, as: notes, order: rank}\n"
        "    where: \"body <> 'hidden' AND tag_id > 2\"\n",
    )
)


def kept_writes(db: MySQLDatabase, seed: int, steps: int) -> None:
    """Books out of their filter and back, deleted and re-keyed while out; tags set to no
    book and back, into and out of their filter, inserted without a book, re-keyed; notes
    hidden and shown, written under tags of no document."""
    rng = random.Random(seed)
    fresh = iter(range(200000 + 1000 * seed, 200000 + 1000 * seed + 999))
    conn = db.connect(autocommit=True)
    try:
        with conn.cursor() as cur:
            for n in range(steps):
                cur.execute("SELECT id FROM book")
                books = [r[0] for r in cur.fetchall()]
                cur.execute("SELECT id FROM tag")
                tags = [r[0] for r in cur.fetchall()] or [0]
                roll = rng.random()
                book = rng.choice(books) if books else None
                try:
                    if roll < 0.15:
                        cur.execute("UPDATE book SET name = %s WHERE id = %s",
                                    (rng.choice(["gone", f"back{n}"]), book))  # fmt: skip
                    elif roll < 0.2:
                        cur.execute("DELETE FROM book WHERE name = 'gone' ORDER BY id LIMIT 1")
                    elif roll < 0.25:
                        cur.execute("UPDATE book SET id = %s WHERE name = 'gone' ORDER BY id "
                                    "LIMIT 1", (next(fresh),))  # fmt: skip
                    elif roll < 0.45:
                        cur.execute("UPDATE tag SET book_id = %s WHERE id = %s",
                                    (rng.choice([None, book]), rng.choice(tags)))  # fmt: skip
                    elif roll < 0.55:
                        cur.execute("UPDATE tag SET tagname = %s WHERE id = %s",
                                    (rng.choice("xyz"), rng.choice(tags)))  # fmt: skip
                    elif roll < 0.62:
                        cur.execute("INSERT INTO tag VALUES (%s, %s, NULL)",
                                    (next(fresh), rng.choice("xab")))  # fmt: skip
                    elif roll < 0.68:
                        cur.execute("UPDATE tag SET id = %s WHERE id = %s",
                                    (next(fresh), rng.choice(tags)))  # fmt: skip
                    elif roll < 0.85:
                        cur.execute("INSERT INTO note VALUES (%s, %s, %s, %s)",
                                    (next(fresh), rng.choice(tags), rng.choice(["hidden", "n"]),
                                     rng.choice([None, 1, 2])))  # fmt: skip
                    else:
                        cur.execute("UPDATE note SET body = %s ORDER BY RAND() LIMIT 1",
                                    (rng.choice(["hidden", "shown"]),))  # fmt: skip
                except pymysql.err.IntegrityError:
                    pass  # a row the other writes just removed, or a tag name taken
    finally:
        conn.close()


def expected(db: MySQLDatabase) -> dict[bytes, Any]:
    """Each book's name and tags (with their notes), from plain SQL queries."""
    docs: dict[bytes, Any] = {}
    for bid, name in db.query("SELECT id, name FROM book WHERE name <> 'gone'"):
        tags = []
        for tid, tagname in db.query("SELECT id, tagname FROM tag WHERE book_id = %s AND "
                                     "tagname <> 'x' ORDER BY tagname", (bid,)):  # fmt: skip
            notes = db.query(
                "SELECT id, body, `rank` FROM note WHERE tag_id = %s AND body <> 'hidden' "
                "AND tag_id > 2 ORDER BY `rank` IS NOT NULL, `rank`, id",
                (tid,),
            )
            tags.append({"tagname": tagname, "book_id": bid, "notes": [
                {"id": i, "body": body, "rank": rank, "tag_id": tid} for i, body, rank in notes
            ]})  # fmt: skip
        docs[f"book:{bid}".encode()] = {"name": name, "tags": tags}
    return docs


def _kept(db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Any) -> None:
    db.run(SCHEMA)
    db.run(NULLABLE)
    db.run("INSERT INTO tag VALUES (5, 'lone', NULL); INSERT INTO note VALUES (14, 5, 'a', 1); "
           "UPDATE book SET name = 'gone' WHERE id = 3")  # fmt: skip
    path = tmp_path / "kept.yaml"
    path.write_text(f"source: {db.url}\n" + KEPT)
    notes = [str(p) for p in validate(path).problems]
    assert not [p for p in notes if "tables.book" in p or "tables.tag" in p or "note" in p], notes
    mapping = parse_mapping(KEPT, name="kept")
    sid = next(_ids)
    run = {"source": db.url, "target": redis_url, "until_caught_up": True}
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    # tag 2's notes are out of their filter (tag_id > 2) until the ON UPDATE CASCADE moves them
    db.run("UPDATE tag SET id = 2000 WHERE id = 2")
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    assert verify(mapping, source=db.url, target=redis_url).exit_code == 0
    for seed in range(1, 5):
        random_writes(db, seed, 30, [])
        kept_writes(db, seed, 60)
        sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    through_log, migrated = as_migrated(mapping, db, redis_url, redis_client)
    docs = {k: json.loads(v[1]) for k, v in through_log.items() if k.startswith(b"book:")}
    assert {k: {"name": d["name"], "tags": d["tags"]} for k, d in docs.items()} == expected(db)
    ((gone, lone, x, hidden),) = db.query(
        "SELECT (SELECT COUNT(*) FROM tag JOIN book ON book.id = tag.book_id WHERE name = 'gone'),"
        " (SELECT COUNT(*) FROM note JOIN tag ON tag.id = note.tag_id WHERE book_id IS NULL),"
        " (SELECT COUNT(*) FROM note JOIN tag ON tag.id = note.tag_id WHERE tagname = 'x'),"
        " (SELECT SUM(body = 'hidden') FROM note)"
    )  # fmt: skip
    assert gone and lone and x and hidden, (gone, lone, x, hidden)  # rows in no document
    for table in ("tag", "note"):  # every row kept: those in no document too
        (count,) = db.query(f"SELECT COUNT(*) FROM {table}")[0]
        assert len(migrated[f"migrator:kept:nest:{table}".encode()]) == count > 5


def test_rows_in_no_document_below_filters_and_null_keys_are_kept_and_followed(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Any
) -> None:
    _kept(binlog_db, redis_url, redis_client, tmp_path)


def test_rows_in_no_document_are_kept_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis, tmp_path: Any
) -> None:
    db = create_database(innodb_fk_mysql.url, new_database_name())
    try:
        _kept(db, redis_url, redis_client, tmp_path)
    finally:
        drop_database(innodb_fk_mysql.url, db.name)
