"""The least-privilege accounts of docs/connections.md ("Accounts"), on each engine: what
``migrate``/``verify`` and ``sync`` need, and the error and fix when a privilege is missing; and
an account whose authentication plugin the server does not load (``mysql_native_password`` on
MySQL 9), through both row readers.

Each account is made for the test on the engine's server (``binlog_server``: the binary log is
on, as sync needs) and dropped after it.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migrator.cli import app
from migrator.errors import EXIT_CONNECT, ConnectError, SourceError
from migrator.source.drivers import RAW_DRIVER_ENV
from migrator.source.mysql import Source
from tests.engines import BinlogServer
from tests.services import MySQLDatabase, mysql_connect

MAPPING = "version: 1\ntables:\n  t:\n"
SYNC_GRANTS = {  # each one's use: docs/connections.md, "Accounts"
    "REPLICATION SLAVE": "*.*",  # stream the binary log
    "REPLICATION CLIENT": "*.*",  # SHOW BINARY LOG STATUS / SHOW MASTER STATUS
    "SELECT": "DB",  # read the tables
}  # no RELOAD: sync takes no FLUSH TABLES WITH READ LOCK (MySQL: after @@gtid_executed)
_ids = itertools.count(7100)


@pytest.fixture
def logged_db(binlog_db: MySQLDatabase) -> MySQLDatabase:
    binlog_db.run("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10));")
    binlog_db.run("INSERT INTO t VALUES (1, 'a'), (2, 'b');")
    return binlog_db


class Accounts:
    """Users made on one server for one test; dropped at the end."""

    def __init__(self, db: MySQLDatabase) -> None:
        self.db = db
        self.made: list[str] = []

    def make(self, grants: dict[str, str], plugin: str | None = None) -> str:
        """A user with ``grants`` (privilege -> ``*.*`` or ``DB``); returns its URL."""
        user = f"acc_{secrets.token_hex(4)}"
        password = "Pw-" + secrets.token_hex(4)
        conn = mysql_connect(self.db.server_url, autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE USER '{user}'@'%%' IDENTIFIED BY %s", (password,))
                self.made.append(user)
                for privilege, on in grants.items():
                    where = f"`{self.db.name}`.*" if on == "DB" else on
                    cur.execute(f"GRANT {privilege} ON {where} TO '{user}'@'%'")
                if plugin:  # an account as an older server left it
                    cur.execute("UPDATE mysql.user SET plugin = %s WHERE user = %s", (plugin, user))
                    cur.execute("FLUSH PRIVILEGES")
        finally:
            conn.close()
        return self.db.url.replace("root@", f"{user}:{password}@", 1)

    def drop(self) -> None:
        conn = mysql_connect(self.db.server_url, autocommit=True)
        try:
            with conn.cursor() as cur:
                for user in self.made:
                    cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        finally:
            conn.close()


@pytest.fixture
def accounts(logged_db: MySQLDatabase) -> Iterator[Accounts]:
    made = Accounts(logged_db)
    try:
        yield made
    finally:
        made.drop()


def _run(tmp_path: Path, *args: str) -> tuple[int, str]:
    path = tmp_path / "m.yaml"
    path.write_text(MAPPING)
    result = CliRunner().invoke(app, [args[0], str(path), *args[1:]])
    return result.exit_code, " ".join(result.output.split())


def test_migrate_and_verify_need_only_select_on_the_database(
    accounts: Accounts, binlog_server: BinlogServer, redis_url: str, tmp_path: Path
) -> None:
    """SELECT on the database is all migrate and verify need. On MySQL the snapshot then has
    no binary-log position (it is said, not an error); with RELOAD and REPLICATION CLIENT it
    has (FLUSH TABLES WITH READ LOCK, SHOW BINARY LOG STATUS); with RELOAD alone it has not."""
    url = accounts.make({"SELECT": "DB"})
    for command in ("migrate", "verify"):
        code, out = _run(tmp_path, command, "--source", url, "--target", redis_url)
        assert code == 0, out
    mysql = binlog_server.kind == "mysql"
    assert ("FLUSH TABLES WITH READ LOCK refused" in out) == mysql, out
    url = accounts.make({"SELECT": "DB", "RELOAD": "*.*"})
    code, out = _run(tmp_path, "verify", "--source", url, "--target", redis_url)
    assert code == 0, out
    assert ("SHOW BINARY LOG STATUS refused" in out) == mysql, out
    url = accounts.make({"SELECT": "DB", "RELOAD": "*.*", "REPLICATION CLIENT": "*.*"})
    code, out = _run(tmp_path, "verify", "--source", url, "--target", redis_url)
    assert code == 0 and "binlog " in out and "refused" not in out, out


def test_no_privilege_on_the_database_names_the_grant(
    accounts: Accounts, redis_url: str, tmp_path: Path
) -> None:
    url = accounts.make({"RELOAD": "*.*"})  # logs in; nothing on the database
    user = url.split("//", 1)[1].split(":", 1)[0]
    code, out = _run(tmp_path, "migrate", "--source", url, "--target", redis_url)
    assert code == EXIT_CONNECT, out
    assert f"refused user '{user}' access to database '{accounts.db.name}'" in out, out
    assert f"GRANT SELECT ON `{accounts.db.name}`.* TO '{user}'@'<host>'" in out, out


@pytest.mark.parametrize("missing", list(SYNC_GRANTS))
def test_sync_names_each_missing_privilege_and_its_grant(
    accounts: Accounts, binlog_server: BinlogServer, redis_url: str, missing: str
) -> None:
    """The account docs/connections.md gives for sync, less one privilege: sync refuses at
    start (exit 2, or 3 where the login itself has no database), naming it and the GRANT that
    fixes it; with all of them it loads and follows."""
    from migrator.commands.sync import sync
    from migrator.mapping.loader import parse_mapping

    grants = dict(SYNC_GRANTS)
    mapping = parse_mapping(MAPPING)
    full = accounts.make(grants)
    done = sync(mapping, source=full, target=redis_url, until_caught_up=True, server_id=next(_ids))
    assert done.snapshot is not None and done.snapshot.has_position
    url = accounts.make({k: v for k, v in grants.items() if k != missing})
    user = url.split("//", 1)[1].split(":", 1)[0]
    error: type[Exception] = ConnectError if missing == "SELECT" else SourceError
    with pytest.raises(error) as caught:
        sync(mapping, source=url, target=redis_url, until_caught_up=True, server_id=next(_ids))
    message, hint = caught.value.message, caught.value.hint or ""  # type: ignore[attr-defined]
    if missing == "SELECT":
        assert f"GRANT SELECT ON `{accounts.db.name}`.* TO '{user}'@'<host>'" in hint
    else:
        assert f"the user lacks the {missing} privilege" in message, message
        everything = ", ".join(grants)
        assert f"GRANT {everything} ON *.* TO '{user}'@" in hint, hint
    assert "Pw-" not in message + hint


@pytest.mark.engine("mysql", why="MariaDB loads mysql_native_password; MySQL 9 has none")
@pytest.mark.parametrize("reader", ["asyncmy", "pymysql"])
def test_an_account_on_an_unloaded_plugin_says_how_to_move_it(
    accounts: Accounts, reader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An account left on mysql_native_password (an 8.0 account after an upgrade to 9): the
    login fails with what to do, exit 3, through each row reader."""
    url = accounts.make({"SELECT": "DB"}, plugin="mysql_native_password")
    user = url.split("//", 1)[1].split(":", 1)[0]
    monkeypatch.setenv(RAW_DRIVER_ENV, reader)
    with pytest.raises(ConnectError) as caught, Source(url) as src:
        src.raw_connection()
    assert caught.value.exit_code == EXIT_CONNECT
    assert f"cannot log in user '{user}': the account uses mysql_native_password" in (
        caught.value.message
    )
    assert f"ALTER USER '{user}'@'<host>' IDENTIFIED WITH caching_sha2_password" in (
        caught.value.hint or ""
    )
