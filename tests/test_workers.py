"""migrate --workers: the same Redis contents with 1 and 4 workers, resume after a failure
with split key ranges, and the packed hot path byte-identical to the planner's commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands import migrate, session
from migrator.errors import TargetError
from migrator.plan.planner import TablePlan
from migrator.plan.resp import resp
from migrator.scaleout.workers import default_workers
from migrator.store.checkpoint import Checkpoint

# outcome decided by migrate's worker count: again in CI with MIGRATOR_WORKERS=4
pytestmark = pytest.mark.workers

ROWS = 3000
TABLE = f"""
CREATE TABLE item (
  id INT NOT NULL PRIMARY KEY,
  name VARCHAR(40) NULL,
  code VARCHAR(40) NULL,
  grp INT NULL,
  score DECIMAL(8,2) NULL,
  created DATETIME NULL,
  UNIQUE KEY uq_code (code),
  KEY ix_grp (grp)
);
CREATE TABLE digit (d INT NOT NULL);
INSERT INTO digit VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9);
INSERT INTO item
SELECT n,
       IF(n % 7 = 0, NULL, CONCAT('naïve ', n)),
       IF(n % 11 = 0, NULL, CONCAT('c', n)),
       IF(n % 10 = 0, NULL, n DIV 40),
       IF(n % 13 = 0, NULL, (n * 37 % 1000) / 4),
       IF(n % 9 = 0, NULL, TIMESTAMP('2020-01-01') + INTERVAL (n * 7919 % 100000) MINUTE)
FROM (SELECT a.d * 1000 + b.d * 100 + c.d * 10 + e.d + 1 AS n
      FROM digit a, digit b, digit c, digit e) AS seq
WHERE n <= {ROWS};
DROP TABLE digit;
UPDATE item SET name = NULL, code = NULL, grp = NULL, score = NULL, created = NULL
WHERE id = 5;
ANALYZE TABLE item;
"""

MAPPING = """
version: 1
options:
  batch_size: 100
tables:
  item:
    unique: [code]
    indexes: [grp]
    sorted:
      - key: "item:by:score"
        score: score
    latest:
      - key: "item:latest"
        order_by: created
        limit: 50
"""


@pytest.fixture
def item_mapping(mysql_db: Any, tmp_path: Path) -> Path:
    mysql_db.run(TABLE)
    path = tmp_path / "items.yaml"
    path.write_text(MAPPING)
    return path


def snapshot(client: redis.Redis) -> dict[bytes, tuple[bytes, Any]]:
    """Every key except the tool's own run state: its type and its whole value."""
    out: dict[bytes, tuple[bytes, Any]] = {}
    for key in client.scan_iter(count=1000):
        if key.startswith(b"migrator:"):
            continue
        kind = client.type(key)
        value: Any
        if kind == b"hash":
            value = client.hgetall(key)
        elif kind == b"set":
            value = client.smembers(key)
        elif kind == b"zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"list":
            value = client.lrange(key, 0, -1)
        else:
            value = client.get(key)
        out[key] = (kind, value)
    return out


def checkpoint_fields(client: redis.Redis) -> list[str]:
    """The checkpoint's table and range fields (not the run's @marker and @run)."""
    fields = (f.decode() for f in client.hkeys("migrator:items:checkpoint"))
    return sorted(f for f in fields if not f.startswith("@"))


