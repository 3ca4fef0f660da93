"""Verify of the rows kept beside nested documents (plan/nesting_side.py): each row's image
and each parent's SET of children, rebuilt from MySQL in the pass's snapshot, against Redis;
then what Redis holds beyond them (images of rows MySQL no longer has, SETs of parents that
are gone). The SETs per value of a foreign key (``by_prefix``) gather the rows of every
page, and are compared at the end. ``--fix`` writes what differs and removes what is stale.
The keys of every row of the tree are held in memory until the end of the pass."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.plan.batch import Command
from migrator.plan.keyspace import glob_escape
from migrator.plan.nesting import Level
from migrator.plan.nesting_side import by_prefix, members_prefix, others, rows_key, walk
from migrator.verify import report as vr
from migrator.verify.keys import Reader

Found = Callable[..., None]


class SideCheck:
    """The side structure of one tree, compared a page of top rows at a time."""

    def __init__(self, top: Level, reader: Reader, found: Found) -> None:
        self.levels = walk(top)
        self.reader, self.found = reader, found
        self.fields: dict[bytes, set[bytes]] = {rows_key(lv): set() for lv in self.levels}
        self.sets: set[bytes] = set()
        self.present: dict[bytes, int] = dict.fromkeys(self.fields, 0)  # found in Redis
        self.heads = [by_prefix(lv, fk) for lv in self.levels for fk in others(lv)]
        self.by: dict[bytes, set[bytes]] = {}  # a SET per foreign-key value: every page's

    def page(self, cmds: Sequence[Command]) -> None:
        """Compare the side structure ``cmds`` (``side_commands``' writes) would write."""
        images: dict[bytes, dict[bytes, bytes]] = {}
        members: dict[bytes, set[bytes]] = {}
        for cmd in cmds:
            if cmd[0] == b"HSET":
                images.setdefault(cmd[1], {}).update(zip(cmd[2::2], cmd[3::2]))
            elif cmd[0] == b"DEL":
                members[cmd[1]] = set()
            elif cmd[0] == b"SADD" and cmd[1].startswith(tuple(self.heads)):
                self.by.setdefault(cmd[1], set()).update(cmd[2:])
            elif cmd[0] == b"SADD":
                members[cmd[1]] = set(cmd[2:])
        hashes = list(images.items())
        reads = [(b"HMGET", key, *want) for key, want in hashes]
        reads += [(b"SMEMBERS", key) for key in members]
        replies = self.reader.read(reads)
        for (key, want), got in zip(hashes, replies):
            self.fields[key].update(want)
            self.present[key] += sum(held is not None for held in got)
            for (field, image), held in zip(want.items(), got):
                if held is None:
                    self.found(vr.MISSING_FIELD, key, field, image, None,
                               [(b"HSET", key, field, image)])  # fmt: skip
                elif held != image:
                    self.found(vr.DIFFERENT_VALUE, key, field, image, held,
                               [(b"HSET", key, field, image)])  # fmt: skip
        for (key, kids), got in zip(members.items(), replies[len(hashes) :]):
            self._set(key, kids, set(got))

    def _set(self, key: bytes, kids: set[bytes], held: set[bytes]) -> None:
        if kids:
            self.sets.add(key)
        if held != kids:
            repair: list[Command] = [(b"DEL", key)]
            if kids:
                repair.append((b"SADD", key, *sorted(kids)))
            self.found(vr.DIFFERENT_VALUE, key, None, _shown(kids), _shown(held), repair)

    def rest(self) -> None:
        """What Redis holds beyond the rows compared: stale images, stale SETs."""
        client: Any = self.reader.client
        by = list(self.by.items())
        for start in range(0, len(by), 1000):  # a pipelined read per thousand SETs
            part = by[start : start + 1000]
            for (key, kids), got in zip(
                part, self.reader.read([(b"SMEMBERS", k) for k, _ in part])
            ):
                self._set(key, kids, set(got))
        for key, fields in self.fields.items():
            if client.hlen(key) <= self.present[key]:
                continue  # every field Redis holds is one compared
            for field, _ in client.hscan_iter(key, count=1000):
                if field not in fields:
                    self.found(vr.EXTRA_FIELD, key, field, None, None, [(b"HDEL", key, field)])
        heads = [members_prefix(lv) for lv in self.levels[1:]] + self.heads
        for head in heads:
            for key in client.scan_iter(match=glob_escape(head) + "*", count=1000):
                if key not in self.sets:
                    self.found(vr.STALE, key, None, None, None, [(b"DEL", key)])


def _shown(members: set[bytes]) -> bytes:
    return b" ".join(sorted(members))
