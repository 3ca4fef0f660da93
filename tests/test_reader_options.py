"""The URL options asyncmy takes behave through it as through PyMySQL (issue 18, item 2).

tests/test_reader_parity.py compares the two readers on logins, TLS with a CA and a client
certificate, timeouts and errors; this module does the same for the remaining options asyncmy
reads (drivers.raw_driver keeps it for them): ``ssl_check_hostname``, ``ssl_capath``,
``ssl_cipher``, ``ssl_disabled``, ``unix_socket``, ``charset``, and for the errors of a URL
without a password and of a host that does not resolve. Its own mariadbd serves a certificate
for the name ``localhost`` only, so that ``127.0.0.1`` does not match it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest

from migrator.errors import EXIT_CONNECT, EXIT_USAGE, MigratorError
from migrator.source.drivers import RAW_DRIVER_ENV
from migrator.source.mysql import Source
from tests.binlog_server import PrivateMariaDB
from tests.test_reader_parity import (
    ENCODED,
    PASSWORD,
    ROWS,
    Server,
    both,
    skip_without_tls_server,
    tls_server,
)
from tests.test_tls import KEY, _certificates, _openssl


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, PrivateMariaDB]]:
    """A private mariadbd whose certificate names ``localhost`` alone, with tests/
    test_reader_parity.py's users and table; and ``certs/capath`` holding the CA by hash."""
    skip_without_tls_server()
    certs = tmp_path_factory.mktemp("mysql-tls-named")
    _certificates(certs)
    (certs / "named.ext").write_text("subjectAltName=DNS:localhost\n")
    _openssl("req", *KEY, "-keyout", "named.key", "-out", "named.csr", "-subj", "/CN=localhost",
             cwd=certs)  # fmt: skip
    _openssl("x509", "-req", "-in", "named.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "named.crt", "-days", "2", "-extfile", "named.ext",
             cwd=certs)  # fmt: skip
    for folder, ca in (("capath", "ca.crt"), ("otherpath", "other.crt")):
        (certs / folder).mkdir()
        digest = subprocess.run(
            ["openssl", "x509", "-hash", "-noout", "-in", str(certs / ca)],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()  # fmt: skip
        shutil.copy(certs / ca, certs / folder / f"{digest}.0")
    db = tls_server(certs, "named")
    try:
        yield Server(db.port, certs, False), db
    finally:
        db.stop()


def test_check_hostname(
    named: tuple[Server, PrivateMariaDB], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a CA the certificate's name is checked: 127.0.0.1 is refused alike, unless
    ``ssl_check_hostname=false``; ``localhost`` matches."""
    server, _ = named
    ca = str(server.certs / "ca.crt")
    kind, code, message, _ = both(server.url("tls", ssl_ca=ca), monkeypatch)
    assert (kind, code) == ("error", EXIT_CONNECT) and "mismatch" in message, message
    off = both(server.url("tls", ssl_ca=ca, ssl_check_hostname="false"), monkeypatch)
    assert off[0] == "ok" and off[1] != b"" and off[2] == ROWS
    by_name = server.url("tls", ssl_ca=ca).replace("@127.0.0.1:", "@localhost:")
    outcome = both(by_name, monkeypatch)
    assert outcome[0] == "ok" and outcome[1] != b""


def test_capath(named: tuple[Server, PrivateMariaDB], monkeypatch: pytest.MonkeyPatch) -> None:
    """``ssl_capath``: a folder of CA certificates by hash; one without the server's CA fails
    the check alike."""
    server, _ = named
    url = server.url("tls", ssl_capath=str(server.certs / "capath"), ssl_check_hostname="false")
    outcome = both(url, monkeypatch)
    assert outcome[0] == "ok" and outcome[1] != b""
    other = url.replace("/capath", "/otherpath")
    kind, code, message, _ = both(other, monkeypatch)
    assert (kind, code) == ("error", EXIT_CONNECT) and "certificate verify failed" in message


def test_cipher(named: tuple[Server, PrivateMariaDB], monkeypatch: pytest.MonkeyPatch) -> None:
    """``ssl_cipher`` limits the TLS 1.2 ciphers (TLS 1.3's suites are not chosen so, in
    either driver: PyMySQL's context is used for both): the same session cipher."""
    server, _ = named
    ca = str(server.certs / "ca.crt")
    url = server.url("tls", ssl_ca=ca, ssl_check_hostname="false",
                     ssl_cipher="ECDHE-ECDSA-AES128-GCM-SHA256")  # fmt: skip
    outcome = both(url, monkeypatch)
    assert outcome[0] == "ok" and outcome[1] != b""


def test_ssl_disabled(
    named: tuple[Server, PrivateMariaDB], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ssl_disabled=true``: plain text though the server offers TLS, through asyncmy too
    (``both`` asserts each reader really read); a user that requires TLS is refused alike;
    a value that is neither true nor false is a usage error."""
    server, _ = named
    outcome = both(server.url(ssl_disabled="true"), monkeypatch)
    assert outcome == ("ok", b"", ROWS)
    assert both(server.url(ssl_disabled="false"), monkeypatch)[1] != b""
    kind, code, message, _ = both(server.url("tls", ssl_disabled="1"), monkeypatch)
    assert (kind, code) == ("error", EXIT_CONNECT)
    assert message.startswith("MySQL refused the login of user 'tls'")
    monkeypatch.setenv(RAW_DRIVER_ENV, "asyncmy")
    with pytest.raises(MigratorError) as e:
        Source(server.url(ssl_disabled="maybe")).raw_connection()
    assert e.value.exit_code == EXIT_USAGE and "ssl_disabled=maybe" in e.value.message


def test_unix_socket_and_charset(
    named: tuple[Server, PrivateMariaDB], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``unix_socket``: the rows over the server's socket; a socket that is not there is the
    same error (exit 3). ``charset`` is taken and the rows are the same bytes."""
    server, db = named
    sock = str(db.dir / "sock")
    url = f"mysql+pymysql://native:{ENCODED}@localhost/shop?unix_socket={sock}"
    outcome = both(url, monkeypatch)
    assert outcome[0] == "ok" and outcome[2] == ROWS
    kind, code, message, _ = both(url.replace("/sock", "/nosock"), monkeypatch)
    assert (kind, code) == ("error", EXIT_CONNECT) and message.startswith("cannot reach MySQL")
    assert both(server.url(charset="utf8mb4"), monkeypatch)[2] == ROWS


def test_no_password_and_an_unknown_host(
    named: tuple[Server, PrivateMariaDB], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user whose password the URL leaves out gets the hint to write it; a host name that
    does not resolve, the same line naming it. Never the password."""
    server, _ = named
    bare = server.url().replace(f":{ENCODED}@", "@")
    kind, code, message, hint = both(bare, monkeypatch)
    assert (kind, code) == ("error", EXIT_CONNECT)
    assert message.endswith("the source URL gives no password") and "${MYSQL_PASSWORD}" in hint
    nowhere = server.url().replace("@127.0.0.1:", "@no-such-host.invalid:")
    kind, code, message, hint = both(nowhere, monkeypatch)
    assert (kind, code) == ("error", EXIT_CONNECT)
    assert message.startswith("cannot reach MySQL at no-such-host.invalid:")
    assert PASSWORD not in message + hint and ENCODED not in message + hint
