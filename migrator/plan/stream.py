"""The change-stream entry of one row change (docs/sync.md#change-streams): the XADD that
``sync`` puts in a group's MULTI/EXEC beside the data and the position (sync/apply.py).

The envelope, one entry per row change, its fields in this order:

* ``op``: ``insert``, ``update`` or ``delete``;
* ``table``: the source table;
* ``pk``: the primary key's values joined by the separator, as in the row key;
* ``pos``: the binary-log position after the change's transaction (``file:offset``), the
  position ``sync`` stores with it; ``gtid``: the GTID state there (absent when the server
  reports none);
* ``ts``: the transaction's commit time (Unix seconds, from the log);
* ``before.<field>`` (update, delete) and ``after.<field>`` (insert, update): the row's
  columns under their row-hash field names and written as the row hash writes them (the same
  values, ``formats:`` applied, NULL left out), the primary key's columns always among them.

The entry ID is Redis's (``*``): see docs/sync.md#change-streams for why.
"""

from __future__ import annotations

import time

from migrator.mapping.streams import Streams
from migrator.plan.batch import Command, Row
from migrator.plan.layout import TableLayout

INSERT, UPDATE, DELETE = b"insert", b"update", b"delete"


class ChangeStream:
    """One table's change stream: ``entry`` is the XADD of a row change, or None when the
    stream does not carry its operation."""

    def __init__(self, plan: TableLayout, streams: Streams) -> None:
        self.streams = streams
        self.key = streams.key.encode()
        self.table = plan.table.name.encode()
        pk = plan.resolved.primary_key
        if streams.columns == "keys":
            names: tuple[str, ...] = pk
        elif streams.columns == "all":
            names = (*pk, *plan.resolved.columns)
        else:
            names = (*pk, *streams.columns)
        names = tuple(dict.fromkeys(names))
        #: (before field, after field, position, format) per column of the images
        self.columns = [
            (b"before." + plan.field(c), b"after." + plan.field(c), plan.pos[c],
             plan.formatters.get(plan.pos[c]))
            for c in names
        ]  # fmt: skip
        self.pk = plan.pk_text
        self.ops = {op.encode() for op in streams.ops}
        head: list[bytes] = [b"XADD", self.key]
        if streams.maxlen is not None:
            head += [b"MAXLEN", b"~", b"%d" % streams.maxlen]
        self.maxage_ms = None if streams.maxage is None else int(streams.maxage * 1000)
        self.head = (*head, b"*")
        self.clock = time.time  # what maxage counts from: this machine's clock

    def entry(
        self, before: Row | None, after: Row | None, pos: bytes, gtid: bytes, ts: int
    ) -> Command | None:
        op = INSERT if before is None else DELETE if after is None else UPDATE
        if op not in self.ops:
            return None
        row = after if after is not None else before
        assert row is not None
        head = self.head
        if self.maxage_ms is not None:  # IDs are Redis's milliseconds: older ones go
            since = max(0, int(self.clock() * 1000) - self.maxage_ms)
            head = (*head[:-1], b"MINID", b"~", b"%d" % since, b"*")
        args = [*head, b"op", op, b"table", self.table, b"pk", self.pk(row) or b""]
        args += [b"pos", pos] + ([b"gtid", gtid] if gtid else []) + [b"ts", b"%d" % ts]
        for image, which in ((before, 0), (after, 1)):
            if image is None:
                continue
            for b, a, i, fmt in self.columns:
                v = image[i]
                if v is not None and fmt is not None:
                    v = fmt(v)  # None: no value (a zero date), left out as the hash does
                if v is not None:
                    args += (a if which else b, v)
        return tuple(args)


def streams_of(plans: dict[str, TableLayout]) -> dict[str, ChangeStream]:
    """The change streams of the tables that have one."""
    return {
        name: ChangeStream(plan, plan.table.streams)
        for name, plan in plans.items()
        if plan.table.streams is not None
    }
