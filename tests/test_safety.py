"""No silent collisions and a safe target (issue 10 items 5 and 6), on the real servers:
rows whose values would make a composite key ambiguous are rejected and listed (or
escaped), and a target holding foreign keys in the mapping's key space, or too little
memory, is refused before anything is written."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from sqlalchemy.engine import make_url

from migrator.commands import verify
from migrator.mapping.loader import parse_mapping
from migrator.plan.escape import split
from migrator.urls import mask, mask_text
from tests.faults import RedisProcess, redis_process
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


@pytest.mark.workers  # what migrate writes or says: again with 4 workers in CI
def test_ambiguous_rows_are_rejected_listed_and_verify_counts_them(
    tag_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Issue 16 items 1-2: the composite primary key (a, b) of two text columns is ambiguous,
    the index (note, n) of one text and one integer is not; verify counts the rows migrate
    rejected as differences (exit 1), with the fix; dry-run and verify --fix say so too."""
    path = write_mapping(tmp_path, tag_db, redis_url)
    rejects = tmp_path / "rejects.jsonl"
    done = cli_run("migrate", str(path), "--json", "--rejects", str(rejects))
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["rejected"] == 2
    (table,) = report["tables"]
    listed = [(r["primary_key"], r["column"]) for r in table["rejects"]]
    assert listed == [(["a", "b:c"], "b"), (["a:b", "c"], "a")]
    lines = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert [(x["table"], x["primary_key"], x["column"]) for x in lines] == [
        ("tag", pk, col) for pk, col in listed
    ]
    # the two rows that collided on tag:a:b:c are not in Redis, the others are; 'no:te' in
    # the index (note, n) is the only varying value there: written, read back one way
    assert not redis_client.exists("tag:a:b:c")
    assert redis_client.hgetall("tag:u:v") == {b"n": b"5", b"note": b"w"}
    assert redis_client.exists("tag:r\\s:t")
    assert redis_client.smembers("tag:indices:note:no:te:n:3") == {b"p:q"}
    human = cli_run("migrate", str(path))
    assert human.returncode == 1
    assert "rejected tag (a:b, c): a: separator inside a value" in human.stderr
    assert "2 row(s) were rejected" in human.stderr
    checked = cli_run("verify", str(path), "--json")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    verdict = json.loads(checked.stdout)
    assert verdict["identical"] is False
    (vt,) = verdict["tables"]
    assert (vt["mysql_rows"], vt["redis_rows"], vt["rejected"]) == (5, 3, 2)
    assert vt["differences"] == {"rejected row": 2}
    assert vt["rejected_reasons"] == {"separator inside a value of a composite key": 2}
    named = sorted((d["key"], d["field"]) for d in vt["examples"] if d["kind"] == "rejected row")
    assert named == [("(a, b:c)", "b"), ("(a:b, c)", "a")]
    (hint,) = verdict["hints"]
    assert "options.escape: backslash" in hint and "--replace" in hint
    shown = cli_run("verify", str(path))
    assert shown.returncode == 1
    assert "Redis matches MySQL" not in shown.stdout
    head = next(x for x in shown.stdout.splitlines() if "MySQL rows" in x)
    assert "rejected" in head.split("stale")[1]
    assert "2 row(s) MySQL holds are not in Redis" in " ".join(shown.stderr.split())
    assert "options.escape: backslash" in " ".join(shown.stderr.split())
    fixed = cli_run("verify", str(path), "--fix", "--json")
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr
    verdict = json.loads(fixed.stdout)
    assert verdict["fix"]["not_writable"] == 2 and verdict["identical"] is False
    assert "verify --fix cannot write them" in verdict["hints"][0]
    fixed = cli_run("verify", str(path), "--fix")
    assert fixed.returncode == 1
    assert "verify --fix cannot write them" in " ".join(fixed.stderr.split())
    dry = cli_run("dry-run", str(path))
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert "2 row(s) would be rejected" in dry.stderr.strip().splitlines()[-1]
    assert json.loads(cli_run("dry-run", str(path), "--json").stdout)["rejected"] == 2


@pytest.mark.workers  # what migrate writes or says: again with 4 workers in CI
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


@pytest.mark.workers  # what migrate writes or says: again with 4 workers in CI
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


# -- item 6: room for the load ------------------------------------------------------------------


