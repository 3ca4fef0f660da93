"""Children nested in their parent's JSON document (``nest:``; docs/mapping.md#nested-children)
on real servers: the seeds' books with their tags nested, notes nested in the tags (a map,
third level) and a one-to-one detail (an object); each document compared with one built here
from MySQL queries, verify 0, a changed child found by verify and repaired by --fix; what
validate, migrate and sync refuse."""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands import dry_run, migrate, verify
from migrator.commands.validate import validate
from migrator.errors import MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.verify import report as vr
from tests.services import MySQLDatabase

SAMPLE = (Path(__file__).parent.parent / "samples" / "book_tag.sql").read_text()

MORE = """
CREATE TABLE note (
  id INT PRIMARY KEY, tagname VARCHAR(32) NOT NULL, book_id INT NOT NULL,
  body VARCHAR(64) NOT NULL, `rank` INT NULL,
  CONSTRAINT fk_note_tag FOREIGN KEY (tagname, book_id) REFERENCES tag (tagname, book_id)
) CHARACTER SET utf8mb4;
CREATE TABLE detail (
  book_id INT PRIMARY KEY, pages INT NOT NULL, price DECIMAL(8,2) NULL,
  CONSTRAINT fk_detail_book FOREIGN KEY (book_id) REFERENCES book (id)
) CHARACTER SET utf8mb4;
INSERT INTO note VALUES (10, 'ruby', 2, 'rails is ruby', 2), (11, 'ruby', 2, 'again', 1),
  (12, 'ruby', 2, 'tie', 1), (13, 'web', 2, 'web "notes"', NULL), (14, 'erlang', 3, 'otp', 5);
INSERT INTO detail VALUES (1, 448, 39.99), (3, 536, NULL);
CREATE TABLE pair (
  id INT PRIMARY KEY, a INT NOT NULL, b INT NOT NULL,
  FOREIGN KEY (a) REFERENCES book (id), FOREIGN KEY (b) REFERENCES book (id)
);
INSERT INTO pair VALUES (7, 1, 2), (5, 1, 3), (6, 3, 3);
"""

MAPPING = """
version: 1
tables:
  book:
    as: {kind}
    counter: false
  tag:
    as: none
    counter: false
    columns: [tagname]
    nest: {{in: book, as: tags, order: tagname}}
  note:
    as: none
    counter: false
    nest: {{in: tag, as: notes, kind: {note_kind}{order}}}
  detail:
    as: none
    counter: false
    nest: {{in: book, as: detail, kind: object}}
"""


def load(db: MySQLDatabase) -> None:
    db.run(SAMPLE)
    db.run(MORE)


def mapping_of(kind: str = "json-string", note_kind: str = "map") -> Any:
    order = ", order: rank" if note_kind == "array" else ""
    return parse_mapping(MAPPING.format(kind=kind, note_kind=note_kind, order=order))


def migrated(db: MySQLDatabase, url: str) -> Any:
    """The sample loaded into MySQL and migrated (json-string, notes as a map): its mapping."""
    load(db)
    m = mapping_of()
    assert migrate(m, source=db.url, target=url).exit_code == 0
    return m


def expected(db: MySQLDatabase, note_kind: str = "map") -> dict[str, Any]:
    """Each book's document, built from MySQL queries here (not by the tool's code)."""
    docs: dict[str, Any] = {}
    for bid, name, author in db.query("SELECT id, name, author FROM book"):
        detail = db.query("SELECT pages, price FROM detail WHERE book_id = %s", (bid,))
        tags = []
        for (tagname,) in db.query(
            "SELECT tagname FROM tag WHERE book_id = %s ORDER BY CAST(tagname AS BINARY)", (bid,)
        ):
            notes = db.query(
                "SELECT id, body, `rank` FROM note WHERE tagname = %s AND book_id = %s "
                "ORDER BY `rank` IS NOT NULL, `rank`, id",
                (tagname, bid),
            )
            # a child's document: its written columns (a nested table's default: every one,
            # the primary key's included)
            items = [
                (str(i), {"id": i, "body": body, "rank": rank, "tagname": tagname, "book_id": bid})
                for i, body, rank in notes
            ]
            tags.append(
                {"tagname": tagname,
                 "notes": dict(items) if note_kind == "map" else [v for _, v in items]}
            )  # fmt: skip
        docs[f"book:{bid}"] = {
            "name": name,
            "author": author,
            "tags": tags,
            "detail": None
            if not detail
            else {
                "book_id": bid,
                "pages": detail[0][0],
                "price": None if detail[0][1] is None else str(detail[0][1]),
            },
        }
    return docs


