"""Passwords in URLs (issue 16 items 3-4): the user information of a source (MySQL) and a
target (Redis) URL is read the same way — it ends at the last ``@`` before the host, the user
name at its first ``:`` — or the URL is refused with the encoding hint; no part of a password
is printed (text or ``--json``) or looked up as a host, by any command that takes a URL. A
server that wants a password the URL does not give says so. A first connection that fails
(nothing written) suggests no ``--resume``."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy.engine import make_url
from typer.testing import CliRunner, Result

from migrator.cli import app
from migrator.commands.failures import BeforeWriting, explain
from migrator.errors import MigratorError, NothingWritten
from migrator.source.connection import parse_url
from migrator.store.cluster import parse_seeds
from migrator.store.sink import connect
from migrator.urls import mask, readable
from tests.cluster import free_ports
from tests.engines import BinlogServer
from tests.faults import RedisProcess, SilentServer, redis_process, signal_when, silent_server
from tests.services import (
    MySQLDatabase,
    create_database,
    drop_database,
    mysql_connect,
    new_database_name,
)

REPO = Path(__file__).resolve().parent.parent
#: passwords written into URLs without percent-encoding; each fragment must never be printed
PARSED = ["Secr3t@Horse", "Secr3t:Horse", "Secr3t@Horse:Batt@ry"]  # read: the last '@'
REFUSED = ["Secr3t/Horse", "Secr3t#Horse", "Secr3t?Horse", "Secr3t@Horse/x"]  # exit 2
FRAGMENTS = ("Secr3t", "Horse", "Batt", "ry@", "Name or service")
SOURCE_COMMANDS = ["migrate", "verify", "dry-run", "sync", "validate", "init"]
TARGET_COMMANDS = ["migrate", "verify", "sync"]


def invoke(*args: str) -> Result:
    """``migrator ARGS`` in this process, with no URL from the environment."""
    env = {"MIGRATOR_SOURCE_URL": None, "MIGRATOR_TARGET_URL": None, "COLUMNS": "200"}
    return CliRunner().invoke(app, list(args), env=env)  # type: ignore[arg-type]


def printed(result: Result) -> str:
    return result.stdout + result.stderr


def leaks(text: str) -> list[str]:
    return [f for f in FRAGMENTS if f in text]


@pytest.fixture
def emp_db(mysql_db: MySQLDatabase) -> MySQLDatabase:
    mysql_db.run((REPO / "samples" / "emp.sql").read_text(encoding="utf-8"))
    return mysql_db


@pytest.fixture
def own_emp_db(binlog_server: BinlogServer) -> Iterator[MySQLDatabase]:
    """``emp_db`` on a server this session started (``binlog_server``: a private mariadbd, the
    session's Oracle MySQL), where a test may make accounts, as it may not on the shared one."""
    db = create_database(binlog_server.url, new_database_name())
    try:
        db.run((REPO / "samples" / "emp.sql").read_text(encoding="utf-8"))
        yield db
    finally:
        drop_database(binlog_server.url, db.name)


def with_password(url: str, password: str) -> str:
    """``url`` (root, no password) with ``password`` written into it as it is."""
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1) if "@" in rest.split("/", 1)[0] else ("", rest)
    return f"{scheme}://{user}:{password}@{host}"


# -- one reading for both kinds of URL (pure) ---------------------------------------------------


@pytest.mark.parametrize("password", PARSED)
def test_mysql_and_redis_urls_read_the_password_up_to_the_last_at(password: str) -> None:
    source = parse_url(f"mysql+pymysql://app:{password}@db.internal:3307/shop")
    assert (source.username, source.password, source.host, source.port) == (
        "app", password, "db.internal", 3307,
    )  # fmt: skip
    target = redis.connection.parse_url(readable(f"redis://app:{password}@cache:6380/2", "t"))
    assert (target["username"], target["password"], target["host"], target["port"]) == (
        "app", password, "cache", 6380,
    )  # fmt: skip
    assert mask(f"mysql+pymysql://app:{password}@db.internal/shop") == (
        "mysql+pymysql://app:***@db.internal/shop"
    )
    assert readable("redis://cache:6379/0", "t") == "redis://cache:6379/0"
    seeds, options = parse_seeds(f"redis+cluster://app:{password}@n1:7000,n2:7001")
    assert seeds == [("n1", 7000), ("n2", 7001)] and options["password"] == password
    encoded = password.replace("@", "%40").replace(":", "%3A")  # encoded: the same password
    assert parse_url(f"mysql+pymysql://app:{encoded}@db.internal/shop").password == password


