"""`migrator verify` against real MariaDB and Redis: clean runs pass, every kind of tampering
is found, named and exits 1; plus the pure parts (key patterns, report sums)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import init, migrate, verify
from migrator.mapping import scaffold
from migrator.mapping.loader import parse_mapping
from migrator.mapping.model import Template
from migrator.plan.keyspace import KeyPattern, glob_regex
from migrator.verify import report as vr
from migrator.verify.report import TableCheck, VerifyReport
from tests.services import MySQLDatabase

REPO = Path(__file__).resolve().parent.parent

SCHEMA = """
CREATE TABLE dept (dept_id INT PRIMARY KEY, dname VARCHAR(40));
CREATE TABLE emp (
  emp_id INT PRIMARY KEY, ename VARCHAR(40), email VARCHAR(80) UNIQUE, mgr_id INT,
  dept_id INT, salary DECIMAL(10,2), hired DATETIME, KEY (mgr_id),
  FOREIGN KEY (dept_id) REFERENCES dept (dept_id));
CREATE TABLE book_tag (book_id INT, tagname VARCHAR(20), PRIMARY KEY (book_id, tagname));
CREATE TABLE login (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL UNIQUE, login_times INT,
  last_login_time DATETIME);
INSERT INTO dept VALUES (1, 'R&D'), (2, 'Sales');
INSERT INTO emp VALUES
  (1, 'SMITH', 'smith@x.org', 8, 1, 800.00, '2020-01-01 10:00:00'),
  (2, 'ALLEN', 'allen@x.org', 8, 2, 1600.50, '2021-02-01 10:00:00'),
  (8, 'KING', NULL, NULL, 1, 5000, '2019-01-01 00:00:00'),
  (9, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO book_tag VALUES (1, 'ruby'), (1, 'web'), (2, 'web');
INSERT INTO login VALUES (1, 'ken thompson', 5, '2011-01-01 10:00:00'),
  (2, 'dennis ritchie', 1, '2011-01-02 10:00:00'), (3, 'Joe Armstrong', NULL, NULL);
"""

MAPPING = """
version: 1
tables:
  dept: {}
  emp:
    unique: [email]
    indexes: [mgr_id]
    references:
      - columns: [dept_id]
        table: dept
    sorted:
      - key: "emp:by:salary"
        score: salary
    latest:
      - key: "emp:latest:hired"
        order_by: hired
        limit: 3
  book_tag:
    as: none
    sets:
      - key: "tag:{tagname}"
        member: "{book_id}"
  login:
    as: columns
    unique:
      - columns: [name]
        key: "login:{name}:id"
    sorted:
      - key: "login:login_times"
        score: login_times
"""


class Env:
    def __init__(self, db: MySQLDatabase, redis_url: str, client: redis.Redis, path: Path):
        self.db, self.redis_url, self.r, self.path = db, redis_url, client, path

    def verify(self, **kw: object) -> VerifyReport:
        return verify(self.path, source=self.db.url, target=self.redis_url, **kw)  # type: ignore[arg-type]

    def cli(self, *args: str) -> tuple[int, str]:
        result = CliRunner().invoke(
            app,
            ["verify", str(self.path), "--source", self.db.url, "--target", self.redis_url, *args],
        )
        return result.exit_code, result.stdout


@pytest.fixture
def env(mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> Env:
    mysql_db.run(SCHEMA)
    path = tmp_path / "company.yaml"
    path.write_text(MAPPING)
    migrate(path, source=mysql_db.url, target=redis_url, workers=1)
    return Env(mysql_db, redis_url, redis_client, path)


def found(report: VerifyReport, table: str, kind: str) -> list[vr.Difference]:
    check = next(t for t in report.tables if t.table == table)
    assert check.counts[kind] >= 1, f"{kind} not reported: {check.as_dict()}"
    assert not check.ok and report.exit_code == 1
    return check.examples[kind]


@pytest.mark.smoke
def test_clean_migrate_verifies(env: Env) -> None:
    report = env.verify()
    assert report.ok, report.as_dict()
    assert report.exit_code == 0
    rows = {t.table: (t.mysql_rows, t.redis_rows) for t in report.tables}
    assert rows == {"dept": (2, 2), "emp": (4, 4), "book_tag": (3, None), "login": (3, 3)}


def test_clean_with_unrelated_keys_scans_and_passes(env: Env) -> None:
    env.r.set("someone:else", "1")  # DBSIZE no longer matches: the SCAN path runs
    assert env.verify().ok


# -- one test per kind of tampering -------------------------------------------------------------
TAMPERING: dict[str, tuple[Callable[[redis.Redis], object], str, str, str]] = {
    # name: (tampering, table, kind reported, key named in the examples)
    "deleted row key": (lambda r: r.delete("emp:2"), "emp", vr.MISSING_ROW, "emp:2"),
    "changed field": (lambda r: r.hset("emp:1", "ename", "SMYTH"), "emp", vr.DIFFERENT_VALUE,
                      "emp:1"),
    "extra field": (lambda r: r.hset("emp:1", "bonus", "1"), "emp", vr.EXTRA_FIELD, "emp:1"),
    "missing index member": (lambda r: r.srem("emp:indices:mgr_id:8", "1"), "emp",
                             vr.MISSING_INDEX, "emp:indices:mgr_id:8"),
    "foreign index member": (lambda r: r.sadd("emp:indices:mgr_id:8", "77"), "emp",
                             vr.FOREIGN_INDEX, "emp:indices:mgr_id:8"),
    "wrong counter": (lambda r: r.set("emp:id", "3"), "emp", vr.WRONG_COUNTER, "emp:id"),
    "reordered latest list": (lambda r: (r.lset("emp:latest:hired", 0, "1"),
                                         r.lset("emp:latest:hired", 1, "2")),
                              "emp", vr.WRONG_LATEST, "emp:latest:hired"),
    "wrong score": (lambda r: r.zadd("emp:by:salary", {"8": 1}), "emp", vr.WRONG_SCORE,
                    "emp:by:salary"),
    "stale row key": (lambda r: r.hset("emp:555", "ename", "GHOST"), "emp", vr.STALE, "emp:555"),
    "stale index set": (lambda r: r.sadd("emp:indices:mgr_id:77", "1"), "emp", vr.STALE,
                        "emp:indices:mgr_id:77"),
    "dangling reference": (lambda r: r.delete("dept:2"), "emp", vr.DANGLING, "emp:2"),
    "missing unique entry": (lambda r: r.hdel("emp:uniques:email", "smith@x.org"), "emp",
                             vr.MISSING_UNIQUE, "emp:uniques:email"),
    "wrong unique entry": (lambda r: r.hset("emp:uniques:email", "smith@x.org", "2"), "emp",
                           vr.WRONG_UNIQUE, "emp:uniques:email"),
    "missing set member": (lambda r: r.srem("tag:web", "2"), "book_tag", vr.MISSING_SET,
                           "tag:web"),
    "foreign set member": (lambda r: r.sadd("tag:ruby", "2"), "book_tag", vr.FOREIGN_SET,
                           "tag:ruby"),
    "stale tag set": (lambda r: r.sadd("tag:cobol", "1"), "book_tag", vr.STALE, "tag:cobol"),
    "changed column string": (lambda r: r.set("login:1:login_times", "6"), "login",
                              vr.DIFFERENT_VALUE, "login:1:login_times"),
    "stale column string": (lambda r: r.set("login:3:login_times", "4"), "login", vr.STALE,
                            "login:3:login_times"),
    "missing unique string": (lambda r: r.delete("login:ken thompson:id"), "login",
                              vr.MISSING_UNIQUE, "login:ken thompson:id"),
    "missing sorted member": (lambda r: r.zrem("login:login_times", "1"), "login",
                              vr.MISSING_SORTED, "login:login_times"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(TAMPERING))
def test_tampering_is_found(env: Env, name: str) -> None:
    tamper, table, kind, key = TAMPERING[name]
    assert env.verify().ok  # clean before
    tamper(env.r)
    examples = found(env.verify(), table, kind)
    assert key in [d.key for d in examples]
    code, out = env.cli("--json")
    assert code == 1
    data = json.loads(out)
    assert data["identical"] is False
    assert any(e["kind"] == kind and e["key"] == key for t in data["tables"] for e in t["examples"])


def test_example_shows_both_sides(env: Env) -> None:
    env.r.hset("emp:1", "ename", "SMYTH")
    (d,) = found(env.verify(), "emp", vr.DIFFERENT_VALUE)
    assert (d.key, d.field, d.mysql, d.redis) == ("emp:1", "ename", "SMITH", "SMYTH")


def test_dangling_reference_in_the_source(env: Env) -> None:
    """A child row whose parent row does not exist at all (foreign key checks were off)."""
    env.db.run("SET foreign_key_checks = 0; INSERT INTO emp (emp_id, dept_id) VALUES (20, 7);")
    migrate(env.path, source=env.db.url, target=env.redis_url, workers=1)
    (d,) = found(env.verify(), "emp", vr.DANGLING)
    assert (d.key, d.field, d.mysql) == ("emp:20", "dept_id", "dept:7")


def test_children_of_parents_a_where_leaves_out_are_no_dangling_reference(env: Env) -> None:
    """A where: on the parent once made verify fail for ever (and --fix could not help): its
    left-out rows are missing from Redis by the mapping, not lost. A parent that MySQL lacks
    altogether is still a dangling reference."""
    env.db.run("SET foreign_key_checks = 0; INSERT INTO emp (emp_id, dept_id) VALUES (20, 7);")
    text = MAPPING.replace("  dept: {}\n", "  dept:\n    where: \"dname <> 'Sales'\"\n")
    env.path.write_text(text)
    env.r.flushdb()
    migrate(env.path, source=env.db.url, target=env.redis_url, workers=1)
    assert not env.r.exists("dept:2")  # left out by the where:, and emp:2 points at it
    report = env.verify()
    (d,) = found(report, "emp", vr.DANGLING)
    assert (d.key, d.mysql) == ("emp:20", "dept:7")
    emp = next(t for t in report.tables if t.table == "emp")
    assert emp.counts[vr.DANGLING] == 1, emp.as_dict()
    assert any("1 row of emp reference a parent row" in n for n in emp.notes), emp.notes
    env.db.run("DELETE FROM emp WHERE emp_id = 20")
    env.r.delete("emp:20")
    for key in env.r.keys("emp:*"):
        if env.r.type(key) == b"set":
            env.r.srem(key, b"20")
    env.r.zrem("emp:by:salary", b"20")
    assert env.verify().ok, env.verify().as_dict()


def test_row_changed_in_mysql_after_migrate(env: Env) -> None:
    env.db.run("UPDATE emp SET salary = 900.00 WHERE emp_id = 1")
    report = env.verify()
    (d,) = found(report, "emp", vr.DIFFERENT_VALUE)
    assert (d.key, d.field, d.mysql, d.redis) == ("emp:1", "salary", "900.00", "800.00")
    assert found(report, "emp", vr.WRONG_SCORE)


def test_counts_only(env: Env) -> None:
    assert env.verify(counts_only=True).ok
    env.r.hset("emp:1", "ename", "SMYTH")  # a value: not looked at
    assert env.verify(counts_only=True).ok
    env.r.delete("emp:2")
    report = env.verify(counts_only=True)
    emp = next(t for t in report.tables if t.table == "emp")
    assert (emp.mysql_rows, emp.redis_rows, emp.missing) == (4, 3, 1)
    assert report.exit_code == 1


def test_sample(env: Env) -> None:
    assert env.verify(sample=2).ok
    env.r.hset("emp:1", "ename", "SMYTH")
    found(env.verify(sample=100), "emp", vr.DIFFERENT_VALUE)  # 100 >= every row


def test_small_batches_give_the_same_answer(env: Env) -> None:
    assert env.verify(batch_size=1).ok
    env.r.srem("emp:indices:mgr_id:8", "2")
    found(env.verify(batch_size=1), "emp", vr.MISSING_INDEX)


def test_cli_exit_codes(env: Env, tmp_path: Path) -> None:
    code, out = env.cli()
    assert code == 0 and "Redis matches MySQL" in out
    code, out = env.cli("--json")
    assert code == 0 and json.loads(out)["identical"] is True
    env.r.delete("emp:2")
    code, out = env.cli()
    assert code == 1 and "missing row key" in out and "emp:2" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntables:\n  emp:\n    indexes: [mgr_idd]\n")
    result = CliRunner().invoke(app, ["verify", str(bad), "--source", env.db.url])
    assert result.exit_code == 2
    result = CliRunner().invoke(
        app,
        ["verify", str(env.path), "--source", env.db.url, "--target", "redis://127.0.0.1:1/0"],
    )
    assert result.exit_code == 3
    result = CliRunner().invoke(app, ["verify", str(env.path), "--source", env.db.url,
                                      "--target", env.redis_url, "--sample", "0"])  # fmt: skip
    assert result.exit_code == 2


# -- real databases: Sakila, employees, the samples ---------------------------------------------
def _init_migrate_verify(url: str, redis_url: str, tmp_path: Path, name: str) -> VerifyReport:
    text = scaffold.render(init(url))
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    migrate(path, source=url, target=redis_url, workers=1)
    return verify(path, source=url, target=redis_url)


def test_sakila_verifies(sakila_url: str, redis_url: str, tmp_path: Path) -> None:
    report = _init_migrate_verify(sakila_url, redis_url, tmp_path, "sakila")
    assert report.ok, [t.as_dict() for t in report.tables if not t.ok]
    assert {t.table: t.mysql_rows for t in report.tables}["rental"] == 16044


def test_employees_verifies(
    employees_url: str, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    report = _init_migrate_verify(employees_url, redis_url, tmp_path, "employees")
    assert report.ok, [t.as_dict() for t in report.tables if not t.ok]
    key = next(k for k in redis_client.scan_iter("employees:*") if k.count(b":") == 1)
    redis_client.hset(key, "first_name", "Nobody")
    report = verify(tmp_path / "employees.yaml", source=employees_url, target=redis_url)
    found(report, "employees", vr.DIFFERENT_VALUE)


SAMPLES = sorted(p for p in (REPO / "mappings").glob("*.yaml") if (REPO / "samples").is_dir())


@pytest.mark.parametrize("mapping", SAMPLES or [None], ids=lambda p: p.stem if p else "none")
def test_samples_verify(
    mapping: Path | None, mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    if mapping is None:
        pytest.skip("no mappings/*.yaml yet")
    own = REPO / "samples" / f"{mapping.stem}.sql"
    scripts = [own] if own.exists() else sorted((REPO / "samples").glob("*.sql"))  # demo: all
    for sql in scripts:
        mysql_db.run(sql.read_text())
    migrate(mapping, source=mysql_db.url, target=redis_url, workers=1)
    report = verify(mapping, source=mysql_db.url, target=redis_url)
    assert report.ok, [t.as_dict() for t in report.tables if not t.ok]


# -- pure parts ---------------------------------------------------------------------------------
def test_key_pattern_regex_inverts_templates() -> None:
    p = KeyPattern("t", "row", Template.parse("film_actor:{actor_id}:{film_id}"), "hash")
    m = p.regex().fullmatch(b"film_actor:12:345")
    assert m is not None and (m.group("g0"), m.group("g1")) == (b"12", b"345")
    assert p.regex().fullmatch(b"film:12") is None
    assert p.literal_chars == len("film_actor:") + 1


def test_glob_regex_reads_escapes() -> None:
    glob = Template.parse("a*b:{x}").glob()
    assert glob == "a\\*b:*"
    assert glob_regex(glob).fullmatch(b"a*b:1")
    assert not glob_regex(glob).fullmatch(b"aXb:1")


def test_table_check_sums_by_column() -> None:
    c = TableCheck("emp")
    assert c.ok and c.status == "ok"
    c.add(vr.MISSING_ROW, b"emp:1")
    c.add(vr.EXTRA_FIELD, b"emp:2", b"x", None, b"1")
    c.add(vr.STALE, b"emp:3", n=2)
    c.add(vr.MISSING_INDEX, b"emp:indices:a:1", b"1", b"1")
    assert (c.missing, c.different, c.stale, c.structure) == (1, 1, 2, 1)
    assert c.status == "different"
    for i in range(10):
        c.add(vr.STALE, f"k{i}")
    assert len(c.examples[vr.STALE]) == vr.EXAMPLES


def test_mapping_text_loads() -> None:
    assert [t.name for t in parse_mapping(MAPPING).tables] == ["dept", "emp", "book_tag", "login"]
