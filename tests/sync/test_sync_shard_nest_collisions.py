"""``sync --shard`` of nested documents when two shards' nested rows collide
(docs/sharding.md#nested-documents): a private Oracle MySQL 9.7 (east) and a private MariaDB
(west, whose cascades are not logged) each hold a shard of books, tags and notes, a process
per shard following while both take random writes; meanwhile one shard (each in turn: the
other, the holder, listed first in ``sources:``) writes the colliding rows, in ids the random
writes leave alone: a tag whose primary key the holder's tag holds, changed again, with a
note under it; a note naming a tag only the holder holds (a grandchild whose parent is on
the other shard), changed again; and a note of its own moved under that tag. Each is left
out of its shard's documents and of the rows kept beside them (the holder's tag and its
notes are never overwritten), said once per row and run (both shards, the key, the SQL) and
counted in ``migrator_sync_collisions_total``. Then every document equals one built here
from each shard's rows (less what migrate leaves out), ``verify`` names exactly the
collisions (and ``--fix`` leaves them), and Redis equals a ``migrate`` of the shards into an
emptied database; once the colliding rows are gone, ``verify`` answers 0 and Redis equals a
rebuild again."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
import urllib.request
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands.migrate import migrate
from migrator.commands.sync import sync
from migrator.commands.verify import verify
from migrator.verify import report as vr
from tests.binlog_server import free_port
from tests.faults import wait_for
from tests.sync.helpers import following
from tests.sync.shard_scene import BASE, servers
from tests.sync.test_sync_shard_nesting import _dump, mapping_of, rows_of, shop, stored
from tests.test_shard_nesting import documents

__all__ = ["servers", "shop"]  # the fixtures

#: ids from BASE + RESERVED on are the colliding rows': the random writes leave them alone
RESERVED = 5000


def _random(db: Any, name: str, seed: int, steps: int) -> None:
    """Random transactions on one shard in its own ids below the reserved ones: books
    inserted, renamed, re-keyed (cascading to their tags) and deleted (cascading down), tags
    and notes inserted, moved between parents and deleted."""
    rng, base = random.Random(seed), BASE[name]
    with closing(db.connect(autocommit=True)) as conn, conn.cursor() as cur:
        for _ in range(steps):
            ids = {}
            for table in ("book", "tag", "note"):
                cur.execute(
                    f"SELECT id FROM {table} WHERE id > %s AND id < %s", (base, base + RESERVED)
                )  # (not the other shard's key it holds)
                ids[table] = [r[0] for r in cur.fetchall()] or [base + 1]
            new = base + rng.randint(1, 3000)
            book, tag, note = (rng.choice(ids[t]) for t in ("book", "tag", "note"))
            word = f"w{rng.randrange(99)}"
            choices = [
                (0.1, "INSERT IGNORE INTO book VALUES (%s, %s, 'g0')", (new, word)),
                (0.2, "UPDATE book SET name = %s WHERE id = %s", (word, book)),
                (0.26, "UPDATE IGNORE book SET id = %s WHERE id = %s", (new, book)),
                (0.31, "DELETE FROM book WHERE id = %s", (book,)),
                (0.5, "INSERT IGNORE INTO tag VALUES (%s, %s, %s)", (new, book, word)),
                (0.6, "UPDATE tag SET book_id = %s, tagname = %s WHERE id = %s", (book, word, tag)),
                (0.65, "DELETE FROM tag WHERE id = %s", (tag,)),
                (0.8, "INSERT IGNORE INTO note VALUES (%s, %s, %s)", (new, tag, word)),
                (0.92, "UPDATE note SET tag_id = %s, body = %s WHERE id = %s", (tag, word, note)),
                (1.0, "DELETE FROM note WHERE id = %s", (note,)),
            ]
            draw = rng.random()
            sql, values = next((q, v) for edge, q, v in choices if draw < edge)
            cur.execute(sql, values)


OFF = "SET foreign_key_checks = 0"


def _held(h: int, c: int) -> tuple[list[str], list[str]]:
    """The reserved rows the holder (ids from ``h``) and the colliding shard (from ``c``)
    hold before the processes start: a book each, the holder's two tags and a note, the
    other's tag and a note."""
    return [
        f"INSERT INTO book VALUES ({h + 1}, 'anchor', 'g0')",
        f"INSERT INTO tag VALUES ({h + 1}, {h + 1}, 'shared'), ({h + 2}, {h + 1}, 'only')",
        f"INSERT INTO note VALUES ({h + 1}, {h + 1}, 'under shared')",
    ], [
        f"INSERT INTO book VALUES ({c + 1}, 'anchor', 'g0')",
        f"INSERT INTO tag VALUES ({c + 1}, {c + 1}, 'own')",
        f"INSERT INTO note VALUES ({c + 4}, {c + 1}, 'to move')",
    ]  # fmt: skip


