"""MySQL connections: URL parsing, the session every connection starts with (UTC, read-only),
and driver errors turned into one line that names the cause and the fix."""

from __future__ import annotations

import re
import socket
from typing import Any

from sqlalchemy.engine import URL, make_url

from migrator.errors import ConnectError, MigratorError, docs
from migrator.source.url_options import check_driver, check_options
from migrator.urls import mask, readable

SESSION_SETUP = ("SET time_zone = '+00:00'", "SET SESSION TRANSACTION READ ONLY")


def parse_url(url: str) -> URL:
    text = readable(url, "source")
    try:
        parsed = make_url(text)
    except Exception:
        raise MigratorError(
            f"not a database URL: {mask(url)}",
            "write it as mysql+pymysql://user:password@host:3306/database",
        ) from None
    if parsed.get_backend_name() not in ("mysql", "mariadb"):
        raise MigratorError(
            f"the source must be MySQL or MariaDB, not '{parsed.get_backend_name()}'",
            "write it as mysql+pymysql://user:password@host:3306/database",
        )
    if parsed.drivername in ("mysql", "mariadb"):
        parsed = parsed.set(drivername="mysql+pymysql")
    check_driver(parsed)
    check_options(parsed)
    return parsed


#: a login refused: a wrong user or password (1045), or no password given (MariaDB: 1698)
ACCESS_DENIED = (1045, 1698)
#: the account's authentication plugin is not loaded (mysql_native_password on MySQL 9)
PLUGIN_NOT_LOADED = 1524
#: logged in, but no privilege on the URL's database
DB_ACCESS_DENIED = 1044


def connect_error(url: URL, exc: BaseException) -> ConnectError:
    """Turn a driver error into one line that names the cause and the fix, no password."""
    orig = getattr(exc, "orig", exc)
    args: tuple[Any, ...] = tuple(getattr(orig, "args", None) or (None,))
    code = args[0]
    where = f"{url.host or 'localhost'}:{url.port or 3306}"
    shown = mask(url)
    if code in ACCESS_DENIED and not url.password:
        return ConnectError(
            f"MySQL refused the login of user '{url.username}' at {where} (access denied): "
            "the source URL gives no password",
            "write it in the URL (mysql+pymysql://<user>:<password>@host:3306/db), or as "
            f"${{MYSQL_PASSWORD}} in the mapping's source: ({docs('connections.md')})",
        )
    if code in ACCESS_DENIED:
        return ConnectError(
            f"MySQL refused the login of user '{url.username}' at {where} (access denied)",
            f"check the user and password in the source URL ({shown})",
        )
    if code == PLUGIN_NOT_LOADED:
        plugin = re.search(r"'([^']+)'", str(args[-1]))
        name = plugin.group(1) if plugin else "its authentication plugin"
        return ConnectError(
            f"MySQL at {where} cannot log in user '{url.username}': the account uses {name},"
            " which this server does not load (mysql_native_password is off by default in"
            " MySQL 8.4 and gone in 9.0)",
            "move the account to MySQL's default plugin: ALTER USER "
            f"'{url.username}'@'<host>' IDENTIFIED WITH caching_sha2_password BY '<password>'"
            f" ({docs('connections.md')})",
        )
    if code == DB_ACCESS_DENIED:
        return ConnectError(
            f"MySQL at {where} refused user '{url.username}' access to database"
            f" '{url.database}' (access denied: no privilege on it)",
            f"GRANT SELECT ON `{url.database}`.* TO '{url.username}'@'<host>'"
            f" ({docs('connections.md')})",
        )
    if code == 1049:
        return ConnectError(
            f"MySQL at {where} has no database '{url.database}'",
            "check the database name at the end of the source URL",
        )
    if code in (2002, 2003, 2005, 2006, 2013):
        return ConnectError(
            f"cannot reach MySQL at {where}: {first_line(orig)}",
            "is the server running and the host/port right? (" + shown + ")",
        )
    return ConnectError(f"MySQL error at {where}: {first_line(orig)}", f"source URL: {shown}")


def expect_greeting(url: URL, timeout: float) -> None:
    """A MySQL server speaks first: the handshake packet arrives as soon as it accepts the
    connection. Another server on that port (Redis, a web server) waits for a command, and
    the driver would wait forever for the greeting; here that is an error after ``timeout``.
    Refused connections and unknown hosts are left to the driver's own messages."""
    if url.query.get("unix_socket") or not url.host:
        return
    where = f"{url.host}:{url.port or 3306}"
    try:
        sock = socket.create_connection((url.host, url.port or 3306), timeout)
    except OSError:
        return  # the driver says why, in its words
    try:
        sock.settimeout(timeout)
        greeting = sock.recv(5)
    except TimeoutError:
        greeting = None
    except OSError:
        return
    finally:
        sock.close()
    if greeting is None:
        raise ConnectError(
            f"{where} accepted the connection but sent no MySQL greeting in {timeout:g} s: "
            "it is not a MySQL server, or it is stuck",
            f"check the host and port of the source URL ({mask(url)}); MySQL listens on 3306",
        )


def first_line(exc: BaseException) -> str:
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    text = str(args[1]) if len(args) > 1 else str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def setup_session(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    try:
        for statement in SESSION_SETUP:
            cursor.execute(statement)
    finally:
        cursor.close()


#: MySQL/MariaDB errors worth a retry: the connection was lost or killed (2006, 2013, 2055,
#: MariaDB 1927), the server was shutting down or full (1053, 1040), a query was interrupted
#: (1317), a lock wait timed out or a deadlock was broken (1205, 1213); 2002/2003: the server
#: does not answer (yet) when reconnecting
TRANSIENT_CODES = {
    1040: "too many connections", 1053: "the server is shutting down",
    1205: "lock wait timeout", 1213: "deadlock", 1317: "query interrupted",
    1927: "the connection was killed", 2002: "cannot connect", 2003: "cannot connect",
    2006: "the server has gone away", 2013: "lost the connection", 2055: "lost the connection",
}  # fmt: skip


#: ER_TABLE_DEF_CHANGED: a table was altered or truncated after the read view (a snapshot)
#: began; the read is only worth doing again in a new read view (``TableChanged``)
TABLE_DEF_CHANGED = 1412


def error_code(exc: BaseException) -> int | None:
    """The server's error number of a driver's exception, or None."""
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()) or (None,))
    return args[0] if isinstance(args[0], int) else None


def transient(exc: BaseException) -> str | None:
    """Why a failure of the source is worth a retry (``migrator.retry``), or None."""
    if isinstance(exc, ConnectError):  # reconnecting after a loss; bounded by the policy
        return exc.message
    code = error_code(exc)
    if code in TRANSIENT_CODES:
        return f"{TRANSIENT_CODES[code]} ({code})"
    if type(exc).__name__ == "InterfaceError":  # a connection the driver already closed
        return "the connection is unusable"
    return None
