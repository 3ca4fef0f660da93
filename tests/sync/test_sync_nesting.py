"""sync of nested documents (``nest:``; docs/mapping.md#nested-children) on each engine: books
with their tags (an array), reviews (a map) and detail (an object) nested, and, two levels
deep, notes nested in the tags. Each step's documents are compared with documents built here
from plain SQL queries and json (not by the tool's code), read back with redis-py, and
``verify`` (documents and side structure) exits 0. MariaDB cascades without a trace in the
log; MySQL 9.7 logs the cascaded rows: both are exercised by the same steps."""

from __future__ import annotations

import functools
import json
import random
import threading
from typing import Any

import pymysql
import pytest
import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.plan.layout import TableLayout
from migrator.plan.nesting import trees
from migrator.source.mysql import Source
from migrator.sync.nesting import refuse
from tests.services import MySQLDatabase
from tests.sync.helpers import while_syncing
from tests.test_nesting import stored

_ids = iter(range(9100, 9400))

SCHEMA = """
CREATE TABLE book (
  id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, author VARCHAR(64) NOT NULL
) CHARACTER SET utf8mb4;
CREATE TABLE tag (
  id INT PRIMARY KEY, tagname VARCHAR(32) COLLATE utf8mb4_bin NOT NULL, book_id INT NOT NULL,
  UNIQUE KEY (tagname, book_id),
  CONSTRAINT fk_tag_book FOREIGN KEY (book_id) REFERENCES book (id)
    ON DELETE CASCADE ON UPDATE CASCADE
) CHARACTER SET utf8mb4;
CREATE TABLE review (
  id INT PRIMARY KEY, book_id INT NOT NULL, stars INT NULL,
  CONSTRAINT fk_review_book FOREIGN KEY (book_id) REFERENCES book (id)
    ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE TABLE detail (
  book_id INT PRIMARY KEY, pages INT NOT NULL,
  CONSTRAINT fk_detail_book FOREIGN KEY (book_id) REFERENCES book (id)
    ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE TABLE note (
  id INT PRIMARY KEY, tag_id INT NOT NULL, body VARCHAR(64) NOT NULL, `rank` INT NULL,
  CONSTRAINT fk_note_tag FOREIGN KEY (tag_id) REFERENCES tag (id)
    ON DELETE CASCADE ON UPDATE CASCADE
) CHARACTER SET utf8mb4;
INSERT INTO book VALUES (1, 'The Ruby Programming Language', 'Mark Pilgrim'),
  (2, 'Ruby on rail', 'David Flanagan'), (3, 'Programming Erlang', 'Joe Armstrong');
INSERT INTO tag VALUES (1, 'ruby', 1), (2, 'ruby', 2), (3, 'web', 2), (4, 'erlang', 3);
INSERT INTO review VALUES (1, 1, 4), (2, 2, NULL);
INSERT INTO detail VALUES (1, 448);
INSERT INTO note VALUES (10, 2, 'rails is ruby', 2), (11, 2, 'again', 1),
  (12, 3, 'web "notes"', NULL), (13, 4, 'otp', 5);
"""

ONE_LEVEL = """
version: 1
tables:
  book:
    as: {kind}
    counter: false
  tag:
    as: none
    counter: false
    columns: [tagname, book_id]
    nest: {{in: book, as: tags, order: tagname}}
  review:
    as: none
    counter: false
    nest: {{in: book, as: reviews, kind: map}}
  detail:
    as: none
    counter: false
    nest: {{in: book, as: detail, kind: object}}
"""

TWO_LEVELS = (
    ONE_LEVEL
    + """  note:
    as: none
    counter: false
    nest: {{in: tag, as: notes, order: rank}}
"""
)


def mapping(levels: int, kind: str = "json-string") -> Any:
    text = (ONE_LEVEL if levels == 1 else TWO_LEVELS).format(kind=kind)
    return parse_mapping(text, name=f"nestsync{levels}")


