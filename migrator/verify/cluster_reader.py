"""verify's reads on a Redis Cluster: the same Reader interface, routed per slot.

A pipeline of reads is split per primary like migrate's writes (``cluster.Router``). The
reads that name several keys are made single-key, since their keys may live in different
slots: an ``MGET`` becomes one ``GET`` per key (a key of another type reads as nil, as in
MGET), and the one-``EVAL``-per-batch HGETALL script is not used (``scripting = False``:
one HGETALL per row). SCAN walks every primary (``target.keys.scan_keys``); DBSIZE is
redis-py's sum over the primaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.cluster import RedisCluster
from redis.exceptions import ResponseError

from migrator.retry import Retrying
from migrator.store.cluster import Router
from migrator.store.sink import Client, retry
from migrator.verify.keys import Pending, Reader

Command = tuple[bytes, ...]


class ClusterReader(Reader):
    def __init__(self, client: RedisCluster, retrying: Retrying | None = None) -> None:
        super().__init__(client, retrying)  # type: ignore[arg-type]
        self.cluster = client
        self.router = Router(client)
        self.scripting = False
        self.packed = False

    def read(self, commands: Sequence[Command]) -> list[Any]:
        if not commands:
            return []
        flat: list[Command] = []
        shape: list[int] = []  # keys of a split MGET, or 0 for a command sent as it is
        for cmd in commands:
            if cmd[0].upper() == b"MGET":
                shape.append(len(cmd) - 1)
                flat.extend((b"GET", k) for k in cmd[1:])
            else:
                shape.append(0)
                flat.append(cmd)
        replies = retry(
            lambda: self.router.send(flat), what="the Redis Cluster", retrying=self.retrying
        )
        out: list[Any] = []
        at = 0
        for n in shape:
            if n:
                out.append([None if isinstance(r, ResponseError) else r
                            for r in replies[at : at + n]])  # fmt: skip
                at += n
            else:
                out.append(replies[at])
                at += 1
        return out

    def send(self, commands: Sequence[Command]) -> Pending:
        """Read when the replies are wanted (a Pending without a connection reads them)."""
        return Pending(self, len(commands), None, commands=commands)


def reader_for(client: Client, retrying: Retrying | None = None) -> Reader:
    """verify's Reader for this target, retrying as ``retrying`` says."""
    if isinstance(client, RedisCluster):
        return ClusterReader(client, retrying)
    return Reader(client, retrying)
