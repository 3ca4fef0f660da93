"""Nested documents (``nest:``) over a sharded source (docs/sharding.md#nested-documents): each
document built from its top row's shard, its children and grandchildren read there; migrate,
dry-run, verify and --fix over two shards (databases of their own on the engine's server),
Redis equal to documents built here from the rows alone; a child whose parent row is on the
other shard reported by migrate and verify (exit 1, both shards and the SQL), a colliding top
row's document kept from the first shard."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import migrate
from migrator.commands.dryrun import dry_run
from migrator.commands.verify import verify
from migrator.verify import report as vr
from tests.services import MySQLDatabase, shard_databases

SCHEMA = """
CREATE TABLE book (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, genre VARCHAR(10) NOT NULL,
                   KEY (genre));
CREATE TABLE tag (id INT PRIMARY KEY, book_id INT NOT NULL, tagname VARCHAR(20) NOT NULL,
  CONSTRAINT fk_tag_book FOREIGN KEY (book_id) REFERENCES book (id)
    ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE note (id INT PRIMARY KEY, tag_id INT NOT NULL, body VARCHAR(40) NOT NULL,
  CONSTRAINT fk_note_tag FOREIGN KEY (tag_id) REFERENCES tag (id)
    ON DELETE CASCADE ON UPDATE CASCADE);
"""
TABLES = """tables:
  book:
    as: json-string
    counter: false
    indexes: [genre]
  tag:
    as: none
    counter: false
    nest: {in: book, as: tags, order: tagname}
  note:
    as: none
    counter: false
    nest: {in: tag, as: notes}
"""
#: per shard: books (id, name, genre), tags (id, book_id, tagname), notes (id, tag_id, body)
EAST = {
    "book": [(1, "ruby", "prog"), (2, "erlang", "prog"), (3, "poems", "verse")],
    "tag": [(1, 1, "web"), (2, 1, "lang"), (3, 2, "otp")],
    "note": [(1, 1, "rails"), (2, 1, "sinatra"), (3, 3, "beam")],
}
WEST = {
    "book": [(101, "go", "prog"), (102, "odes", "verse")],
    "tag": [(101, 101, "lang"), (102, 102, "old")],
    "note": [(101, 101, "goroutines")],
}


def fill(db: MySQLDatabase, rows: dict[str, list[tuple]], checks: bool = True) -> None:
    off = "" if checks else "SET foreign_key_checks = 0; "
    for table in ("book", "tag", "note"):
        for row in rows.get(table, []):
            db.run(f"{off}INSERT INTO {table} VALUES ({', '.join(repr(v) for v in row)})")


@pytest.fixture
def two(mysql_server_url: str) -> Iterator[tuple[MySQLDatabase, MySQLDatabase]]:
    with shard_databases(mysql_server_url, SCHEMA) as (east, west):
        yield east, west


def mapping_file(tmp_path: Path, two: tuple[MySQLDatabase, MySQLDatabase], redis_url: str) -> Path:
    east, west = two
    f = tmp_path / "shop.yaml"
    shards = f'  - {{name: east, url: "{east.url}"}}\n  - {{name: west, url: "{west.url}"}}\n'
    f.write_text(f"version: 1\nsources:\n{shards}target: {redis_url}\n{TABLES}")
    return f


def documents(*shards: dict[str, list[tuple]]) -> dict[str, Any]:
    """Each book's document, built here from the rows: its children from its own shard."""
    out: dict[str, Any] = {}
    for rows in shards:
        for bid, name, genre in rows["book"]:
            if f"book:{bid}" in out:
                continue  # (a colliding book: Redis holds the first shard's)
            tags = sorted((t for t in rows["tag"] if t[1] == bid), key=lambda t: (t[2], t[0]))
            out[f"book:{bid}"] = {
                "name": name, "genre": genre,
                "tags": [{"id": t_id, "book_id": bid, "tagname": tagname,
                          "notes": [{"id": n, "tag_id": tid, "body": body}
                                    for n, tid, body in sorted(rows["note"]) if tid == t_id]}
                         for t_id, _, tagname in tags],
            }  # fmt: skip
    return out


def stored(client: redis.Redis) -> dict[str, Any]:
    return {k.decode(): json.loads(client.get(k)) for k in client.scan_iter(b"book:[0-9]*")}


def test_documents_over_two_shards_are_built_from_their_top_rows_shard(
    two, tmp_path, redis_url, redis_client
):
    east, west = two
    fill(east, EAST)
    fill(west, WEST)
    f = mapping_file(tmp_path, two, redis_url)
    plan = dry_run(f, sample=2)
    assert {t.table: t.rows for t in plan.tables} == {"book": 5, "tag": 5, "note": 4}
    book = next(t for t in plan.tables if t.table == "book")
    shown = [json.loads(shlex.split(line)[-1]) for line in book.sample if line.startswith("SET")]
    want = documents(EAST, WEST)
    assert shown == [want["book:1"], want["book:2"]]  # the first shard's, children from it
    # the memory estimate counts the nested tables' owner hashes, one field per row
    owned = {t.table: (t.keys.get("shard"), t.memory.get("shard", 0)) for t in plan.tables}
    assert {t: k for t, (k, _) in owned.items()} == {"book": 1, "tag": 1, "note": 1}, owned
    assert all(m > 0 for _, m in owned.values()), owned
    report = migrate(f)
    assert report.exit_code == 0, [(t.table, t.rejects) for t in report.tables]
    assert stored(redis_client) == documents(EAST, WEST)
    assert redis_client.smembers(b"book:indices:genre:verse") == {b"3", b"102"}
    assert redis_client.hgetall(b"migrator:shop:shard:book") == {
        b"1:1": b"east",
        b"1:2": b"east",
        b"1:3": b"east",
        b"3:101": b"west",
        b"3:102": b"west",
    }
    assert redis_client.hgetall(b"migrator:shop:shard:note") == {  # a nested table's too
        b"1:1": b"east", b"1:2": b"east", b"1:3": b"east", b"3:101": b"west",
    }  # fmt: skip
    clean = verify(f)
    assert clean.exit_code == 0, [(t.table, t.counts, t.examples) for t in clean.tables]
    # a west document changed and one removed: found, and --fix writes them again
    redis_client.set(b"book:101", json.dumps({"name": "go", "genre": "prog", "tags": []}))
    redis_client.delete(b"book:2")
    found = verify(f)
    assert found.exit_code == 1
    assert {t.table: dict(t.counts) for t in found.tables if t.counts} == {
        "book": {vr.DIFFERENT_VALUE: 1, vr.MISSING_ROW: 1}
    }
    assert verify(f, fix=True).exit_code == 0
    assert verify(f).exit_code == 0
    assert stored(redis_client) == documents(EAST, WEST)


def test_a_child_on_another_shard_than_its_parent_is_reported(
    two, tmp_path, redis_url, redis_client
):
    east, west = two
    fill(east, EAST)
    fill(west, WEST)
    # west's tag 103 names east's book 1 (written with the foreign-key checks off), and a
    # note under it; west's book 2 collides with east's, with a tag of its own
    fill(west, {"tag": [(103, 1, "cross")], "note": [(102, 103, "under cross")]}, checks=False)
    fill(west, {"book": [(2, "erlang2", "prog")], "tag": [(104, 2, "west-only")]})
    f = mapping_file(tmp_path, two, redis_url)
    book = next(t for t in dry_run(f, sample=1).tables if t.table == "book")
    (line,) = [line for line in book.sample if line.startswith("SET")]
    assert json.loads(shlex.split(line)[-1]) == documents(EAST)["book:1"]  # not west's tag
    shown = CliRunner().invoke(app, ["migrate", str(f)])
    assert shown.exit_code == 1, shown.output
    said = " ".join(shown.output.split())
    assert "tag (id=103) is on shard west, its parent book (id=1) on shard east" in said, said
    assert "NOT EXISTS (SELECT 1 FROM `book` AS p WHERE p.`id` = c.`book_id`)" in said, said
    report = migrate(f)
    assert report.exit_code == 1
    assert {t.table: t.rejected for t in report.tables if t.rejected} == {
        "book@west": {"a primary key or unique value another shard holds (collision)": 1},
        "tag@west": {"a nested child whose parent is on another shard (in no document)": 1},
    }
    # one line per table and shard: the cross-shard children are in tag@west's own line
    assert [t.table for t in report.tables].count("tag@west") == 1
    # the documents: east's book 1 without west's tag, east's book 2 kept (not west's)
    assert stored(redis_client) == documents(EAST, WEST)
    for found in (verify(f), verify(f, fix=True)):
        assert found.exit_code == 1
        checks = {t.table: t for t in found.tables}
        assert dict(checks["tag"].counts) == {vr.CROSS_SHARD: 1}, checks["tag"].counts
        (d,) = checks["tag"].examples[vr.CROSS_SHARD]
        assert (d.key, d.field, d.redis) == (
            "tag (id=103)",
            "west -> east",
            "parent book (id=1) on shard east",
        )
        assert "NOT EXISTS" in (d.mysql or "")
        assert dict(checks["book"].counts) == {vr.COLLIDING: 1}, checks["book"].counts
    assert stored(redis_client) == documents(EAST, WEST)  # --fix left them as they were
    shown = CliRunner().invoke(app, ["verify", str(f)])
    assert shown.exit_code == 1
    assert "child on another shard than its parent" in shown.output


def test_a_nested_child_key_on_two_shards_is_reported(two, tmp_path, redis_url, redis_client):
    """Tag 1 on both shards, each under a book of its own shard: claimed as any row (the
    nested table keeps an owner hash), so east's is written and west's left out of its
    document, with its note, and reported by migrate and verify, with the SQL; --fix leaves
    it out."""
    east, west = two
    fill(east, EAST)
    fill(west, {**WEST, "tag": [*WEST["tag"], (1, 102, "dup")],
                "note": [*WEST["note"], (103, 1, "under")]})  # fmt: skip
    f = mapping_file(tmp_path, two, redis_url)
    report = migrate(f)
    assert report.exit_code == 1
    assert {t.table: t.rejected for t in report.tables if t.rejected} == {
        "tag@west": {"a primary key or unique value another shard holds (collision)": 1}
    }
    (reject,) = next(t for t in report.tables if t.table == "tag@west").rejects
    assert "its primary key is on shard east too" in reject.reason, reject.reason
    assert "SELECT * FROM `tag` WHERE `id` = 1" in reject.reason, reject.reason
    assert stored(redis_client) == documents(EAST, WEST)  # west's tag 1 in none
    assert redis_client.hget(b"migrator:shop:shard:tag", b"1:1") == b"east"
    assert redis_client.hget(b"migrator:shop:nest:tag", b"1:1") == b"1:11:13:web"
    assert not redis_client.hexists(b"migrator:shop:nest:note", b"3:103")
    alone = migrate(f, replace=True, shard="west")  # one shard's reload claims it again
    assert alone.exit_code == 1 and alone.collided == 1, alone.tables
    assert stored(redis_client) == documents(EAST, WEST)
    for found in (verify(f), verify(f, fix=True)):
        assert found.exit_code == 1
        assert {t.table: dict(t.counts) for t in found.tables if t.counts} == {
            "tag": {vr.COLLIDING: 1}
        }, found.as_dict()
        (d,) = {t.table: t for t in found.tables}["tag"].examples[vr.COLLIDING]
        assert d.field == "SELECT * FROM `tag` WHERE `id` = 1", d
    # the owner fields of a nested table: compared and repaired like any table's
    redis_client.hset(b"migrator:shop:shard:tag", b"1:1", b"west")
    redis_client.hdel(b"migrator:shop:shard:note", b"1:1")
    found = verify(f)
    assert dict({t.table: t for t in found.tables}["tag"].counts) == {
        vr.COLLIDING: 1,
        vr.DIFFERENT_VALUE: 1,
    }, found.as_dict()
    assert dict({t.table: t for t in found.tables}["note"].counts) == {vr.MISSING_FIELD: 1}
    verify(f, fix=True)
    assert redis_client.hget(b"migrator:shop:shard:tag", b"1:1") == b"east"
    assert redis_client.hget(b"migrator:shop:shard:note", b"1:1") == b"east"


def test_one_shards_documents_are_reloaded_alone(two, tmp_path, redis_url, redis_client):
    """``migrate --replace --shard west``: west's documents, and the rows kept beside them,
    removed through the top table's owner hash and loaded again; east's untouched."""
    east, west = two
    fill(east, EAST)
    fill(west, WEST)
    f = mapping_file(tmp_path, two, redis_url)
    assert migrate(f).exit_code == 0
    east_docs = {k: v for k, v in stored(redis_client).items() if int(k[5:]) < 100}
    west.run("DELETE FROM book WHERE id = 101; INSERT INTO tag VALUES (105, 102, 'new');"
             "INSERT INTO note VALUES (105, 105, 'fresh'); UPDATE book SET genre = 'prose' "
             "WHERE id = 102")  # fmt: skip
    east.run("UPDATE note SET body = 'not reloaded' WHERE id = 1")  # east: not read again
    report = migrate(f, replace=True, shard="west")
    assert report.exit_code == 0, [(t.table, t.rejects) for t in report.tables]
    now = {"book": [(102, "odes", "prose")], "tag": [(102, 102, "old"), (105, 102, "new")],
           "note": [(105, 105, "fresh")]}  # fmt: skip
    assert stored(redis_client) == {**east_docs, **documents(now)}
    assert not redis_client.exists(b"book:101")
    assert redis_client.smembers(b"book:indices:genre:verse") == {b"3"}
    side = redis_client.hkeys(b"migrator:shop:nest:tag")
    assert sorted(side) == [b"1:1", b"1:2", b"1:3", b"3:102", b"3:105"]  # tag 101 gone
    assert not redis_client.exists(b"migrator:shop:nest:tag:in:3:101")
    found = verify(f)  # east's note changed in MySQL, not in Redis: the one difference
    assert {t.table: dict(t.counts) for t in found.tables if t.counts} == {
        "book": {vr.DIFFERENT_VALUE: 2}
    }, found.as_dict()
    # a child on west naming east's book: said by west's reload, not by east's
    fill(west, {"tag": [(106, 1, "cross")]}, checks=False)
    crossed = migrate(f, replace=True, shard="west")
    assert crossed.exit_code == 1
    assert [t.table for t in crossed.tables if t.rejected] == ["tag@west"]
    assert migrate(f, replace=True, shard="east").exit_code == 0


def test_redisjson_documents_over_two_shards(two, tmp_path, modules_redis_url):
    """``as: json`` (a RedisJSON document per book; tests/modules_server.py): the same
    documents, read with a stock client, and ``verify`` 0."""
    east, west = two
    fill(east, EAST)
    fill(west, WEST)
    f = mapping_file(tmp_path, two, modules_redis_url)
    f.write_text(f.read_text().replace("as: json-string", "as: json"))
    assert migrate(f).exit_code == 0
    client = redis.Redis.from_url(modules_redis_url)
    keys = sorted(k.decode() for k in client.scan_iter(b"book:[0-9]*"))
    assert {k: client.json().get(k) for k in keys} == documents(EAST, WEST)
    assert verify(f).exit_code == 0