def _writes(h: int, c: int) -> tuple[list[str], list[str]]:
    """The colliding shard's writes, each a transaction between the random ones, and the
    holder's of the rows they collide with."""
    return [
        f"INSERT INTO tag VALUES ({h + 1}, {c + 1}, 'dup')",  # the holder's tag's key: shape 1
        f"UPDATE tag SET tagname = 'dup 2' WHERE id = {h + 1}",  # changed again
        f"INSERT INTO note VALUES ({c + 2}, {h + 1}, 'under dup')",  # under the left-out tag
        f"{OFF}; INSERT INTO note VALUES ({c + 3}, {h + 2}, 'on its tag')",  # shape 2
        f"UPDATE note SET body = 'on its tag 2' WHERE id = {c + 3}",  # changed again
        f"{OFF}; UPDATE note SET tag_id = {h + 2} WHERE id = {c + 4}",  # moved under its tag
    ], [
        f"UPDATE tag SET tagname = 'shared 2' WHERE id = {h + 1}",
        f"INSERT INTO note VALUES ({h + 3}, {h + 1}, 'later')",
    ]  # fmt: skip


def _statements(db: Any, statements: list[str], pause: float) -> None:
    for sql in statements:
        time.sleep(pause)
        db.run(sql)


def _equals_a_rebuild(client: redis.Redis, mapping: str, rejected: int) -> None:
    synced = _dump(client)
    for key in list(client.scan_iter()):
        client.delete(key)
    assert migrate(mapping).rejected == rejected  # the shards loaded anew: the same keys
    assert _dump(client) == synced


