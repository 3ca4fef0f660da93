"""Vector fields of a search index (issue 38; plan/search.py ``vector_args``, plan/documents.py
``floats``), on a server with the query engine (tests/modules_server.py): MySQL 9's VECTOR
(on MySQL only: MariaDB 10.11 has no such type) and a VARBINARY of packed float32 with its
``dim`` (both engines) become ``VECTOR FLAT|HNSW`` attributes of row hashes and of RedisJSON
documents (an array of numbers there); what validate refuses; dry-run's FT.CREATE; and KNN
answers with TAG and NUMERIC filters equal to an exact search over the rows read back from
MySQL (FLAT), HNSW's recall@10 measured and printed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.commands.search.query import Query

from migrator.commands import dry_run, migrate, validate, verify
from migrator.errors import MappingError
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.plan.documents import differing, floats, parsed
from migrator.plan.search import definition, definitions
from migrator.source.mysql import Source
from tests.services import MySQLDatabase
from tests.vector_sample import exact, pack, products, same_answer

DIM = 32
SCHEMA = """
CREATE TABLE product (
  id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, category VARCHAR(16) NOT NULL,
  in_stock ENUM('yes', 'no') NOT NULL, price DECIMAL(7,2) NOT NULL, embedding {type}
) CHARACTER SET utf8mb4
"""

MAPPING = """
version: 1
tables:
  product:
    as: {kind}
    formats: {{price: number}}
    search:
      name: products
      tag: [in_stock, category]
      numeric: [price]
      vector:
        embedding: {{{vector}}}
"""

#: docs/mapping.md's example: the 10 products most like this one, in stock, under a price
QUERY = "(@in_stock:{yes} @price:[-inf 50])=>[KNN 10 @embedding $v AS d]"


def _schema(vector: bool) -> str:
    return SCHEMA.format(type=f"VECTOR({DIM})" if vector else f"VARBINARY({4 * DIM})")


def _mapping(kind: str = "hash", vector: str = "metric: cosine", blob: bool = False) -> Any:
    if blob:
        vector += f", dim: {DIM}"
    return parse_mapping(MAPPING.format(kind=kind, vector=vector), name="vectors")


def _load(db: MySQLDatabase, rows: list[tuple[Any, ...]]) -> None:
    db.insert("INSERT INTO product VALUES (%s, %s, %s, %s, %s, %s)", rows)


def _schema_of(db: MySQLDatabase) -> Any:
    with Source(db.url) as src:
        return src.schema()


def knn(
    client: redis.Redis, query: bytes, k: int = 10, where: str = "@in_stock:{yes} @price:[-inf 50]"
) -> list[tuple[float, int]]:
    """The engine's answer: (distance, id), nearest first."""
    q = f"({where})=>[KNN {k} @embedding $v AS d]"
    found = client.ft("products").search(
        Query(q).sort_by("d").return_field("d").paging(0, k).dialect(2), query_params={"v": query}
    )
    return [(float(doc.d), int(str(doc.id).split(":")[1])) for doc in found.docs]


def vectors(db: MySQLDatabase, where: str = "1") -> list[tuple[int, bytes]]:
    """(id, embedding) of the rows ``where`` keeps that have one, as MySQL holds them now
    (HEX: pymysql cannot decode a VECTOR itself)."""
    sql = f"SELECT id, HEX(embedding) FROM product WHERE ({where}) AND embedding IS NOT NULL"
    return [(int(i), bytes.fromhex(v)) for i, v in db.query(sql + " ORDER BY id")]


def exact_answer(
    rows: list[tuple[int, bytes]], query: bytes, metric: str, k: int = 10
) -> tuple[list[tuple[float, int]], dict[int, float]]:
    """The k nearest of ``rows``, computed here, and every row's distance."""
    every = {i: d for d, i in exact(rows, query, len(rows), metric)}
    return sorted((d, i) for i, d in every.items())[:k], every


def embedding(db: MySQLDatabase, i: int) -> bytes:
    """A row's embedding as MySQL holds it."""
    return vectors(db, f"id = {int(i)}")[0][1]


