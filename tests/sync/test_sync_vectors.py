"""Vector fields under sync (issue 38 part 3): after each round of inserted, updated and
deleted vectors, prices moving rows across the query's NUMERIC filter, categories moving rows
in and out of the table's ``where:``, and vectors set to NULL, a ``sync`` that catches up
leaves the engine's FLAT answers equal to an exact search over MySQL's rows; verify is 0, finds
a vector changed in Redis (byte for byte; a document's array as float32), and ``--fix``
repairs it. VECTOR(32) on MySQL 9.7, VARBINARY(128) of packed float32 on MariaDB; row hashes
and RedisJSON documents."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from tests.services import MySQLDatabase
from tests.test_search_vectors import (
    DIM,
    MAPPING,
    _load,
    _schema,
    agrees,
    embedding,
    variants_agree,
)
from tests.vector_sample import CATEGORIES, pack, products

_ids = iter(range(38100, 38200))
WHERE = "category <> 'toys'"


def _mapping(kind: str, vector: bool, search_vector: bool = True) -> Any:
    from migrator.mapping.loader import parse_mapping

    text = MAPPING.format(kind=kind, vector="metric: l2" + ("" if vector else f", dim: {DIM}"))
    text = text.replace("    as: ", f'    where: "{WHERE}"\n    as: ')
    if not search_vector:  # the same index without the vector field
        text = text[: text.index("      vector:")]
    return parse_mapping(text, name="vectorsync")


def _round(db: MySQLDatabase, seed: int, next_id: int) -> None:
    """One round of writes, each its own transaction."""
    rnd = random.Random(seed)
    ids = [int(r[0]) for r in db.query("SELECT id FROM product")]
    new = [r for r in products(30, DIM, seed=seed, start=next_id)]
    steps: list[tuple[str, tuple[Any, ...]]] = [
        ("INSERT INTO product VALUES (%s, %s, %s, %s, %s, %s)", r) for r in new
    ]
    for i in rnd.sample(ids, 30):  # a new embedding
        vec = pack([rnd.gauss(0, 1) for _ in range(DIM)])
        steps.append(("UPDATE product SET embedding = %s WHERE id = %s", (vec, i)))
    for i in rnd.sample(ids, 20):  # across the query's price filter
        steps.append(("UPDATE product SET price = %s WHERE id = %s", (rnd.choice((9.5, 99)), i)))
    for i in rnd.sample(ids, 15):  # in and out of the where:
        steps.append(
            ("UPDATE product SET category = %s WHERE id = %s", (rnd.choice(CATEGORIES), i))
        )
    for i in rnd.sample(ids, 5):
        steps.append(("UPDATE product SET embedding = NULL WHERE id = %s", (i,)))
    for i in rnd.sample(ids, 10):
        steps.append(("DELETE FROM product WHERE id = %s", (i,)))
    rnd.shuffle(steps)
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            for sql, args in steps:
                cur.execute(sql, args)
                conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["hash", "json"])
def test_sync_keeps_knn_answers_exact(
    binlog_db: MySQLDatabase, modules_redis_url: str, engine: str, kind: str
) -> None:
    vector = engine == "mysql"  # MariaDB 10.11 has no VECTOR: a VARBINARY of packed float32
    binlog_db.run(_schema(vector))
    _load(binlog_db, products(600, DIM))
    mapping = _mapping(kind, vector)
    client = redis.Redis.from_url(modules_redis_url)
    try:
        for r in range(3):
            if r:
                _round(binlog_db, r, 1000 * r)
            sync(mapping, source=binlog_db.url, target=modules_redis_url, until_caught_up=True,
                 server_id=next(_ids))  # fmt: skip
            agrees(binlog_db, client, "L2", probes=15, keep=WHERE)
            rows = binlog_db.query(f"SELECT COUNT(*) FROM product WHERE {WHERE}")[0][0]
            assert int(client.ft("products").info()["num_docs"]) == rows
        report = verify(mapping, source=binlog_db.url, target=modules_redis_url)
        assert report.exit_code == 0, json.dumps(report.as_dict(), default=str)[:2000]
        (victim,) = binlog_db.query(
            f"SELECT id FROM product WHERE {WHERE} AND embedding IS NOT NULL ORDER BY id LIMIT 1"
        )[0]
        wrong = pack([0.5] * DIM)
        if kind == "hash":
            client.hset(f"product:{victim}", "embedding", wrong)
        else:
            client.execute_command(
                "JSON.SET", f"product:{victim}", "$.embedding", "[0.5" + ",0.5" * (DIM - 1) + "]"
            )
        found = verify(mapping, source=binlog_db.url, target=modules_redis_url)
        assert found.exit_code == 1
        assert found.tables[0].counts["different value"] == 1
        fixed = verify(mapping, source=binlog_db.url, target=modules_redis_url, fix=True)
        assert fixed.exit_code == 0
        assert verify(mapping, source=binlog_db.url, target=modules_redis_url).exit_code == 0
        if kind == "hash":
            assert client.hget(f"product:{victim}", "embedding") == embedding(binlog_db, victim)
        agrees(binlog_db, client, "L2", probes=15, keep=WHERE)
    finally:
        client.close()


@pytest.mark.engine("mysql", why="a nested child's vector is a VECTOR column (MySQL 9)")
def test_sync_keeps_nested_childrens_vectors(
    binlog_db: MySQLDatabase, modules_redis_url: str
) -> None:
    """A child's vector inserted, updated, deleted, and a child moved to another parent: the
    parents' documents follow, and KNN by ``variants_embedding`` answers each product's
    nearest child as MySQL's rows now say; verify 0."""
    from migrator.mapping.loader import parse_mapping
    from tests.test_search_vectors import NESTED, NESTED_MAPPING

    dim = 8
    rnd = random.Random(11)

    def vec() -> bytes:
        return pack([rnd.gauss(0, 1) for _ in range(dim)])

    binlog_db.run(NESTED.format(type=f"VECTOR({dim})"))
    binlog_db.insert("INSERT INTO product VALUES (%s, %s)", [(i, f"p{i}") for i in range(1, 61)])
    binlog_db.insert(
        "INSERT INTO variant VALUES (%s, %s, %s)",
        [(i, rnd.randint(1, 60), vec()) for i in range(1, 121)],
    )
    mapping = parse_mapping(NESTED_MAPPING, name="nestedvectors")
    client = redis.Redis.from_url(modules_redis_url)

    def check() -> None:
        for _ in range(5):
            assert variants_agree(client, binlog_db, vec()) is None

    try:
        for r in range(3):
            if r:
                conn = binlog_db.connect(client_flag=0)
                try:
                    with conn.cursor() as cur:
                        for i in rnd.sample(range(1, 121), 20):
                            cur.execute(
                                "UPDATE variant SET embedding = %s WHERE id = %s", (vec(), i)
                            )
                        for i in rnd.sample(range(1, 121), 10):  # to another product
                            cur.execute("UPDATE variant SET product_id = %s WHERE id = %s",
                                        (rnd.randint(1, 60), i))  # fmt: skip
                        cur.execute("DELETE FROM variant WHERE id %% 17 = %s", (r,))
                        for i in range(10):
                            cur.execute("INSERT INTO variant VALUES (%s, %s, %s)",
                                        (1000 * r + i, rnd.randint(1, 60), vec()))  # fmt: skip
                    conn.commit()
                finally:
                    conn.close()
            sync(mapping, source=binlog_db.url, target=modules_redis_url, until_caught_up=True,
                 server_id=next(_ids))  # fmt: skip
            check()
        report = verify(mapping, source=binlog_db.url, target=modules_redis_url)
        assert report.exit_code == 0, json.dumps(report.as_dict(), default=str)[:2000]
    finally:
        client.close()


