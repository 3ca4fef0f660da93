"""Vector sets (``vector_sets:``, docs/mapping.md#vector-sets) on a Redis 8 of the session's own:
``validate`` refuses what cannot be a vector; ``migrate`` writes one element per row with its
vector and attributes; ``VSIM`` answers equal an exact cosine search over the rows read from
MySQL (with and without a FILTER); ``verify`` finds each kind of difference and ``--fix``
repairs them; a target without vector sets is refused before anything is written. MySQL 9.7
stores the embeddings in a VECTOR(8) column, MariaDB in a VARBINARY(32) of packed floats."""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import pytest
import redis

from migrator.commands import dry_run, migrate, verify
from migrator.errors import MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.mapping.validate import check_schema
from migrator.source.mysql import Source
from migrator.verify import report as vr

DIM = 8
CATEGORIES = ["books", "music", "toys"]
ROWS = 240


def schema(engine: str) -> str:
    vector = f"VECTOR({DIM})" if engine == "mysql" else f"VARBINARY({4 * DIM})"
    return f"""
    CREATE TABLE product (
      id INT PRIMARY KEY, name VARCHAR(40), category VARCHAR(20), price DECIMAL(8,2),
      in_stock TINYINT, embedding {vector} NULL, photo BLOB
    );
    """


def mapping_text(engine: str, extra: str = "") -> str:
    dim = "" if engine == "mysql" else f", dim: {DIM}"
    return f"""
version: 1
tables:
  product:
    columns: [name, price]
    vector_sets:
      - {{key: "product:similar", vector: embedding{dim},
         attributes: [category, price, in_stock, name]}}
      - {{key: "product:{{category}}:q8", vector: embedding{dim}, quant: q8, m: 8, ef: 100}}
{extra}"""


def embedding(rng: random.Random) -> bytes:
    return struct.pack(f"<{DIM}f", *(rng.uniform(-1, 1) for _ in range(DIM)))


def row(rng: random.Random, i: int) -> tuple[Any, ...]:
    vector: bytes | None = embedding(rng)
    if i % 37 == 0:
        vector = None
    return (i, f"p{i} “é”", rng.choice(CATEGORIES), f"{rng.randint(100, 9999) / 100:.2f}",
            rng.choice([0, 1]), vector, b"\x00\x01")  # fmt: skip


def load(db: Any, engine: str, rows: int = ROWS) -> None:
    db.run(schema(engine))
    rng = random.Random(5)
    conn = db.connect(client_flag=0)
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO product VALUES (%s,%s,%s,%s,%s,%s,%s)",
                        [row(rng, i) for i in range(1, rows + 1)])  # fmt: skip
        if engine == "mariadb":  # a value of another length: left out of the sets
            cur.execute("UPDATE product SET embedding = x'0000803f' WHERE id = 5")
    conn.commit()
    conn.close()


def mysql_rows(db: Any) -> dict[bytes, tuple[Any, ...]]:
    """pk -> (vector floats, category, price, in_stock, name) of rows with a whole vector."""
    out = {}
    for i, cat, price, stock, name, vec in db.query(
        "SELECT id, category, price, in_stock, name, HEX(embedding) FROM product"
    ):
        vec = None if vec is None else bytes.fromhex(vec)
        if vec is not None and len(vec) == 4 * DIM:
            out[str(i).encode()] = (struct.unpack(f"<{DIM}f", vec), cat, price, stock, name)
    return out


