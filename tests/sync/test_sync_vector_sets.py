"""Vector sets under sync (docs/mapping.md#vector-sets): random inserts, deletes and updates of
vectors (new, NULL, of another length on MariaDB), of attributes and of the set's key column,
with rows moving in and out of a ``where:`` — after ``--until-caught-up`` ``verify`` exits 0
and every vector set equals, element by element (vector and attributes), what a fresh
``migrate`` writes; VSIM then answers as an exact search over MySQL's rows. MySQL 9.7's
VECTOR(8) from its binary log, MariaDB's VARBINARY(32)."""

from __future__ import annotations

import random
from typing import Any

import redis

from migrator.commands import migrate, verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from tests.sync.helpers import mixed_writes
from tests.test_vector_sets import (
    CATEGORIES,
    DIM,
    cosine,
    embedding,
    load,
    mapping_text,
    mysql_rows,
    row,
    similar,
)

WHERE = '    where: "in_stock = 1"\n'
_ids = iter(range(8300, 8400))


def _update(cur: Any, rng: random.Random, i: int) -> None:
    roll = rng.random()
    if roll < 0.4:
        vector: bytes | None = embedding(rng) if rng.random() < 0.9 else None
        cur.execute("UPDATE product SET embedding = %s WHERE id = %s", (vector, i))
    elif roll < 0.6:
        cur.execute("UPDATE product SET in_stock = 1 - in_stock WHERE id = %s", (i,))
    elif roll < 0.8:
        cur.execute("UPDATE product SET category = %s WHERE id = %s", (rng.choice(CATEGORIES), i))
    else:
        price, name = f"{rng.randint(100, 9999) / 100:.2f}", f"n{rng.randint(0, 9)} ☃"
        cur.execute("UPDATE product SET price = %s, name = %s WHERE id = %s", (price, name, i))


def vector_sets(client: redis.Redis) -> dict[bytes, dict[bytes, tuple[Any, ...]]]:
    """Every vector set: element -> (its floats, its attributes)."""
    out = {}
    for key in client.scan_iter(match="product:*"):
        if client.type(key) != b"vectorset":
            continue
        n = client.execute_command("VCARD", key)
        elements = client.execute_command("VRANDMEMBER", key, n)
        out[key] = {
            e: (tuple(client.execute_command("VEMB", key, e)),
                client.execute_command("VGETATTR", key, e))
            for e in elements
        }  # fmt: skip
    return out


def test_vector_sets_follow_every_change(binlog_db, engine: str, redis8_url: str) -> None:  # type: ignore[no-untyped-def]
    load(binlog_db, engine, rows=100)
    mapping = parse_mapping(mapping_text(engine, WHERE), name="vectors-sync")
    client = redis.Redis.from_url(redis8_url)
    run = {"source": binlog_db.url, "target": redis8_url, "until_caught_up": True}
    sync(mapping, server_id=next(_ids), **run)  # type: ignore[arg-type]
    first = 100
    for seed in (1, 2, 3):
        mixed_writes(binlog_db, random.Random(seed), 120, first, "product", row, _update)
        first += 120
        if engine == "mariadb":  # a vector of another length: out of every set
            binlog_db.run("UPDATE product SET embedding = x'0000803f' WHERE id = 7;")
        sync(mapping, server_id=next(_ids), **run)  # type: ignore[arg-type]
        report = verify(mapping, source=binlog_db.url, target=redis8_url)
        assert report.exit_code == 0, report.as_dict()
    synced = vector_sets(client)
    client.flushdb()
    assert migrate(mapping, source=binlog_db.url, target=redis8_url).exit_code == 0
    migrated = vector_sets(client)
    assert sorted(synced) == sorted(migrated)

    assert synced == migrated
    rows = {pk: r for pk, r in mysql_rows(binlog_db).items() if r[3] == 1}  # the filter's rows
    assert len(migrated[b"product:similar"]) == len(rows) > 0
    query = next(iter(rows))
    want = sorted(rows, key=lambda pk: -cosine(rows[query][0], rows[pk][0]))[:10]
    got = [m for m, _ in similar(client, "ELE", query, "COUNT", 10, "TRUTH")]
    assert got == want
    assert len(migrated[b"product:similar"][query][0]) == DIM