# -- every command, text and --json: no fragment of a password ----------------------------------


def source_args(command: str, url: str, target: str, tmp_path: Path) -> list[str]:
    if command == "init":
        return ["init", "--source", url]
    mapping = tmp_path / "emp.yaml"
    mapping.write_text((REPO / "mappings" / "emp.yaml").read_text(encoding="utf-8"))
    args = [command, str(mapping), "--source", url]
    return args + ([] if command == "validate" else ["--target", target])


@pytest.mark.parametrize("command", SOURCE_COMMANDS)
def test_no_fragment_of_a_source_password_is_printed_or_looked_up(
    command: str, emp_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    for password in PARSED + REFUSED:
        url = with_password(emp_db.url, password)
        for as_json in ([], ["--json"]) if command != "init" else ([],):
            result = invoke(*source_args(command, url, redis_url, tmp_path), *as_json)
            out = printed(result)
            assert not leaks(out), (password, out)
            assert "Traceback" not in out
            if password in PARSED:  # read as root with a wrong password at the right host
                assert result.exit_code == 3, out
                where = make_url(emp_db.url).port
                assert f"MySQL refused the login of user 'root' at 127.0.0.1:{where}" in out
            else:
                assert result.exit_code == 2, out
                assert "not percent-encoded" in out and "%40 %3A %2F %3F %23" in out
            if as_json:
                failure = json.loads(result.stdout)
                assert failure["exit_code"] == result.exit_code and not leaks(str(failure))


def test_a_url_from_the_environment_or_the_mapping_is_read_alike(
    emp_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    url = with_password(emp_db.url, "Secr3t@Horse:Batt@ry")
    mapping = tmp_path / "env.yaml"
    body = (REPO / "mappings" / "emp.yaml").read_text(encoding="utf-8")
    mapping.write_text(body)
    env = {"MIGRATOR_SOURCE_URL": url, "MIGRATOR_TARGET_URL": redis_url, "COLUMNS": "200"}
    from_env = CliRunner().invoke(app, ["verify", str(mapping), "--json"], env=env)
    lines = [x for x in body.splitlines() if not x.startswith(("source:", "target:"))]
    mapping.write_text("\n".join([f"source: {url}", f"target: {redis_url}", *lines]) + "\n")
    from_file = invoke("migrate", str(mapping))
    for result in (from_env, from_file):
        out = printed(result)
        assert result.exit_code == 3 and "refused the login of user 'root' at 127.0.0.1" in out
        assert not leaks(out), out


@pytest.fixture
def locked_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    """A redis-server of the test's own that requires a password (requirepass)."""
    with redis_process(tmp_path, password=secrets.token_hex(8)) as server:
        yield server


@pytest.mark.parametrize("command", [*TARGET_COMMANDS, "dry-run"])
def test_no_fragment_of_a_target_password_is_printed(
    command: str, emp_db: MySQLDatabase, locked_redis: RedisProcess, tmp_path: Path
) -> None:
    for password in PARSED + REFUSED:
        url = f"redis://:{password}@127.0.0.1:{locked_redis.port}/0"
        for as_json in ([], ["--json"]):
            args = source_args(command, emp_db.url, url, tmp_path)
            result = invoke(*args, *as_json)
            out = printed(result)
            assert not leaks(out), (password, out)
            shown = f"redis://:***@127.0.0.1:{locked_redis.port}/0"
            if command == "dry-run":  # never contacts the target: shows it masked
                assert result.exit_code == 0 and shown in out, out
            elif password in PARSED:
                assert result.exit_code == 3, out
                assert f"Redis at {shown} refused" in out
            else:
                assert result.exit_code == 2 and "not percent-encoded" in out, out
    assert locked_redis.dbsize() == 0


def test_a_password_with_at_and_colon_works_unencoded_on_both_servers(
    own_emp_db: MySQLDatabase, tmp_path: Path
) -> None:
    """A MySQL account and a Redis server whose passwords hold '@' and ':', written into the
    URLs as they are: every command connects and the load verifies. The account is made on a
    server of the session's own (``own_emp_db``)."""
    emp_db = own_emp_db
    password = "Secr3t@Horse:Batt@ry"
    user = f"h2u_{secrets.token_hex(4)}"
    admin = mysql_connect(emp_db.server_url, autocommit=True)
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE USER '{user}'@'%%' IDENTIFIED BY %s", (password,))
            cur.execute(f"GRANT SELECT ON `{emp_db.name}`.* TO '{user}'@'%'")
        source = emp_db.url.replace("root@", f"{user}:{password}@", 1)
        with redis_process(tmp_path, password=password) as server:
            target = f"redis://:{password}@127.0.0.1:{server.port}/0"
            for command in ("validate", "dry-run", "migrate", "verify"):
                result = invoke(*source_args(command, source, target, tmp_path))
                assert result.exit_code == 0, printed(result)
                assert not leaks(printed(result)), printed(result)
            assert server.dbsize() > 0
            assert invoke("init", "--source", source).exit_code == 0
        unset = emp_db.url.replace("root@", f"{user}@")
        none = invoke("validate", str(tmp_path / "emp.yaml"), "--source", unset)
        assert none.exit_code == 3 and "the source URL gives no password" in printed(none)
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()
    unknown = invoke("validate", str(tmp_path / "emp.yaml"), "--source", unset)  # user dropped
    assert unknown.exit_code == 3, printed(unknown)
    assert f"MySQL refused the login of user '{user}'" in printed(unknown)


# -- a password required and not given ---------------------------------------------------------


@pytest.mark.parametrize("command", TARGET_COMMANDS)
def test_noauth_says_a_password_is_required(
    command: str, emp_db: MySQLDatabase, locked_redis: RedisProcess, tmp_path: Path
) -> None:
    for user in ("", "bob@"):
        url = f"redis://{user}127.0.0.1:{locked_redis.port}/0"
        for as_json in ([], ["--json"]):
            result = invoke(*source_args(command, emp_db.url, url, tmp_path), *as_json)
            out = " ".join(printed(result).split())  # lines wrap at 80 columns
            assert result.exit_code == 3, out
            assert f"Redis at {url} requires a password, and the target URL gives none" in out
            assert "redis://:<password>@host:6379/0" in out and "refused the password" not in out
    wrong = f"redis://:wrong@127.0.0.1:{locked_redis.port}/0"
    with pytest.raises(Exception, match="refused the password"):
        connect(wrong)


# -- a first connection that fails: nothing written, nothing to resume --------------------------


def first_failures(db: MySQLDatabase, locked: RedisProcess) -> dict[str, tuple[str, str, str]]:
    """name -> (source URL, target URL, what the error says)."""
    nobody = free_ports(1)[0]  # nothing listens there
    port = make_url(db.url).port
    wrong_port = db.url.replace(f":{port}/", f":{nobody}/", 1)
    redis_port = f"redis://127.0.0.1:{locked.port}/0"
    return {
        "redis down": (db.url, f"redis://127.0.0.1:{nobody}/0", "cannot reach Redis"),
        "redis login": (db.url, f"redis://:no@127.0.0.1:{locked.port}/0", "refused the password"),
        "redis noauth": (db.url, redis_port, "requires a password"),
        "redis on mysql's port": (db.url, f"redis://127.0.0.1:{port}/0", "not a Redis server"),
        "mysql login": (with_password(db.url, "wrong"), redis_port, "refused the login"),
        "mysql wrong port": (wrong_port, redis_port, "cannot reach MySQL"),
    }


def test_a_failed_first_connection_suggests_no_resume(
    emp_db: MySQLDatabase, locked_redis: RedisProcess, tmp_path: Path
) -> None:
    for name, (source, target, said) in first_failures(emp_db, locked_redis).items():
        for as_json in ([], ["--json"]):
            result = invoke(*source_args("migrate", source, target, tmp_path), *as_json)
            out = printed(result)
            assert result.exit_code == 3 and said in out, (name, out)
            assert "--resume" not in out and "once fixed" not in out, (name, out)
            assert "migrator migrate" not in out, (name, out)  # no command to go on with
    assert locked_redis.dbsize() == 0


def interrupted_when_held(
    args: list[str], silent: SilentServer, how: signal.Signals
) -> tuple[int, str, str]:
    """``migrator ARGS`` in a process of its own, sent ``how`` once ``silent`` accepted its
    connection: (exit code, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIGRATOR_")}
    held = len(silent.accepted)
    command = [sys.executable, "-m", "migrator", *args]
    pipe = subprocess.PIPE
    proc = subprocess.Popen(
        command, stdout=pipe, stderr=pipe, text=True, env={**env, "COLUMNS": "200"}
    )
    out, err = signal_when(proc, "migrate connecting", lambda: len(silent.accepted) > held, how)
    return proc.returncode, out, err


@pytest.mark.parametrize(
    ("side", "how"),
    [pytest.param("source", signal.SIGINT, id="ctrl-c-mysql"),
     pytest.param("target", signal.SIGTERM, id="sigterm-redis")],
)  # fmt: skip
def test_an_interrupt_during_the_first_connection_suggests_no_resume(
    side: str, how: signal.Signals, emp_db: MySQLDatabase, tmp_path: Path
) -> None:
    """Ctrl-C (or SIGTERM) while migrate waits for a server that accepted the connection and
    says nothing: exit 130, "interrupted", and no command to continue, since nothing was
    written. The signal goes once the server holds the connection, so the CLI is past its
    start-up and waiting there."""
    with silent_server() as silent:
        url = f"127.0.0.1:{silent.port}"
        source = f"mysql+pymysql://root@{url}/db" if side == "source" else emp_db.url
        target = f"redis://{url}/0" if side == "target" else "redis://127.0.0.1:1/0"
        for as_json in ([], ["--json"]):
            args = [*source_args("migrate", source, target, tmp_path), *as_json]
            code, out, err = interrupted_when_held(args, silent, how)
            assert code == 130, (out, err)
            assert "interrupted" in err and "--resume" not in out + err, (out, err)
            assert "migrator migrate" not in out + err, (out, err)
            if as_json:
                assert json.loads(out.splitlines()[-1])["hint"] is None


def test_a_lost_redis_connection_suggests_resume_only_where_there_is_one() -> None:
    """A Redis failure no command foresaw (cli.run's last resort): migrate's hint says how to
    continue the load; every other command's says to run it again."""
    nobody = free_ports(1)[0]
    with pytest.raises(redis.ConnectionError) as lost:
        redis.Redis(port=nobody, socket_connect_timeout=2).ping()
    assert "--resume" in (explain(lost.value, resumable=True).hint or "")
    other = explain(lost.value)
    assert other.exit_code == 3 and other.hint == "is the server up? Then run the command again"


def test_a_raw_error_before_the_first_write_suggests_no_resume() -> None:
    """What migrate meets before its first write and no step explained (a Redis connection
    lost outside a retry, a Ctrl-C) names no --resume; after it, the last resort does."""
    nobody = free_ports(1)[0]

    def lost() -> None:
        redis.Redis(port=nobody, socket_connect_timeout=2).ping()

    with pytest.raises(MigratorError) as caught, BeforeWriting():
        lost()
    assert caught.value.exit_code == 3 and "--resume" not in str(caught.value)
    with pytest.raises(NothingWritten), BeforeWriting():
        raise KeyboardInterrupt
    with pytest.raises(redis.ConnectionError), BeforeWriting() as first:
        first.over()
        lost()
