"""Stray keys of any shape (issue 11 item 5): every key under a table's key space that the
current data does not produce is stale, whatever its parts or type, join tables and composite
keys included; ``options.ignore`` keeps application keys that share a prefix out of it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import init, migrate
from migrator.commands.verify import verify
from migrator.mapping import scaffold
from migrator.store.checkpoint import keys_hint
from migrator.verify import report as vr
from migrator.verify.stray import StrayScan
from tests.services import MySQLDatabase

SCHEMA = """
CREATE TABLE orders (orderNumber INT PRIMARY KEY, status VARCHAR(15));
CREATE TABLE orderdetails (
  orderNumber INT, productCode VARCHAR(15), quantityOrdered INT, priceEach DECIMAL(10,2),
  PRIMARY KEY (orderNumber, productCode),
  FOREIGN KEY (orderNumber) REFERENCES orders (orderNumber));
CREATE TABLE employees (id INT PRIMARY KEY, name VARCHAR(40), manager INT, KEY (manager));
CREATE TABLE privileges (id INT PRIMARY KEY, name VARCHAR(40) UNIQUE);
CREATE TABLE employee_privileges (
  employee_id INT, privilege_id INT, PRIMARY KEY (employee_id, privilege_id),
  FOREIGN KEY (employee_id) REFERENCES employees (id),
  FOREIGN KEY (privilege_id) REFERENCES privileges (id));
CREATE TABLE countrylanguage (
  CountryCode CHAR(3), Language CHAR(30), IsOfficial ENUM('T','F') NOT NULL DEFAULT 'F',
  Percentage DECIMAL(4,1), PRIMARY KEY (CountryCode, Language));
CREATE TABLE acct (id INT PRIMARY KEY, owner VARCHAR(20));
INSERT INTO orders VALUES (10100, 'Shipped'), (10101, 'Shipped');
INSERT INTO orderdetails VALUES (10100, 'S18_1749', 30, 136.00), (10100, 'S18_2248', 50, 55.09),
  (10101, 'S18_1749', 25, 108.06);
