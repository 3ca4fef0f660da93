"""The default row reader (asyncmy) connects, refuses and fails as PyMySQL does (issue 18).

Each case opens the raw connection that reads rows (``Source.raw_connection``) once through
asyncmy and once through PyMySQL (``MIGRATOR_RAW_DRIVER``) and asserts the same outcome: the
session's TLS cipher (empty: no TLS), or the same one-line error and hint (exit 3), never with
the password. The server is a mariadbd of this module's own on a free port with TLS files made
by ``openssl`` (tests/test_tls.py's certificates: a CA, another CA, a server certificate for
localhost/127.0.0.1, a client certificate) and the users the cases need; it is stopped after
the module. caching_sha2_password runs on the session's Oracle MySQL (``oracle_mysql``,
tests/engines.py).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pytest
import sqlalchemy as sa

from migrator.errors import EXIT_CONNECT, ConnectError
from migrator.retry import Retrying
from migrator.source import asyncmy_sync
from migrator.source.drivers import RAW_DRIVER_ENV
from migrator.source.mysql import Source
from tests.binlog_server import PrivateMariaDB, missing
from tests.engines import OracleMySQL
from tests.test_tls import _certificates

READERS = ("asyncmy", "pymysql")
MODULES = {"asyncmy": "migrator.source.asyncmy_sync", "pymysql": "pymysql"}
PASSWORD = "p@ss/w#rd"
ENCODED = "p%40ss%2Fw%23rd"
USERS = f"""
CREATE DATABASE shop;
CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(20));
INSERT INTO shop.t VALUES (1, 'één'), (2, NULL);
CREATE USER native@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('{PASSWORD}');
CREATE USER tls@'%' IDENTIFIED BY '{PASSWORD}' REQUIRE SSL;
CREATE USER cert@'%' IDENTIFIED BY '{PASSWORD}' REQUIRE X509;
GRANT SELECT ON shop.* TO native@'%', tls@'%', cert@'%';
"""


@dataclass
class Server:
    port: int
    certs: Path
    ed25519: bool  # the plugin could be installed and a user made with it

    def url(self, user: str = "native", password: str = ENCODED, **query: str) -> str:
        tail = "&".join(f"{k}={v}" for k, v in query.items())
        return f"mysql+pymysql://{user}:{password}@127.0.0.1:{self.port}/shop" + (
            f"?{tail}" if tail else ""
        )


def tls_server(certs: Path, cert: str = "server") -> PrivateMariaDB:
    """A private mariadbd, started, that serves ``certs/<cert>.crt`` (and trusts
    ``certs/ca.crt``), with ``USERS`` made; the caller stops it."""
    tls = (
        f"--ssl-ca={certs / 'ca.crt'}",
        f"--ssl-cert={certs / f'{cert}.crt'}",
        f"--ssl-key={certs / f'{cert}.key'}",
    )
    db = PrivateMariaDB(binlog=False, options=tls)
    db.start()
    try:
        conn = db.connect()
        try:
            with conn.cursor() as cur:
                for statement in filter(None, (s.strip() for s in USERS.split(";"))):
                    cur.execute(statement)
        finally:
            conn.close()
    except BaseException:
        db.stop()
        raise
    return db


def skip_without_tls_server() -> None:
    why = missing() or (None if shutil.which("openssl") else "openssl is not on PATH")
    if why:
        pytest.skip(f"no private MariaDB with TLS for the reader tests: {why}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    skip_without_tls_server()
    certs = tmp_path_factory.mktemp("mysql-tls")
    _certificates(certs)
    db = tls_server(certs)
    try:
        conn = db.connect()
        try:
            with conn.cursor() as cur:
                ed25519 = True
                try:
                    cur.execute("INSTALL SONAME 'auth_ed25519'")
                    cur.execute(
                        f"CREATE USER ed@'%' IDENTIFIED VIA ed25519 USING PASSWORD('{PASSWORD}')"
                    )
                    cur.execute("GRANT SELECT ON shop.* TO ed@'%'")
                except pymysql.err.MySQLError:
                    ed25519 = False
        finally:
            conn.close()
        yield Server(db.port, certs, ed25519)
    finally:
        db.stop()


def attempt(url: str, reader: str, monkeypatch: pytest.MonkeyPatch, **source: Any) -> Any:
    """Open the reading connection of ``Source(url)`` through ``reader``; its session's TLS
    cipher ('' without TLS) and the rows of shop.t, or the error as the tool prints it."""
    monkeypatch.setenv(RAW_DRIVER_ENV, reader)
    try:
        with Source(url, **source) as src:
            conn = src.raw_connection()
            assert type(conn).__module__.startswith(MODULES[reader])
            cipher = src.fetch_all(sa.text("SHOW SESSION STATUS LIKE 'Ssl_cipher'"))[0][1]
            rows = src.fetch_all(sa.text("SELECT id, v FROM t ORDER BY id"))
            return ("ok", cipher or b"", rows)
    except ConnectError as e:
        assert PASSWORD not in str(e) and ENCODED not in str(e)
        return ("error", e.exit_code, e.message, e.hint)


def both(url: str, monkeypatch: pytest.MonkeyPatch, **source: Any) -> Any:
    """The outcome through asyncmy, asserted equal to PyMySQL's."""
    by_asyncmy = attempt(url, "asyncmy", monkeypatch, **source)
    assert by_asyncmy == attempt(url, "pymysql", monkeypatch, **source)
    return by_asyncmy


