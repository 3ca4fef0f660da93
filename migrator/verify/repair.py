"""``verify --fix``: the writes that make Redis match MySQL, and a record of what changed.

Each difference the verify pass finds comes with the commands that repair it, written from
the source rows of the same snapshot: a missing or wrong row is written whole (a key of
another type is deleted first; a coalesced one only while it still is of another type), a
wrong field set, an extra field removed (HDEL), a missing unique entry or member added, a
foreign one removed (HDEL/SREM/ZREM), a stale key removed (UNLINK), a counter set, a latest
list rebuilt in a transaction. Repairs are sent a batch at a time (``flush``) through
migrate's sinks, so a Redis Cluster is routed per slot; every command names one key. A
source row pointing at a parent that the source itself lacks (a dangling reference) is not
Redis' to repair: it is left, and reported again.
"""

from __future__ import annotations

from collections.abc import Sequence

from migrator.retry import Retrying
from migrator.store.cluster_sink import sink_for
from migrator.store.sink import Client
from migrator.verify.report import TableRepair

Command = tuple[bytes, ...]
#: repairs sent at once at most (a batch with many differences is sent in parts)
FLUSH_AT = 5000
#: delete KEYS[1] unless it already is of type ARGV[1]: checks that run side by side (verify
#: --dask's chunks) may each meet the key of another type, and the first one's rebuilt key
#: must not be deleted again by the next
RETYPE = (
    b"if redis.call('TYPE', KEYS[1])['ok'] ~= ARGV[1] then redis.call('DEL', KEYS[1]) end return 0"
)


class Repairer:
    """Collects one table's repair commands and sends them, a batch at a time."""

    def __init__(self, client: Client, table: str, retrying: Retrying | None = None) -> None:
        self.sink = sink_for(client, retrying)
        self.done = TableRepair(table)
        self.pending: list[Command] = []
        self.retyped: set[bytes] = set()  # coalesced keys of another type, deleted once

    def repair(
        self, kind: str, key: bytes, fieldname: object, commands: Sequence[Command], n: int = 1
    ) -> None:
        if not commands:
            return
        self.done.add(kind, key, fieldname, n)
        self.pending.extend(commands)
        if len(self.pending) >= FLUSH_AT:
            self.flush()

    def retype(self, key: bytes, kind: bytes) -> list[Command]:
        """Delete ``key`` unless it is of type ``kind`` (``RETYPE``), the first time a coalesced
        key of another type is met, then nothing: later batches only add their members to
        the rebuilt key."""
        if key in self.retyped:
            return []
        self.retyped.add(key)
        return [(b"EVAL", RETYPE, b"1", key, kind)]

    def flush(self) -> None:
        commands, self.pending = self.pending, []
        if commands:
            self.sink.write(commands)
            self.done.commands += len(commands)