INSERT INTO employees VALUES (1, 'Nancy', NULL), (2, 'Andrew', 1), (3, 'Janet', 1);
INSERT INTO privileges VALUES (2, 'Purchase Approvals'), (3, 'Shipping');
INSERT INTO employee_privileges VALUES (1, 2), (2, 2), (2, 3);
INSERT INTO countrylanguage VALUES ('ABW', 'Dutch', 'T', 5.3), ('ABW', 'English', 'F', 9.5);
INSERT INTO acct VALUES (1, 'ann'), (2, 'bob');
"""

IGNORE = '  ignore: ["acct:session:*"]\n'  # added to the draft's own options

#: name -> (plant the key, its table, the key verify must name as stale)
STRAY: dict[str, tuple[Callable[[redis.Redis], object], str, str]] = {
    "fewer parts than the composite key": (
        lambda r: r.hset("orderdetails:10100", "quantityOrdered", "1"),
        "orderdetails", "orderdetails:10100"),
    "more parts than the composite key": (
        lambda r: r.hset("orderdetails:10100:S18_1749:x", "quantityOrdered", "1"),
        "orderdetails", "orderdetails:10100:S18_1749:x"),
    "a composite key of no row": (
        lambda r: r.hset("countrylanguage:ABW", "IsOfficial", "T"),
        "countrylanguage", "countrylanguage:ABW"),
    "a string under a join table": (
        lambda r: r.set("employee_privileges:x", "1"), "employee_privileges",
        "employee_privileges:x"),
    "a join-table set of no row": (
        lambda r: r.sadd("employee_privileges:employee_id:9", "2"), "employee_privileges",
        "employee_privileges:employee_id:9"),
    "a string where a row hash could be": (
        lambda r: r.set("employees:1:name", "x"), "employees", "employees:1:name"),
    "a list under an index namespace": (
        lambda r: r.rpush("employees:indices:manager", "1"), "employees",
        "employees:indices:manager"),
    "an index set of no value": (
        lambda r: r.sadd("employees:indices:manager:77", "1"), "employees",
        "employees:indices:manager:77"),
    "a unique hash of no index": (
        lambda r: r.hset("privileges:uniques:nosuch", "x", "2"), "privileges",
        "privileges:uniques:nosuch"),
    "a key beside the application's ignored ones": (
        lambda r: r.set("acct:zzz", "1"), "acct", "acct:zzz"),
}  # fmt: skip


@pytest.fixture
def mapping(mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path) -> Path:
    mysql_db.run(SCHEMA)
    path = tmp_path / "shop.yaml"
    draft = scaffold.render(init(mysql_db.url))
    assert "\noptions:\n" in draft  # (a second 'options:' would be a duplicate key)
    path.write_text(draft.replace("\noptions:\n", "\noptions:\n" + IGNORE, 1))
    migrate(path, source=mysql_db.url, target=redis_url, workers=1)
    return path


def test_init_maps_the_join_table_as_sets(mapping: Path) -> None:
    text = mapping.read_text()
    assert "employee_privileges:" in text and "as: none" in text


@pytest.mark.parametrize("name", list(STRAY))
def test_a_stray_key_is_stale(
    name: str, mapping: Path, mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    assert verify(mapping, source=mysql_db.url, target=redis_url).ok
    plant, table, key = STRAY[name]
    plant(redis_client)
    redis_client.set("acct:session:abc", "application data")  # ignored: never reported
    report = verify(mapping, source=mysql_db.url, target=redis_url)
    check = next(t for t in report.tables if t.table == table)
    assert check.counts[vr.STALE] == 1, check.as_dict()
    assert [d.key for d in check.examples[vr.STALE]] == [key]
    assert sum(t.stale for t in report.tables) == 1, [t.as_dict() for t in report.tables]
    result = CliRunner().invoke(
        app, ["verify", str(mapping), "--source", mysql_db.url, "--target", redis_url]
    )
    assert result.exit_code == 1 and key in result.stdout, result.stdout
    result = CliRunner().invoke(
        app, ["verify", str(mapping), "--source", mysql_db.url, "--target", redis_url, "--json"]
    )
    data = json.loads(result.stdout)
    stale = [e["key"] for t in data["tables"] for e in t["examples"] if e["kind"] == vr.STALE]
    assert stale == [key]


def test_ignored_keys_alone_pass(
    mapping: Path, mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    redis_client.set("acct:session:abc", "application data")
    redis_client.hset("acct:session:def", "user", "1")
    assert verify(mapping, source=mysql_db.url, target=redis_url).ok


def test_a_foreign_index_member_is_named_by_member_and_key(
    mapping: Path, mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    redis_client.sadd("employees:indices:manager:1", "3", "99")  # 3 belongs; 99 does not
    redis_client.sadd("employee_privileges:privilege_id:2", "3")
    report = verify(mapping, source=mysql_db.url, target=redis_url)
    emp = next(t for t in report.tables if t.table == "employees")
    (d,) = emp.examples[vr.FOREIGN_INDEX]
    assert (d.key, d.field) == ("employees:indices:manager:1", "99")
    join = next(t for t in report.tables if t.table == "employee_privileges")
    (d,) = join.examples[vr.FOREIGN_SET]
    assert (d.key, d.field) == ("employee_privileges:privilege_id:2", "3")


def test_a_foreign_member_beside_a_missing_one_is_found(
    mapping: Path, mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    """The set's size is right (one member missing, one foreign): both are named."""
    redis_client.srem("employees:indices:manager:1", "2")
    redis_client.sadd("employees:indices:manager:1", "98")
    report = verify(mapping, source=mysql_db.url, target=redis_url)
    emp = next(t for t in report.tables if t.table == "employees")
    assert [(d.key, d.field) for d in emp.examples[vr.MISSING_INDEX]] == [
        ("employees:indices:manager:1", "2")
    ]
    assert [(d.key, d.field) for d in emp.examples[vr.FOREIGN_INDEX]] == [
        ("employees:indices:manager:1", "98")
    ]


