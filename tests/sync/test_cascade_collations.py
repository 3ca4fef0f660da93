"""Cascades on text keys MySQL compares under a collation (issue 36 item 1), on servers whose
log lacks the rows a foreign key's rule changes (MariaDB; MySQL 9.7 with
``innodb_native_foreign_keys=ON``): ``'Ken' = 'KEN '`` under ``utf8mb4_general_ci``, ``'René' =
'rene'`` under ``utf8mb4_unicode_ci``, ``'a' = 'a '`` under the PAD SPACE ``utf8mb4_bin`` on a
VARCHAR, ``'Åke' = 'åke'`` under ``latin1_swedish_ci``. Children hold case, accent and
trailing-space variants of their parent's key; the parents' keys are deleted and updated
(to a variant of themselves too: InnoDB cascades a change of bytes). ``sync`` finds the child
rows by the server's comparison key (source/weights.py), never by their bytes.

Each run, with the mapping ``migrator init`` drafts unchanged, ends with ``verify`` 0 and Redis
equal, key by key, to a fresh ``migrate``. It was refused at start ("where MySQL's equality is
not byte equality").
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from migrator.commands import dry_run, init, verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from tests.sync.helpers import RandomTransactions
from tests.sync.test_cascade_images import ONLY_MARIADB, _on_innodb_fk_mysql, equals_a_fresh_migrate
from tests.sync.test_cascade_images import mariadb_db as mariadb_db
from tests.sync.test_cascade_keys import innodb_fk_mysql as innodb_fk_mysql

_ids = iter(range(8800, 8850))

SCHEMA = """
CREATE TABLE author (name VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, born INT);
CREATE TABLE book (id INT PRIMARY KEY, title VARCHAR(30) NOT NULL,
  author VARCHAR(20) COLLATE utf8mb4_general_ci NOT NULL, KEY (author),
  CONSTRAINT fk_book_author FOREIGN KEY (author) REFERENCES author (name)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE city (name VARCHAR(20) COLLATE utf8mb4_unicode_ci PRIMARY KEY);
CREATE TABLE resident (id INT PRIMARY KEY, who VARCHAR(20) NOT NULL,
  city VARCHAR(20) COLLATE utf8mb4_unicode_ci NULL,
  CONSTRAINT fk_resident_city FOREIGN KEY (city) REFERENCES city (name)
  ON DELETE SET NULL ON UPDATE CASCADE);
CREATE TABLE book_city (book_id INT NOT NULL, city VARCHAR(20) COLLATE utf8mb4_unicode_ci NOT NULL,
  PRIMARY KEY (book_id, city), KEY (city),
  CONSTRAINT fk_bc_book FOREIGN KEY (book_id) REFERENCES book (id) ON DELETE CASCADE,
  CONSTRAINT fk_bc_city FOREIGN KEY (city) REFERENCES city (name)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE code (c VARCHAR(10) COLLATE utf8mb4_bin PRIMARY KEY);
CREATE TABLE coded (id INT PRIMARY KEY, c VARCHAR(10) COLLATE utf8mb4_bin NOT NULL,
  CONSTRAINT fk_coded_code FOREIGN KEY (c) REFERENCES code (c)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE label (c VARCHAR(10) COLLATE utf8mb4_bin PRIMARY KEY);
CREATE TABLE labelled (id INT PRIMARY KEY, c CHAR(10) COLLATE utf8mb4_bin NOT NULL,
  CONSTRAINT fk_labelled_label FOREIGN KEY (c) REFERENCES label (c)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE stamp (c CHAR(10) COLLATE utf8mb4_bin PRIMARY KEY);
CREATE TABLE stamped (id INT PRIMARY KEY, c VARCHAR(10) COLLATE utf8mb4_bin NULL,
  CONSTRAINT fk_stamped_stamp FOREIGN KEY (c) REFERENCES stamp (c)
  ON DELETE SET NULL ON UPDATE CASCADE);
CREATE TABLE tally (k VARBINARY(12) PRIMARY KEY);
CREATE TABLE tallied (id INT PRIMARY KEY, k BINARY(8) NOT NULL,
  CONSTRAINT fk_tallied_tally FOREIGN KEY (k) REFERENCES tally (k)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE region (name VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_swedish_ci PRIMARY KEY);
CREATE TABLE shop (id INT PRIMARY KEY,
  region VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL,
  CONSTRAINT fk_shop_region FOREIGN KEY (region) REFERENCES region (name)
  ON DELETE CASCADE ON UPDATE CASCADE);
"""

#: parent table, its key, the child tables' (table, column), how a value's variants are made
PARENTS = {
    "author": ("name", [("book", "author")], "case"),
    "city": ("name", [("resident", "city"), ("book_city", "city")], "accent"),
    "code": ("c", [("coded", "c")], "space"),
    "region": ("name", [("shop", "region")], "latin1"),
    "label": ("c", [("labelled", "c")], "space"),  # a CHAR child of a VARCHAR parent
    "stamp": ("c", [("stamped", "c")], "space"),  # a VARCHAR child of a CHAR parent
    "tally": ("k", [("tallied", "k")], "binary"),  # a BINARY(8) child of a VARBINARY(12)
}

ACCENTS = str.maketrans({"e": "é", "a": "à", "o": "ô"})


class Writes(RandomTransactions):
    """Random transactions of parents and children whose keys are variants of each other."""

    def __init__(self, db: Any, seed: int) -> None:
        super().__init__(db, seed, spacing=1000)

    def variant(self, value: str, how: str) -> str:
        """A value MySQL's = under the column's collation finds equal to ``value``."""
        r = self.rng
        if how == "space":
            return value.rstrip(" ") + " " * r.randrange(3)
        if how == "binary":  # 8 bytes: what a BINARY(8) holds, and the only parent it matches
            return (value + "xxxxxxxx")[:8]
        if how == "accent" and r.random() < 0.5:
            value = value.translate(ACCENTS) if r.random() < 0.5 else value
        if how == "latin1" and "å" not in value.lower():
            value = "å" + value  # 'Å' = 'å' under latin1_swedish_ci ('å' <> 'a': a letter)
        out = "".join(c.upper() if r.random() < 0.4 else c.lower() for c in value)
        return out + (" " * r.randrange(2) if how != "latin1" else "")

    def keys(self, table: str) -> list[str]:
        column = PARENTS[table][0]
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT {column} FROM {table}")
            return [r[0].decode() if isinstance(r[0], bytes) else r[0] for r in cur.fetchall()]

    def step(self) -> str:
        r = self.rng
        parent = r.choice(sorted(PARENTS))
        column, children, how = PARENTS[parent]
        keys = self.keys(parent)
        choice = r.randrange(12)
        if choice < 2 or len(keys) < 3:
            base = r.choice(["ken", "rene", "ake", "bob", "oda"]) + str(self.fresh() % 40)
            return f"INSERT IGNORE INTO {parent} VALUES ('{self.variant(base, how)}'" + (
                ", 1970)" if parent == "author" else ")"
            )
        key = r.choice(keys)
        if choice == 2:  # the key changes bytes only: InnoDB still cascades it
            other = self.variant(key, how)
            return f"UPDATE IGNORE {parent} SET {column} = '{other}' WHERE {column} = '{key}'"
        if choice == 3:
            new = self.variant(f"new{self.fresh()}", how)
            return f"UPDATE IGNORE {parent} SET {column} = '{new}' WHERE {column} = '{key}'"
        if choice == 4:
            return f"DELETE FROM {parent} WHERE {column} = '{key}'"
        child, fk = r.choice(children)
        value = self.variant(key, how)
        if choice == 5:
            return f"UPDATE IGNORE {child} SET {fk} = '{value}' ORDER BY RAND() LIMIT 1"
        if choice == 6:
            return f"DELETE FROM {child} ORDER BY RAND() LIMIT 1"
        if child == "book":
            return f"INSERT INTO book VALUES ({self.fresh()}, 't{r.randrange(9)}', '{value}')"
        if child == "resident":
            return f"INSERT INTO resident VALUES ({self.fresh()}, 'w', '{value}')"
        if child == "book_city":
            pick = "FROM book ORDER BY RAND() LIMIT 1"
            return f"INSERT IGNORE INTO book_city SELECT id, '{value}' {pick}"
        return f"INSERT INTO {child} VALUES ({self.fresh()}, '{value}')"


def _run(db: Any, redis_url: str, redis_client: redis.Redis) -> None:
    db.run(SCHEMA)
    work = Writes(db, 1)
    work.run(80)
    mapping = parse_mapping(init(db.url).render(), name="collated")  # the draft, unchanged
    sid = next(_ids)
    run = {"source": db.url, "target": redis_url, "until_caught_up": True}
    assert sync(mapping, server_id=sid, **run).exit_code == 0
    for _ in range(3):
        work.run(80)
        assert sync(mapping, server_id=sid, **run).exit_code == 0
    with work.conn.cursor() as cur:  # children whose bytes differ from their parent's key
        cur.execute("SELECT COUNT(*) FROM book JOIN author ON book.author = author.name"
                    " AND BINARY book.author <> BINARY author.name")  # fmt: skip
        variants = cur.fetchone()[0]
        cur.execute("SELECT COUNT(*) FROM labelled JOIN label ON labelled.c = label.c"
                    " AND BINARY labelled.c <> BINARY label.c")  # fmt: skip
        padded = cur.fetchone()[0]  # a CHAR child of a parent key with trailing spaces
        cur.execute("SELECT COUNT(*) FROM tallied")
        binary = cur.fetchone()[0]
    work.close()
    assert variants > 0 and padded > 0 and binary > 0, (variants, padded, binary)
    keys = equals_a_fresh_migrate(db, mapping, redis_url, redis_client)
    weighed = [k for k in keys if k.startswith(b"migrator:collated:rows:book:by:author:")]
    assert len(weighed) > 1, "the children are found by the comparison key of their foreign key"
    redis_client.delete(weighed[0])  # verify names it, --fix writes it back
    redis_client.srem(weighed[1], *redis_client.smembers(weighed[1]))
    assert verify(mapping, source=db.url, target=redis_url).exit_code == 1
    assert verify(mapping, source=db.url, target=redis_url, fix=True).exit_code == 0
    assert verify(mapping, source=db.url, target=redis_url).exit_code == 0
    tables = {t["table"]: t for t in dry_run(mapping, source=db.url).as_dict()["tables"]}
    assert tables["book"]["keys"].get("rows", 0) >= 1 + len(weighed), tables["book"]  # the cost


@pytest.mark.engine("mariadb", why=ONLY_MARIADB)
def test_text_keys_under_a_collation_are_followed(  # type: ignore[no-untyped-def]
    mariadb_db, redis_url: str, redis_client: redis.Redis
) -> None:
    _run(mariadb_db, redis_url, redis_client)


def test_text_keys_under_a_collation_are_followed_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis
) -> None:
    _on_innodb_fk_mysql(innodb_fk_mysql, lambda db: _run(db, redis_url, redis_client))
