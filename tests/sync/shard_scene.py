"""Two shards of one schema for the tests of ``sync --shard`` (docs/sharding.md#sync): a
private Oracle MySQL 9.7 (``east``, primary keys from 1,000,000) and a private MariaDB
(``west``, from 1), a fresh database on each per test, and the sharded mapping over them;
random writes on a shard (``write_shard``) and the end check against rebuilds
(``equals_a_rebuild``)."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands.migrate import migrate
from migrator.commands.verify import verify
from tests.binlog_server import PrivateMariaDB, missing, running_mariadb
from tests.faults import wait_for
from tests.mysql_server import PrivateMySQL, mysql_problem
from tests.services import create_database, key_values
from tests.sync.helpers import following

SCHEMA = """
CREATE TABLE item (id INT PRIMARY KEY, email VARCHAR(60), cat VARCHAR(10), price INT,
                   UNIQUE KEY (email), KEY (cat));
CREATE TABLE tag (item_id INT NOT NULL, tag VARCHAR(20) NOT NULL, PRIMARY KEY (item_id, tag));
"""

TABLES = """
tables:
  item:
    counter: true
    unique: [email]
    indexes: [cat]
    sorted:
      - key: "item:by:price"
        score: price
    latest:
      - key: "item:latest"
        order_by: price
        limit: 5
  tag:
    as: none
    sets:
      - key: "tag:{tag}"
        member: "{item_id}"
"""

#: TABLES with a change stream of item that takes the loads' rows (docs/sync.md#change-streams)
STREAMED = TABLES.replace(
    "    counter: true\n", '    counter: true\n    streams: {key: "item:changes", snapshot: true}\n'
)

#: each shard's primary keys: east from 1,000,000 (MySQL), west from 1 (MariaDB)
BASE = {"east": 1_000_000, "west": 0, "north": 2_000_000}


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Any]]:
    """The two shards' servers: Oracle MySQL 9.7 (east) and MariaDB (west), private."""
    problem = mysql_problem() or missing()
    if problem:
        pytest.skip(problem)
    east, west = PrivateMySQL(), PrivateMariaDB()
    east.start()
    try:
        west.start()
        try:
            yield {"east": east, "west": west}
        finally:
            west.stop()
    finally:
        east.stop()


@pytest.fixture(scope="module")
def north_server() -> Iterator[PrivateMariaDB]:
    """A third shard's server (a second private MariaDB), for the tests that want three."""
    problem = missing()
    if problem:
        pytest.skip(problem)
    with running_mariadb() as server:
        yield server


def seeded(name: str, server: Any) -> Any:
    """A fresh database on ``server`` with the schema and 20 rows in the shard's key range."""
    db = create_database(server.url, f"shard_{name}_{random.randrange(10**8)}")
    db.run(SCHEMA)
    base = BASE[name]
    db.run(";".join(f"INSERT INTO item VALUES ({base + i}, 'e{base + i}', 'c{i % 3}', {i})"
                    for i in range(1, 21)))  # fmt: skip
    return db


@pytest.fixture
def shards(servers: dict[str, Any]) -> dict[str, Any]:
    """A fresh database on each server with the schema and a few rows of its own."""
    return {name: seeded(name, server) for name, server in servers.items()}


def write_shard(db: Any, name: str, seed: int, steps: int) -> None:
    """Random transactions on one shard, inside its own key range: inserts, updates of the
    unique, indexed and scored columns, primary-key moves, deletes, tags."""
    rng = random.Random(seed)
    base = BASE[name]
    conn = db.connect(autocommit=True)
    try:
        with conn.cursor() as cur:
            for _ in range(steps):
                cur.execute("SELECT id FROM item")
                ids = [r[0] for r in cur.fetchall()] or [base + 1]
                i, op = rng.choice(ids), rng.random()
                new = base + rng.randint(1, 5000)
                cur.execute("START TRANSACTION")
                if op < 0.3:
                    cur.execute("INSERT IGNORE INTO item VALUES (%s, %s, %s, %s)",
                                (new, rng.choice([None, f"n{new}"]), rng.choice(["c0", "c1", None]),
                                 rng.choice([None, rng.randint(-50, 500)])))  # fmt: skip
                elif op < 0.6:
                    cur.execute("UPDATE item SET price = %s, cat = %s WHERE id = %s",
                                (rng.randint(0, 900), rng.choice(["c0", "c2"]), i))  # fmt: skip
                elif op < 0.7:
                    cur.execute("UPDATE IGNORE item SET email = %s WHERE id = %s",
                                (f"u{seed}_{rng.randrange(10**9)}", i))  # fmt: skip
                elif op < 0.8:
                    cur.execute("UPDATE IGNORE item SET id = %s WHERE id = %s", (new, i))
                elif op < 0.9:
                    cur.execute("DELETE FROM item WHERE id = %s", (i,))
                    cur.execute("DELETE FROM tag WHERE item_id = %s", (i,))
                else:
                    cur.execute("INSERT IGNORE INTO tag VALUES (%s, %s)",
                                (i, rng.choice(["a", "b", "c"])))  # fmt: skip
                cur.execute("COMMIT")
    finally:
        conn.close()


