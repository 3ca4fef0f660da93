"""Redis: where planned commands go. RedisSink sends them in pipelines of packed protocol;
RecordingSink keeps them (dry-run); resp() turns them into the bytes redis-cli --pipe reads."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from migrator.errors import MigratorError, TargetError, TargetFull
from migrator.plan.resp import resp
from migrator.retry import Retrying
from migrator.store.failures import connect_failure, refused_login, refused_permission
from migrator.store.guard import LOST_REPLY, lost
from migrator.store.target_url import check_target_url
from migrator.urls import mask, readable

Command = tuple[bytes, ...]
T = TypeVar("T")
#: a target's client: one server, or a Redis Cluster (store/cluster.py routes per slot)
Client = redis.Redis | redis.RedisCluster


class Sink(Protocol):
    """Where a table's planned commands go, one batch at a time: Redis, a list, a RESP file."""

    def write(self, commands: Sequence[Command]) -> None: ...


def _loading(e: BaseException) -> str | None:
    return "loading its data (LOADING)" if isinstance(e, redis.BusyLoadingError) else None


def connect(url: str, *, timeout: float = 10.0, retrying: Retrying | None = None) -> redis.Redis:
    """A checked Redis client; failures become ConnectError without the password. A server
    still loading its data is waited for; with ``retrying`` (a worker joining a run), so is
    one that refuses connections or drops them (restarting)."""
    url = readable(url, "target")
    check_target_url(url)
    try:
        client = redis.Redis.from_url(
            url, socket_connect_timeout=timeout, socket_timeout=max(timeout, 60.0)
        )
    except ValueError:
        raise MigratorError(
            f"not a Redis URL: {mask(url)}",
            "write it as redis://[user:password@]host:6379/0 (rediss:// for TLS); characters "
            "such as @ : / ? # in a password are written %40 %3A %2F %3F %23",
        ) from None
    try:  # a server still loading its data is waited for (bounded)
        if retrying is None:
            Retrying().call(client.ping, _loading, f"Redis at {mask(url)}")
        else:
            retrying.call(client.ping, transient, f"connecting to Redis at {mask(url)}")
    except redis.AuthenticationError as e:
        raise refused_login(url, e) from None
    except (redis.RedisError, OSError) as e:
        raise connect_failure(url, e) from None
    return client


#: error replies that say "not now" rather than "no": retried like a dropped connection
TRANSIENT_REPLIES = ("LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN")


#: error replies of a condition of Redis itself, not of the data: what to fix (TargetFull)
REDIS_CONDITIONS = {
    "OOM": "Redis is at its maxmemory: raise it (CONFIG SET maxmemory ...; and in the config "
    "file), free memory, or use a database with room",
    "MISCONF": "Redis cannot save its snapshot to disk and refuses writes meanwhile: see its "
    "log (disk full? permissions?)",
    "READONLY": "the target is a read-only replica: point the target URL at the primary",
}

#: error replies that decide a whole batch's fate, ahead of the first error
URGENT = (LOST_REPLY.encode(), *(r.encode() for r in TRANSIENT_REPLIES))


class TransientReply(RedisConnectionError):
    """Redis answered an error that passes (``LOADING``, ``BUSY``, ``TRYAGAIN``...), or a
    cluster kept redirecting: the batch is sent again after a pause."""


def transient(exc: BaseException) -> str | None:
    """Why a failure of the target is worth a retry (``migrator.retry``), or None."""
    if isinstance(exc, TransientReply):
        return str(exc).splitlines()[0]
    if isinstance(exc, redis.BusyLoadingError):
        return "loading its data (LOADING)"
    if isinstance(exc, RedisTimeoutError):
        return "timed out"
    if isinstance(exc, RedisConnectionError | OSError):
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"connection lost ({first})"
    if isinstance(exc, ResponseError) and str(exc).startswith(TRANSIENT_REPLIES):
        return f"answered {str(exc).splitlines()[0]}"
    return None


def retry(fn: Callable[[], T], *, what: str = "Redis", retrying: Retrying | None = None) -> T:
    """Run ``fn``, retrying transient failures (dropped connections, timeouts, LOADING...)
    as ``retrying`` says (default: the default policy, silently); then ConnectError."""
    return (retrying or Retrying()).call(fn, transient, what)