@pytest.mark.parametrize("name", list(STRAY))
def test_fix_removes_a_stray_key_and_keeps_the_ignored_ones(
    name: str, mapping: Path, mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    plant, table, key = STRAY[name]
    plant(redis_client)
    redis_client.set("acct:session:abc", "application data")
    fixed = verify(mapping, source=mysql_db.url, target=redis_url, fix=True)
    assert fixed.ok, [t.as_dict() for t in fixed.tables if not t.ok]
    (repair,) = [t for t in fixed.repaired if t.total]
    assert (repair.table, dict(repair.counts)) == (table, {vr.STALE: 1})
    assert [c.key for c in repair.examples[vr.STALE]] == [key]
    assert not redis_client.exists(key) and redis_client.exists("acct:session:abc")


def test_fix_with_tables_repairs_only_those(
    mapping: Path, mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    redis_client.hset("employees:2", "name", "Andy")
    redis_client.delete("orders:10100")
    redis_client.sadd("employees:indices:manager:1", "99")
    fixed = verify(mapping, source=mysql_db.url, target=redis_url, tables=["employees"], fix=True)
    assert fixed.ok and [t.table for t in fixed.tables] == ["employees"]
    assert redis_client.hget("employees:2", "name") == b"Andrew"
    assert not redis_client.sismember("employees:indices:manager:1", "99")
    assert not redis_client.exists("orders:10100")  # another table's: not touched
    assert not verify(mapping, source=mysql_db.url, target=redis_url).ok


def test_fix_on_an_identical_target_changes_nothing_and_checks_once(
    mapping: Path, mysql_db: MySQLDatabase, redis_url: str
) -> None:
    result = CliRunner().invoke(
        app, ["verify", str(mapping), "--source", mysql_db.url, "--target", redis_url, "--fix",
              "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["identical"] and data["fix"]["changed"] == 0 and not data["fix"]["rechecked"]
    result = CliRunner().invoke(
        app, ["verify", str(mapping), "--source", mysql_db.url, "--target", redis_url, "--fix"]
    )
    assert result.exit_code == 0 and "nothing to repair" in result.stdout
    result = CliRunner().invoke(
        app, ["verify", str(mapping), "--source", mysql_db.url, "--target", redis_url, "--fix",
              "--sample", "3"],
    )  # fmt: skip
    assert result.exit_code == 2


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The tables of each stray-key SCAN started alongside a pass."""
    started: list[list[str]] = []
    start = StrayScan.start

    def spy(self: StrayScan) -> StrayScan:
        started.append(self.tables)
        return start(self)

    monkeypatch.setattr(StrayScan, "start", spy)
    return started


def test_migrate_leaves_its_key_count_as_verifys_hint(
    mapping: Path, mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    name = mapping.stem
    report = migrate(mapping, source=mysql_db.url, target=redis_url, workers=1)
    assert keys_hint(redis_client, name) == report.keys == redis_client.dbsize() - 1
    migrate(mapping, source=mysql_db.url, target=redis_url, workers=1, tables=["orders"])
    assert keys_hint(redis_client, name) is None  # a partial run: no hint


def test_the_scan_runs_alongside_the_pass_when_the_target_holds_other_keys(
    mapping: Path,
    mysql_db: MySQLDatabase,
    redis_url: str,
    redis_client: redis.Redis,
    scans: list[list[str]],
) -> None:
    assert verify(mapping, source=mysql_db.url, target=redis_url).ok
    assert not scans  # as many keys as migrate wrote: DBSIZE settles it after the pass
    redis_client.set("unrelated", "1")  # outside every key space
    redis_client.set("employees:1:x", "1")  # in one
    report = verify(mapping, source=mysql_db.url, target=redis_url)
    assert len(scans) == 1 and set(scans[0]) == {t.table for t in report.tables}
    stale = [d.key for t in report.tables for d in t.examples.get(vr.STALE, [])]
    assert stale == ["employees:1:x"]
    scans.clear()
    tables = ["employees"]  # a part of the mapping: DBSIZE cannot settle it, so always
    report = verify(mapping, source=mysql_db.url, target=redis_url, tables=tables)
    assert scans == [tables] and report.tables[0].stale == 1


def test_a_stray_key_in_place_of_a_missing_one_is_found_after_the_pass(
    mapping: Path,
    mysql_db: MySQLDatabase,
    redis_url: str,
    redis_client: redis.Redis,
    scans: list[list[str]],
) -> None:
    """As many keys as the hint says, so no SCAN during the pass; the pass misses an index
    set, so DBSIZE proves nothing and the SCAN runs after it."""
    redis_client.delete("employees:indices:manager:1")
    redis_client.set("employees:zzz", "1")
    report = verify(mapping, source=mysql_db.url, target=redis_url)
    assert not scans
    emp = next(t for t in report.tables if t.table == "employees")
    assert [d.key for d in emp.examples[vr.STALE]] == ["employees:zzz"]
    assert emp.counts[vr.MISSING_INDEX] == 2, emp.as_dict()