def expected(db: MySQLDatabase, levels: int) -> dict[str, Any]:
    """Each book's document, from plain SQL queries."""
    docs: dict[str, Any] = {}
    for bid, name, author in db.query("SELECT id, name, author FROM book"):
        tags = []
        for tid, tagname in db.query(
            "SELECT id, tagname FROM tag WHERE book_id = %s ORDER BY tagname", (bid,)
        ):
            tag: dict[str, Any] = {"tagname": tagname, "book_id": bid}
            if levels > 1:
                notes = db.query(
                    "SELECT id, body, `rank` FROM note WHERE tag_id = %s "
                    "ORDER BY `rank` IS NOT NULL, `rank`, id",
                    (tid,),
                )
                tag["notes"] = [
                    {"id": i, "body": body, "rank": rank, "tag_id": tid} for i, body, rank in notes
                ]
            tags.append(tag)
        reviews = {
            str(i): {"id": i, "book_id": bid, "stars": stars}
            for i, stars in db.query("SELECT id, stars FROM review WHERE book_id = %s", (bid,))
        }
        detail = db.query("SELECT pages FROM detail WHERE book_id = %s", (bid,))
        docs[f"book:{bid}"] = {
            "name": name, "author": author, "tags": tags, "reviews": reviews,
            "detail": {"book_id": bid, "pages": detail[0][0]} if detail else None,
        }  # fmt: skip
    return docs


def caught_up(db: MySQLDatabase, url: str, levels: int, kind: str = "json-string") -> Any:
    """sync until nothing is pending; then verify 0 and the documents as SQL says. The sync's
    report."""
    m = mapping(levels, kind)
    done = sync(m, source=db.url, target=url, until_caught_up=True, server_id=next(_ids))
    report = verify(m, source=db.url, target=url)
    assert report.exit_code == 0, report.as_dict()
    assert stored(redis.Redis.from_url(url), kind) == expected(db, levels)
    return done


#: each step one transaction, synced and compared on its own
STEPS = [
    "INSERT INTO tag VALUES (5, 'zeta', 1)",  # a child inserted
    "INSERT INTO review VALUES (100, 1, 5), (101, 1, NULL); INSERT INTO detail VALUES (2, 300)",
    "UPDATE review SET stars = 3 WHERE id = 100; UPDATE detail SET pages = 301 WHERE book_id = 2",
    # a child's foreign key moves it to another parent (leaves one document, enters another)
    "UPDATE tag SET book_id = 3 WHERE tagname = 'zeta'; UPDATE review SET book_id = 2 "
    "WHERE id = 101; UPDATE detail SET book_id = 3 WHERE book_id = 2",
    "DELETE FROM tag WHERE tagname = 'zeta'; DELETE FROM detail WHERE book_id = 3",
    "UPDATE book SET id = 10 WHERE id = 1",  # the parent's key: ON UPDATE CASCADE
    "DELETE FROM book WHERE id = 2",  # the parent deleted: ON DELETE CASCADE
    "INSERT INTO book VALUES (4, 'New', 'Someone'); INSERT INTO tag VALUES (6, 'x', 4); "
    "UPDATE book SET name = 'Renamed' WHERE id = 3",
]

#: two levels: a grandchild inserted, moved, updated, deleted; a tag (with notes) moved and
#: deleted; a book's key change carrying its tags' notes along
NOTE_STEPS = [
    "INSERT INTO note VALUES (20, 4, 'new', 1)",
    "UPDATE note SET tag_id = 3 WHERE id = 20; UPDATE note SET `rank` = 0 WHERE id = 12",
    "UPDATE tag SET book_id = 1 WHERE id = 3",  # a tag with its notes to another book
    "UPDATE book SET id = 11 WHERE id = 1",  # its tags follow, with their notes
    "UPDATE tag SET id = 30 WHERE id = 3",  # a tag's key: its notes follow (ON UPDATE CASCADE)
    "DELETE FROM tag WHERE id = 30",  # its notes cascade
    "DELETE FROM note WHERE id = 13; DELETE FROM book WHERE id = 2",
]


