"""TLS and ACL targets, as docs/connections.md describes them: ``rediss://`` with redis-py's
query options (a private CA, a client certificate), an ACL user limited to the documented
permissions, a password with URL characters percent-encoded, and never shown.

The server is a ``redis-server`` of this module's own, with ``tls-port`` and
``tls-auth-clients yes`` on a free port, certificates made by ``openssl`` in a temporary folder;
it is stopped after the module. Skipped when ``openssl`` or ``redis-server`` is missing or the
server was built without TLS."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from migrator.commands import migrate, verify
from migrator.errors import ConnectError
from migrator.mapping.loader import parse_mapping
from tests.services import MySQLDatabase

PASSWORD = "p@ss/w#rd"
ENCODED = "p%40ss%2Fw%23rd"
SQL = """
CREATE TABLE emp (emp_id INT PRIMARY KEY, ename VARCHAR(40) NOT NULL, mgr_id INT NULL,
                  email VARCHAR(60), UNIQUE KEY (email), KEY (mgr_id));
INSERT INTO emp VALUES (1, 'SMITH', 8, 'foo@gmail.com'), (2, 'ALLEN', 8, 'bar@163.com'),
                       (3, 'WARD', NULL, NULL);
"""
MAPPING = "version: 1\ntables:\n  emp:\n    unique: [email]\n    indexes: [mgr_id]\n"


@dataclass
class TLSServer:
    port: int
    certs: Path

    def url(self, auth: str = f"loader:{ENCODED}@", **query: str) -> str:
        options = {
            "ssl_ca_certs": str(self.certs / "ca.crt"),
            "ssl_certfile": str(self.certs / "client.crt"),
            "ssl_keyfile": str(self.certs / "client.key"),
            **query,
        }
        tail = "&".join(f"{k}={v}" for k, v in options.items() if v)
        return f"rediss://{auth}localhost:{self.port}/3?{tail}"


KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _certificates(d: Path) -> None:
    """Two CAs, a server certificate for localhost/127.0.0.1 signed by the first, and a
    client certificate signed by it too."""
    for ca in ("ca", "other"):
        _openssl("req", "-x509", *KEY, "-keyout", f"{ca}.key", "-out", f"{ca}.crt",
                 "-days", "2", "-subj", f"/CN=migrator-test-{ca}", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name, ext in (("server", ["-extfile", "san.ext"]), ("client", [])):
        _openssl("req", *KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={name}", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", *ext, cwd=d)  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSServer]:
    missing = [b for b in ("openssl", "redis-server") if shutil.which(b) is None]
    if missing:
        pytest.skip(f"no TLS Redis for the tests: {' and '.join(missing)} not on PATH")
    d = tmp_path_factory.mktemp("redis-tls")
    _certificates(d)
    port = _free_port()
    (d / "redis.conf").write_text(
        f"port 0\ntls-port {port}\nbind 127.0.0.1\ntls-cert-file {d}/server.crt\n"
        f"tls-key-file {d}/server.key\ntls-ca-cert-file {d}/ca.crt\ntls-auth-clients yes\n"
        f'save ""\nappendonly no\ndir {d}\n'
        "user default off\n"
        # the permissions docs/connections.md names, nothing more
        f"user loader on >{PASSWORD} ~* resetchannels -@all +@read +@write +@transaction "
        "+@scripting +@connection +info\n"
    )
    server = subprocess.Popen(
        ["redis-server", str(d / "redis.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    tls = TLSServer(port, d)
    try:
        deadline = time.monotonic() + 10
        while True:
            if server.poll() is not None:
                reason = (server.stderr.read() if server.stderr else b"").decode()[-300:]
                pytest.skip(f"redis-server would not start with TLS: {reason}")
            try:
                probe = redis.Redis.from_url(tls.url(), socket_timeout=2)
                probe.ping()
                probe.close()
                break
            except (redis.ConnectionError, redis.TimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield tls
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_tls_with_ca_client_certificate_and_acl_user(
    tls_server: TLSServer, mysql_db: MySQLDatabase
) -> None:
    mysql_db.run(SQL)
    mapping = parse_mapping(MAPPING)
    url = tls_server.url()
    report = migrate(mapping, source=mysql_db.url, target=url)
    assert report.rows == 3 and report.exit_code == 0
    assert PASSWORD not in report.target and ENCODED not in report.target
    assert "loader:***@" in report.target
    check = verify(mapping, source=mysql_db.url, target=url)
    assert check.exit_code == 0
    client = redis.Redis.from_url(url)
    try:
        assert client.hgetall("emp:1") == {
            b"ename": b"SMITH",
            b"mgr_id": b"8",
            b"email": b"foo@gmail.com",
        }
        assert client.smembers("emp:indices:mgr_id:8") == {b"1", b"2"}
    finally:
        client.close()


@pytest.mark.parametrize(
    "change, why, message, hint",
    [
        ({"ssl_certfile": "", "ssl_keyfile": ""}, "no client certificate", "TLS with Redis at",
         "?ssl_certfile=...&ssl_keyfile=..."),
        ({"ssl_ca_certs": "OTHER"}, "a CA that did not sign the server's certificate",
         "could not be verified", "ssl_ca_certs=/path/to/ca.pem"),
    ],
)  # fmt: skip
def test_tls_failures_are_connection_errors_without_the_password(
    tls_server: TLSServer,
    mysql_db: MySQLDatabase,
    change: dict[str, str],
    why: str,
    message: str,
    hint: str,
) -> None:
    mysql_db.run(SQL)
    if change.get("ssl_ca_certs") == "OTHER":
        change = {"ssl_ca_certs": str(tls_server.certs / "other.crt")}
    url = tls_server.url(**change)
    with pytest.raises(ConnectError) as caught:
        migrate(parse_mapping(MAPPING), source=mysql_db.url, target=url)
    text = str(caught.value)
    assert message in caught.value.message and hint in (caught.value.hint or ""), why
    assert PASSWORD not in text and ENCODED not in text


def test_wrong_acl_password_is_refused(tls_server: TLSServer, mysql_db: MySQLDatabase) -> None:
    mysql_db.run(SQL)
    with pytest.raises(ConnectError, match="refused the password") as caught:
        migrate(parse_mapping(MAPPING), source=mysql_db.url, target=tls_server.url("loader:x@"))
    assert "loader:***@" in str(caught.value)