def test_one_and_four_workers_write_identical_contents(
    item_mapping: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    one = migrate(item_mapping, source=mysql_db.url, target=redis_url, workers=1)
    assert checkpoint_fields(redis_client) == ["item"]  # one worker: the table is one range
    first = snapshot(redis_client)
    redis_client.flushdb()
    four = migrate(item_mapping, source=mysql_db.url, target=redis_url, workers=4,
                   chunk_rows=ROWS // 4)  # fmt: skip
    ranges = [f for f in checkpoint_fields(redis_client) if f.startswith("item#range:")]
    assert len(ranges) == 4  # the key range really was cut into chunks
    assert snapshot(redis_client) == first
    assert one.tables[0].as_dict() | {"seconds": 0, "rows_per_second": 0} == four.tables[
        0
    ].as_dict() | {"seconds": 0, "rows_per_second": 0}
    assert first[b"item:5"] == (b"hash", {b"id": b"5"})  # the all-NULL row rule
    assert len([k for k in first if k[5:].isdigit()]) == ROWS
    assert first[b"item:id"] == (b"string", str(ROWS).encode())
    assert len(first[b"item:latest"][1]) == 50


# neighbours: test_chunks.py::test_resume_finds_the_same_chunks, and
# test_faults.py::test_workers_die_with_their_parent_and_resume_completes
@pytest.mark.long
def test_resume_with_workers_after_a_failure(
    item_mapping: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    migrate(item_mapping, source=mysql_db.url, target=redis_url, workers=1)
    want = snapshot(redis_client)
    redis_client.flushdb()
    # a key of the wrong type where the index set of grp 70 (ids 2800-2839) must go: the last
    # range fails part-way, after some of its batches were acknowledged
    redis_client.set("item:indices:grp:70", "in the way")
    with pytest.raises(TargetError, match="WRONGTYPE"):  # (the preflight would refuse it)
        migrate(item_mapping, source=mysql_db.url, target=redis_url, workers=4,
                chunk_rows=ROWS // 4, into_existing=True)  # fmt: skip
    state = Checkpoint(redis_client, "items").load()
    ranges = {f: s for f, s in state.items() if f.startswith("item#range:")}
    assert len(ranges) == 4 and "item" not in state
    assert not all(s.done for s in ranges.values())
    assert sum(s.rows for s in ranges.values()) > 0
    redis_client.delete("item:indices:grp:70")
    again = migrate(item_mapping, source=mysql_db.url, target=redis_url, workers=2, resume=True)
    table = again.tables[0]
    assert table.resumed_from > 0
    assert table.resumed_from + table.rows == ROWS
    assert snapshot(redis_client) == want
    assert Checkpoint(redis_client, "items").load()["item"].done


def test_packed_batches_equal_the_planned_commands(item_mapping: Path, mysql_db: Any) -> None:
    mapping = session.load(item_mapping)
    with session.opened(mapping, mysql_db.url) as (src, resolved):
        plan = TablePlan(resolved[0])
        selector = src.selector("item", plan.select)
        pk = resolved[0].primary_key
        batches = list(src.batches("item", selector, pk, 250))
    assert sum(len(b) for b in batches) == ROWS
    for rows in batches:
        planned, stats = plan.plan(rows)
        payload, count, packed_stats = plan.pack(rows)
        assert payload == resp(planned)
        assert count == len(planned)
        assert packed_stats == stats


@pytest.mark.parametrize(
    ("rows", "cpus", "want"),
    [
        (None, 1, 1),
        (10_000_000, 2, 1),  # 2 CPUs: MySQL and Redis need them, one process is fastest
        (10_000_000, 3, 3),
        (10_000_000, 16, 4),
        (None, 8, 4),
        (199_999, 8, 1),  # small loads: starting processes costs more than it saves
        (200_000, 8, 4),
    ],
)
def test_default_workers(rows: int | None, cpus: int, want: int) -> None:
    assert default_workers(rows, cpus) == want
    assert 1 <= default_workers(rows) <= 4


PACK_CASES = {
    # the generated whole-batch code (row hash, unique hashes, index sets only)
    "generated": ("unique: [code, [name, grp]]\n    indexes: [grp, [grp, code]]", True),
    "generated, own key": ('key: "it:{code}:{id}"\n    unique: [name]\n    indexes: [score]', True),
    "generated, no hash": ("as: none\n    unique: [code]\n    indexes: [grp]", True),
    "generated, few columns": ("columns: [grp]\n    indexes: [created]", True),
    # the general loop (sorted sets beside the rest)
    "loop": ('indexes: [grp]\n    sorted:\n      - key: "s"\n        score: score', False),
}


@pytest.mark.parametrize("case", sorted(PACK_CASES))
def test_packed_equal_planned_for_each_path(case: str, mysql_db: Any, tmp_path: Path) -> None:
    body, generated = PACK_CASES[case]
    mysql_db.run(TABLE)
    path = tmp_path / "m.yaml"
    path.write_text(f"version: 1\ntables:\n  item:\n    counter: false\n    {body}\n")
    mapping = session.load(path)
    with session.opened(mapping, mysql_db.url) as (src, resolved):
        plan = TablePlan(resolved[0])
        selector = src.selector("item", plan.select)
        batches = list(src.batches("item", selector, resolved[0].primary_key, 300))
    for rows in batches:
        planned, stats = plan.plan(rows)
        payload, count, packed_stats = plan.pack(rows)
        assert (payload, count, packed_stats) == (resp(planned), len(planned), stats), case
    assert (plan._packer.batch is not None) is generated
