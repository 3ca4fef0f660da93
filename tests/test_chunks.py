"""Chunks for any primary key (issue 21 item 1): integer, sparse integer, text under a
case-insensitive collation, binary and composite keys are cut along their index into chunks
of about --chunk-rows rows, closed at the key's maximum of the plan; migrate --workers loads
them and --resume finds the same chunks."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from migrator.commands import migrate, verify
from migrator.errors import TargetError
from migrator.scaleout.tasks import _legacy_until
from migrator.source.chunks import EVEN_UP_TO, Chunk, plan_chunks
from migrator.source.mysql import Source
from migrator.source.selects import keyset_value
from migrator.store.checkpoint import Checkpoint
from tests.test_workers import snapshot

# outcome decided by migrate's worker count: again in CI with MIGRATOR_WORKERS=4
pytestmark = pytest.mark.workers

ROWS = 2000
TABLES = f"""
CREATE TABLE num (id INT NOT NULL PRIMARY KEY, v VARCHAR(20));
INSERT INTO num SELECT seq, CONCAT('n', seq) FROM seq_1_to_{ROWS};
CREATE TABLE sparse (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, v VARCHAR(20));
INSERT INTO sparse SELECT IF(seq <= {ROWS // 2}, seq, seq * seq * 1000), CONCAT('s', seq)
FROM seq_1_to_{ROWS};
CREATE TABLE word (
  code VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY,
  v INT
);
INSERT INTO word SELECT CONCAT(ELT(1 + seq % 4, 'a', 'B', 'é', 'Z'), LPAD(seq, 5, '0')), seq
FROM seq_1_to_{ROWS};
CREATE TABLE uid (id BINARY(16) NOT NULL PRIMARY KEY, v INT);
-- MD5() is gone in MySQL 9
INSERT INTO uid SELECT UNHEX(LEFT(SHA2(seq, 256), 32)), seq FROM seq_1_to_{ROWS};
CREATE TABLE pair (a INT NOT NULL, b VARCHAR(10) NOT NULL, v INT, PRIMARY KEY (a, b));
INSERT INTO pair SELECT seq % 7, CONCAT('k', seq), seq FROM seq_1_to_{ROWS};
ANALYZE TABLE num, sparse, word, uid, pair;
"""
KEYS = {"num": "id", "sparse": "id", "word": "code", "uid": "id", "pair": "a, b"}

MAPPING = """
version: 1
options:
  batch_size: 100
tables:
  num: {}
  sparse: {}
  word: {}
  uid: {}
  pair: {}
"""


@pytest.fixture
def keyed(mysql_db: Any, tmp_path: Path) -> Path:
    mysql_db.run(TABLES)
    path = tmp_path / "keyed.yaml"
    path.write_text(MAPPING)
    return path


def plan(src: Source, table: str, chunk_rows: int) -> list[Chunk]:
    ts = src.schema().tables[table]
    pk = [ts.column(c) for c in KEYS[table].split(", ")]
    return plan_chunks(src, table, pk, chunk_rows, ts.row_estimate)


def read(src: Source, table: str, chunk: Chunk | None) -> list[tuple[bytes, ...]]:
    """The primary keys of the rows a chunk's batches read."""
    ts = src.schema().tables[table]
    pk = KEYS[table].split(", ")
    kinds = [ts.column(c).kind for c in pk]
    sel = src.selector(table, pk)

    def values(key: tuple[bytes, ...] | None) -> list[Any] | None:
        return None if key is None else [keyset_value(v, k) for v, k in zip(key, kinds)]

    after = values(chunk.after) if chunk else None
    until = values(chunk.until) if chunk else None
    out: list[tuple[bytes, ...]] = []
    for rows in src.batches(table, sel, pk, 97, after=after, until=until):
        out += [tuple(v or b"" for v in r) for r in rows]
    return out


@pytest.mark.parametrize("table", list(KEYS))
def test_chunks_cover_every_row_once_in_the_index_order(keyed: Path, mysql_db: Any,
                                                        table: str) -> None:  # fmt: skip
    with Source(mysql_db.url) as src:
        chunks = plan(src, table, 150)
        everything = read(src, table, None)  # MySQL's order: the collation's, for text
        got = [read(src, table, c) for c in chunks]
    assert len(everything) == ROWS
    assert [k for part in got for k in part] == everything  # each row once, in order
    assert chunks[0].after is None and chunks[-1].until == everything[-1]  # closed at MAX
    assert all(b.after == a.until for a, b in pairwise(chunks))
    sizes = [len(part) for part in got]
    if table == "num":  # evenly spread integers: cut by arithmetic, never above 2x
        assert max(sizes) <= EVEN_UP_TO * 150 and len(chunks) >= ROWS // 300
    else:  # seeks along the index: exactly --chunk-rows each, the rest in the last one
        assert sizes[:-1] == [150] * (len(chunks) - 1) and 0 < sizes[-1] <= 150
    if table == "word":  # the collation's order is not Python's byte order
        assert everything != sorted(everything)


def handler_reads(src: Source) -> dict[str, int]:
    rows = src.fetch_all(sa.text("SHOW SESSION STATUS LIKE 'Handler_read%'"))
    return {bytes(k).decode(): int(v) for k, v in rows}


@pytest.mark.parametrize("table", ["sparse", "word", "pair"])
def test_planning_walks_the_index_once_never_a_growing_offset(
    keyed: Path, mysql_db: Any, table: str
) -> None:
    with Source(mysql_db.url) as src:
        plan(src, table, 50)  # the schema read and the first connection, before counting
        before = handler_reads(src)
        chunks = plan(src, table, 50)
        after = handler_reads(src)
    reads = {k: after[k] - before[k] for k in after}
    assert len(chunks) == ROWS // 50
    assert reads["Handler_read_rnd_next"] < 50  # no table scan (only SHOW STATUS's own)
    # one pass over the index in all: about ROWS entries (OFFSET k * 50 would read ~40,000);
    # MySQL counts some reads of its data dictionary here too (2,260 seen for 2,000 rows)
    assert reads["Handler_read_next"] <= 1.5 * ROWS + 2 * len(chunks)


def test_rows_inserted_after_the_plan_are_left_to_sync(keyed: Path, mysql_db: Any) -> None:
    with Source(mysql_db.url) as src:
        chunks = plan(src, "word", 500)
    mysql_db.run("INSERT INTO word VALUES ('zz-late', 1), ('ZZZ-late', 2)")
    with Source(mysql_db.url) as src:  # a read after the insert
        last = read(src, "word", chunks[-1])
        everything = read(src, "word", None)
    assert (b"zz-late",) in everything and (b"ZZZ-late",) in everything
    assert (b"zz-late",) not in last and (b"ZZZ-late",) not in last


def fields(client: redis.Redis) -> dict[str, Any]:
    states = Checkpoint(client, "keyed").load()
    return {f: s for f, s in states.items() if "#range:" in f}


def test_workers_load_every_kind_of_key_in_chunks(
    keyed: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    migrate(keyed, source=mysql_db.url, target=redis_url, workers=1)
    assert not fields(redis_client)  # one worker: each table one task, in one snapshot
    want = snapshot(redis_client)
    redis_client.flushdb()
    report = migrate(keyed, source=mysql_db.url, target=redis_url, workers=3, chunk_rows=400)
    assert report.exit_code == 0
    assert snapshot(redis_client) == want
    chunks = fields(redis_client)
    for table in KEYS:
        own = [s for f, s in chunks.items() if f.startswith(table + "#range:")]
        assert len(own) >= ROWS // 800, table  # composite, text and binary keys too
        assert all(s.done and s.until is not None for s in own)
    assert sum(s.rows for s in chunks.values()) == ROWS * len(KEYS)
    assert verify(keyed, source=mysql_db.url, target=redis_url).ok


def test_resume_finds_the_same_chunks(
    keyed: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    migrate(keyed, source=mysql_db.url, target=redis_url, workers=1)
    want = snapshot(redis_client)
    redis_client.flushdb()
    in_the_way = b"word:" + sorted(k[5:] for k in want if k.startswith(b"word:"))[ROWS // 2]
    redis_client.set(in_the_way, "in the way")  # a key of the wrong type: that chunk fails
    with pytest.raises(TargetError, match="WRONGTYPE"):
        migrate(keyed, source=mysql_db.url, target=redis_url, workers=2, chunk_rows=300,
                tables=["word"], into_existing=True)  # fmt: skip
    first = fields(redis_client)
    assert len(first) == -(-ROWS // 300) and not all(s.done for s in first.values())
    redis_client.delete(in_the_way)
    again = migrate(keyed, source=mysql_db.url, target=redis_url, workers=3, chunk_rows=50,
                    tables=["word"], resume=True)  # fmt: skip
    assert again.tables[0].resumed_from + again.tables[0].rows == ROWS
    last = fields(redis_client)
    assert set(last) == set(first)  # the chunks of the plan, whatever --chunk-rows says now
    assert {f: s.until for f, s in last.items()} == {f: s.until for f, s in first.items()}
    assert all(s.done for s in last.values())
    assert {k: v for k, v in snapshot(redis_client).items() if k.startswith(b"word")} == {
        k: v for k, v in want.items() if k.startswith(b"word")
    }


def test_chunk_rows_must_be_positive(keyed: Path, mysql_db: Any, redis_url: str) -> None:
    with pytest.raises(Exception, match="--chunk-rows must be at least 1"):
        migrate(keyed, source=mysql_db.url, target=redis_url, workers=2, chunk_rows=0)


def test_plan_of_an_empty_table_is_empty(mysql_db: Any) -> None:
    mysql_db.run("CREATE TABLE nothing (id VARCHAR(10) NOT NULL PRIMARY KEY)")
    with Source(mysql_db.url) as src:
        pk = [src.schema().tables["nothing"].column("id")]
        assert plan_chunks(src, "nothing", pk, 10, 0) == []


def test_ranges_of_an_older_checkpoint_keep_their_bounds() -> None:
    assert _legacy_until("t#range:99:200") == (b"200",)
    assert _legacy_until("t#range:200:") is None  # the open-ended last range it made