@pytest.mark.parametrize("levels", [1, 2])
def test_sync_keeps_nested_documents_exact_step_by_step(
    binlog_db: MySQLDatabase, redis_url: str, levels: int
) -> None:
    binlog_db.run(SCHEMA)
    caught_up(binlog_db, redis_url, levels)  # the first load
    for step in STEPS if levels == 1 else NOTE_STEPS:
        binlog_db.run(step)
        caught_up(binlog_db, redis_url, levels)


def test_many_transactions_in_one_group(binlog_db: MySQLDatabase, redis_url: str) -> None:
    """Every step written before sync runs again: the transactions are applied in groups,
    each reading what the ones before it in the group changed."""
    binlog_db.run(SCHEMA)
    caught_up(binlog_db, redis_url, 2)
    for step in NOTE_STEPS[:3] + STEPS:
        binlog_db.run(step)
    caught_up(binlog_db, redis_url, 2)


def random_writes(db: MySQLDatabase, seed: int, steps: int, committed: list[int]) -> None:
    """Random transactions over two levels: tags and notes inserted, moved across parents
    (their foreign key changed), updated and deleted; books inserted, renamed, re-keyed and
    deleted (cascading to their tags and notes); tags re-keyed (their notes follow)."""
    rng = random.Random(seed)
    fresh = iter(range(1000 * seed, 1000 * seed + 999))
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            for n in range(steps):
                try:  # a row the other connection just removed: that transaction rolled back
                    for _ in range(rng.randint(1, 3)):
                        cur.execute("SELECT id FROM book")
                        books = [r[0] for r in cur.fetchall()]
                        cur.execute("SELECT id FROM tag")
                        tags = [r[0] for r in cur.fetchall()]
                        cur.execute("SELECT id FROM note")
                        notes = [r[0] for r in cur.fetchall()] or [0]
                        roll = rng.random()
                        if roll < 0.1 or not books:
                            cur.execute(
                                "INSERT INTO book VALUES (%s, %s, 'x')", (next(fresh), f"b{n}")
                            )
                        elif roll < 0.14:
                            cur.execute("DELETE FROM book WHERE id = %s", (rng.choice(books),))
                        elif roll < 0.18:
                            cur.execute("UPDATE book SET id = %s WHERE id = %s",
                                        (next(fresh), rng.choice(books)))  # fmt: skip
                        elif roll < 0.21:
                            cur.execute("UPDATE book SET name = %s WHERE id = %s",
                                        (f"r{n}", rng.choice(books)))  # fmt: skip
                        elif roll < 0.38 or not tags:
                            cur.execute(
                                "INSERT IGNORE INTO tag VALUES (%s, %s, %s)",
                                (next(fresh), rng.choice("abcd"), rng.choice(books)),
                            )
                        elif roll < 0.48:
                            cur.execute(
                                "UPDATE IGNORE tag SET book_id = %s WHERE id = %s",
                                (rng.choice(books), rng.choice(tags)),
                            )
                        elif roll < 0.51:
                            cur.execute("UPDATE tag SET id = %s WHERE id = %s",
                                        (next(fresh), rng.choice(tags)))  # fmt: skip
                        elif roll < 0.55:
                            cur.execute("DELETE FROM tag WHERE id = %s", (rng.choice(tags),))
                        elif roll < 0.75:
                            cur.execute("INSERT INTO note VALUES (%s, %s, %s, %s)",
                                        (next(fresh), rng.choice(tags), f"n{n}",
                                         rng.choice([None, 1, 2, 3])))  # fmt: skip
                        elif roll < 0.9:
                            cur.execute("UPDATE note SET tag_id = %s, `rank` = %s WHERE id = %s",
                                        (rng.choice(tags), rng.choice([None, 1, 2]),
                                         rng.choice(notes)))  # fmt: skip
                        else:
                            cur.execute("DELETE FROM note WHERE id = %s", (rng.choice(notes),))
                    conn.commit()
                    committed.append(n)
                except (pymysql.err.IntegrityError, pymysql.err.OperationalError):
                    conn.rollback()
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["json-string", "json"])
def test_random_writes_two_levels_end_exact(
    binlog_db: MySQLDatabase, request: pytest.FixtureRequest, kind: str
) -> None:
    """Random writes from two connections while sync follows; then verify 0 and every
    document as SQL says, read with redis-py."""
    url = request.getfixturevalue("redis_url" if kind == "json-string" else "modules_redis_url")
    binlog_db.run(SCHEMA)
    m = mapping(2, kind)

    def run(stop: threading.Event, status: Any) -> None:
        sync(m, source=binlog_db.url, target=url, stop=stop, server_id=next(_ids),
             on_status=status)  # fmt: skip

    committed: list[int] = []
    writes = [functools.partial(random_writes, binlog_db, s, 60, committed) for s in (1, 2)]
    while_syncing(run, writes)
    assert len(committed) > 90, len(committed)  # most transactions went through
    caught_up(binlog_db, url, 2, kind)


