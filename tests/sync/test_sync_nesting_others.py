"""Nested tables with another foreign key, besides their nesting, whose rule InnoDB runs
without a trace in the log (issue 36 item 1): tags whose label goes ``ON DELETE CASCADE ON
UPDATE CASCADE``, notes (two levels deep) whose shelf goes ``ON DELETE SET NULL ON UPDATE SET
NULL``. The rows kept beside the documents are filed by those keys' values too
(``migrator:<m>:nest:<table>:by:<columns>:<values>``), and ``sync`` applies the rules to them
when a label or a shelf is deleted or re-keyed, the parents mapped or not, under random
writes on MariaDB and MySQL with ``innodb_native_foreign_keys=ON``: ``verify`` 0, every key
(the rows kept beside the documents included) equal to a fresh ``migrate``'s, the documents
equal to ones built from plain SQL queries. A text key under a collation stays refused."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pymysql
import pytest
import redis

from migrator.commands import dry_run, migrate, validate, verify
from migrator.commands.sync import sync
from migrator.errors import MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.plan.layout import TableLayout
from migrator.plan.nesting import trees
from migrator.source.foreign_keys import cascades_logged
from migrator.source.mysql import Source
from migrator.sync.nesting import refuse
from tests.services import MySQLDatabase, create_database, drop_database, new_database_name
from tests.sync.test_cascade_keys import innodb_fk_mysql as innodb_fk_mysql
from tests.sync.test_sync_nesting_leaves import as_migrated

_ids = iter(range(9450, 9490))

SCHEMA = """
CREATE TABLE label (id INT PRIMARY KEY, name VARCHAR(16) NOT NULL);
CREATE TABLE shelf (id INT PRIMARY KEY, name VARCHAR(16) NOT NULL);
CREATE TABLE book (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL) CHARACTER SET utf8mb4;
CREATE TABLE tag (
  id INT PRIMARY KEY, tagname VARCHAR(32) COLLATE utf8mb4_bin NOT NULL, book_id INT NOT NULL,
  label_id INT NOT NULL,
  CONSTRAINT fk_tag_book FOREIGN KEY (book_id) REFERENCES book (id)
    ON DELETE CASCADE ON UPDATE CASCADE,
  CONSTRAINT fk_tag_label FOREIGN KEY (label_id) REFERENCES label (id)
    ON DELETE CASCADE ON UPDATE CASCADE
) CHARACTER SET utf8mb4;
CREATE TABLE note (
  id INT PRIMARY KEY, tag_id INT NOT NULL, body VARCHAR(64) NOT NULL, shelf_id INT NULL,
  CONSTRAINT fk_note_tag FOREIGN KEY (tag_id) REFERENCES tag (id)
    ON DELETE CASCADE ON UPDATE CASCADE,
  CONSTRAINT fk_note_shelf FOREIGN KEY (shelf_id) REFERENCES shelf (id)
    ON DELETE SET NULL ON UPDATE SET NULL
) CHARACTER SET utf8mb4;
INSERT INTO label VALUES (1, 'red'), (2, 'blue'), (3, 'green');
INSERT INTO shelf VALUES (1, 'top'), (2, 'low');
INSERT INTO book VALUES (1, 'Ruby'), (2, 'Rails'), (3, 'Erlang');
INSERT INTO tag VALUES (1, 'ruby', 1, 1), (2, 'ruby', 2, 2), (3, 'web', 2, 1), (4, 'otp', 3, 3);
INSERT INTO note VALUES (10, 2, 'rails', 1), (11, 2, 'again', 2), (12, 3, 'web', NULL),
  (13, 4, 'otp', 1);
"""

MAPPING = """
version: 1
tables:
  book:
    as: json-string
    counter: false
  tag:
    as: none
    counter: false
    nest: {in: book, as: tags, order: tagname}
  note:
    as: none
    counter: false
    nest: {in: tag, as: notes}
"""
PARENTS = """  label:
    as: hash
    counter: false
  shelf:
    as: hash
    counter: false