def _collisions(port: int) -> dict[str, float]:
    """migrator_sync_collisions_total per table, from the process's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("migrator_sync_collisions_total{"):
            table = line.split('table="', 1)[1].split('"', 1)[0]
            out[table] = float(line.rsplit(" ", 1)[1])
    return out


def _expected(rows: dict[str, dict[str, list[tuple]]], holder: str, colliding: str) -> Any:
    """The documents migrate writes: the colliding shard's tag whose key the holder's tag
    holds is in none."""
    theirs = dict(rows[colliding])
    held = {t[0] for t in rows[holder]["tag"]}
    theirs["tag"] = [t for t in theirs["tag"] if t[0] not in held]
    return documents(rows[holder], theirs)


@pytest.mark.parametrize("colliding", ["west", "east"])  # MariaDB's writes collide, or MySQL's
def test_colliding_nested_rows_followed_per_shard_are_left_out_said_and_equal_a_rebuild(
    shop: dict[str, Any], redis_url: str, tmp_path: Path, colliding: str
) -> None:
    holder = "east" if colliding == "west" else "west"  # first in sources: (it holds them first)
    h, c = BASE[holder] + RESERVED, BASE[colliding] + RESERVED
    mapping = mapping_of(tmp_path, {holder: shop[holder], colliding: shop[colliding]}, redis_url)
    client = redis.Redis.from_url(redis_url)
    for name, statements in zip((holder, colliding), _held(h, c)):
        for sql in statements:
            shop[name].run(sql)
    port = free_port()
    args = {n: ["sync", mapping, "--shard", n] for n in shop}
    args[colliding] += ["--metrics", f"127.0.0.1:{port}"]
    theirs, own = _writes(h, c)
    threads = [
        threading.Thread(target=_random, args=(shop["east"], "east", 3, 100)),
        threading.Thread(target=_random, args=(shop["west"], "west", 4, 100)),
        threading.Thread(target=_statements, args=(shop[colliding], theirs, 0.3)),
        threading.Thread(target=_statements, args=(shop[holder], own, 0.5)),
    ]
    with ExitStack() as running:
        procs = {n: running.enter_context(following(args[n], dict(os.environ))) for n in shop}
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        shop[colliding].run(f"UPDATE book SET name = 'done' WHERE id = {c + 1}")
        wait_for(  # the colliding shard's process has applied its writes
            "the colliding shard's last write applied",
            lambda: json.loads(client.get(f"book:{c + 1}") or b"{}").get("name") == "done",
            60, every=0.2,
        )  # fmt: skip
        counted = _collisions(port)
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
        stderr = procs[colliding].stderr
        assert stderr is not None
        log = stderr.read()
    for name in shop:  # whatever the processes had not applied when stopped
        assert sync(mapping, shard=name, until_caught_up=True).stopped == "caught up"
    said = [line for line in log.splitlines() if "collision:" in line]
    keys = {f"tag (id={h + 1})": 0, f"note (id={c + 2})": 0, f"note (id={c + 3})": 0,
            f"note (id={c + 4})": 0}  # fmt: skip
    for line in said:
        for key in keys:
            keys[key] += key in line
    assert list(keys.values()) == [1, 1, 1, 1], said  # once per row and run
    assert counted.get("tag", 0) >= 2 and counted.get("note", 0) >= 4, counted
    assert all(f"shard {colliding}" in x and f"shard {holder}" in x for x in said), said
    assert any(f"SELECT * FROM `tag` WHERE `id` = {h + 1}" in line for line in said), said
    assert sum(f"its parent tag (id={h + 2}) on shard {holder}" in x for x in said) == 2
    rows = {n: rows_of(db) for n, db in shop.items()}
    assert all(len(r["tag"]) > 5 and r["note"] for r in rows.values()), rows  # (what is left)
    assert stored(client) == _expected(rows, holder, colliding)
    anchor = json.loads(client.get(f"book:{h + 1}") or b"{}")
    assert [t["tagname"] for t in anchor["tags"]] == ["only", "shared 2"]
    assert [n["body"] for n in anchor["tags"][1]["notes"]] == ["under shared", "later"]
    assert json.loads(client.get(f"book:{c + 1}") or b"{}")["tags"] == [
        {"id": c + 1, "book_id": c + 1, "tagname": "own", "notes": []}
    ]
    for fix in (False, True):  # the collisions, exactly; --fix leaves them as they are
        checked = verify(mapping, fix=fix)
        assert {t.table: dict(t.counts) for t in checked.tables if t.counts} == {
            "tag": {vr.COLLIDING: 1}, "note": {vr.CROSS_SHARD: 2}
        }, json.dumps(checked.as_dict(), default=str)[:3000]  # fmt: skip
    _equals_a_rebuild(client, mapping, 3)
    # the colliding rows gone (the note under the tag first: MariaDB does not log its
    # cascades, and the tag's delete is of another shard's row): verify 0, a rebuild's keys
    shop[colliding].run(f"DELETE FROM note WHERE id IN ({c + 2}, {c + 3}, {c + 4}); "
                        f"DELETE FROM tag WHERE id = {h + 1}")  # fmt: skip
    assert sync(mapping, shard=colliding, until_caught_up=True).stopped == "caught up"
    checked = verify(mapping)
    assert checked.exit_code == 0, json.dumps(checked.as_dict(), default=str)[:3000]
    _equals_a_rebuild(client, mapping, 0)
