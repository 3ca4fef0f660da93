"""Issue 16 item 2, on the real servers: a composite is ambiguous only when two or more of its
columns hold the separator a varying number of times. With one text column beside integers,
dates or DATETIMEs, a value holding ':' is written by default (migrate, dry-run --resp),
read back one way by verify (the stray-key reader, the members reader) and by --fix; init
proposes ``escape: backslash`` only where a table's draft would reject rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
import yaml

from migrator.commands import init, migrate, verify
from tests.services import MySQLDatabase
from tests.test_cli_review import cli_run

# outcome decided by migrate's worker count: again in CI with MIGRATOR_WORKERS=4
pytestmark = pytest.mark.workers

SQL = """
CREATE TABLE user_group (gid INT NOT NULL, member VARCHAR(40) NOT NULL, role VARCHAR(20),
                         PRIMARY KEY (gid, member), KEY (role));
INSERT INTO user_group VALUES (1, 'bob:smith', 'admin'), (1, 'bob', 'admin'),
                              (2, 'a:b:c', 'user'), (2, 'x', NULL);
CREATE TABLE person (id INT PRIMARY KEY, first VARCHAR(20) NOT NULL, born DATE NOT NULL,
                     UNIQUE KEY (first, born));
INSERT INTO person VALUES (1, 'Ada:L', '1815-12-10'), (2, 'Alan', '1912-06-23');
CREATE TABLE event (at DATETIME NOT NULL, title VARCHAR(40) NOT NULL, n INT,
                    PRIMARY KEY (at, title), KEY (n));
INSERT INTO event VALUES ('2020-01-01 10:00:00', 'a:b', 1), ('2020-01-01 10:00:00', 'a', 1),
                         ('2021-05-06 07:08:09', ':', 2);
"""

MAPPING = """
version: 1
tables:
  user_group:
    key: "user:group:{gid}:{member}"
    indexes: [role]
  person:
    unique: [[first, born]]
  event:
    indexes: [n]