"""


def expected(db: MySQLDatabase) -> dict[str, Any]:
    """Each book's document, from plain SQL queries."""
    docs: dict[str, Any] = {}
    for bid, name in db.query("SELECT id, name FROM book"):
        tags = []
        for tid, tagname, label in db.query(
            "SELECT id, tagname, label_id FROM tag WHERE book_id = %s ORDER BY tagname, id",
            (bid,),
        ):
            notes = db.query(
                "SELECT id, body, shelf_id FROM note WHERE tag_id = %s ORDER BY id", (tid,)
            )
            tags.append({
                "id": tid, "tagname": tagname, "book_id": bid, "label_id": label,
                "notes": [{"id": i, "tag_id": tid, "body": b, "shelf_id": s} for i, b, s in notes],
            })  # fmt: skip
        docs[f"book:{bid}"] = {"name": name, "tags": tags}
    return docs


def other_parent_writes(db: MySQLDatabase, seed: int, steps: int, done: dict[str, int]) -> None:
    """Labels and shelves inserted, deleted and re-keyed (their rules reach tags and notes);
    tags and notes inserted with them and moved between them; books deleted."""
    rng = random.Random(seed)
    fresh = iter(range(1000 * seed, 1000 * seed + 999))
    conn = db.connect(autocommit=True)
    try:
        with conn.cursor() as cur:

            def ids(table: str) -> list[int]:
                cur.execute(f"SELECT id FROM {table}")
                return [r[0] for r in cur.fetchall()]

            for n in range(steps):
                labels, shelves, books, tags = ids("label"), ids("shelf"), ids("book"), ids("tag")
                roll = rng.random()
                try:
                    if roll < 0.08 or not labels:
                        cur.execute("INSERT INTO label VALUES (%s, 'l')", (next(fresh),))
                    elif roll < 0.14 or not shelves:
                        cur.execute("INSERT INTO shelf VALUES (%s, 's')", (next(fresh),))
                    elif roll < 0.2 or not books:
                        cur.execute("INSERT INTO book VALUES (%s, %s)", (next(fresh), f"b{n}"))
                    elif roll < 0.27:
                        done["label deleted"] += cur.execute(
                            "DELETE FROM label WHERE id = %s", (rng.choice(labels),)
                        )  # fmt: skip
                    elif roll < 0.34:
                        done["label re-keyed"] += cur.execute(
                            "UPDATE label SET id = %s WHERE id = %s",
                            (next(fresh), rng.choice(labels)),
                        )
                    elif roll < 0.4:
                        cur.execute("UPDATE label SET name = %s WHERE id = %s",
                                    (f"n{n}", rng.choice(labels)))  # fmt: skip
                    elif roll < 0.46:
                        done["shelf deleted"] += cur.execute(
                            "DELETE FROM shelf WHERE id = %s", (rng.choice(shelves),)
                        )  # fmt: skip
                    elif roll < 0.52:
                        done["shelf re-keyed"] += cur.execute(
                            "UPDATE shelf SET id = %s WHERE id = %s",
                            (next(fresh), rng.choice(shelves)),
                        )
                    elif roll < 0.55:
                        cur.execute("DELETE FROM book WHERE id = %s", (rng.choice(books),))
                    elif roll < 0.7 or not tags:
                        cur.execute("INSERT INTO tag VALUES (%s, %s, %s, %s)",
                                    (next(fresh), rng.choice("abc"), rng.choice(books),
                                     rng.choice(labels)))  # fmt: skip
                    elif roll < 0.78:
                        cur.execute("UPDATE tag SET label_id = %s WHERE id = %s",
                                    (rng.choice(labels), rng.choice(tags)))  # fmt: skip
                    elif roll < 0.92:
                        cur.execute("INSERT INTO note VALUES (%s, %s, %s, %s)",
                                    (next(fresh), rng.choice(tags), f"n{n}",
                                     rng.choice([*shelves, None])))  # fmt: skip
                    else:
                        cur.execute("UPDATE note SET shelf_id = %s ORDER BY RAND() LIMIT 1",
                                    (rng.choice([*shelves, None]),))  # fmt: skip
                except pymysql.err.IntegrityError:
                    pass
    finally:
        conn.close()


