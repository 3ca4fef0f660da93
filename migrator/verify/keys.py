"""Verify's view of Redis: reads sent as one packed pipeline, replies read straight from
redis-py's hiredis reader, and SCAN (migrator.store.keys). The keys a mapping owns, and
which table each belongs to, are migrator.plan.keyspace's."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from migrator.plan.resp import resp
from migrator.retry import Retrying
from migrator.store.keys import scan_keys
from migrator.store.sink import retry

try:  # redis-py's hiredis reader, read directly (``_hiredis_replies``) where it is there
    from redis._parsers.hiredis import NOT_ENOUGH_DATA, _HiredisParser
except ImportError:  # pragma: no cover - other redis-py versions: one read_response a reply
    NOT_ENOUGH_DATA = object()

    class _HiredisParser:  # type: ignore[no-redef]  # (no parser is one of these)
        _reader: Any = None


Command = tuple[bytes, ...]


class Reader:
    """Sends read commands as one packed pipeline and returns every reply in order; a
    command Redis refuses (WRONGTYPE...) gives its ResponseError as the reply."""

    def __init__(self, client: redis.Redis, retrying: Retrying | None = None) -> None:
        self.client = client
        #: how dropped connections and timeouts are retried (the mapping's options.retries)
        self.retrying = retrying or Retrying()
        self.scripting = True  # EVAL allowed (cleared when the server refuses it)
        self.packed = True  # one server: a batch's reads go down one connection (fast.py)

    def read(self, commands: Sequence[Command]) -> list[Any]:
        if not commands:
            return []
        payload = resp(commands)
        return retry(lambda: self._send(payload, len(commands)), retrying=self.retrying)

    def send(self, commands: Sequence[Command]) -> Pending:
        """Send now, read the replies later (``Pending.wait``), so that Redis works while the
        caller reads the next batch from MySQL. A dropped connection is retried in ``wait``."""
        if not commands:
            return Pending(self, 0, None)
        pending = self.send_packed(resp(commands), len(commands))
        pending.commands = commands
        return pending

    def send_packed(self, payload: bytes, n: int) -> Pending:
        """``send`` for commands already packed as RESP: ``n`` of them in ``payload``."""
        pool = self.client.connection_pool
        conn = None
        if n:
            try:
                conn = pool.get_connection()
                conn.send_packed_command([payload], check_health=False)
            except (RedisConnectionError, RedisTimeoutError, OSError):
                if conn is not None:
                    conn.disconnect()
                    pool.release(conn)
                conn = None
        return Pending(self, n, conn, payload)

    def _receive(self, conn: Any, n: int) -> list[Any]:
        parser = getattr(conn, "_parser", None)
        if isinstance(parser, _HiredisParser) and parser._reader is not None:
            return _hiredis_replies(parser, n)
        replies: list[Any] = []
        for _ in range(n):
            try:
                replies.append(conn.read_response())
            except ResponseError as e:
                replies.append(e)
        return replies

    def _send(self, payload: bytes, n: int) -> list[Any]:
        pool = self.client.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_packed_command([payload], check_health=False)
            return self._receive(conn, n)
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)

    def scan(self, glob: str, count: int = 2000) -> Iterator[list[bytes]]:
        """Keys matching ``glob``, a SCAN page at a time (a key may come twice)."""
        return scan_keys(self.client, glob, count)


def _hiredis_replies(parser: Any, n: int) -> list[Any]:
    """``n`` replies straight from redis-py's hiredis reader, without its per-reply calls
    (an error reply is its ResponseError, as in ``Reader._receive``)."""
    gets, more = parser._reader.gets, parser.read_from_socket
    replies: list[Any] = []
    while True:  # only these replies can come on this connection: no need to count each
        replies += iter(gets, NOT_ENOUGH_DATA)  # every reply buffered, with no Python step
        if len(replies) >= n:
            break
        more()
    if any(issubclass(t, RedisConnectionError) for t in set(map(type, replies))):
        raise next(r for r in replies if isinstance(r, RedisConnectionError))  # LOADING...
    return replies


class Pending:
    """Replies still to be read for ``n`` commands already sent as ``payload`` (over ``conn``;
    without one, they are sent again when wanted: ``commands`` by ``Reader.read`` if given)."""

    def __init__(
        self,
        reader: Reader,
        n: int,
        conn: Any,
        payload: bytes = b"",
        commands: Sequence[Command] | None = None,
    ) -> None:
        self.reader, self.n, self.conn, self.payload = reader, n, conn, payload
        self.commands = commands

    def _again(self) -> list[Any]:
        if self.commands is not None:
            return self.reader.read(self.commands)
        reader, payload, n = self.reader, self.payload, self.n
        return retry(lambda: reader._send(payload, n), retrying=reader.retrying)

    def wait(self) -> list[Any]:
        if not self.n:
            return []
        conn, self.conn = self.conn, None
        if conn is None:  # the send failed: send again, with retries
            return self._again()
        pool = self.reader.client.connection_pool
        try:
            return self.reader._receive(conn, self.n)
        except (RedisConnectionError, RedisTimeoutError, OSError):
            conn.disconnect()
            return self._again()
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