def test_a_load_that_will_not_fit_maxmemory_is_refused_before_writing(
    mysql_db: MySQLDatabase, tmp_path: Path
) -> None:
    mysql_db.run(
        "CREATE TABLE big (id INT PRIMARY KEY, note VARCHAR(200) NOT NULL);"
        "INSERT INTO big SELECT seq, REPEAT('x', 150) FROM seq_1_to_20000;"
    )
    with redis_process(tmp_path, extra=("--maxmemory", "3mb")) as server:
        path = tmp_path / "big.yaml"
        path.write_text(
            f"version: 1\nsource: {mysql_db.url}\ntarget: {server.url}\ntables:\n  big: {{}}\n"
        )
        done = cli_run("migrate", str(path), "--json")
        assert done.returncode == 2, done.stderr
        failure = json.loads(done.stdout)
        assert "of Redis memory (the dry-run estimate)" in failure["error"]
        assert "--no-memory-check" in failure["hint"]
        assert server.dbsize() == 0
        client = server.client()
        try:
            client.config_set("maxmemory", "200mb")
            assert cli_run("migrate", str(path)).returncode == 0
            assert client.dbsize() >= 20_000
            assert cli_run("verify", str(path)).returncode == 0
        finally:
            client.close()


# -- item 7: one error line and a hint, never a traceback ---------------------------------------


def _acl_user(server: RedisProcess, rules: str, user: str = "loader", pw: str = "s3cr#t/pw") -> str:
    """Create or widen an ACL user on the test's own server; its URL, password encoded."""
    client = server.client()
    try:
        client.execute_command("ACL", "SETUSER", user, "on", f">{pw}", *rules.split())
    finally:
        client.close()
    return f"redis://{user}:{quote(pw, safe='')}@127.0.0.1:{server.port}/0"


def test_failures_are_one_line_a_hint_and_the_documented_exit_code(
    tag_db: MySQLDatabase, tmp_path: Path
) -> None:
    path = write_mapping(tmp_path, tag_db, "redis://127.0.0.1:6379/15", "escape: backslash")
    cases = [
        # a target that is not Redis: MySQL's own port
        (["--target", "redis://127.0.0.1:3306/0"], 3, "is not a Redis server", "3306 is MySQL's"),
        (["--batch-size", "0"], 2, "--batch-size must be a positive", "e.g. 5000"),
        (["--batch-size", "5000000"], 2, "more than the 1,000,000 rows", "--batch-size 10000"),
        (["--batch-size", "many"], 2, "Invalid value for '--batch-size'",
         "migrator migrate --help"),
        (["--source", tag_db.url.replace("mysql+pymysql", "mysql+mysqlconnector")], 2,
         "the Python module 'mysql' is not installed", "pip install mysql-connector-python"),
    ]  # fmt: skip
    for args, code, error, hint in cases:
        for as_json in (False, True):
            done = cli_run("migrate", str(path), *args, *(["--json"] if as_json else []))
            assert done.returncode == code, (args, done.stderr)
            assert "Traceback" not in done.stderr, args
            lines = [x for x in done.stderr.splitlines() if x.startswith("error: ")]
            flat = " ".join(done.stderr.split())  # wrapped at 80 columns, between words
            assert len(lines) == 1 and error in flat, (args, done.stderr)
            assert "hint: " in done.stderr and hint in flat, (args, done.stderr)
            if as_json:
                failure = json.loads(done.stdout)
                assert failure["exit_code"] == code and error in failure["error"]
                assert hint in failure["hint"]


@pytest.mark.workers  # what migrate writes or says: again with 4 workers in CI
def test_an_acl_user_without_a_permission(tag_db: MySQLDatabase, tmp_path: Path) -> None:
    with redis_process(tmp_path) as server:
        # may read and connect, may not write: refused at the first write, exit 3, no secret
        url = _acl_user(server, "~* &* -@all +@read +@connection +info")
        path = write_mapping(tmp_path, tag_db, url, "escape: backslash")
        done = cli_run("migrate", str(path), "--json")
        assert done.returncode == 3, done.stderr
        failure = json.loads(done.stdout)
        assert "no permissions to run" in failure["error"] and "ACL SETUSER" in failure["hint"]
        assert "s3cr" not in done.stdout + done.stderr
        # with the permissions docs/connections.md names, the same user loads and verifies
        _acl_user(server, "+@write +@transaction +@scripting")
        assert cli_run("migrate", str(path)).returncode == 0
        assert cli_run("verify", str(path)).returncode == 0


# -- item 8: secrets ------------------------------------------------------------------------------


