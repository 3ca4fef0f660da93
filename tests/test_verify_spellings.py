"""A child whose foreign-key value MySQL matches with its parent's under the column's collation,
not byte for byte (``'KEN '`` and ``'kén'`` for ``'Ken'`` under ``utf8mb4_unicode_ci``; as
employees' ``dept_emp.dept_no`` may hold ``'D005'`` for ``'d005'``): its value names a key the
parent's row key is not, and MySQL holds its parent, so ``verify`` reports no dangling
reference (it did, for ever, after a clean ``migrate``: issue 36, found on employees by
tests/sync/test_public_schemas.py). A child whose parent MySQL lacks is still one, and so is a
child spelt as its parent whose row key Redis lost (verify/parents.py once counted it among
those "spelt otherwise", as held)."""

from __future__ import annotations

from pathlib import Path

import redis

from migrator.commands import migrate, verify
from migrator.verify import report as vr
from tests.services import MySQLDatabase, is_mariadb

SCHEMA = """
CREATE TABLE author (name VARCHAR(20) COLLATE utf8mb4_unicode_ci PRIMARY KEY, born INT);
CREATE TABLE book (id INT PRIMARY KEY, title VARCHAR(20),
  author VARCHAR(20) COLLATE utf8mb4_unicode_ci,
  CONSTRAINT fk_book_author FOREIGN KEY (author) REFERENCES author (name));
CREATE TABLE dept (dept_no CHAR(4) PRIMARY KEY, dname VARCHAR(20));
CREATE TABLE dept_emp (emp_no INT, dept_no CHAR(4), PRIMARY KEY (emp_no, dept_no),
  FOREIGN KEY (dept_no) REFERENCES dept (dept_no));
INSERT INTO author VALUES ('Ken', 1943), ('René', 1950);
INSERT INTO book VALUES (1, 'a', 'Ken'), (2, 'b', 'KEN '), (3, 'c', 'kén'), (4, 'd', 'rene'),
  (5, 'e', 'RENÉ'), (6, 'f', 'René'), (7, 'g', NULL);
INSERT INTO dept VALUES ('d001', 'x'), ('d002', 'y');
INSERT INTO dept_emp VALUES (1, 'd001'), (2, 'D001'), (3, 'D002'), (4, 'd002');
SET foreign_key_checks = 0;
INSERT INTO book VALUES (8, 'h', 'Zed');
INSERT INTO dept_emp VALUES (5, 'D009');
"""

MAPPING = """
version: 1
tables:
  author: {}
  book:
    references: [{columns: [author], table: author}]
  dept: {}
  dept_emp:
    references: [{columns: [dept_no], table: dept}]
"""


def _dangling(report: vr.VerifyReport) -> dict[str, tuple[int, list[str], list[str]]]:
    out = {}
    for t in report.tables:
        keys = [d.key for d in t.examples.get(vr.DANGLING, [])]
        out[t.table] = (t.counts[vr.DANGLING], sorted(keys), t.notes)
    return out


def test_children_matched_under_the_collation_are_no_dangling_reference(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    mysql_db.run(SCHEMA)
    path = tmp_path / "m.yaml"
    path.write_text(MAPPING)
    assert migrate(path, source=mysql_db.url, target=redis_url).exit_code == 0
    assert redis_client.hget("book:2", "author") == b"KEN "  # its key would be author:KEN
    report = verify(path, source=mysql_db.url, target=redis_url)
    found = _dangling(report)
    count, keys, notes = found["book"]
    assert (count, keys) == (1, ["book:8"]), found  # 'Zed': MySQL has no such author
    assert any(n.startswith("4 rows of book") and "not counted as dangling" in n for n in notes)
    count, keys, notes = found["dept_emp"]
    assert (count, keys) == (1, ["dept_emp:5:D009"]), found
    assert any(n.startswith("2 rows of dept_emp") and "not counted as dangling" in n for n in notes)
    # the parent Redis lacks, of a child spelled as it is, is still a dangling reference
    redis_client.delete("author:Ken")
    found = _dangling(verify(path, source=mysql_db.url, target=redis_url))
    assert found["book"][:2] == (2, ["book:1", "book:8"]), found
    # and with every child of an existing parent gone, nothing is noted
    mysql_db.run("DELETE FROM book WHERE id IN (2, 3, 4, 5, 8); DELETE FROM dept_emp")
    redis_client.flushdb()
    assert migrate(path, source=mysql_db.url, target=redis_url).exit_code == 0
    clean = verify(path, source=mysql_db.url, target=redis_url)
    assert clean.exit_code == 0 and not any(t.notes for t in clean.tables), clean.as_dict()


FLOATS = """
CREATE TABLE point (x DOUBLE PRIMARY KEY, label VARCHAR(5));
CREATE TABLE hit (id INT PRIMARY KEY, x DOUBLE,
  CONSTRAINT fk_hit_point FOREIGN KEY (x) REFERENCES point (x));
CREATE TABLE cell (y FLOAT PRIMARY KEY);
CREATE TABLE mark (id INT PRIMARY KEY, y FLOAT, FOREIGN KEY (y) REFERENCES cell (y));
INSERT INTO point VALUES (0, 'o'), (1.5, 'a');
INSERT INTO hit VALUES (1, -0e0), (2, 0), (3, 1.5);
INSERT INTO cell VALUES (0), (2.25);
INSERT INTO mark VALUES (1, -0e0), (2, 2.25);
SET foreign_key_checks = 0;
INSERT INTO hit VALUES (4, -1.5);
"""


def test_a_negative_zero_key_references_its_parent_zero(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """MySQL keeps a DOUBLE's or FLOAT's -0 and prints it '-0' (MariaDB stores 0), and its =
    finds the parent 0 for it: no dangling reference (was one on MySQL, for ever)."""
    mysql_db.run(FLOATS)
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\ntables:\n  point: {}\n  hit:\n    references: [{columns: [x], table: point}]\n"
        "  cell: {}\n  mark:\n    references: [{columns: [y], table: cell}]\n"
    )
    assert migrate(path, source=mysql_db.url, target=redis_url).exit_code == 0
    found = _dangling(verify(path, source=mysql_db.url, target=redis_url))
    assert found["hit"][:2] == (1, ["hit:4"]), found  # -1.5: MySQL has no such point
    assert found["mark"][:2] == (0, []), found
    negative = redis_client.hget("hit:1", "x")
    assert negative == (b"0" if is_mariadb(mysql_db.url) else b"-0")  # as the server prints it
    # the parent Redis lacks, of a child spelt as it is, is still a dangling reference (one
    # spelt -0 is held by MySQL, as one spelt otherwise under a collation, above: its parent
    # is reported missing from point)
    redis_client.delete("point:0")
    report = verify(path, source=mysql_db.url, target=redis_url)
    found = _dangling(report)
    spelt = {b"0": ["hit:1", "hit:2"], b"-0": ["hit:2"]}[negative]
    count, keys, _ = found["hit"]  # (examples: one per parent key)
    assert count == len(spelt) + 1 and "hit:4" in keys and set(keys) <= {*spelt, "hit:4"}, found
    assert next(t for t in report.tables if t.table == "point").counts[vr.MISSING_ROW] == 1