def _follows(db: MySQLDatabase, redis_url: str, client: redis.Redis, mapped: bool) -> None:
    db.run(SCHEMA)
    name = "nestothers" + ("m" if mapped else "u")
    mapping = parse_mapping(MAPPING + (PARENTS if mapped else ""), name=name)
    sid = next(_ids)
    run = {"source": db.url, "target": redis_url, "until_caught_up": True}
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    # the rules at once: tag 1 and 3 go with label 1 (and note 12 with tag 3), notes 10 and 13
    # lose shelf 1, label 2 re-keyed moves tag 2
    db.run(
        "DELETE FROM label WHERE id = 1; DELETE FROM shelf WHERE id = 1; "
        "UPDATE label SET id = 20 WHERE id = 2; UPDATE shelf SET id = 9 WHERE id = 2"
    )
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    docs = {k.decode(): json.loads(client.get(k)) for k in client.scan_iter("book:*")}
    assert docs == expected(db)
    assert docs["book:2"]["tags"] == [{
        "id": 2, "tagname": "ruby", "book_id": 2, "label_id": 20,
        "notes": [{"id": 10, "tag_id": 2, "body": "rails", "shelf_id": None},
                  {"id": 11, "tag_id": 2, "body": "again", "shelf_id": None}],
    }]  # fmt: skip
    done = dict.fromkeys(["label deleted", "label re-keyed", "shelf deleted", "shelf re-keyed"], 0)
    for seed in range(1, 4):
        other_parent_writes(db, seed, 60, done)
        sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    assert all(done.values()), done
    through_log, migrated = as_migrated(mapping, db, redis_url, client)
    by = [k for k in migrated if b":nest:tag:by:label_id:" in k or b":nest:note:by:shelf_id:" in k]
    assert len(by) > 3, by  # the rows kept are filed by the other keys' values
    docs = {k.decode(): json.loads(v[1]) for k, v in through_log.items() if k.startswith(b"book:")}
    assert docs == expected(db)


@pytest.mark.parametrize("mapped", [True, False], ids=["parents-mapped", "parents-unmapped"])
def test_other_foreign_keys_of_nested_tables_on_mariadb(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, mapped: bool
) -> None:
    _follows(binlog_db, redis_url, redis_client, mapped)


@pytest.mark.parametrize("mapped", [True, False], ids=["parents-mapped", "parents-unmapped"])
def test_other_foreign_keys_of_nested_tables_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis, mapped: bool
) -> None:
    db = create_database(innodb_fk_mysql.url, new_database_name())
    try:
        _follows(db, redis_url, redis_client, mapped)
    finally:
        drop_database(innodb_fk_mysql.url, db.name)


def test_a_text_key_under_a_collation_stays_refused(
    binlog_db: MySQLDatabase, redis_url: str
) -> None:
    """The kept rows are filed by their values' bytes: where InnoDB's cascades are not logged
    (MariaDB), a key MySQL compares under a collation ('Red' = 'red') is refused at start
    (exit 2), and validate warns of it; MySQL 9.7 logs the cascaded rows: nothing refused."""
    binlog_db.run(SCHEMA.split("INSERT")[0].replace(
        "label_id INT NOT NULL", "label_id VARCHAR(16) NOT NULL"
    ).replace(
        "CREATE TABLE label (id INT PRIMARY KEY", "CREATE TABLE label (id VARCHAR(16) PRIMARY KEY"
    ))  # fmt: skip
    conn = binlog_db.connect()
    try:
        logged = cascades_logged(conn)
    finally:
        conn.close()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.yaml"
        path.write_text(MAPPING)
        problems = validate(path, binlog_db.url).problems
    warned = [p for p in problems if "fk_tag_label" in p.message and p.level == "warning"]
    assert bool(warned) != logged, [str(p) for p in problems]
    mapping = parse_mapping(MAPPING, name="nestotherstext")
    run = {"source": binlog_db.url, "target": redis_url, "until_caught_up": True}
    if logged:
        sync(mapping, server_id=next(_ids), **run)  # type: ignore[arg-type]
        assert redis.Redis.from_url(redis_url).exists(b"book:1") == 0  # (no book yet)
        return
    with pytest.raises(MigratorError, match="fk_tag_label") as e:
        sync(mapping, server_id=next(_ids), **run)  # type: ignore[arg-type]
    assert e.value.exit_code == 2
    assert "collation" in e.value.message


