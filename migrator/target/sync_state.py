"""sync's state in Redis, and the atomic write of each group of source transactions.

``migrator:<mapping>:sync`` is a HASH: the binary-log position after the last applied
transaction (``file``, ``pos``, ``gtid``), the source it belongs to (``source``: host, port and
database, never a password) and when the snapshot was loaded (``loaded_at``). It is written in
the same MULTI/EXEC as the changes it follows, so Redis never holds changes without their
position or a position without its changes: after a crash or ``kill -9``, sync resumes
exactly after the last applied transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from migrator.plan.resp import resp
from migrator.target.cluster import is_cluster
from migrator.target.cluster_sink import sink_for
from migrator.target.sink import Command, refused, retry, send_counted


def state_key(mapping_name: str) -> bytes:
    return f"migrator:{mapping_name}:sync".encode()


# raise a counter to a value, never lower it (Tab:id = MAX(pk), as migrate sets it)
RAISE_SCRIPT = (
    b"local c = tonumber(redis.call('GET', KEYS[1]) or '-1') "
    b"if c == nil or c < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end "
    b"return 1"
)


def raise_counter(key: bytes, value: int) -> Command:
    return (b"EVAL", RAISE_SCRIPT, b"1", key, b"%d" % value)


class SyncState:
    def __init__(self, client: redis.Redis, mapping_name: str) -> None:
        self.client = client
        self.key = state_key(mapping_name)

    def load(self) -> dict[str, str]:
        raw = self.client.hgetall(self.key)
        return {_text(k): _text(v) for k, v in raw.items()}

    def clear(self) -> None:
        self.client.delete(self.key)

    def command(self, fields: dict[str, str]) -> Command:
        args: list[bytes] = [b"HSET", self.key]
        for k, v in fields.items():
            args += (k.encode(), v.encode())
        return tuple(args)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def apply_group(client: Any, commands: Sequence[Command], position: Command) -> None:
    """A group of whole source transactions and the position after it. One server: one
    MULTI/EXEC, so Redis never holds one without the other. A Redis Cluster cannot span slots
    in a transaction, so there the commands go first (per node, in order; latest-list rebuilds
    in a MULTI of their own) and the position only once all were acknowledged: a crash in
    between replays the group from the previous position, which converges to the same state
    (see ``write_atomic``)."""
    if is_cluster(client):
        sink = sink_for(client)
        sink.write(commands)
        sink.write([position])
    else:
        write_atomic(client, [*commands, position])


def write_atomic(client: redis.Redis, commands: Sequence[Command]) -> None:
    """Send ``commands`` as one MULTI/EXEC and check every reply (errors of queued commands
    included). Retried on a dropped connection: a group replayed after it was applied
    converges to the same state (every command sets a key, field or membership to the value
    the after-images give it; counters only rise), so a retry is harmless."""
    if commands:
        payload = b"*1\r\n$5\r\nMULTI\r\n" + resp(commands) + b"*1\r\n$4\r\nEXEC\r\n"
        retry(lambda: _send(client, payload, commands))


def _send(client: redis.Redis, payload: bytes, commands: Sequence[Command]) -> None:
    """The hot path: every reply in a MULTI/EXEC of these commands is one line (``+OK``,
    ``+QUEUED``, ``*n``, integers, errors), so replies are counted by line and only looked at
    when one is an error: 2n + 2 lines, or n + 2 when EXEC answers ``-EXECABORT``."""
    n = len(commands)
    replies = send_counted(
        client, payload, 2 * n + 2, lambda got, r: got >= n + 2 and b"-EXECABORT" in r
    )
    if replies[:1] == b"-" or b"\n-" in replies:
        raise _first_error(bytes(replies), commands)


def _first_error(replies: bytes, commands: Sequence[Command]) -> Exception:
    n = len(commands)
    lines = replies.split(b"\r\n")
    i = next(i for i, line in enumerate(lines) if line[:1] == b"-")
    message = lines[i][1:].decode("utf-8", "replace")
    if 1 <= i <= n:  # refused when queued
        return refused(commands[i - 1], message)
    if i >= n + 2:  # refused inside EXEC
        return refused(commands[i - n - 2], message)
    return refused((b"MULTI",) if i == 0 else (b"EXEC",), message)
