"""Expiry over shards under sync (docs/sharding.md#expiry-over-shards): a private Oracle MySQL
9.7 (east) and a private MariaDB (west) each hold a shard of a table with ``expire:`` and
shared structures (a unique hash, an index, a sorted set, a latest list). Each shard's process
sweeps its own shard's rows only (the owner hash says whose a due row is), so a row expires
from the shared structures and from the latest list whichever process comes first; then
``verify`` of the shards answers 0 and Redis equals MySQL's unexpired rows of the union, key by
key (tests/sync/test_sync_expiry.py's comparison), and a ``migrate`` of the union."""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands import migrate
from migrator.commands.sync import sync
from migrator.commands.verify import verify
from migrator.plan.expiry import decode_row as pk_of
from migrator.plan.expiry import encode_row
from tests.services import create_database
from tests.sync.helpers import following
from tests.sync.shard_scene import servers  # noqa: F401  (the fixture)
from tests.sync.test_sync_expiry import CITY, MAPPING, SCHEMA, _compare, _ends, _row
from tests.test_shard_expiry import dump, same_keys

TABLES = MAPPING.split("\n", 2)[2]  # without its version line
#: each shard's primary keys
BASE = {"east": 100_000, "west": 0}


def _write(db: Any, base: int, seed: int, steps: int) -> None:
    """Random transactions on one shard, in its key range: inserts, deletes, moments moved
    (near, past, far, NULL), cities and scores changed."""
    rng = random.Random(seed)
    conn = db.connect(autocommit=True)
    try:
        with conn.cursor() as cur:
            for _ in range(steps):
                roll, i = rng.random(), base + rng.randint(1, 80)
                if roll < 0.25:
                    cur.execute("REPLACE INTO tok VALUES (%s,%s,%s,%s,%s)", _row(rng, i))
                elif roll < 0.35:
                    cur.execute("DELETE FROM tok WHERE id = %s", (i,))
                elif roll < 0.75:
                    cur.execute("UPDATE tok SET ends = %s WHERE id = %s", (_ends(rng), i))
                else:
                    cur.execute("UPDATE tok SET city = %s, score = %s WHERE id = %s",
                                (rng.choice(CITY), rng.randint(0, 50), i))  # fmt: skip
    finally:
        conn.close()


def _shards(hosts: dict[str, Any], tmp_path: Path) -> tuple[dict[str, Any], str]:
    """A fresh database per shard with 40 rows of its own, and the sharded mapping (named
    ``expiry``, as test_sync_expiry's comparison reads its schedule)."""
    dbs = {}
    for name, server in hosts.items():
        db = create_database(server.url, f"shard_exp_{name}_{random.randrange(10**8)}")
        db.run(SCHEMA)
        rng = random.Random(len(name))
        db.insert("INSERT INTO tok VALUES (%s,%s,%s,%s,%s)",
                  [_row(rng, BASE[name] + i) for i in range(1, 41)])  # fmt: skip
        dbs[name] = db
    path = tmp_path / "sharded" / "expiry.yaml"
    path.parent.mkdir()
    path.write_text(
        "version: 1\nsources:\n"
        + "".join(f'  - {{name: {n}, url: "{db.url}"}}\n' for n, db in dbs.items())
        + TABLES
    )
    return dbs, str(path)


def _union(hosts: dict[str, Any], dbs: dict[str, Any], tmp_path: Path) -> tuple[Any, str]:
    """A database on west's server with every shard's rows, and its one-source mapping."""
    db = create_database(hosts["west"].url, f"shard_exp_union_{random.randrange(10**8)}")
    db.run(SCHEMA)
    for shard in dbs.values():
        rows = shard.query("SELECT * FROM tok")
        if rows:
            db.insert("INSERT INTO tok VALUES (%s,%s,%s,%s,%s)", rows)
    path = tmp_path / "union" / "expiry.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f'version: 1\nsource: "{db.url}"\n{TABLES}')
    return db, str(path)


def _caught_up(mapping: str, dbs: dict[str, Any], redis_url: str) -> None:
    for name in dbs:
        report = sync(mapping, target=redis_url, shard=name, until_caught_up=True)
        assert report.exit_code == 0, report


def _settled(
    hosts: dict[str, Any], dbs: dict[str, Any], mapping: str, redis_url: str, tmp_path: Path
) -> None:
    """Past every short moment, each shard caught up: verify 0, Redis as the union's rows
    (key by key, TTLs within 2 s) and as a migrate of the union (the tool's own keys aside)."""
    time.sleep(3.5)
    _caught_up(mapping, dbs, redis_url)
    checked = verify(mapping, target=redis_url)
    assert checked.exit_code == 0, json.dumps(checked.as_dict(), default=str)[:3000]
    client = redis.Redis.from_url(redis_url)
    union, union_mapping = _union(hosts, dbs, tmp_path)
    _compare(union, client)
    ours = b"migrator:expiry:expiry:"  # the schedule and memos, besides the data's keys
    synced = {k: v for k, v in dump(client).items()
              if not k.startswith(b"migrator:") or k.startswith(ours)}  # fmt: skip
    for key in list(client.scan_iter()):
        client.delete(key)
    assert migrate(union_mapping, target=redis_url).exit_code == 0
    same_keys(synced, dump(client))


