"""Verify of the row images a cascade's child keeps (plan/row_images.py): each row's image and
its membership in the SET of its foreign key's value, against what the MySQL row gives, a
batch at a time; then what Redis holds beyond them (images of rows MySQL no longer has,
members and SETs no row explains). ``--fix`` writes what differs and removes what is stale.
The encoded primary keys of the table's rows are held in memory until the end of the pass,
as for nested documents' rows (verify/nesting_side.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.plan.batch import Command, Row
from migrator.plan.keyspace import glob_escape
from migrator.plan.owners import Owners
from migrator.plan.row_images import RowImages
from migrator.verify import report as vr

Found = Callable[..., None]


class ImageCheck:
    """The row images of one table (``RowImages``), compared batch by batch; a sharded
    source's owner hash (plan/owners.py ``Owners``: one image per row, no SETs) likewise
    (verify/owners.py)."""

    def __init__(self, structure: RowImages | Owners, found: Found) -> None:
        self.s, self.found = structure, found
        self.fields: set[bytes] = set()  # every encoded primary key the rows explain
        self.remember = True  # (verify/owners.py finds the fields beyond them otherwise)
        self.present = 0  # of those, the images Redis holds
        self.members: dict[bytes, set[bytes]] = {}  # SET key -> the members the rows explain

    def reads(self, rows: Sequence[Row]) -> tuple[list[Command], Any]:
        """The reads that check ``rows``, and the context ``check`` needs with their replies."""
        images: dict[bytes, bytes] = {}
        sets: dict[bytes, list[bytes]] = {}
        for row in rows:
            for kind, key, sub, value in self.s.entries(row):
                if kind == "h":
                    images[sub] = value
                else:
                    sets.setdefault(key, []).append(sub)
        reads: list[Command] = [(b"HMGET", self.s.key, *images)] if images else []
        reads += [(b"SMISMEMBER", key, *members) for key, members in sets.items()]
        return reads, (images, sets)

    def rows(self, rows: Sequence[Row], read: Callable[[list[Command]], list[Any]]) -> None:
        """Check ``rows`` now: the rows a filter leaves out, whose images alone are kept."""
        reads, context = self.reads(rows)
        self.check(read(reads) if reads else [], context)

    def near(self, rows: Sequence[Row]) -> None:
        """Rows too close to their expiry to judge (verify/expiry.py): their images and
        members are explained, present or not."""
        for row in rows:
            for kind, key, sub, _ in self.s.entries(row):
                if kind == "h":
                    self.fields.add(sub)
                else:
                    self.members.setdefault(key, set()).add(sub)

    def check(self, replies: list[Any], context: Any) -> None:
        images, sets = context
        key = self.s.key
        if images:
            got, replies = replies[0], replies[1:]
            if self.remember:
                self.fields.update(images)
            for (pk, image), held in zip(images.items(), got):
                if held is None:
                    self.found(vr.MISSING_FIELD, key, pk, image, None, [(b"HSET", key, pk, image)])
                    continue
                self.present += 1
                if held != image:
                    self.found(vr.DIFFERENT_VALUE, key, pk, image, held,
                               [(b"HSET", key, pk, image)])  # fmt: skip
        for (set_key, members), there in zip(sets.items(), replies):
            self.members.setdefault(set_key, set()).update(members)
            for m, ok in zip(members, there):
                if not ok:
                    self.found(vr.MISSING_FIELD, set_key, m, m, None, [(b"SADD", set_key, m)])

    def state(self) -> tuple[set[bytes], int, dict[bytes, set[bytes]]]:
        """What a chunk's pass found (verify --dask), for ``absorb`` where the table is
        concluded."""
        return self.fields, self.present, self.members

    def absorb(self, state: tuple[set[bytes], int, dict[bytes, set[bytes]]]) -> None:
        fields, present, members = state
        self.fields |= fields
        self.present += present
        for key, held in members.items():
            self.members.setdefault(key, set()).update(held)

    def rest(self, client: Any) -> None:
        """After every row: images and members no row explains (stale), and SETs of values no
        row holds."""
        key = self.s.key
        if client.hlen(key) > self.present:
            for pk, _ in client.hscan_iter(key, count=1000):
                if pk not in self.fields:
                    self.found(vr.EXTRA_FIELD, key, pk, None, None, [(b"HDEL", key, pk)])
        for prefix, _ in self.s.by:
            for set_key in client.scan_iter(match=glob_escape(prefix) + "*", count=1000):
                mine = self.members.get(set_key)
                if mine is None:
                    self.found(vr.STALE, set_key, None, None, None, [(b"DEL", set_key)])
                elif client.scard(set_key) > len(mine):
                    for m in client.sscan_iter(set_key, count=1000):
                        if m not in mine:
                            self.found(vr.EXTRA_FIELD, set_key, m, None, None,
                                       [(b"SREM", set_key, m)])  # fmt: skip