"""


@pytest.fixture
def mapped(mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path) -> Path:
    mysql_db.run(SQL)
    path = tmp_path / "groups.yaml"
    path.write_text(f"source: {mysql_db.url}\ntarget: {redis_url}\n{MAPPING}")
    return path


def test_one_varying_value_is_written_and_verified(
    mapped: Path, redis_client: redis.Redis, tmp_path: Path
) -> None:
    done = cli_run("migrate", str(mapped), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["rejected"] == 0
    r = redis_client
    assert r.hgetall("user:group:1:bob:smith") == {b"role": b"admin"}
    assert r.hgetall("user:group:2:a:b:c") == {b"role": b"user"}
    # the composite primary key written as a member of an index set
    assert r.smembers("user_group:indices:role:admin") == {b"1:bob:smith", b"1:bob"}
    # a composite unique (first, born) with one text column
    assert r.hget("person:uniques:first:born", "Ada:L:1815-12-10") == b"1"
    # a DATETIME (two ':' in every value) beside a text value holding ':'
    assert r.hgetall("event:2020-01-01 10:00:00:a:b") == {b"n": b"1"}
    assert r.hgetall("event:2021-05-06 07:08:09::") == {b"n": b"2"}
    assert r.smembers("event:indices:n:1") == {
        b"2020-01-01 10:00:00:a:b", b"2020-01-01 10:00:00:a",
    }  # fmt: skip
    checked = cli_run("verify", str(mapped), "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["identical"] is True
    resp = tmp_path / "load.resp"
    dry = cli_run("dry-run", str(mapped), "--resp", str(resp))
    assert dry.returncode == 0, dry.stdout + dry.stderr
    body = resp.read_bytes()
    for key in (b"user:group:1:bob:smith", b"Ada:L:1815-12-10", b"event:2021-05-06 07:08:09::"):
        assert b"$%d\r\n%s\r\n" % (len(key), key) in body


def test_keys_and_members_are_read_back_one_way(mapped: Path, redis_client: redis.Redis) -> None:
    """The stray-key reader and the members reader take each written key and member apart as
    it was written: only what was added by hand is reported, and --fix removes only that."""
    migrate(mapped, workers=1)
    r = redis_client
    r.hset("user:group:9:no:body", "role", "x")  # fits the row pattern; no such row
    r.hset("event:2020-01-01 10:00:00:zz:top", "n", "1")
    r.sadd("user_group:indices:role:admin", "3:ghost:x")
    r.sadd("event:indices:n:1", "2020-01-01 10:00:00:nobody")
    r.hset("person:uniques:first:born", "Zed:Q:2000-01-01", "7")
    report = verify(mapped)
    assert report.exit_code == 1
    found = {
        (d.kind, d.key, d.field) for t in report.tables for ds in t.examples.values() for d in ds
    }
    assert found == {
        ("stale key", "user:group:9:no:body", None),
        ("stale key", "event:2020-01-01 10:00:00:zz:top", None),
        ("foreign index member", "user_group:indices:role:admin", "3:ghost:x"),
        ("foreign index member", "event:indices:n:1", "2020-01-01 10:00:00:nobody"),
        ("foreign unique entry", "person:uniques:first:born", "Zed:Q:2000-01-01"),
    }
    fixed = verify(mapped, fix=True)
    assert fixed.exit_code == 0, fixed.as_dict()
    assert r.exists("user:group:1:bob:smith") and not r.exists("user:group:9:no:body")
    assert r.smembers("user_group:indices:role:admin") == {b"1:bob:smith", b"1:bob"}


def test_init_proposes_backslash_only_where_rows_would_be_rejected(
    mysql_db: MySQLDatabase, tmp_path: Path
) -> None:
    mysql_db.run(SQL)
    quiet = init(mysql_db.url)
    assert quiet.rejects == {}
    assert "escape" not in yaml.safe_load(quiet.render())["options"]
    mysql_db.run(
        "CREATE TABLE pair (a VARCHAR(20) NOT NULL, b VARCHAR(20) NOT NULL, n INT,"
        " PRIMARY KEY (a, b));"
        "INSERT INTO pair VALUES ('a:b', 'c', 1), ('a', 'b:c', 2), ('p', 'q', 3);"
    )
    d = init(mysql_db.url)
    assert d.rejects == {"pair": 2}
    drafted = yaml.safe_load(d.render())
    # on that table alone (issue 27 item 6): the other tables' keys stay as they are
    assert "escape" not in drafted["options"]
    escapes = {name: (body or {}).get("escape") for name, body in drafted["tables"].items()}
    assert escapes["pair"] == "backslash" and set(escapes.values()) == {"backslash", None}
    out = tmp_path / "drafted.yaml"
    done = cli_run("init", "--source", mysql_db.url, "-o", str(out))
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert "would be rejected under the default escape: reject: pair (2)" in said
    assert "sets escape: backslash on those tables alone" in said
    assert "escape: backslash" in out.read_text()


def test_a_null_in_the_row_key_is_a_rejected_row(
    mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    """Item 1 for the other policy that refuses rows: a row key over a nullable column
    (as: hash and as: columns) leaves the row out; verify counts it, and exits 1."""
    mysql_db.run(
        "CREATE TABLE nk (id INT PRIMARY KEY, code VARCHAR(10) NULL, v INT);"
        "CREATE TABLE nc (id INT PRIMARY KEY, code VARCHAR(10) NULL, v INT);"
        "INSERT INTO nk VALUES (1, 'a', 1), (2, NULL, 2);"
        "INSERT INTO nc VALUES (1, 'a', 1), (2, NULL, 2);"
    )
    path = tmp_path / "nulls.yaml"
    path.write_text(
        f"version: 1\nsource: {mysql_db.url}\ntarget: {redis_url}\ntables:\n"
        '  nk: {key: "nk:{id}:{code}", counter: false}\n'
        '  nc: {as: columns, key: "nc:{id}:{code}", counter: false}\n'
    )
    assert migrate(path, workers=1).rejected == 2
    report = verify(path)
    assert report.exit_code == 1
    for t in report.tables:
        assert (t.mysql_rows, t.redis_rows, t.rejected) == (2, 1, 1), t.as_dict()
        assert dict(t.refused) == {"NULL in a row-key column": 1}
    (hint,) = report.rejected_hints()
    assert hint.startswith("2 row(s) MySQL holds are not in Redis") and "NOT NULL" in hint


def test_escaped_keys_are_read_back_unescaped(mapped: Path, redis_client: redis.Redis) -> None:
    """Under escape: backslash the stray-key reader unescapes what it reads (it looked the
    escaped text up in MySQL, so every key with an escaped ':' was reported stale)."""
    mapped.write_text(
        mapped.read_text().replace("tables:", "options: {escape: backslash}\ntables:")
    )
    migrate(mapped, workers=1)
    assert redis_client.exists("user:group:1:bob\\:smith")
    redis_client.hset("user:group:9:no\\:body", "role", "x")
    report = verify(mapped)
    found = [(d.kind, d.key) for t in report.tables for ds in t.examples.values() for d in ds]
    assert found == [("stale key", "user:group:9:no\\:body")]


def test_a_reference_finds_its_escaped_parent(
    mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    """verify looks a referenced parent up by the key the parent is written under: escaped
    under escape: backslash (on main it looked for the unescaped key: a dangling reference)."""
    mysql_db.run(
        "CREATE TABLE team (code VARCHAR(20) PRIMARY KEY, name VARCHAR(20));"
        "CREATE TABLE player (id INT PRIMARY KEY, team VARCHAR(20),"
        " FOREIGN KEY (team) REFERENCES team (code));"
        "INSERT INTO team VALUES ('eu:1', 'Ajax'); INSERT INTO player VALUES (1, 'eu:1');"
    )
    path = tmp_path / "teams.yaml"
    path.write_text(
        f"version: 1\nsource: {mysql_db.url}\ntarget: {redis_url}\n"
        "options: {escape: backslash}\ntables:\n  team: {}\n"
        "  player: {references: [{columns: [team], table: team}]}\n"
    )
    migrate(path, workers=1)
    report = verify(path)
    assert report.exit_code == 0, report.as_dict()


def test_a_tables_own_escape_changes_its_keys_alone(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """``escape: backslash`` on one table (as init drafts it, issue 27 item 6): that table's
    keys are escaped; another table's stay as under the default (its row with a separator
    rejected, its other keys as before)."""
    mysql_db.run(
        "CREATE TABLE pair (a VARCHAR(20), b VARCHAR(20), n INT, PRIMARY KEY (a, b));"
        "CREATE TABLE duo (a VARCHAR(20), b VARCHAR(20), n INT, PRIMARY KEY (a, b));"
        "INSERT INTO pair VALUES ('a:b', 'c', 1), ('x\\\\y', 'z', 2);"
        "INSERT INTO duo VALUES ('a:b', 'c', 1), ('x\\\\y', 'z', 2);"
    )
    path = tmp_path / "own.yaml"
    path.write_text("version: 1\ntables:\n  pair:\n    escape: backslash\n  duo: {}\n")
    report = migrate(path, source=mysql_db.url, target=redis_url, workers=1)
    assert redis_client.exists(b"pair:a\\:b:c", b"pair:x\\\\y:z") == 2
    assert redis_client.exists(b"duo:x\\y:z") and not redis_client.keys(b"duo:a*")
    assert {t.table: sum(t.rejected.values()) for t in report.tables} == {"pair": 0, "duo": 1}
    assert verify(path, source=mysql_db.url, target=redis_url).tables[0].different == 0