def followed_with_a_kill(
    shards: dict[str, Any], mapping: str, redis_url: str, steps: tuple[int, int]
) -> None:
    """A ``sync --shard`` process per shard follows while every shard takes ``steps[0]``
    random writes; west's is killed (-9) while the others follow on, every shard takes
    ``steps[1]`` more and west's is started again (it resumes from its own position); then
    each process is stopped (SIGTERM, exit 0)."""
    env = dict(os.environ)
    args = {n: ["sync", mapping, "--shard", n, "--target", redis_url] for n in shards}
    client = redis.Redis.from_url(redis_url)
    writers: list[threading.Thread] = []

    def writing(seed: int, steps: int) -> None:
        for n, (name, db) in enumerate(shards.items()):
            t = threading.Thread(target=write_shard, args=(db, name, seed + n, steps))
            t.start()
            writers.append(t)

    with ExitStack() as running:
        procs = {n: running.enter_context(following(args[n], env)) for n in shards}
        writing(1, steps[0])
        wait_for("west applying", lambda: client.hget(b"migrator:shop:sync:west", b"file"), 60)
        west = procs.pop("west")
        os.kill(west.pid, signal.SIGKILL)  # a crash: its position stays with its changes
        west.wait()
        assert all(p.poll() is None for p in procs.values()), "the crash is west's business"
        for t in writers:
            t.join()
        writing(11, steps[1])
        with following(args["west"], env):  # restarted: resumes from its own position
            for t in writers:
                t.join()
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""


def mapping_of(tmp_path: Path, shards: dict[str, Any], tables: str = TABLES) -> str:
    lines = "".join(f'  - {{name: {n}, url: "{db.url}"}}\n' for n, db in shards.items())
    path = tmp_path / "sharded" / "shop.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"version: 1\nsources:\n{lines}{tables}")
    return str(path)


def union_of(servers: dict[str, Any], shards: dict[str, Any], tmp_path: Path) -> str:
    """An unsharded mapping over a database holding every shard's rows (on the west server)."""
    db = create_database(servers["west"].url, f"shard_union_{random.randrange(10**8)}")
    db.run(SCHEMA)
    conn = db.connect(autocommit=True)
    try:
        with conn.cursor() as cur:
            for shard in shards.values():
                src = shard.connect()
                try:
                    with src.cursor() as read:
                        for table in ("item", "tag"):
                            read.execute(f"SELECT * FROM {table}")
                            rows = read.fetchall()
                            if rows:
                                marks = ",".join(["%s"] * len(rows[0]))
                                cur.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
                finally:
                    src.close()
    finally:
        conn.close()
    path = tmp_path / "union" / "shop.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f'version: 1\nsource: "{db.url}"\n{TABLES}')
    return str(path)


def dump(client: redis.Redis) -> dict[bytes, Any]:
    """Every key but the tool's own (``migrator:``; the owner hashes kept) with its value."""
    return key_values(client, lambda k: k.startswith(b"migrator:")
                      and not k.startswith(b"migrator:shop:shard:"))  # fmt: skip


def equals_a_rebuild(
    servers: dict[str, Any], shards: dict[str, Any], mapping: str, redis_url: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    """What the shards' sync processes wrote (every shard caught up) against independent
    rebuilds: ``verify`` of the union and of the shards answers 0; every key but the tool's
    own equals a ``migrate`` of the union's rows (the counter at least the union's highest
    key, never lowered below east's); a ``migrate`` of the shards writes the same keys,
    owner hashes included. Empties the Redis database of ``redis_url`` on the way."""
    client = redis.Redis.from_url(redis_url)
    union = union_of(servers, shards, tmp_path)
    for checking in (union, mapping):  # the union's rows, and the shards read one by one
        checked = verify(checking, target=redis_url)
        assert checked.exit_code == 0, json.dumps(checked.as_dict(), default=str)[:3000]
    synced = dump(client)
    counter = int(synced.pop(b"item:id"))
    for key in list(client.scan_iter()):
        client.delete(key)
    migrate(union, target=redis_url)  # an independent rebuild: one source, every row
    rebuilt = dump(client)
    assert counter >= int(rebuilt.pop(b"item:id"))  # raised by both shards, never lowered
    assert counter >= BASE["east"]  # east's keys are the highest: west never lowered it
    assert {k: v for k, v in synced.items() if not k.startswith(b"migrator:")} == rebuilt
    for key in list(client.scan_iter()):
        client.delete(key)
    migrate(mapping, target=redis_url)  # migrate of the shards: the owner hashes too
    again = dump(client)
    again.pop(b"item:id")
    assert synced == again
