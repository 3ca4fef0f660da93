"""No silent collisions and a safe target (issue 10 items 5 and 6), on the real servers:
rows whose values would make a composite key ambiguous are rejected and listed (or
escaped), and a target holding foreign keys in the mapping's key space, or too little
memory, is refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from migrator.plan.escape import split
from tests.services import MySQLDatabase
from tests.test_cli_review import cli_run

SQL = """
CREATE TABLE tag (a VARCHAR(20) NOT NULL, b VARCHAR(20) NOT NULL, n INT NULL,
                  note VARCHAR(20) NULL, PRIMARY KEY (a, b), KEY (note, n));
INSERT INTO tag VALUES ('a:b', 'c', 1, 'x'), ('a', 'b:c', 2, 'y'), ('p', 'q', 3, 'no:te'),
                       ('r\\\\s', 't', 4, NULL), ('u', 'v', 5, 'w');
"""


@pytest.fixture
def tag_db(mysql_db: MySQLDatabase) -> MySQLDatabase:
    mysql_db.run(SQL)
    return mysql_db


def write_mapping(tmp_path: Path, db: MySQLDatabase, target: str, options: str = "") -> Path:
    path = tmp_path / "tags.yaml"
    opts = f"options: {{{options}}}\n" if options else ""
    path.write_text(
        f"version: 1\nsource: {db.url}\ntarget: {target}\n{opts}"
        "tables:\n  tag:\n    indexes: [[note, n]]\n"
    )
    return path


def test_ambiguous_rows_are_rejected_listed_and_verify_agrees(
    tag_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = write_mapping(tmp_path, tag_db, redis_url)
    rejects = tmp_path / "rejects.jsonl"
    done = cli_run("migrate", str(path), "--json", "--rejects", str(rejects))
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["rejected"] == 3
    (table,) = report["tables"]
    listed = [(r["primary_key"], r["column"]) for r in table["rejects"]]
    assert listed == [(["a", "b:c"], "b"), (["a:b", "c"], "a"), (["p", "q"], "note")]
    lines = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert [(x["table"], x["primary_key"], x["column"]) for x in lines] == [
        ("tag", pk, col) for pk, col in listed
    ]
    # the two rows that collided on tag:a:b:c are not in Redis, the others are
    assert not redis_client.exists("tag:a:b:c")
    assert redis_client.hgetall("tag:u:v") == {b"n": b"5", b"note": b"w"}
    assert redis_client.exists("tag:r\\s:t")
    human = cli_run("migrate", str(path))
    assert human.returncode == 1
    assert "rejected tag (a:b, c): a: separator inside a value" in human.stderr
    assert "3 row(s) were rejected" in human.stderr
    checked = cli_run("verify", str(path), "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (vt,) = json.loads(checked.stdout)["tables"]
    assert any("3 row(s) not written" in n for n in vt["notes"])


def test_backslash_escaping_writes_every_row_apart(
    tag_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = write_mapping(tmp_path, tag_db, redis_url, "escape: backslash")
    done = cli_run("migrate", str(path), "--json")
    assert done.returncode == 0, done.stderr
    keys = sorted(k for k in redis_client.keys("tag:*") if b"indices" not in k)
    assert keys == [b"tag:a:b\\:c", b"tag:a\\:b:c", b"tag:p:q", b"tag:r\\\\s:t", b"tag:u:v"]
    assert [split(k, b":")[1:] for k in keys] == [
        [b"a", b"b:c"], [b"a:b", b"c"], [b"p", b"q"], [b"r\\s", b"t"], [b"u", b"v"],
    ]  # fmt: skip
    assert redis_client.smembers("tag:indices:note:no\\:te:n:3") == {b"p:q"}
    assert redis_client.smembers("tag:indices:note:x:n:1") == {b"a\\:b:c"}
    checked = cli_run("verify", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # dry-run's RESP file is what migrate sent: loading it gives the same keys
    resp = tmp_path / "load.resp"
    assert cli_run("dry-run", str(path), "--resp", str(resp)).returncode == 0
    assert b"tag:a\\:b:c" in resp.read_bytes()


def test_a_merged_index_member_is_reported_by_verify(
    tag_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """An index set member whose row does not produce that key (item 5c)."""
    path = write_mapping(tmp_path, tag_db, redis_url, "escape: backslash")
    assert cli_run("migrate", str(path)).returncode == 0
    redis_client.sadd("tag:indices:note:w:n:5", "p:q")  # row p:q has note 'no:te', n 3
    checked = cli_run("verify", str(path), "--json")
    assert checked.returncode == 1
    (vt,) = json.loads(checked.stdout)["tables"]
    (found,) = [d for d in vt["examples"] if d["key"] == "tag:indices:note:w:n:5"]
    assert (found["kind"], found["field"]) == ("foreign index member", "p:q")


# -- item 6: the target's own data ---------------------------------------------------------------


def test_foreign_keys_in_the_key_space_refuse_the_run(
    tag_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = write_mapping(tmp_path, tag_db, redis_url, "escape: backslash")
    redis_client.set("tag:u:v", "someone else's string")
    redis_client.set("unrelated", "1")
    done = cli_run("migrate", str(path), "--json")
    assert done.returncode == 2, done.stderr
    failure = json.loads(done.stdout)
    assert failure["exit_code"] == 2
    assert "tag:u:v (string)" in failure["error"]
    assert "--into-existing" in failure["hint"]
    assert redis_client.dbsize() == 2  # nothing written
    human = cli_run("migrate", str(path))
    assert human.returncode == 2 and "Traceback" not in human.stderr
    assert "error: the target already holds keys" in human.stderr
    # the documented way through: --into-existing (the string is in the way of a hash)
    redis_client.delete("tag:u:v")
    redis_client.sadd("tag:indices:note:w:n:5", "stale")
    assert cli_run("migrate", str(path), "--into-existing").returncode == 0
    # a later run of the same mapping is not refused: its own earlier run wrote those keys
    again = cli_run("migrate", str(path))
    assert again.returncode == 0, again.stderr
    assert redis_client.get("unrelated") == b"1"


def test_the_default_target_is_named(tag_db: MySQLDatabase, tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(f"version: 1\nsource: {tag_db.url}_missing\ntables:\n  tag: {{}}\n")
    done = cli_run("migrate", str(path))
    assert done.returncode == 3  # the source database does not exist: nothing is written
    assert "no target given: using the default redis://127.0.0.1:6379/0" in done.stderr
    path.write_text(
        f"version: 1\nsource: {tag_db.url}_missing\ntarget: redis://h:1\ntables: {{tag: {{}}}}\n"
    )
    assert "no target given" not in cli_run("migrate", str(path)).stderr
