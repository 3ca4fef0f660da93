"""The change-stream entry of one row change (docs/sync.md#change-streams): the XADD that
``sync`` puts in a group's MULTI/EXEC beside the data and the position (sync/apply.py).

The envelope, one entry per row change, its fields in this order:

* ``op``: ``insert``, ``update`` or ``delete``; with ``streams.snapshot``, ``snapshot`` for a
  row a load wrote, after one ``truncate`` per table as the load begins it (its rows are to be
  forgotten: the entries that follow give them again; no ``pk``, no image);
* ``table``: the source table;
* ``pk``: the primary key's values joined by the separator, as in the row key;
* ``shard``: with a sharded source (``sources:``), the shard whose binary log the change
  comes from (its ``pos`` and ``gtid`` are that log's); absent with one source;
* ``pos``: the binary-log position after the change's transaction (``file:offset``), the
  position ``sync`` stores with it; ``gtid``: the GTID state there (absent when the server
  reports none);
* ``ts``: the transaction's commit time (Unix seconds, from the log);
* ``before.<field>`` (update, delete) and ``after.<field>`` (insert, update): the row's
  columns under their row-hash field names and written as the row hash writes them (the same
  values, ``formats:`` applied, NULL left out), the primary key's columns always among them;
  with ``form: json`` instead one field per image, ``before`` and ``after``, each a JSON
  object of the same fields: every value a string of the row hash's text (binary strings in
  base64), a NULL ``null`` (``json_image``).

The entry ID is Redis's (``*``): see docs/sync.md#change-streams for why.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from datetime import datetime, timezone

from migrator.mapping.kinds import Kind
from migrator.mapping.streams import Streams
from migrator.plan.batch import Command, Row
from migrator.plan.layout import TableLayout
from migrator.plan.owners import CURRENT, UNION
from migrator.plan.resp import resp

INSERT, UPDATE, DELETE = b"insert", b"update", b"delete"
SNAPSHOT, TRUNCATE = b"snapshot", b"truncate"


def _json_text(v: bytes) -> str:
    return v.decode("utf-8", "replace")


def _json_binary(v: bytes) -> str:
    return base64.b64encode(v).decode()


class ChangeStream:
    """One table's change stream: ``entry`` is the XADD of a row change, or None when the
    stream does not carry its operation."""

    def __init__(self, plan: TableLayout, streams: Streams) -> None:
        self.streams = streams
        self.key = streams.key.encode()
        self.table = plan.table.name.encode()
        #: the shard of a sharded source whose changes these are (``shard`` field; "": none)
        self.shard = plan.resolved.shard
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
        #: form: json: (name, position, format, str of a value) per column of the images
        self.json = streams.form == "json"
        self.json_columns: list[tuple[str, int, Callable[[bytes], bytes | None] | None,
                                      Callable[[bytes], str]]] = [
            (plan.field(c).decode(), plan.pos[c], plan.formatters.get(plan.pos[c]),
             _json_binary if plan.resolved.schema.column(c).kind is Kind.BINARY else _json_text)
            for c in names
        ]  # fmt: skip
        self.snapshot = streams.snapshot
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
        return self._entry(op, before, after, pos, gtid, ts)

    def snapshot_entry(self, row: Row, pos: bytes, gtid: bytes, ts: int) -> Command:
        """The entry of a row the first load writes (``streams.snapshot``): op ``snapshot``,
        its after-image, ``pos`` the position the load's rows are as of."""
        return self._entry(SNAPSHOT, None, row, pos, gtid, ts)

    def truncate_entry(self, pos: bytes, gtid: bytes, ts: int) -> Command:
        """The entry a load appends before its ``snapshot`` entries of the table: forget the
        table's rows (the ones that follow give them again)."""
        args = [*self._head(), b"op", TRUNCATE, b"table", self.table, *self._shard(), b"pos", pos]
        return (*args, *([b"gtid", gtid] if gtid else []), b"ts", b"%d" % ts)

    def _shard(self) -> tuple[bytes, ...]:
        """The ``shard`` field: the table's shard (for the union, the one being read)."""
        shard = CURRENT.get() if self.shard == UNION else self.shard
        return (b"shard", shard.encode()) if shard else ()

    def _head(self) -> tuple[bytes, ...]:
        if self.maxage_ms is None:
            return self.head
        since = max(0, int(self.clock() * 1000) - self.maxage_ms)  # IDs are Redis's ms
        return (*self.head[:-1], b"MINID", b"~", b"%d" % since, b"*")

    def json_image(self, image: Row) -> bytes:
        """``form: json``: an image as one JSON object, its fields in the columns' order."""
        out: dict[str, str | None] = {}
        for name, i, fmt, text in self.json_columns:
            v = image[i]
            if v is not None and fmt is not None:
                v = fmt(v)
            out[name] = None if v is None else text(v)
        return json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()

    def _entry(
        self, op: bytes, before: Row | None, after: Row | None, pos: bytes, gtid: bytes, ts: int
    ) -> Command:
        row = after if after is not None else before
        assert row is not None
        args = [*self._head(), b"op", op, b"table", self.table, b"pk", self.pk(row) or b""]
        args += [*self._shard(), b"pos", pos, *([b"gtid", gtid] if gtid else []), b"ts", b"%d" % ts]
        if self.json:
            if before is not None:
                args += (b"before", self.json_image(before))
            if after is not None:
                args += (b"after", self.json_image(after))
            return tuple(args)
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