def stored(client: redis.Redis, kind: str) -> dict[str, Any]:
    out = {}
    for key in sorted(client.scan_iter("book:*")):
        text = key.decode()
        out[text] = client.json().get(text) if kind == "json" else json.loads(client.get(key))
    return out


@pytest.mark.parametrize("note_kind", ["map", "array"])
def test_migrate_nests_two_levels_and_an_object(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, note_kind: str
) -> None:
    load(mysql_db)
    m = mapping_of(note_kind=note_kind)
    report = migrate(m, source=mysql_db.url, target=redis_url)
    assert report.exit_code == 0
    assert stored(redis_client, "json-string") == expected(mysql_db, note_kind)
    # canonical bytes: keys sorted, no spaces, as any document of the tool
    text = redis_client.get("book:2")
    assert (
        text
        == json.dumps(
            json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
    )
    # the children write nothing of their own (as: none)
    keys = [k for k in redis_client.keys("*") if not k.startswith(b"migrator:")]
    assert sorted(keys) == [b"book:1", b"book:2", b"book:3"]
    ok = verify(m, source=mysql_db.url, target=redis_url)
    assert ok.exit_code == 0, ok.as_dict()


def test_verify_finds_a_changed_child_and_fix_repairs_it(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    m = migrated(mysql_db, redis_url)
    doc = json.loads(redis_client.get("book:2"))
    doc["tags"][0]["notes"]["10"]["body"] = "changed"
    redis_client.set("book:2", json.dumps(doc))
    # and MySQL moves on: a tag moves to another book, a note is deleted, a detail added
    mysql_db.run(
        "DELETE FROM note WHERE id = 13; UPDATE tag SET book_id = 1 "
        "WHERE tagname = 'web' AND book_id = 2; INSERT INTO note VALUES (13, 'web', 1, 'moved', "
        "NULL); DELETE FROM note WHERE id = 14; INSERT INTO detail VALUES (2, 10, 1.50)"
    )
    found = verify(m, source=mysql_db.url, target=redis_url)
    assert found.exit_code == 1
    book = next(t for t in found.tables if t.table == "book")
    # books 1, 2 and 3, and the rows kept beside them for sync (plan/nesting_side.py)
    assert book.counts[vr.DIFFERENT_VALUE] > 3, book.as_dict()
    fixed = verify(m, source=mysql_db.url, target=redis_url, fix=True)
    assert fixed.exit_code == 0, fixed.as_dict()
    assert stored(redis_client, "json-string") == expected(mysql_db)
    assert verify(m, source=mysql_db.url, target=redis_url).exit_code == 0


def test_redisjson_documents_read_by_a_stock_client(
    mysql_db: MySQLDatabase, modules_redis_url: str
) -> None:
    load(mysql_db)
    m = mapping_of("json")
    assert migrate(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0
    client = redis.Redis.from_url(modules_redis_url)
    assert client.type("book:2") == b"ReJSON-RL"
    assert stored(client, "json") == expected(mysql_db)
    assert client.json().get("book:2", "$.tags[*].tagname") == ["ruby", "web"]
    client.json().set("book:3", "$.tags[0].notes.14.rank", 6)
    assert verify(m, source=mysql_db.url, target=modules_redis_url).exit_code == 1
    verify(m, source=mysql_db.url, target=modules_redis_url, fix=True)
    assert verify(m, source=mysql_db.url, target=modules_redis_url).exit_code == 0
    assert stored(client, "json") == expected(mysql_db)


BAD = [
    ("book:\n    as: hash\n  tag:\n    nest: {in: book, as: tags}\n", "is mapped as: hash"),
    ("book:\n    as: json-string\n  tag:\n    nest: {in: note, as: tags}\n"
     "  note:\n    nest: {in: tag, as: notes}\n", "a cycle"),
    ("book:\n    as: json-string\n  detail:\n    nest: {in: tag, as: d}\n  tag:\n"
     "    nest: {in: book, as: tags}\n", "no foreign key"),
    ("book:\n    as: json-string\n  tag:\n    nest: {in: book, as: name}\n", "a field of book"),
    ("book:\n    as: json-string\n  tag:\n    nest: {in: book, as: tags}\n"
     "  note:\n    columns: [body]\n    nest: {in: tag, as: notes}\n", "are not read"),
    ("book:\n    as: json-string\n  tag:\n    nest: {in: book, as: tags}\n    expire: 1h\n",
     "a nested table's rows live in their parent's document"),
    ("book:\n    as: json-string\n  pair:\n    nest: {in: book, as: p}\n", "2 foreign keys"),
    ("book:\n    as: json-string\n  tag:\n    nest: {in: book, as: x}\n"
     "  detail:\n    nest: {in: book, as: x}\n", "share a field name"),
]  # fmt: skip


@pytest.mark.parametrize(("tables", "why"), BAD)
def test_validate_and_migrate_refuse_what_cannot_nest(
    mysql_db: MySQLDatabase, redis_url: str, tables: str, why: str
) -> None:
    load(mysql_db)
    text = "version: 1\ntables:\n  " + tables
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.yaml"
        path.write_text(text)
        report = validate(path, mysql_db.url)
    errors = [str(p) for p in report.problems if p.level == "error"]
    assert any(why in e for e in errors), [str(p) for p in report.problems]
    with pytest.raises(MigratorError, match=why):
        migrate(parse_mapping(text), source=mysql_db.url, target=redis_url)


def test_a_child_whose_columns_leave_out_the_foreign_key_is_told_to_add_them(
    mysql_db: MySQLDatabase,
) -> None:
    """The hint once said "point the foreign key at the parent's primary key", which it did."""
    load(mysql_db)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.yaml"
        path.write_text("version: 1\ntables:\n  " + BAD[4][0])
        report = validate(path, mysql_db.url)
    hints = [p.hint for p in report.problems if p.level == "error"]
    assert hints == ["add tagname, book_id to tables.note.columns (a child is filed under its "
                     "parent by them)"], report.problems  # fmt: skip


def test_rows_of_no_document_above_another_are_kept_beside_the_documents(
    mysql_db: MySQLDatabase, redis_url: str
) -> None:
    """A nesting through a foreign key that may be NULL, on a table that nests another: a row
    with a NULL key is in no document, but it and the rows below it are kept beside the
    documents (docs/mapping.md), for sync to write them when the key is set; verify compares
    them and --fix repairs them; validate no longer warns of it."""
    load(mysql_db)
    mysql_db.run(
        "CREATE TABLE extra (id INT PRIMARY KEY, book_id INT NULL, "
        "FOREIGN KEY (book_id) REFERENCES book (id)); CREATE TABLE extra_item (id INT PRIMARY "
        "KEY, extra_id INT NOT NULL, FOREIGN KEY (extra_id) REFERENCES extra (id)); "
        "INSERT INTO extra VALUES (1, NULL), (2, 1); INSERT INTO extra_item VALUES (1, 1), (2, 2)"
    )
    text = MAPPING.format(kind="json-string", note_kind="map", order="")
    text += "  extra:\n    as: none\n    counter: false\n    nest: {in: book, as: extras}\n"
    text += "  extra_item:\n    as: none\n    counter: false\n    nest: {in: extra, as: items}\n"
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.yaml"
        path.write_text(text)
        report = validate(path, mysql_db.url)
    assert not [str(p) for p in report.problems if "extra" in str(p)], report.problems
    m = parse_mapping(text, name="kept")
    assert migrate(m, source=mysql_db.url, target=redis_url).exit_code == 0
    r = redis.Redis.from_url(redis_url)
    doc = json.loads(r.get("book:1") or b"")
    assert doc["extras"] == [{"id": 2, "book_id": 1, "items": [{"id": 2, "extra_id": 2}]}]
    assert set(r.hgetall("migrator:kept:nest:extra")) == {b"1:1", b"1:2"}  # extra 1 besides
    below = b"migrator:kept:nest:extra_item:in:1:1"  # extra 1's items: in no document
    assert r.smembers(below) == {b"1:1"} and r.hexists("migrator:kept:nest:extra_item", b"1:1")
    assert verify(m, source=mysql_db.url, target=redis_url).exit_code == 0
    # dry-run's estimate counts them, under the top table's structure nest
    book = next(t for t in dry_run(m, source=mysql_db.url).tables if t.table == "book")
    assert book.keys["nest"] == len(list(r.scan_iter("migrator:kept:nest:*"))) > 0, book.keys
    assert book.memory["nest"] > 0
    r.delete(below)
    r.hdel("migrator:kept:nest:extra", b"1:1")
    found = verify(m, source=mysql_db.url, target=redis_url)
    assert found.exit_code == 1
    differ = {d.key for t in found.tables for ds in t.examples.values() for d in ds}
    assert {below.decode(), "migrator:kept:nest:extra"} <= differ, differ
    assert verify(m, source=mysql_db.url, target=redis_url, fix=True).exit_code == 0
    assert r.smembers(below) == {b"1:1"} and r.hexists("migrator:kept:nest:extra", b"1:1")
    assert verify(m, source=mysql_db.url, target=redis_url).exit_code == 0
    # migrate --replace removes them with the tree's keys: gone once MySQL has them no more
    mysql_db.run("DELETE FROM extra_item WHERE id = 1; DELETE FROM extra WHERE id = 1")
    assert migrate(m, source=mysql_db.url, target=redis_url, replace=True).exit_code == 0
    assert not r.exists(below) and not r.hexists("migrator:kept:nest:extra", b"1:1")
    assert r.hexists("migrator:kept:nest:extra", b"1:2")


def test_dry_run_samples_the_nested_documents_and_refuses_resp(
    mysql_db: MySQLDatabase, tmp_path: Path
) -> None:
    load(mysql_db)
    m = mapping_of()
    report = dry_run(m, source=mysql_db.url, sample=2)
    book = next(t for t in report.tables if t.table == "book")
    want = expected(mysql_db)
    shown = [json.loads(shlex.split(line)[-1]) for line in book.sample if line.startswith("SET")]
    assert shown == [want["book:1"], want["book:2"]]
    # the rows kept beside the documents for sync (plan/nesting_side.py)
    assert "HSET migrator:mapping:nest:book" in "\n".join(book.sample), book.sample
    assert any(line.startswith("SADD migrator:mapping:nest:tag:in:") for line in book.sample)
    with pytest.raises(MigratorError, match="--resp cannot yet write nested documents"):
        dry_run(m, source=mysql_db.url, resp_file=tmp_path / "load.resp")


def test_the_docs_example_writes_what_it_says(mysql_db: MySQLDatabase) -> None:
    text = (Path(__file__).parent.parent / "docs" / "mapping.md").read_text(encoding="utf-8")
    section = text.split("#### Nested children", 1)[1]
    mapping_text, rest = section.split("```yaml\n", 1)[1].split("```", 1)
    said = rest.split("```\n", 1)[1].split("```", 1)[0].splitlines()
    mysql_db.run(SAMPLE)
    report = dry_run(parse_mapping(mapping_text), source=mysql_db.url, sample=10)
    book = next(t for t in report.tables if t.table == "book")
    written = [shlex.split(line) for line in book.sample if line.startswith("SET")]
    assert [" ".join(w) for w in written] == said


def test_an_object_holds_the_lowest_key_and_where_keeps_rows(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    load(mysql_db)
    text = """
version: 1
tables:
  book:
    as: json-string
    counter: false
    columns: [name]
  pair:
    as: none
    counter: false
    columns: [b]
    nest: {in: book, as: first, by: a, kind: object}
  tag:
    as: none
    counter: false
    columns: [tagname]
    where: "tagname <> 'ruby'"
    nest: {in: book, as: tags}
"""
    m = parse_mapping(text)
    assert migrate(m, source=mysql_db.url, target=redis_url).exit_code == 0
    got = stored(redis_client, "json-string")
    assert got["book:1"]["first"] == {"b": 3}  # pairs 5 and 7 point at book 1: 5 is kept
    assert got["book:2"] == {"name": "Ruby on rail", "first": None, "tags": [{"tagname": "web"}]}
    assert got["book:1"]["tags"] == [] and got["book:3"]["tags"] == [{"tagname": "erlang"}]
    assert verify(m, source=mysql_db.url, target=redis_url).exit_code == 0


def test_replace_removes_the_rows_kept_beside_the_documents(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    m = migrated(mysql_db, redis_url)
    assert redis_client.hlen("migrator:mapping:nest:note") == 5
    redis_client.sadd("migrator:mapping:nest:note:in:stale", "x")
    mysql_db.run("DELETE FROM note WHERE id = 14")
    assert migrate(m, source=mysql_db.url, target=redis_url, replace=True).exit_code == 0
    assert redis_client.exists("migrator:mapping:nest:note:in:stale") == 0
    assert redis_client.hlen("migrator:mapping:nest:note") == 4
    assert verify(m, source=mysql_db.url, target=redis_url).exit_code == 0


def test_migrate_of_a_child_table_writes_its_parents_documents_again(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    m = migrated(mysql_db, redis_url)
    mysql_db.run("INSERT INTO note VALUES (20, 'erlang', 3, 'new', 1)")
    assert migrate(m, source=mysql_db.url, target=redis_url, tables=["note"]).exit_code == 0
    assert stored(redis_client, "json-string") == expected(mysql_db)
    assert verify(m, source=mysql_db.url, target=redis_url).exit_code == 0