class RedisSink:
    """Sends each batch as one packed pipeline (no MULTI) and checks every reply."""

    def __init__(self, client: redis.Redis, retrying: Retrying | None = None) -> None:
        self.client = client
        self.retrying = retrying
        self.commands_sent = 0

    def write(self, commands: Sequence[Command]) -> None:
        """Send a batch and wait for all of its replies. Idempotent writes, so a retry after a
        dropped connection replays the batch harmlessly."""
        if not commands:
            return
        payload = resp(commands)
        retry(lambda: self._send(payload, commands), retrying=self.retrying)
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
                if isinstance(reply, Exception) and (
                    error is None or str(reply).encode().startswith(URGENT)
                ):
                    error = (cmd, reply)
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
        if error is not None:
            raise refused(*error)

    def execute(self, *args: Any) -> Any:
        return retry(lambda: self.client.execute_command(*args), retrying=self.retrying)


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

    def __init__(
        self, client: redis.Redis, depth: int = 2, retrying: Retrying | None = None
    ) -> None:
        self.client = client
        self.retrying = retrying
        super().__init__(depth)

    @staticmethod
    def pack(plan: Any, rows: Sequence[Any]) -> tuple[bytes, int, Any]:
        """A batch for ``put``: ``plan.pack(rows)`` (a ``TablePlan``), the hot path's bytes."""
        return plan.pack(rows)

    def _deliver(self, payload: bytes, count: int, pending: Command | None) -> None:
        if pending is not None:
            payload, count = resp([pending]) + payload, count + 1
        retry(lambda: self._send(payload, count), retrying=self.retrying)

    def _send(self, payload: bytes, count: int) -> None:
        replies = send_counted(self.client, payload, count)
        if replies[:1] == b"-" or b"\n-" in replies:
            _refused(payload, replies)


def send_counted(
    client: redis.Redis,
    payload: bytes,
    lines: int,
    done_early: Callable[[int, bytearray], bool] | None = None,
) -> bytearray:
    """Send RESP ``payload`` on one of the client's pooled connections and read the replies
    raw until ``lines`` reply lines have come (or ``done_early(lines so far, replies)``),
    for commands whose every reply is one line: the hot paths count lines and only look at
    replies when one is an error. Socket errors are RedisConnectionError (transient)."""
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        return read_counted(conn, payload, lines, done_early)
    finally:
        pool.release(conn)


def read_counted(
    conn: Any,
    payload: bytes,
    lines: int,
    done_early: Callable[[int, bytearray], bool] | None = None,
) -> bytearray:
    """``send_counted`` on a connection the caller holds (and releases)."""
    try:
        if conn._sock is None:
            conn.connect()
        sock: Any = conn._sock  # redis-py's own reader stays idle: we read every reply
        sock.sendall(payload)
        replies = bytearray()
        got = 0
        while got < lines:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RedisConnectionError("connection closed by Redis")
            tail = replies[-1:]
            replies += chunk
            got += (tail + chunk).count(b"\r\n")
            if done_early is not None and done_early(got, replies):
                break
    except OSError as e:  # socket errors and timeouts: transient, retried by the caller
        conn.disconnect()
        raise RedisConnectionError(str(e)) from None
    except BaseException:
        conn.disconnect()
        raise
    return replies


#: redis-py's classes for error replies whose code it strips from the message
_CODES = {"OutOfMemoryError": "OOM", "ReadOnlyError": "READONLY"}


def reply_text(error: object) -> str:
    """An error reply with its code first where the code decides what happens (``OOM``,
    ``READONLY``, ``LOADING``...): redis-py strips the code of the replies it has a class for
    (``OOM`` -> ``OutOfMemoryError``), so a refusal read through it lost its condition."""
    message = str(error)
    code = getattr(error, "status_code", None) or _CODES.get(type(error).__name__)
    known = code in REDIS_CONDITIONS or code in TRANSIENT_REPLIES
    if known and isinstance(code, str) and not message.startswith(code):
        return f"{code} {message}"
    return message


def refused(cmd: Command, error: object) -> MigratorError | TransientReply:
    """The error for a command Redis refused: the command, its key, Redis' message, and a
    hint where a key of another type is in the way. A refused checkpoint (the run marker is
    gone) is ``TargetLost``; a passing refusal (``LOADING``...) a ``TransientReply``."""
    message = reply_text(error)
    if message.startswith(LOST_REPLY):
        return lost("its run marker is gone (restarted empty, flushed, or an older snapshot)")
    if message.startswith(TRANSIENT_REPLIES):
        return TransientReply(f"answered {message.splitlines()[0]}")
    denied = refused_permission(message)
    if denied is not None:
        return denied
    key = cmd[1].decode("utf-8", "replace") if len(cmd) > 1 else ""
    if cmd[0].upper() == b"EVAL" and len(cmd) > 3:
        key = cmd[3].decode("utf-8", "replace")
    condition = next((h for word, h in REDIS_CONDITIONS.items() if message.startswith(word)), None)
    if condition is not None:
        return TargetFull(f"Redis refused {cmd[0].decode()} {key}: {message}", condition)
    return TargetError(
        f"Redis refused {cmd[0].decode()} {key}: {message}",
        "a key of another type may be in the way: clear it, or use an empty database"
        if "WRONGTYPE" in message
        else None,
    )


def _refused(payload: bytes, replies: bytes | bytearray) -> None:
    """Raise the error of the first command Redis refused (a lost marker or a passing
    refusal first: they decide what happens to the whole batch)."""
    lines = bytes(replies).split(b"\r\n")
    errors = [i for i, line in enumerate(lines) if line[:1] == b"-"]
    n = next((i for i in errors if lines[i][1:].startswith(URGENT)), errors[0])
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