def with_entries(payload: bytes | list[Command], count: int,
                 entries: list[Command]) -> tuple[bytes | list[Command], int]:  # fmt: skip
    """A packed batch (RESP bytes, or a cluster writer's commands) with ``entries`` after it."""
    if not entries:
        return payload, count
    if isinstance(payload, bytes):
        return payload + resp(entries), count + len(entries)
    return [*payload, *entries], count + len(entries)


class SnapshotEntries:
    """The ``snapshot`` entries of the batches a load writes in one snapshot (migrate with one
    worker, sync's ``--consistent-load``): each row the plan writes, as of the snapshot's
    position (``at``: set, or changed when the snapshot is taken again)."""

    def __init__(self, stream: ChangeStream) -> None:
        self.stream = stream
        self.pos, self.gtid, self.ts = b"", b"", 0

    def at(self, file: str, pos: int, gtid: str | None, moment: str) -> None:
        self.pos, self.gtid = f"{file}:{pos}".encode(), (gtid or "").encode()
        self.ts = unix_seconds(moment)

    def truncate(self) -> Command:
        return self.stream.truncate_entry(self.pos, self.gtid, self.ts)

    def of(self, rows: list[Row]) -> list[Command]:
        entry, pos, gtid, ts = self.stream.snapshot_entry, self.pos, self.gtid, self.ts
        return [entry(row, pos, gtid, ts) for row in rows]


def snapshot_entries(plan: TableLayout) -> SnapshotEntries | None:
    """A table's ``SnapshotEntries`` when its stream takes the first load's rows."""
    streams = plan.table.streams
    if streams is None or not streams.snapshot:
        return None
    return SnapshotEntries(ChangeStream(plan, streams))


def snapshot_streams(plans: dict[str, TableLayout]) -> dict[str, ChangeStream]:
    """The change streams that take the first load's rows (``snapshot: true``)."""
    return {name: s for name, s in streams_of(plans).items() if s.snapshot}


def unix_seconds(moment: str) -> int:
    """A snapshot's moment (UTC ``YYYY-MM-DD HH:MM:SS[.ffffff]``, source/snapshot.py) as the
    ``ts`` of its entries."""
    return int(datetime.fromisoformat(moment).replace(tzinfo=timezone.utc).timestamp())


def streams_of(plans: dict[str, TableLayout]) -> dict[str, ChangeStream]:
    """The change streams of the tables that have one."""
    return {
        name: ChangeStream(plan, plan.table.streams)
        for name, plan in plans.items()
        if plan.table.streams is not None
    }