def test_naming_a_blob_as_a_vector_rewrites_the_documents(
    binlog_db: MySQLDatabase, modules_redis_url: str
) -> None:
    """A document holds a VARBINARY in base64 until the table's ``search.vector`` names it:
    that changes what the documents hold, so the next ``sync`` takes the table again (an
    online snapshot, as for any table changed in the mapping) and they hold arrays; verify 0."""
    binlog_db.run(_schema(False))
    _load(binlog_db, products(40, DIM))
    before = _mapping("json", False)
    plain = _mapping("json", False, search_vector=False)
    assert before.tables[0].document_vectors == ("embedding",)
    client = redis.Redis.from_url(modules_redis_url)
    try:
        sync(plain, source=binlog_db.url, target=modules_redis_url, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
        doc = json.loads(client.execute_command("JSON.GET", "product:1", "$"))[0]
        assert isinstance(doc["embedding"], str)  # base64
        report = sync(before, source=binlog_db.url, target=modules_redis_url,
                      until_caught_up=True, server_id=next(_ids))  # fmt: skip
        assert [r.status for r in report.resnapshots] == ["its mapping changed"]
        doc = json.loads(client.execute_command("JSON.GET", "product:1", "$"))[0]
        assert pack(doc["embedding"]) == embedding(binlog_db, 1)
        assert verify(before, source=binlog_db.url, target=modules_redis_url).exit_code == 0
    finally:
        client.close()