def test_a_stopped_shards_due_rows_are_its_own_to_sweep(
    servers: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    redis_url: str,
) -> None:
    """West's rows, the newest of the latest list, pass their moment while west's process is
    stopped: east's process leaves them (they are west's), west's sweeps them when it runs
    again, and the list takes the next newest rows of either shard."""
    dbs, mapping = _shards(servers, tmp_path)
    _caught_up(mapping, dbs, redis_url)
    soon = datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(seconds=10)
    west = dbs["west"]
    west.run(f"UPDATE tok SET score = 100 + id, ends = '{soon}' WHERE id <= 3")
    past = soon - timedelta(seconds=60)  # claimed, then left out: already past its moment
    west.run(f"INSERT INTO tok VALUES (77, 'gone@x', 'Oslo', 999, '{past}')")
    sync(mapping, target=redis_url, shard="west", until_caught_up=True)
    client = redis.Redis.from_url(redis_url)
    assert client.lrange("tok:latest", 0, 2) == [b"3", b"2", b"1"]
    assert client.hget("migrator:expiry:shard:tok", encode_row((b"77",))) is None
    assert client.hget("migrator:expiry:shard:tok", encode_row((b"3",))) == b"west"
    left = soon - datetime.now(timezone.utc).replace(tzinfo=None)
    assert left.total_seconds() > 0, "too slow a host: rows 1-3 passed their moment already"
    time.sleep(left.total_seconds() + 1)  # past rows 1-3's moment
    sync(mapping, target=redis_url, shard="east", until_caught_up=True)  # sweeps its own only
    assert client.zscore("migrator:expiry:expiry:tok", b"3") is not None  # west's, still due
    sync(mapping, target=redis_url, shard="west", until_caught_up=True)
    assert client.zscore("migrator:expiry:expiry:tok", b"3") is None
    assert b"3" not in client.lrange("tok:latest", 0, -1)
    _settled(servers, dbs, mapping, redis_url, tmp_path)


def test_rows_of_both_shards_expire_while_their_processes_follow(
    servers: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    redis_url: str,
) -> None:
    dbs, mapping = _shards(servers, tmp_path)
    args = {n: ["sync", mapping, "--shard", n, "--target", redis_url] for n in dbs}
    with ExitStack() as running:
        procs = {n: running.enter_context(following(args[n], dict(os.environ))) for n in dbs}
        for seed in (1, 2):  # moments pass while both processes follow, then more writes
            writers = [threading.Thread(target=_write, args=(db, BASE[n], 10 * seed + k, 150))
                       for k, (n, db) in enumerate(dbs.items())]  # fmt: skip
            for t in writers:
                t.start()
            for t in writers:
                t.join()
            time.sleep(2)
        time.sleep(1.5)  # past every short moment: the processes sweep while they follow
        for proc in procs.values():
            proc.terminate()
            assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    _settled(servers, dbs, mapping, redis_url, tmp_path)


def test_a_row_inserted_past_its_moment_under_another_shards_key_is_no_collision(
    servers: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    redis_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """West inserts, already past its moment, a row under a primary key east's row holds: it
    is absent, as ``migrate`` leaves it (which does not read it), so west's process neither
    claims it nor reports a collision; east's row, its owner field and its entries stay, and
    ``verify`` and ``migrate`` of the shards find no collision either."""
    dbs, mapping = _shards(servers, tmp_path)
    _caught_up(mapping, dbs, redis_url)
    client = redis.Redis.from_url(redis_url)
    owners = b"migrator:expiry:shard:tok"
    ids = sorted(int(pk_of(f)[0] or 0) for f, o in client.hgetall(owners).items() if o == b"east")
    ttls = {i: client.pttl(f"tok:{i}") for i in ids}
    taken = next(i for i in ids if ttls[i] == -1 or ttls[i] > 600_000)  # east's, lasting
    field, east_row = encode_row((str(taken).encode(),)), client.hgetall(f"tok:{taken}")
    past = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(seconds=60)
    dbs["west"].run(
        f"INSERT INTO tok VALUES ({taken}, 'late@x', 'Oslo', 7, '{past}'); "
        f"INSERT INTO tok VALUES (78, 'gone@x', 'Rome', 8, '{past}')"  # a key no shard holds
    )
    time.sleep(3.5)  # past the other rows' short moments: each process sweeps its own
    with caplog.at_level(logging.WARNING, logger="migrator.sync"):
        _caught_up(mapping, dbs, redis_url)
    said = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "collision"]
    assert said == []
    assert client.hget(owners, field) == b"east"
    assert client.hgetall(f"tok:{taken}") == east_row
    assert client.hget(owners, encode_row((b"78",))) is None and not client.exists("tok:78")
    assert client.hget("tok:uniques:email", "late@x") is None
    checked = verify(mapping, target=redis_url)
    assert checked.exit_code == 0, json.dumps(checked.as_dict(), default=str)[:3000]
    loaded = migrate(mapping, target=redis_url, replace=True)
    assert loaded.exit_code == 0 and loaded.collided == 0, loaded.tables
