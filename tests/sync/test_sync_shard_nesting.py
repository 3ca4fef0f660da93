"""``sync --shard`` of nested documents (docs/sharding.md#nested-documents): a private Oracle
MySQL 9.7 (east) and a private MariaDB (west, whose cascades are not logged) each hold a shard
of books with their tags and the tags' notes nested; a process per shard follows its shard
while both take random writes to parents and children (inserts, moves between parents,
re-keyed books cascading to their tags, deletes cascading down); then every document equals
one built here from each shard's rows, ``verify`` answers 0, and a ``migrate`` of the shards
writes the same keys; one shard's ``--reload`` removes and loads its own documents only. A
child written on another shard than its parent is left out, said and counted."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import sys
import threading
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands.migrate import migrate
from migrator.commands.sync import sync
from migrator.commands.verify import verify
from migrator.errors import MigratorError
from migrator.sync.shard_rows import Collisions
from migrator.verify import report as vr
from tests.services import create_database, key_values
from tests.sync.helpers import following
from tests.sync.shard_scene import BASE, servers
from tests.test_shard_nesting import SCHEMA, TABLES, documents

__all__ = ["servers"]  # the fixture


@pytest.fixture
def shop(servers: dict[str, Any]) -> dict[str, Any]:
    """A fresh database on each server with the nested schema and a few rows of its own."""
    out = {}
    for name, server in servers.items():
        db = create_database(server.url, f"nest_{name}_{random.randrange(10**8)}")
        db.run(SCHEMA)
        b = BASE[name]
        books = [f"({b + i}, 'b{b + i}', 'g{i % 2}')" for i in range(1, 6)]
        tags = [f"({b + i}, {b + 1 + i % 5}, 't{i % 3}')" for i in range(1, 9)]
        notes = [f"({b + i}, {b + 1 + i % 8}, 'n{i}')" for i in range(1, 9)]
        db.run(f"INSERT INTO book VALUES {', '.join(books)}; INSERT INTO tag VALUES "
               f"{', '.join(tags)}; INSERT INTO note VALUES {', '.join(notes)}")  # fmt: skip
        out[name] = db
    return out


def mapping_of(tmp_path: Path, shop: dict[str, Any], target: str) -> str:
    lines = "".join(f'  - {{name: {n}, url: "{db.url}"}}\n' for n, db in shop.items())
    path = tmp_path / "shop.yaml"
    path.write_text(f"version: 1\nsources:\n{lines}target: {target}\n{TABLES}")
    return str(path)


def _write(db: Any, name: str, seed: int, steps: int) -> None:
    """Random transactions on one shard, in its own key range, to books, tags and notes."""
    rng = random.Random(seed)
    with closing(db.connect(autocommit=True)) as conn, conn.cursor() as cur:
        for _ in range(steps):
            ids = {}
            for table in ("book", "tag", "note"):
                cur.execute(f"SELECT id FROM {table}")
                ids[table] = [r[0] for r in cur.fetchall()] or [BASE[name] + 1]
            new = BASE[name] + rng.randint(1, 3000)
            book, tag, note = (rng.choice(ids[t]) for t in ("book", "tag", "note"))
            words = (f"w{rng.randrange(99)}", f"t{rng.randrange(5)}", rng.choice(["g0", "g2"]))
            choices = [  # (up to this draw, statement, values)
                (0.1, "INSERT IGNORE INTO book VALUES (%s, %s, %s)", (new, words[0], words[2])),
                (0.2, "UPDATE book SET name = %s, genre = %s WHERE id = %s",
                 (words[0], words[2], book)),
                (0.27, "UPDATE IGNORE book SET id = %s WHERE id = %s", (new, book)),
                (0.32, "DELETE FROM book WHERE id = %s", (book,)),
                (0.5, "INSERT IGNORE INTO tag VALUES (%s, %s, %s)", (new, book, words[1])),
                (0.6, "UPDATE tag SET book_id = %s, tagname = %s WHERE id = %s",
                 (book, words[1], tag)),
                (0.65, "DELETE FROM tag WHERE id = %s", (tag,)),
                (0.8, "INSERT IGNORE INTO note VALUES (%s, %s, %s)", (new, tag, words[0])),
                (0.92, "UPDATE note SET tag_id = %s, body = %s WHERE id = %s",
                 (tag, words[0], note)),
                (1.0, "DELETE FROM note WHERE id = %s", (note,)),
            ]  # fmt: skip
            draw = rng.random()
            sql, values = next((q, v) for edge, q, v in choices if draw < edge)
            cur.execute("START TRANSACTION")
            cur.execute(sql, values)
            cur.execute("COMMIT")


def rows_of(db: Any) -> dict[str, list[tuple]]:
    return {t: [tuple(r) for r in db.query(f"SELECT * FROM {t}")] for t in ("book", "tag", "note")}


def stored(client: redis.Redis) -> dict[str, Any]:
    return {k.decode(): json.loads(client.get(k)) for k in client.scan_iter(b"book:[0-9]*")}


def _dump(client: redis.Redis) -> dict[bytes, Any]:
    """Every key but the checkpoints and the sync's own state, with its value."""
    return key_values(client, lambda k: k.endswith(b":checkpoint")
                      or k.startswith(b"migrator:shop:sync"))  # fmt: skip


