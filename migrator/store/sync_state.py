"""sync's state in Redis, and the atomic write of each group of source transactions.

``migrator:<mapping>:sync`` is a HASH: the binary-log position after the last applied
transaction (``file``, ``pos``, ``gtid``), the source it belongs to (``source``: host, port and
database, never a password) and when the snapshot was loaded (``loaded_at``). It is written in
the same MULTI/EXEC as the changes it follows, so Redis never holds changes without their
position or a position without its changes: after a crash or ``kill -9``, sync resumes
exactly after the last applied transaction.

**The run marker** (``@marker``, as migrate's checkpoint has, store/guard.py): a load starts
by writing a random token into the hash, before anything else. A position is only ever
written while the hash still holds that token: on one server the group's MULTI/EXEC is
preceded, on the same connection, by ``WATCH`` of the hash and ``HGET`` of the marker (a
marker that is gone refuses the group; a ``FLUSHDB`` between the two makes ``EXEC`` fail),
and the position itself is a script that refuses (``-MIGRATORLOST``) when the marker differs
(on a Cluster, where it goes after its commands, that script is the check). So a target that
lost the data (restarted empty, flushed, failed over to a replica without the marker) never
gets a position again without a new load, and a position is trusted only with its marker.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import redis

from migrator.plan.resp import resp
from migrator.retry import Retrying
from migrator.store.cluster import is_cluster
from migrator.store.cluster_sink import sink_for
from migrator.store.guard import LOST_REPLY, MARKER, lost, new_token
from migrator.store.sink import Command, read_counted, refused, retry

#: KEYS[1] the state hash; ARGV[1] the marker, then field, value pairs: HSET only while the
#: hash holds the marker
POSITION_SCRIPT = (
    b"if redis.call('HGET', KEYS[1], '@marker') ~= ARGV[1] then "
    b"return redis.error_reply('" + LOST_REPLY.encode() + b" the run marker is gone') end "
    b"return redis.call('HSET', KEYS[1], unpack(ARGV, 2))"
)
GONE = "its run marker is gone (restarted empty, flushed, or failed over to a replica without it)"


def state_key(mapping_name: str, shard: str = "") -> bytes:
    """``migrator:<m>:sync``; a shard's of a sharded source (docs/sharding.md#sync):
    ``migrator:<m>:sync:<shard>``."""
    return f"migrator:{mapping_name}:sync{':' + shard if shard else ''}".encode()


# raise a counter to a value, never lower it (Tab:id = MAX(pk), as migrate sets it)
RAISE_SCRIPT = (
    b"local c = tonumber(redis.call('GET', KEYS[1]) or '-1') "
    b"if c == nil or c < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end "
    b"return 1"
)


def raise_counter(key: bytes, value: int) -> Command:
    return (b"EVAL", RAISE_SCRIPT, b"1", key, b"%d" % value)


class SyncState:
    def __init__(self, client: redis.Redis, mapping_name: str, shard: str = "") -> None:
        self.client = client
        self.key = state_key(mapping_name, shard)
        self.token: str | None = None  # the marker of the load this run follows

    def load(self) -> dict[str, str]:
        raw = self.client.hgetall(self.key)
        return {_text(k): _text(v) for k, v in raw.items()}

    def clear(self) -> None:
        self.client.delete(self.key)

    def begin(self) -> str:
        """A new load: the hash holds only a new marker (no position) from now on."""
        token = new_token()
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self.key)
        pipe.hset(self.key, MARKER, token)
        pipe.execute()
        self.token = token
        return token

    def trusted(self, stored: dict[str, str]) -> bool:
        """Whether a stored position can be followed from: it has its load's marker (a hash
        without one was re-created after a loss, or written by an older migrator)."""
        if not stored.get("file") or not stored.get(MARKER):
            return False
        self.token = stored[MARKER]
        return True

    def holds_marker(self) -> bool:
        return self.token is not None and _marker(self.client.hget(self.key, MARKER)) == self.token

    def command(self, fields: dict[str, str]) -> Command:
        """The position write: a script that refuses when the marker is gone."""
        assert self.token is not None, "begin() or trusted() first"
        args: list[bytes] = [b"EVAL", POSITION_SCRIPT, b"1", self.key, self.token.encode()]
        for k, v in fields.items():
            args += (k.encode(), v.encode())
        return tuple(args)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def _marker(v: Any) -> str | None:
    return None if v is None else _text(v)


def apply_group(
    client: Any,
    commands: Sequence[Command],
    position: Command,
    state: SyncState | None = None,
    retrying: Retrying | None = None,
    once: dict[str, str] | None = None,
) -> None:
    """A group of whole source transactions and the position after it. One server: one
    MULTI/EXEC, so Redis never holds one without the other; with ``state``, only while the
    hash holds its marker (else ``TargetLost`` and nothing is written). A Redis Cluster cannot
    span slots in a transaction, so there the commands go first (per node, in order;
    latest-list rebuilds in a MULTI of their own) and the position only once all were
    acknowledged: a crash in between replays the group from the previous position, which
    converges to the same state (see ``write_atomic``)."""
    if is_cluster(client):
        sink = sink_for(client, retrying)
        sink.write(commands)
        sink.write([position])
    else:
        write_atomic(client, [*commands, position], state, retrying, once)


def write_atomic(
    client: redis.Redis,
    commands: Sequence[Command],
    state: SyncState | None = None,
    retrying: Retrying | None = None,
    once: dict[str, str] | None = None,
) -> None:
    """Send ``commands`` as one MULTI/EXEC and check every reply (errors of queued commands
    included); with ``state``, after ``WATCH`` of its hash and a check of its marker on the
    same connection (see the module docstring). Retried on a dropped connection: a group
    replayed after it was applied converges to the same state (every command sets a key,
    field or membership to the value the after-images give it; counters only rise), so a
    retry is harmless — except for appends (change streams' XADD): with ``once``, fields of
    the state hash and the values this write gives them (a group: the position, file and
    offset, it ends at; an online snapshot's chunk: the snapshots' progress), the commands are
    sent only while the stored fields are not those values yet, checked after ``WATCH`` on the
    same connection (so a write whose EXEC was applied but whose reply was lost is not
    applied twice)."""
    if commands:
        payload = b"*1\r\n$5\r\nMULTI\r\n" + resp(commands) + b"*1\r\n$4\r\nEXEC\r\n"
        retry(lambda: _send(client, payload, commands, state, once), retrying=retrying)


#: EXEC's whole reply when a watched key changed: the null array of RESP2 (``*-1``) or the
#: null of RESP3 (``_``), which redis-py 8 speaks by default
ABORTED = (b"\r\n*-1\r\n", b"\r\n_\r\n")


def _send(
    client: redis.Redis,
    payload: bytes,
    commands: Sequence[Command],
    state: SyncState | None,
    once: dict[str, str] | None = None,
) -> None:
    """The hot path: the group on a connection of the pool, after ``_watch`` with ``state``
    (nothing sent when ``once`` is the stored position already)."""
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        if state is not None and not _watch(conn, state, once):
            conn.send_command("UNWATCH")
            conn.read_response()
            return
        exec_group(conn, payload, commands)
    finally:
        pool.release(conn)


def exec_group(conn: Any, payload: bytes, commands: Sequence[Command]) -> None:
    """Send the MULTI/EXEC ``payload`` of ``commands`` on ``conn`` and check the replies. Every
    reply is one line (``+OK``, ``+QUEUED``, ``*n``, integers, errors) but an XADD's inside
    EXEC, its entry's ID (``$15``, the ID: two lines), so they are counted by line and only
    looked at when one is an error: 2n + 2 lines and one more per XADD, or n + 2 when EXEC
    answers ``-EXECABORT`` or, when a watched key changed, a null (``ABORTED``: then nothing
    more comes, so the count must not wait for more — it would wait for the socket's
    timeout). An XADD refused inside EXEC answers one line: with an error among the replies
    they are counted as replies (``_ends``). A count short of the replies would leave the
    rest on the connection, read as the next command's reply."""
    n = len(commands)
    ids = list(map(itemgetter(0), commands)).count(b"XADD")  # C loops: the hot path
    replies = read_counted(
        conn,
        payload,
        2 * n + 2 + ids,
        lambda got, r: (
            got >= n + 2
            and (
                b"-EXECABORT" in r
                or (got == n + 2 and r.endswith(ABORTED))
                or (ids > 0 and got >= 2 * n + 2 and b"\n-" in r and _ends(r, n + 2) is not None)
            )
        ),
    )
    if replies.count(b"\r\n") == n + 2 and replies.endswith(ABORTED):
        raise lost(GONE)  # the hash changed between WATCH and EXEC: flushed, or replaced
    if replies[:1] == b"-" or b"\n-" in replies:
        raise _first_error(bytes(replies), commands)


def _end(buf: bytes | bytearray, i: int) -> int | None:
    """Where the RESP reply that starts at ``i`` ends, or None when ``buf`` has not all of it."""
    line = buf.find(b"\r\n", i)
    if line < 0:
        return None
    kind, after = buf[i : i + 1], line + 2
    if kind in (b"$", b"=", b"!"):  # blob: its length, then its bytes (-1: a null)
        size = int(buf[i + 1 : line])
        stop = after if size < 0 else after + size + 2
        return stop if stop <= len(buf) else None
    if kind in (b"*", b"%", b"~", b">", b"|"):  # aggregates: their elements (a map's: pairs)
        count = int(buf[i + 1 : line]) * (2 if kind in (b"%", b"|") else 1)
        for _ in range(max(count, 0)):
            end = _end(buf, after)
            if end is None:
                return None
            after = end
    return after


def _ends(buf: bytes | bytearray, count: int) -> list[int] | None:
    """The starts of the first ``count`` replies in ``buf`` and the end of the last, or None
    when they have not all arrived."""
    at = [0]
    for _ in range(count):
        end = _end(buf, at[-1])
        if end is None:
            return None
        at.append(end)
    return at


def _watch(conn: Any, state: SyncState, once: dict[str, str] | None = None) -> bool:
    """``WATCH`` the state hash and check its marker, on the connection the group goes on;
    with ``once``, False when the stored fields hold its values already (the write is in: a
    retry after its EXEC's reply was lost)."""
    try:
        if conn._sock is None:
            conn.connect()
        conn.send_command("WATCH", state.key)
        conn.send_command("HGET", state.key, MARKER)
        if once is not None:
            conn.send_command("HMGET", state.key, *once)
        conn.read_response()
        marker = conn.read_response()
        stored = [_marker(v) for v in conn.read_response()] if once is not None else None
    except BaseException:
        conn.disconnect()
        raise
    if state.token is None or _marker(marker) != state.token:
        conn.disconnect()  # drops the WATCH with it
        raise lost(GONE)
    return once is None or stored != list(once.values())


def _first_error(replies: bytes, commands: Sequence[Command]) -> Exception:
    """The first refused command of a MULTI/EXEC (MULTI's, a queued one's, EXEC's or one of
    EXEC's elements), counted by replies (an XADD's ID is two lines)."""
    n = len(commands)
    at = _ends(replies, n + 2)
    assert at is not None, "the replies were read whole"
    for i in range(n + 1):
        if replies[at[i] : at[i] + 1] == b"-":  # MULTI, or a command refused when queued
            return _refused(replies, at[i], (b"MULTI",) if i == 0 else commands[i - 1])
    start = at[n + 1]
    if replies[start : start + 1] == b"-":
        return _refused(replies, start, (b"EXEC",))
    element = replies.index(b"\r\n", start) + 2
    for command in commands:  # EXEC's array: a reply per command
        if replies[element : element + 1] == b"-":
            return _refused(replies, element, command)
        end = _end(replies, element)
        assert end is not None
        element = end
    raise AssertionError("an error reply was found but no refused command")


def _refused(replies: bytes, at: int, command: Command) -> Exception:
    line = replies[at + 1 : replies.index(b"\r\n", at)]
    return refused(command, line.decode("utf-8", "replace"))
