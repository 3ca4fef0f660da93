"""Cascades into children whose row cannot be read back from a row hash (issue 36 item 1), on
servers whose log lacks the rows a foreign key's rule changes (MariaDB; MySQL 9.7 with
``innodb_native_foreign_keys=ON``): such a child keeps row images (plan/row_images.py), and
``sync`` follows the rule from the parent's change.

* the join table ``migrator init`` drafts (``as: none``, two ``sets``, no reference), its
  mapping used unchanged, under random writes: parents' DELETEs and key UPDATEs;
* an ``as: columns`` child of an ``ON DELETE/UPDATE SET NULL`` and a ``formats:`` child, no
  index on their foreign keys (the images' own SET per value finds their rows), a
  ``columns:`` child whose hash leaves out the foreign key (found through its reference set)
  and a hash child with no index on one of its foreign keys.

Each run ends with ``verify`` 0 and Redis equal, key by key, to a fresh ``migrate``. A
``dry-run`` counts the image keys in its estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from migrator.commands import dry_run, init, migrate, verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.mapping.model import Mapping
from migrator.plan.expiry import encode_row
from tests.services import create_database, drop_database, new_database_name
from tests.sync.helpers import RandomTransactions
from tests.sync.test_cascade_keys import _logged
from tests.sync.test_cascade_keys import innodb_fk_mysql as innodb_fk_mysql
from tests.test_workers import snapshot as dump

_ids = iter(range(8700, 8800))

TICKETS = """
CREATE TABLE ticket (id INT PRIMARY KEY, title VARCHAR(40) NOT NULL,
  opened DATETIME NOT NULL);
