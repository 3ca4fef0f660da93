"""What ``init`` drafts from a real schema and its rows (issue 16 item 6): nothing at all from
a database without tables (exit 2), a key for a table without one only where the rows prove
it unique and never NULL, and a sorted set for an index on a date/time column or on a
numeric one holding about a value per row — a draft that validates, migrates and verifies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import redis
import yaml

from migrator.commands import migrate, validate, verify
from migrator.mapping import profile, scaffold
from migrator.mapping.kinds import Kind
from migrator.mapping.schema import Column, IndexInfo, TableSchema
from tests.services import MySQLDatabase


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIGRATOR_")}
    env["COLUMNS"] = "80"
    program = Path(sys.executable).parent / "migrator"
    return subprocess.run(
        [str(program), *args], capture_output=True, text=True, env=env, timeout=120
    )


# -- a database without tables ---------------------------------------------------------------


def test_init_on_a_database_without_tables_exits_2_and_writes_nothing(
    mysql_db: MySQLDatabase, tmp_path: Path
) -> None:
    out = tmp_path / "empty.yaml"
    done = cli("init", "--source", mysql_db.url, "-o", str(out))
    assert done.returncode == 2, done.stderr
    assert f"error: database '{mysql_db.name}' has no tables: there is nothing to draft" in (
        done.stderr
    )
    assert "hint: create the tables first" in done.stderr
    assert not out.exists() and done.stdout == ""
    mysql_db.run("CREATE VIEW just_a_view AS SELECT 1 AS one")
    done = cli("init", "--source", mysql_db.url)
    assert done.returncode == 2, done.stderr
    assert "has no tables (only views: just_a_view)" in done.stderr
    assert done.stdout == ""


# -- a table without a key -------------------------------------------------------------------

NO_KEY_SQL = """
CREATE TABLE events (status VARCHAR(10), n INT NOT NULL, code VARCHAR(20), note TEXT,
  KEY (status), KEY (n));
INSERT INTO events VALUES ('new', 1, 'a1', 'x'), ('new', 1, 'a2', NULL), ('done', 2, 'a3', 'y');
CREATE TABLE visits (ref VARCHAR(20), page VARCHAR(40), UNIQUE KEY (ref), KEY (page));
INSERT INTO visits VALUES ('r1', '/'), ('r2', '/'), ('r3', '/about');
CREATE TABLE twins (a INT, b VARCHAR(5), KEY (a));
INSERT INTO twins VALUES (1, 'x'), (1, 'x'), (NULL, 'y');
CREATE TABLE nothing_yet (a INT, b VARCHAR(5), KEY (a));
"""


def test_a_table_without_a_key_is_offered_columns_its_rows_prove_unique(
    mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    mysql_db.run(NO_KEY_SQL)
    done = cli("init", "--source", mysql_db.url)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    # events: status (nullable, 2 values) and n (NOT NULL, repeated) are indexed; code is not,
    # but it is the column whose values the rows prove unique and never NULL
    assert "  # (code) is unique and never NULL in all 3 rows today, e.g.:\n" in text, text
    assert "  #     primary_key: [code]\n  #     key: events:{code}\n" in text, text
    assert "primary_key: [status]" not in text and "primary_key: [n]" not in text
    # visits: a UNIQUE index on a nullable column holding no NULL comes first
    assert "  #     primary_key: [ref]\n  #     key: visits:{ref}\n" in text, text
    # twins: no column or set of columns is unique: said so, no example offered
    assert (
        "  # no column or index can key it (none is unique and never NULL in its 3 rows): "
        "add a primary key in MySQL first\n"
    ) in text, text
    assert "key: twins:" not in text
    assert "no column or index can key it (it has no rows)" in text
    # the example, uncommented, is a mapping that migrates and verifies
    draft = yaml.safe_load(text)
    draft["tables"] = {"events": {"primary_key": ["code"], "key": "events:{code}"}}
    path = tmp_path / "events.yaml"
    path.write_text(yaml.safe_dump(draft))
    assert migrate(path, source=mysql_db.url, target=redis_url).exit_code == 0  # in-process
    verified = verify(path, source=mysql_db.url, target=redis_url)
    assert verified.exit_code == 0, verified.as_dict()


def test_a_nullable_low_cardinality_index_is_never_offered_as_a_key() -> None:
    """The pure draft (rows not read) names no column at all."""
    t = TableSchema(
        "events",
        (Column("status", Kind.TEXT, True, "varchar(10)"), Column("n", Kind.INTEGER, False, "int")),
        (),
        (IndexInfo("status", ("status",), False), IndexInfo("n", ("n",), False)),
        (),
    )
    rows = profile.Profile(rows={"events": 3}, distinct={("events", ("status",)): 2,
                                                         ("events", ("n",)): 2})  # fmt: skip
    assert profile.proven_identity(t, rows) is None
    d = scaffold.draft_table(t, scaffold.Schema("db", {"events": t}, ()), ":", rows)
    assert d.body is None and d.notes[1:] == [
        "no column or index can key it (none is unique and never NULL in its 3 rows): "
        "add a primary key in MySQL first"
    ]
    d = scaffold.draft_table(t, scaffold.Schema("db", {"events": t}, ()), ":")
    assert d.notes[-1] == "its rows were not read: no columns to suggest as its key"


# -- sorted sets for time and for numbers with a value per row --------------------------------


def test_a_few_rows_say_too_little_to_leave_a_set_per_value() -> None:
    """emp's mgr_id (samples/emp.sql: 3 rows, 2 managers) stays a SET per manager."""
    few = profile.Profile(rows={"emp": 3}, distinct={("emp", ("mgr_id",)): 2})
    assert not few.many_values("emp", "mgr_id")
    many = profile.Profile(rows={"emp": 100}, distinct={("emp", ("mgr_id",)): 51})
    assert many.many_values("emp", "mgr_id")
    assert not profile.Profile(rows={"emp": 100}, distinct={("emp", ("mgr_id",)): 50}).many_values(
        "emp", "mgr_id"
    )