def test_a_scan_the_user_may_not_run_fails_verify_with_the_acl_hint(
    tag_db: MySQLDatabase, tmp_path: Path
) -> None:
    """The stray-key SCAN runs on a thread of its own beside the pass: its failure is the
    command's, one line and a hint (exit 3), and the thread does not outlive the command."""
    with redis_process(tmp_path) as server:
        url = _acl_user(server, "~* &* +@all")
        path = write_mapping(tmp_path, tag_db, url, "escape: backslash")
        assert cli_run("migrate", str(path)).returncode == 0
        client = server.client()
        client.set("app:other", "1")  # more keys than migrate wrote: the SCAN starts at once
        client.close()
        assert cli_run("verify", str(path)).returncode == 0
        _acl_user(server, "-scan")
        for args in ([], ["--tables", "tag"]):  # --tables: never settled by DBSIZE
            done = cli_run("verify", str(path), "--json", *args)
            assert done.returncode == 3, done.stderr
            failure = json.loads(done.stdout)
            assert "scan" in failure["error"].lower() and "ACL SETUSER" in failure["hint"]
            assert "Traceback" not in done.stderr and "s3cr" not in done.stdout + done.stderr
        before = threading.active_count()
        with pytest.raises(redis.exceptions.NoPermissionError):
            verify(path)
        assert threading.active_count() == before  # the scan thread has ended


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:ab#Secret9@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("redis://:ab%23Secret9@h:1/0", "redis://:***@h:1/0"),
        ("mysql+pymysql://root:p@ss/w?rd@h:3306/db", "mysql+pymysql://root:***@h:3306/db"),
        ("redis+cluster://u:pw@h1:1,h2:2", "redis+cluster://u:***@h1:1,h2:2"),
        ("rediss://h:6380/0?ssl_password=k3y", "rediss://h:6380/0?ssl_password=***"),
        ("redis://h:6379/0", "redis://h:6379/0"),
        ("mysql+pymysql://root@h/db", "mysql+pymysql://root@h/db"),
    ],
)
def test_one_mask_for_every_url(url: str, shown: str) -> None:
    assert mask(url) == shown
    assert mask_text(f"cannot reach {url} now") == f"cannot reach {shown} now"


@pytest.mark.workers  # what migrate writes or says: again with 4 workers in CI
def test_a_raw_password_is_never_printed(tag_db: MySQLDatabase, tmp_path: Path) -> None:
    path = write_mapping(tmp_path, tag_db, "redis://:ab#Secret9@127.0.0.1:1/0")
    host = tag_db.url.split("@", 1)[1]  # 127.0.0.1:3306/mig_t_...
    for args in (
        [],
        ["--json"],
        ["--target", "redis://u:p@ss/w#rd9@127.0.0.1:1/0"],
        ["--source", f"mysql+pymysql://root:p@ss/w?rd9#x@{host}"],  # misread as host 'ss'
        ["--source", f"mysql+pymysql://root:p@ss/w?rd9#x@{host}", "--json"],
    ):
        done = cli_run("migrate", str(path), *args)
        assert done.returncode in (2, 3), done.stderr
        out = done.stdout + done.stderr
        assert "Secret9" not in out and "ss/w" not in out and "rd9" not in out, out
        assert "'ss'" not in out and "ss:3306" not in out, out
        assert "Traceback" not in out
    refused = cli_run("validate", str(path), "--source", f"mysql+pymysql://r:a/b@{host}")
    assert refused.returncode == 2 and "is not percent-encoded" in refused.stderr


def test_a_password_variable_is_percent_encoded_in_the_url(
    tag_db: MySQLDatabase, tmp_path: Path
) -> None:
    """``${VAR}`` inside a URL's user info: any password works, as init writes it."""
    password = "p@ss/w#rd?%:x"
    with redis_process(tmp_path) as server:
        client = server.client()
        try:
            client.execute_command(
                "ACL", "SETUSER", "app", "on", f">{password}", "~*", "&*", "+@all"
            )
        finally:
            client.close()
        path = tmp_path / "m.yaml"
        draft = cli_run("init", "--source", tag_db.url)
        assert draft.returncode == 0
        source_line = next(x for x in draft.stdout.splitlines() if x.startswith("source:"))
        body = draft.stdout.replace(source_line, f"source: {tag_db.url}")
        assert "\n    escape: backslash\n" in body  # init proposes it: rows would be rejected
        target = f"target: redis://app:${{REDIS_PASSWORD}}@127.0.0.1:{server.port}/0\n"
        path.write_text(target + body)
        done = cli_run("migrate", str(path), REDIS_PASSWORD=password)
        assert done.returncode == 0, done.stderr
        assert password not in done.stdout + done.stderr
        assert server.dbsize() > 0
    # the URL init writes for a source with a password reads it from $MYSQL_PASSWORD
    env = {"MYSQL_PASSWORD": password}
    m = parse_mapping("version: 1\nsource: mysql+pymysql://u:${MYSQL_PASSWORD:-}@h/db\n"
                      "tables: {t: {}}\n", environ=env)  # fmt: skip
    assert make_url(m.source).password == password  # type: ignore[arg-type]