ROWS = [(b"1", "één".encode()), (b"2", None)]


@pytest.mark.engine("mariadb", why="mysql_native_password is gone in MySQL 9 (test_accounts)")
def test_native_password_and_preferred_tls(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """No TLS option: TLS when the server offers it (unchecked), as PyMySQL 1.2 does; a user
    that requires TLS gets in that way too."""
    outcome = both(server.url(), monkeypatch)
    assert outcome[0] == "ok" and outcome[1] != b"" and outcome[2] == ROWS
    assert both(server.url("tls"), monkeypatch)[0] == "ok"


def test_wrong_password_is_the_same_error(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    kind, code, message, hint = both(server.url(password="wrong%2Fpw"), monkeypatch)
    assert (kind, code) == ("error", EXIT_CONNECT)
    assert message.startswith("MySQL refused the login of user 'native' at 127.0.0.1:")
    assert "wrong" not in message + hint and "***" in hint


def test_tls_with_a_ca_checks_the_certificate(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, other = str(server.certs / "ca.crt"), str(server.certs / "other.crt")
    kind, cipher, rows = both(server.url("tls", ssl_ca=ca), monkeypatch)
    assert kind == "ok" and cipher != b"" and rows == ROWS
    kind, code, message, _ = both(server.url("tls", ssl_ca=other), monkeypatch)
    assert (kind, code) == ("error", EXIT_CONNECT) and "certificate verify failed" in message


def test_tls_client_certificate(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {
        "ssl_ca": str(server.certs / "ca.crt"),
        "ssl_cert": str(server.certs / "client.crt"),
        "ssl_key": str(server.certs / "client.key"),
    }
    assert both(server.url("cert", **files), monkeypatch)[0] == "ok"
    refused = both(server.url("cert", ssl_ca=files["ssl_ca"]), monkeypatch)
    assert refused[0] == "error" and refused[2].startswith("MySQL refused the login of user")


def test_tls_required_from_a_server_without_it(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A private server started without TLS files: PyMySQL's refusal (2026), not plain text."""
    plain = PrivateMariaDB(binlog=False)
    plain.start()
    try:
        conn = plain.connect()
        with conn.cursor() as cur:
            for statement in USERS.split(";")[:3]:
                cur.execute(statement)
        conn.close()
        url = f"mysql+pymysql://root@127.0.0.1:{plain.port}/shop"
        assert both(url, monkeypatch)[1] == b""  # preferred: plain text
        ca = str(server.certs / "ca.crt")
        kind, code, message, _ = both(f"{url}?ssl_ca={ca}", monkeypatch)
    finally:
        plain.stop()
    assert (kind, code) == ("error", EXIT_CONNECT)
    assert message == (
        f"MySQL error at 127.0.0.1:{plain.port}: SSL is required but the server doesn't support it"
    )


@pytest.mark.engine("mariadb", why="ed25519 is MariaDB's authentication plugin")
def test_ed25519(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """MariaDB's ed25519 plugin: both drivers sign with PyNaCl (the extra ``ed25519``, in
    ``dev`` too, so this test runs wherever the plugin does)."""
    if not server.ed25519:
        pytest.skip("this mariadbd has no auth_ed25519 plugin")
    outcome = both(server.url("ed"), monkeypatch)
    assert outcome[0] == "ok" and outcome[2] == ROWS


def test_errors_of_the_server_and_the_network(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodb = f"mysql+pymysql://root@127.0.0.1:{server.port}/nowhere"
    kind, code, message, _ = both(nodb, monkeypatch)
    assert (kind, code) == ("error", EXIT_CONNECT)
    assert message.startswith("MySQL at 127.0.0.1:") and "no database 'nowhere'" in message
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kind, code, message, _ = both(server.url().replace(str(server.port), str(port)), monkeypatch)
    assert (kind, code) == ("error", EXIT_CONNECT)
    assert message.startswith(f"cannot reach MySQL at 127.0.0.1:{port}: ")


def test_connect_timeout(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A listener whose accept queue is full never completes the TCP handshake: the connect
    timeout ends the wait with the same line through either reader."""
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        waiting = []
        for _ in range(3):  # fill the queue; later SYNs are dropped
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            waiting.append(c)
        try:
            url = server.url().replace(str(server.port), str(port))
            started = time.monotonic()
            kind, code, message, _ = both(url, monkeypatch, connect_timeout=1)
            took = time.monotonic() - started
        finally:
            for c in waiting:
                c.close()
    assert (kind, code) == ("error", EXIT_CONNECT) and "timed out" in message
    assert took < 10, took  # two attempts of ~1 s


class Quick:
    attempts = 1
    backoff = 0.1
    max_backoff = 0.1


def test_read_timeout(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """``?read_timeout=1``: a query that outlasts it loses the connection (2013), retried
    and then reported the same way through either reader."""
    url = server.url(read_timeout="1")
    quick = Retrying(Quick())
    messages = []
    for reader in READERS:
        monkeypatch.setenv(RAW_DRIVER_ENV, reader)
        with Source(url, retrying=quick) as src, pytest.raises(ConnectError) as e:
            src.fetch_all(sa.text("SELECT SLEEP(3)"))
        messages.append(e.value.message)
    assert (
        messages[0]
        == messages[1]
        == ("reading MySQL: lost the connection (2013) (still failing after 1 retries)")
    )


def test_cli_with_a_var_url_through_each_reader(server: Server, tmp_path: Path) -> None:
    """``${VAR}`` in the mapping's source URL; a wrong password: exit 3, the same line and
    hint on stderr through either reader, no password; the right one: the rows."""
    mapping = tmp_path / "m.yaml"
    mapping.write_text(
        "version: 1\n"
        f"source: mysql+pymysql://native:${{H4_PW}}@127.0.0.1:{server.port}/shop\n"
        "tables:\n  t: {}\n"
    )
    outs = []
    for reader in READERS:
        env = {**os.environ, RAW_DRIVER_ENV: reader, "H4_PW": "wrong"}
        done = subprocess.run(
            [sys.executable, "-m", "migrator", "dry-run", str(mapping)],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert done.returncode == EXIT_CONNECT and "wrong" not in done.stderr
        outs.append(done.stderr)
        env["H4_PW"] = PASSWORD  # as it is: the user-info part is percent-encoded
        done = subprocess.run(
            [sys.executable, "-m", "migrator", "dry-run", str(mapping)],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert PASSWORD not in done.stdout + done.stderr and "2 rows" in done.stdout
    assert outs[0] == outs[1] and "refused the login of user 'native'" in outs[0]


@pytest.fixture
def mysql8(oracle_mysql: OracleMySQL) -> str:
    """The session's Oracle MySQL (tests/engines.py: a private MySQL 9.7, or
    ``MIGRATOR_TEST_ORACLE_MYSQL_URL``, or ``mysql:8.0`` where Docker answers), root."""
    return oracle_mysql.url


@pytest.mark.engine("mysql", why="caching_sha2_password is MySQL's; MariaDB 10.11 has none")
@pytest.mark.parametrize("tls", ["tls", "plain"])
def test_caching_sha2_password(mysql8: str, tls: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """MySQL 8's default plugin, through each reader: with a cold cache (the full exchange:
    the password in clear over TLS, or encrypted with the server's RSA key without TLS,
    ``ssl_disabled=true``), then with the cached fast path; a wrong password refused alike."""
    if tls == "plain":
        pytest.importorskip("cryptography", reason="RSA without TLS needs cryptography")
    root = pymysql.connect(**_root_args(mysql8))
    base = mysql8.rstrip("/").rsplit("@", 1)[1]
    query = "?ssl_disabled=true" if tls == "plain" else ""
    try:
        with root.cursor() as cur:
            cur.execute("DROP USER IF EXISTS sha2@'%'")
            plugin = "caching_sha2_password"
            cur.execute(f"CREATE USER sha2@'%' IDENTIFIED WITH {plugin} BY '{PASSWORD}'")
            cur.execute("GRANT SELECT ON mysql.* TO sha2@'%'")
        url = f"mysql+pymysql://sha2:{ENCODED}@{base}/mysql{query}"
        for reader in READERS:
            monkeypatch.setenv(RAW_DRIVER_ENV, reader)
            with root.cursor() as cur:
                cur.execute("FLUSH PRIVILEGES")  # a cold cache: the full exchange first
            for _ in ("full", "fast"):
                with Source(url) as src:
                    assert type(src.raw_connection()).__module__.startswith(MODULES[reader])
                    who = src.fetch_all(sa.text("SELECT CURRENT_USER()"))[0][0]
                    cipher = src.fetch_all(sa.text("SHOW SESSION STATUS LIKE 'Ssl_cipher'"))
                assert who.startswith(b"sha2@"), (reader, who)
                assert (cipher[0][1] or b"") != b"" if tls == "tls" else not cipher[0][1]
        wrong = f"mysql+pymysql://sha2:nope@{base}/mysql{query}"
        kind, code, message, _ = both(wrong, monkeypatch)
        assert (kind, code) == ("error", EXIT_CONNECT) and "refused the login" in message
    finally:
        with root.cursor() as cur:
            cur.execute("DROP USER IF EXISTS sha2@'%'")
        root.close()


def _root_args(url: str) -> dict[str, Any]:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return {"host": u.host, "port": u.port or 3306, "user": u.username or "root",
            "password": u.password or "", "autocommit": True}  # fmt: skip


def test_asyncmy_is_the_default_reader() -> None:
    assert asyncmy_sync.available()
