"""Redis: where planned commands go. RedisSink sends them in pipelines of packed protocol;
RecordingSink keeps them (dry-run); resp() turns them into the bytes redis-cli --pipe reads."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from migrator.errors import ConnectError, TargetError

Command = tuple[bytes, ...]
T = TypeVar("T")


def resp(commands: Iterable[Command]) -> bytes:
    """The Redis protocol (RESP2) for commands, as redis-cli --pipe expects it."""
    out = bytearray()
    for cmd in commands:
        out += b"*%d\r\n" % len(cmd)
        for arg in cmd:
            out += b"$%d\r\n%b\r\n" % (len(arg), arg)
    return bytes(out)


def mask(url: str) -> str:
    """A Redis URL without its password."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def connect(url: str, *, timeout: float = 10.0) -> redis.Redis:
    """A checked Redis client; failures become ConnectError without the password."""
    try:
        client = redis.Redis.from_url(
            url, socket_connect_timeout=timeout, socket_timeout=max(timeout, 60.0)
        )
    except ValueError as e:
        raise ConnectError(
            f"not a Redis URL: {mask(url)} ({e})", "write it as redis://[:password@]host:6379/0"
        ) from None
    try:
        client.ping()
    except redis.AuthenticationError:
        raise ConnectError(
            f"Redis at {mask(url)} refused the password", "check the password in the target URL"
        ) from None
    except redis.ResponseError as e:
        raise ConnectError(f"Redis at {mask(url)} refused us: {e}") from None
    except (RedisConnectionError, RedisTimeoutError, OSError) as e:
        raise ConnectError(
            f"cannot reach Redis at {mask(url)}: {str(e).splitlines()[0]}",
            "is redis-server running, and the host/port right?",
        ) from None
    return client


def retry(fn: Callable[[], T], *, attempts: int = 5, what: str = "Redis") -> T:
    """Run ``fn``, retrying only transient failures (dropped connections, timeouts)."""
    delay = 0.2
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except (RedisConnectionError, RedisTimeoutError) as e:
            if attempt == attempts:
                raise ConnectError(f"lost the connection to {what}: {e}") from None
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
    raise AssertionError("unreachable")


class RedisSink:
    """Sends each batch as one packed pipeline (no MULTI) and checks every reply."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.commands_sent = 0

    def write(self, commands: Sequence[Command]) -> None:
        """Send a batch and wait for all of its replies. Idempotent writes, so a retry after a
        dropped connection replays the batch harmlessly."""
        if not commands:
            return
        payload = resp(commands)
        retry(lambda: self._send(payload, commands))
        self.commands_sent += len(commands)

    def _send(self, payload: bytes, commands: Sequence[Command]) -> None:
        pool = self.client.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_packed_command([payload], check_health=False)
            error: tuple[Command, Exception] | None = None
            for cmd in commands:
                try:
                    reply = conn.read_response()
                except ResponseError as e:
                    reply = e
                if isinstance(reply, Exception) and error is None:
                    error = (cmd, reply)
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
        if error is not None:
            cmd, exc = error
            key = cmd[1].decode("utf-8", "replace") if len(cmd) > 1 else ""
            raise TargetError(
                f"Redis refused {cmd[0].decode()} {key}: {exc}",
                "a key of another type may be in the way: clear it, or use an empty database"
                if "WRONGTYPE" in str(exc)
                else None,
            )

    def execute(self, *args: Any) -> Any:
        return retry(lambda: self.client.execute_command(*args))


class RecordingSink:
    """Keeps every command instead of sending it (dry-run, tests)."""

    def __init__(self) -> None:
        self.commands: list[Command] = []
        self.commands_sent = 0

    def write(self, commands: Sequence[Command]) -> None:
        self.commands.extend(commands)
        self.commands_sent += len(commands)