def test_the_sets_per_value_are_written_verified_repaired_and_counted(
    mysql_db: MySQLDatabase, redis_url: str
) -> None:
    """migrate writes a SET per label and per shelf of the kept rows holding it (none for a
    NULL); verify compares them (a wrong SET, a stale one) and --fix repairs them; dry-run's
    estimate counts them; migrate --replace removes them with the tree's keys."""
    mysql_db.run(SCHEMA)
    m = parse_mapping(MAPPING, name="nestotherskeys")
    assert migrate(m, source=mysql_db.url, target=redis_url).exit_code == 0
    r = redis.Redis.from_url(redis_url)
    head = b"migrator:nestotherskeys:nest:"
    held = {k: r.smembers(k) for k in r.scan_iter(match=head + b"*:by:*")}
    assert held == {
        head + b"tag:by:label_id:1:1": {b"1:1", b"1:3"},
        head + b"tag:by:label_id:1:2": {b"1:2"},
        head + b"tag:by:label_id:1:3": {b"1:4"},
        head + b"note:by:shelf_id:1:1": {b"2:10", b"2:13"},
        head + b"note:by:shelf_id:1:2": {b"2:11"},
    }
    book = next(t for t in dry_run(m, source=mysql_db.url).tables if t.table == "book")
    assert book.keys["nest"] == len(list(r.scan_iter(match=head + b"*"))), book.keys
    wrong, stale = head + b"tag:by:label_id:1:1", head + b"tag:by:label_id:1:7"
    r.srem(wrong, b"1:3")
    r.sadd(stale, b"1:1")
    found = verify(m, source=mysql_db.url, target=redis_url)
    assert found.exit_code == 1
    differ = {d.key for t in found.tables for ds in t.examples.values() for d in ds}
    assert {wrong.decode(), stale.decode()} <= differ, differ
    assert verify(m, source=mysql_db.url, target=redis_url, fix=True).exit_code == 0
    assert r.smembers(wrong) == {b"1:1", b"1:3"} and not r.exists(stale)
    r.sadd(stale, b"1:1")
    assert migrate(m, source=mysql_db.url, target=redis_url, replace=True).exit_code == 0
    assert not r.exists(stale) and r.smembers(wrong) == {b"1:1", b"1:3"}


def test_over_a_sharded_source_it_stays_refused(binlog_db: MySQLDatabase) -> None:
    """Where InnoDB's cascades are not logged, a shard's tree with such a key is refused: the
    kept rows of every shard share the SETs per value; the same tree of one source is not."""
    binlog_db.run(SCHEMA)
    src = Source(binlog_db.url)
    try:
        schema = src.schema()
    finally:
        src.close()
    mapping = parse_mapping(MAPPING, name="nestothersshard")
    for shard in ("", "s1"):
        resolved = resolve(mapping, schema, shard=shard)
        tops = trees({r.name: TableLayout(r) for r in resolved})
        refuse(tops, cluster=False, logged=True, schemas=schema.tables)  # the log has them
        if not shard:
            refuse(tops, cluster=False, logged=False, schemas=schema.tables)
            continue
        with pytest.raises(MigratorError, match=r"fk_tag_label.*sharded source") as e:
            refuse(tops, cluster=False, logged=False, schemas=schema.tables)
        assert e.value.exit_code == 2