def test_verify_compares_the_rows_kept_beside_and_fix_repairs_them(
    binlog_db: MySQLDatabase, redis_url: str
) -> None:
    """The side structure sync rebuilds documents from: a wrong image, an image of no row, a
    lost SET of children and a SET of no parent are each a difference; --fix repairs them,
    and sync goes on exact from the repaired rows."""
    binlog_db.run(SCHEMA)
    caught_up(binlog_db, redis_url, 2)
    client = redis.Redis.from_url(redis_url)
    images = b"migrator:nestsync2:nest:note"
    assert client.hlen(images) == 4
    client.hset(images, b"2:10", b"2:102:99")  # note 10's image, wrong
    client.hset(images, b"2:99", b"-")  # no such note
    client.delete(b"migrator:nestsync2:nest:tag:in:1:2")  # book 2's tags
    client.sadd(b"migrator:nestsync2:nest:note:in:2:77", b"2:10")  # tag 77: no such tag
    m = mapping(2)
    report = verify(m, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 1
    book = next(t for t in report.as_dict()["tables"] if t["table"] == "book")
    assert book["differences"] == {"different value": 2, "extra field": 1, "stale key": 1}
    assert verify(m, source=binlog_db.url, target=redis_url, fix=True).exit_code == 0
    assert verify(m, source=binlog_db.url, target=redis_url).exit_code == 0
    binlog_db.run("DELETE FROM tag WHERE id = 3; UPDATE note SET body = 'b' WHERE id = 10")
    caught_up(binlog_db, redis_url, 2)


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ("  book:\n    expire: 1h\n", "expire"),
        ("  tnote:\n    as: none\n    counter: false\n    nest: {in: tag, as: tnotes}\n",
         "primary key"),
    ],
)  # fmt: skip
def test_refuses_at_start_what_it_cannot_keep_exact(
    binlog_db: MySQLDatabase, redis_url: str, extra: str, why: str
) -> None:
    binlog_db.run(SCHEMA)
    binlog_db.run(
        "CREATE TABLE tnote (id INT PRIMARY KEY, tagname VARCHAR(32) COLLATE utf8mb4_bin "
        "NOT NULL, book_id INT NOT NULL, FOREIGN KEY (tagname, book_id) "
        "REFERENCES tag (tagname, book_id))"
    )
    text = ONE_LEVEL.format(kind="json-string")
    table = extra.split(":", 1)[0] + ":\n"
    if table in text:  # a key added to a table of the mapping
        text = text.replace(table, extra, 1)
    else:
        text += extra
    m = parse_mapping(text, name="nestrefused")
    with pytest.raises(MigratorError, match=why) as e:
        sync(m, source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
    assert e.value.exit_code == 2
    assert redis.Redis.from_url(redis_url).exists(b"book:1") == 0  # nothing written


def test_a_truncate_of_a_nested_table_stops_and_names_the_reload(
    binlog_db: MySQLDatabase, redis_url: str
) -> None:
    binlog_db.run(SCHEMA)
    caught_up(binlog_db, redis_url, 2)
    binlog_db.run("TRUNCATE TABLE note")
    with pytest.raises(MigratorError, match="--reload"):
        sync(mapping(2), source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
    m = mapping(2)
    sync(m, source=binlog_db.url, target=redis_url, until_caught_up=True, reload=True,
         server_id=next(_ids))  # fmt: skip
    assert verify(m, source=binlog_db.url, target=redis_url).exit_code == 0
    assert stored(redis.Redis.from_url(redis_url), "json-string") == expected(binlog_db, 2)


def test_a_cascade_of_another_foreign_key_reaches_the_documents(
    binlog_db: MySQLDatabase, redis_url: str
) -> None:
    """review's other foreign key (to owner, not mapped) sets review rows NULL: without a
    trace in the log on MariaDB, where sync applies it to the rows kept beside the documents
    (tests/sync/test_sync_nesting_others.py); MySQL 9.7 logs it. Either way the documents
    follow."""
    binlog_db.run(SCHEMA)
    binlog_db.run(
        "CREATE TABLE owner (id INT PRIMARY KEY); INSERT INTO owner VALUES (1); "
        "ALTER TABLE review ADD owner_id INT NULL, ADD CONSTRAINT fk_review_owner "
        "FOREIGN KEY (owner_id) REFERENCES owner (id) ON DELETE SET NULL; "
        "UPDATE review SET owner_id = 1"
    )
    sync(mapping(1), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    binlog_db.run("DELETE FROM owner WHERE id = 1")
    m = mapping(1)
    sync(m, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=next(_ids))
    assert verify(m, source=binlog_db.url, target=redis_url).exit_code == 0
    doc = json.loads(redis.Redis.from_url(redis_url).get("book:1"))
    assert doc["reviews"]["1"]["owner_id"] is None


def test_a_redis_cluster_is_refused(binlog_db: MySQLDatabase) -> None:
    binlog_db.run(SCHEMA)
    src = Source(binlog_db.url)
    try:
        resolved = resolve(mapping(1), src.schema())
    finally:
        src.close()
    tops = trees({r.name: TableLayout(r) for r in resolved})
    refuse(tops, cluster=False, logged=True)
    with pytest.raises(MigratorError, match="Cluster"):
        refuse(tops, cluster=True, logged=True)


def test_a_replay_from_the_state_before_a_crash_gives_the_same_documents(
    binlog_db: MySQLDatabase, redis_url: str
) -> None:
    """Redis taken back to the state of an earlier position (its data, side structure and
    position, as a crash before a group's MULTI/EXEC leaves it): the transactions since are
    applied again, and the documents and rows beside them are the same."""
    binlog_db.run(SCHEMA)
    caught_up(binlog_db, redis_url, 2)
    client = redis.Redis.from_url(redis_url)
    saved = {k: client.dump(k) for k in client.scan_iter()}
    for step in NOTE_STEPS:
        binlog_db.run(step)
    caught_up(binlog_db, redis_url, 2)
    after = {k: client.dump(k) for k in client.scan_iter(match="migrator:nestsync2:nest:*")}
    documents = stored(client, "json-string")
    client.flushdb()
    for key, value in saved.items():
        client.restore(key, 0, value)
    replayed = caught_up(binlog_db, redis_url, 2)  # every step again, from the older position
    assert not replayed.loaded and replayed.transactions >= len(NOTE_STEPS), replayed.as_dict()
    assert stored(client, "json-string") == documents
    again = {k: client.dump(k) for k in client.scan_iter(match="migrator:nestsync2:nest:*")}
    assert set(again) == set(after)


def test_a_changed_mapping_of_a_nested_table_stops_and_names_the_reload(
    binlog_db: MySQLDatabase, redis_url: str
) -> None:
    binlog_db.run(SCHEMA)
    caught_up(binlog_db, redis_url, 2)
    text = TWO_LEVELS.format(kind="json-string") + "    columns: [tag_id, body]\n"
    changed = parse_mapping(text, name="nestsync2")
    with pytest.raises(MigratorError, match=r"note must be read again .*nested") as e:
        sync(changed, source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
    assert "--reload" in e.value.hint
    assert stored(redis.Redis.from_url(redis_url), "json-string") == expected(binlog_db, 2)
