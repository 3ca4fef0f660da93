"""Cascades into children with ``expire:`` (issue 36 item 1), on servers whose log lacks the
rows a foreign key's rule changes (MariaDB; MySQL 9.7 with ``innodb_native_foreign_keys=ON``):
such a child keeps row images and SETs per value like any other (plan/row_images.py), shared
structures without a TTL of their own that sync's sweep empties with the row.

A ``formats:`` child (its row not readable back: images) a hash child with no index on its
``SET NULL`` foreign key (SETs per value) and a child whose text key is compared under
``utf8mb4_general_ci`` (spelt otherwise: 'K1 ' = 'k1'; images and SETs by the server's
comparison key), each with ``expire:`` on a column holding NULL, past,
far and near moments, under random writes with parents' DELETEs and key UPDATEs; the near
moments pass while sync follows, so the sweep removes rows, their images and members. Each run
ends with ``verify`` 0 and Redis equal, key by key, to a fresh ``migrate``.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import redis

from migrator.commands import dry_run, migrate, verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.plan.expiry import encode_row
from tests.sync.helpers import RandomTransactions
from tests.sync.test_cascade_images import (
    ONLY_MARIADB,
    _on_innodb_fk_mysql,
    equals_a_fresh_migrate,
)
from tests.sync.test_cascade_images import innodb_fk_mysql as innodb_fk_mysql
from tests.sync.test_cascade_images import mariadb_db as mariadb_db

_ids = iter(range(8850, 8900))

SCHEMA = """
CREATE TABLE ticket (id INT PRIMARY KEY, title VARCHAR(40) NOT NULL,
  code VARCHAR(10) COLLATE utf8mb4_general_ci NULL, UNIQUE KEY (code));