CREATE TABLE tag (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL);
CREATE TABLE ticket_tag (ticket_id INT NOT NULL, tag_id INT NOT NULL,
  PRIMARY KEY (ticket_id, tag_id), KEY (tag_id),
  CONSTRAINT fk_tt_ticket FOREIGN KEY (ticket_id) REFERENCES ticket (id)
  ON DELETE CASCADE ON UPDATE CASCADE,
  CONSTRAINT fk_tt_tag FOREIGN KEY (tag_id) REFERENCES tag (id)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE comment (id INT PRIMARY KEY, ticket_id INT NOT NULL, body VARCHAR(40),
  at DATETIME NOT NULL,
  CONSTRAINT fk_comment_ticket FOREIGN KEY (ticket_id) REFERENCES ticket (id)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE watch (id INT PRIMARY KEY, ticket_id INT NOT NULL, who VARCHAR(20),
  CONSTRAINT fk_watch_ticket FOREIGN KEY (ticket_id) REFERENCES ticket (id)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE link (id INT PRIMARY KEY, ticket_id INT NULL, label VARCHAR(20),
  CONSTRAINT fk_link_ticket FOREIGN KEY (ticket_id) REFERENCES ticket (id)
  ON DELETE SET NULL ON UPDATE SET NULL);
"""


class Writes(RandomTransactions):
    """Random transactions: inserts everywhere, plain updates, parents' DELETEs and UPDATEs
    of their keys (cascaded by the server, not logged)."""

    def ids(self, table: str) -> list[int]:
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT id FROM {table} ORDER BY 1")
            return [r[0] for r in cur.fetchall()]

    def step(self) -> str:
        r = self.rng
        tickets, tags = self.ids("ticket"), self.ids("tag")
        choice = r.randrange(16)
        if choice < 2 or not tickets:
            at = f"2026-0{r.randrange(1, 9)}-1{r.randrange(9)} 10:00:0{r.randrange(9)}"
            return f"INSERT INTO ticket VALUES ({self.fresh()}, 't{r.randrange(99)}', '{at}')"
        if choice < 3 or not tags:
            return f"INSERT INTO tag VALUES ({self.fresh()}, 'g{r.randrange(99)}')"
        if choice < 5 or choice > 11:
            return f"INSERT IGNORE INTO ticket_tag VALUES ({r.choice(tickets)}, {r.choice(tags)})"
        if choice < 6:
            at = f"2026-11-0{r.randrange(1, 9)} 0{r.randrange(9)}:00:00"
            return (f"INSERT INTO comment VALUES ({self.fresh()}, {r.choice(tickets)}, "
                    f"'c{r.randrange(99)}', '{at}')")  # fmt: skip
        if choice == 6:
            if r.random() < 0.5:
                return f"INSERT INTO link VALUES ({self.fresh()}, {r.choice(tickets)}, 'l')"
            return f"INSERT INTO watch VALUES ({self.fresh()}, {r.choice(tickets)}, 'w')"
        if choice == 7:  # a parent's key changes: its children follow (ON UPDATE CASCADE)
            return f"UPDATE ticket SET id = {self.fresh()} WHERE id = {r.choice(tickets)}"
        if choice == 8:
            return f"UPDATE tag SET id = {self.fresh()} WHERE id = {r.choice(tags)}"
        if choice == 9:
            return (f"UPDATE comment SET body = 'edited', ticket_id = {r.choice(tickets)} "
                    "ORDER BY RAND() LIMIT 1")  # fmt: skip
        if choice == 10:  # its tags and comments go with it (ON DELETE CASCADE)
            return f"DELETE FROM ticket WHERE id = {r.choice(tickets)}"
        return f"DELETE FROM tag WHERE id = {r.choice(tags)}"


def _load(db: Any) -> None:
    db.run(TICKETS)
    work = Writes(db, 1)
    work.run(60)
    work.close()


def _keys(client: redis.Redis) -> dict[bytes, tuple[bytes, Any]]:
    """Every key of the mapping, the row images included (not the tool's run state)."""
    out = dump(client)
    for key in client.scan_iter(match="migrator:*:rows:*", count=1000):
        kind = client.type(key)
        out[key] = (kind, client.hgetall(key) if kind == b"hash" else client.smembers(key))
    return out


def _synced_equals_migrated(
    db: Any, mapping: Mapping, redis_url: str, redis_client: redis.Redis
) -> dict[bytes, Any]:
    """Sync ``mapping`` through random writes (resumed between batches); verify exits 0 and
    every key equals what a fresh migrate writes. Returns the keys."""
    sid = next(_ids)
    run = {"source": db.url, "target": redis_url, "until_caught_up": True}
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    work = Writes(db, 2)
    for _ in range(3):
        work.run(70)
        sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    work.close()
    return equals_a_fresh_migrate(db, mapping, redis_url, redis_client)


def equals_a_fresh_migrate(
    db: Any, mapping: Mapping, redis_url: str, redis_client: redis.Redis
) -> dict[bytes, Any]:
    """verify exits 0, and every key (row images included) equals what a fresh migrate of
    the same rows writes; returns the keys."""
    report = verify(mapping, source=db.url, target=redis_url)
    found = [t for t in report.as_dict()["tables"] if t["differences"]]
    assert report.exit_code == 0, [(t["table"], t["differences"], t.get("examples")) for t in found]
    through_log = _keys(redis_client)
    redis_client.flushdb()
    assert migrate(mapping, source=db.url, target=redis_url).exit_code == 0
    migrated = _keys(redis_client)
    for counted in [k for k in through_log if k.endswith(b":id")]:  # counters never lowered
        through_log.pop(counted), migrated.pop(counted, None)
    assert sorted(through_log) == sorted(migrated)
    assert through_log == migrated
    return migrated


def _drafted(db: Any) -> Mapping:
    """The mapping ``migrator init`` drafts, unchanged."""
    return parse_mapping(init(db.url).render(), name="drafted")


def _join_table(db: Any, redis_url: str, redis_client: redis.Redis) -> None:
    _load(db)
    mapping = _drafted(db)
    join = next(t for t in mapping.tables if t.name == "ticket_tag")
    assert join.kind == "none" and join.sets and not join.references  # the draft's shape
    keys = _synced_equals_migrated(db, mapping, redis_url, redis_client)
    pairs = {(int(a), int(b)) for a, b in _rows(db, "SELECT ticket_id, tag_id FROM ticket_tag")}
    assert len(pairs) > 5
    # its rows are their primary key, read back from the members: no images, a SET per value
    # of each foreign key (no reference on either), of the encoded primary keys
    assert b"migrator:drafted:rows:ticket_tag" not in keys
    for n, column in enumerate(("ticket_id", "tag_id")):
        head = b"migrator:drafted:rows:ticket_tag:by:%s:" % column.encode()
        held = {k: v[1] for k, v in keys.items() if k.startswith(head)}
        want: dict[bytes, set[bytes]] = {}
        for pair in pairs:
            value = str(pair[n]).encode()
            key = head + encode_row((value,))
            want.setdefault(key, set()).add(encode_row(tuple(str(v).encode() for v in pair)))
        assert held == want


def _rows(db: Any, sql: str) -> list[tuple[Any, ...]]:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def _on_innodb_fk_mysql(server: Any, body: Callable[[Any], None]) -> None:
    db = create_database(server.url, new_database_name())
    try:
        assert not _logged(db)
        body(db)
    finally:
        drop_database(server.url, db.name)


@pytest.fixture
def mariadb_db(binlog_db: Any) -> Iterator[Any]:
    assert not _logged(binlog_db)
    yield binlog_db


ONLY_MARIADB = "MySQL 9.7's default SQL-layer foreign keys log the cascaded rows; the test with "
ONLY_MARIADB += "innodb_native_foreign_keys=ON below covers MySQL"


@pytest.mark.engine("mariadb", why=ONLY_MARIADB)
def test_the_join_table_init_drafts_follows_its_cascades(  # type: ignore[no-untyped-def]
    mariadb_db, redis_url: str, redis_client: redis.Redis
) -> None:
    _join_table(mariadb_db, redis_url, redis_client)


def test_the_join_table_init_drafts_follows_its_cascades_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis
) -> None:
    _on_innodb_fk_mysql(innodb_fk_mysql, lambda db: _join_table(db, redis_url, redis_client))


# -- formats: and columns: children, no index on the foreign key ------------------------------

SHAPES = """
version: 1
tables:
  ticket: {}
  tag: {}
  comment:
    formats: {at: epoch}
  ticket_tag: {}
  watch:
    columns: [who]
    references: [{columns: [ticket_id], table: ticket}]
  link:
    as: columns
"""


def _shapes(db: Any, redis_url: str, redis_client: redis.Redis) -> None:
    _load(db)
    mapping = parse_mapping(SHAPES, name="shapes")
    keys = _synced_equals_migrated(db, mapping, redis_url, redis_client)
    assert keys[b"migrator:shapes:rows:comment"][0] == b"hash"
    by = [k for k in keys if k.startswith(b"migrator:shapes:rows:comment:by:ticket_id:")]
    assert len(by) > 3  # no index on ticket_id: the images' SET per value finds the rows
    comments = {b"comment:%d" % i for (i,) in _rows(db, "SELECT id FROM comment")}
    assert comments == {k for k in keys if k.startswith(b"comment:")} and len(comments) > 5
    # ticket_tag's hash holds its whole row: no images, a SET per value of each foreign key
    assert b"migrator:shapes:rows:ticket_tag" not in keys
    for column in (b"ticket_id", b"tag_id"):
        assert [k for k in keys if k.startswith(b"migrator:shapes:rows:ticket_tag:by:" + column)]
    watches = {b"watch:%d" % i for (i,) in _rows(db, "SELECT id FROM watch")}
    assert len(keys[b"migrator:shapes:rows:watch"][1]) == len(watches) > 3
    assert not [k for k in keys if k.startswith(b"migrator:shapes:rows:watch:by:")]
    # as: columns, ON DELETE/UPDATE SET NULL, no index: images and a SET per value; the
    # server set some links' ticket_id NULL without a trace in the log
    links = _rows(db, "SELECT id, ticket_id FROM link")
    assert len(keys[b"migrator:shapes:rows:link"][1]) == len(links) > 3
    assert [i for i, t in links if t is None] and [i for i, t in links if t is not None]
    # dry-run's estimate counts the image keys
    report = dry_run(mapping, source=db.url)
    tables = {t["table"]: t for t in report.as_dict()["tables"]}
    assert tables["comment"]["keys"].get("rows", 0) >= 1 + len(by), tables["comment"]
    assert tables["comment"]["memory_bytes"].get("rows", 0) > 0, tables["comment"]


@pytest.mark.engine("mariadb", why=ONLY_MARIADB)
def test_formats_and_columns_children_follow_their_cascades(  # type: ignore[no-untyped-def]
    mariadb_db, redis_url: str, redis_client: redis.Redis
) -> None:
    _shapes(mariadb_db, redis_url, redis_client)


def test_formats_and_columns_children_follow_their_cascades_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis
) -> None:
    _on_innodb_fk_mysql(innodb_fk_mysql, lambda db: _shapes(db, redis_url, redis_client))


# -- verify and verify --fix ------------------------------------------------------------------


def test_verify_compares_the_images_fix_repairs_them_and_replace_removes_them(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, redis_client: redis.Redis
) -> None:
    _load(binlog_db)
    work = Writes(binlog_db, 3)
    work.run(150)
    work.close()
    mapping = parse_mapping(SHAPES, name="shapes")
    assert migrate(mapping, source=binlog_db.url, target=redis_url).exit_code == 0
    migrated = _keys(redis_client)
    images = b"migrator:shapes:rows:comment"
    pks = sorted(redis_client.hkeys(images))
    sets = sorted(k for k in migrated if k.startswith(images + b":by:"))
    member = next(iter(redis_client.smembers(sets[0])))
    redis_client.hdel(images, pks[0])  # a missing image
    redis_client.hset(images, pks[1], b"1:x")  # a wrong one
    redis_client.hset(images, encode_row((b"999999",)), b"6:999999")  # a row MySQL lacks
    redis_client.srem(sets[0], member)  # a missing member
    redis_client.sadd(images + b":by:ticket_id:" + encode_row((b"424242",)), b"x")  # no row's
    report = verify(mapping, source=binlog_db.url, target=redis_url)
    (comment,) = [t for t in report.as_dict()["tables"] if t["table"] == "comment"]
    assert report.exit_code == 1
    assert comment["differences"] == {
        "missing field": 2, "different value": 1, "extra field": 1, "stale key": 1,
    }  # fmt: skip
    fixed = verify(mapping, source=binlog_db.url, target=redis_url, fix=True)
    assert fixed.exit_code == 0, fixed.as_dict()
    assert _keys(redis_client) == migrated
    # migrate --replace removes them with the tables' keys: no stale image or SET survives
    redis_client.hset(images, encode_row((b"999999",)), b"6:999999")
    redis_client.sadd(images + b":by:ticket_id:" + encode_row((b"424242",)), b"x")
    again = migrate(mapping, source=binlog_db.url, target=redis_url, replace=True)
    assert again.exit_code == 0
    assert _keys(redis_client) == migrated