ORDERS = 120  # rows: enough for init to judge how many values a column holds (100 or more)
ORDERS_SQL = (
    """
CREATE TABLE orders (
  id INT PRIMARY KEY, placed_at DATETIME NOT NULL, shipped_on DATE, amount DECIMAL(10,2),
  qty INT NOT NULL, region VARCHAR(5) NOT NULL, seen TIMESTAMP NULL,
  KEY (placed_at), KEY (shipped_on), KEY (amount), KEY (qty), KEY (region), KEY (seen)
);
"""
    + "INSERT INTO orders VALUES "
    + ", ".join(
        f"({i}, '2024-05-01 00:00:00' + INTERVAL {i} HOUR, "
        f"{'NULL' if i % 10 == 0 else repr(f'2024-06-{1 + i % 28:02d}')}, {i * 1.25:.2f}, {i % 3}, "
        f"'{('eu', 'us')[i % 2]}', {'NULL' if i % 7 == 0 else repr('2024-07-01 12:00:00')})"
        for i in range(1, ORDERS + 1)
    )
)


def test_a_time_or_many_valued_index_is_drafted_as_a_sorted_set_that_loads_and_verifies(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    mysql_db.run(ORDERS_SQL)
    path = tmp_path / "orders.yaml"
    assert cli("init", "--source", mysql_db.url, "-o", str(path)).returncode == 0
    text = path.read_text()
    body = yaml.safe_load(text)["tables"]["orders"]
    assert sorted(body["sorted"], key=lambda s: s["key"]) == [
        {"key": "orders:by:amount", "score": "amount"},  # a value per row
        {"key": "orders:by:placed_at", "score": "placed_at"},
        {"key": "orders:by:seen", "score": "seen"},
        {"key": "orders:by:shipped_on", "score": "shipped_on"},
    ]
    assert sorted(body["indexes"]) == ["qty", "region"]  # 40 and 60 rows a value: SETs
    assert (
        "    # placed_at: range queries by score (ZRANGE orders:by:placed_at A B BYSCORE); a "
        "SET per value would hold about one row each. That form instead: indexes: [placed_at]"
    ) in text, text
    # the draft as written, checked, loaded and verified by the commands in this process (a
    # subprocess each costs seconds on a busy host; init above is the command line's)
    checked = validate(path, source=mysql_db.url)
    assert checked.exit_code == 0, checked.summary()
    assert migrate(path, source=mysql_db.url, target=redis_url).exit_code == 0
    verified = verify(path, source=mysql_db.url, target=redis_url)
    assert verified.exit_code == 0, verified.as_dict()
    may_first = redis_client.zrangebyscore("orders:by:placed_at", 1714521600, 1714608000 - 1)
    assert may_first == [str(i).encode() for i in range(1, 24)]  # placed on 2024-05-01 (UTC)
    by_amount = redis_client.zrange("orders:by:amount", 0, -1)
    assert by_amount == [str(i).encode() for i in range(1, ORDERS + 1)]
    assert redis_client.zcard("orders:by:shipped_on") == ORDERS - ORDERS // 10  # NULL: unscored
    assert redis_client.scard("orders:indices:qty:2") == ORDERS // 3