CREATE TABLE comment (id INT PRIMARY KEY, ticket_id INT NOT NULL, body VARCHAR(40),
  ends DATETIME NULL,
  CONSTRAINT fk_comment_ticket FOREIGN KEY (ticket_id) REFERENCES ticket (id)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE link (id INT PRIMARY KEY, ticket_id INT NULL, label VARCHAR(20),
  ends DATETIME NULL,
  CONSTRAINT fk_link_ticket FOREIGN KEY (ticket_id) REFERENCES ticket (id)
  ON DELETE SET NULL ON UPDATE CASCADE);
CREATE TABLE mention (id INT PRIMARY KEY, code VARCHAR(10) COLLATE utf8mb4_general_ci NULL,
  ends DATETIME NULL,
  CONSTRAINT fk_mention_ticket FOREIGN KEY (code) REFERENCES ticket (code)
  ON DELETE CASCADE ON UPDATE CASCADE);
"""
MAPPING = """
version: 1
tables:
  ticket: {}
  comment:
    formats: {ends: epoch}
    expire: {column: ends}
  link:
    expire: {column: ends}
  mention:
    indexes: [code]
    expire: {column: ends}
"""


class Writes(RandomTransactions):
    """Random transactions: children with NULL, past, far and near moments; parents deleted
    and re-keyed (cascaded by the server, not logged); moments moved."""

    near: datetime

    def ids(self, table: str) -> list[int]:
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT id FROM {table} ORDER BY 1")
            return [r[0] for r in cur.fetchall()]

    def moment(self) -> str:
        r = self.rng
        if r.random() < 0.15:
            return f"'{self.near:%Y-%m-%d %H:%M:%S}'"
        return r.choice(["NULL", "'2000-01-01 00:00:00'", "'2999-01-01 00:00:00'",
                         "'2998-06-01 12:00:00'"])  # fmt: skip

    def step(self) -> str:
        r = self.rng
        tickets = self.ids("ticket")
        choice = r.randrange(12)
        if choice < 2 or not tickets:
            n = self.fresh()
            return f"INSERT INTO ticket VALUES ({n}, 't{r.randrange(99)}', 'k{n}')"
        if r.random() < 0.25:  # a mention spelt otherwise ('K1 ' = 'k1'), or its key changed
            with self.conn.cursor() as cur:
                cur.execute("SELECT code FROM ticket ORDER BY RAND() LIMIT 1")
                (code,) = cur.fetchone() or ("",)
            if code and r.random() < 0.7:
                spelt = r.choice([code, code.upper(), code + " "])
                return f"INSERT INTO mention VALUES ({self.fresh()}, '{spelt}', {self.moment()})"
            if code:
                new = r.choice([code.upper(), f"k{self.fresh()}"])
                return f"UPDATE IGNORE ticket SET code = '{new}' WHERE code = '{code}'"
        if choice < 5:
            return (f"INSERT INTO comment VALUES ({self.fresh()}, {r.choice(tickets)}, "
                    f"'c{r.randrange(99)}', {self.moment()})")  # fmt: skip
        if choice < 7:
            return (f"INSERT INTO link VALUES ({self.fresh()}, {r.choice(tickets)}, "
                    f"'l{r.randrange(9)}', {self.moment()})")  # fmt: skip
        if choice == 7:
            table = r.choice(["comment", "link"])
            return f"UPDATE {table} SET ends = {self.moment()} ORDER BY RAND() LIMIT 1"
        if choice == 8:
            return (f"UPDATE link SET ticket_id = {r.choice(tickets)}, label = 'moved' "
                    "ORDER BY RAND() LIMIT 1")  # fmt: skip
        if choice == 9:  # its children follow, not logged (ON UPDATE CASCADE)
            return f"UPDATE ticket SET id = {self.fresh()} WHERE id = {r.choice(tickets)}"
        return f"DELETE FROM ticket WHERE id = {r.choice(tickets)}"


def _expiring(db: Any, redis_url: str, redis_client: redis.Redis) -> None:
    db.run(SCHEMA)
    mapping = parse_mapping(MAPPING, name="expiring")
    sid = next(_ids)
    run = {"source": db.url, "target": redis_url, "until_caught_up": True}
    work = Writes(db, 5)
    work.near = datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(seconds=20)
    work.run(40)
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    for _ in range(3):
        work.run(50)
        sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    work.close()
    soon = int((work.near + timedelta(seconds=1)).replace(tzinfo=timezone.utc).timestamp() * 1000)
    near = sum(redis_client.zcount(f"migrator:expiring:expiry:{t}", 0, soon)
               for t in ("comment", "link"))  # fmt: skip
    assert near > 0  # rows the sweep is to remove
    time.sleep(max(0.0, (work.near - datetime.now(timezone.utc).replace(tzinfo=None))
                   .total_seconds()) + 0.5)  # fmt: skip
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]  # the sweep
    keys = equals_a_fresh_migrate(db, mapping, redis_url, redis_client)
    images = keys[b"migrator:expiring:rows:comment"][1]
    live = db.query("SELECT COUNT(*) FROM comment WHERE ends IS NULL OR ends > UTC_TIMESTAMP()")
    assert len(images) == live[0][0] > 3
    assert [k for k in keys if k.startswith(b"migrator:expiring:rows:comment:by:ticket_id:")]
    assert [k for k in keys if k.startswith(b"migrator:expiring:rows:link:by:ticket_id:")]
    assert b"migrator:expiring:rows:link" not in keys  # its hash gives its rows back
    # a key under a collation: images, and SETs by the server's comparison key
    assert len(keys[b"migrator:expiring:rows:mention"][1]) > 3
    (nulled,) = db.query("SELECT COUNT(*) FROM link WHERE ticket_id IS NULL")[0]
    assert nulled, "no SET NULL ran"
    report = dry_run(mapping, source=db.url)
    tables = {t["table"]: t for t in report.as_dict()["tables"]}
    assert tables["comment"]["memory_bytes"].get("rows", 0) > 0, tables["comment"]


@pytest.mark.engine("mariadb", why=ONLY_MARIADB)
def test_expiring_children_follow_their_cascades(  # type: ignore[no-untyped-def]
    mariadb_db, redis_url: str, redis_client: redis.Redis
) -> None:
    _expiring(mariadb_db, redis_url, redis_client)


def test_expiring_children_follow_their_cascades_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis
) -> None:
    _on_innodb_fk_mysql(innodb_fk_mysql, lambda db: _expiring(db, redis_url, redis_client))


def test_verify_leaves_the_images_of_rows_near_their_moment_unjudged(  # type: ignore[no-untyped-def]
    mysql_db, redis_url: str, redis_client: redis.Redis
) -> None:
    """Rows within verify's tolerance of their moment (verify/expiry.py) explain their images
    and members, present or not: no extra field, no stale member."""
    mysql_db.run(SCHEMA)
    soon = datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(seconds=1.5)
    mysql_db.run(
        "INSERT INTO ticket VALUES (1, 't', 'k1');"
        "INSERT INTO comment VALUES (1, 1, 'a', '2999-01-01 00:00:00'), "
        f"(2, 1, 'b', '{soon:%Y-%m-%d %H:%M:%S.%f}'), (3, 1, 'c', '{soon:%Y-%m-%d %H:%M:%S.%f}')"
    )
    mapping = parse_mapping(MAPPING, name="near")
    assert migrate(mapping, source=mysql_db.url, target=redis_url).exit_code == 0
    assert redis_client.hlen(b"migrator:near:rows:comment") == 3
    report = verify(mapping, source=mysql_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()
    redis_client.hdel(b"migrator:near:rows:comment", encode_row((b"2",)))  # swept early: fine
    report = verify(mapping, source=mysql_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()
