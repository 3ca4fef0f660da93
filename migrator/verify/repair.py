"""``verify --fix``: the writes that make Redis match MySQL, and a record of what changed.

Each difference the verify pass finds comes with the commands that repair it, written from
the source rows of the same snapshot: a missing or wrong row is written whole (a key of
another type is deleted first), a wrong field set, an extra field removed (HDEL), a missing
unique entry or member added, a foreign one removed (HDEL/SREM/ZREM), a stale key removed
(UNLINK), a counter set, a latest list rebuilt in a transaction. Repairs are sent a batch at a
time (``flush``) through migrate's sinks, so a Redis Cluster is routed per slot; every command
names one key. A source row pointing at a parent that the source itself lacks (a dangling
reference) is not Redis' to repair: it is left, and reported again.
"""

from __future__ import annotations

from collections.abc import Sequence

from migrator.target.cluster_sink import sink_for
from migrator.target.sink import Client
from migrator.verify.report import TableRepair

Command = tuple[bytes, ...]
#: repairs sent at once at most (a batch with many differences is sent in parts)
FLUSH_AT = 5000


class Repairer:
    """Collects one table's repair commands and sends them, a batch at a time."""

    def __init__(self, client: Client, table: str) -> None:
        self.sink = sink_for(client)
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

    def retype(self, key: bytes) -> list[Command]:
        """``DEL key`` the first time a coalesced key of another type is met, then nothing:
        later batches only add their members to the rebuilt key."""
        if key in self.retyped:
            return []
        self.retyped.add(key)
        return [(b"DEL", key)]

    def flush(self) -> None:
        commands, self.pending = self.pending, []
        if commands:
            self.sink.write(commands)
            self.done.commands += len(commands)