def probes_of(db: MySQLDatabase, probes: int) -> list[tuple[int, bytes]]:
    """``probes`` products' embeddings, spread over the table, as query vectors."""
    rows = vectors(db)
    return rows[:: max(1, len(rows) // probes)][:probes]


def agrees(
    db: MySQLDatabase, client: redis.Redis, metric: str, probes: int = 20, keep: str = "1"
) -> None:
    """KNN with the filter == the exact search over MySQL's rows (those ``keep``, the table's
    ``where:``, keeps), for ``probes`` query vectors (embeddings of products, so that the
    product itself is among the answers when it passes)."""
    rows = vectors(db, f"in_stock = 'yes' AND price <= 50 AND ({keep})")
    for i, query in probes_of(db, probes):
        want, every = exact_answer(rows, query, metric)
        got = knn(client, query)
        why = same_answer(got, want, every)
        assert why is None, f"query by product {i}: {why}"


def test_the_definition_and_what_validate_refuses(mysql_db: MySQLDatabase, tmp_path: Path) -> None:
    mysql_db.run(_schema(vector=False))
    schema = _schema_of(mysql_db)
    index = definition(
        resolve(_mapping(vector="metric: L2, algorithm: hnsw, m: 8", blob=True), schema)[0]
    )
    assert index is not None
    (vec,) = index.vectors()
    assert vec.args() == [
        "embedding", "VECTOR", "HNSW", "8", "TYPE", "FLOAT32", "DIM", "32",
        "DISTANCE_METRIC", "L2", "M", "8",
    ]  # fmt: skip
    json_index = definition(resolve(_mapping("json", blob=True), schema)[0])
    assert json_index is not None
    assert json_index.vectors()[0].args()[:5] == [
        "$.embedding",
        "AS",
        "embedding",
        "VECTOR",
        "FLAT",
    ]
    refused = {
        "metric: cosine": "dim: 32",  # a VARBINARY says no dimension
        "metric: cosine, dim: 40": "at most 32",  # 160 bytes > VARBINARY(128)
        "metric: hamming": "write one of cosine, l2, ip",
        "metric: l2, algorithm: ivf": "flat (exact) or hnsw",
        "metric: l2, m: 16": "FLAT takes initial_cap, block_size",
        "metric: l2, algorithm: hnsw, m: 0": "expected a positive integer",
    }
    for vector, fix in refused.items():
        with pytest.raises(MappingError) as e:
            definition(resolve(_mapping(vector=vector), schema)[0])
        assert fix in f"{e.value.detail} {e.value.hint}", (vector, e.value)
        assert "search" in str(e.value.path)
    not_a_vector = parse_mapping(MAPPING.format(kind="hash", vector="metric: l2").replace(
        "embedding: {", "price: {"), name="v")  # fmt: skip
    with pytest.raises(MappingError, match="is not a vector") as e:
        definition(resolve(not_a_vector, schema)[0])
    assert "BLOB/VARBINARY column with dim" in str(e.value.hint)
    mysql_db.run("CREATE TABLE fixed (id INT PRIMARY KEY, e BINARY(64))")
    fixed = parse_mapping(
        "version: 1\ntables:\n  fixed:\n    search: {name: f, vector: {e: {metric: l2, dim: 8}}}\n",
        name="v",
    )
    with pytest.raises(MappingError, match="cannot hold 8 float32") as e:
        definition(resolve(fixed, _schema_of(mysql_db), ["fixed"])[0])
    assert "exactly 16" in str(e.value.hint)
    narrow = parse_mapping(
        MAPPING.format(kind="hash", vector="metric: l2, dim: 32").replace(
            "    as: hash\n", "    as: hash\n    columns: [name, price]\n"
        ),
        name="v",
    )
    with pytest.raises(MappingError, match="not in its row hash") as e:
        definition(resolve(narrow, schema)[0])
    assert "add it to tables.product.columns" in str(e.value.hint)
    with pytest.raises(MappingError, match="unknown distance metric 'manhattan'"):
        _mapping(vector="metric: manhattan")  # read with the mapping
    path = tmp_path / "vectors.yaml"
    for vector, fix in (("metric: cosine", "dim: 32"), ("metric: manhattan", "cosine, l2, ip")):
        path.write_text(MAPPING.format(kind="hash", vector=vector))
        report = validate(path, source=mysql_db.url)
        assert report.exit_code == 2 and fix in json.dumps(report.as_dict()), report.as_dict()


@pytest.mark.engine("mysql", why="VECTOR is MySQL 9's type (MariaDB 10.11 has none)")
def test_a_vector_column_takes_its_dimension_from_the_type(mysql_db: MySQLDatabase) -> None:
    mysql_db.run(_schema(vector=True))
    _load(mysql_db, products(5, DIM))
    schema = _schema_of(mysql_db)
    index = definition(resolve(_mapping(), schema)[0])
    assert index is not None and "DIM 32" in " ".join(index.vectors()[0].args())
    with pytest.raises(MappingError, match=re.escape("vector(32): 32 dimensions")) as e:
        definition(resolve(_mapping(vector="metric: ip, dim: 64"), schema)[0])
    assert "write dim: 32" in str(e.value.hint)
    report = dry_run(_mapping(), source=mysql_db.url, sample=0)
    (table,) = report.tables
    assert table.search is not None
    assert "embedding VECTOR FLAT 6 TYPE FLOAT32 DIM 32 DISTANCE_METRIC COSINE" in table.search


def _migrated(
    db: MySQLDatabase,
    url: str,
    mapping: Any,
    vector: bool,
    n: int = 2000,
    rows: list[tuple[Any, ...]] | None = None,
) -> redis.Redis:
    db.run(_schema(vector))
    _load(db, products(n, DIM) if rows is None else rows)
    report = migrate(mapping, source=db.url, target=url)
    assert report.exit_code == 0, json.dumps(report.as_dict(), default=str)[:3000]
    return redis.Redis.from_url(url)


@pytest.mark.engine("mysql", why="VECTOR is MySQL 9's type (MariaDB 10.11 has none)")
@pytest.mark.parametrize("kind", ["hash", "json"])
def test_flat_knn_equals_an_exact_search_over_mysql_vector_rows(
    mysql_db: MySQLDatabase, modules_redis_url: str, kind: str
) -> None:
    client = _migrated(mysql_db, modules_redis_url, _mapping(kind), vector=True)
    try:
        if kind == "json":  # an array of numbers, each the float32's exact value
            raw = embedding(mysql_db, 1)
            doc = json.loads(client.execute_command("JSON.GET", "product:1", "$"))[0]
            assert pack(doc["embedding"]) == raw  # the same float32, byte for byte
        else:
            raw = embedding(mysql_db, 1)
            assert client.hget("product:1", "embedding") == raw
        agrees(mysql_db, client, "COSINE")
        assert verify(_mapping(kind), source=mysql_db.url, target=modules_redis_url).exit_code == 0
    finally:
        client.close()


@pytest.mark.parametrize("kind", ["hash", "json"])
def test_flat_knn_equals_an_exact_search_over_packed_blobs(
    mysql_db: MySQLDatabase, modules_redis_url: str, kind: str
) -> None:
    mapping = _mapping(kind, "metric: l2", blob=True)
    client = _migrated(mysql_db, modules_redis_url, mapping, vector=False, n=1500)
    try:
        agrees(mysql_db, client, "L2")
        report = verify(mapping, source=mysql_db.url, target=modules_redis_url)
        assert report.exit_code == 0, json.dumps(report.as_dict(), default=str)[:3000]
    finally:
        client.close()


def test_a_document_holds_a_vector_as_float32_numbers() -> None:
    """plan/documents.py ``floats``: docs/values.md's example, and base64 for what is no
    whole number of finite float32; verify's comparison by float32 bytes."""
    assert floats(pack([1, -2.5, 0.1])) == b"[1,-2.5,0.100000001]"
    assert floats(b"\x00\x00\x80\x7f") == b'"AACAfw=="'  # +inf: base64
    assert floats(b"abcde") == b'"YWJjZGU="'  # 5 bytes
    want = parsed(b'{"e":[0.100000001],"kids":[{"e":[1]}]}')
    near = parsed(b'{"e":[0.10000000100000001],"kids":[{"e":[1.0000000001]}]}')
    assert differing(want, near, frozenset({"e"})) == []
    assert differing(want, near) == ["e", "kids"]  # not vectors: numbers by value
    assert differing(want, parsed(b'{"e":[0.2],"kids":[{"e":[1]}]}'), frozenset({"e"})) == ["e"]


@pytest.mark.parametrize("kind", ["hash", "json"])
def test_a_null_vector_is_indexed_without_one_and_a_malformed_one_is_not_indexed(
    mysql_db: MySQLDatabase, modules_redis_url: str, kind: str
) -> None:
    """A NULL vector: the row is in the index (TAG, NUMERIC queries find it) but no KNN
    answer; a value of another length than dim's: the server refuses the document (an
    indexing failure), which verify reports as a count that differs from MySQL's rows."""
    mapping = _mapping(kind, "metric: ip", blob=True)
    rows = products(50, DIM)
    rows[3] = (*rows[3][:5], None)
    client = _migrated(mysql_db, modules_redis_url, mapping, vector=False, rows=rows)
    try:
        got = knn(client, rows[4][5], k=60, where="*")
        assert sorted(i for _, i in got) == [r[0] for r in rows if r[5] is not None]
        assert int(client.ft("products").info()["num_docs"]) == 50
        assert verify(mapping, source=mysql_db.url, target=modules_redis_url).exit_code == 0
        mysql_db.run("UPDATE product SET embedding = 'twelve bytes' WHERE id = 6")
        assert migrate(mapping, source=mysql_db.url, target=modules_redis_url).exit_code == 0
        report = verify(mapping, source=mysql_db.url, target=modules_redis_url)
        assert report.exit_code == 1
        assert report.tables[0].counts["search index documents"] == 1
    finally:
        client.close()


NESTED = """
CREATE TABLE product (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL) CHARACTER SET utf8mb4;
CREATE TABLE variant (
  id INT PRIMARY KEY, product_id INT NOT NULL, embedding {type},
  FOREIGN KEY (product_id) REFERENCES product (id)
) CHARACTER SET utf8mb4;
"""

NESTED_MAPPING = """
version: 1
tables:
  product:
    as: json
    search:
      name: products
      vector:
        variants.embedding: {metric: l2, algorithm: flat}
  variant:
    nest: {in: product, as: variants}
"""


@pytest.mark.engine("mysql", why="a nested child's vector is a VECTOR column (MySQL 9)")
def test_nested_childrens_vectors_answer_with_their_nearest_child(
    mysql_db: MySQLDatabase, modules_redis_url: str
) -> None:
    """``variants.embedding``: ``$.variants[*].embedding`` holds each child's vector; a
    product's distance is its nearest variant's (the engine's multi-value vectors), equal to
    the exact minimum over the children MySQL holds; a product without variants is indexed
    but never an answer. A nested child's BLOB is refused (its document cannot know it)."""
    dim = 8
    mysql_db.run(NESTED.format(type=f"VECTOR({dim})"))
    rnd = __import__("random").Random(7)
    mysql_db.insert("INSERT INTO product VALUES (%s, %s)", [(i, f"p{i}") for i in range(1, 201)])
    variants = []
    for p in range(1, 201):
        for _ in range(rnd.choice((0, 1, 2, 3))):
            vec = pack([rnd.gauss(0, 1) for _ in range(dim)])
            variants.append((len(variants) + 1, p, vec))
    mysql_db.insert("INSERT INTO variant VALUES (%s, %s, %s)", variants)
    mapping = parse_mapping(NESTED_MAPPING, name="vectors")
    (index,) = [i for i in definitions_of(mysql_db, mapping) if i.table == "product"]
    assert index.vectors()[0].args()[:3] == ["$.variants[*].embedding", "AS", "variants_embedding"]
    assert migrate(mapping, source=mysql_db.url, target=modules_redis_url).exit_code == 0
    client = redis.Redis.from_url(modules_redis_url)
    try:
        for probe in range(10):
            query = pack([rnd.gauss(0, 1) for _ in range(dim)])
            assert variants_agree(client, mysql_db, query) is None, probe
        assert int(client.ft("products").info()["num_docs"]) == 200
        report = verify(mapping, source=mysql_db.url, target=modules_redis_url)
        assert report.exit_code == 0, json.dumps(report.as_dict(), default=str)[:3000]
    finally:
        client.close()
    mysql_db.run(NESTED.replace("product", "item").replace("variant", "part").format(
        type="BLOB"))  # fmt: skip
    blob = NESTED_MAPPING.replace("product", "item").replace("variant", "part")
    blob = blob.replace("{metric: l2, algorithm: flat}", "{metric: l2, dim: 8}")
    with pytest.raises(MappingError, match="needs a VECTOR column") as e:
        definitions_of(mysql_db, parse_mapping(blob, name="v"))
    assert "nested child's BLOB cannot be one" in str(e.value.hint)


def definitions_of(db: MySQLDatabase, mapping: Any) -> list[Any]:
    with Source(db.url) as src:
        resolved = resolve(mapping, src.schema())
    return definitions(resolved)


def recall_at_10(
    db: MySQLDatabase, client: redis.Redis, metric: str, probes: int, filtered: bool = True
) -> float:
    """The share of the exact 10 nearest (``filtered``: in stock, under 50; else of every row)
    that the engine returns, over ``probes`` query vectors; tied ids count as found."""
    redis_where, mysql_where = (
        "@in_stock:{yes} @price:[-inf 50]",
        "in_stock = 'yes' AND price <= 50",
    )
    if not filtered:
        redis_where, mysql_where = "*", "1"
    rows = vectors(db, mysql_where)
    hits = total = 0
    for _, query in probes_of(db, probes):
        want, every = exact_answer(rows, query, metric)
        got = knn(client, query, where=redis_where)
        bound = want[-1][0] + 1e-4 if want else 0
        hits += sum(1 for _, j in got if every.get(j, bound + 1) <= bound)
        total += len(want)
    return hits / total


@pytest.mark.engine("mariadb", why="the same packed floats on both engines: one figure is enough")
def test_hnsw_recall_at_10_is_measured(mysql_db: MySQLDatabase, modules_redis_url: str) -> None:
    """HNSW is approximate: its recall@10 against the exact search is printed (the figure of
    docs/mapping.md), with 0.9 as a floor that only a broken index falls under."""
    vector = "metric: cosine, algorithm: hnsw, m: 16, ef_construction: 200, ef_runtime: 20"
    mapping = _mapping("hash", vector, blob=True)
    client = _migrated(mysql_db, modules_redis_url, mapping, vector=False, n=3000)
    try:
        filtered = recall_at_10(mysql_db, client, "COSINE", probes=30)
        every = recall_at_10(mysql_db, client, "COSINE", probes=30, filtered=False)
        print(
            f"HNSW (M 16, EF_CONSTRUCTION 200, EF_RUNTIME 20), 3,000 rows: recall@10 "
            f"{filtered:.3f} in stock under 50, {every:.3f} unfiltered (30 queries each)"
        )
        assert filtered >= 0.9 and every >= 0.9
    finally:
        client.close()


def variants_agree(client: redis.Redis, db: MySQLDatabase, query: bytes) -> Any:
    """The index's 10 products nearest ``query`` by their variants' embeddings (a nested
    vector: a product's distance is its nearest variant's) against the exact answer over
    MySQL's variant rows: None when they agree, else what differs."""
    rows = [
        (int(p), bytes.fromhex(h))
        for p, h in db.query("SELECT product_id, HEX(embedding) FROM variant")
    ]
    nearest: dict[int, float] = {}
    for d, p in exact(rows, query, len(rows), "L2"):
        nearest.setdefault(p, d)
    want = sorted((d, p) for p, d in nearest.items())[:10]
    found = client.ft("products").search(
        Query("*=>[KNN 10 @variants_embedding $v AS d]").sort_by("d").return_field("d")
        .paging(0, 10).dialect(2),
        query_params={"v": query},
    )  # fmt: skip
    got = [(float(doc.d), int(str(doc.id).split(":")[1])) for doc in found.docs]
    return None if same_answer(got, want, nearest) is None else (got, want)