def test_nested_documents_followed_per_shard_equal_a_rebuild(
    shop: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    mapping = mapping_of(tmp_path, shop, redis_url)
    client = redis.Redis.from_url(redis_url)
    args = {n: ["sync", mapping, "--shard", n] for n in shop}
    writers = [threading.Thread(target=_write, args=(db, n, 7 + k, 120))
               for k, (n, db) in enumerate(shop.items())]  # fmt: skip
    with ExitStack() as running:
        procs = {n: running.enter_context(following(args[n], dict(os.environ))) for n in shop}
        for t in writers:
            t.start()
        for t in writers:
            t.join()
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    _write(shop["east"], "east", 21, 40)  # while no process follows east: then reloaded,
    sync(mapping, shard="east", until_caught_up=True, reload=True)  # its documents alone
    for name in shop:  # whatever the processes had not applied when stopped
        assert sync(mapping, shard=name, until_caught_up=True).stopped == "caught up"
    rows = {n: rows_of(db) for n, db in shop.items()}
    assert all(len(r["tag"]) > 5 and r["note"] for r in rows.values()), rows  # (what is left)
    assert stored(client) == documents(rows["east"], rows["west"])
    checked = verify(mapping)
    assert checked.exit_code == 0, json.dumps(checked.as_dict(), default=str)[:3000]
    synced = _dump(client)
    for key in list(client.scan_iter()):
        client.delete(key)
    assert migrate(mapping).exit_code == 0  # the shards loaded anew: the same keys
    assert _dump(client) == synced


def test_a_child_written_under_another_shards_parent_is_left_out_and_said(
    shop: dict[str, Any],
    redis_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mapping = mapping_of(tmp_path, shop, redis_url)
    client = redis.Redis.from_url(redis_url)
    for name in shop:
        sync(mapping, shard=name, until_caught_up=True)
    before = stored(client)
    east = BASE["east"]
    # on west, a tag naming east's book (the foreign-key checks off), and a note under it
    shop["west"].run(f"SET foreign_key_checks = 0; INSERT INTO tag VALUES (77, {east + 1}, 'x');"
                     " INSERT INTO note VALUES (77, 77, 'under x'); SET foreign_key_checks = 1;"
                     " UPDATE tag SET tagname = 'y' WHERE id = 77")  # fmt: skip
    counted: list[Collisions] = []  # the run's own counter (its /metrics reads it)

    def kept(shard: str) -> Collisions:
        counted.append(Collisions(shard))
        return counted[-1]

    monkeypatch.setattr(sys.modules["migrator.commands.sync"], "Collisions", kept)
    with caplog.at_level(logging.WARNING, logger="migrator.sync"):
        sync(mapping, shard="west", until_caught_up=True)
    assert stored(client) == before  # east's book 1000001 as east holds it
    said = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "collision"]
    assert len(said) == 1, said  # once per row and run (its INSERT and its UPDATE)
    assert f"tag (id=77) is on shard west, its parent book (id={east + 1}) on shard east" in said[0]
    assert "NOT EXISTS (SELECT 1 FROM `book` AS p WHERE p.`id` = c.`book_id`)" in said[0]
    assert counted[0].per_table() == {"tag": 2}  # migrator_sync_collisions_total
    found = verify(mapping)
    assert found.exit_code == 1
    assert {t.table: dict(t.counts) for t in found.tables if t.counts} == {
        "tag": {vr.CROSS_SHARD: 1}
    }, found.as_dict()
    # west reloaded: its load leaves the tag out of every document and says it too
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="migrator.sync"):
        sync(mapping, shard="west", until_caught_up=True, reload=True)
    assert stored(client) == before
    said = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "collision"]
    assert len(said) == 1 and "tag (id=77) is on shard west" in said[0], said
    assert counted[-1].per_table() == {"tag": 1}
    assert verify(mapping).exit_code == 1


def test_a_redis_loaded_without_nested_owner_hashes_is_refused_until_fixed(
    shop: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    """A Redis an older migrator loaded holds no owner hash for the nested tables: sync of a
    shard would then apply no delete or move of a nested row (its before-image is no row of
    the shard's in Redis), so it refuses (exit 2) and names the fix; verify --fix writes them."""
    mapping = mapping_of(tmp_path, shop, redis_url)
    client = redis.Redis.from_url(redis_url)
    for name in shop:
        assert sync(mapping, shard=name, until_caught_up=True).exit_code == 0
    client.delete(b"migrator:shop:shard:tag", b"migrator:shop:shard:note")  # as older ones left
    east = BASE["east"]
    shop["east"].run(f"DELETE FROM note WHERE id = {east + 1}")
    with pytest.raises(MigratorError, match="no owner hash") as refused:
        sync(mapping, shard="east", until_caught_up=True)
    assert refused.value.exit_code == 2 and "verify MAPPING --fix" in str(refused.value.hint)
    assert verify(mapping, fix=True).exit_code in (0, 1)  # repaired (the note still there)
    for name in shop:
        assert sync(mapping, shard=name, until_caught_up=True).stopped == "caught up"
    assert verify(mapping).exit_code == 0
    rows = {n: rows_of(db) for n, db in shop.items()}
    assert stored(client) == documents(rows["east"], rows["west"])  # the note's delete applied
