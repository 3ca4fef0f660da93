"""asyncmy, the default row reader, used synchronously.

asyncmy is a MySQL driver whose protocol core is compiled (Cython) and published as wheels
for every platform and Python version the tool supports: no compiler, no MySQL client
library. It reads rows ~3-5x faster than PyMySQL (docs/performance.md). It speaks asyncio
only, so each connection here owns a private event loop, and every call runs one coroutine
to its end on it (``run_until_complete``) in the calling thread: a DBAPI-like connection and
cursor, as ``Source`` uses them.

It is made to behave as PyMySQL does, which the tests compare case by case
(tests/test_reader_parity.py): the connection arguments are the ones SQLAlchemy derives for
PyMySQL from the URL; TLS uses PyMySQL's own context for the ``ssl_*`` options, *required*
when the URL names any, else *preferred* (TLS when the server offers it, unchecked), or none
with ``ssl_disabled=true``; a server without TLS refuses a required one with PyMySQL's error
(2026); errors carry MySQL's codes as ``args[0]``, as PyMySQL's do.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import ssl
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

#: URL query options this reader takes (SQLAlchemy turns the ``ssl_*`` ones into PyMySQL's
#: ``ssl`` dict); a URL with any other keeps PyMySQL, which they were written for
OPTIONS = frozenset(
    {"ssl_ca", "ssl_capath", "ssl_cert", "ssl_key", "ssl_cipher", "ssl_check_hostname"}
    | {"ssl_disabled", "unix_socket", "read_timeout", "charset"}
)
#: the connection arguments passed on (those of PyMySQL that asyncmy takes alike)
ARGUMENTS = frozenset(
    {"host", "port", "user", "password", "database", "unix_socket", "read_timeout"}
    | {"connect_timeout", "charset"}
)
CLIENT_SSL = 2048  # capability flag: the server offers TLS
CR_SSL_CONNECTION_ERROR = 2026
CR_CONN_HOST_ERROR = 2003


@functools.cache
def available() -> bool:
    """Whether asyncmy can be imported (a wheel exists for this platform)."""
    try:
        import asyncmy  # noqa: F401
    except Exception:
        return False
    return True


def connect(kwargs: Mapping[str, Any]) -> Connection:
    """A connection from the arguments SQLAlchemy's PyMySQL dialect derived from the URL,
    with type conversion off (every value is the bytes MySQL sends, or None);
    ``ssl_disabled`` (a bool: drivers.raw_connect) means no TLS, whatever else is asked."""
    import pymysql
    from asyncmy.converters import conversions

    args = {k: v for k, v in kwargs.items() if k in ARGUMENTS}
    sslp = kwargs.get("ssl")
    # PyMySQL's context for the same options: the same checks of certificate and host name
    make_ctx = pymysql.connections.Connection._create_ssl_ctx
    tls = None if kwargs.get("ssl_disabled") else make_ctx(None, dict(sslp) if sslp else {})
    encoders = {k: v for k, v in conversions.items() if not isinstance(k, int)}

    async def opened() -> Any:  # made inside the loop: asyncmy binds it to the running one
        conn = _connection_class()(**args, conv=encoders, use_unicode=False, ssl=tls)
        conn.tls_required = bool(sslp) and tls is not None
        await conn.connect()
        return conn

    loop = asyncio.new_event_loop()
    where = args.get("host") or "localhost"
    try:
        return Connection(loop, loop.run_until_complete(opened()))
    except asyncio.TimeoutError:  # Python 3.10: no OSError, so asyncmy leaves it unwrapped
        loop.close()
        import asyncmy

        text = f"Can't connect to MySQL server on {where!r} (timed out)"
        raise asyncmy.errors.OperationalError(CR_CONN_HOST_ERROR, text) from None
    except Exception as e:
        loop.close()
        cause = e.__cause__
        if isinstance(cause, OSError) and (e.args or (None,))[0] == CR_CONN_HOST_ERROR:
            # asyncio words a refused or timed-out connect its own way: say it as PyMySQL does
            text = f"Can't connect to MySQL server on {where!r} ({_socket_text(cause)})"
            raise type(e)(CR_CONN_HOST_ERROR, text) from None
        raise
    except BaseException:
        loop.close()
        raise


def _socket_text(e: OSError) -> str:
    """An error of a socket connect as the socket module words it (PyMySQL's connect)."""
    if isinstance(e, ssl.SSLError | socket.gaierror):  # worded alike
        return str(e)
    if isinstance(e, TimeoutError):
        return "timed out"
    if e.errno is not None:  # asyncio: "Connect call failed (host, port)"
        return f"[Errno {e.errno}] {os.strerror(e.errno)}"
    return str(e)


@functools.cache
def _connection_class() -> type:
    """asyncmy's connection, with PyMySQL's choice of TLS once the server's greeting is in:
    a required TLS the server does not offer is refused as PyMySQL refuses it; a preferred
    one is dropped. (A function: asyncmy is imported only when it reads.)"""
    import asyncmy

    base: Any = asyncmy.Connection  # (its stubs do not declare the handshake's state)

    class PyMySQLAlike(base):
        tls_required = False

        async def _request_authentication(self) -> Any:
            tls: Any = getattr(self, "_ssl_context", None)
            if tls is not None and not self.server_capabilities & CLIENT_SSL:
                if self.tls_required:
                    raise asyncmy.errors.OperationalError(
                        CR_SSL_CONNECTION_ERROR,
                        "SSL is required but the server doesn't support it",
                    )
                self._ssl_context = None
                self._client_flag &= ~CLIENT_SSL
            return await super()._request_authentication()

    return PyMySQLAlike


class Connection:
    """A DBAPI-like connection over one asyncmy connection and its own event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, conn: Any) -> None:
        self._loop = loop
        self._conn = conn
        self._interrupted = False  # a call ended by Ctrl-C, SIGTERM...: its task may linger

    def _run(self, coro: Any) -> Any:
        try:
            return self._loop.run_until_complete(coro)
        except Exception:
            raise
        except BaseException:
            self._interrupted = True
            raise

    def cursor(self, cursor_cls: Any = None) -> Cursor:
        return Cursor(self, self._conn.cursor(cursor_cls))

    def rollback(self) -> None:
        self._run(self._conn.rollback())

    def commit(self) -> None:
        self._run(self._conn.commit())

    def close(self) -> None:
        """Say QUIT and close; a connection lost or interrupted mid-call is just closed."""
        loop = self._loop
        if loop.is_closed() or loop.is_running():  # (running: another thread is in a call)
            return
        try:
            if not self._interrupted:
                with suppress(Exception):
                    self._run(asyncio.wait_for(self._conn.ensure_closed(), 5))
            self._conn.close()
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            with suppress(BaseException):  # lets them end, and the transport close its socket
                if pending:
                    loop.run_until_complete(asyncio.wait(pending))
                loop.run_until_complete(asyncio.sleep(0))
        finally:
            loop.close()


class Cursor:
    """A cursor of ``Connection``: the DBAPI calls ``Source`` makes."""

    def __init__(self, conn: Connection, cursor: Any) -> None:
        self._run = conn._run
        self._cursor = cursor

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

    def execute(self, query: str, args: Any = None) -> int:
        return int(self._run(self._cursor.execute(query, args)) or 0)

    def fetchone(self) -> Any:
        return self._run(self._cursor.fetchone())

    def fetchmany(self, size: int | None = None) -> list[Any]:
        return list(self._run(self._cursor.fetchmany(size)))

    def fetchall(self) -> list[Any]:
        return list(self._run(self._cursor.fetchall()))

    def close(self) -> None:
        self._run(self._cursor.close())

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
