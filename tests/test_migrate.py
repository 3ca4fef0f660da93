"""migrate against the real servers: quoting, keyset pagination, resume, read-only, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from migrator.commands import migrate
from migrator.errors import MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.source.mysql import Source
from migrator.store.checkpoint import Checkpoint

ODD = """
CREATE TABLE `order` (`order id` INT PRIMARY KEY, `the total` DECIMAL(8,2), `select` VARCHAR(10));
CREATE TABLE `user:group` (`user` VARCHAR(20), `group` VARCHAR(20), PRIMARY KEY (`user`, `group`));
INSERT INTO `order` VALUES (1, 9.90, 'x'), (2, NULL, 'y');
INSERT INTO `user:group` VALUES ('ann', 'admin'), ('ann', 'ops'), ('bob', 'ops');
"""


def migrator_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


@pytest.mark.workers  # what migrate writes: again with 4 workers in CI
def test_reserved_and_odd_identifiers_are_quoted(
    mysql_db,
    redis_url: str,
    redis_client: redis.Redis,  # type: ignore[no-untyped-def]
) -> None:
    mysql_db.run(ODD)
    mapping = parse_mapping(
        "version: 1\ntables:\n  order:\n    indexes: [select]\n  'user:group':\n"
        "    as: none\n    sets:\n      - {key: 'group:{group}', member: '{user}'}\n"
    )
    report = migrate(mapping, source=mysql_db.url, target=redis_url)
    assert report.rows == 5
    assert redis_client.hgetall("order:1") == {b"the total": b"9.90", b"select": b"x"}
    assert redis_client.hgetall("order:2") == {b"select": b"y"}
    assert redis_client.get("order:id") == b"2"
    assert redis_client.smembers("order:indices:select:x") == {b"1"}
    assert redis_client.smembers("group:ops") == {b"ann", b"bob"}


def test_keyset_pages_cover_a_composite_key_exactly_once(mysql_db) -> None:  # type: ignore[no-untyped-def]
    values = ",".join(f"('{c}', {n}, 'v{c}{n}')" for c in "aBcD" for n in range(1, 8))
    mysql_db.run(
        "CREATE TABLE kv (k VARCHAR(5), n INT, v VARCHAR(10), PRIMARY KEY (k, n));"
        f"INSERT INTO kv VALUES {values};"
    )
    with Source(mysql_db.url) as src:
        sel = src.selector("kv", ["k", "n", "v"])
        batches = list(src.batches("kv", sel, ["k", "n"], batch_size=2, page_size=5))
    rows = [r for b in batches for r in b]
    assert all(len(b) <= 2 for b in batches)
    assert len(rows) == 28 and len(set(rows)) == 28
    # MySQL's own order (case-insensitive collation): a, B, c, D
    assert [r[0] for r in rows[::7]] == [b"a", b"B", b"c", b"D"]


def test_source_session_is_read_only(mysql_db) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run("CREATE TABLE t (id INT PRIMARY KEY);")
    with Source(mysql_db.url) as src:
        cursor = src.raw_connection().cursor()
        with pytest.raises(Exception, match=r"READ ONLY|read.only|1792"):
            cursor.execute("INSERT INTO t VALUES (1)")
    assert mysql_db.query("SELECT COUNT(*) FROM t")[0][0] == 0


@pytest.mark.workers  # what migrate writes: again with 4 workers in CI
def test_resume_continues_after_the_checkpoint(
    mysql_db,
    redis_url: str,
    redis_client: redis.Redis,  # type: ignore[no-untyped-def]
) -> None:
    mysql_db.run(
        "CREATE TABLE e (id INT PRIMARY KEY, name VARCHAR(10));"
        "INSERT INTO e SELECT seq, CONCAT('n', seq) FROM seq_1_to_50;"
    )
    mapping = parse_mapping("version: 1\ntables:\n  e:\n", name="resumable")
    # a run that stopped after row 30 had acknowledged batches up to there: a whole run's
    # checkpoint (marker and binding), its table state set back to row 30, the rows gone
    migrate(mapping, source=mysql_db.url, target=redis_url)
    redis_client.delete("e:id", *(f"e:{n}" for n in range(31, 51)))
    redis_client.hset("e:30", "name", "as the first run left it")
    marker, _ = Checkpoint(redis_client, "resumable").run()
    redis_client.execute_command(
        *Checkpoint(redis_client, "resumable", marker).command("e", [b"30"], 30)
    )
    report = migrate(mapping, source=mysql_db.url, target=redis_url, resume=True)
    (t,) = report.tables
    assert t.rows == 20 and t.resumed_from == 30 and not report.recoveries
    assert redis_client.hget("e:30", "name") == b"as the first run left it"  # not read again
    assert redis_client.exists("e:31", "e:50") == 2
    assert redis_client.get("e:id") == b"50"
    state = Checkpoint(redis_client, "resumable").load()["e"]
    assert state.done and state.rows == 50
    # a second --resume finds the run finished: nothing is left to resume (issue 27 item 1);
    # a fresh run starts over
    with pytest.raises(MigratorError, match="nothing is left to resume"):
        migrate(mapping, source=mysql_db.url, target=redis_url, resume=True)
    fresh = migrate(mapping, source=mysql_db.url, target=redis_url, batch_size=7)
    assert fresh.tables[0].rows == 50 and redis_client.exists("e:30")


def test_unknown_table_in_tables_option(mysql_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run("CREATE TABLE emp (id INT PRIMARY KEY);")
    mapping = parse_mapping("version: 1\ntables:\n  emp:\n")
    with pytest.raises(MigratorError, match="did you mean 'emp'"):
        migrate(mapping, source=mysql_db.url, target=redis_url, tables=["emps"])


def test_unknown_column_names_line_and_suggestion(
    mysql_db,
    redis_url: str,
    tmp_path: Path,
    redis_client: redis.Redis,  # type: ignore[no-untyped-def]
) -> None:
    mysql_db.run("CREATE TABLE emp (id INT PRIMARY KEY, email VARCHAR(20));")
    f = tmp_path / "m.yaml"
    f.write_text("version: 1\ntables:\n  emp:\n    unique:\n      - emial\n", encoding="utf-8")
    p = migrator_cli("migrate", str(f), "--source", mysql_db.url, "--target", redis_url)
    assert p.returncode == 2, p.stderr
    assert f"{f}:5" in p.stderr and "unknown column 'emial'" in p.stderr
    assert "did you mean 'email'" in p.stderr and "Traceback" not in p.stderr
    assert redis_client.dbsize() == 0  # nothing written


@pytest.mark.workers  # what migrate writes: again with 4 workers in CI
def test_cli_json_summary(mysql_db, redis_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run("CREATE TABLE emp (id INT PRIMARY KEY, n VARCHAR(5), s INT);"
                 "INSERT INTO emp VALUES (1,'a',NULL),(2,'b',3);")  # fmt: skip
    f = tmp_path / "m.yaml"
    f.write_text(
        "version: 1\ntables:\n  emp:\n    sorted: [{key: 'emp:by:s', score: s}]\n",
        encoding="utf-8",
    )
    p = migrator_cli("migrate", str(f), "--json", "--source", mysql_db.url, "--target", redis_url)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    (t,) = summary["tables"]
    assert t["table"] == "emp" and t["rows"] == 2 and t["keys"] == 4  # 2 rows, counter, zset
    assert t["skipped"] == {"NULL score (not in sorted set)": 1}


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("mysql+pymysql://root:s3cretpw@127.0.0.1:3306/mysql", ["refused the login", "root"]),
        ("mysql+pymysql://root@127.0.0.1:1/mysql", ["cannot reach MySQL at 127.0.0.1:1"]),
        ("mysql+pymysql://root@127.0.0.1:3306/no_such_db_x", ["no database 'no_such_db_x'"]),
    ],
)
def test_connection_errors_are_one_line_exit_3_without_password(
    mysql_server_url: str, redis_url: str, tmp_path: Path, source: str, words: list[str]
) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("version: 1\ntables:\n  user:\n", encoding="utf-8")
    p = migrator_cli("migrate", str(f), "--source", source, "--target", redis_url)
    assert p.returncode == 3, p.stderr
    for w in words:
        assert w in p.stderr
    assert "s3cretpw" not in p.stderr + p.stdout and "Traceback" not in p.stderr


@pytest.mark.parametrize(
    ("flag", "url", "words"),
    [
        ("--source", "postgresql://u:s3cretpw@h/db", ["must be MySQL"]),
        ("--target", "http://u:s3cretpw@h/0", ["not a Redis URL"]),
    ],
)
def test_a_url_of_the_wrong_kind_is_a_usage_error(
    mysql_db,
    redis_url: str,
    tmp_path: Path,
    flag: str,
    url: str,
    words: list[str],  # type: ignore[no-untyped-def]
) -> None:
    mysql_db.run("CREATE TABLE emp (id INT PRIMARY KEY);")
    f = tmp_path / "m.yaml"
    f.write_text("version: 1\ntables:\n  emp:\n", encoding="utf-8")
    urls = {"--source": mysql_db.url, "--target": redis_url, flag: url}
    p = migrator_cli("migrate", str(f), "--source", urls["--source"], "--target", urls["--target"])
    assert p.returncode == 2, p.stderr
    for w in words:
        assert w in p.stderr
    assert "s3cretpw" not in p.stderr + p.stdout and "Traceback" not in p.stderr


def test_unreachable_redis_exit_3_without_password(mysql_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run("CREATE TABLE emp (id INT PRIMARY KEY);")
    f = tmp_path / "m.yaml"
    f.write_text("version: 1\ntables:\n  emp:\n", encoding="utf-8")
    p = migrator_cli(
        "migrate", str(f), "--source", mysql_db.url, "--target", "redis://:hunter22@127.0.0.1:1/0"
    )
    assert p.returncode == 3 and "cannot reach Redis" in p.stderr
    assert "hunter22" not in p.stderr + p.stdout and "Traceback" not in p.stderr


@pytest.mark.workers  # what migrate writes: again with 4 workers in CI
def test_environment_overrides_the_mapping(
    mysql_db,
    redis_url: str,
    tmp_path: Path,
    redis_client: redis.Redis,  # type: ignore[no-untyped-def]
) -> None:
    mysql_db.run("CREATE TABLE emp (id INT PRIMARY KEY); INSERT INTO emp VALUES (7);")
    f = tmp_path / "m.yaml"
    f.write_text(
        "version: 1\nsource: mysql+pymysql://root@127.0.0.1:1/x\ntarget: redis://127.0.0.1:1/0\n"
        "tables:\n  emp:\n",
        encoding="utf-8",
    )
    p = migrator_cli(
        "migrate", str(f),
        env={"MIGRATOR_SOURCE_URL": mysql_db.url, "MIGRATOR_TARGET_URL": redis_url},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert redis_client.hgetall("emp:7") == {b"id": b"7"}
