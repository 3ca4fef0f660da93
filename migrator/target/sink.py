"""Redis: where planned commands go. RedisSink sends them in pipelines of packed protocol;
RecordingSink keeps them (dry-run); resp() turns them into the bytes redis-cli --pipe reads."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from migrator.errors import ConnectError, MigratorError, TargetError
from migrator.plan.resp import resp
from migrator.urls import mask_target

Command = tuple[bytes, ...]
T = TypeVar("T")
#: a target's client: one server, or a Redis Cluster (migrator/cluster.py routes per slot)
Client = redis.Redis | redis.RedisCluster


class Sink(Protocol):
    """Where a table's planned commands go, one batch at a time: Redis, a list, a RESP file."""

    def write(self, commands: Sequence[Command]) -> None: ...


def connect(url: str, *, timeout: float = 10.0) -> redis.Redis:
    """A checked Redis client; failures become ConnectError without the password."""
    try:
        client = redis.Redis.from_url(
            url, socket_connect_timeout=timeout, socket_timeout=max(timeout, 60.0)
        )
    except ValueError as e:
        raise MigratorError(
            f"not a Redis URL: {mask_target(url)} ({e})",
            "write it as redis://[:password@]host:6379/0",
        ) from None
    try:
        client.ping()
    except redis.AuthenticationError:
        raise ConnectError(
            f"Redis at {mask_target(url)} refused the password",
            "check the password in the target URL",
        ) from None
    except redis.ResponseError as e:
        raise ConnectError(f"Redis at {mask_target(url)} refused us: {e}") from None
    except (RedisConnectionError, RedisTimeoutError, OSError) as e:
        raise ConnectError(
            f"cannot reach Redis at {mask_target(url)}: {str(e).splitlines()[0]}",
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
                if isinstance(reply, list) and cmd[0] == b"EXEC":  # errors of queued commands
                    reply = next((r for r in reply if isinstance(r, Exception)), reply)
                if isinstance(reply, Exception) and error is None:
                    error = (cmd, reply)
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
        if error is not None:
            raise refused(*error)

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


class BackgroundWriter:
    """Batches sent from a background thread, so reading MySQL and planning overlap with
    Redis' work. A batch's checkpoint command goes out with the next batch, once this batch
    was acknowledged without error; ``close`` returns the one not yet sent. Subclasses say
    how one batch (with the previous checkpoint, if any) is delivered."""

    thread_name = "redis-writer"

    def __init__(self, depth: int = 2) -> None:
        self.queue: queue.Queue[tuple[Any, int, Command | None] | None] = queue.Queue(depth)
        self.pending: Command | None = None  # checkpoint of the last acknowledged batch
        self.commands_sent = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self.thread.start()

    def put(self, payload: Any, count: int, checkpoint: Command | None = None) -> None:
        """Queue a batch (blocks while ``depth`` batches wait); raises a writer error."""
        while True:
            self._check()
            try:
                self.queue.put((payload, count, checkpoint), timeout=0.5)
                return
            except queue.Full:
                continue

    def close(self) -> Command | None:
        """Wait for every batch; returns the checkpoint command not yet sent (or None)."""
        while self.thread.is_alive():
            try:
                self.queue.put(None, timeout=0.5)
                break
            except queue.Full:
                continue
        self.thread.join()
        self._check()
        return self.pending

    def _check(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def _run(self) -> None:
        try:
            while (item := self.queue.get()) is not None:
                payload, count, checkpoint = item
                self._deliver(payload, count, self.pending)
                self.commands_sent += count + (self.pending is not None)
                self.pending = checkpoint
        except BaseException as e:  # handed to the producer at its next put/close
            self.error = e
            while True:  # drain, so a blocked put() wakes up and sees the error
                try:
                    self.queue.get_nowait()
                except queue.Empty:
                    break

    def _deliver(self, payload: Any, count: int, pending: Command | None) -> None:
        raise NotImplementedError


class PackedWriter(BackgroundWriter):
    """The hot path's sink for one server: batches already packed as RESP
    (``TablePlan.pack``). Every command on this path (HSET, SADD, ZADD, SET) has a one-line
    reply, so replies are counted by line and only an error line (``-...``) is looked at."""

    def __init__(self, client: redis.Redis, depth: int = 2) -> None:
        self.client = client
        super().__init__(depth)

    @staticmethod
    def pack(plan: Any, rows: Sequence[Any]) -> tuple[bytes, int, Any]:
        """A batch for ``put``: ``plan.pack(rows)`` (a ``TablePlan``), the hot path's bytes."""
        return plan.pack(rows)

    def _deliver(self, payload: bytes, count: int, pending: Command | None) -> None:
        if pending is not None:
            payload, count = resp([pending]) + payload, count + 1
        retry(lambda: self._send(payload, count))

    def _send(self, payload: bytes, count: int) -> None:
        pool = self.client.connection_pool
        conn = pool.get_connection()
        try:
            if conn._sock is None:
                conn.connect()
            sock: Any = conn._sock  # redis-py's own reader stays idle: we read every reply
            sock.sendall(payload)
            replies = bytearray()
            lines = 0
            while lines < count:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise RedisConnectionError("connection closed by Redis")
                tail = replies[-1:]
                replies += chunk
                lines += (tail + chunk).count(b"\r\n")
        except OSError as e:  # socket errors and timeouts: transient, retried by the caller
            conn.disconnect()
            raise RedisConnectionError(str(e)) from None
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
        if replies[:1] == b"-" or b"\n-" in replies:
            _refused(payload, replies)


def refused(cmd: Command, error: object) -> TargetError:
    """The error for a command Redis refused: the command, its key, Redis' message, and a
    hint where a key of another type is in the way."""
    message = str(error)
    key = cmd[1].decode("utf-8", "replace") if len(cmd) > 1 else ""
    return TargetError(
        f"Redis refused {cmd[0].decode()} {key}: {message}",
        "a key of another type may be in the way: clear it, or use an empty database"
        if "WRONGTYPE" in message
        else None,
    )


def _refused(payload: bytes, replies: bytes | bytearray) -> None:
    """Raise TargetError naming the first command Redis refused."""
    lines = bytes(replies).split(b"\r\n")
    n = next(i for i, line in enumerate(lines) if line[:1] == b"-")
    raise refused(_nth_command(payload, n), lines[n][1:].decode("utf-8", "replace"))


def _nth_command(payload: bytes, n: int) -> Command:
    """The n-th command of a RESP payload (error reports only, so simple beats fast)."""
    pos = 0
    for i in range(n + 1):
        end = payload.index(b"\r\n", pos)
        argc = int(payload[pos + 1 : end])
        pos = end + 2
        args = []
        for _ in range(argc):
            end = payload.index(b"\r\n", pos)
            size = int(payload[pos + 1 : end])
            args.append(payload[end + 2 : end + 2 + size])
            pos = end + 2 + size + 2
        if i == n:
            return tuple(args)
    raise AssertionError("unreachable")