def cosine(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def similar(client: redis.Redis, *args: Any) -> list[tuple[bytes, float]]:
    got = client.execute_command("VSIM", "product:similar", *args, "WITHSCORES")
    pairs = got.items() if isinstance(got, dict) else zip(got[0::2], got[1::2])
    return [(m, float(s)) for m, s in pairs]


def test_validate_refuses_what_is_not_a_vector(mysql_db, engine: str) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run(schema(engine) + "ALTER TABLE product ADD code BINARY(12);")
    with Source(mysql_db.url) as src:
        tables = src.schema()

    def problems(entry: str, extra: str = "") -> list[str]:
        text = f"version: 1\ntables:\n  product:\n{extra}    vector_sets:\n      - {entry}\n"
        return [f"{p.path}: {p.message}" for p in check_schema(parse_mapping(text), tables)
                if p.level == "error"]  # fmt: skip

    assert "holds no vectors" in " ".join(problems("{key: v, vector: price, dim: 2}"))
    assert "holds bytes" in " ".join(
        problems(f"{{key: v, vector: embedding, dim: {DIM}, attributes: [photo]}}")
    )
    expired = problems(f"{{key: v, vector: embedding, dim: {DIM}}}", "    expire: 1h\n")
    assert "expire:" in " ".join(expired)
    if engine == "mysql":
        wrong = problems("{key: v, vector: embedding, dim: 4}")
        assert wrong == ["tables.product.vector_sets[0].dim: dim: 4, but column 'embedding' "
                         "is vector(8)"]  # fmt: skip
        assert problems("{key: v, vector: embedding}") == []
    else:
        assert "must be declared" in " ".join(problems("{key: v, vector: embedding}"))
        assert "needs values of 16 bytes" in " ".join(problems("{key: v, vector: code, dim: 4}"))
        assert problems(f"{{key: v, vector: embedding, dim: {DIM}}}") == []
    with pytest.raises(Exception, match="unknown quantization 'fp16'"):
        parse_mapping("version: 1\ntables:\n  product:\n    vector_sets:\n"
                      "      - {key: v, vector: embedding, quant: fp16}\n")  # fmt: skip


@pytest.fixture
def migrated(mysql_db, engine: str, redis8_url: str) -> tuple[Any, Any, redis.Redis, str]:  # type: ignore[no-untyped-def]
    load(mysql_db, engine)
    mapping = parse_mapping(mapping_text(engine), name="vectors")
    report = migrate(mapping, source=mysql_db.url, target=redis8_url)
    assert report.exit_code == 0, report.as_dict()
    return mysql_db, mapping, redis.Redis.from_url(redis8_url), redis8_url


def test_migrate_writes_each_row_and_vsim_answers_as_mysql(migrated) -> None:  # type: ignore[no-untyped-def]
    db, _, client, _ = migrated
    rows = mysql_rows(db)
    assert client.execute_command("VCARD", "product:similar") == len(rows)
    for pk, (vec, cat, price, stock, name) in list(rows.items())[:40]:
        got = [float(x) for x in client.execute_command("VEMB", "product:similar", pk)]
        assert max(abs(a - b) for a, b in zip(got, vec)) < 1e-6
        attrs = json.loads(client.execute_command("VGETATTR", "product:similar", pk))
        assert attrs == {"category": cat, "price": float(price), "in_stock": stock, "name": name}
    by_category = {c: sum(1 for r in rows.values() if r[1] == c) for c in CATEGORIES}
    for c, n in by_category.items():
        assert client.execute_command("VCARD", f"product:{c}:q8") == n
    info = client.execute_command("VINFO", f"product:{CATEGORIES[0]}:q8")
    info = info if isinstance(info, dict) else dict(zip(info[0::2], info[1::2]))
    assert info[b"quant-type"] == b"int8" and info[b"hnsw-m"] == 8
    # the 10 products most like a product, in stock, under 50: an exact search over MySQL's rows
    for query in list(rows)[:5]:
        qv = rows[query][0]
        want = sorted(((pk, cosine(qv, r[0])) for pk, r in rows.items()
                       if r[3] == 1 and float(r[2]) < 50), key=lambda x: -x[1])[:10]  # fmt: skip
        got = similar(client, "ELE", query, "COUNT", 10, "TRUTH",
                      "FILTER", ".in_stock == 1 and .price < 50")  # fmt: skip
        assert [m for m, _ in got] == [m for m, _ in want]
        for (_, score), (_, cos) in zip(got, want):  # VSIM's similarity: (1 + cosine) / 2
            assert abs(score - (1 + cos) / 2) < 1e-5
        hnsw = {m for m, _ in similar(client, "ELE", query, "COUNT", 10, "EF", 200,
                                      "FILTER", ".in_stock == 1 and .price < 50")}  # fmt: skip
        assert len(hnsw & {m for m, _ in want}) >= 8  # recall@10 of the graph, on 240 elements


def test_verify_names_each_difference_and_fix_repairs(migrated) -> None:  # type: ignore[no-untyped-def]
    db, mapping, client, target = migrated
    assert verify(mapping, source=db.url, target=target).exit_code == 0
    pks = list(mysql_rows(db))
    client.execute_command("VREM", "product:similar", pks[0])  # missing
    changed = struct.pack(f"<{DIM}f", *([0.5] * DIM))
    attrs = client.execute_command("VGETATTR", "product:similar", pks[1])
    client.execute_command("VADD", "product:similar", "FP32", changed, pks[1], "NOQUANT",
                           "SETATTR", attrs)  # fmt: skip
    client.execute_command("VSETATTR", "product:similar", pks[2], '{"category":"x"}')
    foreign = ("FP32", changed, b"9999", "NOQUANT")
    client.execute_command("VADD", "product:similar", *foreign)
    report = verify(mapping, source=db.url, target=target)
    assert report.exit_code == 1
    (table,) = report.as_dict()["tables"]
    kinds = table["differences"]
    assert kinds.get(vr.MISSING_VECTOR) == 1
    assert kinds.get(vr.WRONG_VECTOR) == 2
    assert kinds.get(vr.FOREIGN_VECTOR) == 1
    fixed = verify(mapping, source=db.url, target=target, fix=True)
    assert fixed.exit_code == 0, fixed.as_dict()
    assert verify(mapping, source=db.url, target=target).exit_code == 0


def test_dry_run_shows_the_vadd_and_counts_its_memory(mysql_db, engine: str) -> None:  # type: ignore[no-untyped-def]
    load(mysql_db, engine, rows=50)
    report = dry_run(parse_mapping(mapping_text(engine), name="vectors"), source=mysql_db.url)
    text = json.dumps(report.as_dict())
    assert "VADD" in text and "product:similar" in text
    (table,) = [t for t in report.as_dict()["tables"] if t["table"] == "product"]
    # 50 rows in two sets of 8 floats: about 750 bytes an element
    assert table["memory_bytes"]["vector"] > 2 * 45 * 700, table["memory_bytes"]


def test_a_target_without_vector_sets_is_refused(mysql_db, engine: str, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    load(mysql_db, engine, rows=10)
    client = redis.Redis.from_url(redis_url)
    if b"vectorset" in str(client.execute_command("MODULE", "LIST")).encode():
        pytest.skip("the run's target has vector sets")
    with pytest.raises(MigratorError, match="no vector sets") as e:
        migrate(parse_mapping(mapping_text(engine), name="vectors"), source=mysql_db.url,
                target=redis_url)  # fmt: skip
    assert e.value.exit_code == 2
    assert client.dbsize() == 0
